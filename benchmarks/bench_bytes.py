"""Bytes per minute of a deep history, and where each byte goes, table by table and index by index.

A host shaped like a small inference box (6,443 facts: 3 services of 72 facts
with 62 environment variables each, their 3 serve scripts of 71 facts, 2,001
files, a repository, 3 commands) is recorded through
HistoryWriter.write_snapshot on a fake clock, one record a minute. The
history is first grown to a depth (a week, a month, a year of minutes) in
which one command's 26-byte output changes every minute, as the writer
would store it but without its per-record read (`fill`: the same statements
the writer's apply step runs, one minute at a time, so a year takes a minute
instead of hours). Then, at that depth, through the real write_snapshot:

- `--minutes` records in which only that output changes: the file's growth
  after `PRAGMA wal_checkpoint(TRUNCATE)` and the bytes used inside pages
  (dbstat), per table and per index, per minute;
- as many unchanged records, the same way;
- the store's part of an unchanged record (open, the reads before
  collecting, write_snapshot, close) at depth against a fresh database:
  alternated pairs, median of the ratios (flat means <= 1.1x);
- `--plans`: every statement the writer runs for an unchanged and a changed
  record, with SQLite's query plan at depth.

    .venv/bin/python benchmarks/bench_bytes.py --depth week,month,year --json out.json

Runs against whatever `drift` is importable, so the same script measures an
older checkout (PYTHONPATH=that/checkout) for a before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_record as br  # noqa: E402  (a sibling script, not a package)

from drift.facts import Fact, FactBlock
from drift.store.apply import apply_delta
from drift.store.delta import Delta, NewVersion, stored_value
from drift.store.urls import DbUrl, resolve_db_url
from drift.store.writer import HistoryWriter

HOST = "bytes-node"
MINUTE_US = 60_000_000
START_US = 1_788_220_800_000_000  # 2026-09-01 00:00 UTC: a fixed fake clock
DEPTHS = {"fresh": 0, "day": 1_440, "week": 10_080, "month": 43_200, "year": 525_600}
SERVICES = ("prefill", "decode", "router")
LOADAVG = ("command:loadavg", "stdout")


def loadavg_line(minute: int) -> str:
    """The changing command's output at a minute: 26 bytes shaped like /proc/loadavg."""
    rng = random.Random(minute)
    a, b, c = (rng.uniform(0.1, 9.9) for _ in range(3))
    line = f"{a:.2f} {b:.2f} {c:.2f} {rng.randint(1, 9)}/3{rng.randint(10, 99)} "
    return line + str(rng.randint(10000, 99999))[: 26 - len(line)].ljust(26 - len(line), "0")


@dataclass(frozen=True)
class Shape:
    """How big the host is."""

    env: int = 62  # environment variables of each service's process
    exports: int = 57  # exports of each serve script
    flags: int = 12  # flags each serve script's exec line passes
    files: int = 2001


def _service(name: str, pid: int, shape: Shape) -> list[Fact]:
    found = {
        "pid": pid,
        "found_by": f"pidfile /run/serve/{name}.pid",
        "pidfile_mtime": "2026-08-31T23:58:01.013842+00:00",
    }
    proc = {"pid": pid, "source": f"/proc/{pid}/stat"}
    environ = {"pid": pid, "source": f"/proc/{pid}/environ"}
    cmdline = {"pid": pid, "source": f"/proc/{pid}/cmdline"}
    subject = f"service:{name}"
    facts = [
        Fact(subject, "running", "true", found),
        Fact(subject, "pid", str(pid), found),
        Fact(
            subject,
            "started_at",
            "2026-08-31T23:58:01.009000+00:00",
            {**found, "uncertainty_ms": 10},
        ),
        Fact(subject, "ppid", "1", proc),
        Fact(
            subject, "exe", "/opt/venv/bin/python3.11", {"pid": pid, "source": f"/proc/{pid}/exe"}
        ),
        Fact(subject, "cwd", "/opt/serve", {"pid": pid, "source": f"/proc/{pid}/cwd"}),
        Fact(subject, "user", "serve", {"pid": pid, "source": f"/proc/{pid}/status"}),
        Fact(subject, "argv", json.dumps(["python3", "-m", "sglang.launch_server"]), cmdline),
        Fact(subject, "flag:--model-path", "/models/m", cmdline),
        Fact(subject, "flag:--port", str(30000 + pid % 3), cmdline),
    ]
    inherited = ("PATH", "LANG", "HOME", "USER", "TZ")
    names = [*inherited, *(f"SGLANG_{name.upper()}_OPT_{i:02d}" for i in range(shape.env - 5))]
    facts += [
        Fact(subject, f"env:{n}", f"/opt/{n.lower()}/{i}", environ) for i, n in enumerate(names)
    ]
    return facts


def _script(name: str, shape: Shape) -> list[Fact]:
    path = f"/opt/serve/{name}.sh"
    subject = f"script:{path}"
    exports = [f"export SGLANG_{name.upper()}_OPT_{i:02d}={i}" for i in range(shape.exports)]
    exec_line = "exec python3 -m sglang.launch_server " + " ".join(
        f"--flag-{i} {i}" for i in range(shape.flags)
    )
    lines = ["#!/bin/bash", f"# {name} server", "set -e", *exports, exec_line]
    where = {"file": path, "service": name}
    facts = [Fact(subject, "content", "\n".join(lines) + "\n", where)]
    facts += [
        Fact(
            subject,
            f"export:{text[7:].split('=')[0]}",
            str(i),
            {**where, "line": i + 4, "text": text},
        )
        for i, text in enumerate(exports)
    ]
    at = {**where, "line": len(lines), "text": exec_line}
    facts.append(Fact(subject, "exec", exec_line[5:], at))
    facts += [Fact(subject, f"flag:--flag-{i}", str(i), at) for i in range(shape.flags)]
    return facts


def _files(shape: Shape) -> FactBlock:
    subjects = [
        f"file:/srv/data/d{i % 20:02d}/s{i % 7}/file{i:05d}.txt" for i in range(shape.files)
    ]
    rng = random.Random(1)
    sha = [f"{rng.getrandbits(256):064x}" for _ in subjects]
    sizes = [str(8 + i % 300) for i in range(shape.files)]
    provenance = {"glob": "/srv/data/**/*.txt", "set": "data"}
    return FactBlock(
        ("sha256", "size", "mode"),
        subjects,
        [sha, sizes, ["0644"] * shape.files],
        [provenance] * shape.files,
    )


def host_facts(shape: Shape, minute: int) -> list[Fact | FactBlock]:
    """Everything one record collects at a minute, in the collectors' order; only loadavg moves."""
    items: list[Fact | FactBlock] = []
    for i, name in enumerate(SERVICES):
        items += _service(name, 4100 + i, shape)
    for name in SERVICES:
        items += _script(name, shape)
    items.append(_files(shape))
    repo = {"path": "/opt/sglang", "git_dir": "/opt/sglang/.git"}
    head = {**repo, "moved_at": "2026-08-30T10:00:00+00:00"}
    items += [
        Fact("repo:/opt/sglang", "head", "4f1c2a9e" * 5, head),
        *(
            Fact("repo:/opt/sglang", k, v, repo)
            for k, v in (("branch", "main"), ("dirty", "false"), ("diff", ""), ("untracked", "0"))
        ),
    ]
    for name, run, out in (
        (
            "gpu-driver",
            "nvidia-smi --query-gpu=driver_version --format=csv,noheader",
            "575.57.08\n",
        ),
        ("kernel", "uname -r", "6.8.0-45-generic\n"),
        ("loadavg", "cat /proc/loadavg", loadavg_line(minute) + "\n"),
    ):
        items += [
            Fact(f"command:{name}", "stdout", out, {"run": run}),
            Fact(f"command:{name}", "exit", "0", {"run": run}),
        ]
    return items


def count_facts(items: list[Fact | FactBlock]) -> int:
    return sum(len(i.subjects) * len(i.keys) if isinstance(i, FactBlock) else 1 for i in items)


# ---------------------------------------------------------------- building a history


def record(db: DbUrl, shape: Shape, minute: int) -> Any:
    """One record through the real write_snapshot, at `minute` on the fake clock."""
    with HistoryWriter.open(db) as writer:
        return writer.write_snapshot(
            HOST, START_US + minute * MINUTE_US, host_facts(shape, minute), [], {}
        )


def fill(db: DbUrl, shape: Shape, first: int, minutes: int) -> None:
    """Grow the history by `minutes` records in which loadavg changed, as the writer stores them.

    The writer's own steps (its snapshot insert, apply_delta), without reading
    the 6,443 open versions a real changed record reads first: that read
    changes no byte of the file and would make a year of minutes take hours.
    """
    with HistoryWriter.open(db) as writer:
        conn = writer.conn
        host_id = writer.host_id(HOST)
        assert host_id is not None
        row = conn.execute(
            "SELECT f.id, v.id FROM facts f JOIN versions v ON v.fact_id = f.id "
            "WHERE f.host_id = ? AND f.subject = ? AND f.key = ? AND v.until_snapshot_id IS NULL",
            (host_id, *LOADAVG),
        ).fetchone()
        fact_id, vid = int(row[0]), int(row[1])
        n_facts, config_id = conn.execute(
            "SELECT n_facts, config_id FROM snapshots WHERE host_id = ? ORDER BY id DESC LIMIT 1",
            (host_id,),
        ).fetchone()
        provenance = {"run": "cat /proc/loadavg"}
        rng = random.Random(first)
        for minute in range(first, first + minutes):
            if (minute - first) % 1440 == 0:
                if minute != first:
                    conn.execute("COMMIT")
                conn.execute("BEGIN IMMEDIATE")
            snapshot_id = writer._insert_snapshot(
                host_id,
                START_US + minute * MINUTE_US,
                time.monotonic(),
                n_facts,
                1,
                [],
                None,
                rng.randbytes(16),
                config_id,
            )
            value, digest, data = stored_value(LOADAVG[1], loadavg_line(minute) + "\n")
            opening = NewVersion(LOADAVG, provenance, False, fact_id, value, digest, data)
            apply_delta(conn, host_id, snapshot_id, Delta([vid], [opening], []), False)
            vid = int(conn.execute("SELECT max(id) FROM versions").fetchone()[0])
        conn.execute("COMMIT")


def build(db: DbUrl, shape: Shape, depth: int) -> int:
    """A history `depth` minutes deep (after a first record); returns the next minute."""
    record(db, shape, 0)
    if depth > 1:
        fill(db, shape, 1, depth - 1)
    return max(depth, 1)


# ---------------------------------------------------------------- measuring


def checkpoint(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return path.stat().st_size


def used_bytes(path: Path) -> dict[str, int]:
    """Bytes in use inside pages (page size - unused), per table and index (dbstat)."""
    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT name, sum(pgsize - unused) FROM dbstat GROUP BY name").fetchall()
    finally:
        con.close()
    return {str(name): int(used) for name, used in rows}


def growth(path: Path, minutes: int, step: Callable[[int], None]) -> dict[str, Any]:
    """File and in-page growth per minute over `minutes` calls of step(i), per table and index."""
    size0, used0, rows0 = checkpoint(path), used_bytes(path), br.row_counts(path)
    for i in range(minutes):
        step(i)
    size1, used1, rows1 = checkpoint(path), used_bytes(path), br.row_counts(path)
    per = {
        name: round((used1.get(name, 0) - used0.get(name, 0)) / minutes, 1)
        for name in sorted(used0.keys() | used1.keys())
    }
    return {
        "file_bytes_per_minute": round((size1 - size0) / minutes, 1),
        "used_bytes_per_minute": round(
            sum(used1.values()) / minutes - sum(used0.values()) / minutes, 1
        ),
        "used_by_name": {k: v for k, v in per.items() if v},
        "rows_per_minute": {
            k: round((rows1.get(k, 0) - rows0.get(k, 0)) / minutes, 2)
            for k in sorted(rows1)
            if rows1.get(k, 0) != rows0.get(k, 0)
        },
    }


def unchanged_store_part(db: DbUrl, shape: Shape, minute: int, state: int) -> float:
    """Seconds of the store's part of an unchanged `drift record`: open, reads, write, close.

    `state`: the minute whose loadavg the last record stored.
    """
    items = host_facts(shape, state)
    started = time.perf_counter()
    with HistoryWriter.open(db) as writer:
        writer.load_file_cache(HOST)
        writer.load_last_processes(HOST, [f"service:{s}" for s in SERVICES])
        writer.key_fingerprint(HOST)
        result = writer.write_snapshot(HOST, START_US + minute * MINUTE_US, items, [], {})
    elapsed = time.perf_counter() - started
    assert result.changed == 0, result
    return elapsed


@contextmanager
def traced(writer: HistoryWriter) -> Iterator[list[str]]:
    """Every statement the writer's SQLite connection runs meanwhile, parameters bound."""
    statements: list[str] = []
    writer.conn.raw.set_trace_callback(statements.append)
    try:
        yield statements
    finally:
        writer.conn.raw.set_trace_callback(None)


def plans(
    db: DbUrl, shape: Shape, minute: int, state: int
) -> dict[str, list[tuple[str, list[str]]]]:
    """Each statement of an unchanged and of a changed record, with its query plan at depth."""
    out: dict[str, list[tuple[str, list[str]]]] = {}
    for label, state_minute in (("unchanged", state), ("changed", minute)):
        with HistoryWriter.open(db) as writer, traced(writer) as statements:
            writer.load_file_cache(HOST)
            writer.load_last_processes(HOST, [f"service:{s}" for s in SERVICES])
            writer.write_snapshot(
                HOST, START_US + minute * MINUTE_US, host_facts(shape, state_minute), [], {}
            )
        con = sqlite3.connect(db.sqlite_path)  # type: ignore[arg-type]
        seen: list[tuple[str, list[str]]] = []
        for sql in statements:
            head = sql.lstrip().split()[0].upper()
            if head not in ("SELECT", "UPDATE", "INSERT", "DELETE") or len(sql) > 2000:
                continue
            try:
                plan = [r[3] for r in con.execute("EXPLAIN QUERY PLAN " + sql)]
            except sqlite3.Error as exc:
                plan = [f"(no plan: {exc})"]
            if (sql, plan) not in seen:
                seen.append((sql, plan))
        con.close()
        out[label] = seen
        minute += 1
    return out


def flatness(
    deep: DbUrl, shape: Shape, minute: int, state: int, pairs: int, tmp: Path
) -> dict[str, Any]:
    """The store's part of an unchanged record at depth against a fresh database, alternated."""
    fresh = resolve_db_url(str(tmp / "baseline-fresh.db"))
    build(fresh, shape, 2)
    fresh_minute = 2
    ratios, deep_s, fresh_s = [], [], []
    unchanged_store_part(deep, shape, minute, state)  # warm both: the page cache, the bytecode
    unchanged_store_part(fresh, shape, fresh_minute, 1)
    minute += 1
    fresh_minute += 1
    for i in range(pairs):
        if i % 2:
            f = unchanged_store_part(fresh, shape, fresh_minute, 1)
            d = unchanged_store_part(deep, shape, minute, state)
        else:
            d = unchanged_store_part(deep, shape, minute, state)
            f = unchanged_store_part(fresh, shape, fresh_minute, 1)
        minute += 1
        fresh_minute += 1
        deep_s.append(d)
        fresh_s.append(f)
        ratios.append(d / f)
    return {
        "deep_ms": round(statistics.median(deep_s) * 1000, 2),
        "fresh_ms": round(statistics.median(fresh_s) * 1000, 2),
        "ratio": round(statistics.median(ratios), 3),
        "pairs": pairs,
    }


def measure(depth_name: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    shape = Shape(files=args.files)
    path = tmp / f"{depth_name}.db"
    db = resolve_db_url(str(path))
    started = time.monotonic()
    minute = build(db, shape, DEPTHS[depth_name])
    built = time.monotonic() - started
    out: dict[str, Any] = {
        "depth_minutes": DEPTHS[depth_name],
        "facts": count_facts(host_facts(shape, 0)),
        "build_s": round(built, 1),
        "file_bytes": checkpoint(path),
    }
    log(f"{depth_name}: built in {built:.1f} s, {out['file_bytes']:,} bytes")

    def changed(i: int) -> None:
        result = record(db, shape, minute + i)
        assert result.changed == 1, result

    out["changed"] = growth(path, args.minutes, changed)
    minute += args.minutes

    state = minute - 1  # the loadavg the last record stored

    def unchanged(i: int) -> None:
        with HistoryWriter.open(db) as writer:
            items = host_facts(shape, state)
            result = writer.write_snapshot(HOST, START_US + (minute + i) * MINUTE_US, items, [], {})
        assert result.changed == 0, result

    out["unchanged"] = growth(path, args.minutes, unchanged)
    minute += args.minutes
    if args.pairs:
        out["flat"] = flatness(db, shape, minute, state, args.pairs, tmp)
        minute += args.pairs + 1
    if args.plans:
        out["plans"] = plans(db, shape, minute, state)
    if not args.keep:
        for name in (f"{depth_name}.db", "baseline-fresh.db"):
            for companion in tmp.glob(f"{name}*"):
                companion.unlink()
    return out


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def show(results: dict[str, Any]) -> None:
    for depth, r in results.items():
        print(
            f"\n{depth} ({r['depth_minutes']:,} minutes deep, {r['facts']:,} facts, "
            f"{r['file_bytes']:,} bytes)"
        )
        for kind in ("changed", "unchanged"):
            g = r[kind]
            print(
                f"  {kind} minute: file +{g['file_bytes_per_minute']} B, "
                f"used in pages +{g['used_bytes_per_minute']} B, rows {g['rows_per_minute']}"
            )
            for name, used in sorted(g["used_by_name"].items(), key=lambda kv: -abs(kv[1])):
                print(f"    {name:40s} {used:+8.1f} B")
        if "flat" in r:
            f = r["flat"]
            print(
                f"  unchanged record, store's part: {f['deep_ms']} ms deep, "
                f"{f['fresh_ms']} ms fresh, ratio {f['ratio']} "
                f"(median of {f['pairs']} alternated pairs)"
            )
        for label, statements in r.get("plans", {}).items():
            print(f"  plans of a {label} record:")
            for sql, plan in statements:
                print(f"    {' '.join(sql.split())[:150]}")
                for step in plan:
                    print(f"        {step}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", default="week", help="comma-separated: " + ", ".join(DEPTHS))
    parser.add_argument("--minutes", type=int, default=200, help="records measured at each depth")
    parser.add_argument(
        "--pairs", type=int, default=21, help="alternated pairs for flatness (0: skip)"
    )
    parser.add_argument("--files", type=int, default=Shape.files)
    parser.add_argument("--plans", action="store_true", help="print each writer statement's plan")
    parser.add_argument("--dir", type=Path, help="work here (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    depths = args.depth.split(",")
    unknown = [d for d in depths if d not in DEPTHS]
    if unknown:
        parser.error(f"unknown depth {', '.join(unknown)}")
    tmp = args.dir or Path(tempfile.mkdtemp(prefix="drift-bytes-"))
    tmp.mkdir(parents=True, exist_ok=True)
    log(f"load average {os.getloadavg()[0]:.2f}; sqlite {sqlite3.sqlite_version}; in {tmp}")
    try:
        results = {d: measure(d, args, tmp) for d in depths}
    finally:
        if args.dir is None and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    log(f"load average {os.getloadavg()[0]:.2f}")
    show(results)
    summary = {
        d: {
            "changed_file_bytes_per_minute": r["changed"]["file_bytes_per_minute"],
            "changed_used_bytes_per_minute": r["changed"]["used_bytes_per_minute"],
            "unchanged_used_bytes_per_minute": r["unchanged"]["used_bytes_per_minute"],
            **({"unchanged_deep_vs_fresh": r["flat"]["ratio"]} if "flat" in r else {}),
        }
        for d, r in results.items()
    }
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
