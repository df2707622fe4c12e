"""Reading the paths a config names: on the host, or inside a container's root seen from the host.

A container's files are reachable from the host under ``/proc/PID/root``, but
the kernel resolves a symlink met there against the host's root: inside the
container ``/opt/serve/current -> /opt/serve/v2`` names the container's v2,
while opened from the host as ``/proc/PID/root/opt/serve/current/decode.sh``
it leads to the host's /opt/serve/v2, and ``..`` can climb the same way.
`RootedFiles` never lets the kernel follow a link below the root: it walks a
path one name at a time from a descriptor of the root (openat with
O_NOFOLLOW), reads each link itself and goes on inside the root, as the
container's own processes would. `Files` is the host's file system behind the
same methods, so a collector reads through one interface either way.
"""

from __future__ import annotations

import errno
import os
import stat

from drift.small_files import Unread, read_head, read_small

MAX_LINKS = 40
"""Symlinks followed in one path before giving up, as the kernel does (ELOOP)."""

_DIRECTORY = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_LOOK = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class Files:
    """The host's own file system: paths are opened as they are named.

    `root` is "" and `container` None here; `RootedFiles` reads inside a root instead.
    """

    root = ""
    container: str | None = None
    mountinfo = "/proc/self/mountinfo"  # where the mount points under `root` are listed

    def open(self, path: str, flags: int) -> int:
        """A descriptor of `path`, as os.open gives (O_NOFOLLOW: the last name is not followed)."""
        return os.open(path, flags)

    def stat(self, path: str, *, follow_symlinks: bool = True) -> os.stat_result:
        """The stat (or with follow_symlinks False, the lstat) of `path`."""
        return os.stat(path, follow_symlinks=follow_symlinks)

    def readlink(self, path: str) -> str:
        """The target of the symlink `path`, as written in it."""
        return os.readlink(path)

    def realpath(self, path: str) -> str:
        """`path` with every symlink resolved; a part that does not exist is kept as named."""
        return os.path.realpath(path)

    def host_path(self, path: str, *, follow_last: bool = True) -> str:
        """Where the host opens `path`; raises OSError when a folder on the way cannot be walked."""
        return path

    def inner_path(self, host: str) -> str:
        """The path a host path found below `host_path` has in the config's terms."""
        return host

    def exists(self, path: str) -> bool:
        """True if `path` (its symlinks followed) exists."""
        try:
            self.stat(path)
        except (OSError, ValueError):
            return False
        return True

    def isfile(self, path: str) -> bool:
        """True if `path` (its symlinks followed) is a regular file."""
        try:
            return stat.S_ISREG(self.stat(path).st_mode)
        except (OSError, ValueError):
            return False

    def islink(self, path: str) -> bool:
        """True if `path` itself is a symlink."""
        try:
            return stat.S_ISLNK(self.stat(path, follow_symlinks=False).st_mode)
        except (OSError, ValueError):
            return False

    def read_regular(self, path: str, limit: int) -> bytes | None:
        """A file's bytes if it is a regular file of at most `limit` bytes (never a FIFO,
        device or symlink), else None (`drift.small_files.read_small`).
        """
        try:
            return read_small(path, limit, files=self)
        except Unread:
            return None

    def first_line(self, path: str, limit: int) -> bytes | None:
        """At most `limit` bytes of the first line of a regular file (without its newline),
        or None."""
        try:
            return read_head(path, limit, b"\n", follow=True, files=self)
        except Unread:
            return None


HOST = Files()
"""The host's file system."""


class RootedFiles(Files):
    """A file system below `root` (``/proc/PID/root``), every symlink resolved inside it.

    Paths are named as the container names them (``/opt/serve/decode.sh``).
    `container` is its name, for messages; `mountinfo` lists its mounts as
    it sees them (``/proc/PID/mountinfo``), when known.
    """

    def __init__(self, root: str, container: str, mountinfo: str | None = None) -> None:
        self.root = root.rstrip("/") or "/"
        self.container = container
        self.mountinfo = mountinfo or ""

    def open(self, path: str, flags: int) -> int:
        folder, _names, name = self._lookup(path, follow_last=not flags & os.O_NOFOLLOW)
        try:
            # O_NOFOLLOW whatever was asked: the last name was resolved above, and one
            # swapped for a link since must fail, not lead out of the root.
            return os.open(name, flags | os.O_NOFOLLOW, dir_fd=folder)
        finally:
            os.close(folder)

    def stat(self, path: str, *, follow_symlinks: bool = True) -> os.stat_result:
        folder, _names, name = self._lookup(path, follow_last=follow_symlinks)
        try:
            return os.stat(name, dir_fd=folder, follow_symlinks=False)
        finally:
            os.close(folder)

    def readlink(self, path: str) -> str:
        folder, _names, name = self._lookup(path, follow_last=False)
        try:
            return os.readlink(name, dir_fd=folder)
        finally:
            os.close(folder)

    def realpath(self, path: str) -> str:
        try:
            folder, names, name = self._lookup(path, follow_last=True)
        except (OSError, ValueError):
            return os.path.normpath(path)
        os.close(folder)
        return "/" + "/".join([*names, name] if name != "." else names)

    def host_path(self, path: str, *, follow_last: bool = True) -> str:
        folder, names, name = self._lookup(path, follow_last=follow_last)
        os.close(folder)
        inner = "/".join([*names, name] if name != "." else names)
        return f"{self.root}/{inner}" if inner else self.root

    def inner_path(self, host: str) -> str:
        if host == self.root:
            return "/"
        if host.startswith(self.root + "/"):
            return host[len(self.root) :]
        return host

    def _lookup(self, path: str, follow_last: bool) -> tuple[int, list[str], str]:
        """(a descriptor of the folder holding `path`'s last name, that folder's names from
        the root, the last name), every symlink on the way resolved inside the root.

        The last name is "." when the path names a folder by ".." or is the
        root. With `follow_last`, a last name that is a symlink is resolved
        too. The caller closes the descriptor. Never asks the kernel to follow
        a link or to go up: ".." is taken off the names walked, and stops at
        the root.
        """
        if "\x00" in path:
            raise ValueError("embedded null byte")
        todo = _parts(path)
        names: list[str] = []
        folders = [os.open(self.root, _DIRECTORY)]
        links = 0
        try:
            while todo:
                name = todo.pop()
                if name == ".":
                    continue  # only makes the name before it a folder that must be walked
                if name == "..":
                    if names:
                        names.pop()
                        os.close(folders.pop())
                    continue
                if not todo and not follow_last:
                    return folders.pop(), names, name
                fd = os.open(name, _LOOK, dir_fd=folders[-1])
                mode = os.fstat(fd).st_mode
                if stat.S_ISLNK(mode):
                    os.close(fd)
                    links += 1
                    if links > MAX_LINKS:
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
                    target = os.readlink(name, dir_fd=folders[-1])
                    if target.startswith("/"):
                        while names:  # an absolute link starts again at the root, this one
                            names.pop()
                            os.close(folders.pop())
                    todo.extend(_parts(target))
                    continue
                if not todo:
                    os.close(fd)
                    return folders.pop(), names, name
                if not stat.S_ISDIR(mode):
                    os.close(fd)
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
                folders.append(fd)
                names.append(name)
            return folders.pop(), names, "."
        finally:
            for fd in folders:
                os.close(fd)


def _parts(path: str) -> list[str]:
    """The names of `path`, last first (a stack). A trailing slash is a last ".", so the name
    before it must be a folder, as for the kernel.
    """
    parts = [part for part in path.split("/") if part]
    if parts and path.endswith("/"):
        parts.append(".")
    parts.reverse()
    return parts
