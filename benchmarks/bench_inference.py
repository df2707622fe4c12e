"""Benchmark an unchanged `drift record` of an inference box, every collector on, vs `aide --check`.

    .venv/bin/python benchmarks/bench_inference.py [--dists 200] [--libs 100] [--leaves 300]
        [--cache-files 3000] [--runs 7] [--files 12000] [--mb 400] [--tree DIR]
        [--keep] [--json FILE] [--no-aide] [--no-profile]

Beside bench_record.py's generated tree, drift.toml holds what an inference
server runs with:

- a [[services]] entry: a real Python process run from a real venv (`python
  -m venv`) of about `--dists` distributions: the venv's own pip and
  setuptools, a wheel built here and pip-installed that holds `--libs` shared
  libraries (copies of the system's libz, loaded with ctypes, listed in its
  RECORD, as torch's lib/ is), an editable install whose checkout is a git
  repository, and the rest dist-info folders written as pip leaves them
  (METADATA, RECORD, INSTALLER, WHEEL, top_level.txt, beside their modules);
- an [[endpoints]] entry against a real HTTP server on loopback
  (tests/json_server.py) answering a server_info document of about
  `--leaves` leaves;
- a [[caches]] folder of `--cache-files` files shaped like Triton's
  (bench_caches.py);
- [gpu] whose `command` is a script printing tests/gpu_xml/h100x4.xml, the
  shape of a real `nvidia-smi -q -x` of four H100s.

Measured, in pairs whose order alternates (bench_record's helpers):

1. an unchanged record with everything on vs `aide --check` of the tree,
   median of drift/aide (target <= 0.10); one untimed record first must
   record 0 changes and 0 errors;
2. what each part adds: a record with that part off vs everything on (and the
   tree alone vs everything), median of the per-pair differences;
3. the files an unchanged record opens, under `strace -f -e trace=openat`:
   no METADATA (nor PKG-INFO, INSTALLER, direct_url.json, RECORD) may be read
   again; the first record of a fresh database is traced too, to show the
   count sees them when they are read;
4. where the time goes: cProfile of one unchanged record, by collector.
"""

from __future__ import annotations

import argparse
import json
import pstats
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(TESTS))
import bench_caches  # noqa: E402  (sibling scripts, not a package)
import bench_libraries  # noqa: E402
import bench_record as br  # noqa: E402
import gen_tree  # noqa: E402
from json_server import JsonServer, json_server  # noqa: E402
from python_dists import build_wheel, editable_checkout, make_venv, pip, record_text  # noqa: E402
from shared_libs import system_libz  # noqa: E402

PARTS = ("packages", "libraries", "endpoints", "caches", "gpu")
METADATA_FILES = ("METADATA", "PKG-INFO", "INSTALLER", "direct_url.json", "RECORD")
# Where the profile's time goes: the collectors' entry points, and the store around them.
PROFILED = {
    "tree ([[files]])": ("files.py", "collect_files"),
    "service, all of it": ("services.py", "collect_service"),
    "service: packages": ("packages.py", "python_facts"),
    "service: libraries": ("libraries.py", "library_facts"),
    "endpoints": ("endpoints.py", "collect_endpoint"),
    "caches": ("caches.py", "collect_cache"),
    "gpu": ("gpu.py", "collect_gpus"),
    "load the stat cache": ("writer.py", "load_file_cache"),
    "write the snapshot": ("writer.py", "write_snapshot"),
}
CLASSIFIERS = (
    "Programming Language :: Python :: 3",
    "License :: OSI Approved :: Apache Software License",
    "Operating System :: POSIX :: Linux",
    "Topic :: Scientific/Engineering :: Artificial Intelligence",
)


@dataclass
class Box:
    """The service's venv: its python, its site folder, the libraries it maps, how many dists."""

    python: Path
    site: Path
    libs: list[Path]
    dists: int


# --------------------------------------------------------------------------- the venv


def write_dist(site: Path, name: str, version: str, rng: random.Random) -> None:
    """A distribution as pip leaves it: its module folder and its dist-info (RECORD lists both)."""
    stem = name.replace("-", "_")
    files: dict[str, bytes] = {}
    for i in range(rng.randint(2, 8)):
        files[f"{stem}/{'__init__' if i == 0 else f'mod{i}'}.py"] = (
            rng.randbytes(rng.randint(200, 4000)).hex().encode()
        )
    requires = "".join(f"Requires-Dist: dep{rng.randrange(400)}>=1.0\n" for _ in range(5))
    classifiers = "".join(f"Classifier: {c}\n" for c in CLASSIFIERS)
    body = "Long description.\n" * rng.randint(20, 300)
    info = f"{stem}-{version}.dist-info"
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: {name} for inference\nHome-page: https://example.org/{name}\n"
        f"Author: The {name} authors\nLicense: Apache-2.0\n{classifiers}"
        f"Requires-Python: >=3.9\n{requires}Description-Content-Type: text/markdown\n\n{body}"
    ).encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\n"
    files[f"{info}/top_level.txt"] = f"{stem}\n".encode()
    files[f"{info}/INSTALLER"] = b"pip\n"
    files[f"{info}/RECORD"] = record_text(files, f"{info}/RECORD").encode()
    for path, data in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)


def make_box(bench: Path, dists: int, libs: int) -> Box:
    """The service's venv: pip's own, a real wheel with `libs` libraries, an editable, the bulk."""
    python = make_venv(bench / "venv")
    libz = system_libz().read_bytes()
    lib_names = [f"engine_kernels/lib/libengine{i:03}.so.1" for i in range(libs)]
    wheels = bench / "wheels"
    build_wheel(wheels, "engine-kernels", "1.0.0", dict.fromkeys(lib_names, libz))
    pip(python, "--find-links", str(wheels), "engine-kernels==1.0.0")
    pip(python, "--no-build-isolation", "-e", str(editable_checkout(bench / "sglang")[0]))
    (site,) = (bench / "venv" / "lib").glob("python3*/site-packages")
    present = len(list(site.glob("*.dist-info")))
    rng = random.Random(1)
    for i in range(max(0, dists - present)):
        write_dist(site, f"dist{i:03}", f"{rng.randint(0, 9)}.{rng.randint(0, 40)}.0", rng)
    total = len(list(site.glob("*.dist-info")))
    br.log(f"venv {bench / 'venv'}: {total} distributions ({present} pip-installed), {libs} libs")
    return Box(python, site, [site / n for n in lib_names], total)


# --------------------------------------------------------------------------- the rest


def server_info(leaves: int) -> dict[str, Any]:
    """A server_info document shaped like SGLang's, of about `leaves` leaves."""
    rng = random.Random(1)
    kinds = (
        lambda: rng.randint(0, 65536),
        lambda: rng.choice([True, False]),
        lambda: rng.choice(["fa3", "flashinfer", "triton", "auto", None]),
        lambda: round(rng.random(), 3),
    )
    args: dict[str, Any] = {f"arg_{i:03}": rng.choice(kinds)() for i in range(leaves - 60)}
    args["cuda_graph_bs"] = list(range(1, 33))
    return {
        "server_args": args,
        "version": "0.4.6.post1",
        "memory": {"weight_gb": 71.5, "kv_cache_gb": 6.2, "token_capacity": 412672},
        "internal_states": [{"step": i, "throughput": 1234.5} for i in range(8)],
        "served_model_names": ["deepseek-v3"] * 20,
    }


def gpu_tool(bench: Path) -> Path:
    """A script that prints four H100s in the shape of `nvidia-smi -q -x`."""
    tool = bench / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\nexec cat {TESTS / 'gpu_xml' / 'h100x4.xml'}\n")
    tool.chmod(0o755)
    return tool


def write_configs(
    bench: Path, tree: Path, pidfile: Path, url: str, cache: Path, tool: Path
) -> dict[str, Path]:
    """drift.toml with every part on ("all"), with each part off, and the tree alone."""
    tree_only = br.write_drift_toml(bench, tree).read_text()

    def sections(off: str) -> str:
        service = f'\n[[services]]\nname = "engine"\npidfile = "{pidfile}"\n'
        service += "packages = false\n" if off == "packages" else ""
        service += "libraries = false\n" if off == "libraries" else ""
        endpoint = (
            f'\n[[endpoints]]\nname = "engine-info"\nurl = "{url}/get_server_info"\n'
            'ignore = ["/internal_states"]\nservice = "engine"\n'
        )
        caches = f'\n[[caches]]\nname = "triton"\npaths = [{json.dumps(str(cache))}]\n'
        gpu = f"\n[gpu]\nenabled = {'false' if off == 'gpu' else 'true'}\n"
        gpu += f'command = [{json.dumps(str(tool))}, "-q", "-x"]\n'
        return (
            service
            + ("" if off == "endpoints" else endpoint)
            + ("" if off == "caches" else caches)
            + gpu
        )

    out = {}
    for label, text in [
        ("all", sections("")),
        *((f"no-{part}", sections(part)) for part in PARTS),
        ("tree", "\n[gpu]\nenabled = false\n"),
    ]:
        conf = bench / f"drift-{label}.toml"
        conf.write_text(tree_only + text)
        out[label] = conf
    return out


def record_until_settled(bench: Path, conf: Path, db: Path) -> dict[str, float]:
    """First record, then records until one changes nothing (the RECORD files' racy window)."""
    _, proc = br.run([br.DRIFT, "record", *br.drift_args(conf, db)], cwd=bench, what=conf.name)
    first = br.parse_record_line(proc.stdout)
    for _ in range(3):
        _, proc = br.run([br.DRIFT, "record", *br.drift_args(conf, db)], cwd=bench, what=conf.name)
        info = br.parse_record_line(proc.stdout)
        if not info["changed"] and not info["errors"]:
            return first
    raise br.BenchError(f"{conf.name}: an unchanged record still records changes: {proc.stdout}")


# --------------------------------------------------------------------------- measures


def traced_opens(bench: Path, conf: Path, db: Path, site: Path) -> dict[str, Any]:
    """The files a `drift record` opens (strace -f -e trace=openat), by kind."""
    out = bench / "strace.txt"
    br.run(
        [
            "strace",
            "-f",
            "-qq",
            "-e",
            "trace=openat",
            "-o",
            out,
            br.DRIFT,
            "record",
            "--quiet",
            *br.drift_args(conf, db),
        ],
        cwd=bench,
        what="strace drift record",
    )
    opened = re.findall(r'openat\([^"]*"([^"]+)"', out.read_text())
    # The libraries' RECORDs are read as the process sees them, through /proc/PID/root.
    in_site = [p for p in opened if re.sub(r"^/proc/\d+/root", "", p).startswith(f"{site}/")]
    metadata = [p for p in in_site if p.rpartition("/")[2] in METADATA_FILES]
    return {
        "opens": len(opened),
        "opens_in_site_packages": len(in_site),
        "metadata_opens": len(metadata),
        "metadata_by_name": {
            name: sum(p.endswith("/" + name) for p in metadata) for name in METADATA_FILES
        },
    }


def where_time_goes(prof: Path) -> dict[str, float]:
    """Cumulative seconds of each collector in a cProfile of a record (see PROFILED)."""
    stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    out: dict[str, float] = {}
    for label, (file, function) in PROFILED.items():
        out[label] = round(
            sum(
                ct
                for (path, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.items()
                if path.endswith("/" + file) and name == function
            ),
            4,
        )
    prof_total = max(ct for (_p, _l, n), (_c, _n, _t, ct, _x) in stats.items())
    out["whole process"] = round(prof_total, 4)
    return out


def parts_in_process(confs: dict[str, Path], dbs: dict[str, Path], rounds: int) -> dict[str, Any]:
    """What each part adds inside `record()`, without start-up: ms, median of per-round differences.

    Each round records every configuration once in this process, the order
    reversed every other round; start-up and imports (the same each minute)
    are in the wall-time pairs, not here.
    """
    from drift.config import load_config
    from drift.record import record
    from drift.store.urls import resolve_db_url

    configs = {
        label: (load_config(conf), resolve_db_url(str(dbs[label]))) for label, conf in confs.items()
    }
    times: dict[str, list[float]] = {label: [] for label in confs}
    for i in range(rounds + 1):
        for label in list(confs) if i % 2 == 0 else list(confs)[::-1]:
            started = time.perf_counter()
            result = record(*configs[label])
            if i:  # the first round imports the collectors
                times[label].append(time.perf_counter() - started)
            if result.changed or result.errors:
                raise br.BenchError(f"{label}: an unchanged record in-process changed {result}")
    out = {"all_ms": round(statistics.median(times["all"]) * 1000, 1)}
    for label in confs:
        if label != "all":
            diffs = [a - b for a, b in zip(times["all"], times[label], strict=True)]
            out[label.removeprefix("no-")] = round(statistics.median(diffs) * 1000, 1)
    br.log(f"  in-process, ms added by each part (median of {rounds} rounds): {out}")
    return out


def measure(args: argparse.Namespace, bench: Path, server: JsonServer, s: dict[str, Any]) -> None:
    """Every step, in order."""
    tree = args.tree.resolve() if args.tree else bench / "tree"
    br.prepare_tree(tree, gen_tree.TreeSpec(args.files, args.mb, args.seed))
    aide, aide_conf = (None, None) if args.no_aide else br.prepare_aide(bench, tree, s)
    box = make_box(bench, args.dists, args.libs)
    document = server_info(args.leaves)
    server.serve(document)
    cache = bench / "triton" / "cache"
    s["cache_bytes"] = bench_caches.make_cache(cache, args.cache_files)
    s["box"] = {"distributions": box.dists, "libraries": args.libs, "cache_files": args.cache_files}
    pidfile = bench / "engine.pid"
    proc = bench_libraries.serve_libraries(box.python, pidfile, box.libs)
    try:
        confs = write_configs(bench, tree, pidfile, server.url, cache, gpu_tool(bench))
        br.warm_up(bench, tree)
        br.warm_cache(cache)
        dbs = {label: bench / f"db-{label}" / "drift.db" for label in confs}
        for label, db in dbs.items():
            db.parent.mkdir()
            if label == "all":
                # Traced, the first record shows that the count sees metadata read.
                s["first_record_opens"] = traced_opens(bench, confs[label], db, box.site)
            first = record_until_settled(bench, confs[label], db)
            br.log(f"  {label}: {first['facts']:,.0f} facts, settled")
            s.setdefault("facts", {})[label] = first["facts"]
        s["unchanged_opens"] = traced_opens(bench, confs["all"], dbs["all"], box.site)
        br.log(f"  opens of an unchanged record: {s['unchanged_opens']}")
        if s["unchanged_opens"]["metadata_opens"]:
            raise br.BenchError(f"an unchanged record read metadata: {s['unchanged_opens']}")
        br.log("unchanged, everything on, vs aide --check:")
        br.bench_unchanged(bench, confs["all"], dbs["all"], aide, aide_conf, args.runs, s)
        added: dict[str, Any] = {}
        for label in [f"no-{part}" for part in PARTS] + ["tree"]:
            br.log(f"{label} vs all:")
            commands: dict[str, list[Any]] = {
                name: [br.DRIFT, "record", "--quiet", *br.drift_args(confs[name], dbs[name])]
                for name in (label, "all")
            }
            pairs = br.alternated_pairs(bench, commands, args.runs)
            added[label.removeprefix("no-")] = {
                "added_ms": round(statistics.median(p["all"] - p[label] for p in pairs) * 1000, 1),
                "off_s": statistics.median(p[label] for p in pairs),
                "all_s": statistics.median(p["all"] for p in pairs),
            }
        s["added"] = added
        s["added_in_process"] = parts_in_process(confs, dbs, args.runs * 3)
        if not args.no_profile:
            s["profile_text"] = br.profile_record(bench, confs["all"], dbs["all"])
            s["profile"] = where_time_goes(bench / "record.prof")
    finally:
        proc.kill()
        proc.wait()


def print_results(args: argparse.Namespace, s: dict[str, Any]) -> None:
    """The table, what each part adds, the opens, and the profile by collector."""
    br.print_heading("drift record of an inference box, every collector on", s)
    box = s.get("box", {})
    print(
        f"tree: {args.files} files, {args.mb} MiB; a venv of {box.get('distributions')} "
        f"distributions, {args.libs} libraries mapped, an endpoint of {args.leaves} leaves, "
        f"a cache of {args.cache_files} files, [gpu] of 4 H100s; aide {s.get('aide_version', '-')}"
    )
    br.print_table(br.summary_rows({k: s[k] for k in ("unchanged", "ratio_vs_aide") if k in s}))
    for part, added in s.get("added", {}).items():
        what = "everything but the tree" if part == "tree" else part
        print(f"  {what:<24} adds {added['added_ms']:7.1f} ms (median of pairs)")
    inside = s.get("added_in_process")
    if inside:
        print(f"  inside record(), everything on: {inside['all_ms']} ms; each part adds (ms): ")
        print("    " + ", ".join(f"{k} {v}" for k, v in inside.items() if k != "all_ms"))
    for label in ("first_record_opens", "unchanged_opens"):
        if label in s:
            print(f"  {label.replace('_', ' ')}: {s[label]}")
    if s.get("profile"):
        print("cProfile of one unchanged record, cumulative seconds (cProfile inflates Python):")
        for label, seconds in s["profile"].items():
            print(f"  {seconds:8.3f} s  {label}")
    if s.get("profile_text"):
        print(s["profile_text"].rstrip())


def main(argv: list[str] | None = None) -> int:
    """Run every measure, print a table and a one-line JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dists", type=int, default=200, help="distributions in the venv")
    parser.add_argument("--libs", type=int, default=100, help="libraries the service maps")
    parser.add_argument("--leaves", type=int, default=300, help="leaves of the endpoint's JSON")
    parser.add_argument("--cache-files", type=int, default=3000, help="files in the JIT cache")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--files", type=int, default=12000)
    parser.add_argument("--mb", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tree", type=Path, help="generate the tree here, or reuse it")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--no-aide", action="store_true")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if shutil.which("strace") is None:
        br.log("bench: strace not found (apt-get install strace): it counts the files read")
        return 2
    bench = Path(tempfile.mkdtemp(prefix="drift-bench-inference-"))
    br.bytecode_on(bench)
    s = br.new_summary(args, ratio_vs_aide=None)
    failed = None
    try:
        with json_server() as server:
            measure(args, bench, server, s)
    except (br.BenchError, subprocess.CalledProcessError, RuntimeError) as exc:
        failed = str(exc)
    finally:
        if args.keep:
            br.log(f"kept {bench}")
        else:
            shutil.rmtree(bench, ignore_errors=True)
    print_results(args, s)
    s.pop("profile_text", None)
    return br.finish(s, failed, args.json)


if __name__ == "__main__":
    sys.exit(main())
