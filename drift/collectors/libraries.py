"""Libraries: the executable files a service's process has mapped, as mapped and as on disk now.

Facts on ``service:NAME``: ``lib:PATH``, the SHA-256 of each file the process
has mapped executable (its program and every shared object, from
``/proc/PID/maps``; never data files, shared memory, devices, memfd or
anonymous memory), and ``lib_disk:PATH`` only while the file at PATH is no
longer the mapped one and holds other bytes: its SHA-256, or ``deleted``. A
library replaced under a running process (a rename over it, a package
upgrade) is thus told apart from one the process loaded anew.

Which file is which: the maps line's device and inode against a stat of the
path as the process sees it (``/proc/PID/root``, so a container's or a
private mount's files are the process's, not the host's). When they differ,
the mapped file is read through ``/proc/PID/map_files/START-END``, which
reaches it even when replaced or deleted, and only a difference of content
counts (overlayfs may show other inode numbers for one file). That link needs
root (CAP_SYS_ADMIN): without it the mapped bytes are a blind spot, never a
guess; the path's are still told when the kernel marks the mapped name deleted
(unlinked or renamed over), and are a blind spot too otherwise.

Cost: a file is hashed only when the stat cache does not vouch for it (size,
mtime, ctime and inode, keyed by its path, as `drift.collectors.files` keys
its files; the mapped file of a replaced path under ``PATH\\0mapped``), so an
unchanged process costs a read of its maps and a stat per file. A file under
a site folder (site-packages, dist-packages) gets the distribution whose
``*.dist-info/RECORD`` lists it as ``package`` in its provenance; the shared
objects each RECORD lists are kept in the stat cache beside it (under
``RECORD\\0so``), so a RECORD is read again only when it changes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import psutil

from drift.collectors.hashing import RACY_WINDOW_NS, HashProgress, Read, read_all, read_opened
from drift.collectors.packages import normalise
from drift.collectors.process import stat_fields
from drift.facts import CachedStat, CollectContext, CollectionError, Fact, storable
from drift.small_files import Unread, read_small

Result = Fact | CollectionError

RECORD_BYTES = 32 << 20  # a RECORD lists every file of its distribution: torch's is some 2 MB

MAX_LIBRARY = 64 << 30
"""A mapped file larger than this is recorded by its stat, not read (none is, in practice)."""

DELETED = "deleted"
"""``lib_disk:PATH`` of a mapped file whose path no longer exists on disk."""

_SKIPPED = ("/dev/", "/memfd:", "/SYSV", "/anon_hugepage", "/[")
_SITE_FOLDERS = frozenset({"site-packages", "dist-packages"})
_DELETED_SUFFIX = " (deleted)"
_MAPPED = "\0mapped"
_OWNED = "\0so"


class Mapping:
    """One file mapped executable: its path, the maps line's range, device and inode.

    `mapped_as` is the name the kernel gives a deleted file when drift names it
    by the path it was recorded under instead, and `digest` its content's SHA-256
    once read.
    """

    __slots__ = ("deleted", "dev", "digest", "inode", "mapped_as", "names", "path", "span")

    def __init__(
        self,
        path: str,
        span: str,
        dev: tuple[int, int],
        inode: int,
        deleted: bool,
        names: tuple[str, ...] = (),
    ):
        self.path = path
        self.span = span
        self.dev = dev
        self.inode = inode
        self.deleted = deleted
        self.names = names or (path,)  # what the maps line may mean, most likely first
        self.mapped_as: str | None = None
        self.digest: str | None = None


def _names(written: str) -> tuple[str, tuple[str, ...], bool]:
    """(the path, every path the name may be, whether the kernel marks it deleted) of a maps name.

    The kernel writes a newline in a name as ``\\012`` and leaves a backslash as
    it is, so ``\\012`` may be either; it adds `` (deleted)`` to an unlinked
    file's name, and a file may be named so. Which it is, is for the inode to
    say (`_Reader._settle`): these are the candidates.
    """
    decoded = written.replace("\\012", "\n")
    marked = decoded.endswith(_DELETED_SUFFIX)
    path = decoded[: -len(_DELETED_SUFFIX)] if marked else decoded
    raw = written[: -len(_DELETED_SUFFIX)] if marked else written
    return path, tuple(dict.fromkeys((path, raw, decoded, written))), marked


def mapped_files(maps: bytes) -> list[Mapping]:
    """The files a maps text shows mapped executable, once each, in path order."""
    found: dict[str, Mapping] = {}
    for line in maps.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6 or b"x" not in fields[1] or not fields[5].startswith(b"/"):
            continue
        inode = int(fields[4])
        written = os.fsdecode(fields[5])
        if inode == 0 or written.startswith(_SKIPPED):
            continue
        path, names, deleted = _names(written)
        if path in found:
            continue
        major, _, minor = fields[3].partition(b":")
        dev = (int(major, 16), int(minor, 16))
        found[path] = Mapping(path, fields[0].decode(), dev, inode, deleted, names)
    return [found[p] for p in sorted(found)]


def library_facts(subject: str, pid: int, ctx: CollectContext) -> list[Result]:
    """``lib:PATH`` and ``lib_disk:PATH`` of one live process; NoSuchProcess if it is gone."""
    source = f"{ctx.proc_root}/{pid}/maps"
    try:
        maps = read_maps(pid, ctx.proc_root)
    except OSError as exc:
        _alive(pid, ctx.proc_root)  # an exiting process refuses its maps too: read it again
        why = f"cannot read the maps of pid {pid}: {exc.strerror or exc}"
        return [CollectionError(subject, "lib:", why), CollectionError(subject, "lib_disk:", why)]
    if not maps:
        # A zombie (or a kernel thread) maps nothing: never read as every library unloaded.
        _alive(pid, ctx.proc_root)
    mappings = mapped_files(maps)
    for _attempt in range(MAX_REREADS):
        reader = _Reader(subject, pid, ctx, {"pid": pid, "source": source})
        out = reader.facts(mappings)
        # Its files are read through /proc/PID/root, which an exiting process takes with it:
        # what failed then says nothing of the files (a path "deleted", a read "gone").
        _alive(pid, ctx.proc_root)
        if not any(isinstance(r, CollectionError) for r in out):
            return out
        # A process that exec'd (a serve script becoming its server) or unmapped a file
        # while it was read has other mappings now: what failed was the old image's.
        try:
            again = mapped_files(read_maps(pid, ctx.proc_root))
        except OSError:
            return out
        if [_where(m) for m in again] == [_where(m) for m in mappings]:
            return out
        mappings = again
    return out


# How often a process whose mappings changed while they were read is read again.
MAX_REREADS = 3


def _where(m: Mapping) -> tuple[str, str, tuple[int, int], int]:
    """What names a mapping: its file, the range it is at, the file's device and inode."""
    return (m.path, m.span, m.dev, m.inode)


def read_maps(pid: int, proc_root: str) -> bytes:
    """/proc/PID/maps; NoSuchProcess when the process is gone, OSError when it may not be read."""
    try:
        with open(f"{proc_root}/{pid}/maps", "rb") as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        raise psutil.NoSuchProcess(pid) from None


def _alive(pid: int, proc_root: str) -> None:
    """Raise NoSuchProcess when the process is gone or a zombie."""
    fields = stat_fields(pid, proc_root)  # raises NoSuchProcess when gone
    if not fields or fields[0] == b"Z":
        raise psutil.NoSuchProcess(pid)


class _Reader:
    """One process's mapped files: which to hash, hashed through the stat cache, as facts."""

    def __init__(
        self, subject: str, pid: int, ctx: CollectContext, provenance: dict[str, Any]
    ) -> None:
        self.subject = subject
        self.pid = pid
        self.ctx = ctx
        self.root = f"{ctx.proc_root}/{pid}/root"
        self.provenance = provenance
        self.owners = Owners(ctx, self.root)
        self.stats: dict[str, os.stat_result | None] = {}  # each name's, as `_settle` found it

    def facts(self, mappings: list[Mapping]) -> list[Result]:
        """Every mapped file's facts, in path order; what cannot be read as errors."""
        settled = {m.path: m for m in map(self._settle, mappings)}
        mappings = self._named_as_recorded(sorted(settled.values(), key=lambda m: m.path))
        disk = {
            m.path: self.stats[m.path] if m.path in self.stats else self._disk_stat(m.path)
            for m in mappings
        }
        moved = {m.path for m in mappings if not _same_file(m, disk[m.path])}
        # The files the process sees at their paths (the mapped ones, mostly), hashed
        # together so the first record of a large process shows progress and uses two threads.
        digests = self._hash_paths([(m.path, st) for m in mappings if (st := disk[m.path])])
        out: list[Result] = []
        for m in mappings:
            out += self._facts_of(m, disk[m.path], digests.get(m.path), m.path in moved)
        return out

    def _settle(self, m: Mapping) -> Mapping:
        """The mapping under the name that leads to its inode, and deleted only if it is.

        A name that stats to the mapped device and inode is the file, whatever
        it reads like. Else the mapped file itself (map_files) says whether it
        is unlinked (no link left); only where that cannot be read (it needs
        root) does the kernel's `` (deleted)`` mark stand.
        """
        for name in m.names:
            st = self.stats[name] = self._disk_stat(name)
            if _same_file(m, st, marked=False):
                m.path, m.deleted = name, False
                return m
        try:
            links = os.stat(f"{self.ctx.proc_root}/{self.pid}/map_files/{m.span}").st_nlink
        except ProcessLookupError:
            raise psutil.NoSuchProcess(self.pid) from None
        except OSError:
            return m
        m.deleted = links == 0
        return m

    def _named_as_recorded(self, mappings: list[Mapping]) -> list[Mapping]:
        """A deleted mapped file whose folder was renamed first, named by its recorded path.

        pip moves a package's folder aside (``~ackage``) before it deletes it,
        and the kernel then names the mapped file by where it went: without
        this, the library the process still runs would read as removed and a
        file nobody installed as deleted. The process's recorded libraries say
        which path held these bytes; only a single recorded path no longer
        mapped by its own name is taken, else the kernel's name stands.
        """
        if self.ctx.recorded is None or not any(m.deleted for m in mappings):
            return mappings
        recorded = self.ctx.recorded(self.subject, "lib:")
        mapped = {storable(m.path) for m in mappings}
        unmapped: dict[str, list[str]] = {}
        for key, digest in recorded.items():
            path = key[len("lib:") :]
            if path not in mapped and storable(path) == path:
                unmapped.setdefault(digest, []).append(path)
        if not unmapped:
            return mappings
        for m in mappings:
            if not m.deleted or f"lib:{storable(m.path)}" in recorded:
                continue
            m.digest, _why = self._hash_mapped(m)
            paths = unmapped.pop(m.digest or "", [])
            if len(paths) == 1:
                m.mapped_as, m.path = m.path, paths[0]
        return sorted(mappings, key=lambda m: m.path)

    def _facts_of(
        self, m: Mapping, st: os.stat_result | None, on_disk: str | Read | None, moved: bool
    ) -> list[Result]:
        lib, lib_disk = f"lib:{storable(m.path)}", f"lib_disk:{storable(m.path)}"
        provenance = self._provenance(m.path)
        if m.mapped_as is not None:
            provenance = {**provenance, "mapped_as": storable(m.mapped_as)}
        if not moved:
            if isinstance(on_disk, str):
                return [Fact(self.subject, lib, on_disk, provenance)]
            return [self._unread(lib, m.path, on_disk)]
        disk_value = DELETED if st is None else on_disk
        mapped, why = (m.digest, "") if m.digest is not None else self._hash_mapped(m)
        out: list[Result] = []
        if mapped is not None:
            out.append(Fact(self.subject, lib, mapped, provenance))
        else:
            out.append(CollectionError(self.subject, lib, why))
        if not isinstance(disk_value, str):
            out.append(self._unread(lib_disk, m.path, disk_value))
        elif mapped is not None:
            # Only other bytes count: overlayfs may show one file under two inode numbers.
            if disk_value != mapped:
                out.append(Fact(self.subject, lib_disk, disk_value, provenance))
        elif m.deleted or st is None:
            # The kernel says the mapped file was unlinked: whatever is there now is another.
            out.append(Fact(self.subject, lib_disk, disk_value, provenance))
        else:
            out.append(CollectionError(self.subject, lib_disk, why))
        return out

    def _unread(self, key: str, path: str, read: Read | None) -> CollectionError:
        why = read.error or read.kind if read is not None else "not read"
        return CollectionError(
            self.subject, key, f"cannot read {path} as pid {self.pid} sees it: {why}"
        )

    def _provenance(self, path: str) -> dict[str, Any]:
        package = self.owners.package(path)
        return self.provenance if package is None else {**self.provenance, "package": package}

    def _disk_stat(self, path: str) -> os.stat_result | None:
        try:
            return os.stat(self.root + path)
        except OSError:
            return None

    def _hash_paths(self, found: list[tuple[str, os.stat_result]]) -> dict[str, str | Read]:
        """The SHA-256 of each file at its path (a Read when it could not be read)."""
        out: dict[str, str | Read] = {}
        jobs: list[tuple[str, int]] = []
        for path, st in found:
            cached = _cached(self.ctx.file_cache.get(path), st)
            if cached is not None:
                out[path] = cached
            else:
                jobs.append((self.root + path, st.st_size))
        if not jobs:
            return out
        report = None
        if self.ctx.progress is not None:
            sink = _renamed(self.ctx.progress)
            report = HashProgress(sink, f"libraries of {self.subject.partition(':')[2]}", jobs)
        for (host, _size), read in zip(
            jobs, read_all(jobs, None, report, MAX_LIBRARY), strict=True
        ):
            path = host[len(self.root) :]
            out[path] = self._digest(path, read)
        return out

    def _hash_mapped(self, m: Mapping) -> tuple[str | None, str]:
        """The SHA-256 of the file the process has mapped, or None and why it is unknown."""
        link = f"{self.ctx.proc_root}/{self.pid}/map_files/{m.span}"
        try:
            fd = os.open(link, os.O_RDONLY | os.O_CLOEXEC)
        except ProcessLookupError:
            # ESRCH: the process let go of its memory (it is exiting); its stat may not
            # say so yet. The process is gone, not its files unreadable.
            raise psutil.NoSuchProcess(self.pid) from None
        except PermissionError:
            return None, (
                f"{m.path} on disk is not the file pid {self.pid} has mapped, and only root "
                f"can read the mapped one ({link}): unknown"
            )
        except OSError as exc:
            why = exc.strerror or str(exc)
            return None, f"cannot read the file pid {self.pid} has mapped ({link}): {why}"
        try:
            st = os.fstat(fd)
        except ProcessLookupError:
            os.close(fd)
            raise psutil.NoSuchProcess(self.pid) from None
        except OSError as exc:
            os.close(fd)
            return None, f"cannot read the file pid {self.pid} has mapped: {exc.strerror or exc}"
        key = m.path + _MAPPED
        cached = _cached(self.ctx.file_cache.get(key), st)
        if cached is not None:
            os.close(fd)
            return cached, ""
        done = self._digest(key, read_opened(fd, st, MAX_LIBRARY))  # closes fd
        if isinstance(done, str):
            return done, ""
        return None, f"cannot read the file pid {self.pid} has mapped: {done.error or done.kind}"

    def _digest(self, key: str, read: Read) -> str | Read:
        """A read's value (its SHA-256, or a note for a file too large), cached when it may be."""
        if read.kind == "ok" and read.st is not None:
            if read.cacheable:
                st = read.st
                self.ctx.cache_updates[key] = (
                    st.st_size,
                    st.st_mtime_ns,
                    st.st_ctime_ns,
                    st.st_ino,
                    read.digest,
                )
            return read.digest
        if read.kind == "unhashed" and read.st is not None:
            st = read.st
            return f"not hashed: {read.error} (size {st.st_size}, mtime_ns {st.st_mtime_ns})"
        return read


def _same_file(m: Mapping, st: os.stat_result | None, *, marked: bool = True) -> bool:
    """Whether the path still names the mapped file (same device and inode, not unlinked;
    with `marked` False, whatever the maps line said)."""
    if st is None or (marked and m.deleted):
        return False
    return st.st_ino == m.inode and (os.major(st.st_dev), os.minor(st.st_dev)) == m.dev


def _cached(entry: CachedStat | None, st: os.stat_result) -> str | None:
    """The cached SHA-256 when the cache vouches for this stat, else None."""
    if entry is None or entry[:4] != (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino):
        return None
    return entry[4]


def _renamed(sink: Callable[[str], None]) -> Callable[[str], None]:
    """A progress sink that says "hashing libraries of NAME", not "files of set"."""
    return lambda text: sink(text.replace("files of set ", "", 1))


class Owners:
    """Which distribution's RECORD lists a mapped file under a site folder, RECORDs stat-cached."""

    def __init__(self, ctx: CollectContext, root: str) -> None:
        self.ctx = ctx
        self.root = root
        self.sites: dict[str, dict[str, str]] = {}

    def package(self, path: str) -> str | None:
        """The normalised name of the distribution that installed `path`, or None."""
        where = self.dist_info(path)
        if where is None:
            return None
        name = where.rpartition("/")[2][: -len(".dist-info")]
        return normalise(name.rpartition("-")[0] or name)

    def dist_info(self, path: str) -> str | None:
        """The ``*.dist-info`` folder whose RECORD lists `path` (as the process sees it)."""
        parts = path.split("/")
        for i in range(len(parts) - 2, 0, -1):
            if parts[i] in _SITE_FOLDERS:
                site = "/".join(parts[: i + 1])
                owned = self.sites.get(site)
                if owned is None:
                    owned = self.sites[site] = self._read_site(site)
                name = owned.get("/".join(parts[i + 1 :]))
                return None if name is None else f"{site}/{name}"
        return None

    def _read_site(self, site: str) -> dict[str, str]:
        """relative path -> dist-info folder, for the shared objects each RECORD of `site` lists."""
        try:
            names = sorted(n for n in os.listdir(self.root + site) if n.endswith(".dist-info"))
        except OSError:
            return {}
        owned: dict[str, str] = {}
        for name in names:
            for rel in self._listed(f"{site}/{name}/RECORD"):
                owned.setdefault(rel, name)
        return owned

    def _listed(self, record: str) -> Iterable[str]:
        """The shared objects a RECORD lists, from the stat cache while it is unchanged."""
        host = self.root + record
        key = record + _OWNED
        try:
            st = os.stat(host)
        except OSError:
            return ()
        cached = _cached(self.ctx.file_cache.get(key), st)
        if cached is not None:
            return cached.split("\n") if cached else ()
        try:
            data = read_small(host, RECORD_BYTES)
        except Unread:
            data = None  # which files it owns is unknown: they are named by path alone
        if data is None:
            return ()
        text = data.decode("utf-8", "surrogateescape")
        listed = sorted(_shared_objects(text))
        if time.time_ns() - st.st_ctime_ns < RACY_WINDOW_NS:
            return listed  # may be written again within its timestamps' tick: read it next time
        self.ctx.cache_updates[key] = (
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            st.st_ino,
            "\n".join(listed),
        )
        return listed


def _shared_objects(record: str) -> Iterable[str]:
    """Paths in a RECORD's text (CSV: path,hash,size) that name shared objects inside the site."""
    import csv

    for row in csv.reader(record.splitlines()):
        if not row:
            continue
        rel = row[0]
        base = rel.rpartition("/")[2]
        if (".so" in base) and not rel.startswith(("/", "../")):
            yield rel
