"""Migrations: one head, equal to what drift expects, producing exactly the models' schema."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from drift.errors import SchemaTooOld
from drift.resources import resource_dir
from drift.store.db import (
    HEAD_REVISION,
    KNOWN_REVISIONS,
    check_revision,
    connect_dbapi,
    current_revision_dbapi,
    migration_head,
    open_engine,
    resolve_db_url,
    upgrade_database,
)
from drift.store.models import Base


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


def test_an_older_schema_is_refused_by_record_and_upgraded_with_a_backup(tmp_path: Path) -> None:
    # A copy of the migrations with one more revision plays the part of a newer drift.
    scripts = tmp_path / "migrations"
    shutil.copytree(resource_dir("migrations"), scripts)
    (scripts / "versions" / "0002_note.py").write_text(
        "import sqlalchemy as sa\nfrom alembic import op\n"
        'revision = "0002"\ndown_revision = "0001"\nbranch_labels = None\ndepends_on = None\n'
        'def upgrade():\n    op.add_column("marks", sa.Column("author", sa.Text()))\n'
        'def downgrade():\n    op.drop_column("marks", "author")\n'
    )
    db = resolve_db_url(str(tmp_path / "old.db"))
    upgrade_database(db)  # at 0001, as the older drift left it
    conn = connect_dbapi(db)
    revision = current_revision_dbapi(conn)
    conn.close()
    with pytest.raises(SchemaTooOld, match="run `drift db upgrade`"):
        check_revision(revision, head="0002", known=("0001", "0002"))

    result = upgrade_database(db, script_location=scripts, known=("0001", "0002"))
    assert (result.before, result.after) == ("0001", "0002")
    assert result.backup is not None and result.backup.exists()
    with sqlite3.connect(result.backup) as old:
        assert old.execute("SELECT version_num FROM alembic_version").fetchone()[0] == "0001"
    with sqlite3.connect(tmp_path / "old.db") as new:
        columns = [r[1] for r in new.execute("PRAGMA table_info(marks)")]
    assert "author" in columns
