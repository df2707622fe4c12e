"""Read the history: snapshots by time, the state at a snapshot, a fact's past values.

Everything here returns plain dataclasses, never rows, so analysis and
templates stay independent of the database. It speaks DB-API through
drift.store.db's DbapiConnection (`?` placeholders on SQLite and
PostgreSQL), as the writer does: a read command imports no SQLAlchemy,
which alone costs a `drift since` 250 ms before it reads a row.

One idea, kept whole past 500 lines: every read of one host's history goes
through `History`, whose queries share its host id, dialect and chunking.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import translate
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar, cast

from drift.errors import NoHistoryError, StoreError, TimeSpecError
from drift.names import did_you_mean, unknown_name
from drift.store.db import DbapiConnection, connect_dbapi
from drift.store.delta import MOVING_SQL, PROVENANCE_SQL, TEXT_KEYS
from drift.store.schema import check_revision, current_revision_dbapi
from drift.store.urls import DbUrl
from drift.timespec import When, describe_when, from_us, quote_when, to_us

if TYPE_CHECKING:
    from drift.scope import ConfigInfo

# Ids bound in one `IN (...)` (SQLite allows 32,766 variables, PostgreSQL 65,535).
_T = TypeVar("_T")

IDS_PER_QUERY = 500

SNAPSHOT_COLUMNS = "id, taken_us, duration_ms, n_facts, n_changed, n_errors, errors, config_id"

# A version with its fact's identity and the times of its first and until snapshots.
VERSION_COLUMNS = (
    "f.subject, f.key, v.value, v.blob_sha256, v.secret, v.first_snapshot_id, s1.taken_us, "
    f"v.until_snapshot_id, s2.taken_us, {PROVENANCE_SQL}"
)
VERSION_JOINS = (
    "JOIN snapshots s1 ON s1.id = v.first_snapshot_id "
    "LEFT JOIN snapshots s2 ON s2.id = v.until_snapshot_id"
)


@dataclass(frozen=True)
class SnapshotInfo:
    """One recorded snapshot."""

    id: int
    taken_us: int
    duration_ms: int
    n_facts: int
    n_changed: int
    n_errors: int
    errors: list[dict[str, Any]] = field(default_factory=list)
    # The config the snapshot was taken with (History.configs); None before drift kept it.
    config_id: int | None = None

    @property
    def taken_at(self) -> datetime:
        return from_us(self.taken_us)


@dataclass(frozen=True)
class MarkInfo:
    """A stable, unstable or note mark someone recorded."""

    id: int
    at_us: int
    kind: str
    note: str | None
    # When `drift unmark` took it back; None while it stands.
    undone_us: int | None = None


@dataclass(frozen=True)
class StoredVersion:
    """One value a fact held, from its first snapshot until (excluding) `until_snapshot_id`."""

    subject: str
    key: str
    value: str | None
    blob_sha256: str | None
    secret: bool
    first_snapshot_id: int
    first_taken_us: int
    until_snapshot_id: int | None
    until_taken_us: int | None
    provenance: dict[str, Any]
    # A short text stored inline (see version_row); History.text gives it.
    inline_text: str | None = field(default=None, compare=False, repr=False)

    @property
    def identity(self) -> tuple[str | None, str | None, bool]:
        """What makes two versions the same value."""
        return (self.value, self.blob_sha256, self.secret)


@dataclass(frozen=True)
class FactVersionsPage:
    """The newest versions of one fact (newest first) and how many older ones were left out."""

    subject: str
    key: str
    versions: list[StoredVersion]
    older: int


def snapshot_row(row: Any) -> SnapshotInfo:
    return SnapshotInfo(
        row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6]) if row[6] else [], row[7]
    )


def _chunks(ids: list[_T]) -> Iterator[list[_T]]:
    for start in range(0, len(ids), IDS_PER_QUERY):
        yield ids[start : start + IDS_PER_QUERY]


def _marks(n: int) -> str:
    return ",".join("?" * n)


class History:
    """The read side of one host's history."""

    def __init__(self, conn: DbapiConnection, host: str, host_id: int) -> None:
        self.conn = conn
        self.host = host
        self.host_id = host_id
        self._blobs: dict[str, str] = {}

    @classmethod
    def open(cls, db: DbUrl, host: str, *, asked: bool = False) -> History:
        """Open a host's history; NoHistoryError if it has never been recorded.

        A host `asked` for by name (--host) that the database does not hold, while it
        holds others, is a typo: UnknownNameError naming them, never "record it first".
        """
        conn = connect_dbapi(db)
        try:
            check_revision(current_revision_dbapi(conn))
            row = conn.execute("SELECT id FROM hosts WHERE name = ?", (host,)).fetchone()
            if row is None:
                hosts = [r[0] for r in conn.execute("SELECT name FROM hosts ORDER BY name")]
                if asked and hosts:
                    raise unknown_name("host", host, hosts, f"in {db.display()}")
                known = (
                    f"{did_you_mean(host, hosts)} (recorded hosts: {', '.join(hosts)}; "
                    "pick one with --host)"
                    if hosts
                    else ""
                )
                raise NoHistoryError(
                    f"no history for host {host!r} in {db.display()}{known}: "
                    "run `drift record` first"
                )
        except BaseException:
            conn.close()
            raise
        return cls(conn, host, int(row[0]))

    def close(self) -> None:
        """Close the connection (what leaving a `with` block does)."""
        self.conn.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        return list(self.conn.execute(sql, tuple(params)).fetchall())

    # ---------------------------------------------------------------- snapshots

    def _one_snapshot(self, where: str, params: tuple[Any, ...], order: str) -> SnapshotInfo | None:
        rows = self.rows(
            f"SELECT {SNAPSHOT_COLUMNS} FROM snapshots WHERE host_id = ? {where} "
            f"ORDER BY {order} LIMIT 1",
            (self.host_id, *params),
        )
        return snapshot_row(rows[0]) if rows else None

    def latest(self) -> SnapshotInfo:
        # host_id = ? ORDER BY id: one seek in ix_snapshots_host_id_id.
        snap = self._one_snapshot("", (), "id DESC")
        if snap is None:
            raise NoHistoryError(f"no snapshot recorded for host {self.host!r} yet")
        return snap

    def first(self) -> SnapshotInfo:
        snap = self._one_snapshot("", (), "id")
        if snap is None:
            raise NoHistoryError(f"no snapshot recorded for host {self.host!r} yet")
        return snap

    def snapshot_for(self, when: When, label: str = "") -> SnapshotInfo:
        """The snapshot a WHEN names: `#N`, or the last one taken at or before the moment.

        `label` (`--stable`) names the WHEN in the error when there is no such snapshot.
        """
        named = f"{label} " if label else ""
        if when.snapshot is not None:
            snap = self._one_snapshot("AND id = ?", (when.snapshot,), "id")
            if snap is None:
                first = self._one_snapshot("", (), "id")
                # Before the first record (pruned, or another host's): say where it begins.
                begins = (
                    f" (its history begins at #{first.id}, "
                    f"{describe_when(When(at=first.taken_at))})"
                    if first is not None and when.snapshot < first.id
                    else ""
                )
                raise TimeSpecError(
                    f"{named}{when.text or f'#{when.snapshot}'}: no snapshot "
                    f"#{when.snapshot} for host {self.host!r}{begins}"
                )
            return snap
        assert when.at is not None
        snap = self._one_snapshot("AND taken_us <= ?", (to_us(when.at),), "taken_us DESC, id DESC")
        if snap is None:
            first = self.first()
            raise TimeSpecError(
                f"{named}{quote_when(when)} is before the first record "
                f"({describe_when(When(at=first.taken_at))}, snapshot #{first.id})"
            )
        return snap

    def snapshot(self, snapshot_id: int) -> SnapshotInfo:
        """This host's snapshot of that id."""
        snap = self._one_snapshot("AND id = ?", (snapshot_id,), "id")
        if snap is None:
            raise StoreError(f"no snapshot #{snapshot_id} for host {self.host!r}")
        return snap

    def snapshot_after(self, snapshot_id: int) -> SnapshotInfo | None:
        """This host's next snapshot after that id, if any."""
        return self._one_snapshot("AND id > ?", (snapshot_id,), "id")

    def recent_snapshots(self, limit: int) -> list[SnapshotInfo]:
        """The last `limit` snapshots, oldest first."""
        rows = self.rows(
            f"SELECT {SNAPSHOT_COLUMNS} FROM snapshots WHERE host_id = ? ORDER BY id DESC LIMIT ?",
            (self.host_id, limit),
        )
        return [snapshot_row(r) for r in reversed(rows)]

    def snapshots_from(self, start_us: int) -> list[SnapshotInfo]:
        """Every snapshot taken at or after `start_us`, newest first (`drift log`)."""
        rows = self.rows(
            f"SELECT {SNAPSHOT_COLUMNS} FROM snapshots WHERE host_id = ? AND taken_us >= ? "
            "ORDER BY taken_us DESC, id DESC",
            (self.host_id, start_us),
        )
        return [snapshot_row(r) for r in rows]

    def count_snapshots_in(self, start_us: int, end_us: int) -> int:
        """Records taken in [start_us, end_us]."""
        return self._count(
            "SELECT count(*) FROM snapshots WHERE host_id = ? AND taken_us >= ? AND taken_us <= ?",
            (self.host_id, start_us, end_us),
        )

    def count_snapshots_upto(self, upto_id: int, from_id: int = 0) -> int:
        """Records with from_id <= id <= upto_id."""
        return self._count(
            "SELECT count(*) FROM snapshots WHERE host_id = ? AND id >= ? AND id <= ?",
            (self.host_id, from_id, upto_id),
        )

    def first_taken_from(self, at_us: int) -> SnapshotInfo | None:
        """The earliest record taken at or after `at_us` (None when none is)."""
        return self._one_snapshot("AND taken_us >= ?", (at_us,), "taken_us, id")

    def _count(self, sql: str, params: tuple[Any, ...]) -> int:
        row = self.conn.execute(sql, params).fetchone()
        return int(row[0] or 0) if row else 0

    def configs(self) -> dict[int, ConfigInfo]:
        """Every config snapshots were taken with, by id (a handful, shared by a fleet's hosts)."""
        from drift.scope import ConfigInfo, Scope

        rows = self.rows("SELECT id, path, digest, scope FROM configs")
        return {r[0]: ConfigInfo(r[1] or None, r[2], Scope.from_json(r[3])) for r in rows}

    def config_ids(self, snapshot_ids: set[int]) -> dict[int, int]:
        """The config each of these snapshots was taken with (snapshots without one left out)."""
        out: dict[int, int] = {}
        for chunk in _chunks(sorted(snapshot_ids)):
            rows = self.rows(
                f"SELECT id, config_id FROM snapshots WHERE id IN ({_marks(len(chunk))}) "
                "AND config_id IS NOT NULL",
                chunk,
            )
            out.update({r[0]: r[1] for r in rows})
        return out

    def snapshots_between(self, after_id: int, upto_id: int) -> list[SnapshotInfo]:
        """Snapshots with after_id < id <= upto_id, oldest first."""
        rows = self.rows(
            f"SELECT {SNAPSHOT_COLUMNS} FROM snapshots WHERE host_id = ? AND id > ? AND id <= ? "
            "ORDER BY id",
            (self.host_id, after_id, upto_id),
        )
        return [snapshot_row(r) for r in rows]

    # ---------------------------------------------------------------- versions

    def state_at(self, snapshot_id: int) -> dict[tuple[str, str], StoredVersion]:
        """Every fact's value as of a snapshot."""
        rows = self.rows(*self.state_sql(snapshot_id))
        return {(r[0], r[1]): version_row(r) for r in rows}

    def state_sql(
        self, snapshot_id: int, fact_ids: list[int] | None = None, began_after: int = 0
    ) -> tuple[str, tuple[Any, ...]]:
        """The select for the versions open at a snapshot (first <= S < until), with its params;
        only of `fact_ids` if given, only those begun after `began_after` if given.

        Per fact, the newest version that started at or before S, found by a
        backward seek in ix_versions_fact_first; it is in the state unless
        closed by S. On SQLite a correlated max() is that seek. PostgreSQL
        plans the same max() from its statistics, so the plan changes with
        them (an index walk on a fresh database, bitmap scans of versions
        and a hash join once analysed); a LATERAL `ORDER BY ... DESC LIMIT 1`
        per fact is planned as the one seek whatever the statistics say.
        """
        only = f"AND f.id IN ({_marks(len(fact_ids))}) " if fact_ids is not None else ""
        ids = tuple(fact_ids or ())
        tail = "AND (v.until_snapshot_id IS NULL OR v.until_snapshot_id > ?)"
        if self.conn.dialect == "sqlite":
            # `+v.first_snapshot_id > ?` is a filter on the row found, never an
            # index range: as a range, SQLite walks every later version of each
            # fact (half a million for a command that changes every minute).
            after = " AND +v.first_snapshot_id > ?" if began_after else ""
            sql = (
                f"SELECT {VERSION_COLUMNS} FROM facts f JOIN versions v ON v.fact_id = f.id "
                f"{VERSION_JOINS} WHERE f.host_id = ? {only}AND v.first_snapshot_id = "
                "(SELECT max(w.first_snapshot_id) FROM versions w "
                f"WHERE w.fact_id = f.id AND w.first_snapshot_id <= ?) {tail}{after}"
            )
            params = (self.host_id, *ids, snapshot_id, snapshot_id)
            return sql, params + ((began_after,) if began_after else ())
        tail += " AND v.first_snapshot_id > ?"
        sql = (
            f"SELECT {VERSION_COLUMNS} FROM facts f CROSS JOIN LATERAL "
            "(SELECT w.id FROM versions w WHERE w.fact_id = f.id AND w.first_snapshot_id <= ? "
            "ORDER BY w.first_snapshot_id DESC LIMIT 1) newest "
            f"JOIN versions v ON v.id = newest.id {VERSION_JOINS} "
            f"WHERE f.host_id = ? {only}{tail}"
        )
        return sql, (snapshot_id, self.host_id, *ids, snapshot_id, began_after)

    def fact_idents(self) -> list[tuple[str, str]]:
        """(subject, key) of every fact this host's history has."""
        return [
            (r[0], r[1])
            for r in self.rows("SELECT subject, key FROM facts WHERE host_id = ?", (self.host_id,))
        ]

    def pids_at(self, snapshot_id: int) -> dict[str, str]:
        """Each service's pid at a snapshot (or at any moment between two of this host's
        records), by subject: the process a value unchanged since an earlier one is in now."""
        out: dict[str, str] = {}
        for chunk in _chunks(self.fact_ids_with("service:", "pid")):
            rows = self.rows(*self.state_sql(snapshot_id, chunk))
            out.update({r[0]: r[2] for r in rows if r[2] is not None})
        return out

    def matching_facts(self, pattern: str) -> list[int]:
        """The ids of this host's facts matching PATTERN, by subject and key.

        PATTERN is a glob matched against the subject, the key, or "subject key";
        without glob characters it matches as a substring.
        """
        glob = pattern if any(c in pattern for c in "*?[") else f"*{pattern}*"
        # fnmatchcase's own test, compiled once for every fact of the host.
        match = re.compile(translate(glob)).match
        idents = self.rows("SELECT id, subject, key FROM facts WHERE host_id = ?", (self.host_id,))
        # Sorted here: PostgreSQL's ORDER BY follows the database's collation, not code points.
        idents.sort(key=lambda r: (r[1], r[2]))
        return [i for i, s, k in idents if match(s) or match(k) or match(f"{s} {k}")]

    def service_names(self) -> set[str]:
        """The services this host's history has facts of (`service:NAME`), at any time."""
        rows = self.rows(
            "SELECT DISTINCT subject FROM facts WHERE host_id = ? AND substr(subject, 1, 8) = ?",
            (self.host_id, "service:"),
        )
        return {r[0].removeprefix("service:") for r in rows}

    def state_of(self, snapshot_id: int, pattern: str) -> dict[tuple[str, str], StoredVersion]:
        """The values at a snapshot of the facts matching PATTERN (see matching_facts)."""
        out: dict[tuple[str, str], StoredVersion] = {}
        for chunk in _chunks(self.matching_facts(pattern)):
            rows = self.rows(*self.state_sql(snapshot_id, chunk))
            out.update({(r[0], r[1]): version_row(r) for r in rows})
        return out

    def fact_ids_with(self, prefix: str, key: str) -> list[int]:
        """This host's facts whose subject starts with `prefix` and whose key is `key`: ids."""
        rows = self.rows(
            "SELECT id FROM facts WHERE host_id = ? AND substr(subject, 1, ?) = ? AND key = ?",
            (self.host_id, len(prefix), prefix, key),
        )
        return sorted(r[0] for r in rows)

    def versions_after(self, fact_ids: list[int], after_id: int) -> list[StoredVersion]:
        """The versions of these facts open at `after_id` or begun after it, by subject, key,
        then time: a seek per fact, however many versions came before."""
        out: list[StoredVersion] = []
        for chunk in _chunks(fact_ids):
            rows = self.rows(*self.state_sql(after_id, chunk))
            rows += self.rows(
                f"SELECT {VERSION_COLUMNS} FROM facts f JOIN versions v ON v.fact_id = f.id "
                f"{VERSION_JOINS} WHERE f.id IN ({_marks(len(chunk))}) "
                "AND v.first_snapshot_id > ?",
                (*chunk, after_id),
            )
            out.extend(version_row(r) for r in rows)
        out.sort(key=lambda v: (v.subject, v.key, v.first_snapshot_id))
        return out

    def fact_versions(self, subject: str, key: str) -> list[StoredVersion]:
        """Every version of one fact of this host, oldest first (none if never recorded)."""
        rows = self.rows(
            f"SELECT {VERSION_COLUMNS} FROM facts f JOIN versions v ON v.fact_id = f.id "
            f"{VERSION_JOINS} WHERE f.host_id = ? AND f.subject = ? AND f.key = ? "
            "ORDER BY v.first_snapshot_id",
            (self.host_id, subject, key),
        )
        return [version_row(r) for r in rows]

    def read_from(self, paths: Iterable[str]) -> bool:
        """Whether any value of this host was ever read from a line of one of `paths`."""
        for path in paths:
            # The stored JSON quotes the path as json.dumps does (provenance_json).
            needle = f'%"file": {json.dumps(path, ensure_ascii=False)}%'
            rows = self.rows(
                "SELECT 1 FROM provenances p JOIN versions v ON v.provenance_id = p.id "
                "JOIN facts f ON f.id = v.fact_id WHERE f.host_id = ? AND p.content LIKE ? "
                "LIMIT 1",
                (self.host_id, needle),
            )
            if rows:
                return True
        return False

    def versions_of(self, pattern: str) -> list[StoredVersion]:
        """Every version of every fact matching PATTERN, by subject, key, then time.

        PATTERN is a glob matched against the subject, the key, or "subject key";
        without glob characters it matches as a substring.
        """
        out: list[StoredVersion] = []
        for chunk in _chunks(self.matching_facts(pattern)):
            rows = self.rows(
                f"SELECT {VERSION_COLUMNS} FROM facts f JOIN versions v ON v.fact_id = f.id "
                f"{VERSION_JOINS} WHERE f.id IN ({_marks(len(chunk))})",
                chunk,
            )
            out.extend(version_row(r) for r in rows)
        out.sort(key=lambda v: (v.subject, v.key, v.first_snapshot_id))
        return out

    def newest_versions_of(self, pattern: str, limit: int | None) -> list[FactVersionsPage]:
        """Per fact matching PATTERN (by subject, key): its newest `limit` versions (None:
        all), newest first, and how many older ones there are.

        Each fact is one backward range of ix_versions_fact_first and, when
        the page is full, one count over it: a fact that changed every
        minute for a year costs `limit` rows, not half a million.
        """
        pages = []
        page = "" if limit is None else " LIMIT ?"
        for fact_id in self.matching_facts(pattern):
            rows = self.rows(
                f"SELECT {VERSION_COLUMNS} FROM facts f JOIN versions v ON v.fact_id = f.id "
                f"{VERSION_JOINS} WHERE f.id = ? ORDER BY v.first_snapshot_id DESC{page}",
                (fact_id,) if limit is None else (fact_id, limit),
            )
            if not rows:
                continue
            total = len(rows)
            if limit is not None and total == limit:
                total = self._count("SELECT count(*) FROM versions WHERE fact_id = ?", (fact_id,))
            versions = [version_row(r) for r in rows]
            pages.append(
                FactVersionsPage(versions[0].subject, versions[0].key, versions, total - len(rows))
            )
        return pages

    def version_counts(
        self, upto_id: int, idents: Iterable[tuple[str, str]], from_id: int | None = None
    ) -> dict[tuple[str, str], int]:
        """How many values each of these facts had in the snapshots up to `upto_id` (from
        `from_id` on, when given): its churn (moves aside; facts with none, or not in the
        history, left out).

        Only the facts asked for are counted: the stories' own, a few hundred
        at most, where every fact of a host would walk every version ever
        written of its script and unit lines to take their moves off.
        """
        wanted = set(idents)
        if not wanted:
            return {}
        subjects = sorted({subject for subject, _ in wanted})
        ids: list[int] = []
        for names in _chunks(subjects):
            rows = self.rows(
                f"SELECT id, subject, key FROM facts WHERE host_id = ? "
                f"AND subject IN ({_marks(len(names))})",
                (self.host_id, *names),
            )
            ids += [r[0] for r in rows if (r[1], r[2]) in wanted]
        counts: dict[tuple[str, str], int] = {}
        for chunk in _chunks(sorted(ids)):
            if from_id is None:
                counts.update(self.counts_between(0, upto_id, chunk))
                continue
            # The value held at from_id, and each one begun after it.
            counts.update(self.counts_between(from_id, upto_id, chunk))
            for r in self.rows(*self.state_sql(from_id, chunk)):
                counts[(r[0], r[1])] = counts.get((r[0], r[1]), 0) + 1
        return counts

    def counts_between(
        self, after_id: int, upto_id: int, fact_ids: list[int] | None = None
    ) -> dict[tuple[str, str], int]:
        """How many values each fact took in (after_id, upto_id] (moves aside; facts that took
        none left out), by subject and key; only of `fact_ids` if given (at most
        IDS_PER_QUERY of them).

        Each fact's count is a range of the covering index ix_versions_fact_first,
        never a row of versions: a fact that changed every minute for a year
        is counted in 30 ms, not read. Only the keys declared to move with
        their line can have moves, and only theirs are read to take them off.
        """
        only = "" if fact_ids is None else f"AND f.id IN ({_marks(len(fact_ids))}) "
        ids = tuple(fact_ids or ())
        counts = {
            (r[0], r[1]): int(r[2])
            for r in self.rows(
                "SELECT f.subject, f.key, (SELECT count(*) FROM versions v WHERE v.fact_id = f.id "
                "AND v.first_snapshot_id > ? AND v.first_snapshot_id <= ?) FROM facts f "
                f"WHERE f.host_id = ? {only}",
                (after_id, upto_id, self.host_id, *ids),
            )
            if r[2]
        }
        moves = self.rows(
            "SELECT f.subject, f.key, count(*) FROM facts f JOIN versions v ON v.fact_id = f.id "
            f"WHERE f.host_id = ? {only}AND {MOVING_SQL} "
            f"AND v.first_snapshot_id > ? AND v.first_snapshot_id <= ? AND NOT {self.not_a_move()} "
            "GROUP BY f.id, f.subject, f.key",
            (self.host_id, *ids, after_id, upto_id),
        )
        for subject, key, moved in moves:
            ident = (subject, key)
            counts[ident] -= int(moved)
            if not counts[ident]:
                del counts[ident]  # it only moved: no value of its own in the window
        return counts

    def not_a_move(self) -> str:
        """SQL: version v of fact f is not a move: a value that stayed while its line moved.

        The writer stores such a move as a new version with the same value (so
        the current line is known); it is no change of value. Only the keys
        declared to move (`drift.declaration.Moves`) have moves.
        """
        same = "IS" if self.conn.dialect == "sqlite" else "IS NOT DISTINCT FROM"
        return (
            f"(NOT {MOVING_SQL} OR NOT EXISTS (SELECT 1 FROM versions p "
            "WHERE p.fact_id = v.fact_id AND p.until_snapshot_id = v.first_snapshot_id "
            f"AND p.value {same} v.value AND p.blob_sha256 {same} v.blob_sha256 "
            "AND p.secret = v.secret))"
        )

    def marks(self, *, undone: bool = False) -> list[MarkInfo]:
        """Every mark of this host that stands, oldest first; with `undone`, those taken
        back by `drift unmark` too (a listing shows them, no window is made of them)."""
        standing = "" if undone else " AND undone_us IS NULL"
        rows = self.rows(
            "SELECT id, at_us, kind, note, undone_us FROM marks "
            f"WHERE host_id = ?{standing} ORDER BY at_us, id",
            (self.host_id,),
        )
        return [MarkInfo(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    # ---------------------------------------------------------------- blobs

    def text(self, version: StoredVersion) -> str:
        """The full value of a version, reading its blob if it has one."""
        if version.inline_text is not None:
            return version.inline_text
        if version.blob_sha256 is None:
            return version.value or ""
        self.load_texts([version])
        return self._blobs[version.blob_sha256]

    def load_texts(self, versions: Iterable[StoredVersion]) -> None:
        """Read the blobs of these versions not read yet, a few hundred to a query."""
        wanted = sorted(
            {v.blob_sha256 for v in versions if v.blob_sha256 is not None and v.inline_text is None}
            - self._blobs.keys()
        )
        for start in range(0, len(wanted), IDS_PER_QUERY):
            chunk = wanted[start : start + IDS_PER_QUERY]
            rows = self.rows(
                f"SELECT sha256, content FROM blobs WHERE sha256 IN ({_marks(len(chunk))})", chunk
            )
            for sha, data in rows:
                self._blobs[sha] = zlib.decompress(data).decode("utf-8", "surrogateescape")
        missing = [sha for sha in wanted if sha not in self._blobs]
        if missing:
            raise StoreError(f"blob {missing[0]} is missing from the history")


@lru_cache(maxsize=4096)
def _provenance(text: str) -> dict[str, Any]:
    """A stored provenance parsed once (a state of 6,000 facts holds a few hundred distinct
    ones); version_row hands each version a copy of its own."""
    return cast(dict[str, Any], json.loads(text))


def version_row(r: Any) -> StoredVersion:
    value, blob_sha256, inline_text = r[2], r[3], None
    if value is not None and r[1] in TEXT_KEYS:
        # A script or command output is stored inline when short, and reads as it
        # did when it was always a blob: by its SHA-256, its text from History.text.
        inline_text, value = value, None
        blob_sha256 = hashlib.sha256(inline_text.encode("utf-8", "surrogateescape")).hexdigest()
    return StoredVersion(
        subject=r[0],
        key=r[1],
        value=value,
        blob_sha256=blob_sha256,
        secret=bool(r[4]),
        first_snapshot_id=r[5],
        first_taken_us=r[6],
        until_snapshot_id=r[7],
        until_taken_us=r[8],
        provenance=dict(_provenance(r[9])) if r[9] else {},
        inline_text=inline_text,
    )
