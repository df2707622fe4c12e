"""A fleet in one PostgreSQL: 100 hosts x a week of per-minute records.

The week of one host (history_gen's cached week: real collectors on a real
sandbox, 10,080 records, 6,584 facts) is copied into a throwaway PostgreSQL
once per host with COPY, its times moved so that every host's last record
was a minute ago, as if the whole fleet recorded until now. Records and
versions are written as a fleet writes them: minute by minute, every host's
record of a minute before any of the next, so their ids interleave (a
host's records are one id in a hundred) and the table's order is time's.
Per host, each service's pid is its own (as on real nodes), and one host
(node-003) has an export of the decode script changed: `drift compare
--fleet` must find it and nothing else.

Measured, each command a child of the benchmark (the real `drift` CLI; wall,
CPU and peak RSS from wait4), after VACUUM ANALYZE (autovacuum keeps a live
server so; without the visibility map every count reads the heap):

- `drift since --stable` 1 day back for one host (target < 0.5 s);
- `drift compare --fleet` across every host (target < 2 s);
- `drift since --fleet` 1 day back (every host investigated; no target);
- the database size per host per day (PostgreSQL, and SQLite for one host),
  table by table with their indexes, for the scale-out estimate in
  benchmarks/README.md.

    .venv/bin/python benchmarks/bench_fleet.py [--hosts 100] [--runs 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_history import drift, iso, repeated  # noqa: E402
from bench_record import BenchError, bytecode_on, log  # noqa: E402
from history_gen import CACHE, cached_history  # noqa: E402
from history_pg import BOOLEAN, cluster  # noqa: E402

MINUTE_US = 60_000_000
DAY_US = 1440 * MINUTE_US
ODD = 3  # node-003 exports another value
# Copied once: shared by every host (configs, long texts and provenances are by content).
SHARED = ("configs", "blobs", "provenances")
PER_HOST = ("hosts", "snapshots", "facts", "versions", "marks")
INTERLEAVED = ("snapshots", "versions")


def node(i: int) -> str:
    return f"node-{i:03d}"


class Source:
    """The one host's week, read once, rows kept per table with the columns they have."""

    def __init__(self, db: Path) -> None:
        src = sqlite3.connect(db)
        self.columns: dict[str, list[str]] = {}
        self.rows: dict[str, list[tuple[Any, ...]]] = {}
        for table in (*SHARED, *PER_HOST):
            columns = [r[1] for r in src.execute(f'PRAGMA table_info("{table}")')]
            self.columns[table] = columns
            self.rows[table] = list(src.execute(f'SELECT {", ".join(columns)} FROM "{table}"'))
        src.close()
        self.span = {
            t: 1 + max((r[0] for r in self.rows[t]), default=0) for t in PER_HOST if t != "hosts"
        }
        taken = self.columns["snapshots"].index("taken_us")
        self.first_us = min(r[taken] for r in self.rows["snapshots"])
        self.last_us = max(r[taken] for r in self.rows["snapshots"])
        facts = {r[0]: (r[2], r[3]) for r in self.rows["facts"]}
        self.pid_facts = {
            i for i, (s, k) in facts.items() if s.startswith("service:") and k == "pid"
        }
        exports = sorted(
            i for i, (s, k) in facts.items() if s.endswith("decode.sh") and k.startswith("export:")
        )
        self.odd_fact = exports[0]


def host_rows(src: Source, table: str, i: int, hosts: int, shift_us: int) -> Iterator[list[Any]]:
    """The rows of `table` for host i (host_row)."""
    for row in src.rows[table]:
        yield host_row(src, table, row, i, hosts, shift_us)


def host_row(
    src: Source, table: str, row: tuple[Any, ...], i: int, hosts: int, shift_us: int
) -> list[Any]:
    """One row of `table` as host i of `hosts` has it: record ids interleaved with the other
    hosts' (a fleet writes minute by minute), other ids moved up by i spans, times moved."""
    cols = src.columns[table]
    at = {c: n for n, c in enumerate(cols)}
    fact = i * src.span["facts"]

    def snap(old: int) -> int:
        return (old - 1) * hosts + i + 1

    out = list(row)
    if table == "hosts":
        out[at["id"]], out[at["name"]] = i + 1, node(i)
    elif table == "snapshots":
        out[at["id"]] = snap(out[at["id"]])
        out[at["host_id"]] = i + 1
        out[at["taken_us"]] += shift_us
    elif table == "facts":
        out[at["id"]] += fact
        out[at["host_id"]] = i + 1
    elif table == "marks":
        out[at["id"]] += i * src.span["marks"]
        out[at["host_id"]] = i + 1
        out[at["at_us"]] += shift_us
    elif table == "versions":
        fact_id = out[at["fact_id"]]
        out[at["id"]] = (out[at["id"]] - 1) * hosts + i + 1
        out[at["fact_id"]] = fact_id + fact
        out[at["first_snapshot_id"]] = snap(out[at["first_snapshot_id"]])
        if out[at["until_snapshot_id"]] is not None:
            out[at["until_snapshot_id"]] = snap(out[at["until_snapshot_id"]])
        if fact_id in src.pid_facts and out[at["value"]] is not None:
            out[at["value"]] = str(int(out[at["value"]]) + 100_000 * i)
        if i == ODD and fact_id == src.odd_fact and out[at["until_snapshot_id"]] is None:
            out[at["value"]] = "odd-on-node-003"
    return [
        bool(v) if (table, c) in BOOLEAN and v is not None else v
        for v, c in zip(out, cols, strict=True)
    ]


def load(src: Source, url: str, hosts: int) -> dict[str, Any]:
    """Every host's week into the database; VACUUM ANALYZE."""
    import psycopg

    shift = int(time.time() * 1e6) - MINUTE_US - src.last_us
    t0 = time.monotonic()
    with psycopg.connect(url) as pg, pg.cursor() as cur:
        for table in SHARED:
            cols = src.columns[table]
            with cur.copy(f'COPY "{table}" ({", ".join(cols)}) FROM STDIN') as copy:
                for row in src.rows[table]:
                    copy.write_row(list(row))
        for table in PER_HOST:
            cols = src.columns[table]
            with cur.copy(f'COPY "{table}" ({", ".join(cols)}) FROM STDIN') as copy:
                if table in INTERLEAVED:
                    # Minute by minute: every host's row of this record, then the next.
                    for row in src.rows[table]:
                        for i in range(hosts):
                            copy.write_row(host_row(src, table, row, i, hosts, shift))
                else:
                    for i in range(hosts):
                        for out in host_rows(src, table, i, hosts, shift):
                            copy.write_row(out)
            log(f"fleet: {table} of {hosts} hosts loaded ({time.monotonic() - t0:.0f} s)")
        for table in (*SHARED, *PER_HOST):
            if "id" in src.columns[table]:
                cur.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f'(SELECT coalesce(max(id), 1) FROM "{table}"))'
                )
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("VACUUM ANALYZE")  # what autovacuum keeps a live server at
    return {"load_s": round(time.monotonic() - t0, 1), "shift_us": shift}


def sizes(url: str) -> dict[str, int]:
    """Bytes of each drift table with its indexes and TOAST, and of the whole database."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        rows = pg.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ).fetchall()
        total = pg.execute("SELECT pg_database_size(current_database())").fetchone()
    out = {name: int(size) for name, size in rows}
    out["(database)"] = int(total[0]) if total else 0
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--minutes", type=int, default=None, help="a shorter week (tests)")
    args = parser.parse_args(argv)
    bench = Path(tempfile.mkdtemp(prefix="drift-bench-fleet-"))
    bytecode_on(args.cache)
    results: dict[str, Any] = {"hosts": args.hosts, "load_start": os.getloadavg()}
    failed = None
    try:
        found = cached_history("week", minutes=args.minutes, cache=args.cache, progress=log)
        src = Source(found.db)
        results["one_host"] = {
            "snapshots": len(src.rows["snapshots"]),
            "facts": len(src.rows["facts"]),
            "versions": len(src.rows["versions"]),
            "sqlite_bytes": found.db.stat().st_size,
            "days": (src.last_us - src.first_us) / DAY_US,
        }
        with cluster() as url:
            drift(["db", "upgrade", "--db", url], bench, "drift db upgrade")
            results["load"] = load(src, url, args.hosts)
            log(f"fleet: {args.hosts} hosts loaded in {results['load']['load_s']} s")
            results["sizes"] = sizes(url)
            # A day back; half the history back for one shorter than 2 days (tests).
            span = min(DAY_US, (src.last_us - src.first_us) // 2)
            day_back = iso(int(time.time() * 1e6) - MINUTE_US - span)
            db = ["--db", url]
            one = repeated(
                ["since", *db, "--host", node(args.hosts // 2), "--stable", day_back],
                bench,
                args.runs,
                "since --stable 1 day back, one host",
            )
            fleet = repeated(
                ["compare", "--fleet", *db, "--format", "json"],
                bench,
                args.runs,
                "compare --fleet",
                keep_output=True,
            )
            groups = json.loads(fleet.pop("stdout"))["data"]["groups"]
            findings = [f for g in groups for f in g["findings"]]
            odd = {f["host"] for f in findings}
            if odd != {node(ODD)} or not findings:
                raise BenchError(f"compare --fleet found {sorted(odd)}, not only {node(ODD)}")
            fleet["findings"] = len(findings)
            fleet["hosts"] = sum(len(g["hosts"]) for g in groups)
            results["since_one"] = one
            results["compare_fleet"] = fleet
            since_fleet = repeated(
                ["since", "--fleet", *db, "--stable", day_back, "--format", "json"],
                bench,
                1,
                "since --fleet 1 day back",
            )
            results["since_fleet"] = since_fleet
    except BenchError as exc:
        failed = str(exc)
        log(f"bench: {exc}")
    finally:
        results["load_end"] = os.getloadavg()
        shutil.rmtree(bench, ignore_errors=True)
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 1 if failed else 0


def report(results: dict[str, Any]) -> None:
    hosts = results["hosts"]
    one = results.get("one_host", {})
    days = one.get("days") or 7
    for name, target in (
        ("since_one", "< 0.5 s"),
        ("compare_fleet", "< 2 s"),
        ("since_fleet", "-"),
    ):
        if name in results:
            r = results[name]
            figures = f"{r['s']:.3f} s wall, {r['cpu_s']:.3f} s CPU, {r['rss_mib']:.0f} MiB"
            print(f"{name:14} {figures}  (target {target})")
    sizes = results.get("sizes", {})
    if sizes:
        total = sizes["(database)"]
        per_day = total / hosts / days
        print(f"PostgreSQL: {total / 2**20:,.0f} MiB, {hosts} hosts: {per_day:,.0f} B/host/day")
        for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
            print(f"  {name:14} {size / 2**20:10,.1f} MiB  {size / hosts / days:10,.0f} B/host/day")
    if one:
        print(
            f"SQLite, one host: {one['sqlite_bytes'] / days:,.0f} B per day "
            f"({one['snapshots']:,} records, {one['versions']:,} versions)"
        )
    print(f"load average: start {results['load_start']}, end {results['load_end']}")


if __name__ == "__main__":
    sys.exit(main())
