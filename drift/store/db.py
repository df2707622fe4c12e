"""How to open the database: a DB-API connection for the record hot path, an SQLAlchemy
engine for queries and migrations.

`connect_dbapi` (stdlib sqlite3 or psycopg, no SQLAlchemy import) and
`open_engine` agree on SQLite's settings (WAL, busy timeout, foreign keys),
and neither adds drift's tables to another application's SQLite file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import chain
from typing import TYPE_CHECKING, Any

from drift.errors import DatabaseUnreachable, NoDatabaseError, StoreError
from drift.store.files import create_private_sqlite, sqlite_exists
from drift.store.urls import DbUrl

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy.engine import Engine

BUSY_TIMEOUT_MS = 10_000
# Rows in one INSERT statement (fastest between 500 and 1,000 on a first record).
ROWS_PER_INSERT = 1_000

# Every table any drift schema has had (alembic's included): an SQLite file
# holding any other table belongs to another application.
# tests/test_store_schema.py checks this against the models and migrations.
DRIFT_TABLES = frozenset(
    {
        "alembic_version",
        "hosts",
        "configs",
        "snapshots",
        "facts",
        "blobs",
        "provenances",
        "versions",
        "marks",
        "stat_cache",
        "file_cache",
    }
)


def ask_for_wal(raw: sqlite3.Connection) -> None:
    """Put the database in WAL mode, unless a first record is being written right now.

    That write goes through a rollback journal (HistoryWriter), and while it
    runs the switch fails at once, without waiting; this connection then
    works in rollback mode, waiting on the writer's lock like any reader,
    and the database is in WAL mode again when the write ends.
    """
    try:
        raw.execute("PRAGMA journal_mode = WAL")
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise


class DbapiConnection:
    """A thin DB-API wrapper that takes `?` placeholders on both SQLite and PostgreSQL."""

    def __init__(self, raw: Any, dialect: str) -> None:
        self.raw = raw
        self.dialect = dialect

    def _sql(self, sql: str) -> str:
        return sql if self.dialect == "sqlite" else sql.replace("?", "%s")

    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        cur = self.raw.cursor()
        cur.execute(self._sql(sql), params)
        return cur

    def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            self.raw.cursor().executemany(self._sql(sql), rows)

    def insert_rows(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """Run `INSERT INTO t (...) VALUES (?, ...)` once per row, many rows to a statement.

        Python's sqlite3 binds, steps and resets a statement for every row of
        an executemany, and that overhead is most of an insert's time.
        Statements of up to ROWS_PER_INSERT rows (fewer if this SQLite allows
        fewer bound values) store a first record's 36k facts and 36k versions
        in 40% less time. psycopg already sends an executemany's rows in one
        round trip.
        """
        if self.dialect != "sqlite" or len(rows) < 2:
            self.executemany(sql, rows)
            return
        head, _, one = sql.rpartition(" VALUES ")
        assert one.startswith("(") and one.endswith(")"), sql  # nothing after the row
        per = min(
            ROWS_PER_INSERT,
            self.raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(rows[0]),
        )
        cur = self.raw.cursor()
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            cur.execute(
                f"{head} VALUES {', '.join([one] * len(chunk))}", list(chain.from_iterable(chunk))
            )

    def insert_id(self, sql: str, params: tuple[Any, ...]) -> int:
        """Run one `INSERT` and return the id of the row it inserted."""
        if self.dialect == "sqlite":
            return int(self.execute(sql, params).lastrowid)
        return int(self.execute(sql + " RETURNING id", params).fetchone()[0])

    def close(self) -> None:
        self.raw.close()


@contextmanager
def write_transaction(conn: DbapiConnection) -> Iterator[None]:
    """One write transaction: committed on leaving the block, rolled back on an error.

    On SQLite BEGIN IMMEDIATE: the write lock is taken at once (waiting up to
    the busy timeout), so two writers take turns instead of one failing when
    its read turns into a write.
    """
    if conn.dialect == "sqlite":
        conn.execute("BEGIN IMMEDIATE")
    else:
        conn.raw.autocommit = False
    try:
        yield
    except BaseException:
        if conn.dialect == "sqlite":
            conn.execute("ROLLBACK")
        else:
            conn.raw.rollback()
            conn.raw.autocommit = True
        raise
    if conn.dialect == "sqlite":
        conn.execute("COMMIT")
    else:
        conn.raw.commit()
        conn.raw.autocommit = True


def connect_dbapi(db: DbUrl, *, create: bool = False) -> DbapiConnection:
    """Open the database with the stdlib driver (SQLite) or psycopg (PostgreSQL).

    With `create`, a missing SQLite file is created private (create_private_sqlite).
    """
    if db.sqlite_path is not None:
        path = db.sqlite_path
        if not sqlite_exists(path):
            if not create:
                raise NoDatabaseError(
                    f"{path}: no drift database here yet (run `drift record` or `drift init`)",
                    str(path),
                )
            create_private_sqlite(path)
        try:
            raw = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            raw.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # Before WAL mode, which would rewrite another application's file header.
            foreign = _foreign_tables(raw)
            if foreign:
                raw.close()
                raise _foreign_error(path, foreign)
            ask_for_wal(raw)
            raw.execute("PRAGMA synchronous = NORMAL")
            raw.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: not a usable SQLite database: {exc}") from None
        return DbapiConnection(raw, "sqlite")
    try:
        import psycopg
    except ImportError:  # pragma: no cover - depends on the install
        raise StoreError(
            "PostgreSQL needs psycopg: pip install 'drift-provenance[postgres]'"
        ) from None
    conninfo = db.url.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        pg = psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        # libpq quotes the part of a URL it cannot read, password included
        message = f"cannot connect to {db.display()}: {db.scrub(first)}"
        if isinstance(exc, psycopg.OperationalError) and _unreachable(first):
            raise DatabaseUnreachable(message) from None
        raise StoreError(message) from None
    return DbapiConnection(pg, "postgresql")


_UNREACHABLE = (
    "connection refused",
    "could not connect",
    "timeout expired",
    "could not translate host name",
    "failed to resolve host",
    "temporary failure in name resolution",
    "no route to host",
    "network is unreachable",
    "the database system is starting up",
    "the database system is shutting down",
    "server closed the connection",
)


def _unreachable(message: str) -> bool:
    """Whether libpq's message says the server could not be reached, as opposed to one that
    answered and refused (a wrong password or database name is no outage to wait out)."""
    lowered = message.lower()
    return any(words in lowered for words in _UNREACHABLE) and "password" not in lowered


def _foreign_tables(raw: sqlite3.Connection) -> list[str]:
    """The tables of an SQLite file that no drift schema has, unless drift's version stamp
    is there: drift refuses to add its tables beside another application's."""
    names = {
        str(n)
        for (n,) in raw.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    if "alembic_version" in names:
        return []
    return sorted(names - DRIFT_TABLES)


def _foreign_error(path: Path, foreign: list[str]) -> StoreError:
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    return StoreError(
        f"{path}: holds tables of another application ({shown}): drift keeps its "
        "history in a database of its own; give another --db or db in drift.toml"
    )


def open_engine(db: DbUrl) -> Engine:
    """An SQLAlchemy engine with the same SQLite settings as the hot path."""
    from sqlalchemy import create_engine, event

    if db.sqlite_path is not None:
        engine = create_engine(db.url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            ask_for_wal(dbapi_conn)
            dbapi_conn.execute("PRAGMA foreign_keys = ON")

        return engine
    return create_engine(db.url, pool_pre_ping=True)
