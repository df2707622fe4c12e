"""Benchmark an unchanged `drift record` of a JIT cache ([[caches]]) against `aide --check`.

    .venv/bin/python benchmarks/bench_caches.py [--files 20000] [--runs 7] [--keep] [--json FILE]

A cache shaped like Triton's (a folder per kernel hash, ten files in each:
cubin, ptx, json ... of 1-40 KiB, seeded) is generated in a temporary bench
folder; drift.toml holds one `[[caches]]` entry over it (`hash = "stat"`, the
default) and AIDE checks the same tree. Measured with bench_record's helpers,
in pairs whose order alternates: the wall time of an unchanged `drift record`
over that of `aide --check`, median of the per-pair ratios (target <= 0.10),
and the record's own time as it reports it (the rest is start-up).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_record as br  # noqa: E402  (a sibling script, not a package)

SUFFIXES = (
    ".cubin",
    ".ptx",
    ".ttir",
    ".ttgir",
    ".llir",
    ".json",
    ".source",
    ".asm",
    ".so",
    ".lock",
)


def make_cache(root: Path, files: int, seed: int = 1) -> int:
    """A Triton-like cache of `files` files; returns its bytes."""
    rng = random.Random(seed)
    total = 0
    for i in range(0, files, len(SUFFIXES)):
        folder = root / f"{rng.getrandbits(128):032x}"
        folder.mkdir(parents=True)
        for suffix in SUFFIXES[: min(len(SUFFIXES), files - i)]:
            data = rng.randbytes(rng.randint(1, 40) << 10)
            (folder / f"kernel{suffix}").write_bytes(data)
            total += len(data)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    bench = Path(tempfile.mkdtemp(prefix="drift-bench-caches-"))
    s: dict[str, Any] = {"files": args.files}
    failed = None
    try:
        cache = bench / "triton" / "cache"
        s["bytes"] = make_cache(cache, args.files)
        br.log(f"cache: {args.files:,} files, {s['bytes'] / (1 << 20):.0f} MiB in {cache}")
        conf = bench / "drift.toml"
        conf.write_text(
            f'host = "bench"\n\n[[caches]]\nname = "triton"\npaths = [{json.dumps(str(cache))}]\n'
        )
        db = bench / "drift.db"
        br.run([br.DRIFT, "init", *br.drift_args(conf, db)], cwd=bench, what="drift init")
        br.run([br.DRIFT, "record", *br.drift_args(conf, db)], cwd=bench, what="first record")
        aide, aide_conf = br.prepare_aide(bench, cache, s)
        br.warm_cache(cache)
        br.bench_unchanged(bench, conf, db, aide, aide_conf, args.runs, s)
    except br.BenchError as exc:
        failed = str(exc)
    finally:
        if not args.keep:
            shutil.rmtree(bench, ignore_errors=True)
    unchanged = s.get("unchanged", {})
    print(
        f"unchanged record of a {args.files:,}-file cache: "
        f"drift {br.fmt_s(unchanged.get('drift_s'))}"
        f" (in-process {br.fmt_s(unchanged.get('drift_inproc_s'))}), aide --check "
        f"{br.fmt_s(unchanged.get('aide_s'))}, ratio {s.get('ratio_vs_aide')} "
        f"{br.verdict(s.get('ratio_vs_aide'), 0.10)}"
    )
    summary = {k: v for k, v in s.items() if k != "unchanged"} | {
        "drift_s": unchanged.get("drift_s"),
        "drift_inproc_s": unchanged.get("drift_inproc_s"),
        "aide_s": unchanged.get("aide_s"),
    }
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps(s, indent=2))
    if failed:
        print(f"failed: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
