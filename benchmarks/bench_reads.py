"""Read commands on a long history: this checkout against another, in alternated pairs.

    python benchmarks/bench_reads.py build DB MINUTES
    python benchmarks/bench_reads.py pairs --base DIR [--pairs N] DB ARGS...

`build` writes a host's history of MINUTES per-minute records: 6,443 facts
(440 environment variables, 3,000 files' sha256 and size, a serve script, a
day counter and `command:loadavg`, whose output changes every minute). The
first 60 records go through HistoryWriter on a fake clock, so every row has
the writer's shape; the rest are inserted in that shape directly (a minute's
snapshot row, the load's new version and the old one closed; one record in
500 with a collection error; a two-hour gap a month), as a year of real
records would take hours to write.

`pairs` runs `drift ARGS --db DB` with this checkout's drift and with the
drift package in `--base` (a checkout or `git archive` of another commit),
alternately, and prints the median wall and CPU time, the peak RSS of each,
and the median of the CPU-time ratios (CPU time moves less than wall time
on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

HOST = "gpu-node-7"
START = 1_750_000_000_000_000  # 2025-06-15 15:06:40 UTC
MINUTE = 60_000_000
CODE = "import sys; from drift.cli import main; sys.argv[0] = 'drift'; main()"


def build(path: str, minutes: int) -> None:
    from drift.facts import Fact
    from drift.store.urls import resolve_db_url
    from drift.store.writer import HistoryWriter

    rng = random.Random(7)

    def facts(i: int) -> list[Fact]:
        load = f"{rng.random():.2f} 0.5{i % 10} 0.40"
        out = [Fact("command:loadavg", "stdout", load, {"command": "cat /proc/loadavg"})]
        env = {"source": "/proc/1/environ"}
        out.append(Fact("service:decode", "env:SGLANG_DAY", str(i // 1440), env))
        out += [Fact("service:decode", f"env:VAR_{k}", f"value-{k}", env) for k in range(440)]
        for k in range(3000):
            file = f"/opt/sglang/python/mod_{k}.py"
            out.append(Fact(f"file:{file}", "sha256", f"{k:064x}", {"path": file}))
            out.append(Fact(f"file:{file}", "size", str(1000 + k), {"path": file}))
        script = "#!/bin/sh\n" + "echo line\n" * 200
        out.append(Fact("script:/opt/serve/decode.sh", "content", script, {"path": "x"}))
        return out

    with HistoryWriter.open(resolve_db_url(path)) as writer:
        for i in range(60):
            writer.write_snapshot(HOST, START + i * MINUTE, facts(i), [], {})
    conn = sqlite3.connect(path)
    one = conn.execute
    host_id, config_id = one("SELECT host_id, config_id FROM snapshots").fetchone()
    (load_fact,) = one("SELECT id FROM facts WHERE subject = 'command:loadavg'").fetchone()
    (day_fact,) = one("SELECT id FROM facts WHERE key = 'env:SGLANG_DAY'").fetchone()
    is_open = "SELECT id FROM versions WHERE fact_id = ? AND until_snapshot_id IS NULL"
    open_load, open_day = (
        one(is_open, (load_fact,)).fetchone()[0],
        one(is_open, (day_fact,)).fetchone()[0],
    )
    snap_id = one("SELECT max(id) FROM snapshots").fetchone()[0]
    version_id = one("SELECT max(id) FROM versions").fetchone()[0]
    prov_load = json.dumps({"command": "cat /proc/loadavg"})
    prov_day = json.dumps({"source": "/proc/1/environ"})
    error = json.dumps([{"subject": "command:gpu", "key": "stdout", "message": "timed out"}])
    at = START + 60 * MINUTE
    snaps: list[tuple[object, ...]] = []
    closes: list[tuple[int, int]] = []
    versions: list[tuple[object, ...]] = []
    for i in range(60, minutes):
        if i % 43_200 == 20_000:
            at += 120 * MINUTE
        snap_id += 1
        version_id += 1
        closes.append((snap_id, open_load))
        load = f"{rng.random():.2f} 0.5{i % 10} 0.40"
        versions.append((version_id, load_fact, load, snap_id, prov_load))
        open_load, changed = version_id, 1
        if i % 1440 == 0:
            version_id += 1
            closes.append((snap_id, open_day))
            versions.append((version_id, day_fact, str(i // 1440), snap_id, prov_day))
            open_day, changed = version_id, 2
        failed = i % 500 == 250
        snaps.append(
            (
                snap_id,
                host_id,
                at,
                900,
                6443,
                changed,
                int(failed),
                error if failed else None,
                b"\x01" * 16,
                config_id,
            )
        )
        at += MINUTE
        if len(snaps) >= 50_000 or i == minutes - 1:
            with conn:
                conn.executemany(
                    "INSERT INTO snapshots (id, host_id, taken_us, duration_ms, n_facts, "
                    "n_changed, n_errors, errors, state_digest, config_id) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?)",
                    snaps,
                )
                conn.executemany(
                    "INSERT INTO versions (id, fact_id, value, blob_sha256, secret, "
                    "first_snapshot_id, until_snapshot_id, provenance) "
                    "VALUES (?,?,?,NULL,0,?,NULL,?)",
                    versions,
                )
                conn.executemany("UPDATE versions SET until_snapshot_id = ? WHERE id = ?", closes)
            snaps, closes, versions = [], [], []
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    print(f"{path}: {minutes:,} records")


def run(base: str | None, db: str, args: list[str]) -> tuple[float, float, float, int]:
    """One drift process: wall seconds, CPU seconds, peak RSS in MiB, exit code."""
    env = dict(os.environ, TZ="UTC")
    if base is not None:
        env["PYTHONPATH"] = base
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CODE, *args, "--db", db, "--host", HOST],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def pairs(base: str, n: int, db: str, args: list[str]) -> None:
    seen: dict[str, list[tuple[float, float, float, int]]] = {"base": [], "new": []}
    for i in range(n):
        for which in ("base", "new") if i % 2 == 0 else ("new", "base"):
            seen[which].append(run(base if which == "base" else None, db, args))

    def line(which: str) -> str:
        runs = seen[which]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        codes = ",".join(str(c) for c in sorted({r[3] for r in runs}))
        return f"{wall:6.2f} s wall {cpu:6.2f} s cpu {max(r[2] for r in runs):5.0f} MiB rc={codes}"

    ratio = statistics.median(n[1] / b[1] for b, n in zip(seen["base"], seen["new"], strict=True))
    print(
        f"{Path(db).name} {' '.join(args)} | base {line('base')} | new {line('new')} | "
        f"cpu new/base {ratio:.2f} | load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    b = sub.add_parser("build")
    b.add_argument("db")
    b.add_argument("minutes", type=int)
    p = sub.add_parser("pairs")
    p.add_argument("--base", required=True, help="a folder holding another drift package")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("db")
    p.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    if opts.what == "build":
        build(opts.db, opts.minutes)
    else:
        pairs(opts.base, opts.pairs, opts.db, opts.args)


if __name__ == "__main__":
    main()
