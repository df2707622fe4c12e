"""Write one snapshot: only what changed, in one transaction, one record at a time.

This is the every-minute hot path, so it speaks DB-API (`?` placeholders,
translated for psycopg) and imports nothing heavy. An unchanged record
inserts one snapshot row and nothing else; otherwise the writer reads the
open versions, lets drift.store.delta decide what changed, and has
drift.store.apply write it. One idea, a record's write from opening the
history to its snapshot row (with what a record reads before collecting,
and marks); the pieces it calls are modules of their own: delta, apply,
digest, statcache, locks.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from drift.facts import PROCESS_KEYS, CachedStat, CollectionError, Fact, FactBlock
from drift.store.apply import apply_delta
from drift.store.db import DbapiConnection, connect_dbapi, write_transaction
from drift.store.delta import (
    MOVING_SQL,
    PROVENANCE_SQL,
    Ident,
    OpenVersion,
    PreviousState,
    delta,
    needs_known_subjects,
    needs_script_provenance,
)
from drift.store.digest import state_digest
from drift.store.locks import hold_removal_lock, record_lock
from drift.store.schema import check_revision, current_revision_dbapi, upgrade_database
from drift.store.statcache import load_stat_cache, write_stat_cache
from drift.store.urls import DbUrl

if TYPE_CHECKING:
    from drift.scope import ConfigInfo

MARK_KINDS = ("stable", "unstable", "note")

# PostgreSQL's serialization_failure and deadlock_detected: the server rolled the whole
# transaction back, and running it again is safe. Tried at most WRITE_ATTEMPTS times.
RETRY_STATES = frozenset({"40001", "40P01"})
WRITE_ATTEMPTS = 5

T = TypeVar("T")


@dataclass
class SnapshotResult:
    """What one record did, for the one-line summary."""

    snapshot_id: int
    taken_us: int
    facts: int
    changed: int
    errors: list[CollectionError] = field(default_factory=list)
    seconds: float = 0.0
    # The errors the previous snapshot of this host did not have (same subject, key and
    # message): what `drift record --quiet` reports, so cron mails a problem once.
    new_errors: list[CollectionError] = field(default_factory=list)
    # Set when this record's config differs from the last record's.
    config_change: ConfigChange | None = None
    # Stored values the writer read to compare with what was collected: 0 when
    # the state digest equalled the last snapshot's (nothing changed, nothing read).
    values_read: int = 0
    # Set when the central database was out of reach: why, and the spool that kept it.
    spooled: str | None = None
    spool_began: bool = False  # ... and it is the first the spool holds: an outage began
    # Snapshots this record shipped from the spool before its own (drift.store.push).
    shipped: int = 0
    # A damaged spool set aside: where, and what of it was saved (one line each).
    spool_warnings: list[str] = field(default_factory=list)


@dataclass
class ConfigChange:
    """How the config of a record differs from the last record's, and what that did.

    `untracked` facts left the history because the new config no longer asks
    for them and `tracked` ones entered because it now does: neither is a
    change on the box, and neither is counted in `changed`. `covers_none`:
    the new config watches nothing the last one watched (another config
    picked up by mistake, most likely).
    """

    before_path: str | None
    after_path: str | None
    sections: list[str]  # "services: -web", "files: +kernels"
    untracked: int = 0
    tracked: int = 0
    covers_none: bool = False


class LastSnapshot(NamedTuple):
    """The host's last snapshot, as the next record compares itself with it."""

    state_digest: bytes | None
    n_errors: int
    n_facts: int
    config_id: int | None
    errors: str | None  # JSON, as in snapshots.errors


def now_us() -> int:
    """The current time in integer microseconds since the epoch."""
    return time.time_ns() // 1000


class HistoryWriter:
    """The write side of the store for one host's `drift record`."""

    def __init__(self, conn: DbapiConnection, db: DbUrl) -> None:
        self.conn = conn
        self.db = db

    @classmethod
    def open(cls, db: DbUrl, *, create: bool = True) -> HistoryWriter:
        """Open for writing; a fresh database is created at the head schema first.

        With `create` False, a missing SQLite file is a NoDatabaseError instead.
        An older or newer schema is refused: `drift record` runs from cron and
        must never migrate by itself.
        """
        conn = connect_dbapi(db, create=create)
        try:
            revision = current_revision_dbapi(conn)
            if revision is None:
                conn.close()
                upgrade_database(db)
                conn = connect_dbapi(db)
                revision = current_revision_dbapi(conn)
            check_revision(revision)
        except BaseException:
            conn.close()
            raise
        return cls(conn, db)

    def close(self) -> None:
        """Close the connection (what leaving a `with` block does)."""
        self.conn.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ locking

    def record_lock(self, host: str) -> AbstractContextManager[None]:
        """Exclusive right to record `host`: a second record fails at once with RecordLocked."""
        return record_lock(self.conn, self.db, host)

    # ------------------------------------------------------------ reads before collecting

    def host_id(self, host: str) -> int | None:
        row = self.conn.execute("SELECT id FROM hosts WHERE name = ?", (host,)).fetchone()
        return None if row is None else int(row[0])

    def key_fingerprint(self, host: str) -> str | None:
        """The fingerprint of the secret key this host's last record used (None: not known)."""
        row = self.conn.execute(
            "SELECT key_fingerprint FROM hosts WHERE name = ?", (host,)
        ).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def load_file_cache(self, host: str) -> dict[str, CachedStat]:
        """The stat cache for this host, so collectors can skip unchanged files."""
        host_id = self.host_id(host)
        return {} if host_id is None else load_stat_cache(self.conn, host_id)

    def open_values(self, host: str, subject: str, prefix: str) -> dict[str, str]:
        """key -> value of the facts of `subject` under `prefix` as last recorded (still open).

        Values kept inline only: a SHA-256 or a version, never a blob or a secret.
        """
        host_id = self.host_id(host)
        if host_id is None:
            return {}
        # The pattern is bound (psycopg would take a literal % for a placeholder); a _ or %
        # in the prefix matches more than it says, so the prefix is checked again here.
        rows = self.conn.execute(
            "SELECT f.key, v.value, v.secret FROM facts f JOIN versions v ON v.fact_id = f.id "
            "WHERE f.host_id = ? AND f.subject = ? AND f.key LIKE ? "
            "AND v.until_snapshot_id IS NULL AND v.value IS NOT NULL",
            (host_id, subject, prefix + "%"),
        )
        return {key: value for key, value, secret in rows if key.startswith(prefix) and not secret}

    def load_last_processes(self, host: str, subjects: list[str]) -> dict[str, dict[str, str]]:
        """What was last recorded of each service's process: its PROCESS_KEYS, stopped or not.

        The last value of each, open or closed, so a service that stopped
        still has the pid and program it last ran, and ``pidfile_mtime``
        from the provenance of that pid: the services collector tells a
        stale pidfile whose pid another program took from the service, and
        keeps the recorded start of a process it has seen before.
        """
        host_id = self.host_id(host)
        if host_id is None or not subjects:
            return {}
        marks = ",".join("?" * len(subjects))
        keys = ",".join("?" * len(PROCESS_KEYS))
        rows = self.conn.execute(
            "SELECT f.subject, f.key, v.value, v.blob_sha256, v.secret, "
            f"{PROVENANCE_SQL} FROM facts f JOIN versions v ON v.fact_id = f.id "
            f"WHERE f.host_id = ? AND f.subject IN ({marks}) AND f.key IN ({keys}) "
            "AND v.first_snapshot_id = "
            "(SELECT max(w.first_snapshot_id) FROM versions w WHERE w.fact_id = f.id)",
            (host_id, *subjects, *PROCESS_KEYS),
        ).fetchall()
        last: dict[str, dict[str, str]] = {}
        in_blobs: dict[str, list[tuple[str, str]]] = {}
        for subject, key, value, digest, secret, provenance in rows:
            if secret:
                continue  # a keyed digest says nothing about what ran
            if key == "pid" and provenance:
                written = json.loads(provenance).get("pidfile_mtime")
                if isinstance(written, str):
                    last.setdefault(subject, {})["pidfile_mtime"] = written
            if value is not None:
                last.setdefault(subject, {})[key] = value
            elif digest is not None:
                in_blobs.setdefault(digest, []).append((subject, key))
        if in_blobs:  # a long command line
            marks = ",".join("?" * len(in_blobs))
            for digest, content in self.conn.execute(
                f"SELECT sha256, content FROM blobs WHERE sha256 IN ({marks})", tuple(in_blobs)
            ):
                text = zlib.decompress(content).decode("utf-8", "surrogateescape")
                for subject, key in in_blobs[digest]:
                    last.setdefault(subject, {})[key] = text
        return last

    # ------------------------------------------------------------ the write

    @contextmanager
    def _first_write_journal(self) -> Iterator[None]:
        """Write a database's first snapshot through a rollback journal instead of the WAL.

        WAL mode writes every page twice, to the WAL and at the checkpoint
        that follows a large commit, with an fsync each. A rollback journal
        keeps only the pages that existed before the transaction, and in a
        database with no snapshot yet that is just its schema: the bench
        tree's 14 MB first record commits in 0.035 s instead of 0.085 s. The
        switch needs the database to itself; if another connection is open
        it fails at once and the write goes through the WAL as always. After
        the write the database is in WAL mode again (every connection asks
        for it too), so readers never wait on a later record.
        """
        if (
            self.conn.dialect != "sqlite"
            or self.conn.execute("SELECT 1 FROM snapshots LIMIT 1").fetchone()
        ):
            yield
            return
        try:
            # Fails at once, without the busy handler, while another connection is open.
            mode = self.conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0]
        except sqlite3.OperationalError:
            mode = "wal"
        if mode != "delete":
            yield
            return
        # FULL: in rollback mode NORMAL may skip a sync that a power cut needs.
        self.conn.execute("PRAGMA synchronous = FULL")
        try:
            yield
        finally:
            self.conn.execute("PRAGMA synchronous = NORMAL")
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError:
                pass  # a reader came in meanwhile; the next connection asks for WAL again

    def _ensure_host(self, host: str) -> int:
        host_id = self.host_id(host)
        if host_id is None:
            host_id = self.conn.insert_id("INSERT INTO hosts (name) VALUES (?)", (host,))
        return host_id

    def write_snapshot(
        self,
        host: str,
        taken_us: int,
        facts: Iterable[Fact | FactBlock],
        errors: list[CollectionError],
        cache_updates: dict[str, CachedStat],
        started: float | None = None,
        config: ConfigInfo | None = None,
        key_fingerprint: str | None = None,
    ) -> SnapshotResult:
        """Store one snapshot: new versions for changed facts, closed ones for removed facts.

        FactBlocks are expanded only when something changed. `config`, the
        config the facts were collected with, is stored with the snapshot; a
        fact that left or entered its scope is closed or opened like any other
        but is not counted as a change. `key_fingerprint`, that of the secret
        key the secrets were digested with, is kept with the host.

        A fact covered by a collection error is neither compared nor closed: it
        keeps its last version, so a read failure never looks like a removal.
        When the digest of everything collected equals the last snapshot's,
        nothing changed and only the snapshot row is written.
        """
        started = time.monotonic() if started is None else started
        facts = list(facts)
        # Of everything collected, duplicates included: the same list means the
        # same state, and an unchanged record need not build `unique` at all.
        digest = state_digest(facts)
        errors_json = _errors_json(errors)
        return self._retrying(
            lambda: self._write(
                host,
                taken_us,
                facts,
                errors,
                errors_json,
                digest,
                cache_updates,
                started,
                config,
                key_fingerprint,
            )
        )

    def _retrying(self, write: Callable[[], T]) -> T:
        """Run `write` in one transaction; on PostgreSQL, again (a few times) if the server
        aborted it to break a deadlock or a serialization conflict.

        Such an abort rolls the whole transaction back, so running it again
        from the start stores the record once. The writer takes its rows in
        one order (configs, then blobs and provenances by digest) so hosts
        writing the same rows queue instead of deadlocking; this is the
        bounded fallback should the server still pick a victim.
        """
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with self._first_write_journal(), write_transaction(self.conn):
                    hold_removal_lock(self.conn, "shared")
                    return write()
            except Exception as exc:
                if attempt == WRITE_ATTEMPTS or getattr(exc, "sqlstate", None) not in RETRY_STATES:
                    raise
            time.sleep(random.uniform(0.005, 0.02) * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(
        self,
        host: str,
        taken_us: int,
        facts: list[Fact | FactBlock],
        errors: list[CollectionError],
        errors_json: str | None,
        digest: bytes,
        cache_updates: dict[str, CachedStat],
        started: float,
        config: ConfigInfo | None,
        key_fingerprint: str | None,
    ) -> SnapshotResult:
        """The body of write_snapshot's transaction."""
        host_id = self._ensure_host(host)
        if key_fingerprint is not None:
            # The key these secrets were digested with; writes nothing while it is the same.
            self.conn.execute(
                "UPDATE hosts SET key_fingerprint = ? WHERE id = ? "
                "AND (key_fingerprint IS NULL OR key_fingerprint <> ?)",
                (key_fingerprint, host_id, key_fingerprint),
            )
        # The last snapshot's digest equals its stored state only if it had no
        # collection errors (covered facts kept values it did not collect).
        last = self._last_snapshot(host_id)
        new_errors = _new_errors(errors, last.errors if last is not None else None)
        config_id = self._config_id(config) if config is not None else None
        before = (
            self._config(last.config_id)
            if config is not None and last is not None and last.config_id not in (None, config_id)
            else None
        )
        change = _config_change(before, config)
        if (
            last is not None
            and last.n_errors == 0
            and last.state_digest is not None
            and bytes(last.state_digest) == digest
        ):
            n_facts = int(last.n_facts)  # the same list, so the same distinct facts
            snapshot_id = self._insert_snapshot(
                host_id, taken_us, started, n_facts, 0, errors, errors_json, digest, config_id
            )
            write_stat_cache(self.conn, host_id, cache_updates, set())
            return SnapshotResult(
                snapshot_id,
                taken_us,
                n_facts,
                0,
                errors,
                time.monotonic() - started,
                new_errors=new_errors,
                config_change=change,
            )

        scopes = (
            (before.scope, config.scope)
            if change is not None and before is not None and config is not None
            else None
        )
        fresh_blocks = self.conn.dialect == "sqlite"
        previous = self._previous_state(host_id, facts, scopes is not None, fresh_blocks)
        changes = delta(previous, facts, errors, scopes=scopes, fresh_blocks=fresh_blocks)
        if change is not None and changes.scope_moves is not None:
            change.untracked, change.tracked, change.covers_none = changes.scope_moves
        snapshot_id = self._insert_snapshot(
            host_id,
            taken_us,
            started,
            changes.n_facts,
            changes.changed,
            errors,
            errors_json,
            digest,
            config_id,
        )
        apply_delta(self.conn, host_id, snapshot_id, changes, previous.new_host)
        write_stat_cache(self.conn, host_id, cache_updates, changes.gone_files)
        return SnapshotResult(
            snapshot_id,
            taken_us,
            changes.n_facts,
            changes.changed,
            errors,
            time.monotonic() - started,
            new_errors=new_errors,
            config_change=change,
            values_read=len(previous.open_versions),
        )

    def _last_snapshot(self, host_id: int) -> LastSnapshot | None:
        row = self.conn.execute(
            "SELECT state_digest, n_errors, n_facts, config_id, errors FROM snapshots "
            "WHERE host_id = ? ORDER BY id DESC LIMIT 1",
            (host_id,),
        ).fetchone()
        return None if row is None else LastSnapshot._make(row)

    def _previous_state(
        self, host_id: int, facts: list[Fact | FactBlock], config_changed: bool, fresh_blocks: bool
    ) -> PreviousState:
        """What `delta` needs of the stored history; its costly parts only when it needs them."""
        open_versions: dict[Ident, OpenVersion] = {
            (r[0], r[1]): (r[2], r[3], r[4], r[5], bool(r[6]))
            for r in self.conn.execute(
                "SELECT f.subject, f.key, f.id, v.id, v.value, v.blob_sha256, v.secret "
                "FROM facts f JOIN versions v ON v.fact_id = f.id "
                "WHERE f.host_id = ? AND v.until_snapshot_id IS NULL",
                (host_id,),
            )
        }
        previous = PreviousState(
            open_versions, new_host=not open_versions and not self._has_facts(host_id)
        )
        if needs_known_subjects(previous, facts, fresh_blocks=fresh_blocks):
            query = "SELECT DISTINCT subject FROM facts WHERE host_id = ?"
            previous.known_subjects = {row[0] for row in self.conn.execute(query, (host_id,))}
        if needs_script_provenance(facts, config_changed):
            # The pattern is bound: psycopg would take a literal % for a placeholder.
            rows = self.conn.execute(
                f"SELECT f.subject, f.key, {PROVENANCE_SQL} FROM facts f "
                "JOIN versions v ON v.fact_id = f.id WHERE f.host_id = ? "
                f"AND v.until_snapshot_id IS NULL AND (f.subject LIKE ? OR {MOVING_SQL})",
                (host_id, "script:%"),
            )
            previous.script_provenance = {(r[0], r[1]): r[2] for r in rows}
        return previous

    # ------------------------------------------------------------ marks

    def add_mark(self, host: str, kind: str, at_us: int, note: str | None) -> int:
        """Record a stable/unstable/note mark for a host; returns its id."""
        if kind not in MARK_KINDS:
            raise ValueError(f"unknown mark kind {kind!r}")
        with write_transaction(self.conn):
            host_id = self._ensure_host(host)
            return self.conn.insert_id(
                "INSERT INTO marks (host_id, at_us, kind, note) VALUES (?, ?, ?, ?)",
                (host_id, at_us, kind, note),
            )

    def undo_mark(self, host: str, mark_id: int) -> tuple[int, str, str | None]:
        """Take back mark #mark_id of `host`: kept, with the moment it was undone, so the
        history still says it was made. Returns its (at_us, kind, note)."""
        from drift.errors import UnknownNameError
        from drift.timespec import local_time

        with write_transaction(self.conn):
            row = self.conn.execute(
                "SELECT m.at_us, m.kind, m.note, m.undone_us FROM marks m "
                "JOIN hosts h ON h.id = m.host_id WHERE m.id = ? AND h.name = ?",
                (mark_id, host),
            ).fetchone()
            if row is None:
                raise UnknownNameError(
                    f"no mark #{mark_id} for host {host} (`drift mark --list` lists its marks)"
                )
            if row[3] is not None:
                raise UnknownNameError(
                    f"mark #{mark_id} was already undone at {local_time(row[3])}: nothing to do"
                )
            self.conn.execute("UPDATE marks SET undone_us = ? WHERE id = ?", (now_us(), mark_id))
        return int(row[0]), str(row[1]), row[2]

    def add_errors(self, snapshot_id: int, errors: list[CollectionError]) -> None:
        """Add blind spots found after a snapshot was stored (a notifier that failed) to it."""
        with write_transaction(self.conn):
            rows = self.conn.execute(
                "SELECT errors FROM snapshots WHERE id = ?", (snapshot_id,)
            ).fetchall()
            if not rows:
                return
            kept = json.loads(rows[0][0]) if rows[0][0] else []
            both = kept + json.loads(_errors_json(errors) or "[]")
            self.conn.execute(
                "UPDATE snapshots SET errors = ?, n_errors = ? WHERE id = ?",
                (json.dumps(both, ensure_ascii=False), len(both), snapshot_id),
            )

    # ------------------------------------------------------------ the config's scope

    def _config_id(self, config: ConfigInfo) -> int:
        """The row of this config (path and digest), inserted the first time it is used."""
        path = config.path or ""
        query = "SELECT id FROM configs WHERE path = ? AND digest = ?"
        row = self.conn.execute(query, (path, config.digest)).fetchone()
        if row is None:
            # Another host of a fleet may insert the same config at the same moment.
            self.conn.execute(
                "INSERT INTO configs (path, digest, scope) VALUES (?, ?, ?) "
                "ON CONFLICT (path, digest) DO NOTHING",
                (path, config.digest, config.scope.to_json()),
            )
            row = self.conn.execute(query, (path, config.digest)).fetchone()
        return int(row[0])

    def _config(self, config_id: int) -> ConfigInfo | None:
        from drift.scope import ConfigInfo, Scope

        row = self.conn.execute(
            "SELECT path, digest, scope FROM configs WHERE id = ?", (config_id,)
        ).fetchone()
        if row is None:
            return None
        return ConfigInfo(row[0] or None, row[1], Scope.from_json(row[2]))

    def _has_facts(self, host_id: int) -> bool:
        query = "SELECT 1 FROM facts WHERE host_id = ? LIMIT 1"
        return self.conn.execute(query, (host_id,)).fetchone() is not None

    def _insert_snapshot(
        self,
        host_id: int,
        taken_us: int,
        started: float,
        n_facts: int,
        n_changed: int,
        errors: list[CollectionError],
        errors_json: str | None,
        digest: bytes,
        config_id: int | None,
    ) -> int:
        duration_ms = int((time.monotonic() - started) * 1000)
        return self.conn.insert_id(
            "INSERT INTO snapshots (host_id, taken_us, duration_ms, n_facts, n_changed, "
            "n_errors, errors, state_digest, config_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                host_id,
                taken_us,
                duration_ms,
                n_facts,
                n_changed,
                len(errors),
                errors_json,
                digest,
                config_id,
            ),
        )


def _errors_json(errors: list[CollectionError]) -> str | None:
    """How a snapshot keeps its collection errors (None: it had none)."""
    if not errors:
        return None
    return json.dumps(
        [{"subject": e.subject, "key": e.key, "message": e.message} for e in errors],
        ensure_ascii=False,
    )


def _config_change(before: ConfigInfo | None, after: ConfigInfo | None) -> ConfigChange | None:
    """How the config changed between two records, if it did (None for the same one)."""
    if before is None or after is None:
        return None
    if (before.path, before.digest) == (after.path, after.digest):
        return None
    return ConfigChange(before.path, after.path, before.scope.changes_to(after.scope))


def _new_errors(errors: list[CollectionError], previous_json: str | None) -> list[CollectionError]:
    """The errors not already in the previous snapshot's (same subject, key and message)."""
    if not errors:
        return []
    seen = {
        (e.get("subject"), e.get("key"), e.get("message"))
        for e in (json.loads(previous_json) if previous_json else [])
    }
    return [e for e in errors if (e.subject, e.key, e.message) not in seen]


def undo_mark(db: DbUrl, host: str, mark_id: int) -> tuple[int, str, str | None]:
    """HistoryWriter.undo_mark on the history at `db`, which must exist."""
    with HistoryWriter.open(db, create=False) as writer:
        return writer.undo_mark(host, mark_id)


def add_mark(db: DbUrl, host: str, kind: str, at_us: int, note: str | None) -> int:
    """HistoryWriter.add_mark on the history at `db`, which must exist: a mark belongs to one."""
    with HistoryWriter.open(db, create=False) as writer:
        return writer.add_mark(host, kind, at_us, note)


__all__ = [
    "MARK_KINDS",
    "ConfigChange",
    "HistoryWriter",
    "LastSnapshot",
    "SnapshotResult",
    "add_mark",
    "now_us",
    "undo_mark",
]
