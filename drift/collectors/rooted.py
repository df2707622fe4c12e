"""Reading a file the way a process whose / is elsewhere (a container's) would see it.

drift on the host reads a container's files through ``/proc/PID/root``. The
kernel follows an absolute symlink met on that road from the host's /, not
the container's, so a link such as ``/etc/default/app -> /opt/app/env``
would be read from the host. `resolve_in_root` follows links itself, inside
the root, as systemd in the container follows them.
"""

from __future__ import annotations

import os
import stat

MAX_SYMLINKS = 40  # as the kernel allows in one lookup
NO_SUCH_FILE = "no such file"


def read_in_root(root: str, path: str, limit: int) -> tuple[bytes | None, str]:
    """The bytes of regular file `path` as a process whose / is `root` sees it, or why not.

    Symlinks are followed as systemd follows them, but inside `root`: an
    absolute link in a container's file points into the container, not the
    host. Nothing but a regular file is read (a FIFO would block).
    """
    resolved = resolve_in_root(root, path)
    if resolved is None:
        return None, "too many levels of symbolic links"
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if resolved != path:  # every link is resolved already: one swapped in since is refused
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(resolved, flags)
    except FileNotFoundError:
        return None, NO_SUCH_FILE
    except OSError as exc:
        return None, f"cannot open: {exc.strerror or exc}"
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "not a regular file"
        if info.st_size > limit:
            return None, f"larger than {limit:,} bytes, not read"
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            return None, f"cannot read: {exc.strerror or exc}"
    if len(data) > limit:
        return None, f"larger than {limit:,} bytes, not read"
    return data, ""


def resolve_in_root(root: str, path: str) -> str | None:
    """`path` with every symlink resolved inside `root`, as a host path; None on a link loop."""
    if root in ("", "/"):
        return path
    base = root.rstrip("/")
    parts = [p for p in path.split("/") if p]
    done: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = base + "/" + "/".join([*done, part])
        try:
            target = os.readlink(candidate)
        except OSError:
            done.append(part)  # not a link (or not there: the open will say)
            continue
        links += 1
        if links > MAX_SYMLINKS:
            return None
        if target.startswith("/"):
            done = []
        parts = [p for p in target.split("/") if p] + parts
    return base + "/" + "/".join(done)
