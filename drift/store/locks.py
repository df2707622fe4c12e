"""The locks of a history: one record of a host at a time, one migration at a time, and
the writers' share against a prune's removal of what no version uses any more.

An SQLite history is locked with a flock on its `.lock` companion file; a
PostgreSQL one with an advisory lock per host. A second record never waits:
it fails at once with RecordLocked and writes nothing. A migration waits for
the one running (and on SQLite for a running record) and then finds the
schema at head: two `drift db upgrade` or first records racing on a fresh
database migrate it once. On PostgreSQL, every write transaction holds the
removal lock shared and a prune's removal of unused rows holds it exclusive,
so a writer never reuses a blob, provenance or fact row a prune is deleting.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager

from drift.errors import RecordLocked
from drift.store.db import DbapiConnection, connect_dbapi
from drift.store.urls import DbUrl


@contextmanager
def record_lock(conn: DbapiConnection, db: DbUrl, host: str) -> Iterator[None]:
    """Exclusive right to record `host`: a second record fails at once with RecordLocked."""
    if db.sqlite_path is not None:
        lock_path = f"{db.sqlite_path}.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RecordLocked(
                    f"another drift record is running on {db.sqlite_path}; this one wrote nothing"
                ) from None
            yield
        finally:
            os.close(fd)  # closing releases the flock
        return
    key = _advisory_key(host)
    got = conn.execute("SELECT pg_try_advisory_lock(?)", (key,)).fetchone()[0]
    if not got:
        raise RecordLocked(
            f"another drift record is running for host {host}; this one wrote nothing"
        )
    try:
        yield
    finally:
        conn.execute("SELECT pg_advisory_unlock(?)", (key,))


@contextmanager
def migration_lock(db: DbUrl) -> Iterator[None]:
    """Wait for the right to migrate this database (released on leaving the block)."""
    if db.sqlite_path is not None:
        fd = os.open(f"{db.sqlite_path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits for a running record or migration
            yield
        finally:
            os.close(fd)
        return
    conn = connect_dbapi(db)
    try:
        # A session lock on a connection of its own: Alembic's connection commits as it likes.
        conn.execute("SELECT pg_advisory_lock(?)", (_named_key("drift-migrate"),))
        yield
    finally:
        conn.close()  # ends the session, and with it the lock


# Taken in every write transaction on PostgreSQL (shared) and by a prune's removal of
# unused rows (exclusive); transaction locks, released at commit or rollback.
REMOVAL_LOCK_SQL = {
    "shared": "SELECT pg_advisory_xact_lock_shared(?)",
    "exclusive": "SELECT pg_advisory_xact_lock(?)",
}


def hold_removal_lock(conn: DbapiConnection, mode: str) -> None:
    """Inside a PostgreSQL transaction: hold the removal lock `shared` or `exclusive` until it ends.

    SQLite needs none: its write transactions (BEGIN IMMEDIATE) already take turns.
    """
    if conn.dialect == "postgresql":
        conn.execute(REMOVAL_LOCK_SQL[mode], (_named_key("drift-removal"),))


def record_running(db: DbUrl, host: str) -> bool:
    """Whether a `drift record` of this history holds its lock right now.

    Only looks: taking the lock, even for an instant, could make a record
    that starts at that moment give up (it never waits).
    """
    if db.sqlite_path is not None:
        return _flock_held(f"{db.sqlite_path}.lock")
    conn = connect_dbapi(db)
    try:
        key = _advisory_key(host)
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND objsubid = 1 AND classid::bigint = ? AND objid::bigint = ?",
            ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
        ).fetchone()
        return bool(row[0])
    finally:
        conn.close()


def _advisory_key(host: str) -> int:
    """The PostgreSQL advisory lock that a record of `host` holds (a signed 64-bit key)."""
    return _named_key(f"drift-record:{host}")


def _named_key(name: str) -> int:
    """A PostgreSQL advisory lock key (signed 64 bits) for a name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def _flock_held(path: str) -> bool:
    """Whether some process holds a flock on `path`, read from /proc/locks (Linux)."""
    try:
        inode = os.stat(path).st_ino
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2181023 0 EOF"; a waiter has "->" after "1:".
    # By inode alone: on overlayfs the device shown is the lower file system's.
    for line in lines:
        fields = line.split()
        if "FLOCK" in fields and "->" not in fields and len(fields) >= 6:
            if fields[5].rsplit(":", 1)[-1] == str(inode):
                return True
    return False
