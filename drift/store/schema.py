"""Whether the database's schema is the one this drift speaks, and bringing it there.

A fresh database is created at head, an older one is migrated by Alembic in
process (an SQLite file backed up first), one newer than this drift is
refused. `drift record` only checks (one query, no Alembic): it runs from
cron and must never migrate by itself.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drift.errors import SchemaTooNew, SchemaTooOld, StoreError
from drift.store.db import DbapiConnection, connect_dbapi, open_engine
from drift.store.files import create_private_sqlite
from drift.store.locks import migration_lock
from drift.store.urls import DbUrl

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

# The newest migration this drift ships, and every revision it can read.
# tests/test_store_schema.py checks these against migrations/versions.
HEAD_REVISION = "0007"
KNOWN_REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007")


def current_revision_dbapi(conn: DbapiConnection) -> str | None:
    """The schema revision stamped in the database; None for a database with no drift tables.

    One query on the common path, so `drift record` checks its schema without Alembic.
    """
    try:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except Exception as exc:  # sqlite3.OperationalError / psycopg.errors.UndefinedTable
        if "alembic_version" not in str(exc) and "no such table" not in str(exc):
            raise
        if conn.dialect == "postgresql":
            conn.raw.rollback() if not conn.raw.autocommit else None
        if _has_tables(conn):
            raise StoreError(
                "this database has tables but no drift schema version: it is not a drift database"
            ) from None
        return None
    if not rows:
        return None
    return str(rows[0][0])


def _has_tables(conn: DbapiConnection) -> bool:
    if conn.dialect == "sqlite":
        sql = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'"
    else:
        sql = (
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name = 'snapshots'"
        )
    return bool(conn.execute(sql).fetchone()[0])


def check_revision(
    revision: str | None, *, head: str = HEAD_REVISION, known: tuple[str, ...] = KNOWN_REVISIONS
) -> None:
    """Refuse a database newer than this drift, and name `drift db upgrade` for an older one."""
    if revision == head:
        return
    if revision is None:
        raise SchemaTooOld("this database has no drift schema yet: run `drift db upgrade`")
    if revision not in known:
        raise SchemaTooNew(
            f"this database was written by a newer drift (schema {revision}, this "
            f"drift knows up to {head}): upgrade drift to read it"
        )
    raise SchemaTooOld(
        f"this database has schema {revision}, this drift needs {head}: "
        "run `drift db upgrade` (SQLite files are backed up first)"
    )


def revision_status(
    revision: str | None, *, head: str = HEAD_REVISION, known: tuple[str, ...] = KNOWN_REVISIONS
) -> str:
    """What to do about a database at `revision`, in words (`drift db current`)."""
    if revision == head:
        return "up to date"
    if revision is not None and revision not in known:
        return "written by a newer drift: upgrade drift to read it; `drift db upgrade` cannot"
    return "run `drift db upgrade`"


def require_schema(db: DbUrl) -> None:
    """Raise unless the database exists at this drift's schema (for read commands)."""
    conn = connect_dbapi(db)
    try:
        check_revision(current_revision_dbapi(conn))
    finally:
        conn.close()


# ---------------------------------------------------------------- Alembic (migrations)


def alembic_config(connection: Connection, script_location: Path | None = None) -> Any:
    """An in-process Alembic Config running on `connection` (never shells out to alembic)."""
    from alembic.config import Config

    from drift.resources import resource_dir

    cfg = Config()
    cfg.set_main_option("script_location", str(script_location or resource_dir("migrations")))
    cfg.attributes["connection"] = connection
    return cfg


def migration_head(script_location: Path | None = None) -> str:
    """The single head revision of the migrations folder (raises if there are several)."""
    from alembic.script import ScriptDirectory

    from drift.resources import resource_dir

    script = ScriptDirectory(str(script_location or resource_dir("migrations")))
    heads = script.get_heads()
    if len(heads) != 1:
        raise StoreError(f"migrations have {len(heads)} heads ({', '.join(heads)}): expected one")
    return heads[0]


def database_revision(engine: Engine) -> str | None:
    """The revision stamped in the database, via Alembic's MigrationContext."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def backup_sqlite(path: Path, revision: str | None) -> Path:
    """Copy an SQLite database consistently (online backup API) before migrating it."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.bak-{revision or 'empty'}-{stamp}")
    # A copy of the history is as private as the history, whatever mode the original has.
    create_private_sqlite(target)
    src = sqlite3.connect(str(path))
    try:
        dst = sqlite3.connect(str(target))
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()
    return target


@dataclass(frozen=True)
class UpgradeResult:
    before: str | None
    after: str
    backup: Path | None


def upgrade_database(
    db: DbUrl, *, script_location: Path | None = None, known: tuple[str, ...] = KNOWN_REVISIONS
) -> UpgradeResult:
    """Migrate the database to head: refuse a newer one, back up an SQLite file first.

    One migration at a time (drift.store.locks.migration_lock): a second waits,
    then finds the schema at head and does nothing.
    """
    if db.sqlite_path is not None:
        # Created private, and never drift's tables beside another application's.
        first = connect_dbapi(db, create=True)
        try:
            current_revision_dbapi(first)
        finally:
            first.close()
    head = migration_head(script_location)
    # Under the migration lock, the revision is read again: whoever waited finds it at head.
    with migration_lock(db):
        return _upgrade_locked(db, head, script_location, known)


def _upgrade_locked(
    db: DbUrl, head: str, script_location: Path | None, known: tuple[str, ...]
) -> UpgradeResult:
    from alembic import command

    engine = open_engine(db)
    try:
        before = database_revision(engine)
        if before is not None and before not in known and before != head:
            raise SchemaTooNew(
                f"this database was written by a newer drift (schema {before}, this "
                f"drift knows up to {head}): upgrade drift to read it"
            )
        if before == head:
            return UpgradeResult(before, head, None)
        backup = None
        if db.sqlite_path is not None and before is not None:
            backup = backup_sqlite(db.sqlite_path, before)
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn, script_location), "head")
    finally:
        engine.dispose()
    if db.sqlite_path is not None and before is not None:
        reclaim_free_pages(db.sqlite_path)
    return UpgradeResult(before, head, backup)


def reclaim_free_pages(path: Path) -> bool:
    """VACUUM an SQLite file that a migration left a quarter or more free; True if it did.

    0006 frees 60% of a deep history (a year of the bench host: 233 MB in use
    before, 84 MB after), but SQLite keeps the freed pages in the file. A
    record running meanwhile keeps its lock: the file is then left as it is,
    its free pages reused by later records.
    """
    con = sqlite3.connect(str(path), timeout=1, isolation_level=None)
    try:
        free = con.execute("PRAGMA freelist_count").fetchone()[0]
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        if free * 4 < pages:
            return False
        con.execute("VACUUM")
        return True
    except sqlite3.OperationalError:  # locked by a record: not worth waiting for
        return False
    finally:
        con.close()
