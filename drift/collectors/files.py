"""Files: the facts of every file a [[files]] set's globs match, trusting the stat cache.

Facts are ``file:<absolute path>`` with keys ``sha256``, ``size``, ``mode``
(in FactBlocks: one for the files read, one for those the stat cache vouches for;
a byte of a path that is not UTF-8 is stored as ``\\xNN``, as it is in the stat cache);
a symlink has only ``symlink`` (its target, never followed); a FIFO, socket or
device has ``type`` and ``mode`` and is never opened. A set declared with
``content = true`` also gets ``content``: the text (invalid UTF-8 as
backslash escapes) of the very read that was hashed, with the set's
``format`` in its provenance, for files up to CONTENT_MAX bytes; a larger
file is a CollectionError for ``content`` alone.

Limits: a regular file over the set's ``max_size``, or a sparse one (see
`drift.collectors.hashing`), is never read: its ``sha256`` is a note, "not
hashed: larger than 1 GiB (mtime ..., inode ...)" or "not hashed: sparse
(mtime ...)", that changes when its size, mtime or inode does, so a rewritten
or replaced image still shows as changed.

Blind spots: a directory that cannot be listed yields a CollectionError whose
subject is ``file:<dir>/``, meaning every file below that directory (the store
must read such a subject as a prefix); a file that cannot be read yields one
for ``file:<path>``. A pattern that matches nothing is a ``files:<set>``
error, which covers no file, so files that disappeared read as removed. A set
whose globs match more than its ``max_files`` is not recorded at all: one
error, ``file:<folder all its globs share>/``, keeps its files' last values.

How globs are walked is `drift.collectors.walk`; how a file is read and
hashed, on two threads, is `drift.collectors.hashing`. This module turns
their findings into facts, asking the stat cache shard by shard which files
it vouches for. It stays one module past 500 lines: listing, vouching and
making facts share one entry shape and one pair of blocks.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime

from drift.collectors.hashing import (
    UNKNOWN_SIZE,
    HashProgress,
    Job,
    Read,
    larger_than,
    read_all,
)
from drift.collectors.walk import Expansion, Listed, expand, set_subject
from drift.config import FileSpec
from drift.facts import (
    CachedStat,
    CollectContext,
    CollectionError,
    Fact,
    FactBlock,
    StatCache,
    file_times,
    storable,
)
from drift.rooted import HOST, Files

FILE_KEYS = ("sha256", "size", "mode")
# What a regular file records, in this order.

CONTENT_MAX = 1 << 20
# Kept content is a config file, diffed key by key; past 1 MiB it is data,
# and every version of it would sit in the database.

_TOO_LARGE = ""
# The digest slot of a listed file whose lstat is over max_size: it is never
# opened. No sha256 is empty, so this cannot be mistaken for one.

_SPECIAL_TYPES = (
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "char-device"),
    (stat.S_ISBLK, "block-device"),
)

_Entry = tuple[str, str, str, os.stat_result | None, str | None]
"""A listed file: (path, stored name, first pattern that matched, lstat or None, digest).

The lstat is None for a regular file read without one (see _lstat); the
digest is the stat cache's sha256, _TOO_LARGE, or None when the file must be read.
A file the stat cache vouches for is no entry: it goes straight into the
block of unchanged files (unless its set keeps content, which it then lacks).
"""

_Looked = str | os.stat_result | OSError | None
"""What the stat cache pass learned of a listed file: the sha256 it vouches for,
the file's lstat (the cache holds it, but does not vouch), why it could not be
lstat'ed, or nothing (the cache does not hold it)."""

Item = Fact | FactBlock | CollectionError


def collect_files(spec: FileSpec, ctx: CollectContext) -> Iterator[Item]:
    """Facts for every file the spec's globs match, reusing cached hashes of unchanged files.

    The sha256, size and mode of regular files come in two FactBlocks, last:
    the files read this time, then those the stat cache vouches for. Every
    other fact (symlinks, special files, kept content) and every error come
    first, in path order.
    """
    found = _expand_set(spec, ctx)
    if found.overflow is not None:
        yield CollectionError(
            set_subject(spec.paths),
            None,
            f"more than {spec.max_files:,} files match {found.overflow}: set {spec.name} "
            f"not recorded (max_files = {spec.max_files})",
        )
        return
    facts = _SetFacts(spec, ctx.cache_updates, ctx.files)
    cache = ctx.file_cache
    # A progress line gives the bytes to read, which takes every size first.
    entries, jobs, unstatable = _list_files(
        found,
        spec,
        cache if isinstance(cache, StatCache) else StatCache(cache),
        ctx.progress is not None,
        facts,
    )
    yield from unstatable
    sink = ctx.progress
    report = None if sink is None or not jobs else HashProgress(sink, spec.name, jobs)
    reads = read_all(jobs, CONTENT_MAX if spec.content else None, report, spec.max_size, ctx.files)
    yield from facts.add_all(entries, reads)
    yield from found.errors
    for pattern in found.empty:
        yield CollectionError(f"files:{spec.name}", None, _no_match(pattern))
    for block in (facts.read, facts.unchanged):
        if block.subjects:
            yield block


def _expand_set(spec: FileSpec, ctx: CollectContext) -> Expansion:
    """Walk the set's globs, telling `ctx.progress` how many files are found so far."""
    sink = ctx.progress
    return expand(
        spec.paths,
        ctx.exclude,
        None if sink is None else lambda n: sink(f"listing files of set {spec.name}: {n:,} found"),
        one_file_system=spec.one_file_system,
        max_files=spec.max_files,
        files=ctx.files,
        skip=spec.exclude,
    )


def _list_files(
    found: Expansion, spec: FileSpec, cache: StatCache, lstat_all: bool, facts: _SetFacts
) -> tuple[list[_Entry], list[Job], list[CollectionError]]:
    """Each match in path order, the regular files that must be read, and what could not be stat'ed.

    The files the stat cache vouches for go into `facts.unchanged`, in path
    order; the regular files it does not vouch for must be read; so must one
    listed without an lstat. `lstat_all` takes every lstat anyway. The walk's
    matches are emptied on the way.
    """
    matches = found.matches
    paths = sorted(matches)
    listed = [matches[p] for p in paths]
    matches.clear()  # its table is as large as the block of a large tree
    named = found.named if found.naming is not None else None
    # The stored path, as the config names it (inside a container, its path there):
    # valid UTF-8 whatever the bytes.
    names = (
        [storable(p) for p in paths]
        if named is None
        else [storable(named(p, m[0])) for p, m in zip(paths, listed, strict=True)]
    )
    looked, sizes, modes = _look_up(paths, names, listed, cache, spec)
    max_size = spec.max_size
    entries: list[_Entry] = []
    jobs: list[Job] = []
    errors: list[CollectionError] = []
    block = facts.unchanged
    add_subject, add_provenance = block.subjects.append, block.provenances.append
    add_digest, add_size, add_mode = (column.append for column in block.columns)
    provenance = facts.provenance
    last: tuple[str, Listed] | None = None
    shared: dict[str, str] = {}
    for i, path in enumerate(paths):
        seen = looked[i]
        name = names[i]
        # Let each path go once used: the block's subjects grow as the paths go.
        paths[i] = names[i] = ""
        looked[i] = None
        pattern, entry = match = listed[i]
        if type(seen) is str:  # vouched for: straight into the block of unchanged files
            add_subject("file:" + name)
            add_digest(seen)
            add_size(sizes[i])
            add_mode(modes[i])
            if match is not last:  # a folder's matches share one tuple: one lookup a folder
                last, shared = match, provenance(pattern)
            add_provenance(shared)
            continue
        if seen is not None:
            facts.known.add(name)
        try:
            if isinstance(seen, OSError):
                raise seen
            st = seen if isinstance(seen, os.stat_result) else _lstat(entry, path, lstat_all)
        except FileNotFoundError:
            continue  # deleted since it was listed
        except OSError as exc:
            errors.append(CollectionError("file:" + name, None, f"cannot stat: {exc.strerror}"))
            continue
        digest = None
        if st is None:
            jobs.append((path, UNKNOWN_SIZE))
        elif stat.S_ISREG(st.st_mode):
            if st.st_size > max_size:
                digest = _TOO_LARGE  # whatever the cache holds: max_size may have been lowered
            elif seen is not None and spec.content and st.st_size > CONTENT_MAX:
                digest = _cached_digest(cache.get(name), st, True)  # vouched, content kept
            if digest is None:
                jobs.append((path, st.st_size))
        entries.append((path, name, pattern, st, digest))
    return entries, jobs, errors


def _look_up(
    paths: list[str],
    names: list[str],
    listed: list[tuple[str, Listed]],
    cache: StatCache,
    spec: FileSpec,
) -> tuple[list[_Looked], list[str], list[str]]:
    """What the stat cache says of each listed file, asked in the cache's order (shard by shard),
    and the stored size and mode of each file it vouches for.

    Only the files the cache holds are lstat'ed here. A regular file the
    cache vouches for gets its sha256, unless its set keeps content (then
    the file is read, or if too large for content, listed with its lstat).
    """
    looked: list[_Looked] = [None] * len(paths)
    sizes = [""] * len(paths)
    modes = [""] * len(paths)
    max_size, content = spec.max_size, spec.content
    texts: dict[int, str] = {}  # one string per distinct size: far fewer than files
    lstat, is_regular = os.lstat, stat.S_ISREG
    for indexes, shard in cache.shards(names):
        get = shard.get
        for i in indexes:
            cached = get(names[i])
            if cached is None:
                continue
            entry = listed[i][1]
            try:
                st = entry if isinstance(entry, os.stat_result) else lstat(paths[i])
            except OSError as exc:
                looked[i] = exc
                continue
            size = st.st_size
            if (
                content
                or not is_regular(st.st_mode)
                or size > max_size
                or cached[:4] != (size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            ):
                looked[i] = st
                continue
            looked[i] = cached[4]
            text = texts.get(size)
            if text is None:
                text = texts[size] = str(size)
            sizes[i] = text
            modes[i] = _mode(st)
    return looked, sizes, modes


class _SetFacts:
    """One set's listed files turned into facts: two blocks of regular files, and the rest.

    One provenance dict per pattern is shared by its files: the store
    serialises each distinct dict once.
    """

    def __init__(
        self, spec: FileSpec, cache_updates: dict[str, CachedStat], files: Files = HOST
    ) -> None:
        self.spec = spec
        self.cache_updates = cache_updates
        self.files = files
        self.read = FactBlock(FILE_KEYS, [], [[], [], []], [])
        self.unchanged = FactBlock(FILE_KEYS, [], [[], [], []], [])
        self.provenances: dict[str, dict[str, str]] = {}
        self.content_provenances: dict[str, dict[str, str]] = {}
        # Files the stat cache held but no longer vouches for: their reads carry the
        # file times (drift.facts.FILE_TIME_KEYS), which say when a change was made.
        # Not a file the cache never held: a first record's every file would have a
        # provenance of its own, where the pattern's one dict serves them all.
        self.known: set[str] = set()

    def add_all(self, entries: list[_Entry], reads: list[Read]) -> Iterator[Fact | CollectionError]:
        """Add every listed file, with the reads of those that were read (in the same order)."""
        reads.reverse()  # popped in path order, so each read is freed once it is facts
        unchanged = self.unchanged
        content = self.spec.content
        for path, name, pattern, st, digest in entries:
            subject = "file:" + name
            provenance = self.provenance(pattern)
            if st is not None and not stat.S_ISREG(st.st_mode):
                yield from _not_regular(path, subject, st, provenance, self.files)
            elif digest is None:
                yield from self._add_read(path, name, st, reads.pop(), pattern)
            elif digest == _TOO_LARGE:
                assert st is not None
                reason = larger_than(self.spec.max_size)
                yield from _unhashed(self.read, subject, reason, st, provenance, content)
            else:
                assert st is not None
                _add_file(unchanged, subject, digest, st, provenance)
                if content:
                    yield _too_large(subject, st.st_size)  # a cached file with content is large

    def provenance(self, pattern: str) -> dict[str, str]:
        """The provenance of the files a pattern matched first: one dict for all of them."""
        provenance = self.provenances.get(pattern)
        if provenance is None:
            provenance = self.provenances[pattern] = {"glob": pattern, "set": self.spec.name}
            if self.files.container is not None:
                provenance["container"] = self.files.container
        return provenance

    def _add_read(
        self, path: str, name: str, listed: os.stat_result | None, done: Read, pattern: str
    ) -> Iterator[Fact | CollectionError]:
        """Add a file that was read: to the block of reads and the stat cache, or as its errors."""
        subject = "file:" + name
        provenance = self.provenances[pattern]
        content = self.spec.content
        if done.kind == "unhashed":
            assert done.st is not None
            yield from _unhashed(self.read, subject, done.error, done.st, provenance, content)
            return
        if done.kind != "ok":
            yield from _read_facts(done, path, listed, subject, provenance, content, self.files)
            return
        after = done.st
        assert after is not None
        times = file_times(after) if name in self.known else None
        if times is not None:
            provenance = {**provenance, **times}
        if done.cacheable:
            self.cache_updates[name] = (
                after.st_size,
                after.st_mtime_ns,
                after.st_ctime_ns,
                after.st_ino,
                done.digest,
            )
        _add_file(self.read, subject, done.digest, after, provenance)
        if not content:
            return
        if done.data is None:
            yield _too_large(subject, after.st_size)
        else:
            text = done.data.decode("utf-8", "backslashreplace")
            kept = self._content_provenance(pattern)
            yield Fact(subject, "content", text, kept if times is None else {**kept, **times})

    def _content_provenance(self, pattern: str) -> dict[str, str]:
        """The provenance of kept content: the pattern's, with the set's format."""
        keep = self.content_provenances.get(pattern)
        if keep is None:
            keep = {**self.provenances[pattern], "format": self.spec.format}
            self.content_provenances[pattern] = keep
        return keep


def _not_regular(
    path: str, subject: str, st: os.stat_result, provenance: dict[str, str], files: Files
) -> Iterator[Fact | CollectionError]:
    """The facts of a symlink (its target) or a special file (its type and mode)."""
    if stat.S_ISLNK(st.st_mode):
        yield from _symlink(path, subject, provenance, files)
        return
    # Never opened: opening a device can have side effects (a watchdog
    # starts ticking, a tape rewinds) and a FIFO would block.
    yield Fact(subject, "type", _special_type(st.st_mode), provenance)
    yield Fact(subject, "mode", _mode(st), provenance)


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
    content: bool,
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
    if content:
        if st.st_size > CONTENT_MAX:
            yield _too_large(subject, st.st_size)
        else:
            yield CollectionError(subject, "content", f"not read: {reason}")


def _lstat(listed: Listed, path: str, needed: bool) -> os.stat_result | None:
    """The lstat of a listed file; None for a regular file whose lstat is not `needed`.

    A file the stat cache cannot vouch for is read whatever its lstat says,
    and the fstat after opening it tells its size and mode, so unless a
    progress line wants its size first its lstat is skipped: 12k of them are
    0.08 s of a first record. The listing's file type (d_type) tells a
    regular file from the rest without a system call.
    """
    if isinstance(listed, os.stat_result):
        return listed
    if not needed and listed:
        return None
    return os.lstat(path)


def _cached_digest(cached: CachedStat | None, st: os.stat_result, content: bool) -> str | None:
    """The cached sha256 if the cache vouches for this lstat, else None (read the file)."""
    if cached is None or cached[:4] != (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino):
        return None
    # The cache holds a digest, not the text: a file whose content is kept is
    # read again (such files are few and small).
    if content and st.st_size <= CONTENT_MAX:
        return None
    return cached[4]


def _read_facts(
    read: Read,
    path: str,
    listed: os.stat_result | None,
    subject: str,
    provenance: dict[str, str],
    content: bool = False,
    files: Files = HOST,
) -> Iterator[Fact | CollectionError]:
    """The facts of a read that did not simply work (gone, replaced, unreadable, changing)."""
    kind = read.kind
    assert kind != "ok"
    if kind == "gone":
        return  # deleted since it was listed: simply not there any more
    if kind == "symlink":
        # Replaced by a symlink since it was listed; record what is there now.
        yield from _symlink(path, subject, provenance, files)
    elif kind == "unopenable":
        yield from _unopenable(read, path, listed, subject, provenance, content, files)
    elif kind == "special":
        assert read.st is not None
        yield Fact(subject, "type", _special_type(read.st.st_mode), provenance)
        yield Fact(subject, "mode", _mode(read.st), provenance)
    elif kind == "unreadable":
        yield CollectionError(subject, None, f"cannot read: {read.error}")
    else:
        yield CollectionError(subject, None, "changed while being read")


def _unopenable(
    read: Read,
    path: str,
    listed: os.stat_result | None,
    subject: str,
    provenance: dict[str, str],
    content: bool,
    files: Files = HOST,
) -> Iterator[Fact | CollectionError]:
    """A file that cannot be opened: lstat works, so size and mode are known.

    A chmod 000 then shows as a mode change; its digest and content keep their last values.
    """
    if listed is None:
        try:
            listed = files.stat(files.inner_path(path), follow_symlinks=False)
        except OSError:
            yield CollectionError(subject, None, f"cannot read: {read.error}")
            return
    yield Fact(subject, "size", str(listed.st_size), provenance)
    yield Fact(subject, "mode", _mode(listed), provenance)
    yield CollectionError(subject, "sha256", f"cannot read: {read.error}")
    if content:
        yield CollectionError(subject, "content", f"cannot read: {read.error}")


def _too_large(subject: str, size: int) -> CollectionError:
    return CollectionError(subject, "content", f"too large to keep content ({size} bytes)")


def _symlink(
    path: str, subject: str, provenance: dict[str, str], files: Files = HOST
) -> Iterator[Fact | CollectionError]:
    try:
        target = files.readlink(files.inner_path(path))
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


def _no_match(pattern: str) -> str:
    """Why a pattern matched nothing, with the fix when it names a folder rather than files."""
    if os.path.isdir(pattern):
        inside = os.path.join(pattern, "**")
        return f"no file matches {pattern}: it is a folder; use {inside} for the files in it"
    return f"no file matches {pattern}"
