"""Records kept while the central database was unreachable, and shipping them to it.

A host of a fleet records into one PostgreSQL. When it cannot reach it,
`drift record` writes to a local SQLite history instead, the spool (an
ordinary drift database: `drift since --db SPOOL` reads it). The next record
that reaches the central database, or `drift push`, ships what the spool
holds that the central one does not, oldest first, before anything newer is
written there, each snapshot in one transaction: the state the spool had at
that record (values, long texts, secrets as their keyed digests, provenance),
its collection errors, its config and its time.

Shipping is idempotent: a spooled snapshot at or before the host's latest
central record is skipped, so a push cut short is simply run again. Once
every snapshot is shipped the spool is removed (a later outage starts a new
one from a whole state).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from drift.facts import CollectionError, Fact
from drift.store.files import sqlite_exists, sqlite_side_files
from drift.store.query import History, StoredVersion
from drift.store.urls import DbUrl, default_db_path, resolve_db_url
from drift.store.window import state_after
from drift.store.writer import HistoryWriter

SPOOL_NAME = "spool.db"


@dataclass(frozen=True)
class Shipped:
    """What a push did: snapshots shipped, and those the central history already had."""

    shipped: int
    skipped: int
    spool: Path


def spool_path(db: DbUrl, configured: str | None) -> Path | None:
    """Where a host keeps its records while `db` is unreachable: the config's `spool`, else
    `spool.db` in drift's state folder. None for an SQLite history (it is local already)."""
    if db.sqlite_path is not None:
        return None
    if configured:
        return Path(configured)
    return default_db_path().parent / SPOOL_NAME


def ship(
    spool: Path, central: HistoryWriter, host: str, progress: Callable[[str], None] | None = None
) -> Shipped:
    """Ship `host`'s spooled snapshots the central history lacks, oldest first; remove the
    spool when it holds nothing more. The caller holds the central record lock."""
    if not sqlite_exists(spool):
        return Shipped(0, 0, spool)
    url = resolve_db_url(str(spool))
    latest = central.conn.execute(
        "SELECT max(s.taken_us) FROM snapshots s JOIN hosts h ON h.id = s.host_id WHERE h.name = ?",
        (host,),
    ).fetchone()
    after_us = int(latest[0]) if latest and latest[0] is not None else None
    shipped = skipped = 0
    with History.open(url, host) as spooled:
        configs = spooled.configs()
        fingerprint = _fingerprint(spooled)
        snaps = spooled.snapshots_between(0, spooled.latest().id)
        state: dict[tuple[str, str], StoredVersion] | None = None
        previous = 0
        for snap in snaps:
            state = (
                spooled.state_at(snap.id)
                if state is None
                else state_after(spooled, state, previous, snap.id)
            )
            previous = snap.id
            if after_us is not None and snap.taken_us <= after_us:
                skipped += 1
                continue
            spooled.load_texts(state.values())
            central.write_snapshot(
                host,
                snap.taken_us,
                [_fact(spooled, v) for v in state.values()],
                [_error(e) for e in snap.errors],
                {},
                config=configs.get(snap.config_id) if snap.config_id is not None else None,
                key_fingerprint=fingerprint,
            )
            shipped += 1
            if progress is not None:
                progress(f"push: {shipped:,} of {len(snaps) - skipped:,} spooled snapshots shipped")
    _remove(spool)
    return Shipped(shipped, skipped, spool)


def _fact(history: History, version: StoredVersion) -> Fact:
    value = history.text(version) if version.blob_sha256 is not None else (version.value or "")
    return Fact(version.subject, version.key, value, dict(version.provenance), version.secret)


def _error(entry: dict[str, object]) -> CollectionError:
    key = entry.get("key")
    return CollectionError(
        str(entry["subject"]), None if key is None else str(key), str(entry["message"])
    )


def _fingerprint(history: History) -> str | None:
    row = history.conn.execute(
        "SELECT key_fingerprint FROM hosts WHERE id = ?", (history.host_id,)
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _remove(spool: Path) -> None:
    for path in (spool, *sqlite_side_files(spool)):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
