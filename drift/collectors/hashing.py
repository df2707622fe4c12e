"""Reading listed files: hash each one as a state it really had, on two threads where it pays.

A file is opened without following a symlink and without blocking (a FIFO
swapped in is never read), hashed in 1 MiB reads up to the size its fstat
gave, and the read counts only if fstat before and after agree; a file
changed within RACY_WINDOW_NS must also hash the same twice and is not
vouched for in the stat cache. A regular file over `max_size`, or a sparse
one, is only opened and fstat'ed: its Read says why it was not read.

Nothing here makes facts: a Read says what happened to one file, and the
files collector turns it into facts, errors and stat-cache entries.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from drift.config import MAX_SIZE, SIZE_UNITS
from drift.rooted import HOST, Files

if TYPE_CHECKING:
    import queue

CHUNK = 1 << 20
# os.read into a fresh bytes object measured faster here than os.readv into a
# reused bytearray (0.23 s vs 0.36 s for 256 MiB), so plain reads it is.

RACY_WINDOW_NS = 50_000_000
# A file changed within this window before we looked at it may change again
# without its mtime/ctime moving (timestamps tick coarsely, 1-10 ms), the
# "racy git" problem. Such a file is read twice and must hash the same both
# times, and it is not put in the stat cache, so the next run reads it again.

_MIB = 1 << 20

_MAX_READS = 3

SPARSE_MIN = 64 << 20
# A sparse file smaller than this is read whole anyway: its holes read as
# zeros from memory, in well under a second. Only past it is a file with
# under half its bytes allocated (st_blocks) asked for a hole (SEEK_HOLE):
# compression (ZFS, btrfs) also leaves fewer blocks than bytes, with no hole.

HASH_THREADS = 2
# Threads that read files, counting this one; 1 reads everything in turn.
_LARGE = 1 << 20
# A file at least this large is read by the second thread, largest first:
# its hashing, outside the GIL, is what overlaps with the small files' Python.
_MAX_HANDED = 64
# Large files the collecting thread opens and hands over at most at a time:
# each waits as an open descriptor.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

UNKNOWN_SIZE = -1
"""The size of a file listed without an lstat: its fstat, once opened, tells."""

Job = tuple[str, int]
"""A file to read: its path and its size as listed (or UNKNOWN_SIZE)."""


class Read(NamedTuple):
    """What reading one file found; built on a hashing thread, turned into facts by the caller.

    `kind` is "ok" (digest, stat after, cacheable, data), "gone" (deleted since
    listed), "symlink" (replaced by one), "unopenable" / "unreadable" (an
    OSError's text in `error`), "special" (swapped for a FIFO or device: its
    fstat in `st`), "unhashed" (too large or sparse to read: its fstat in
    `st`, why in `error`) or "changing" (kept changing while read).
    """

    kind: str
    digest: str = ""
    st: os.stat_result | None = None
    cacheable: bool = False
    data: bytes | None = None
    error: str = ""


class HashProgress:
    """Reports "hashing files of set NAME: N of M (X of Y MiB)" for the files a set must read.

    The verb comes first: a set's name right after "files" read as one ("files
    share: ..."). The name comes before the first digit, so the status line
    shows each set's first report at once.
    """

    def __init__(self, sink: Callable[[str], None], name: str, jobs: list[Job]) -> None:
        self.sink = sink
        self.name = name
        self.files, self.bytes = len(jobs), sum(max(size, 0) for _path, size in jobs)
        self.done_files = self.done_bytes = 0

    def read(self, size: int | None, elsewhere: list[int] | None = None) -> None:
        """Count a file of `size` read here (None: none), plus [files, bytes] read elsewhere."""
        if size is not None:
            self.done_files += 1
            self.done_bytes += size
        files, nbytes = self.done_files, self.done_bytes
        if elsewhere is not None:
            files, nbytes = files + elsewhere[0], nbytes + elsewhere[1]
        self.sink(
            f"hashing files of set {self.name}: {files:,} of {self.files:,} "
            f"({nbytes / _MIB:,.0f} of {self.bytes / _MIB:,.0f} MiB)"
        )


def larger_than(max_size: int) -> str:
    """Why a file over `max_size` was not read: "larger than 1 GiB"."""
    for unit, size in reversed(SIZE_UNITS.items()):
        if size > 1 and max_size % size == 0:
            return f"larger than {max_size // size:,} {unit}"
    return f"larger than {max_size:,} bytes"


def read_all(
    jobs: list[Job],
    keep: int | None,
    report: HashProgress | None,
    max_size: int = MAX_SIZE,
    files: Files = HOST,
) -> list[Read]:
    """Read every job; the results are in job order.

    The bytes of a file of at most `keep` bytes come back too (None: of none).
    A file over `max_size` or sparse is only opened and fstat'ed (see
    _read_opened). Two threads share the work when there are two cores for
    them (see _TwoReaders). A job's path is where the walk found the file on
    the host; `files` opens it (in a container, by its path there, so a folder
    swapped for a link since the walk cannot lead out of the container).
    """
    if HASH_THREADS < 2 or len(jobs) < 2 or len(os.sched_getaffinity(0)) < 2:
        return _read_in_turn(jobs, keep, report, max_size, files)
    return _TwoReaders(jobs, keep, report, max_size, files).run()


def _read_in_turn(
    jobs: list[Job], keep: int | None, report: HashProgress | None, max_size: int, files: Files
) -> list[Read]:
    """Read every job on this thread, in order."""
    results: list[Read] = []
    for path, size in jobs:
        read = _read_file(path, keep, max_size, files)
        results.append(read)
        if report is not None:
            report.read(_read_size(read, size))
    return results


_Opened = tuple[int, os.stat_result]
"""An open file descriptor and its fstat, taken just after opening."""

_Handed = tuple[int, _Opened | None] | None
"""A job handed to the other thread: its index and the file if already open; None ends."""


class _TwoReaders:
    """One read_all on two threads: this one reads in path order, a helper takes large files.

    os.read and sha256 release the GIL, but the Python around each file holds
    it, so two threads each reading small files mostly wait for each other.
    What overlaps well is a large file's hashing with the small files'
    Python: this thread hands each large file to the helper, those whose
    size is known first and largest first, the others once opened (a size
    may be UNKNOWN_SIZE until then); when it runs out of small files it
    helps with the large.
    """

    def __init__(
        self,
        jobs: list[Job],
        keep: int | None,
        report: HashProgress | None,
        max_size: int,
        files: Files = HOST,
    ) -> None:
        import queue

        self.files = files
        self.jobs = jobs
        self.keep = keep
        self.report = report
        self.max_size = max_size
        self.results: list[Read | None] = [None] * len(jobs)
        self.handed: queue.SimpleQueue[_Handed] = queue.SimpleQueue()
        self.done = [0, 0]  # files and bytes the helper has read, for the progress line
        self.failed: list[BaseException] = []

    def run(self) -> list[Read]:
        """Read every job; re-raise here whatever the helper raised."""
        import threading

        jobs = self.jobs
        large = sorted(
            (i for i, (_path, size) in enumerate(jobs) if size >= _LARGE), key=lambda i: -jobs[i][1]
        )
        for i in large:
            self.handed.put((i, None))  # None: not opened yet
        helper = threading.Thread(target=self._help, name="drift-hash", daemon=True)
        helper.start()
        try:
            self._read_small(frozenset(large))
            self.handed.put(None)
            self._read_handed(None)  # help with the large files still unread
        except BaseException:
            self._abandon()
            raise
        while helper.is_alive():
            helper.join(0.1)
            if self.report is not None:
                self.report.read(None, self.done)
        if self.failed:
            raise self.failed[0]
        return self.results  # type: ignore[return-value]  # every slot is filled

    def _read_small(self, taken: frozenset[int]) -> None:
        """Read, in path order, every job not handed over; hand over large files once open."""
        results, handed, report = self.results, self.handed, self.report
        keep, max_size = self.keep, self.max_size
        for i, (path, size) in enumerate(self.jobs):
            if i in taken:
                continue
            opened = _open(path, self.files)
            if isinstance(opened, Read):
                read = results[i] = opened
            elif (
                opened[1].st_size >= _LARGE
                and stat.S_ISREG(opened[1].st_mode)
                and handed.qsize() < _MAX_HANDED
            ):
                handed.put((i, opened))
                continue
            else:
                read = results[i] = _read_opened(opened, keep, max_size)
            if report is not None:
                report.read(_read_size(read, size), self.done)

    def _read_handed(self, count: list[int] | None) -> None:
        """Read handed-over jobs until the end marker, which is put back for the other thread.

        The helper passes `count` (its [files, bytes] for the progress line);
        this thread, helping at the end, reports each file itself.
        """
        jobs, results, keep, max_size = self.jobs, self.results, self.keep, self.max_size
        while (item := self.handed.get()) is not None:
            i, opened = item
            path, size = jobs[i]
            read = results[i] = (
                _read_file(path, keep, max_size, self.files)
                if opened is None
                else _read_opened(opened, keep, max_size)
            )
            if count is not None:
                count[0] += 1
                count[1] += _read_size(read, size) or 0
            elif self.report is not None:
                self.report.read(_read_size(read, size), self.done)
        self.handed.put(None)  # the end, for the other thread too

    def _help(self) -> None:
        """The helper thread's work; what it raises is re-raised by run()."""
        try:
            self._read_handed(self.done)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
            self.failed.append(exc)

    def _abandon(self) -> None:
        """Interrupted (Ctrl-C): leave the helper nothing more to read, close what waits open.

        The file the helper is on may be huge; it is a daemon, not waited for.
        """
        import queue

        while True:
            try:
                item = self.handed.get_nowait()
            except queue.Empty:
                break
            if item is not None and item[1] is not None:
                os.close(item[1][0])
        self.handed.put(None)


def _read_size(read: Read, listed: int) -> int | None:
    """The bytes a read took, for the progress line: its size once opened, else as listed."""
    if read.st is not None:
        return read.st.st_size
    return None if listed == UNKNOWN_SIZE else listed


def _open(path: str, files: Files = HOST) -> _Opened | Read:
    """Open a listed file without following a symlink; a Read says why it could not be."""
    try:
        fd = files.open(files.inner_path(path), _OPEN_FLAGS)
    except FileNotFoundError:
        return Read("gone")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Read("symlink")
        return Read("unopenable", error=exc.strerror or str(exc))
    try:
        return fd, os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return Read("unreadable", error=exc.strerror or str(exc))


def _read_opened(opened: _Opened, keep: int | None, max_size: int = MAX_SIZE) -> Read:
    """Hash an opened file, keeping its bytes if at most `keep`, and close it; never raises OSError.

    A file over `max_size` or sparse is not read ("unhashed", the reason in
    `error`). Touches no shared state, so hashing threads can run it side by side.
    """
    fd, st = opened
    try:
        if not stat.S_ISREG(st.st_mode):
            # O_NONBLOCK kept the open from hanging and we read nothing from it.
            return Read("special", st=st)
        reason = _unhashed_reason(fd, st, max_size)
        if reason is not None:
            return Read("unhashed", st=st, error=reason)
        result = _read_stable(fd, st, keep)
    except OSError as exc:
        return Read("unreadable", error=exc.strerror or str(exc))
    finally:
        os.close(fd)
    if result is None:
        return Read("changing")
    digest, after, cacheable, data = result
    return Read("ok", digest, after, cacheable, data)


def _read_file(path: str, keep: int | None, max_size: int = MAX_SIZE, files: Files = HOST) -> Read:
    """Open and hash one listed file (see _read_opened)."""
    opened = _open(path, files)
    return opened if isinstance(opened, Read) else _read_opened(opened, keep, max_size)


def _unhashed_reason(fd: int, st: os.stat_result, max_size: int) -> str | None:
    """Why an opened regular file must not be read (too large, sparse), or None to read it."""
    if st.st_size > max_size:
        return larger_than(max_size)
    if st.st_size < SPARSE_MIN or st.st_blocks * 512 >= st.st_size // 2:
        return None
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        return None  # no SEEK_HOLE here: read it, as before
    if hole >= st.st_size:
        return None  # no hole, only fewer blocks: compressed, not sparse
    # Not how much is allocated: that moves as the filesystem trims preallocation,
    # with no write, and a note must stay put while the file does.
    return "sparse"


def _read_stable(
    fd: int, opened: os.stat_result, keep: int | None = None
) -> tuple[str, os.stat_result, bool, bytes | None] | None:
    """Hash a regular file so that the digest is of one state the file really had.

    A read counts when fstat before and after agree and we read exactly the
    size; a recently changed ("racy") file must also hash the same twice.
    Returns (digest, fstat after, cacheable, bytes read if at most `keep`)
    or None when it kept changing.
    """
    previous: tuple[str, os.stat_result] | None = None
    changes = 0
    for attempt in range(_MAX_READS):
        if attempt:
            os.lseek(fd, 0, os.SEEK_SET)
            before = os.fstat(fd)
        else:
            before = opened  # taken just after open; a second fstat here costs 3 us a file
        # The bytes come from the same read as the digest, so text and hash agree.
        parts: list[bytes] | None = [] if keep is not None and before.st_size <= keep else None
        digest, nread = _digest(fd, before.st_size, parts)
        after = os.fstat(fd)
        if nread != after.st_size or not _same(before, after):
            changes += 1
            if changes == 2:
                return None
            previous = None
            continue
        data = None if parts is None else b"".join(parts)
        if time.time_ns() - after.st_ctime_ns >= RACY_WINDOW_NS:
            return digest, after, True, data
        if previous is not None and previous[0] == digest and _same(previous[1], after):
            return digest, after, False, data
        previous = (digest, after)
    return None


def _digest(fd: int, size: int, parts: list[bytes] | None = None) -> tuple[str, int]:
    # Read no more than the size fstat gave: a file appended to faster than we
    # hash would otherwise keep us reading forever; growth shows in the fstat after.
    sha = hashlib.sha256()
    remaining = size
    while remaining > 0:
        chunk = os.read(fd, CHUNK if remaining > CHUNK else remaining)
        if not chunk:
            break
        sha.update(chunk)
        if parts is not None:
            parts.append(chunk)
        remaining -= len(chunk)
    return sha.hexdigest(), size - remaining


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (
        a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns and a.st_ctime_ns == b.st_ctime_ns
    )


def read_opened(fd: int, st: os.stat_result, max_size: int = MAX_SIZE) -> Read:
    """Hash a file already open (as `fd`, its fstat `st`), as read_all would; closes `fd`.

    For a file reached by a descriptor only, such as a process's mapped file
    through /proc/PID/map_files (`drift.collectors.libraries`).
    """
    return _read_opened((fd, st), None, max_size)
