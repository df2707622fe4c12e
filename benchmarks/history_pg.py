"""`drift since` on PostgreSQL before and after the first ANALYZE of a history.

A throwaway cluster on loopback (tests/postgres_server.py's helpers), with
autovacuum off so nothing analyzes behind the benchmark's back; drift
creates the schema (`drift db upgrade`), the cached SQLite history is
copied in table by table (COPY), and `drift since --stable` 1 day back
runs before ANALYZE, then after it.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from bench_history import day_back, drift, history_args  # noqa: E402
from bench_record import BenchError, log  # noqa: E402
from history_gen import CachedHistory  # noqa: E402
from postgres_server import _bin, postgres_server  # noqa: E402

# Parents first, for the foreign keys.
TABLES = (
    "hosts",
    "configs",
    "snapshots",
    "facts",
    "blobs",
    "provenances",
    "versions",
    "marks",
    "stat_cache",
)
BOOLEAN = {("versions", "secret")}


@contextmanager
def cluster() -> Iterator[str]:
    """A PostgreSQL server on loopback with autovacuum off; yields its URL."""
    if not _bin("initdb") or not _bin("pg_ctl"):
        raise BenchError("PostgreSQL is not installed (apt-get install postgresql)")
    with postgres_server("-c autovacuum=off -c shared_buffers=256MB") as url:
        yield url


def copy_history(sqlite_db: Path, url: str) -> dict[str, int]:
    """Every row of the SQLite history into the (drift-created) PostgreSQL schema."""
    import psycopg

    from drift.store.db import DRIFT_TABLES

    # A table the store gained and this list lacks would be left behind, or copied after
    # the rows that refer to it.
    missing = DRIFT_TABLES - {"alembic_version", "file_cache"} - set(TABLES)
    if missing:
        raise BenchError(f"history_pg.TABLES lacks {', '.join(sorted(missing))}")
    rows: dict[str, int] = {}
    src = sqlite3.connect(sqlite_db)
    with psycopg.connect(url) as pg, pg.cursor() as cur:
        for table in TABLES:
            columns = [r[1] for r in src.execute(f'PRAGMA table_info("{table}")')]
            flags = [(table, c) in BOOLEAN for c in columns]
            n = 0
            with cur.copy(f'COPY "{table}" ({", ".join(columns)}) FROM STDIN') as copy:
                for row in src.execute(f'SELECT {", ".join(columns)} FROM "{table}"'):
                    copy.write_row(
                        [
                            bool(v) if flag and v is not None else v
                            for v, flag in zip(row, flags, strict=True)
                        ]
                    )
                    n += 1
            rows[table] = n
            if "id" in columns:
                cur.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f'(SELECT coalesce(max(id), 1) FROM "{table}"))'
                )
    src.close()
    return rows


def bench_postgres(found: CachedHistory, bench: Path, runs: int) -> dict[str, Any]:
    """Load the history, then `since --stable` 1 day back before and after ANALYZE."""
    import psycopg

    log(f"postgres: loading the {found.depth} history")
    with cluster() as url:
        drift(["db", "upgrade", "--db", url], bench, "drift db upgrade")
        t0 = time.monotonic()
        rows = copy_history(found.db, url)
        load_s = time.monotonic() - t0
        log(f"postgres: {sum(rows.values()):,} rows in {load_s:.0f} s")
        since = ["since", *history_args(found, url), "--stable", day_back(found.db)]
        before = [drift(since, bench, "since on PostgreSQL") for _ in range(runs)]
        with psycopg.connect(url, autocommit=True) as pg:
            analyzed = pg.execute(
                "SELECT count(*) FROM pg_stats WHERE schemaname = 'public'"
            ).fetchone()
            if analyzed is None or analyzed[0]:
                raise BenchError("the tables had statistics before ANALYZE")
            pg.execute("ANALYZE")
        after = [drift(since, bench, "since on PostgreSQL") for _ in range(runs)]
    out = {
        "rows": rows,
        "load_s": round(load_s, 1),
        "before_s": round(statistics.median(r.seconds for r in before), 3),
        "before_mib": round(max(r.rss_mib for r in before), 1),
        "before_cpu_s": round(statistics.median(r.cpu_s for r in before), 3),
        "after_s": round(statistics.median(r.seconds for r in after), 3),
        "after_mib": round(max(r.rss_mib for r in after), 1),
        "after_cpu_s": round(statistics.median(r.cpu_s for r in after), 3),
    }
    log(f"postgres: since {out['before_s']:.2f} s before ANALYZE, {out['after_s']:.2f} s after")
    return out
