"""Each snapshot names the config it was taken with, and that config's scope.

A fact that left the history because the config stopped asking for it must
read as "no longer tracked", not "removed"; one that entered because the
config started asking for it as "now tracked", not "added". Snapshots taken
before this revision keep a NULL config: their scope is unknown, and nothing
is read as having left or entered it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "configs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_configs")),
        sa.UniqueConstraint("path", "digest", name=op.f("uq_configs_path_digest")),
    )
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("config_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_snapshots_config_id_configs"), "configs", ["config_id"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_constraint(op.f("fk_snapshots_config_id_configs"), type_="foreignkey")
        batch.drop_column("config_id")
    op.drop_table("configs")
