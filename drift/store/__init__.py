"""The change-only history: models, migrations gate, the record writer and queries.

The record path (`drift.store.writer`) speaks DB-API directly so a minute's
unchanged record never pays for importing SQLAlchemy; everything else
(schema, migrations, queries) goes through the SQLAlchemy models.

One module per idea:

- `urls`: where the database is (--db, $DRIFT_DB, the default path), passwords hidden;
- `files`: the SQLite file on disk, created private;
- `db`: opening it, DB-API for the record path or an SQLAlchemy engine;
- `schema`: its schema revision, checked, or migrated by Alembic in process;
- `models`: the tables, as SQLAlchemy models;
- `writer`: one record's write (`HistoryWriter`), which calls
  `digest` (has anything changed at all), `delta` (what changed, computed
  without the database), `apply` (writing it fast), `statcache` (what the
  record remembers of each file) and `locks` (one record at a time);
- `query`: reading the history back (`History`).
"""
