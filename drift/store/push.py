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
central record is skipped, so a push cut short is simply run again. Once a
host's snapshots are shipped, they leave the spool (the file itself when it
holds no other host's), so a later outage starts afresh from a whole state.
Where the spool is, whether it may be trusted, and how a damaged one is set
aside is `drift.store.spool`'s.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from drift.errors import NoHistoryError, RecordLocked
from drift.facts import CollectionError, Fact
from drift.store.files import sqlite_exists, sqlite_side_files
from drift.store.query import History, StoredVersion
from drift.store.spool import (
    check_spool_place,
    drop_host,
    is_damage,
    readable_copy,
    set_aside,
    spool_damage,
    spool_too_new,
    whole,
)
from drift.store.urls import resolve_db_url
from drift.store.window import state_after
from drift.store.writer import HistoryWriter

# How long shipping waits for a record of another host writing into a shared spool.
SPOOL_WAIT_S = 10.0


@dataclass(frozen=True)
class Shipped:
    """What a push did: snapshots shipped, and those the central history already had; and,
    for a damaged spool, why, where it was set aside and whether some could not be read."""

    shipped: int
    skipped: int
    spool: Path
    damage: str | None = None
    set_aside: Path | None = None
    unread: bool = False
    newer: bool = False  # written by a newer drift: set aside unread

    def warning(self, host: str, into: str) -> str | None:
        """One line saying where a damaged spool went and what of it was saved, or None."""
        if self.set_aside is None:
            return None
        if self.newer:
            return (
                f"drift: spool {self.spool} cannot be read by this drift ({self.damage}): set "
                f"aside as {self.set_aside}, unread; the drift that wrote it can push it "
                "with `drift push`"
            )
        if self.unread:
            saved = (
                f"{_snapshots(self.shipped)} of host {host} could be read from it and "
                f"{'was' if self.shipped == 1 else 'were'} {into}; "
                "the rest could not be read and stays there"
            )
        elif self.shipped + self.skipped == 0:
            saved = f"it held no snapshot of host {host}"
        else:
            saved = f"all {_snapshots(self.shipped)} of host {host} in it were read and {into}"
        return (
            f"drift: spool {self.spool} is damaged ({self.damage}): set aside as "
            f"{self.set_aside}; {saved}"
        )


def _snapshots(count: int) -> str:
    return f"{count:,} snapshot{'' if count == 1 else 's'}"


def ship(
    spool: Path, central: HistoryWriter, host: str, progress: Callable[[str], None] | None = None
) -> Shipped:
    """Ship `host`'s spooled snapshots the central history lacks, oldest first, then remove
    them from the spool. The caller holds the central record lock.

    A spool another user could have written is refused (StoreError). A damaged
    one is set aside first, and what can still be read of it is shipped.
    """
    if not sqlite_exists(spool):
        return Shipped(0, 0, spool)
    check_spool_place(spool)
    damage = spool_damage(spool)
    if damage is not None:
        return salvage(set_aside(spool), spool, damage, central, host, progress)
    newer = spool_too_new(spool)
    if newer is not None:  # not read at all: this drift could misread it
        return Shipped(0, 0, spool, newer, set_aside(spool), unread=True, newer=True)
    done = _ship_from(spool, central, host, progress)
    if done.damage is not None:  # found on the way: what was read is shipped
        aside = set_aside(spool)
        return Shipped(done.shipped, done.skipped, spool, done.damage, aside, done.unread)
    if done.shipped or done.skipped:
        _remove_shipped(spool, host, done.last_id)
    return Shipped(done.shipped, done.skipped, spool)


def salvage(
    aside: Path,
    spool: Path,
    damage: str,
    into: HistoryWriter,
    host: str,
    progress: Callable[[str], None] | None = None,
) -> Shipped:
    """Copy what can still be read of `host`'s snapshots in a damaged spool, set aside as
    `aside`, into `into` (the central database, or a new spool); the file stays as it is."""
    with readable_copy(aside) as copy:
        if not whole(copy):
            # Pages are missing or torn: rows may still read, but some with the wrong
            # values. Nothing is shipped; every byte stays in the set-aside file.
            return Shipped(0, 0, spool, damage, aside, unread=True)
        done = _ship_from(copy, into, host, progress)
    return Shipped(done.shipped, done.skipped, spool, damage, aside, done.unread)


@dataclass
class _Read:
    shipped: int = 0
    skipped: int = 0
    last_id: int = 0  # the spool's last snapshot of the host that was read
    damage: str | None = None  # what stopped the reading, when SQLite found the file damaged
    unread: bool = False  # snapshots of the host were left unread


def _ship_from(
    path: Path, central: HistoryWriter, host: str, progress: Callable[[str], None] | None
) -> _Read:
    """Ship the host's snapshots in the SQLite history at `path`, oldest first, up to the
    first SQLite cannot read (a damaged file: said in `damage`, and the rest left)."""
    latest = central.conn.execute(
        "SELECT max(s.taken_us) FROM snapshots s JOIN hosts h ON h.id = s.host_id WHERE h.name = ?",
        (host,),
    ).fetchone()
    after_us = int(latest[0]) if latest and latest[0] is not None else None
    done = _Read()
    total = 0
    try:
        with History.open(resolve_db_url(str(path)), host) as spooled:
            configs = spooled.configs()
            fingerprint = _fingerprint(spooled)
            snaps = spooled.snapshots_between(0, spooled.latest().id)
            total = len(snaps)
            state: dict[tuple[str, str], StoredVersion] | None = None
            previous = 0
            for snap in snaps:
                state = (
                    spooled.state_at(snap.id)
                    if state is None
                    else state_after(spooled, state, previous, snap.id)
                )
                previous = done.last_id = snap.id
                if after_us is not None and snap.taken_us <= after_us:
                    done.skipped += 1
                    continue
                spooled.load_texts(state.values())
                facts = [_fact(spooled, v) for v in state.values()]
                central.write_snapshot(
                    host,
                    snap.taken_us,
                    facts,
                    [_error(e) for e in snap.errors],
                    {},
                    config=configs.get(snap.config_id) if snap.config_id is not None else None,
                    key_fingerprint=fingerprint,
                )
                done.shipped += 1
                if progress is not None:
                    progress(
                        f"push: {done.shipped:,} of {total - done.skipped:,} "
                        "spooled snapshots shipped"
                    )
    except NoHistoryError:
        return done  # the spool holds other hosts' records only
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        done.damage = str(exc)
    except Exception as exc:  # a damaged file can fail anywhere in drift's reading of it
        if not sqlite_exists(path) or spool_damage(path) is None:
            raise
        done.damage = f"{type(exc).__name__}: {exc}"
    done.unread = done.damage is not None and done.shipped + done.skipped < max(total, 1)
    return done


def _remove_shipped(spool: Path, host: str, last_id: int) -> None:
    """Take what was shipped of `host` out of the spool: the whole file when it holds no other
    host's records (nor a newer one of this host's), else this host's rows only."""
    url = resolve_db_url(str(spool))
    try:
        with HistoryWriter.open(url, create=False) as local, _spool_lock(local, host):
            _take_out(local, spool, host, last_id)
    except RecordLocked:
        pass  # another host's record held the spool all along: the next push skips these


def _take_out(local: HistoryWriter, spool: Path, host: str, last_id: int) -> None:
    """`_remove_shipped` with the spool's lock held."""
    host_id = local.host_id(host)
    if host_id is None:
        return
    newer = local.conn.execute(
        "SELECT count(*) FROM snapshots WHERE host_id = ? AND id > ?", (host_id, last_id)
    ).fetchone()[0]
    if newer:
        return  # recorded meanwhile; the next push skips what this one shipped
    others = local.conn.execute("SELECT count(*) FROM hosts WHERE id <> ?", (host_id,))
    if others.fetchone()[0]:
        drop_host(local.conn, host_id)
        return
    local.close()
    _remove(spool)


@contextmanager
def _spool_lock(local: HistoryWriter, host: str) -> Iterator[None]:
    """The spool's record lock, waited for a while: a record of another host sharing the
    spool may be writing into it."""
    deadline = time.monotonic() + SPOOL_WAIT_S
    while True:
        try:
            with local.record_lock(host):
                yield
            return
        except RecordLocked:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


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
