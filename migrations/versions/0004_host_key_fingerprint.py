"""Each host remembers a fingerprint of the secret key its history was recorded with.

Secrets are stored as digests keyed with the per-install secret key; with
another key every digest changes, so every secret would read as rotated. The
fingerprint (an HMAC of a fixed label, never the key) lets `drift record`
notice a replaced key and say so. Hosts recorded before this revision have
none until their next record.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


# Plain ALTER TABLE, not a batch copy: every other table refers to hosts, so
# SQLite cannot drop and rebuild it while it holds rows (SQLite adds and, since
# 3.35, drops a column in place).


def upgrade() -> None:
    op.add_column("hosts", sa.Column("key_fingerprint", sa.String(length=16), nullable=True))


def downgrade() -> None:
    op.drop_column("hosts", "key_fingerprint")
