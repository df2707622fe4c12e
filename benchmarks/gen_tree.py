"""Generate a deterministic file tree shaped like a source checkout with a few large binaries.

    python benchmarks/gen_tree.py DIR [--files 12000] [--mb 400] [--seed 1]

Most files are small text files (.py, .txt, .json, 1-20 KB) in directories
nested 3-5 levels deep; a couple of dozen 5-15 MB binaries of random bytes
make up the rest of the size. The same arguments give the same paths and the
same bytes, so two machines (or two runs) benchmark the same tree.

A manifest, ``DIR/.gen_tree.json``, records the arguments: a second run with
the same arguments reuses the tree instead of writing it again.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

KB = 1024
MB = 1024 * KB
MANIFEST = ".gen_tree.json"
FORMAT_VERSION = 1

BINARY_MIN = 5 * MB
BINARY_MAX = 15 * MB
BINARY_TARGET = 25  # how many binaries when the size budget allows
SMALL_MIN = 1 * KB
SMALL_MAX = 20 * KB

_WORDS = (
    "core util model layer attention kernel server router config runtime cache "
    "batch decode prefill sched memory io net test data tools ops"
).split()
_EXTENSIONS = (".py", ".py", ".py", ".txt", ".json")
# Random bytes mapped onto letters, spaces and newlines: text-like and as cheap
# to make as random bytes (one bytes.translate per file).
_TEXT_TABLE = bytes(b"abcdefghijklmnopqrstuvwxyz      \n"[i % 33] for i in range(256))


@dataclass(frozen=True)
class TreeSpec:
    """The arguments a tree was generated from; equal specs mean identical trees."""

    files: int = 12000
    mb: int = 400
    seed: int = 1
    version: int = FORMAT_VERSION


@dataclass
class TreeStats:
    """What was written (or found): file count and total bytes, and whether it was reused."""

    files: int
    bytes: int
    seconds: float
    reused: bool


def _directories(rng: random.Random, count: int) -> list[str]:
    """`count` distinct relative directories, 3 to 5 levels deep, sharing top-level packages."""
    tops = [f"pkg_{i:02d}" for i in range(max(2, count // 60))]
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        depth = rng.randint(3, 5)
        parts = ["src", rng.choice(tops)]
        parts += [f"{rng.choice(_WORDS)}_{rng.randint(0, 9)}" for _ in range(depth - 2)]
        rel = "/".join(parts)
        if rel not in seen:
            seen.add(rel)
            out.append(rel)
    return out


def _binary_sizes(rng: random.Random, count: int, budget: int) -> list[int]:
    """`count` sizes, each drawn from 5-15 MB, scaled so that they add up to `budget`."""
    if count <= 0 or budget <= 0:
        return []
    raw = [rng.uniform(BINARY_MIN, BINARY_MAX) for _ in range(count)]
    scale = budget / sum(raw)
    sizes = [int(r * scale) for r in raw]
    sizes[-1] += budget - sum(sizes)
    return sizes


def plan(spec: TreeSpec) -> list[tuple[str, str, int, int]]:
    """Every file as (relative path, kind, size, seed): a pure function of the spec."""
    rng = random.Random(spec.seed)
    total = spec.mb * MB
    # As many ~10 MB binaries as the budget left after the small files allows
    # (25 for the default 12k files / 400 MiB), so the file count is exact.
    left = total - spec.files * (SMALL_MIN + SMALL_MAX) // 2
    binaries = max(0, min(BINARY_TARGET, spec.files, round(left / (10 * MB))))
    small_sizes = [rng.randint(SMALL_MIN, SMALL_MAX) for _ in range(spec.files - binaries)]
    while small_sizes and sum(small_sizes) > total:
        small_sizes.pop()  # a tiny --mb: fewer files rather than a bigger tree
    binary_sizes = _binary_sizes(rng, binaries, total - sum(small_sizes))
    dirs = _directories(rng, max(1, len(small_sizes) // 12))
    files: list[tuple[str, str, int, int]] = []
    for i, size in enumerate(small_sizes):
        ext = _EXTENSIONS[i % len(_EXTENSIONS)]
        rel = f"{rng.choice(dirs)}/{rng.choice(_WORDS)}_{i:05d}{ext}"
        files.append((rel, "text", size, rng.getrandbits(64)))
    for i, size in enumerate(binary_sizes):
        files.append((f"assets/blobs/weights_{i:02d}.bin", "binary", size, rng.getrandbits(64)))
    return files


def _content(kind: str, size: int, seed: int) -> bytes:
    data = random.Random(seed).randbytes(size)
    return data.translate(_TEXT_TABLE) if kind == "text" else data


def _read_manifest(root: Path) -> TreeSpec | None:
    try:
        data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        return TreeSpec(**data["spec"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def generate(root: Path, spec: TreeSpec, *, quiet: bool = False) -> TreeStats:
    """Write the tree for `spec` under `root`, or reuse it if a matching manifest is there.

    A directory holding something other than a generated tree is refused, so a
    mistyped path never gets overwritten.
    """
    started = time.perf_counter()
    files = plan(spec)
    total = sum(size for _, _, size, _ in files)
    if root.exists() and any(root.iterdir()):
        found = _read_manifest(root)
        if found == spec:
            return TreeStats(len(files), total, time.perf_counter() - started, reused=True)
        if found is None:
            raise SystemExit(
                f"gen_tree: {root} is not empty and has no {MANIFEST}; refusing to write into it"
            )
        shutil.rmtree(root)  # a tree we generated earlier with other arguments
    root.mkdir(parents=True, exist_ok=True)
    made: set[str] = set()
    for rel, kind, size, seed in files:
        parent = rel.rpartition("/")[0]
        if parent not in made:
            (root / parent).mkdir(parents=True, exist_ok=True)
            made.add(parent)
        with open(root / rel, "wb") as out:
            out.write(_content(kind, size, seed))
    # The manifest is written last: a tree cut short by ^C is not reused.
    (root / MANIFEST).write_text(
        json.dumps({"spec": asdict(spec), "files": len(files), "bytes": total}) + "\n",
        encoding="utf-8",
    )
    seconds = time.perf_counter() - started
    if not quiet:
        print(
            f"gen_tree: wrote {len(files)} files, {total / MB:.0f} MiB to {root} in {seconds:.1f}s",
            file=sys.stderr,
        )
    return TreeStats(len(files), total, seconds, reused=False)


def main(argv: list[str] | None = None) -> int:
    """Command line: gen_tree.py DIR [--files N] [--mb N] [--seed N]."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="where to write the tree")
    parser.add_argument("--files", type=int, default=12000, help="number of files (default 12000)")
    parser.add_argument("--mb", type=int, default=400, help="total size in MiB (default 400)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    args = parser.parse_args(argv)
    stats = generate(args.dir, TreeSpec(files=args.files, mb=args.mb, seed=args.seed))
    if stats.reused:
        print(
            f"gen_tree: reused {args.dir} ({stats.files} files, {stats.bytes / MB:.0f} MiB)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
