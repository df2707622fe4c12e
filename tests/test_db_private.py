"""The history is private: it holds every script's text and every value that is not a secret.

drift creates the SQLite file, its -wal/-shm companions and its backups 0600 and the folders
it makes 0700, whatever the umask; `drift init` says who can read it. It never adds its
tables to another application's SQLite file, and a database it cannot reach is one line.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import DRIFT, drift_env, run_drift
from privileges import as_nobody

from drift.cli import cli
from drift.store.db import DRIFT_TABLES


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def config(folder: Path, db: Path | None = None) -> Path:
    path = folder / "drift.toml"
    where = f'db = "{db}"\n' if db is not None else ""
    path.write_text(f'host = "p"\n{where}[[commands]]\nname = "hi"\nrun = "echo hi"\n')
    return path


def drift_with_umask(
    args: list[str], tmp_path: Path, umask: int
) -> subprocess.CompletedProcess[str]:
    """The drift command run under `umask`, as a cron job or a root shell might have it."""
    return subprocess.run(
        [DRIFT, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=drift_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: os.umask(umask),
    )


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_record_creates_the_database_and_its_companions_private(tmp_path: Path, umask: int) -> None:
    db = tmp_path / "state" / "drift" / "drift.db"
    mine = mode(tmp_path)
    result = drift_with_umask(["record", "--config", str(config(tmp_path, db))], tmp_path, umask)
    assert result.returncode == 0, result.stderr
    # A reader keeps the WAL and shared memory open, as `drift since` does during a record.
    with sqlite3.connect(db) as reader:
        reader.execute("SELECT count(*) FROM snapshots").fetchone()
        companions = [Path(f"{db}-wal"), Path(f"{db}-shm")]
        assert all(p.exists() for p in companions)
        assert {p.name: mode(p) for p in [db, *companions]} == {
            "drift.db": 0o600,
            "drift.db-wal": 0o600,
            "drift.db-shm": 0o600,
        }
    assert mode(db.parent / "drift.db.lock") == 0o600
    assert mode(db.parent) == 0o700 and mode(db.parent.parent) == 0o700  # both made by drift
    assert mode(tmp_path) == mine  # a folder drift did not make is left as it is


def test_init_says_who_can_read_the_database(tmp_path: Path) -> None:
    db = tmp_path / "h" / "drift.db"
    cfg = ["--config", str(config(tmp_path, db))]
    first = drift_with_umask(["init", *cfg], tmp_path, 0o022)
    assert first.returncode == 0, first.stderr
    assert f"database {db}: created schema " in first.stdout
    assert "(mode 0600: only its owner can read it)" in first.stdout
    assert f"secret key {db.parent / 'secret.key'} (mode 0600; " in first.stdout
    assert mode(db) == 0o600 and mode(db.parent) == 0o700
    # A history an older drift left readable by all: drift does not chmod it, but says so.
    db.chmod(0o644)
    again = run_drift(["init", *cfg], tmp_path, timeout=60)
    assert (
        "(mode 0644: other users can read every script and value it holds; "
        f"chmod 600 {db}*)" in again.stdout
    )


def test_a_backup_before_a_migration_is_private_whatever_the_database_mode(
    tmp_path: Path,
) -> None:
    from alembic import command

    from drift.store.db import open_engine
    from drift.store.schema import alembic_config
    from drift.store.urls import resolve_db_url

    db = tmp_path / "old.db"
    engine = open_engine(resolve_db_url(str(db)))
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0003")
    finally:
        engine.dispose()
    db.chmod(0o644)
    run_drift(["db", "upgrade", "--config", str(config(tmp_path)), "--db", str(db)], tmp_path)
    (backup,) = tmp_path.glob("old.db.bak-0003-*")
    assert mode(backup) == 0o600


# ---------------------------------------------------------------- another application's file


def foreign_database(path: Path) -> bytes:
    with sqlite3.connect(path) as conn:
        for table in ("users", "orders", "invoices", "payments"):
            conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, note TEXT)")
        conn.execute("INSERT INTO users (note) VALUES ('alice')")
    conn.close()
    return path.read_bytes()


@pytest.mark.parametrize("command", ["record", "init", "db upgrade"])
def test_drift_never_adds_its_tables_to_another_applications_sqlite_file(
    tmp_path: Path, command: str
) -> None:
    db = tmp_path / "app.db"
    before = foreign_database(db)
    args = [*command.split(), "--config", str(config(tmp_path)), "--db", str(db)]
    result = run_drift(args, tmp_path, check=False, timeout=60)
    assert result.returncode == 2
    assert result.stderr == (
        f"drift: {db}: holds tables of another application (invoices, orders, payments and 1 "
        "more): drift keeps its history in a database of its own; give another --db or db in "
        "drift.toml\n"
    )
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "drift.toml"]


def test_drift_tables_are_every_table_a_drift_schema_ever_had(tmp_path: Path) -> None:
    """The list that tells a foreign table from a drift one must follow the migrations."""
    from alembic import command

    from drift.store.db import open_engine
    from drift.store.models import Base
    from drift.store.schema import KNOWN_REVISIONS, alembic_config
    from drift.store.urls import resolve_db_url

    seen: set[str] = set()
    engine = open_engine(resolve_db_url(str(tmp_path / "m.db")))
    try:
        for revision in KNOWN_REVISIONS:
            with engine.begin() as conn:
                command.upgrade(alembic_config(conn), revision)
            with sqlite3.connect(tmp_path / "m.db") as raw:
                seen |= {
                    n for (n,) in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")
                }
    finally:
        engine.dispose()
    assert seen | set(Base.metadata.tables) == set(DRIFT_TABLES)


# ---------------------------------------------------------------- a database drift cannot reach


@pytest.mark.parametrize("command", ["record", "since", "init", "db current"])
def test_a_database_below_a_file_is_one_line(tmp_path: Path, command: str) -> None:
    (tmp_path / "afile").write_text("not a folder\n")
    db = tmp_path / "afile" / "drift.db"
    args = [*command.split(), "--config", str(config(tmp_path)), "--db", str(db)]
    result = run_drift(args, tmp_path, check=False, timeout=60)
    assert result.returncode == 2
    assert result.stderr == (
        f"drift: {db}: cannot reach the database: {tmp_path / 'afile'} is not a folder\n"
    )


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Path]:
    """A folder user nobody can reach, holding a config it can read."""
    folder = tmp_path / "shared"
    folder.mkdir()
    for parent in [folder, *folder.parents]:
        if str(parent) == "/":
            break
        parent.chmod(parent.stat().st_mode | 0o055)
    yield folder


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to user nobody")
@pytest.mark.parametrize("command", ["record", "since"])
def test_a_database_folder_the_user_cannot_search_is_one_line(
    shared: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = shared / "locked"
    db = locked / "drift.db"
    cfg = config(shared, db)
    run_drift(["record", "--config", str(cfg)], shared, timeout=60)  # root's history
    run_drift(["mark", "stable", "--config", str(cfg)], shared, timeout=60)
    run_drift(["record", "--config", str(cfg)], shared, timeout=60)
    locked.chmod(0o700)

    monkeypatch.setenv("XDG_STATE_HOME", str(shared / "nobody-state"))

    def work() -> list[Any]:
        result = CliRunner().invoke(cli, [command, "--config", str(cfg)])
        return [result.exit_code, result.stdout, result.stderr, repr(result.exception)]

    # As root first, in this process: nobody cannot read this Python's library to import
    # what the command needs, and the forked child inherits what is imported here.
    assert work()[0] == 0
    exit_code, stdout, stderr, exception = as_nobody(work)
    assert (exit_code, stdout) == (2, ""), exception
    assert (
        stderr == f"drift: {db}: cannot reach the database: permission denied to search {locked}\n"
    )
