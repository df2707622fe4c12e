"""The change-only history: models, migrations gate, the record writer and queries.

The record path (`drift.store.writer`) and the reads (`drift.store.query`,
`drift.store.window`) speak DB-API directly so neither a minute's unchanged
record nor `drift since` pays for importing SQLAlchemy; the schema and
migrations go through the SQLAlchemy models.

One module per idea:

- `urls`: where the database is (--db, $DRIFT_DB, the default path), passwords hidden;
- `files`: the SQLite file on disk, created private;
- `db`: opening it, DB-API for records and reads or an SQLAlchemy engine for migrations;
- `schema`: its schema revision, checked, or migrated by Alembic in process;
- `models`: the tables, as SQLAlchemy models;
- `writer`: one record's write (`HistoryWriter`), which calls
  `digest` (has anything changed at all), `delta` (what changed, computed
  without the database), `apply` (writing it fast), `statcache` (what the
  record remembers of each file) and `locks` (one record at a time);
- `query`: reading the history back (`History`);
- `window`: a window of it as analysis needs it, aggregated in SQL.
"""
