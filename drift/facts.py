"""The currency between layers: a Fact is one observed value with its provenance.

Collectors yield Facts (FactBlocks for many facts at once, CollectionErrors
for what they could not read); the store keeps them as a change-only history;
analysis compares them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from drift.rooted import HOST, Files
from drift.timespec import iso


@dataclass(slots=True)
class Fact:
    """One flat observation: `subject` (``service:decode``), `key` (``env:PATH``), `value`.

    `provenance` says where the value came from (file and line, pid, command);
    it must be JSON-serialisable. `secret` is set by redaction: the value is
    then a keyed digest, never the secret itself. Treat a Fact as immutable;
    it is not frozen only because a frozen dataclass is four times slower to
    build, and a record builds one per file, flag and variable every minute.
    """

    subject: str
    key: str
    value: str
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)
    secret: bool = False


@dataclass(slots=True)
class FactBlock:
    """Many facts of one shape, kept in columns: each subject, once, has every key in `keys`.

    The files collector yields one for the files its stat cache vouches for,
    so an unchanged record of 12k files compares one digest of a few lists
    instead of building 36k Facts, and one for the files it read. Iterating
    a block gives its Facts, subject by subject, in `keys` order;
    `columns[i][j]` is the value of `keys[i]` for `subjects[j]`, whose
    provenance is `provenances[j]`. A block whose keys redaction would look
    at is expanded and redacted like any other facts.
    """

    keys: tuple[str, ...]
    subjects: list[str] = field(default_factory=list)
    columns: list[list[str]] = field(default_factory=list)
    provenances: list[dict[str, Any]] = field(default_factory=list)

    def __iter__(self) -> Iterator[Fact]:
        keyed = list(enumerate(self.keys))
        for j, subject in enumerate(self.subjects):
            provenance = self.provenances[j]
            for i, key in keyed:
                yield Fact(subject, key, self.columns[i][j], provenance)


@dataclass(frozen=True, slots=True)
class CollectionError:
    """Something a collector could not read; its facts keep their last value.

    A subject ending in ``/`` (``file:/opt/k/``) covers every subject under
    that folder, and a kind alone (``gpu:``) every subject of that kind. `key`
    None means the whole subject; a key ending in ``:`` (``env:``) covers
    every key with that prefix; a key of KEY_GROUPS (`LIVE_UNREADABLE`) the
    keys of its group; any other key covers that key only.
    """

    subject: str
    key: str | None
    message: str
    # A limit nothing on the host can lift (a process that rewrote its title): a blind spot
    # all the same, but no failed record, or a timer would read as failed for good.
    lasting: bool = False

    def covers(self, subject: str, key: str) -> bool:
        """True if a fact (subject, key) falls inside what this error failed to collect."""
        if self.subject.endswith("/") or self.subject.find(":") == len(self.subject) - 1:
            if not subject.startswith(self.subject):
                return False
        elif subject != self.subject:
            return False
        if self.key is None:
            return True
        group = KEY_GROUPS.get(self.key)
        if group is not None:
            return any(key.startswith(k) if k.endswith(":") else key == k for k in group)
        if self.key.endswith(":"):
            return key.startswith(self.key)
        return key == self.key


LIVE_UNREADABLE = "argv+env"
"""The key of a process's one error when it rewrote its title (`drift.collectors.process`).

Its command line and environment, and what is read through them (its
Python's path and distributions), cannot be read: one line says so, and
their last values are kept, never read as removed.
"""

KEY_GROUPS: dict[str, tuple[str, ...]] = {
    LIVE_UNREADABLE: (
        "argv",
        "flag:",
        "env:",
        "python",
        "python:",
        "package:",
        "package_source:",
        "package_head:",
    ),
}
"""Error keys that stand for several keys (exact, or prefixes ending in ``:``)."""


def storable(text: str) -> str:
    """`text` with undecodable bytes (surrogate escapes) as ``\\xNN``: valid UTF-8 for any store."""
    if text.isascii():
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        # A lone surrogate that did not come from a byte.
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


FILE_TIME_KEYS = ("mtime", "ctime")
"""Provenance keys of a file's value that say when the file was last written (its mtime)
and last changed in any way (its ctime): ISO 8601 UTC, to the microsecond.

They ride in the provenance, which is stored with a version when it opens and never
compared: a file touched with the same bytes is no change, and the times kept are those
the record that saw the new value read. `drift.analysis.timing` believes them only where
the records agree."""


def file_times(st: Any) -> dict[str, str]:
    """The file times of an `os.stat_result`, as provenance keys (FILE_TIME_KEYS)."""
    return {"mtime": iso(st.st_mtime_ns // 1000), "ctime": iso(st.st_ctime_ns // 1000)}


CachedStat = tuple[int, int, int, int, str]
"""What the stat cache remembers of a file: (size, mtime_ns, ctime_ns, inode, sha256).

A plain tuple, not a NamedTuple: the store loads 12k of them every minute
straight from marshal, and building named ones cost more than the load.
"""


class StatCache:
    """The stat cache as collectors read it: an entry by path, or the entries of many paths.

    This one holds every entry in a dict. The store's (`ShardedStatCache`)
    reads its shards one at a time instead, so a record of a large tree never
    holds the whole cache: `shards` is how the files collector asks for a
    set's entries, a part at a time.
    """

    def __init__(self, entries: dict[str, CachedStat] | None = None) -> None:
        self.entries: dict[str, CachedStat] = {} if entries is None else entries

    def get(self, path: str) -> CachedStat | None:
        """The entry of one path, if the cache holds one."""
        return self.entries.get(path)

    def shards(self, paths: Sequence[str]) -> Iterator[tuple[Iterable[int], dict[str, CachedStat]]]:
        """The cache in parts: (indexes in `paths`, entries that may hold them), each path once.

        Here one part: every index, every entry.
        """
        yield range(len(paths)), self.entries


PROCESS_KEYS = ("pid", "started_at", "exe", "argv")
"""The facts of a service that say which process it is: `CollectContext.last_processes`."""


@dataclass
class CollectContext:
    """What collectors may use besides their own config section.

    `file_cache` is read-only input from the store (a `StatCache`, or a
    plain dict of its entries); collectors put the stat entries of files they
    hashed this time into `cache_updates`.
    `exclude` holds absolute paths never to read (drift's own database,
    its -wal/-shm and the secret key). `systemctl` is the command prefix
    used to query systemd and `proc_root` where /proc is, both changeable so
    drift can watch services inside a container from the host. `progress`,
    when someone watches (a terminal), takes a one-line status of long work.
    `last_processes`, read-only input from the store too, holds what was
    last recorded of each service's process (``service:NAME`` -> PROCESS_KEYS
    and ``pidfile_mtime`` -> value), so the services collector can tell the
    process it finds from the one it saw before. `files` is where the
    config's paths are read: the host's, or a container's (`[container]`:
    then `systemctl` and `proc_root` reach into it too, and `enter` is the
    command prefix that runs a program inside it, ``nsenter -t PID -a --root``).
    `recorded(subject, prefix)`, when drift has a history, gives the values
    last recorded of a subject's keys under a prefix (key -> value): the
    libraries collector asks it only for a process whose mapped file was
    deleted, to name that file by the path it was recorded under.
    """

    file_cache: StatCache | dict[str, CachedStat] = field(default_factory=dict)
    cache_updates: dict[str, CachedStat] = field(default_factory=dict)
    exclude: frozenset[str] = frozenset()
    systemctl: tuple[str, ...] = ("systemctl",)
    proc_root: str = "/proc"
    progress: Callable[[str], None] | None = None
    recorded: Callable[[str, str], dict[str, str]] | None = None
    last_processes: dict[str, dict[str, str]] = field(default_factory=dict)
    files: Files = HOST
    enter: tuple[str, ...] = ()
