"""The first schema: hosts, snapshots, facts, change-only versions, blobs, marks, stat cache.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hosts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hosts")),
        sa.UniqueConstraint("name", name=op.f("uq_hosts_name")),
    )
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_blobs")),
    )
    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("taken_us", sa.BigInteger(), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("n_facts", sa.Integer(), nullable=False),
        sa.Column("n_changed", sa.Integer(), nullable=False),
        sa.Column("n_errors", sa.Integer(), nullable=False),
        sa.Column("errors", sa.Text(), nullable=True),
        sa.Column("state_digest", sa.LargeBinary(length=16), nullable=True),
        sa.ForeignKeyConstraint(["host_id"], ["hosts.id"], name=op.f("fk_snapshots_host_id_hosts")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_snapshots")),
    )
    op.create_index("ix_snapshots_host_id_taken_us", "snapshots", ["host_id", "taken_us"])
    op.create_table(
        "facts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["host_id"], ["hosts.id"], name=op.f("fk_facts_host_id_hosts")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_facts")),
        sa.UniqueConstraint("host_id", "subject", "key", name=op.f("uq_facts_host_id_subject_key")),
    )
    op.create_table(
        "versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fact_id", sa.Integer(), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.Column("blob_sha256", sa.String(length=64), nullable=True),
        sa.Column("secret", sa.Boolean(), nullable=False),
        sa.Column("first_snapshot_id", sa.Integer(), nullable=False),
        sa.Column("until_snapshot_id", sa.Integer(), nullable=True),
        sa.Column("provenance", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["blob_sha256"], ["blobs.sha256"], name=op.f("fk_versions_blob_sha256_blobs")
        ),
        sa.ForeignKeyConstraint(["fact_id"], ["facts.id"], name=op.f("fk_versions_fact_id_facts")),
        sa.ForeignKeyConstraint(
            ["first_snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_versions_first_snapshot_id_snapshots"),
        ),
        sa.ForeignKeyConstraint(
            ["until_snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_versions_until_snapshot_id_snapshots"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_versions")),
    )
    op.create_index(
        "ix_versions_fact_first", "versions", ["fact_id", "first_snapshot_id", "until_snapshot_id"]
    )
    op.create_index("ix_versions_until", "versions", ["until_snapshot_id"])
    op.create_index("ix_versions_first", "versions", ["first_snapshot_id"])
    op.create_table(
        "marks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("at_us", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["host_id"], ["hosts.id"], name=op.f("fk_marks_host_id_hosts")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_marks")),
    )
    op.create_index("ix_marks_host_id_at_us", "marks", ["host_id", "at_us"])
    op.create_table(
        "file_cache",
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("ctime_ns", sa.BigInteger(), nullable=False),
        sa.Column("inode", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["host_id"], ["hosts.id"], name=op.f("fk_file_cache_host_id_hosts")
        ),
        sa.PrimaryKeyConstraint("host_id", "path", name=op.f("pk_file_cache")),
    )


def downgrade() -> None:
    op.drop_table("file_cache")
    op.drop_index("ix_marks_host_id_at_us", table_name="marks")
    op.drop_table("marks")
    op.drop_index("ix_versions_first", table_name="versions")
    op.drop_index("ix_versions_until", table_name="versions")
    op.drop_index("ix_versions_fact_first", table_name="versions")
    op.drop_table("versions")
    op.drop_table("facts")
    op.drop_index("ix_snapshots_host_id_taken_us", table_name="snapshots")
    op.drop_table("snapshots")
    op.drop_table("blobs")
    op.drop_table("hosts")
