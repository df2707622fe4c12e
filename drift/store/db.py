"""Where the database is, how to open it, and whether its schema is the one this drift speaks.

Two ways in: `connect_dbapi` (stdlib sqlite3 or psycopg, for the record hot
path, no SQLAlchemy import) and `open_engine` (SQLAlchemy, for queries and
migrations). Both agree on the URL and on SQLite's settings (WAL, busy timeout).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drift.errors import NoDatabaseError, SchemaTooNew, SchemaTooOld, StoreError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

# The newest migration this drift ships, and every revision it can read.
# tests/test_store_schema.py checks these against migrations/versions.
HEAD_REVISION = "0004"
KNOWN_REVISIONS = ("0001", "0002", "0003", "0004")

BUSY_TIMEOUT_MS = 10_000
# Rows in one INSERT statement (fastest between 500 and 1,000 on a first record).
ROWS_PER_INSERT = 1_000


def default_db_path() -> Path:
    """The SQLite file used when neither --db nor $DRIFT_DB is given (XDG state dir)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "drift" / "drift.db"


@dataclass(frozen=True)
class DbUrl:
    """A resolved database location: an SQLite file or a PostgreSQL URL."""

    url: str  # as SQLAlchemy wants it
    sqlite_path: Path | None  # None for PostgreSQL

    @property
    def is_sqlite(self) -> bool:
        return self.sqlite_path is not None

    def display(self) -> str:
        """The location with any password masked (`***`), fit to print."""
        return self._without_password("***")

    def public(self) -> str:
        """The location as a --db value with any password dropped, for a command to show.

        Whoever runs that command gives the password another way (PGPASSWORD, ~/.pgpass).
        """
        return self._without_password(None)

    def passwords(self) -> list[str]:
        """The password of this URL (user:PASSWORD@ or ?password=), as written and decoded.

        Read without a URL parser, so a URL too broken to parse still has its
        password known (and hidden from the error that says it is broken).
        """
        if self.sqlite_path is not None:
            return []
        from urllib.parse import unquote, unquote_plus

        rest = self.url.split("://", 1)[-1]
        head, _, query = rest.partition("?")
        written = []
        userinfo, at, _host = head.rpartition("@")
        if at and ":" in userinfo:
            written.append(userinfo.split(":", 1)[1])
        for pair in query.split("&"):
            name, eq, value = pair.partition("=")
            if eq and unquote(name).lower() == "password":
                written.append(value)
        spellings = {s for w in written if w for s in (w, unquote(w), unquote_plus(w))}
        return sorted(spellings, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        """`text` (an error message) with this URL's password, however written, as ``***``."""
        for password in self.passwords():
            text = text.replace(password, "***")
        return text

    def _without_password(self, mask: str | None) -> str:
        if self.sqlite_path is not None:
            return str(self.sqlite_path)
        from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

        plain = self.url.replace("postgresql+psycopg://", "postgresql://", 1)
        try:
            parts = urlsplit(plain)
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            return self.scrub(plain)  # too broken to take apart: hide what is known
        netloc = parts.netloc
        if parts.password is not None:
            userinfo, _, hostport = netloc.rpartition("@")
            user = userinfo.split(":", 1)[0]
            if mask is not None:
                user = f"{user}:{mask}"
            netloc = f"{user}@{hostport}" if user else hostport
        query = parts.query
        # libpq also takes the password as a query parameter: postgresql://h/db?password=...
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() == "password" for k, _v in pairs):
            kept = [(k, mask if k.lower() == "password" else v) for k, v in pairs]
            query = urlencode([(k, v) for k, v in kept if v is not None], safe="*")
        return urlunsplit(parts._replace(netloc=netloc, query=query))


def resolve_db_url(explicit: str | None = None) -> DbUrl:
    """--db, else $DRIFT_DB, else the default SQLite file. Plain paths mean SQLite files."""
    raw = explicit or os.environ.get("DRIFT_DB") or str(default_db_path())
    if raw.startswith("sqlite:///"):
        path = Path(raw[len("sqlite:///") :])
        if raw == "sqlite:///:memory:" or not str(path):
            raise StoreError("an in-memory database keeps no history: give a file path")
        path = path.resolve()
        return DbUrl(f"sqlite:///{path}", path)
    if raw.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        rest = raw.split("://", 1)[1]
        return DbUrl(f"postgresql+psycopg://{rest}", None)
    if "://" in raw:
        scheme = raw.split("://", 1)[0]
        raise StoreError(
            f"unsupported database URL scheme {scheme!r}: use a file path, "
            "sqlite:///PATH or postgresql://..."
        )
    path = Path(raw).expanduser().resolve()
    return DbUrl(f"sqlite:///{path}", path)


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
        "versions",
        "marks",
        "stat_cache",
        "file_cache",
    }
)


def sqlite_side_files(path: Path) -> list[Path]:
    """The database file with its WAL, shared-memory and lock companions."""
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}.lock")]


# ---------------------------------------------------------------- DB-API (hot path)


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

    def close(self) -> None:
        self.raw.close()


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
        raise StoreError(f"cannot connect to {db.display()}: {db.scrub(first)}") from None
    return DbapiConnection(pg, "postgresql")


def sqlite_exists(path: Path) -> bool:
    """Whether the SQLite file is there; a StoreError naming the folder in the way if drift
    cannot even look (a folder it may not search, a file where a folder should be)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StoreError(
            _in_the_way(path) or f"{path}: cannot reach the database: {exc.strerror or exc}"
        ) from None
    return True


def _in_the_way(path: Path) -> str | None:
    """`PATH: cannot reach the database: ...` naming the folder on the way that fails, if any."""
    for part in [*reversed(path.parents), path]:
        try:
            os.stat(part)
        except NotADirectoryError:
            return f"{path}: cannot reach the database: {part.parent} is not a folder"
        except PermissionError:
            return f"{path}: cannot reach the database: permission denied to search {part.parent}"
        except OSError:
            return None
    return None


def create_private_sqlite(path: Path) -> None:
    """Create an empty SQLite file readable by its owner only (0600), in folders made 0700.

    It holds every script's text and every value that is not a secret. SQLite
    gives its -wal, -shm and journal files the database file's mode.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        make_private_dirs(path.parent)
        os.close(os.open(path, flags, 0o600))
    except FileExistsError:
        return  # another drift created it first
    except OSError as exc:
        raise StoreError(
            _in_the_way(path) or f"{path}: cannot create the database: {exc.strerror or exc}"
        ) from None


def sqlite_privacy(path: Path) -> str:
    """Who can read an SQLite history, as `drift init` says it: its mode, and a fix if needed."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o044:
        exposed = "other users can read every script and value it holds"
    elif mode & 0o022:
        exposed = "other users can change it"
    else:
        return f"mode {mode:04o}: only its owner can read it"
    return f"mode {mode:04o}: {exposed}; chmod 600 {path}*"


def make_private_dirs(folder: Path) -> None:
    """Create `folder` and any missing parents with mode 0700 (mkdir(parents=True) would not)."""
    missing: list[Path] = []
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    for part in reversed(missing):
        try:
            part.mkdir(mode=0o700)
        except FileExistsError:
            pass


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


# ---------------------------------------------------------------- SQLAlchemy (queries, migrations)


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
    """Migrate the database to head: refuse a newer one, back up an SQLite file first."""
    from alembic import command

    if db.sqlite_path is not None:
        # Created private, and never drift's tables beside another application's.
        first = connect_dbapi(db, create=True)
        try:
            current_revision_dbapi(first)
        finally:
            first.close()
    head = migration_head(script_location)
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
        return UpgradeResult(before, head, backup)
    finally:
        engine.dispose()
