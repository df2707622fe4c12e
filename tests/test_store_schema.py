"""Migrations: one head, equal to what drift expects, producing exactly the models' schema."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from conftest import run_drift
from history_0005 import HOST, upgrades_losslessly
from sqlalchemy import text

from drift.resources import resource_dir
from drift.store.db import open_engine
from drift.store.models import Base
from drift.store.schema import (
    HEAD_REVISION,
    KNOWN_REVISIONS,
    alembic_config,
    migration_head,
    upgrade_database,
)
from drift.store.statcache import STAT_SHARDS, stat_shard
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter


def test_exactly_one_head_and_it_is_the_one_drift_expects() -> None:
    assert migration_head() == HEAD_REVISION
    assert KNOWN_REVISIONS[-1] == HEAD_REVISION


def test_migrations_build_exactly_the_models(tmp_path: Path) -> None:
    db = resolve_db_url(str(tmp_path / "m.db"))
    upgrade_database(db)
    engine = open_engine(db)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def _database_at_0001(tmp_path: Path) -> Path:
    """A database as drift 0001 left it: one host, one stat cache row in the old table."""
    path = tmp_path / "old.db"
    engine = open_engine(resolve_db_url(str(path)))
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0001")
            conn.execute(text("INSERT INTO hosts (id, name) VALUES (1, 'old')"))
            conn.execute(
                text(
                    "INSERT INTO file_cache (host_id, path, size, mtime_ns, ctime_ns, inode, "
                    "sha256) VALUES (1, '/etc/app.conf', 12, 1, 2, 3, :sha)"
                ),
                {"sha": "a" * 64},
            )
    finally:
        engine.dispose()
    return path


def test_an_older_schema_is_refused_by_record_and_upgraded_with_a_backup(tmp_path: Path) -> None:
    path = _database_at_0001(tmp_path)
    config = tmp_path / "drift.toml"
    config.write_text('host = "old"\n[[commands]]\nname = "hi"\nrun = "echo hi"\n')
    cfg = ["--config", str(config), "--db", str(path)]

    refused = run_drift(["record", *cfg], tmp_path, check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "schema 0001" in refused.stderr and "drift db upgrade" in refused.stderr
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 0

    upgraded = run_drift(["db", "upgrade", *cfg], tmp_path)
    assert "0001" in upgraded.stdout and HEAD_REVISION in upgraded.stdout
    backups = list(tmp_path.glob("old.db.bak-0001-*"))
    assert len(backups) == 1
    with sqlite3.connect(backups[0]) as old:
        assert old.execute("SELECT version_num FROM alembic_version").fetchone()[0] == "0001"
        assert old.execute("SELECT count(*) FROM file_cache").fetchone()[0] == 1

    # The stat cache came across: the file would not be read again.
    with HistoryWriter.open(resolve_db_url(str(path))) as writer:
        assert writer.load_file_cache("old") == {"/etc/app.conf": (12, 1, 2, 3, "a" * 64)}
    assert run_drift(["record", *cfg], tmp_path).stdout.startswith("snapshot #1: ")


def test_the_stat_cache_migration_downgrades_without_losing_entries(tmp_path: Path) -> None:
    path = _database_at_0001(tmp_path)
    db = resolve_db_url(str(path))
    upgrade_database(db)
    engine = open_engine(db)
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0001")
            rows = conn.execute(text("SELECT host_id, path, size, sha256 FROM file_cache")).all()
    finally:
        engine.dispose()
    assert [tuple(r) for r in rows] == [(1, "/etc/app.conf", 12, "a" * 64)]


def test_the_migration_shards_paths_as_the_writer_does() -> None:
    # A path in the wrong shard would never be rewritten, so it would go stale.
    spec = importlib.util.spec_from_file_location(
        "m0002", resource_dir("migrations") / "versions" / "0002_stat_cache_shards.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    paths = ["/etc/app.conf", "/opt/model/config.json", "/srv/\udcff-latin1-name", "/é/ü"]
    assert [module._shard(p) for p in paths] == [stat_shard(p) for p in paths]
    assert module.SHARDS == STAT_SHARDS


def test_migration_0006_stores_values_and_provenances_as_the_writer_does() -> None:
    # A value the migration left in a blob that the writer stores inline (or the other
    # way round) would read as a change at the next record.
    from drift.store.delta import INLINE_MAX, TEXT_KEYS, provenance_digest, stored_value

    spec = importlib.util.spec_from_file_location(
        "m0006", resource_dir("migrations") / "versions" / "0006_provenances_inline_values.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (module.INLINE_MAX, set(module.TEXT_KEYS)) == (INLINE_MAX, TEXT_KEYS)
    for json_text in ('{"run": "uptime"}', '{"file": "/\u00e9t\u00e9.sh", "line": 3}'):
        assert module.provenance_digest(json_text) == provenance_digest(json_text)
    for value in ("0.1\n", "x" * INLINE_MAX, "x" * (INLINE_MAX + 1), "a\0b", "é" * INLINE_MAX):
        data = value.encode("utf-8", "surrogateescape")
        assert (module._inline(data) is not None) == (stored_value("stdout", value)[0] is not None)


READS = (
    ["show"],
    ["show", "--at", "#1", "--format", "json"],
    ["history", "command:"],
    ["history", "script:", "--format", "json"],
    ["history", "service:"],
    ["since", "--stable", "#1"],
    ["since", "--stable", "#1", "--format", "json"],
)


def test_an_upgraded_history_holds_and_reads_what_todays_writer_wrote(tmp_path: Path) -> None:
    # The same records, written by today's writer and as 0005's writer stored them:
    # upgraded, the old history holds the same rows and reads the same, command by command.
    new, old = (resolve_db_url(str(tmp_path / f"{name}.db")) for name in ("new", "old"))

    def read_alike() -> None:
        with sqlite3.connect(tmp_path / "old.db") as conn:
            # Only the long values and the output holding a NUL are blobs now.
            assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 3
            assert conn.execute("SELECT count(*) FROM provenances").fetchone()[0] == 10
            # The pages the migration freed went back to the disk (VACUUM).
            free, pages = (
                conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("freelist_count", "page_count")
            )
            assert free * 4 < pages
        assert list(tmp_path.glob("old.db.bak-0005-*"))  # backed up before the upgrade
        for args in READS:
            shown = [
                run_drift([*args, "--host", HOST, "--db", str(tmp_path / f"{name}.db")], tmp_path)
                for name in ("old", "new")
            ]
            assert shown[0].stdout == shown[1].stdout.replace("new.db", "old.db"), args

    upgrades_losslessly(new, old, read_alike)
