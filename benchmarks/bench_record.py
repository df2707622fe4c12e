"""Benchmark `drift record` against AIDE and plain hashlib on a generated 12k-file / 400 MiB tree.

    .venv/bin/python benchmarks/bench_record.py [--runs 7] [--files 12000] [--mb 400]
        [--sizes 12000,50000,150000] [--aide-runs N]
        [--tree DIR] [--keep] [--json FILE] [--no-aide] [--no-profile]

What it measures (targets from the issue, see benchmarks/README.md):

1. first record, empty stat cache: `drift record` wall time vs a fresh Python
   hashing the same files with hashlib.sha256 in 1 MiB reads (target <= 1.3x);
2. unchanged record: paired, alternating `aide --check` and `drift record
   --quiet` on the unchanged tree, median of drift/aide (target <= 0.10);
3. database growth per unchanged record, in bytes, over 50 records;
4. `drift --help` wall time, median of 10 (target < 150 ms);
5. heavy modules imported by a `drift record` process (target: none of
   alembic, jinja2, deepdiff, git, sqlalchemy, mako);
6. an unchanged record against `git status` (target <= 2x), and the peak
   RSS of every record (an unchanged one: target <= 100 MB at 150k files).

With `--sizes`, all of it on each size in turn, then one table of the ratios.

Both contenders read from the page cache: the tree is read once before any
timing, since dropping the cache between runs cannot be relied on here.
AIDE is installed with apt-get if it is missing (we run as root).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import platform
import pstats
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_tree  # noqa: E402  (a sibling script, not a package)

HEAVY = ("alembic", "jinja2", "deepdiff", "git", "sqlalchemy", "mako")
TARGETS = {
    "ratio_vs_aide": 0.10,
    "first_record_vs_hashlib": 1.3,
    "unchanged_vs_git_status": 2.0,
    "unchanged_rss_mb": 100.0,
    "help_ms": 150.0,
}
HEADLINE = (
    "ratio_vs_aide",
    "first_record_vs_hashlib",
    "bytes_per_unchanged_record",
    "help_ms",
    "heavy_imports_in_record",
)
DRIFT = Path(sys.executable).with_name("drift")

HASHLIB_SCRIPT = r"""
import hashlib, json, os, sys, time
started = time.perf_counter()
files = total = 0
for root, dirs, names in os.walk(sys.argv[1]):
    for name in names:
        h = hashlib.sha256()
        with open(os.path.join(root, name), "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
                total += len(chunk)
        files += 1
print(json.dumps({"files": files, "bytes": total, "seconds": time.perf_counter() - started}))
"""

RUN_DRIFT_SCRIPT = "from drift.cli import main\nmain()\n"


class BenchError(Exception):
    """A step failed; the message says which and why."""


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def clean_env() -> dict[str, str]:
    """The environment for every child: no DRIFT_* from the caller's shell."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DRIFT_")}


def bytecode_on(bench: Path) -> None:
    """Let the children keep bytecode, in a folder of the bench directory.

    A sandbox may set PYTHONDONTWRITEBYTECODE, which makes every run compile an
    editable drift from source (~50 ms); cron on a real install has .pyc files.
    The prefix keeps the bytecode out of the checkout.
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(bench / "pycache")


class Ran(subprocess.CompletedProcess[str]):
    """A finished command with its peak resident memory (the child's own, from wait4)."""

    max_rss_kib: int = 0

    @property
    def max_rss_mb(self) -> float:
        return round(self.max_rss_kib / 1024, 1)


def run(
    cmd: Sequence[str | os.PathLike[str]], *, cwd: Path, check: bool = True, what: str = ""
) -> tuple[float, Ran]:
    """Run a command, capturing its output; (wall seconds, result). Raises BenchError if check.

    The child is reaped with wait4, whose rusage is that child's alone: its
    peak RSS (getrusage(RUSAGE_CHILDREN) would give the largest of all so far).
    Output goes to temporary files, so nothing waits on a pipe.
    """
    args = [str(c) for c in cmd]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(
            args, cwd=cwd, env=clean_env(), stdout=out, stderr=err, stdin=subprocess.DEVNULL
        )
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait
        out.seek(0)
        err.seek(0)
        proc = Ran(
            args,
            child.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )
    proc.max_rss_kib = usage.ru_maxrss  # KiB on Linux
    if check and proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        raise BenchError(f"{what or cmd[0]} exited {proc.returncode}:\n  " + "\n  ".join(tail))
    return seconds, proc


# --------------------------------------------------------------------------- AIDE


def ensure_aide() -> str:
    """Path of the aide binary, installing the Debian package first if it is missing."""
    found = shutil.which("aide")
    if found:
        return found
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "--no-install-recommends", "aide"]
    # Install first; only if that fails refresh the package lists and try again.
    for cmd in (install, ["apt-get", "update"], install):
        log(f"aide not found: running {' '.join(cmd)}")
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        for line in (proc.stdout + proc.stderr).strip().splitlines()[-6:]:
            log(f"  | {line}")
        found = shutil.which("aide")
        if found:
            return found
    raise BenchError("could not install aide with apt-get (see above)")


def aide_version(aide: str) -> str:
    proc = subprocess.run([aide, "--version"], capture_output=True, text=True)
    match = re.search(r"AIDE\s+v?([\d.]+)", proc.stdout + proc.stderr)
    return match.group(1) if match else "unknown"


def aide_regex(path: Path) -> str:
    """A path as an AIDE rule: a regex, with AIDE's own escapes for space and @."""
    out = []
    for ch in str(path):
        if ch in ".^$*+?()[]{}|\\":
            out.append("\\" + ch)
        elif ch in " @":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def write_aide_conf(bench: Path, tree: Path) -> Path:
    """An aide.conf that checks exactly the tree: permissions, inode, owner, size, times, sha256."""
    conf = bench / "aide.conf"
    conf.write_text(
        "# generated by benchmarks/bench_record.py\n"
        f"database_in=file:{bench}/aide.db\n"
        f"database_out=file:{bench}/aide.db.new\n"
        "gzip_dbout=no\n"
        "report_url=stdout\n"
        # What drift records for a file, and what its stat cache keys on.
        "DriftBench = p+i+n+u+g+s+m+c+sha256\n"
        f"{aide_regex(tree)} DriftBench\n",
        encoding="utf-8",
    )
    return conf


# --------------------------------------------------------------------------- drift


def write_drift_toml(bench: Path, tree: Path) -> Path:
    """A drift.toml with one [[files]] set covering the whole tree."""
    path = bench / "drift.toml"
    path.write_text(
        f'host = "bench"\n\n[[files]]\nname = "tree"\npaths = [{json.dumps(str(tree) + "/**")}]\n',
        encoding="utf-8",
    )
    return path


def drift_args(conf: Path, db: Path) -> list[str]:
    return ["--config", str(conf), "--db", str(db)]


# Counts print with thousands separators (36,003 facts).
RECORD_LINE = re.compile(
    r"snapshot #(\d+): ([\d,]+) facts, ([\d,]+) changed, ([\d,]+) errors?, ([\d.]+)s"
)


def parse_record_line(text: str) -> dict[str, float]:
    """The numbers in `drift record`'s one-line summary."""
    match = RECORD_LINE.search(text)
    if not match:
        raise BenchError(f"unexpected drift record output: {text.strip()[:300]!r}")
    snap, facts, changed, errors, seconds = (g.replace(",", "") for g in match.groups())
    return {
        "snapshot": int(snap),
        "facts": int(facts),
        "changed": int(changed),
        "errors": int(errors),
        "seconds": float(seconds),
    }


def sqlite_size(db: Path) -> int:
    """Bytes on disk for the database after folding the WAL into it."""
    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


def used_bytes(db: Path) -> int | None:
    """Bytes in use inside the database pages (dbstat), finer than the page-rounded file size."""
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT sum(pgsize - unused) FROM dbstat").fetchone()[0])
    except sqlite3.Error:
        return None  # this SQLite was built without the dbstat table
    finally:
        con.close()


def row_counts(db: Path) -> dict[str, int]:
    """Rows per table (for showing what an unchanged record writes)."""
    con = sqlite3.connect(db)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        con.close()


def heavy_imports(stderr: str) -> tuple[list[str], float, list[tuple[str, int]]]:
    """From `-X importtime` output: heavy top-level packages seen, total ms, top packages by ms."""
    by_top: dict[str, int] = {}
    seen: set[str] = set()
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:") :].split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue  # the header line
        self_us = int(parts[0])
        top = parts[2].strip().split(".")[0]
        seen.add(top)
        by_top[top] = by_top.get(top, 0) + self_us
    found = sorted(name for name in HEAVY if name in seen)
    total_ms = sum(by_top.values()) / 1000
    top = sorted(by_top.items(), key=lambda kv: -kv[1])[:12]
    return found, total_ms, top


# --------------------------------------------------------------------------- report


def fmt_s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.3f}s"


def verdict(value: float | None, target: float, *, below: bool = True) -> str:
    if value is None:
        return "n/a"
    return "ok" if (value <= target if below else value >= target) else "MISSED"


def print_table(rows: list[tuple[str, str, str, str]]) -> None:
    header = ("measure", "value", "target", "")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    line = "  ".join("-" * w for w in widths)
    print(line)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print(line)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(line)


def summary_rows(s: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []
    fr = s.get("first_record")
    if fr:
        rows.append(("first record, drift (median)", fmt_s(fr["drift_s"]), "", ""))
        rows.append(
            (
                "first record, hashlib subprocess",
                fmt_s(fr["hashlib_s"]),
                "",
                f"in-process {fr['hashlib_inproc_s']:.3f}s",
            )
        )
        ratio = s["first_record_vs_hashlib"]
        rows.append(
            (
                "first record drift / hashlib",
                f"{ratio:.2f}x",
                "<= 1.3x",
                verdict(ratio, TARGETS["first_record_vs_hashlib"]),
            )
        )
        rows.append(("first record: peak RSS (largest)", f"{fr['drift_rss_mb']:.0f} MB", "", ""))
    un = s.get("unchanged")
    if un:
        rows.append(
            (
                "unchanged: peak RSS (largest)",
                f"{un['drift_rss_mb']:.0f} MB",
                "<= 100 MB",
                verdict(un["drift_rss_mb"], TARGETS["unchanged_rss_mb"]),
            )
        )
        rows.append(("unchanged: aide --check (median)", fmt_s(un["aide_s"]), "", ""))
        rows.append(
            (
                "unchanged: drift record (median)",
                fmt_s(un["drift_s"]),
                "",
                f"{un['drift_inproc_s']:.3f}s inside record()",
            )
        )
        ratio = s["ratio_vs_aide"]
        rows.append(
            (
                "unchanged drift / aide (median)",
                "-" if ratio is None else f"{ratio:.3f}",
                "<= 0.10",
                verdict(ratio, TARGETS["ratio_vs_aide"]),
            )
        )
    gi = s.get("git")
    if gi:
        rows.append(
            (
                "git add -A of the tree (one run)",
                fmt_s(gi["add_s"]),
                "",
                f"first record drift / git add: {s['first_record_vs_git_add']:.2f}x"
                if s.get("first_record_vs_git_add") is not None
                else "",
            )
        )
        rows.append(("unchanged: git status (median)", fmt_s(gi["status_s"]), "", gi["version"]))
        rows.append(
            (
                "unchanged drift / git status (median)",
                f"{s['unchanged_vs_git_status']:.2f}x",
                "<= 2x",
                verdict(s["unchanged_vs_git_status"], TARGETS["unchanged_vs_git_status"]),
            )
        )
    if s.get("bytes_per_unchanged_record") is not None:
        used = s.get("used_bytes_per_unchanged_record")
        rows.append(
            (
                "DB growth per unchanged record",
                f"{s['bytes_per_unchanged_record']:.0f} B file"
                + ("" if used is None else f", {used:.0f} B used"),
                "",
                s["growth_note"],
            )
        )
    if s.get("help_ms") is not None:
        rows.append(
            (
                "drift --help (median of 10)",
                f"{s['help_ms']:.0f} ms",
                "< 150 ms",
                verdict(s["help_ms"], TARGETS["help_ms"]),
            )
        )
        rows.append(("python -c pass (for scale)", f"{s['python_startup_ms']:.0f} ms", "", ""))
    if s.get("heavy_imports_in_record") is not None:
        heavy = s["heavy_imports_in_record"]
        rows.append(
            (
                "heavy imports in drift record",
                ", ".join(heavy) or "none",
                "none",
                "ok" if not heavy else "MISSED",
            )
        )
    return rows


# --------------------------------------------------------------------------- steps


def warm_cache(tree: Path) -> tuple[int, int]:
    """Read every file once so that both contenders hash from the page cache."""
    files = total = 0
    for root, _dirs, names in os.walk(tree):
        for name in names:
            with open(os.path.join(root, name), "rb", buffering=0) as f:
                while chunk := f.read(1 << 20):
                    total += len(chunk)
            files += 1
    return files, total


def bench_first_record(bench: Path, conf: Path, tree: Path, reps: int, s: dict[str, Any]) -> Path:
    """Fresh database each time (init untimed), then the timed first record; vs hashlib."""
    hash_script = bench / "hash_tree.py"
    hash_script.write_text(HASHLIB_SCRIPT, encoding="utf-8")
    drift_times: list[float] = []
    drift_rss: list[float] = []
    hash_times: list[float] = []
    inproc: list[float] = []
    db = bench / "db-0" / "drift.db"
    for i in range(reps):
        db = bench / f"db-{i}" / "drift.db"
        db.parent.mkdir()
        run([DRIFT, "init", *drift_args(conf, db)], cwd=bench, what="drift init")

        # Alternate who goes first, so neither always gets the warmer machine.
        for who in ("drift", "hashlib") if i % 2 == 0 else ("hashlib", "drift"):
            if who == "drift":
                seconds, proc = run(
                    [DRIFT, "record", *drift_args(conf, db)], cwd=bench, what="drift record (first)"
                )
                info = parse_record_line(proc.stdout)
                drift_times.append(seconds)
                drift_rss.append(proc.max_rss_mb)
                s.setdefault("first_record_facts", info["facts"])
                log(
                    f"  first record #{i + 1}: drift {seconds:.3f}s ({info['facts']} facts, "
                    f"{info['errors']} errors, {info['seconds']:.3f}s inside record(), "
                    f"peak RSS {proc.max_rss_mb:.0f} MB)"
                )
            else:
                seconds, proc = run([sys.executable, hash_script, tree], cwd=bench, what="hashlib")
                data = json.loads(proc.stdout)
                hash_times.append(seconds)
                inproc.append(data["seconds"])
                log(
                    f"  first record #{i + 1}: hashlib {seconds:.3f}s ({data['files']} files, "
                    f"{data['seconds']:.3f}s hashing in-process)"
                )
    s["first_record"] = {
        "drift_s": statistics.median(drift_times),
        "hashlib_s": statistics.median(hash_times),
        "hashlib_inproc_s": statistics.median(inproc),
        "drift_rss_mb": max(drift_rss),
        "drift_runs": drift_times,
        "hashlib_runs": hash_times,
    }
    s["first_record_vs_hashlib"] = round(
        statistics.median(d / h for d, h in zip(drift_times, hash_times, strict=True)), 3
    )
    return db


def alternated_pairs(
    bench: Path, commands: dict[str, list[str | os.PathLike[str]]], runs: int
) -> list[dict[str, float]]:
    """Wall seconds of each command, once a round for `runs` rounds, the order reversed each round.

    Alternating who goes first means neither always gets the warmer machine. With two
    commands each round also gets ``ratio``: the second one's time over the first one's.
    ``NAME_rss_mb`` is each command's peak resident memory.
    """
    names = list(commands)
    log(f"  {'pair':>4}  {'order':<24}  " + "  ".join(f"{n[:10]:>10}" for n in names) + "   ratio")
    pairs: list[dict[str, float]] = []
    for i in range(runs):
        order = names if i % 2 == 0 else names[::-1]
        times: dict[str, float] = {}
        rss: dict[str, float] = {}
        for name in order:
            times[name], proc = run(commands[name], cwd=bench, what=name)
            rss[f"{name}_rss_mb"] = proc.max_rss_mb
        pair = times | rss
        if len(names) == 2:
            pair["ratio"] = times[names[1]] / times[names[0]]
        pairs.append(pair)
        ratio = f"{pair['ratio']:>6.3f}" if "ratio" in pair else "     -"
        log(
            f"  {i + 1:>4}  {','.join(order)[:24]:<24}  "
            + "  ".join(f"{fmt_s(times[n]):>10}" for n in names)
            + f"  {ratio}"
        )
    return pairs


def bench_unchanged(
    bench: Path,
    conf: Path,
    db: Path,
    aide: str | None,
    aide_conf: Path | None,
    runs: int,
    s: dict[str, Any],
) -> None:
    """Paired runs on the unchanged tree, alternating which of aide and drift goes first."""
    # One untimed record proves the tree reads as unchanged and the cache is full.
    _, proc = run([DRIFT, "record", *drift_args(conf, db)], cwd=bench, what="drift record")
    info = parse_record_line(proc.stdout)
    if info["changed"] or info["errors"]:
        raise BenchError(
            f"the unchanged tree recorded {info['changed']} changes and "
            f"{info['errors']} errors: {proc.stdout.strip()}"
        )
    if aide and aide_conf:
        seconds, proc = run([aide, f"--config={aide_conf}", "--check"], cwd=bench, check=False)
        if proc.returncode != 0:
            raise BenchError(
                f"aide --check on the unchanged tree exited {proc.returncode}:\n"
                + (proc.stdout + proc.stderr)[-2000:]
            )
        log(f"  warm-up: aide --check {seconds:.3f}s (exit 0: no changes)")
    commands: dict[str, list[str | os.PathLike[str]]] = {}
    if aide and aide_conf:
        commands["aide"] = [aide, f"--config={aide_conf}", "--check"]
    commands["drift"] = [DRIFT, "record", "--quiet", *drift_args(conf, db)]
    pairs = alternated_pairs(bench, commands, runs)
    # What the record itself reports: the rest of the wall time is start-up and imports.
    inside = []
    for _ in range(3):
        _, proc = run([DRIFT, "record", *drift_args(conf, db)], cwd=bench, what="drift record")
        inside.append(parse_record_line(proc.stdout)["seconds"])
    ratios = [p["ratio"] for p in pairs if p.get("ratio") is not None]
    s["unchanged"] = {
        "pairs": pairs,
        "aide_s": statistics.median(p["aide"] for p in pairs) if ratios else None,
        "drift_s": statistics.median(p["drift"] for p in pairs),
        "drift_inproc_s": statistics.median(inside),
        "drift_rss_mb": max(p["drift_rss_mb"] for p in pairs),
    }
    s["ratio_vs_aide"] = round(statistics.median(ratios), 4) if ratios else None


def bench_git(bench: Path, conf: Path, db: Path, tree: Path, runs: int, s: dict[str, Any]) -> None:
    """git as the other peer: `git add -A` of the tree against a first record, and
    `git status` (a stat-cache check of an index, as drift's) against an unchanged record.

    The repository lives in the bench directory (--git-dir, --work-tree): the tree
    is not touched. No user or system git config is read; git runs with its
    defaults (index preloading on its threads, no fsmonitor) except gc.auto=0.
    """
    git = shutil.which("git")
    if git is None:
        log("  git not found: skipped")
        return
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
    # No automatic gc: 12k loose objects would start a background repack that
    # eats a core through every later measurement.
    base = [
        git,
        f"--git-dir={bench / 'git'}",
        f"--work-tree={tree}",
        "-c",
        "gc.auto=0",
        "-c",
        "maintenance.auto=false",
    ]
    run([*base, "init", "-q"], cwd=bench, what="git init")
    add_s, _ = run([*base, "add", "-A"], cwd=bench, what="git add -A")
    run(
        [
            *base,
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@localhost",
            "commit",
            "-q",
            "--no-verify",
            "-m",
            "tree",
        ],
        cwd=bench,
        what="git commit",
    )
    _, proc = run([*base, "status", "--porcelain"], cwd=bench, what="git status")
    if proc.stdout.strip():
        raise BenchError(f"git status of the committed tree is not clean:\n{proc.stdout[:500]}")
    log(f"  git add -A (hash and compress every file): {add_s:.3f}s; warm-up git status clean")
    commands: dict[str, list[str | os.PathLike[str]]] = {
        "git": [*base, "status", "--porcelain"],
        "drift": [DRIFT, "record", "--quiet", *drift_args(conf, db)],
    }
    pairs = alternated_pairs(bench, commands, runs)
    version = subprocess.run([git, "--version"], capture_output=True, text=True).stdout
    s["git"] = {
        "version": version.strip(),
        "add_s": add_s,
        "status_s": statistics.median(p["git"] for p in pairs),
        "pairs": pairs,
    }
    s["unchanged_vs_git_status"] = round(statistics.median(p["ratio"] for p in pairs), 3)
    fr = s.get("first_record")
    if fr:
        s["first_record_vs_git_add"] = round(fr["drift_s"] / add_s, 3)


def bench_growth(bench: Path, conf: Path, db: Path, records: int, s: dict[str, Any]) -> None:
    """Bytes the database grows per unchanged record, WAL folded in before and after."""
    before = sqlite_size(db)
    used_before = used_bytes(db)
    rows_before = row_counts(db)
    started = time.perf_counter()
    for _ in range(records):
        run([DRIFT, "record", "--quiet", *drift_args(conf, db)], cwd=bench, what="drift record")
    elapsed = time.perf_counter() - started
    after = sqlite_size(db)
    used_after = used_bytes(db)
    rows_after = row_counts(db)
    used = (
        None
        if used_before is None or used_after is None
        else round((used_after - used_before) / records, 1)
    )
    grew = {
        t: rows_after.get(t, 0) - rows_before.get(t, 0)
        for t in rows_after
        if rows_after.get(t, 0) != rows_before.get(t, 0)
    }
    s["bytes_per_unchanged_record"] = round((after - before) / records, 1)
    s["used_bytes_per_unchanged_record"] = used
    s["growth"] = {
        "records": records,
        "db_bytes_before": before,
        "db_bytes_after": after,
        "used_bytes_per_record": used,
        "rows_added": grew,
        "seconds_per_record": round(elapsed / records, 4),
    }
    added = ", ".join(f"{n}+{c}" for n, c in sorted(grew.items())) or "no rows"
    # The file grows a page at a time; dbstat's used bytes show what each record really adds.
    s["growth_note"] = f"file {before}->{after} B over {records} records; rows {added}"
    log(
        f"  {records} unchanged records: {before} -> {after} bytes, rows added: {added}, "
        f"{elapsed / records:.3f}s each"
    )


def bench_startup(bench: Path, conf: Path, db: Path, s: dict[str, Any]) -> None:
    """Time `drift --help`; list the heavy modules a `drift record` process imports."""
    help_times = [run([DRIFT, "--help"], cwd=bench, what="drift --help")[0] for _ in range(10)]
    bare = [run([sys.executable, "-c", "pass"], cwd=bench)[0] for _ in range(10)]
    s["help_ms"] = round(statistics.median(help_times) * 1000, 1)
    s["python_startup_ms"] = round(statistics.median(bare) * 1000, 1)
    # With -c, sys.argv is ['-c', 'record', ...] and click reads sys.argv[1:].
    _, proc = run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            RUN_DRIFT_SCRIPT,
            "record",
            "--quiet",
            *drift_args(conf, db),
        ],
        cwd=bench,
        what="drift record (importtime)",
    )
    found, total_ms, top = heavy_imports(proc.stderr)
    s["heavy_imports_in_record"] = found
    s["record_import_ms"] = round(total_ms, 1)
    s["record_import_top"] = [{"package": name, "ms": round(us / 1000, 1)} for name, us in top]


def profile_record(bench: Path, conf: Path, db: Path) -> str:
    """cProfile of one unchanged `drift record`, top functions by cumulative and own time."""
    script = bench / "run_drift.py"
    script.write_text(RUN_DRIFT_SCRIPT, encoding="utf-8")
    out = bench / "record.prof"
    run(
        [
            sys.executable,
            "-m",
            "cProfile",
            "-o",
            out,
            script,
            "record",
            "--quiet",
            *drift_args(conf, db),
        ],
        cwd=bench,
        what="drift record (cProfile)",
    )
    buf = io.StringIO()
    stats = pstats.Stats(str(out), stream=buf)
    stats.strip_dirs().sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(15)
    return buf.getvalue()


def prepare_tree(tree: Path, spec: gen_tree.TreeSpec) -> None:
    """Generate the tree, or reuse the one already there with the same spec."""
    stats = gen_tree.generate(tree, spec, quiet=True)
    log(
        f"tree {tree}: {stats.files} files, {stats.bytes / gen_tree.MB:.0f} MiB "
        f"({'reused' if stats.reused else f'written in {stats.seconds:.1f}s'})"
    )


def prepare_aide(bench: Path, tree: Path, s: dict[str, Any]) -> tuple[str, Path]:
    """Install AIDE if needed and build its database of the tree; (aide binary, aide.conf)."""
    aide = ensure_aide()
    s["aide_version"] = aide_version(aide)
    aide_conf = write_aide_conf(bench, tree)
    seconds, _ = run([aide, f"--config={aide_conf}", "--init"], cwd=bench, what="aide --init")
    (bench / "aide.db.new").replace(bench / "aide.db")
    log(f"aide {s['aide_version']} ({aide}): --init {seconds:.1f}s")
    return aide, aide_conf


def warm_up(bench: Path, tree: Path) -> None:
    """Compile drift once and read the tree once, untimed, as on an installed, running box."""
    run(
        [sys.executable, "-c", "import drift.cli, drift.record, drift.collectors.files"],
        cwd=bench,
        what="python -c 'import drift.cli'",
    )
    run([DRIFT, "--help"], cwd=bench, what="drift --help")
    files, total = warm_cache(tree)
    log(f"page cache warmed: read {files} files, {total / gen_tree.MB:.0f} MiB")


def new_summary(args: argparse.Namespace, **fields: Any) -> dict[str, Any]:
    """The summary's opening fields: when, on what, the tree, the load; then `fields`."""
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}",
        "tree": {"files": args.files, "mb": args.mb, "seed": args.seed},
        # Other work on a 2-core box skews every number; the load says how much there was.
        "load_avg_start": round(os.getloadavg()[0], 2),
        **fields,
    }


def print_heading(title: str, s: dict[str, Any]) -> None:
    """The results' first line: what, when, on what, and the load at start and end."""
    s.setdefault("load_avg_end", round(os.getloadavg()[0], 2))
    print()
    print(
        f"{title}, {s['date']}, {s['machine']}, "
        f"load average {s['load_avg_start']} at start, {s['load_avg_end']} at end"
    )


def finish(s: dict[str, Any], failed: str | None, json_path: Path | None) -> int:
    """Print the failure if any and the one-line JSON summary (also to `json_path`); exit code."""
    if failed:
        s["error"] = failed
        print(f"\nbench: FAILED: {failed}", file=sys.stderr)
    line = json.dumps({k: v for k, v in s.items() if k != "growth_note"})
    print()
    print(line)
    if json_path:
        json_path.write_text(line + "\n", encoding="utf-8")
    return 1 if failed else 0


# --------------------------------------------------------------------------- main


def bench_tree(
    args: argparse.Namespace, bench: Path, tree: Path, spec: gen_tree.TreeSpec
) -> tuple[dict[str, Any], str]:
    """Every measure on one tree: (summary, profile text); a failure is in summary["error"]."""
    s = new_summary(args, **dict.fromkeys(HEADLINE))
    s["tree"] = {"files": spec.files, "mb": spec.mb, "seed": spec.seed}
    profile_text = ""
    try:
        prepare_tree(tree, spec)
        aide, aide_conf = (None, None) if args.no_aide else prepare_aide(bench, tree, s)
        conf = write_drift_toml(bench, tree)
        warm_up(bench, tree)

        log(f"first record (empty stat cache) vs hashlib, {args.first_runs} fresh databases:")
        db = bench_first_record(bench, conf, tree, args.first_runs, s)
        runs = args.runs if aide is None else args.aide_runs or args.runs
        log(f"unchanged tree, {runs} pairs:")
        bench_unchanged(bench, conf, db, aide, aide_conf, runs, s)
        if not args.no_git:
            log(f"git on the same tree, {args.runs} pairs of git status and drift record:")
            bench_git(bench, conf, db, tree, args.runs, s)
        log(f"database growth over {args.growth_records} unchanged records:")
        bench_growth(bench, conf, db, args.growth_records, s)
        log("start-up: drift --help and the imports of drift record:")
        bench_startup(bench, conf, db, s)
        if not args.no_profile:
            profile_text = profile_record(bench, conf, db)
    except BenchError as exc:
        s["error"] = str(exc)
    return s, profile_text


def print_tree_results(s: dict[str, Any], profile_text: str) -> None:
    """One tree's heading, table, import times and profile."""
    tree = s["tree"]
    print_heading("drift record benchmark", s)
    print(
        f"tree: {tree['files']} files, {tree['mb']} MiB (seed {tree['seed']}); aide "
        f"{s.get('aide_version', '-')}; both read from the page cache (warmed first)"
    )
    print_table(summary_rows(s))
    if profile_text and s.get("record_import_top"):
        print()
        print(
            f"imports of an unchanged drift record: {s['record_import_ms']:.0f} ms in total "
            "(self time, summed by top-level package):"
        )
        for item in s["record_import_top"]:
            print(f"  {item['ms']:8.1f} ms  {item['package']}")
        print()
        print("cProfile of one unchanged drift record (whole process, imports included):")
        print(profile_text.rstrip())


def _ratio(value: float | None, unit: str = "x") -> str:
    return "-" if value is None else f"{value:.2f}{unit}"


def print_sizes_table(results: list[dict[str, Any]]) -> None:
    """The issue's table: one row per tree size, each ratio against its target."""
    print()
    print("all sizes (targets: first <= 1.3x hashlib, unchanged <= 2x git status, ")
    print("<= 0.10 aide, peak RSS of an unchanged record <= 100 MB):")
    rows: list[tuple[str, ...]] = [
        (
            "files",
            "MiB",
            "first/hashlib",
            "unchanged/git status",
            "unchanged/aide",
            "RSS unchanged",
            "RSS first",
            "load start-end",
        )
    ]
    for s in results:
        rows.append(
            (
                f"{s['tree']['files']:,}",
                f"{s['tree']['mb']:,}",
                _ratio(s.get("first_record_vs_hashlib")),
                _ratio(s.get("unchanged_vs_git_status")),
                _ratio(s.get("ratio_vs_aide"), ""),
                _ratio((s.get("unchanged") or {}).get("drift_rss_mb"), " MB"),
                _ratio((s.get("first_record") or {}).get("drift_rss_mb"), " MB"),
                f"{s['load_avg_start']}-{s.get('load_avg_end', '?')}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def parse_sizes(text: str) -> list[int]:
    """``12000,50000,150000`` -> [12000, 50000, 150000]."""
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of file counts: {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"not a list of file counts: {text!r}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    """Run every benchmark, print a table and a one-line JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="unchanged pairs (default 7)")
    parser.add_argument(
        "--aide-runs",
        type=int,
        default=0,
        help="pairs with aide --check (default: --runs); aide takes a minute on 150k files",
    )
    parser.add_argument(
        "--first-runs",
        type=int,
        default=5,
        help="first-record repetitions, each on a fresh database (default 5)",
    )
    parser.add_argument(
        "--growth-records",
        type=int,
        default=50,
        help="unchanged records for the growth measure (default 50)",
    )
    parser.add_argument("--files", type=int, default=12000, help="files in the tree")
    parser.add_argument("--mb", type=int, default=400, help="tree size in MiB")
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        help="several trees in one go, e.g. 12000,50000,150000 files, each with --mb/--files "
        "MiB per file (33 KiB by default); --tree is then the folder of the trees",
    )
    parser.add_argument("--seed", type=int, default=1, help="tree seed")
    parser.add_argument(
        "--tree", type=Path, help="generate the tree here, or reuse it if it is already there"
    )
    parser.add_argument("--keep", action="store_true", help="keep the bench directory")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the summary here")
    parser.add_argument("--no-aide", action="store_true", help="skip AIDE (no ratio)")
    parser.add_argument("--no-git", action="store_true", help="skip git (git add, git status)")
    parser.add_argument(
        "--no-profile", action="store_true", help="skip the importtime and cProfile breakdown"
    )
    args = parser.parse_args(argv)
    if min(args.runs, args.first_runs, args.growth_records, args.files, args.mb) < 1:
        parser.error("--runs, --first-runs, --growth-records, --files and --mb must be >= 1")

    if not DRIFT.exists():
        log(f"bench: {DRIFT} not found; install drift into this venv first (make bench does)")
        return 2
    bench = Path(tempfile.mkdtemp(prefix="drift-bench-"))
    bytecode_on(bench)
    # One tree, or one per size with the same bytes per file as --files/--mb.
    specs = [
        gen_tree.TreeSpec(n, max(1, round(args.mb * n / args.files)), args.seed)
        for n in (args.sizes or [args.files])
    ]
    results: list[dict[str, Any]] = []
    failed: str | None = None
    try:
        log(f"bench dir {bench}")
        for spec in specs:
            if args.sizes:
                where = bench / f"files-{spec.files}"
                where.mkdir()
                root = args.tree.resolve() if args.tree else where
                tree = root / f"tree-{spec.files}"
                log(f"=== {spec.files:,} files, {spec.mb:,} MiB")
            else:
                where = bench
                tree = args.tree.resolve() if args.tree else bench / "tree"
            s, profile_text = bench_tree(args, where, tree, spec)
            print_tree_results(s, profile_text)
            results.append(s)
            if s.get("error"):
                break
    except KeyboardInterrupt:
        failed = "interrupted"
    finally:
        if args.keep:
            log(f"kept {bench}")
        else:
            shutil.rmtree(bench, ignore_errors=True)
    failed = next((r.pop("error") for r in results if r.get("error")), failed)
    if not args.sizes:
        s = results[0] if results else {}
        # The headline figures first, then the details.
        shown = {k: s.get(k) for k in HEADLINE} | {k: v for k, v in s.items() if k not in HEADLINE}
        return finish(shown, failed, args.json)
    print_sizes_table(results)
    return finish({"sizes": results}, failed, args.json)


if __name__ == "__main__":
    sys.exit(main())
