"""Does every drift command stay fast, small and flat as a host's history grows?

On histories of a week, a month and a year of per-minute records
(history_gen.py: built once, cached under /var/tmp/drift-hist), each
measure runs the real `drift` CLI as a child, wall time and peak RSS (the
child's own, from wait4):

- an unchanged `drift record` on the history against one on a fresh
  database holding the same state: alternated pairs, median of the ratios;
- `drift since --stable` 1 day and 6 months (year only) before the end;
- `drift history` of the command that changes every minute;
- `drift show loadavg`;
- bytes a minute when only the 26-byte loadavg line changed: real records,
  file growth after a WAL checkpoint and bytes used in pages (dbstat);
- on PostgreSQL (a throwaway cluster on loopback, autovacuum off): the
  history copied in, `since` before and after its first ANALYZE.

Usage: bench_history.py [--depths week,month,year] [--runs 5] [--json FILE]
[--keep] [--no-postgres] [--skip history,...] (the year's `history` alone takes
minutes). Progress on stderr, a table and JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import (  # noqa: E402  (sibling scripts, not a package)
    DRIFT,
    BenchError,
    bytecode_on,
    clean_env,
    log,
    parse_record_line,
    sqlite_size,
    used_bytes,
)
from history_gen import CACHE, DEPTHS, MINUTE_US, CachedHistory, cached_history  # noqa: E402
from history_sandbox import HostSandbox, Shape, loadavg_line  # noqa: E402

DAY_US = 24 * 60 * MINUTE_US
MEASURES = frozenset({"since_1d", "since_6mo", "show", "history", "record", "growth"})


@dataclass
class Measured:
    """One run of a child: wall seconds, CPU seconds (user + system), its own peak RSS, output.

    On a machine shared with other work the wall time is mostly waiting for a
    core; the CPU time is what the command itself cost.
    """

    seconds: float
    cpu_s: float
    rss_mib: float
    returncode: int
    stdout: str
    stderr: str


def measured(cmd: list[str], cwd: Path) -> Measured:
    """Run `cmd`; wall time and the child's own peak RSS (wait4), not the largest child so far."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=clean_env(), stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
        _pid, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measured(
            seconds,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024,
            proc.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )


def drift(args: list[str], cwd: Path, what: str, ok: tuple[int, ...] = (0,)) -> Measured:
    result = measured([str(DRIFT), *args], cwd)
    if result.returncode not in ok:
        tail = (result.stderr or result.stdout).strip().splitlines()[-10:]
        raise BenchError(f"{what} exited {result.returncode}:\n  " + "\n  ".join(tail))
    return result


def repeated(
    args: list[str], cwd: Path, runs: int, what: str, *, keep_output: bool = False
) -> dict[str, Any]:
    """Median wall and CPU seconds and the largest peak RSS of `runs` runs; with
    `keep_output`, the first run's stdout too (`stdout`)."""
    results = [drift(args, cwd, what) for _ in range(runs)]
    figures: dict[str, Any] = {
        "s": round(statistics.median(r.seconds for r in results), 3),
        "cpu_s": round(statistics.median(r.cpu_s for r in results), 3),
        "rss_mib": round(max(r.rss_mib for r in results), 1),
        "out_bytes": len(results[0].stdout),
    }
    log(
        f"  {what}: {figures['s']:.3f} s ({figures['cpu_s']:.3f} s CPU), "
        f"{figures['rss_mib']:.0f} MiB"
    )
    if keep_output:
        figures["stdout"] = results[0].stdout
    return figures


def iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, tz=UTC).isoformat(timespec="seconds")


def taken_span(db: Path) -> tuple[int, int]:
    """The first and last snapshot's taken_us."""
    conn = sqlite3.connect(db)
    try:
        first, last = conn.execute("SELECT min(taken_us), max(taken_us) FROM snapshots").fetchone()
        return int(first), int(last)
    finally:
        conn.close()


def day_back(db: Path) -> str:
    """A day before the last record; half the history back for one shorter than 2 days (tests)."""
    first, last = taken_span(db)
    return iso(last - min(DAY_US, (last - first) // 2))


def history_args(found: CachedHistory, db: Path | str) -> list[str]:
    return ["--config", str(found.config), "--db", str(db)]


def supports(command: str, option: str, cwd: Path) -> bool:
    return option in drift([command, "--help"], cwd, f"drift {command} --help").stdout


# --------------------------------------------------------------------------- reads


def bench_reads(
    found: CachedHistory, db: Path, bench: Path, runs: int, skip: frozenset[str]
) -> dict[str, Any]:
    """since (1 day, and 6 months when the history is that deep), show, history."""
    args = history_args(found, db)
    first, end = taken_span(db)
    commands = {
        "since_1d": ("since --stable 1 day back", ["since", *args, "--stable", day_back(db)]),
        "show": ("show loadavg", ["show", *args, "loadavg"]),
        "history": ("history command:loadavg", ["history", *args, "command:loadavg stdout"]),
    }
    if end - 182 * DAY_US > first:
        since = ["since", *args, "--stable", iso(end - 182 * DAY_US)]
        commands["since_6mo"] = ("since --stable 6 months back", since)
    if "history" not in skip and supports("history", "--limit", bench):
        paged = ["history", *args, "--limit", "50", "command:loadavg stdout"]
        commands["history_limit"] = ("history --limit 50", paged)
    # Untimed: the first run after a change to drift compiles its bytecode.
    drift(commands["since_1d"][1], bench, "since (untimed)")
    return {
        name: repeated(cmd, bench, runs, what)
        for name, (what, cmd) in commands.items()
        if name.removesuffix("_limit") not in skip
    }


# --------------------------------------------------------------------------- records


def recorded(found: CachedHistory, db: Path, bench: Path, what: str) -> dict[str, float]:
    result = drift(["record", *history_args(found, db)], bench, what)
    return parse_record_line(result.stdout + result.stderr)


def bench_record(found: CachedHistory, db: Path, bench: Path, runs: int) -> dict[str, Any]:
    """Unchanged record at depth against one on a fresh database of the same state."""
    fresh = bench / "fresh.db"
    # The services run again with new pids: the first record of each takes that in.
    for target in (db, fresh, db, fresh):
        recorded(found, target, bench, "drift record (untimed)")
    for target in (db, fresh):
        line = recorded(found, target, bench, "drift record (check)")
        if line["changed"] or line["errors"]:
            raise BenchError(f"an unchanged record of {target.name} recorded {line}")
    pairs: list[dict[str, float]] = []
    for i in range(runs):
        order = [("fresh", fresh), ("history", db)]
        times = {
            name: drift(["record", "--quiet", *history_args(found, target)], bench, name)
            for name, target in (order if i % 2 == 0 else order[::-1])
        }
        pairs.append(
            {
                "fresh_s": times["fresh"].seconds,
                "history_s": times["history"].seconds,
                "fresh_mib": times["fresh"].rss_mib,
                "history_mib": times["history"].rss_mib,
                "ratio": times["history"].seconds / times["fresh"].seconds,
                "cpu_ratio": times["history"].cpu_s / times["fresh"].cpu_s,
            }
        )
        log(
            f"  record pair {i + 1}: history {times['history'].seconds:.3f} s, "
            f"fresh {times['fresh'].seconds:.3f} s, ratio {pairs[-1]['ratio']:.2f} "
            f"(CPU {pairs[-1]['cpu_ratio']:.2f})"
        )
    return {
        "ratio": round(statistics.median(p["ratio"] for p in pairs), 3),
        "cpu_ratio": round(statistics.median(p["cpu_ratio"] for p in pairs), 3),
        "history_s": round(statistics.median(p["history_s"] for p in pairs), 3),
        "fresh_s": round(statistics.median(p["fresh_s"] for p in pairs), 3),
        "history_mib": round(max(p["history_mib"] for p in pairs), 1),
        "fresh_mib": round(max(p["fresh_mib"] for p in pairs), 1),
        "pairs": pairs,
    }


def bench_growth(found: CachedHistory, db: Path, bench: Path, minutes: int) -> dict[str, Any]:
    """Bytes a minute when only the loadavg line changed: real records, one line each."""
    box = HostSandbox(found.host)
    size, used = sqlite_size(db), used_bytes(db)
    for i in range(minutes):
        box.loadavg.write_text(loadavg_line(10_000_000 + i) + "\n")
        line = recorded(found, db, bench, "drift record (growth)")
        if line["changed"] != 1:
            raise BenchError(f"a minute when only the loadavg line changed recorded {line}")
    grown, used_after = sqlite_size(db) - size, used_bytes(db)
    figures = {
        "minutes": minutes,
        "file_bytes_per_minute": round(grown / minutes),
        "used_bytes_per_minute": None
        if used is None or used_after is None
        else round((used_after - used) / minutes),
    }
    log(f"  growth: {figures}")
    return figures


# --------------------------------------------------------------------------- one depth


def bench_depth(
    found: CachedHistory, bench: Path, runs: int, growth: int, skip: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Every SQLite measure on a copy of one cached history (the cache stays untouched)."""
    built = json.loads(found.built.read_text())
    db = bench / f"{found.depth}.db"
    shutil.copyfile(found.db, db)
    out: dict[str, Any] = {"build": built, "db_bytes": sqlite_size(db)}
    log(f"{found.depth}: {built['minutes']:,} minutes, {out['db_bytes'] / 2**20:.0f} MiB")
    out.update(bench_reads(found, db, bench, runs, skip))
    if {"record", "growth"} <= skip:
        return out
    box = HostSandbox(found.host, shape=Shape(**built["shape"]))
    lock = open(found.folder / ".lock", "w")  # the sandbox's services: one bench at a time
    import fcntl

    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        box.start_all()
        if "record" not in skip:
            out["record"] = bench_record(found, db, bench, runs)
        if "growth" not in skip:
            out["growth"] = bench_growth(found, db, bench, growth)
    finally:
        box.stop_all()
        lock.close()
    return out


# --------------------------------------------------------------------------- report


def rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    """The issue's table: one column a depth; wall seconds (CPU seconds), peak RSS."""
    depths = list(results["depths"])

    def timed(key: str) -> list[str]:
        out = []
        for depth in depths:
            m = results["depths"][depth].get(key)
            out.append(
                ""
                if m is None
                else f"{m['s']:.2f} s ({m['cpu_s']:.2f} CPU), {m['rss_mib']:.0f} MiB"
            )
        return out

    def record() -> list[str]:
        out = []
        for depth in depths:
            r = results["depths"][depth].get("record")
            out.append(
                ""
                if r is None
                else f"{r['ratio']:.2f}x ({r['cpu_ratio']:.2f}x CPU), {r['history_mib']:.0f} MiB"
            )
        return out

    def growth(key: str) -> list[str]:
        return [
            f"{results['depths'][d]['growth'][key]:,}" if "growth" in results["depths"][d] else ""
            for d in depths
        ]

    table = [
        ("unchanged record vs fresh", *record(), "<= 1.1x"),
        ("since --stable 1 day back", *timed("since_1d"), "< 0.3 s"),
        ("since --stable 6 months back", *timed("since_6mo"), "< 1 s, < 100 MiB"),
        ("history command:loadavg", *timed("history"), "< 1 s"),
        ("history --limit 50", *timed("history_limit"), "< 1 s"),
        ("show loadavg", *timed("show"), "< 0.3 s"),
        ("bytes/minute, 26-byte line (file)", *growth("file_bytes_per_minute"), "<= 150"),
        ("bytes/minute, 26-byte line (pages)", *growth("used_bytes_per_minute"), "<= 150"),
    ]
    pg = results.get("postgres")
    if pg:
        at = [d == pg["depth"] for d in depths]
        table.append(
            (
                f"since on PostgreSQL ({pg['depth']}), before ANALYZE",
                *(
                    f"{pg['before_s']:.2f} s ({pg['before_cpu_s']:.2f} CPU)" if a else ""
                    for a in at
                ),
                "no plan cliff",
            )
        )
        table.append(
            (
                "  after ANALYZE",
                *(f"{pg['after_s']:.2f} s ({pg['after_cpu_s']:.2f} CPU)" if a else "" for a in at),
                "",
            )
        )
    return [("measure", *depths, "target"), *table]


def print_table(table: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for n, row in enumerate(table):
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if n == 0:
            print("-+-".join("-" * w for w in widths))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="week,month,year")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--growth-minutes", type=int, default=30)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the bench folder")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--skip",
        default="",
        help="measures to leave out: since_1d,since_6mo,show,history,record,growth",
    )
    parser.add_argument("--postgres-depth", default=None, help="default: the deepest of --depths")
    parser.add_argument(
        "--minutes",
        type=int,
        default=None,
        help="build this many minutes instead of the depth's (tests)",
    )
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args(argv)
    depths = [d for d in args.depths.split(",") if d]
    skip = frozenset(name for name in args.skip.split(",") if name)
    if skip - MEASURES:
        parser.error(f"unknown measure {sorted(skip - MEASURES)[0]!r} ({', '.join(MEASURES)})")
    bad = [d for d in depths if d not in DEPTHS]
    if bad:
        parser.error(f"unknown depth {bad[0]!r} (week, month, year)")
    bench = Path(tempfile.mkdtemp(prefix="drift-bench-history-"))
    # Bytecode kept between runs, as an installed drift has it.
    bytecode_on(args.cache or CACHE)
    results: dict[str, Any] = {"load_start": os.getloadavg(), "depths": {}}
    failed = None
    try:
        for depth in depths:
            extra = {} if args.cache is None else {"cache": args.cache}
            t0 = time.monotonic()
            found = cached_history(depth, minutes=args.minutes, progress=log, **extra)
            log(f"{depth}: history ready in {time.monotonic() - t0:.0f} s at {found.folder}")
            results["depths"][depth] = {
                "folder": str(found.folder),
                **bench_depth(found, bench, args.runs, args.growth_minutes, skip),
            }
        if not args.no_postgres:
            from history_pg import bench_postgres

            pg_depth = args.postgres_depth or depths[-1]
            extra = {} if args.cache is None else {"cache": args.cache}
            found = cached_history(pg_depth, minutes=args.minutes, **extra)
            results["postgres"] = {"depth": pg_depth, **bench_postgres(found, bench, args.runs)}
    except BenchError as exc:
        failed = str(exc)
        log(f"bench: {exc}")
    finally:
        results["load_end"] = os.getloadavg()
        if not args.keep:
            shutil.rmtree(bench, ignore_errors=True)
        else:
            log(f"kept {bench}")
    print_table(rows(results))
    print(f"load average: start {results['load_start']}, end {results['load_end']}")
    text = json.dumps(results, indent=1, default=str)
    if args.json:
        args.json.write_text(text + "\n")
    print(
        json.dumps(
            {
                d: {k: v for k, v in r.items() if k not in ("build", "record")}
                for d, r in results["depths"].items()
            },
            default=str,
        )
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
