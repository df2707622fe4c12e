"""Retention: drop the history older than a horizon, keeping every fact's value at it.

Per host, the oldest kept snapshot is the last one taken at or before the
horizon (so the state at the horizon itself can still be asked for), and
every snapshot after it is kept as it was. A version is in the state at
snapshot S when first <= S < until, so for every kept S:

- a version closed at or before the oldest kept snapshot K is in no kept
  state: it goes;
- a version begun before K and still open at K is re-pointed to begin at K:
  for every S >= K, first <= S holds before and after;
- the snapshots before K then have no version pointing at them, and go,
  with the marks taken before K's time;
- what no version uses any more goes last: facts of the host with no
  version, blobs, provenances.

The work is done in short transactions (a batch of rows each), so a
`drift record` running meanwhile waits a moment, never its whole busy
timeout: the re-pointing comes first, so that from its commit on every kept
snapshot reads the same state whatever point the prune has reached. On
PostgreSQL the removal of unused rows holds the removal lock exclusive
(drift.store.locks), so no writer reuses a row as it goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from drift.names import check_known
from drift.store.db import DbapiConnection, connect_dbapi, write_transaction
from drift.store.locks import hold_removal_lock
from drift.store.schema import check_revision, current_revision_dbapi
from drift.store.urls import DbUrl

# Rows of versions (by id range) or snapshots handled in one transaction: a few tenths
# of a second each, so a record waiting on one never comes near its busy timeout.
BATCH = 20_000


@dataclass
class HostPrune:
    """What a prune drops (or, dry, would drop) of one host's history."""

    host: str
    host_id: int
    keep_from: int  # the oldest snapshot kept, the state at the horizon
    keep_from_us: int
    snapshots: int = 0
    versions: int = 0
    repointed: int = 0
    marks: int = 0
    stable_marks: int = 0  # of `marks`: a stable mark is where `drift since` starts from
    first_us: int = 0  # the host's oldest record: the history dropped runs from it to keep_from

    def dropped_span_us(self) -> int:
        """How much time the dropped records cover."""
        return max(0, self.keep_from_us - self.first_us) if self.snapshots else 0


@dataclass
class PruneResult:
    """A prune of every host of a history (or what it would do, with `dry_run`)."""

    horizon_us: int
    dry_run: bool
    hosts: list[HostPrune] = field(default_factory=list)
    facts: int = 0
    blobs: int = 0
    provenances: int = 0


def prune_history(
    db: DbUrl,
    horizon_us: int,
    *,
    dry_run: bool = False,
    host: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> PruneResult:
    """Drop every host's history (or only `host`'s) older than `horizon_us`, keeping each
    fact's value there.

    With `dry_run`, only count what would go (unused blobs and provenances are
    found once the versions have gone, so a dry run does not count them).
    """
    say = progress or (lambda _text: None)
    conn = connect_dbapi(db)
    try:
        check_revision(current_revision_dbapi(conn))
        result = PruneResult(horizon_us, dry_run, _plan(conn, horizon_us, host))
        if dry_run:
            return result
        with _foreign_keys_checked_cheaply(conn, say):
            for plan in result.hosts:
                _prune_host(conn, plan, say)
            say("dropping what no version uses any more")
            with write_transaction(conn):
                hold_removal_lock(conn, "exclusive")
                result.facts, result.blobs, result.provenances = _drop_unused(conn, result.hosts)
        return result
    finally:
        conn.close()


# The columns of versions that point at rows a prune deletes, with no index of their own
# (an unchanged record would pay for one every minute). PostgreSQL checks each deleted
# row against them: without an index, a scan of versions per row (a year's prune ran
# for hours); the prune builds these for its own time and drops them after.
PRUNE_INDEXES = {
    "ix_prune_versions_first": "first_snapshot_id",
    "ix_prune_versions_until": "until_snapshot_id",
    "ix_prune_versions_blob": "blob_sha256",
    "ix_prune_versions_provenance": "provenance_id",
}


@contextmanager
def _foreign_keys_checked_cheaply(
    conn: DbapiConnection, say: Callable[[str], None]
) -> Iterator[None]:
    """Make the foreign key checks of the deletes cheap for the prune's time.

    SQLite: off. Nothing points at a row the prune deletes (that is its
    order), and SQLite would check each deleted snapshot by a scan of
    versions; PRAGMA foreign_key_check stays clean (tested). PostgreSQL:
    checked, with indexes built CONCURRENTLY (records go on meanwhile) and
    dropped after; one a crashed prune left is dropped by the next.
    """
    if conn.dialect == "sqlite":
        conn.execute("PRAGMA foreign_keys = OFF")
        yield
        return
    say("indexing versions for the prune")
    for name, column in PRUNE_INDEXES.items():
        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # left by a crashed prune
        conn.execute(f"CREATE INDEX CONCURRENTLY {name} ON versions ({column})")
    try:
        yield
    finally:
        for name in PRUNE_INDEXES:
            conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


def _plan(conn: DbapiConnection, horizon_us: int, only: str | None) -> list[HostPrune]:
    """Per host with something older than the horizon: its oldest kept snapshot, and counts."""
    plans = []
    hosts = conn.execute("SELECT id, name FROM hosts ORDER BY name").fetchall()
    # A mistyped --host would find nothing older than the horizon: a false all-clear.
    check_known("host", only, [name for _id, name in hosts], "in this database")
    for host_id, name in hosts:
        if only is not None and name != only:
            continue
        row = conn.execute(
            "SELECT id, taken_us FROM snapshots WHERE host_id = ? AND taken_us <= ? "
            "ORDER BY taken_us DESC, id DESC LIMIT 1",
            (host_id, horizon_us),
        ).fetchone()
        if row is None:
            continue  # all of it is newer than the horizon
        plan = HostPrune(name, int(host_id), int(row[0]), int(row[1]))
        keep = plan.keep_from
        plan.snapshots = _count(
            conn, "SELECT count(*) FROM snapshots WHERE host_id = ? AND id < ?", host_id, keep
        )
        of_host = "FROM versions v JOIN facts f ON f.id = v.fact_id WHERE f.host_id = ?"
        plan.versions = _count(
            conn, f"SELECT count(*) {of_host} AND v.until_snapshot_id <= ?", host_id, keep
        )
        plan.repointed = _count(
            conn,
            f"SELECT count(*) {of_host} AND v.first_snapshot_id < ? "
            "AND (v.until_snapshot_id IS NULL OR v.until_snapshot_id > ?)",
            host_id,
            keep,
            keep,
        )
        plan.marks = _count(
            conn,
            "SELECT count(*) FROM marks WHERE host_id = ? AND at_us < ?",
            host_id,
            plan.keep_from_us,
        )
        plan.stable_marks = int(
            conn.execute(
                "SELECT count(*) FROM marks WHERE host_id = ? AND at_us < ? AND kind = ? "
                "AND undone_us IS NULL",
                (host_id, plan.keep_from_us, "stable"),
            ).fetchone()[0]
        )
        plan.first_us = _count(
            conn, "SELECT coalesce(min(taken_us), 0) FROM snapshots WHERE host_id = ?", host_id
        )
        if plan.snapshots or plan.versions or plan.repointed or plan.marks:
            plans.append(plan)
    return plans


# A prune that drops more than this much of a host's history, or any stable mark, is
# confirmed first (`drift prune --yes`): a mistyped --keep must not drop it at once.
CONFIRM_SPAN_US = 86_400 * 1_000_000


def reasons_to_confirm(result: PruneResult) -> list[str]:
    """What makes this prune one to confirm: per host, more than a day of history dropped,
    or a stable mark; empty when it drops less."""
    reasons = []
    for plan in result.hosts:
        span = plan.dropped_span_us()
        if span > CONFIRM_SPAN_US:
            reasons.append(f"{span_text(span)} of {plan.host}'s history")
        if plan.stable_marks:
            many = "s" if plan.stable_marks > 1 else ""
            reasons.append(f"{plan.stable_marks:,} stable mark{many} of {plan.host}")
    return reasons


def span_text(us: int) -> str:
    """`3 days 4 hours`, `26 minutes`: a length of history, as people say it."""
    minutes = us // 60_000_000
    days, rest = divmod(minutes, 1440)
    hours, minutes = divmod(rest, 60)
    parts = [(days, "day"), (hours, "hour")] if days else [(hours, "hour"), (minutes, "minute")]
    shown = [f"{n:,} {unit}{'' if n == 1 else 's'}" for n, unit in parts if n]
    return " ".join(shown) or "under a minute"


def _count(conn: DbapiConnection, sql: str, *params: int) -> int:
    return int(conn.execute(sql, params).fetchone()[0])


def _prune_host(conn: DbapiConnection, plan: HostPrune, say: Callable[[str], None]) -> None:
    """One host's part, in batches: re-point, drop versions, snapshots, then marks."""
    keep = plan.keep_from
    facts_of_host = "fact_id IN (SELECT id FROM facts WHERE host_id = ?)"
    with write_transaction(conn):
        conn.execute(
            f"UPDATE versions SET first_snapshot_id = ? WHERE {facts_of_host} "
            "AND first_snapshot_id < ? AND (until_snapshot_id IS NULL OR until_snapshot_id > ?)",
            (keep, plan.host_id, keep, keep),
        )
    low, high = conn.execute("SELECT min(id), max(id) FROM versions").fetchone()
    for start in range(int(low or 0), int(high or 0) + 1, BATCH):
        say(f"{plan.host}: dropping versions ({start - int(low or 0):,} of {int(high or 0):,})")
        with write_transaction(conn):
            conn.execute(
                f"DELETE FROM versions WHERE id >= ? AND id < ? AND until_snapshot_id <= ? "
                f"AND {facts_of_host}",
                (start, start + BATCH, keep, plan.host_id),
            )
    first = conn.execute(
        "SELECT min(id) FROM snapshots WHERE host_id = ?", (plan.host_id,)
    ).fetchone()[0]
    for start in range(int(first or keep), keep, BATCH):
        say(f"{plan.host}: dropping snapshots (#{start:,} of #{keep:,})")
        with write_transaction(conn):
            conn.execute(
                "DELETE FROM snapshots WHERE host_id = ? AND id >= ? AND id < ?",
                (plan.host_id, start, min(start + BATCH, keep)),
            )
    with write_transaction(conn):
        conn.execute(
            "DELETE FROM marks WHERE host_id = ? AND at_us < ?", (plan.host_id, plan.keep_from_us)
        )


def _drop_unused(conn: DbapiConnection, plans: list[HostPrune]) -> tuple[int, int, int]:
    """Delete the pruned hosts' facts without a version, and blobs and provenances no
    version uses; how many of each."""
    facts = 0
    for plan in plans:
        facts += conn.execute(
            "DELETE FROM facts WHERE host_id = ? "
            "AND NOT EXISTS (SELECT 1 FROM versions v WHERE v.fact_id = facts.id)",
            (plan.host_id,),
        ).rowcount
    blobs = conn.execute(_unused_sql(conn, "blobs", "sha256", "blob_sha256")).rowcount
    provenances = conn.execute(_unused_sql(conn, "provenances", "id", "provenance_id")).rowcount
    return int(facts), int(blobs), int(provenances)


def _unused_sql(conn: DbapiConnection, table: str, key: str, column: str) -> str:
    """DELETE the rows of `table` that no version points at through `column`.

    SQLite reads the used keys once into a set for NOT IN (versions has no
    index on the column). PostgreSQL hashes NOT IN's set only while it fits
    in work_mem, and a year's 140k provenance ids do not: it then scans the
    list per row (34 s). NOT EXISTS is an anti-join on the prune's index.
    """
    if conn.dialect == "sqlite":
        return (
            f"DELETE FROM {table} WHERE {key} NOT IN "
            f"(SELECT {column} FROM versions WHERE {column} IS NOT NULL)"
        )
    return (
        f"DELETE FROM {table} t WHERE NOT EXISTS "
        f"(SELECT 1 FROM versions v WHERE v.{column} = t.{key})"
    )


def vacuum_sqlite(db: DbUrl) -> bool:
    """VACUUM an SQLite history after a prune, giving its free pages back; False if a
    record held it (its free pages are then reused by later records)."""
    from drift.store.schema import reclaim_free_pages

    return db.sqlite_path is not None and reclaim_free_pages(db.sqlite_path)
