"""Files: expand globs without following symlinks, hash what they match, trust the stat cache.

Facts are ``file:<absolute path>`` with keys ``sha256``, ``size``, ``mode``
(in FactBlocks: one for the files read, one for those the stat cache vouches for;
a byte of a path that is not UTF-8 is stored as ``\\xNN``, as it is in the stat cache);
a symlink has only ``symlink`` (its target, never followed); a FIFO, socket or
device has ``type`` and ``mode`` and is never opened. A set declared with
``content = true`` also gets ``content``: the text (invalid UTF-8 as
backslash escapes) of the very read that was hashed, with the set's
``format`` in its provenance, for files up to CONTENT_MAX bytes; a larger
file is a CollectionError for ``content`` alone.

Globs: ``**`` matches zero or more directories (``dir/**`` every file below
dir); ``*``, ``?`` and ``[...]`` stay within one name and match a leading dot
too, since a changed ``.env`` is as much a change as any other file. The
fixed leading directory of a pattern may be a symlink (the user named it);
below it no symlink is ever followed.

Limits: a regular file over the set's ``max_size``, or a sparse one (at
least SPARSE_MIN bytes, under half of them allocated, and a hole the
filesystem reports), is never read: its ``sha256`` is a note, "not hashed:
larger than 1 GiB (mtime ..., inode ...)" or "not hashed: sparse (mtime ...)", that
changes when its size, mtime or inode does, so a rewritten or replaced image
still shows as changed. A walk never enters /proc, /sys or /dev below its
fixed directory, nor, with ``one_file_system`` (the default), /run or a
directory on another filesystem than that fixed directory.

Blind spots: a directory that cannot be listed yields a CollectionError whose
subject is ``file:<dir>/``, meaning every file below that directory (the store
must read such a subject as a prefix); a file that cannot be read yields one
for ``file:<path>``. A pattern that matches nothing is a ``files:<set>``
error, which covers no file, so files that disappeared read as removed. A set
whose globs match more than its ``max_files`` is not recorded at all: one
error, ``file:<folder all its globs share>/``, keeps its files' last values.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from fnmatch import translate
from typing import NamedTuple

from drift.config import MAX_SIZE, SIZE_UNITS, FileSpec
from drift.facts import CachedStat, CollectContext, CollectionError, Fact, FactBlock, storable

CHUNK = 1 << 20
# os.read into a fresh bytes object measured faster here than os.readv into a
# reused bytearray (0.23 s vs 0.36 s for 256 MiB), so plain reads it is.

RACY_WINDOW_NS = 50_000_000
# A file changed within this window before we looked at it may change again
# without its mtime/ctime moving (timestamps tick coarsely, 1-10 ms), the
# "racy git" problem. Such a file is read twice and must hash the same both
# times, and it is not put in the stat cache, so the next run reads it again.

_MIB = 1 << 20

FILE_KEYS = ("sha256", "size", "mode")
# What a regular file records, in this order.

CONTENT_MAX = 1 << 20
# Kept content is a config file, diffed key by key; past 1 MiB it is data,
# and every version of it would sit in the database.

_MAX_READS = 3

SPARSE_MIN = 64 << 20
# A sparse file smaller than this is read whole anyway: its holes read as
# zeros from memory, in well under a second. Only past it is a file with
# under half its bytes allocated (st_blocks) asked for a hole (SEEK_HOLE):
# compression (ZFS, btrfs) also leaves fewer blocks than bytes, with no hole.

_TOO_LARGE = ""
# The digest slot of a listed file whose lstat is over max_size: it is never
# opened. No sha256 is empty, so this cannot be mistaken for one.

HASH_THREADS = 2
# Threads that read files, counting this one; 1 reads everything in turn.
_LARGE = 1 << 20
# A file at least this large is read by the second thread, largest first:
# its hashing, outside the GIL, is what overlaps with the small files' Python.
_GLOB_CHARS = frozenset("*?[")
_PSEUDO = frozenset({"/proc", "/sys", "/dev"})
# Kernel views, not files: never walked into, only named as a glob's fixed part.
_OTHER_FILESYSTEM = _PSEUDO | {"/run"}
# What a walk that stays on one filesystem never enters either, even where
# /run is no mount of its own (a container's): sockets, pids and locks.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SPECIAL_TYPES = (
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "char-device"),
    (stat.S_ISBLK, "block-device"),
)


_Matcher = Callable[[str], object]
_Check = tuple[_Matcher, frozenset[int]]  # a component's matcher, the states a match reaches


def _ANY(name: str) -> bool:
    """The matcher of a bare ``*`` component (every name); plan() never calls it."""
    return True


_Listed = os.DirEntry[str] | os.stat_result
"""A match as the walk found it: its directory entry, or its lstat for a literal path."""


class _Expansion(NamedTuple):
    """What a walk found: (first pattern, entry) by path, unreadable places, empty patterns.

    `overflow` is the pattern that took the matches past the limit, if one
    did: the walk stopped there, so `matches` is incomplete.
    """

    matches: dict[str, tuple[str, _Listed]]
    errors: list[CollectionError]
    empty: list[str]
    overflow: str | None = None


class _TooMany(Exception):
    """A walk found more files than its set may hold."""


def expand_globs(
    patterns: Sequence[str], exclude: frozenset[str] = frozenset(), one_file_system: bool = True
) -> Iterator[tuple[str, str]]:
    """Yield (path, first pattern that matched) for each non-directory matched, sorted, once."""
    matches = _expand(patterns, exclude, one_file_system=one_file_system).matches
    for path in sorted(matches):
        yield path, matches[path][0]


def collect_files(
    spec: FileSpec, ctx: CollectContext
) -> Iterator[Fact | FactBlock | CollectionError]:
    """Facts for every file the spec's globs match, reusing cached hashes of unchanged files.

    The sha256, size and mode of regular files come in two FactBlocks, last:
    the files read this time, then those the stat cache vouches for. Every
    other fact (symlinks, special files, kept content) and every error come
    first, in path order.
    """
    sink = ctx.progress
    found = _expand(
        spec.paths,
        ctx.exclude,
        None if sink is None else lambda n: sink(f"listing files of set {spec.name}: {n:,} found"),
        one_file_system=spec.one_file_system,
        max_files=spec.max_files,
    )
    if found.overflow is not None:
        yield CollectionError(
            _set_subject(spec.paths),
            None,
            f"more than {spec.max_files:,} files match {found.overflow}: set {spec.name} "
            f"not recorded (max_files = {spec.max_files})",
        )
        return
    max_size = spec.max_size
    cache = ctx.file_cache
    # One provenance dict per pattern, shared by its files: the store
    # serialises each distinct dict once.
    provenances: dict[str, dict[str, str]] = {}
    content_provenances: dict[str, dict[str, str]] = {}
    read = FactBlock(FILE_KEYS, [], [[], [], []], [])
    unchanged = FactBlock(FILE_KEYS, [], [[], [], []], [])
    # The regular files the stat cache does not vouch for must be read.
    listed: list[tuple[str, str, str, os.stat_result | None, str | None]] = []
    jobs: list[tuple[str, int]] = []
    for path, (pattern, entry) in sorted(found.matches.items()):
        name = storable(path)  # the stored path: valid UTF-8 whatever the bytes
        # A progress line gives the bytes to read, which takes every size first.
        try:
            st = _lstat(entry, sink is not None or name in cache)
        except FileNotFoundError:
            continue  # deleted since it was listed
        except OSError as exc:
            yield CollectionError("file:" + name, None, f"cannot stat: {exc.strerror}")
            continue
        digest = None
        if st is None or stat.S_ISREG(st.st_mode):
            if st is None:
                jobs.append((path, _UNKNOWN))
            elif st.st_size > max_size:
                digest = _TOO_LARGE  # whatever the cache holds: max_size may have been lowered
            else:
                digest = _cached_digest(cache.get(name), st, spec.content)
                if digest is None:
                    jobs.append((path, st.st_size))
        listed.append((path, name, pattern, st, digest))
    report = None if ctx.progress is None or not jobs else _Progress(ctx.progress, spec.name, jobs)
    reads = _read_all(jobs, spec.content, report, max_size)
    reads.reverse()  # popped in path order, so each read is freed once it is facts
    for path, name, pattern, st, digest in listed:
        subject = "file:" + name
        provenance = provenances.get(pattern)
        if provenance is None:
            provenance = provenances[pattern] = {"glob": pattern, "set": spec.name}
        if st is None or stat.S_ISREG(st.st_mode):
            keep: dict[str, str] | None = None
            if spec.content:
                keep = content_provenances.get(pattern)
                if keep is None:
                    keep = content_provenances[pattern] = {**provenance, "format": spec.format}
            if digest == _TOO_LARGE:
                assert st is not None
                yield from _unhashed(read, subject, _larger_than(max_size), st, provenance, keep)
                continue
            if digest is not None:
                assert st is not None
                _add_file(unchanged, subject, digest, st, provenance)
                if keep is not None:
                    yield _too_large(subject, st.st_size)
                continue
            done = reads.pop()
            if done.kind == "unhashed":
                assert done.st is not None
                yield from _unhashed(read, subject, done.error, done.st, provenance, keep)
                continue
            if done.kind != "ok":
                yield from _read_facts(done, path, st, subject, provenance, keep)
                continue
            after = done.st
            assert after is not None
            if done.cacheable:
                ctx.cache_updates[name] = (
                    after.st_size,
                    after.st_mtime_ns,
                    after.st_ctime_ns,
                    after.st_ino,
                    done.digest,
                )
            _add_file(read, subject, done.digest, after, provenance)
            if keep is not None:
                if done.data is None:
                    yield _too_large(subject, after.st_size)
                else:
                    text = done.data.decode("utf-8", "backslashreplace")
                    yield Fact(subject, "content", text, keep)
        elif stat.S_ISLNK(st.st_mode):
            yield from _symlink(path, subject, provenance)
        else:
            # Never opened: opening a device can have side effects (a watchdog
            # starts ticking, a tape rewinds) and a FIFO would block.
            yield Fact(subject, "type", _special_type(st.st_mode), provenance)
            yield Fact(subject, "mode", _mode(st), provenance)
    yield from found.errors
    for pattern in found.empty:
        yield CollectionError(f"files:{spec.name}", None, f"no file matches {pattern}")
    for block in (read, unchanged):
        if block.subjects:
            yield block


def _add_file(
    block: FactBlock, subject: str, digest: str, st: os.stat_result, provenance: dict[str, str]
) -> None:
    """Append a regular file's sha256, size and mode to a block of FILE_KEYS."""
    digests, sizes, modes = block.columns
    block.subjects.append(subject)
    digests.append(digest)
    sizes.append(str(st.st_size))
    modes.append(_mode(st))
    block.provenances.append(provenance)


def _unhashed(
    block: FactBlock,
    subject: str,
    reason: str,
    st: os.stat_result,
    provenance: dict[str, str],
    keep: dict[str, str] | None,
) -> Iterator[CollectionError]:
    """Add a file not read (too large, sparse) to `block`; its content, if kept, is a blind spot.

    Its sha256 says why and carries the mtime and inode, so the value moves
    when the file is rewritten or replaced, and stays put while it is not.
    """
    moment = datetime.fromtimestamp(st.st_mtime_ns // 1_000_000_000, UTC)
    mtime = f"{moment:%Y-%m-%d %H:%M:%S}.{st.st_mtime_ns % 1_000_000_000:09d} UTC"
    _add_file(
        block, subject, f"not hashed: {reason} (mtime {mtime}, inode {st.st_ino})", st, provenance
    )
    if keep is not None:
        if st.st_size > CONTENT_MAX:
            yield _too_large(subject, st.st_size)
        else:
            yield CollectionError(subject, "content", f"not read: {reason}")


def _larger_than(max_size: int) -> str:
    """Why a file over `max_size` was not read: "larger than 1 GiB"."""
    for unit, size in reversed(SIZE_UNITS.items()):
        if size > 1 and max_size % size == 0:
            return f"larger than {max_size // size:,} {unit}"
    return f"larger than {max_size:,} bytes"


def _unhashed_reason(fd: int, st: os.stat_result, max_size: int) -> str | None:
    """Why an opened regular file must not be read (too large, sparse), or None to read it."""
    if st.st_size > max_size:
        return _larger_than(max_size)
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


_UNKNOWN = -1
# The size of a file listed without an lstat: its fstat, once opened, tells.


def _lstat(entry: _Listed, needed: bool) -> os.stat_result | None:
    """The lstat of a listed entry; None for a regular file whose lstat is not `needed`.

    A file the stat cache cannot vouch for is read whatever its lstat says,
    and the fstat after opening it tells its size and mode, so unless a
    progress line wants its size first its lstat is skipped: 12k of them are
    0.08 s of a first record. The listing's file type (d_type) tells a
    regular file from the rest without a system call.
    """
    if isinstance(entry, os.stat_result):
        return entry
    if not needed and entry.is_file(follow_symlinks=False):
        return None
    return entry.stat(follow_symlinks=False)


def _cached_digest(cached: CachedStat | None, st: os.stat_result, content: bool) -> str | None:
    """The cached sha256 if the cache vouches for this lstat, else None (read the file)."""
    if cached is None or cached[:4] != (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino):
        return None
    # The cache holds a digest, not the text: a file whose content is kept is
    # read again (such files are few and small).
    if content and st.st_size <= CONTENT_MAX:
        return None
    return cached[4]


class _Progress:
    """Reports "hashing files of set NAME: N of M (X of Y MiB)" for the files a set must read.

    The verb comes first: a set's name right after "files" read as one ("files
    share: ..."). The name comes before the first digit, so the status line
    shows each set's first report at once.
    """

    def __init__(self, sink: Callable[[str], None], name: str, jobs: list[tuple[str, int]]) -> None:
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


# ---------------------------------------------------------------------------
# Reading one file


class _Read(NamedTuple):
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


_Opened = tuple[int, os.stat_result]
"""An open file descriptor and its fstat, taken just after opening."""


def _open(path: str) -> _Opened | _Read:
    """Open a listed file without following a symlink; a _Read says why it could not be."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return _Read("gone")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _Read("symlink")
        return _Read("unopenable", error=exc.strerror or str(exc))
    try:
        return fd, os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return _Read("unreadable", error=exc.strerror or str(exc))


def _read_opened(opened: _Opened, keep: bool, max_size: int = MAX_SIZE) -> _Read:
    """Hash an opened file, keeping its bytes if `keep`, and close it; never raises OSError.

    A file over `max_size` or sparse is not read ("unhashed", the reason in
    `error`). Touches no shared state, so hashing threads can run it side by side.
    """
    fd, st = opened
    try:
        if not stat.S_ISREG(st.st_mode):
            # O_NONBLOCK kept the open from hanging and we read nothing from it.
            return _Read("special", st=st)
        reason = _unhashed_reason(fd, st, max_size)
        if reason is not None:
            return _Read("unhashed", st=st, error=reason)
        result = _read_stable(fd, st, keep)
    except OSError as exc:
        return _Read("unreadable", error=exc.strerror or str(exc))
    finally:
        os.close(fd)
    if result is None:
        return _Read("changing")
    digest, after, cacheable, data = result
    return _Read("ok", digest, after, cacheable, data)


def _read_file(path: str, keep: bool, max_size: int = MAX_SIZE) -> _Read:
    """Open and hash one listed file (see _read_opened)."""
    opened = _open(path)
    return opened if isinstance(opened, _Read) else _read_opened(opened, keep, max_size)


def _read_facts(
    read: _Read,
    path: str,
    listed: os.stat_result | None,
    subject: str,
    provenance: dict[str, str],
    keep: dict[str, str] | None = None,
) -> Iterator[Fact | CollectionError]:
    """The facts of a read that did not simply work (gone, replaced, unreadable, changing)."""
    kind = read.kind
    assert kind != "ok"
    if kind == "gone":
        return  # deleted since it was listed: simply not there any more
    if kind == "symlink":
        # Replaced by a symlink since it was listed; record what is there now.
        yield from _symlink(path, subject, provenance)
    elif kind == "unopenable":
        # lstat works, so size and mode are known; a chmod 000 shows as a mode change.
        if listed is None:
            try:
                listed = os.lstat(path)
            except OSError:
                yield CollectionError(subject, None, f"cannot read: {read.error}")
                return
        yield Fact(subject, "size", str(listed.st_size), provenance)
        yield Fact(subject, "mode", _mode(listed), provenance)
        yield CollectionError(subject, "sha256", f"cannot read: {read.error}")
        if keep is not None:
            yield CollectionError(subject, "content", f"cannot read: {read.error}")
    elif kind == "special":
        assert read.st is not None
        yield Fact(subject, "type", _special_type(read.st.st_mode), provenance)
        yield Fact(subject, "mode", _mode(read.st), provenance)
    elif kind == "unreadable":
        yield CollectionError(subject, None, f"cannot read: {read.error}")
    else:
        yield CollectionError(subject, None, "changed while being read")


_MAX_HANDED = 64
# Large files the collecting thread opens and hands over at most at a time:
# each waits as an open descriptor.


def _read_all(
    jobs: list[tuple[str, int]], keep: bool, report: _Progress | None, max_size: int = MAX_SIZE
) -> list[_Read]:
    """Read every (path, size) job, keeping the bytes if `keep`; the results are in job order.

    A file over `max_size` or sparse is only opened and fstat'ed (see _read_opened).

    A size may be _UNKNOWN (listed without an lstat). os.read and sha256
    release the GIL, but the Python around each file holds it, so two threads
    each reading small files mostly wait for each other. What overlaps well
    is a large file's hashing with the small files' Python: this thread reads
    in path order and hands each large file to a second thread, those whose
    size is known first and largest first, the others once opened; when it
    runs out of small files it helps with the large.
    """
    results: list[_Read | None] = [None] * len(jobs)
    if HASH_THREADS < 2 or len(jobs) < 2 or len(os.sched_getaffinity(0)) < 2:
        for i, (path, size) in enumerate(jobs):
            read = results[i] = _read_file(path, keep, max_size)
            if report is not None:
                report.read(_read_size(read, size))
        return results  # type: ignore[return-value]  # every slot is filled

    import queue
    import threading

    handed: queue.SimpleQueue[tuple[int, _Opened | None] | None] = queue.SimpleQueue()
    large = sorted(
        (i for i, (_path, size) in enumerate(jobs) if size >= _LARGE), key=lambda i: -jobs[i][1]
    )
    for i in large:
        handed.put((i, None))  # None: not opened yet
    taken = set(large)
    done = [0, 0]  # files and bytes the other thread has read, for the progress line
    failed: list[BaseException] = []

    def read_handed(count: list[int] | None) -> None:
        while (item := handed.get()) is not None:
            i, opened = item
            path, size = jobs[i]
            read = results[i] = (
                _read_file(path, keep, max_size)
                if opened is None
                else _read_opened(opened, keep, max_size)
            )
            if count is not None:
                count[0] += 1
                count[1] += _read_size(read, size) or 0
            elif report is not None:
                report.read(_read_size(read, size), done)
        handed.put(None)  # the end, for the other thread too

    def run_helper() -> None:
        try:
            read_handed(done)
        except BaseException as exc:  # noqa: BLE001 - re-raised on this thread below
            failed.append(exc)

    helper = threading.Thread(target=run_helper, name="drift-hash", daemon=True)
    helper.start()
    try:
        for i, (path, size) in enumerate(jobs):
            if i in taken:
                continue
            opened = _open(path)
            if isinstance(opened, _Read):
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
                report.read(_read_size(read, size), done)
        handed.put(None)
        read_handed(None)  # help with the large files still unread
    except BaseException:
        # Interrupted (Ctrl-C): leave the other thread nothing more to read and
        # do not wait for the file it is on, which may be huge; it is a daemon.
        while True:
            try:
                item = handed.get_nowait()
            except queue.Empty:
                break
            if item is not None and item[1] is not None:
                os.close(item[1][0])
        handed.put(None)
        raise
    while helper.is_alive():
        helper.join(0.1)
        if report is not None:
            report.read(None, done)
    if failed:
        raise failed[0]
    return results  # type: ignore[return-value]  # every slot is filled


def _read_size(read: _Read, listed: int) -> int | None:
    """The bytes a read took, for the progress line: its size once opened, else as listed."""
    if read.st is not None:
        return read.st.st_size
    return None if listed == _UNKNOWN else listed


def _too_large(subject: str, size: int) -> CollectionError:
    return CollectionError(subject, "content", f"too large to keep content ({size} bytes)")


def _read_stable(
    fd: int, opened: os.stat_result, keep: bool = False
) -> tuple[str, os.stat_result, bool, bytes | None] | None:
    """Hash a regular file so that the digest is of one state the file really had.

    A read counts when fstat before and after agree and we read exactly the
    size; a recently changed ("racy") file must also hash the same twice.
    Returns (digest, fstat after, cacheable, bytes read if `keep` and at most
    CONTENT_MAX) or None when it kept changing.
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
        parts: list[bytes] | None = [] if keep and before.st_size <= CONTENT_MAX else None
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


def _symlink(
    path: str, subject: str, provenance: dict[str, str]
) -> Iterator[Fact | CollectionError]:
    try:
        target = os.readlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            # No longer a symlink: it was swapped again while we looked.
            yield CollectionError(subject, None, "changed while being read")
        else:
            yield CollectionError(subject, None, f"cannot read link: {exc.strerror}")
        return
    yield Fact(subject, "symlink", storable(target), provenance)


_MODES: dict[int, str] = {}


def _mode(st: os.stat_result) -> str:
    # Memoised: a tree has a handful of distinct modes and this runs per file.
    text = _MODES.get(st.st_mode)
    if text is None:
        text = _MODES[st.st_mode] = f"{stat.S_IMODE(st.st_mode):04o}"
    return text


def _special_type(mode: int) -> str:
    for test, name in _SPECIAL_TYPES:
        if test(mode):
            return name
    return "unknown"


# ---------------------------------------------------------------------------
# Expanding globs


class _Glob:
    """One pattern split into its fixed leading directory and per-component matchers.

    The matchers run as a small NFA over path components, so a directory is
    entered only if some state can still match below it. State i means
    "components [i:] are still to match"; a None matcher is ``**``.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        parts = os.path.abspath(pattern).split("/")[1:]
        fixed = 0
        while fixed < len(parts) and not _GLOB_CHARS.intersection(parts[fixed]):
            fixed += 1
        self.base = "/" + "/".join(parts[:fixed])
        rest: list[str] = []
        for part in parts[fixed:]:
            if part == "**" and rest and rest[-1] == "**":
                continue  # a/**/**/b is a/**/b
            rest.append(part)
        if rest and rest[-1] == "**":
            rest.append("*")  # a/** means every file below a
        self.literal = not rest
        self.matchers: list[_Matcher | None] = [
            None if part == "**" else _ANY if part == "*" else re.compile(translate(part)).match
            for part in rest
        ]
        self.end = len(rest)
        # closure[i]: the states reachable from i by letting each ** match zero directories.
        closure: list[frozenset[int]] = [frozenset([self.end])]
        for i in range(self.end - 1, -1, -1):
            extra = closure[0] if self.matchers[i] is None else frozenset()
            closure.insert(0, frozenset([i]) | extra)
        self.closure = closure

    def plan(self, states: frozenset[int]) -> tuple[frozenset[int], list[_Check]]:
        """For one directory's states: what any name leads to, and what a name matching each
        component adds. Computed once per directory, so each entry costs a regex match or two.
        """
        always: frozenset[int] = frozenset()
        checks: list[_Check] = []
        for i in sorted(states):
            if i == self.end:
                continue
            matcher = self.matchers[i]
            if matcher is None:
                always |= self.closure[i]  # ** swallows any directory name and stays
            elif matcher is _ANY:
                always |= self.closure[i + 1]  # a bare * matches every name: no regex to run
            else:
                checks.append((matcher, self.closure[i + 1]))
        return always, checks


def _expand(
    patterns: Sequence[str],
    exclude: frozenset[str],
    listed: Callable[[int], None] | None = None,
    *,
    one_file_system: bool = True,
    max_files: int | None = None,
) -> _Expansion:
    """Walk the patterns; `listed`, if given, hears how many files are found so far.

    Past `max_files` distinct files the walk stops and says which pattern it was on.
    """
    excluded = _exclusion_set(exclude)
    stops = _OTHER_FILESYSTEM if one_file_system else _PSEUDO
    limit = max_files if max_files is not None else float("inf")
    matches: dict[str, tuple[str, _Listed]] = {}
    errors: list[CollectionError] = []
    empty: list[str] = []
    for pattern in patterns:
        glob = _Glob(pattern)
        before = len(errors)
        try:
            found = (
                _walk_literal(glob, excluded, matches, errors)
                if glob.literal
                else _walk(glob, excluded, matches, errors, listed, stops, one_file_system, limit)
            )
        except _TooMany:
            return _Expansion(matches, errors, empty, pattern)
        if len(matches) > limit:
            return _Expansion(matches, errors, empty, pattern)
        if not found and len(errors) == before:
            empty.append(pattern)
    return _Expansion(matches, errors, empty)


def _set_subject(patterns: Sequence[str]) -> str:
    """``file:<dir>/`` for the folder every pattern's files are under: covers the whole set."""
    folders = []
    for pattern in patterns:
        glob = _Glob(pattern)
        folders.append(os.path.dirname(glob.base) if glob.literal else glob.base)
    common = os.path.commonpath(folders)
    return "file:" + storable(common if common.endswith("/") else common + "/")


def _exclusion_set(exclude: frozenset[str]) -> frozenset[str]:
    # Both the given path and where it really lives, so a symlinked state
    # directory does not let drift hash its own database.
    out: set[str] = set()
    for path in exclude:
        out.add(os.path.abspath(path))
        out.add(os.path.realpath(path))
    return frozenset(out)


def _device(entry: os.DirEntry[str]) -> int | None:
    """The device a listed directory is on."""
    try:
        return entry.stat(follow_symlinks=False).st_dev
    except OSError:
        return None  # gone: listing it finds nothing either


def _mount_points() -> frozenset[str] | None:
    """Where filesystems are mounted in this process's view, or None if /proc cannot say.

    Read once a walk, so only the directories named here cost an lstat to
    compare devices (1,900 of them were 3% of an unchanged record).
    """
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            text = f.read()
    except OSError:
        return None
    points = set()
    for line in text.splitlines():
        fields = line.split(b" ")
        if len(fields) > 4:
            # Space, tab, newline and backslash are written as octal escapes.
            point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), fields[4])
            points.add(os.fsdecode(point))
    return frozenset(points)


def _walk_literal(
    glob: _Glob,
    excluded: frozenset[str],
    matches: dict[str, tuple[str, _Listed]],
    errors: list[CollectionError],
) -> bool:
    path = glob.base
    head, tail = os.path.split(path)
    if path in excluded or os.path.join(os.path.realpath(head), tail) in excluded:
        return False
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        errors.append(
            CollectionError("file:" + storable(path), None, f"cannot stat: {exc.strerror}")
        )
        return False
    if stat.S_ISDIR(st.st_mode):
        return False  # a directory is not a file; "no file matches" tells the user
    matches.setdefault(path, (glob.pattern, st))
    return True


def _walk(
    glob: _Glob,
    excluded: frozenset[str],
    matches: dict[str, tuple[str, _Listed]],
    errors: list[CollectionError],
    listed: Callable[[int], None] | None = None,
    stops: frozenset[str] = _OTHER_FILESYSTEM,
    one_file_system: bool = True,
    limit: float = float("inf"),
) -> bool:
    """Walk from the fixed directory, never through a symlink; True if anything matched.

    Never enters a directory in `stops` (/proc ...) and, with
    `one_file_system`, one on another device than the fixed directory: a
    mount point. Raises _TooMany once `matches` holds more than `limit` files.
    """
    base = glob.base
    # The fixed part may pass through symlinks (the user named it); compare
    # the real location against the exclusions too.
    real_base = os.path.realpath(base)
    aliased = real_base != base
    # What a path below `base` is called below `real_base`: real_root + path[len(base):]
    # ("" for /, whose paths already start with a slash).
    real_root = real_base.rstrip("/")
    device: int | None = None
    mounts: frozenset[str] | None = None
    if one_file_system:
        try:
            device = os.stat(base).st_dev
        except OSError:
            pass  # listing it fails too, and says why
        mounts = _mount_points()
    end = glob.end
    pattern = glob.pattern
    found = False
    stack: list[tuple[str, frozenset[int]]] = [(base, glob.closure[0])]
    while stack:
        if listed is not None:
            listed(len(matches))
        if len(matches) > limit:
            raise _TooMany
        directory, states = stack.pop()
        prefix = directory if directory.endswith("/") else directory + "/"
        try:
            with os.scandir(directory) as entries:
                listing = list(entries)
        except (FileNotFoundError, NotADirectoryError):
            continue  # gone, or never a directory: nothing below it
        except OSError as exc:
            errors.append(
                CollectionError(
                    f"file:{storable(prefix)}", None, f"cannot list directory: {exc.strerror}"
                )
            )
            continue
        always, checks = glob.plan(states)
        if len(checks) == 1:
            # The common shapes (*.py, **/*.py) have one component to test.
            only, hit = checks[0][0], always | checks[0][1]
        else:
            only, hit = None, always
        for entry in listing:
            name = entry.name
            if only is not None:
                next_states = hit if only(name) else always
            else:
                next_states = always
                for matcher, reached in checks:
                    if matcher(name):
                        next_states = next_states | reached
            if not next_states:
                continue
            path = prefix + name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                if len(next_states) > 1 or end not in next_states:
                    if path in stops or (aliased and real_root + path[len(base) :] in stops):
                        continue
                    if (
                        device is not None
                        and (
                            mounts is None
                            or (real_root + path[len(base) :] if aliased else path) in mounts
                        )
                        and _device(entry) != device
                    ):
                        continue  # a mount point: another filesystem
                    stack.append((path, next_states))
                continue
            if end not in next_states:
                continue
            if path in excluded or (aliased and real_root + path[len(base) :] in excluded):
                continue
            found = True
            if path not in matches:
                matches[path] = (pattern, entry)  # lstat later, where needed (_lstat)
    return found
