"""The change-only history: models, migrations gate, the record writer and queries.

The record path (`drift.store.writer`) speaks DB-API directly so a minute's
unchanged record never pays for importing SQLAlchemy; everything else
(schema, migrations, queries) goes through the SQLAlchemy models.
"""
