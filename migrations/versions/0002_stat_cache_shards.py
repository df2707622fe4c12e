"""The stat cache in shards: one marshal-encoded dict per host and shard, not a row per file.

Loading the cache is the first thing every `drift record` does. As 12k rows
it took 40-80 ms a minute; as 64 blobs it takes about 10. A changed file
rewrites its shard (about 1/64 of the cache). Existing entries are carried
over, so the first record after the upgrade re-reads nothing.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import marshal
import zlib
from collections import defaultdict

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Must match drift.store.statcache.STAT_SHARDS / stat_shard; a migration keeps its
# own copy so later changes to drift cannot change what this one did.
SHARDS = 64


def _shard(path: str) -> int:
    return zlib.crc32(path.encode("utf-8", "surrogateescape")) % SHARDS


def upgrade() -> None:
    stat_cache = op.create_table(
        "stat_cache",
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("shard", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("entries", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["host_id"], ["hosts.id"], name=op.f("fk_stat_cache_host_id_hosts")
        ),
        sa.PrimaryKeyConstraint("host_id", "shard", name=op.f("pk_stat_cache")),
    )
    shards: dict[tuple[int, int], dict[str, tuple[int, int, int, int, str]]] = defaultdict(dict)
    rows = op.get_bind().execute(
        sa.text("SELECT host_id, path, size, mtime_ns, ctime_ns, inode, sha256 FROM file_cache")
    )
    for host_id, path, size, mtime_ns, ctime_ns, inode, sha256 in rows:
        shards[(host_id, _shard(path))][path] = (size, mtime_ns, ctime_ns, inode, sha256)
    if shards:
        op.bulk_insert(
            stat_cache,
            [
                {"host_id": host_id, "shard": shard, "entries": marshal.dumps(entries)}
                for (host_id, shard), entries in shards.items()
            ],
        )
    op.drop_table("file_cache")


def downgrade() -> None:
    file_cache = op.create_table(
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
    rows = []
    for host_id, entries in op.get_bind().execute(
        sa.text("SELECT host_id, entries FROM stat_cache")
    ):
        try:
            shard = marshal.loads(entries)
        except (EOFError, ValueError, TypeError):
            continue  # unreadable: it is only a cache
        rows.extend(
            {
                "host_id": host_id,
                "path": path,
                "size": size,
                "mtime_ns": mtime_ns,
                "ctime_ns": ctime_ns,
                "inode": inode,
                "sha256": sha256,
            }
            for path, (size, mtime_ns, ctime_ns, inode, sha256) in shard.items()
        )
    if rows:
        op.bulk_insert(file_cache, rows)
    op.drop_table("stat_cache")
