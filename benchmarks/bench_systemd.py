"""Benchmark an unchanged `drift record` with systemd services configured, against `aide --check`.

    .venv/bin/python benchmarks/bench_systemd.py [--services 3] [--runs 7] [--tree DIR]
        [--files 12000] [--mb 400] [--keep] [--json FILE] [--no-aide] [--no-profile]

A real systemd boots in a container (tests/systemd_container.py: root, and the
rootfs `.ci/systemd-container setup` builds). It runs N units shaped like an
inference node's: each with a drop-in, an EnvironmentFile (and an optional one
that is missing), Environment= lines, limits and a serve script that exports
variables and execs the server. drift watches them from the host through the
container's systemctl and /proc, beside bench_record.py's generated tree.
Measured, in pairs whose order alternates (bench_record's helpers):

1. unchanged record of the tree and the units vs `aide --check` of the tree,
   median of drift/aide (target <= 0.10, as for the tree alone);
2. what the units add: a record of the tree alone vs one of the tree and the
   units, median of the per-pair differences;
3. a record of the units alone, and the cProfile of one (subprocesses spawned
   per record, time spent waiting for them).

The harness measures whatever the collectors do: rerun it when they change.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent / "tests"))
import bench_record as br  # noqa: E402  (a sibling script, not a package)
import gen_tree  # noqa: E402

NAMES = ("prefill", "decode", "router", "embed", "rerank", "draft", "vision", "audio")

UNIT = """[Unit]
Description={name} server (benchmark)

[Service]
ExecStart=/bin/bash /opt/serve/{name}.sh --port {port}
EnvironmentFile=/etc/serve/{name}.env
EnvironmentFile=-/etc/serve/site.env
Environment=CUDA_VISIBLE_DEVICES=0,1,2,3 NCCL_DEBUG=WARN
Environment="SERVE_NAME={name}"
LimitNOFILE=65536
Restart=on-failure
"""

DROP_IN = """[Service]
Environment=SGLANG_SM120_MMA_TARGET_CTAS=512
Environment=HF_HOME=/var/cache/hf
"""

SCRIPT = """#!/bin/bash
# {name}: serve script (benchmark)
set -euo pipefail
export SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0
export SGLANG_ENABLE_JIT_DEEPGEMM=1
export NCCL_IB_DISABLE=0
export NCCL_SOCKET_IFNAME=eth0
export TORCH_CUDA_ARCH_LIST="9.0"
export MODEL_PATH=/models/{name}
if [[ -n "${{DEBUG:-}}" ]]; then
    export NCCL_DEBUG=INFO
fi
PORT="${{2:-30000}}"
exec /usr/bin/tail -f -n 0 --sleep-interval=30 /dev/null
"""


def deploy(box: Any, names: list[str]) -> str:
    """Write and start the units; return the [[services]] part of drift.toml."""
    for i, name in enumerate(names):
        box.write_file(f"/opt/serve/{name}.sh", SCRIPT.format(name=name))
        knobs = "".join(f"{name.upper()}_KNOB_{k}=value-{k}\n" for k in range(30))
        box.write_file(f"/etc/serve/{name}.env", f"# {name}\n{knobs}")
        box.write_unit(f"{name}.service", UNIT.format(name=name, port=30000 + i))
        box.write_unit(f"{name}.service.d/override.conf", DROP_IN)
    box.daemon_reload()
    for name in names:
        box.start(f"{name}.service")
    return "".join(
        f'\n[[services]]\nname = "{name}"\nunit = "{name}.service"\n'
        f'script = "{box.root}/opt/serve/{name}.sh"\n'
        for name in names
    )


def write_configs(bench: Path, tree: Path, box: Any, services: str) -> dict[str, Path]:
    """drift.toml for the tree alone, the tree and the units, and the units alone."""
    tree_only = br.write_drift_toml(bench, tree)
    reach = f"systemctl = {json.dumps(box.systemctl)}\nproc_root = {json.dumps(box.proc_root)}\n"
    both = bench / "drift-units-tree.toml"
    # The top-level keys go before the first table.
    text = tree_only.read_text().replace("\n\n[[files]]", f"\n{reach}\n[[files]]", 1)
    both.write_text(text + services)
    alone = bench / "drift-units.toml"
    alone.write_text(f'host = "bench"\n{reach}{services}')
    return {"tree": tree_only, "units+tree": both, "units": alone}


def first_records(bench: Path, confs: dict[str, Path]) -> dict[str, Path]:
    """One database per config, each with its first record (untimed)."""
    dbs = {}
    for label, conf in confs.items():
        db = bench / f"db-{label.replace('+', '-')}" / "drift.db"
        db.parent.mkdir()
        _, proc = br.run(
            [br.DRIFT, "record", *br.drift_args(conf, db)], cwd=bench, what=f"record {label}"
        )
        info = br.parse_record_line(proc.stdout)
        log_line = f"  first record, {label}: {info['facts']} facts, {info['errors']} errors"
        br.log(log_line)
        if info["errors"]:
            raise br.BenchError(f"the first record of {label} had errors: {proc.stderr[-1500:]}")
        dbs[label] = db
    return dbs


def bench_added(
    bench: Path, confs: dict[str, Path], dbs: dict[str, Path], runs: int, s: dict[str, Any]
) -> None:
    """What the units add to an unchanged record: tree alone vs tree and units, in pairs."""
    commands = {
        label: [br.DRIFT, "record", "--quiet", *br.drift_args(confs[label], dbs[label])]
        for label in ("tree", "units+tree")
    }
    pairs = br.alternated_pairs(bench, commands, runs)
    added = [p["units+tree"] - p["tree"] for p in pairs]
    s["units_added"] = {
        "pairs": pairs,
        "tree_s": statistics.median(p["tree"] for p in pairs),
        "units_tree_s": statistics.median(p["units+tree"] for p in pairs),
        "added_ms": round(statistics.median(added) * 1000, 1),
        "ratio": round(statistics.median(p["ratio"] for p in pairs), 3),
    }


def bench_units_alone(
    bench: Path, confs: dict[str, Path], dbs: dict[str, Path], runs: int, s: dict[str, Any]
) -> None:
    """Unchanged records of the units alone: wall time, and the time inside record()."""
    walls, inside = [], []
    for _ in range(runs):
        seconds, proc = br.run(
            [br.DRIFT, "record", *br.drift_args(confs["units"], dbs["units"])],
            cwd=bench,
            what="record units",
        )
        info = br.parse_record_line(proc.stdout)
        if info["changed"] or info["errors"]:
            raise br.BenchError(f"an unchanged record of the units: {proc.stdout.strip()}")
        walls.append(seconds)
        inside.append(info["seconds"])
    s["units_alone"] = {
        "facts": int(info["facts"]),
        "wall_s": statistics.median(walls),
        "inside_record_s": statistics.median(inside),
    }


def profile_figures(prof: Path, top: int = 10) -> dict[str, Any]:
    """From a cProfile of one record: processes spawned, seconds in subprocess.run, and the
    drift functions under collectors/ and shell/ that took longest (cumulative)."""
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(str(prof)).stats
    spawned = waited = 0.0
    mine = []
    for (path, _line, func), (_cc, ncalls, _tt, cumtime, _callers) in stats.items():
        if os.path.basename(path) == "subprocess.py":
            if func == "_execute_child":
                spawned += ncalls
            elif func == "run":
                waited += cumtime
        elif {"collectors", "shell"} & set(Path(path).parts[-2:-1]) and func != "<module>":
            label = f"{Path(path).parent.name}/{Path(path).name}:{func}"
            mine.append({"function": label, "calls": ncalls, "cum_ms": round(cumtime * 1000, 1)})
    mine.sort(key=lambda f: -f["cum_ms"])
    return {"subprocesses": spawned, "subprocess_run_s": round(waited, 4), "collectors": mine[:top]}


def summary_rows(s: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    rows = br.summary_rows({k: s[k] for k in ("unchanged", "ratio_vs_aide") if k in s})
    added = s.get("units_added")
    if added:
        rows.append(("unchanged: tree alone (median)", br.fmt_s(added["tree_s"]), "", ""))
        rows.append(("unchanged: tree + units (median)", br.fmt_s(added["units_tree_s"]), "", ""))
        rows.append(
            (
                f"added by the units ({s['services']}), median of pairs",
                f"{added['added_ms']:.0f} ms",
                "",
                f"tree + units / tree alone: {added['ratio']:.2f}x",
            )
        )
    alone = s.get("units_alone")
    if alone:
        rows.append(
            (
                "unchanged: units alone (median)",
                br.fmt_s(alone["wall_s"]),
                "",
                f"{alone['inside_record_s']:.3f}s inside record(), {alone['facts']} facts",
            )
        )
    prof = s.get("units_profile")
    if prof:
        rows.append(
            (
                "subprocesses in one record of the units",
                f"{prof['subprocesses']:.0f}",
                "",
                f"{prof['subprocess_run_s']:.3f}s waiting in subprocess.run",
            )
        )
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--services", type=int, default=3, help="systemd units (default 3)")
    parser.add_argument("--runs", type=int, default=7, help="pairs per measure (default 7)")
    parser.add_argument("--files", type=int, default=12000, help="files in the tree")
    parser.add_argument("--mb", type=int, default=400, help="tree size in MiB")
    parser.add_argument("--seed", type=int, default=1, help="tree seed")
    parser.add_argument("--tree", type=Path, help="generate the tree here, or reuse it")
    parser.add_argument("--keep", action="store_true", help="keep the bench directory")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the summary here")
    parser.add_argument("--no-aide", action="store_true", help="skip AIDE (no ratio)")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile")
    args = parser.parse_args(argv)
    if not 1 <= args.services <= len(NAMES):
        parser.error(f"--services must be between 1 and {len(NAMES)}")
    if min(args.runs, args.files, args.mb) < 1:
        parser.error("--runs, --files and --mb must be >= 1")
    return args


def measure(args: argparse.Namespace, bench: Path, box: Any, s: dict[str, Any]) -> str:
    """Every step, in order; the collectors' lines of the cProfile of one record (or "")."""
    tree = args.tree.resolve() if args.tree else bench / "tree"
    br.prepare_tree(tree, gen_tree.TreeSpec(args.files, args.mb, args.seed))
    aide, aide_conf = (None, None) if args.no_aide else br.prepare_aide(bench, tree, s)
    services = deploy(box, list(NAMES[: args.services]))
    confs = write_configs(bench, tree, box, services)
    br.warm_up(bench, tree)
    dbs = first_records(bench, confs)
    br.log(f"unchanged tree and {args.services} units vs aide --check, {args.runs} pairs:")
    br.bench_unchanged(bench, confs["units+tree"], dbs["units+tree"], aide, aide_conf, args.runs, s)
    br.log(f"tree alone vs tree and units, {args.runs} pairs:")
    bench_added(bench, confs, dbs, args.runs, s)
    br.log(f"units alone, {args.runs} records:")
    bench_units_alone(bench, confs, dbs, args.runs, s)
    if args.no_profile:
        return ""
    br.profile_record(bench, confs["units"], dbs["units"])
    s["units_profile"] = profile_figures(bench / "record.prof")
    return "\n".join(
        f"  {f['cum_ms']:8.1f} ms  {f['calls']:>5} calls  {f['function']}"
        for f in s["units_profile"]["collectors"]
    )


def main(argv: list[str] | None = None) -> int:
    """Boot the container, run every measure, print a table and a one-line JSON summary."""
    args = parse_args(argv)
    try:
        from systemd_container import SystemdContainer, systemd_available
    except ImportError as exc:  # its module needs pytest: the test extras
        br.log(f"bench: cannot load tests/systemd_container.py ({exc}); pip install -e '.[test]'")
        return 2
    reason = systemd_available()
    if reason is not None or not br.DRIFT.exists():
        br.log(f"bench: {reason or f'{br.DRIFT} not found; install drift into this venv first'}")
        return 2
    bench = Path(tempfile.mkdtemp(prefix="drift-bench-systemd-"))
    br.bytecode_on(bench)
    s = br.new_summary(args, services=args.services, ratio_vs_aide=None)
    failed: str | None = None
    profile_text = ""
    box = SystemdContainer(name=f"drift-bench-{os.getpid()}")
    try:
        br.log(f"bench dir {bench}")
        box.boot()
        br.log(f"systemd container {box.name}: leader pid {box.leader_pid}")
        profile_text = measure(args, bench, box, s)
    except (br.BenchError, RuntimeError) as exc:
        failed = str(exc)
    except KeyboardInterrupt:
        failed = "interrupted"
    finally:
        box.stop()
        if args.keep:
            br.log(f"kept {bench}")
        else:
            shutil.rmtree(bench, ignore_errors=True)
    br.print_heading(f"drift record with {args.services} systemd units", s)
    aide = s.get("aide_version", "-")
    print(f"tree: {args.files} files, {args.mb} MiB (seed {args.seed}); aide {aide}")
    br.print_table(summary_rows(s))
    if profile_text:
        print("\ncProfile of one unchanged record of the units alone, drift's collectors")
        print("and shell reader (cumulative, generators counted at each resumption):")
        print(profile_text)
    return br.finish(s, failed, args.json)


if __name__ == "__main__":
    sys.exit(main())
