"""Benchmark an unchanged `drift record` of a service mapping ~100 libraries vs `aide --check`.

    .venv/bin/python benchmarks/bench_libraries.py [--libs 100] [--runs 7] [--files 12000]
        [--mb 400] [--keep] [--json FILE] [--no-aide]

A real python process loads N copies of the system's libz with ctypes (plus what
python itself maps) and writes a pidfile; drift watches it as a [[services]]
entry beside bench_record.py's generated tree. Measured, in pairs whose order
alternates (bench_record's helpers):

1. unchanged record of the tree and the service vs `aide --check` of the tree,
   median of drift/aide (target <= 0.10, as for the tree alone);
2. what the libraries add: the service with `libraries = false` vs with them,
   both beside the tree, median of the per-pair differences.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent / "tests"))
import bench_record as br  # noqa: E402  (a sibling script, not a package)
import gen_tree  # noqa: E402
from shared_libs import SERVER, system_libz  # noqa: E402


def start_server(bench: Path, count: int) -> tuple[subprocess.Popen[bytes], Path]:
    """The process that maps `count` library copies; its pidfile once they are loaded."""
    libs = bench / "engine" / "lib"
    libs.mkdir(parents=True)
    paths = []
    for i in range(count):
        path = libs / f"libengine{i:03}.so.1"
        shutil.copyfile(system_libz(), path)
        paths.append(path)
    pidfile = bench / "engine.pid"
    return serve_libraries(Path(sys.executable), pidfile, paths), pidfile


def serve_libraries(python: Path, pidfile: Path, paths: list[Path]) -> subprocess.Popen[bytes]:
    """`python` running a server that maps `paths`, once it has written `pidfile`."""
    proc = subprocess.Popen([str(python), "-c", SERVER, str(pidfile), *map(str, paths)])
    deadline = time.monotonic() + 60
    while not pidfile.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise br.BenchError("the library server did not start")
        time.sleep(0.05)
    return proc


def write_configs(bench: Path, tree: Path, pidfile: Path) -> dict[str, Path]:
    """drift.toml for the tree and the service, with and without its libraries."""
    tree_only = br.write_drift_toml(bench, tree).read_text()
    out = {}
    for label, extra in (("libs", ""), ("no-libs", "libraries = false\n")):
        conf = bench / f"drift-{label}.toml"
        service = f'\n[[services]]\nname = "engine"\npidfile = "{pidfile}"\n{extra}'
        conf.write_text(tree_only + service)
        out[label] = conf
    return out


def measure(args: argparse.Namespace, bench: Path, s: dict[str, Any]) -> None:
    """Every step, in order."""
    tree = bench / "tree"
    br.prepare_tree(tree, gen_tree.TreeSpec(args.files, args.mb, args.seed))
    aide, aide_conf = (None, None) if args.no_aide else br.prepare_aide(bench, tree, s)
    proc, pidfile = start_server(bench, args.libs)
    try:
        confs = write_configs(bench, tree, pidfile)
        br.warm_up(bench, tree)
        dbs = {}
        for label, conf in confs.items():
            db = bench / f"db-{label}" / "drift.db"
            db.parent.mkdir()
            seconds, out = br.run([br.DRIFT, "record", *br.drift_args(conf, db)], cwd=bench)
            info = br.parse_record_line(out.stdout)
            br.log(f"  first record, {label}: {info['facts']} facts, {seconds:.2f}s")
            dbs[label] = db
        br.log(f"unchanged tree and a service mapping {args.libs}+ libraries vs aide --check:")
        br.bench_unchanged(bench, confs["libs"], dbs["libs"], aide, aide_conf, args.runs, s)
        br.log("the service without its libraries vs with them:")
        commands: dict[str, list[Any]] = {
            label: [br.DRIFT, "record", "--quiet", *br.drift_args(confs[label], dbs[label])]
            for label in ("no-libs", "libs")
        }
        pairs = br.alternated_pairs(bench, commands, args.runs)
        s["libraries_added"] = {
            "pairs": pairs,
            "added_ms": round(statistics.median(p["libs"] - p["no-libs"] for p in pairs) * 1000, 1),
        }
    finally:
        proc.kill()
        proc.wait()


def main(argv: list[str] | None = None) -> int:
    """Run every measure, print a table and a one-line JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--libs", type=int, default=100)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--files", type=int, default=12000)
    parser.add_argument("--mb", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--no-aide", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    bench = Path(tempfile.mkdtemp(prefix="drift-bench-libs-"))
    br.bytecode_on(bench)
    s = br.new_summary(args, libs=args.libs, ratio_vs_aide=None)
    failed = None
    try:
        measure(args, bench, s)
    except (br.BenchError, RuntimeError) as exc:
        failed = str(exc)
    finally:
        if not args.keep:
            shutil.rmtree(bench, ignore_errors=True)
    br.print_heading(f"drift record with a service mapping {args.libs} libraries", s)
    br.print_table(br.summary_rows({k: s[k] for k in ("unchanged", "ratio_vs_aide") if k in s}))
    print(json.dumps({"libraries_added_ms": s.get("libraries_added", {}).get("added_ms")}))
    return br.finish(s, failed, args.json)


if __name__ == "__main__":
    sys.exit(main())
