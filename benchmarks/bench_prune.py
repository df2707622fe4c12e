"""`drift prune` on a deep history: time, peak memory and file size before and after.

    python benchmarks/bench_prune.py [--db FILE] [--keep-days 90] [--runs 3] [--json FILE]
        [--postgres]

Each run prunes a fresh copy of the history (never the original: the cached
year of history_gen.py unless --db names another), with `drift prune` as a
user runs it, keeping the last `--keep-days` days before the history's last
record (so the figures do not depend on today's date). Prune vacuums the
SQLite file afterwards; its time is included. Each run then checks that the
state at the first kept record and at the last is what it was.

With --postgres, once more on a throwaway PostgreSQL on loopback
(history_pg.py copies the history in, then ANALYZE): the prune's wall time
and the rows before and after.

Prints the median wall time, the peak RSS of the prune, the file size before
and after and the rows of each table before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TABLES = ("snapshots", "versions", "facts", "blobs", "provenances", "marks")
DAY_US = 86_400_000_000


def rows(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def states(db: Path, snapshots: list[int]) -> list[dict[tuple[str, str], str | None]]:
    """The text of every fact at each of these snapshots (the history's one host)."""
    from drift.store.query import History
    from drift.store.urls import resolve_db_url

    with sqlite3.connect(db) as conn:
        host = conn.execute("SELECT name FROM hosts").fetchone()[0]
    with History.open(resolve_db_url(str(db)), host) as history:
        return [
            {ident: history.text(v) for ident, v in history.state_at(s).items()} for s in snapshots
        ]


def prune_once(original: Path, keep_days: int, folder: Path) -> dict[str, object]:
    db = folder / "drift.db"
    shutil.copyfile(original, db)
    with sqlite3.connect(db) as conn:
        last_id, last_us = conn.execute(
            "SELECT id, taken_us FROM snapshots ORDER BY id DESC LIMIT 1"
        ).fetchone()
        # Half a minute off the records' times: the second --keep is counted in cannot
        # move the horizon past a record.
        horizon = last_us - keep_days * DAY_US + 30_000_000
        keep_from = conn.execute(
            "SELECT id FROM snapshots WHERE taken_us <= ? ORDER BY taken_us DESC, id DESC LIMIT 1",
            (horizon,),
        ).fetchone()[0]
    before = states(db, [keep_from, last_id])
    rows_before, size_before = rows(db), db.stat().st_size
    # --keep is counted from now: the history's last record lies in the past.
    seconds = (time.time_ns() // 1000 - horizon) // 1_000_000
    drift = Path(sys.executable).with_name("drift")
    started = time.monotonic()
    out = subprocess.run(
        [str(drift), "prune", "--yes", "--keep", f"{seconds}s", "--db", str(db)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "XDG_STATE_HOME": str(folder)},
    ).stdout
    wall = time.monotonic() - started
    with sqlite3.connect(db) as conn:
        first = conn.execute("SELECT min(id) FROM snapshots").fetchone()[0]
    assert first == keep_from, (first, keep_from)
    assert states(db, [keep_from, last_id]) == before, "prune changed a kept state"
    return {
        "wall_s": round(wall, 2),
        "size_before": size_before,
        "size_after": db.stat().st_size,
        "rows_before": rows_before,
        "rows_after": rows(db),
        "output": out,
    }


def prune_on_postgres(original: Path, keep_days: int) -> dict[str, object]:
    """Copy the history into a throwaway PostgreSQL, ANALYZE, and time `drift prune`."""
    import psycopg

    sys.path.insert(0, str(Path(__file__).parent))
    from history_pg import cluster, copy_history

    drift = str(Path(sys.executable).with_name("drift"))
    with sqlite3.connect(original) as conn:
        last_us = conn.execute("SELECT max(taken_us) FROM snapshots").fetchone()[0]
    with cluster() as url:
        subprocess.run([drift, "db", "upgrade", "--db", url], check=True, capture_output=True)
        before = copy_history(original, url)
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute("ANALYZE")
        seconds = (time.time_ns() // 1000 - last_us) // 1_000_000 + keep_days * 86_400 - 30
        started = time.monotonic()
        subprocess.run(
            [drift, "prune", "--yes", "--keep", f"{seconds}s", "--db", url],
            check=True,
            capture_output=True,
        )
        wall = time.monotonic() - started
        with psycopg.connect(url) as pg:
            after = {t: pg.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    return {"wall_s": round(wall, 1), "rows_before": before, "rows_after": after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="history to copy (default: the cached year)")
    parser.add_argument("--keep-days", type=int, default=90)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--postgres", action="store_true", help="and once on PostgreSQL")
    args = parser.parse_args()
    if args.db is None:
        sys.path.insert(0, str(Path(__file__).parent))
        from history_gen import cached_history

        args.db = cached_history("year").db
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="drift-prune-") as folder:
            runs.append(prune_once(args.db, args.keep_days, Path(folder)))
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = {
        "db": str(args.db),
        "keep_days": args.keep_days,
        "load_average": os.getloadavg(),
        "median_wall_s": statistics.median(r["wall_s"] for r in runs),
        "walls_s": [r["wall_s"] for r in runs],
        "peak_rss_mb": round(peak_kb / 1024, 1),
        **{k: runs[0][k] for k in ("size_before", "size_after", "rows_before", "rows_after")},
    }
    print(runs[0]["output"], end="")
    print(
        f"prune --keep {args.keep_days}d: median {result['median_wall_s']} s of {args.runs} "
        f"(load {result['load_average'][0]:.2f}), peak RSS {result['peak_rss_mb']} MB, "
        f"{result['size_before']:,} -> {result['size_after']:,} bytes"
    )
    for table in TABLES:
        print(
            f"  {table:12} {result['rows_before'][table]:>9,} -> {result['rows_after'][table]:>9,}"
        )
    if args.postgres:
        result["postgres"] = pg = prune_on_postgres(args.db, args.keep_days)
        print(f"PostgreSQL: prune --keep {args.keep_days}d in {pg['wall_s']} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
