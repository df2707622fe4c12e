"""A mark can be undone (`drift unmark N`) and stays in the history as such.

An operator who marked the wrong moment stable must be able to take it back
without erasing what was said: the row stays, with the moment it was undone
in `undone_us`, and every read that takes marks as windows skips it. Marks
recorded before this revision are none of them undone (NULL).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


# Plain ALTER TABLE (no batch copy): SQLite adds a nullable column in place.


def upgrade() -> None:
    op.add_column("marks", sa.Column("undone_us", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    # An undone mark must not come back as a live one under an older drift.
    op.execute("DELETE FROM marks WHERE undone_us IS NOT NULL")
    op.drop_column("marks", "undone_us")
