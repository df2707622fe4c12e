"""The one way drift reads a small file someone else controls: bounded, never blocked.

A service's user owns its venv, an admin its unit files, anyone a
world-writable folder: a METADATA there may be a FIFO nobody writes (an open
that never returns), a link to /dev/zero (a read that never ends) or a
16 MB file with no blank line. `drift record` runs as root every minute, so
every small file a collector reads (a distribution's METADATA, PKG-INFO,
INSTALLER, RECORD, direct_url.json; pyvenv.cfg, ``*.pth`` and site.py; a
checkout's HEAD, refs and packed-refs; serve scripts and the files they
source; unit files, drop-ins and EnvironmentFiles, through
`drift.rooted.Files` inside a container too) goes through here, as the files
collector's own reads do:

- opened ``O_NONBLOCK`` (a FIFO opens at once) and, unless a link is
  expected there, ``O_NOFOLLOW`` (a planted link is refused, not read as root);
- read only if the descriptor is a regular file (fstat): never a FIFO,
  socket, device or folder;
- never more than `limit` bytes: `read_small` refuses a larger file whole,
  `read_head` reads its first `limit` bytes (or up to a separator) and
  stops, searching only what each chunk adds (linear, whatever the file);
- within `timeout` seconds, checked between chunks (a regular file's read
  cannot be interrupted, but a slow one stops at the next chunk).

A file that is not there is None: the caller decides what absence means. A
file there that cannot be read this way raises `Unread`, whose message names
the file and why: the caller makes it a blind spot, never an empty value.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from typing import Any, Protocol


class Opener(Protocol):
    """What opens a path: the host (os.open) or a container's root (`drift.rooted`)."""

    def open(self, path: str, flags: int) -> int: ...


class _Host:
    def open(self, path: str, flags: int) -> int:
        return os.open(path, flags)


HOST: Opener = _Host()

SMALL = 64 << 10
"""A marker file's bound (INSTALLER, direct_url.json, HEAD, a loose ref, pyvenv.cfg)."""
TIMEOUT = 2.0
"""Seconds one file's read may take."""
CHUNK = 64 << 10

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
_ABSENT = (errno.ENOENT, errno.ENOTDIR)


def file_type(mode: int) -> str:
    """What a file that is not regular is, in words ("a FIFO")."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


class Unread(Exception):
    """A file that is there but was not read: the message says which and why.

    `kind` says why in one word: "link" (a symlink where none is expected,
    or too many), "type" (not a regular file), "size", "slow", or "error"
    (the open or the read failed: `errno` is set).
    """

    def __init__(self, path: str, reason: str, kind: str, errno_: int | None = None) -> None:
        super().__init__(f"cannot read {path}: {reason}")
        self.path = path
        self.reason = reason
        self.kind = kind
        self.errno = errno_


def read_small(path: str, limit: int = SMALL, **how: Any) -> bytes | None:
    """The whole of a regular file of at most `limit` bytes; None if it is not there.

    Raises Unread for a file that is a link (unless ``follow=True``), not a
    regular file, larger than `limit`, unreadable, or slower than its time
    bound. `how` is `read_small_stat`'s keywords.
    """
    found = read_small_stat(path, limit, **how)
    return None if found is None else found[0]


def read_small_stat(
    path: str,
    limit: int = SMALL,
    *,
    follow: bool = False,
    files: Opener = HOST,
    timeout: float = TIMEOUT,
) -> tuple[bytes, os.stat_result] | None:
    """As `read_small`, with the file's stat taken after the read: the last write of the
    bytes read is no later than its ctime."""
    fd = _open(path, follow, files)
    if fd is None:
        return None
    try:
        if os.fstat(fd).st_size > limit:
            raise Unread(path, _larger(limit), "size")
        data = _read(fd, path, limit + 1, None, timeout)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew since, or a /proc file (whose size is 0)
        raise Unread(path, _larger(limit), "size")
    return data, after


def _larger(limit: int) -> str:
    return f"larger than {limit:,} bytes, not read"


def read_head(
    path: str,
    limit: int,
    until: bytes = b"",
    *,
    follow: bool = False,
    files: Opener = HOST,
    timeout: float = TIMEOUT,
) -> bytes | None:
    """A regular file's first bytes: up to the first `until` (excluded) if it comes within
    `limit` bytes, else the first `limit`. None if it is not there; Unread as `read_small`.
    """
    fd = _open(path, follow, files)
    if fd is None:
        return None
    try:
        data = _read(fd, path, limit, until or None, timeout)
    finally:
        os.close(fd)
    return data.split(until, 1)[0] if until else data


def as_text(data: bytes) -> str:
    """A file's bytes as text: invalid UTF-8 replaced, as every reader here decodes."""
    return data.decode("utf-8", "replace")


def _open(path: str, follow: bool, files: Opener) -> int | None:
    flags = _FLAGS if follow else _FLAGS | os.O_NOFOLLOW
    try:
        fd = files.open(path, flags)
    except OSError as exc:
        if exc.errno in _ABSENT:
            return None
        if exc.errno == errno.ELOOP:
            if follow:
                raise Unread(path, "too many levels of symbolic links", "link") from None
            raise Unread(path, "a symlink, where drift expects a file", "link") from None
        raise Unread(path, f"cannot open: {exc.strerror or exc}", "error", exc.errno) from None
    except ValueError:  # a NUL byte in the name
        raise Unread(path, "cannot open: not a path", "error") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise Unread(path, f"cannot open: {exc.strerror or exc}", "error", exc.errno) from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Unread(path, f"{file_type(mode)}, not a regular file", "type")
    return fd


def _read(fd: int, path: str, limit: int, until: bytes | None, timeout: float) -> bytes:
    """At most `limit` bytes of `fd`, stopping after `until`; each chunk searched once."""
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    got = 0
    tail = b""  # the end of what was read, where a separator cut by a chunk begins
    while got < limit:
        try:
            chunk = os.read(fd, min(CHUNK, limit - got))
        except OSError as exc:
            raise Unread(path, f"cannot read: {exc.strerror or exc}", "error", exc.errno) from None
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        if until is not None:
            if until in tail + chunk:
                break
            tail = (tail + chunk)[-(len(until) - 1) :] if len(until) > 1 else b""
        if time.monotonic() > deadline:
            raise Unread(path, f"read took over {timeout:g} s", "slow")
    return b"".join(chunks)
