"""Alembic environment: drift runs migrations in-process on a connection it passes in."""

from __future__ import annotations

from alembic import context

from drift.store.models import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - drift always passes its connection
    raise RuntimeError("drift runs its migrations in-process: use `drift db upgrade`")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
