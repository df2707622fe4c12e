"""An index on snapshots (host_id, id): a host's last snapshot without a sort.

Every record, and every read of a host's newest or first snapshot, asks for
`WHERE host_id = ? ORDER BY id DESC LIMIT 1`. The (host_id, taken_us) index
answers the filter but not the order, so SQLite sorted every snapshot of the
host: 2.4 ms at 10k snapshots, 231 ms at a year of per-minute records, the one
cost of an unchanged record that grew with the history. With (host_id, id) it
is one index seek at any depth.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_snapshots_host_id_id", "snapshots", ["host_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_snapshots_host_id_id", table_name="snapshots")
