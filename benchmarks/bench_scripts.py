"""How often drift links a live variable or flag to the right script line, on a corpus of scripts.

Each case in ``tests/shell_corpus/NAME/`` (``serve.sh``, the files it needs,
``case.json``) runs for real under bash with stub launchers
(``tests/bash_oracle.py``): bash decides what the server receives and which
line assigned each variable. drift reads the same script, attributes every
live value the way ``drift since`` does, and each answer is counted as a
right single line, a wrong single line, unsure (several candidate lines)
or unknown (no line can give it). Flags are checked against the lines
``case.json`` names; the exec line against the line bash launched (a line
drift names that bash did not launch is wrong).

The corpus is split (``"split"`` in case.json): ``tuned`` cases the reader
may be worked on against, and ``heldout`` ones it must not be tuned on; the
table shows both parts and the whole (tests/shell_corpus/README).

    .venv/bin/python benchmarks/bench_scripts.py [--corpus DIR] [--json FILE] [-v]

Prints the table and a one-line JSON summary; exit 1 if any claim is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the bash oracle is test code

from bash_oracle import launched  # noqa: E402

from drift.analysis.origins import (  # noqa: E402
    Attribution,
    Spot,
    attribute_together,
    branches_from_env,
    either,
    passed_flags,
)
from drift.collectors.flags import parse_flags  # noqa: E402
from drift.collectors.scripts import collect_script, script_model  # noqa: E402
from drift.collectors.start_folder import StartFolder  # noqa: E402
from drift.facts import CollectContext, Fact  # noqa: E402
from drift.shell.patterns import feasible  # noqa: E402
from drift.store.query import StoredVersion  # noqa: E402


@dataclass
class Count:
    """Answers of one kind (variables or flags)."""

    right: int = 0
    wrong: int = 0
    unsure: int = 0
    unknown: int = 0

    @property
    def total(self) -> int:
        return self.right + self.wrong + self.unsure + self.unknown

    def add(self, other: Count) -> None:
        for name in ("right", "wrong", "unsure", "unknown"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class CaseResult:
    name: str
    split: str = "tuned"
    idiom: str = ""
    env: Count = field(default_factory=Count)
    flags: Count = field(default_factory=Count)
    exec: Count = field(default_factory=Count)  # one answer: the line that launched the server
    exec_right: bool = False
    evaluate_ms: float = 0.0
    lines: int = 0
    notes: list[str] = field(default_factory=list)
    # the same run, drift not told the folder bash started the script in
    env_untold: Count = field(default_factory=Count)
    flags_untold: Count = field(default_factory=Count)
    exec_untold: Count = field(default_factory=Count)
    exec_right_untold: bool = False
    notes_untold: list[str] = field(default_factory=list)

    @property
    def wrong(self) -> int:
        """Every wrong claim of the case, told or not where the script starts."""
        return sum(
            c.wrong
            for c in (self.env, self.flags, self.exec, self.env_untold)
            + (self.flags_untold, self.exec_untold)
        )


@dataclass
class Totals:
    """The answers of several cases added up: one column of the table."""

    cases: int = 0
    env: Count = field(default_factory=Count)
    flags: Count = field(default_factory=Count)
    exec: Count = field(default_factory=Count)

    @classmethod
    def of(cls, results: list[CaseResult], untold: bool = False) -> Totals:
        totals = cls(len(results))
        for r in results:
            totals.env.add(r.env_untold if untold else r.env)
            totals.flags.add(r.flags_untold if untold else r.flags)
            totals.exec.add(r.exec_untold if untold else r.exec)
        return totals

    def summary(self) -> dict[str, int]:
        out = {"cases": self.cases}
        for kind in ("env", "flags", "exec"):
            count: Count = getattr(self, kind)
            out |= {f"{kind}_{n}": getattr(count, n) for n in ("right", "wrong", "unsure")}
            out |= {f"{kind}_unknown": count.unknown, f"{kind}_total": count.total}
        return out

    ROWS: ClassVar[list[tuple[str, Callable[[Totals], str]]]] = [
        ("exported variables linked to the right file:line", lambda t: _rate(t.env)),
        ("... unsure (several lines named) / source unknown", lambda t: _other(t.env)),
        ("**wrong** single-line claims (variables)", lambda t: str(t.env.wrong)),
        ("live flags linked to the line that produced them", lambda t: _rate(t.flags)),
        ("... unsure / unknown", lambda t: _other(t.flags)),
        ("**wrong** single-line claims (flags)", lambda t: str(t.flags.wrong)),
        ("exec command picked right", lambda t: _rate(t.exec)),
        ("... unsure / unknown", lambda t: _other(t.exec)),
        ("**wrong** exec lines (bash launched another)", lambda t: str(t.exec.wrong)),
    ]


def _other(count: Count) -> str:
    return f"{count.unsure} / {count.unknown}"


def _version(fact: Fact) -> StoredVersion:
    return StoredVersion(
        fact.subject, fact.key, fact.value, None, False, 1, 0, None, None, fact.provenance
    )


def _live(key: str, value: str) -> StoredVersion:
    return StoredVersion("service:s", key, value, None, False, 1, 0, None, None, {})


def _line(path: str, number: int) -> str:
    try:
        return Path(path).read_text().splitlines()[number - 1]
    except (OSError, IndexError):
        return ""


def attribute_live(
    facts: dict[str, Fact], argv: list[str], env: dict[str, str]
) -> dict[str, Attribution | None]:
    """Every export, flag and the exec of a script attributed against a live process.

    As `drift since` does: the values together, branches decided by the
    live environment, the launch picked by the live command line.
    """
    flags = parse_flags(argv)
    pairs: dict[str, tuple[StoredVersion | None, StoredVersion | None]] = {}
    for key, fact in facts.items():
        kind, _, name = key.partition(":")
        if kind == "export" and name in env:
            pairs[key] = (_version(fact), _live(f"env:{name}", env[name]))
        elif kind == "flag" and name in flags:
            pairs[key] = (_version(fact), _live(key, flags[name]))
    decided: set[str] = set()
    if "exec" in facts:
        pairs["exec"] = (_version(facts["exec"]), _live("argv", " ".join(argv)))
        decided = branches_from_env(_version(facts["exec"]), env)
    found = attribute_together(pairs, decided)
    # the branches the values single out, as `drift since` knows them (Sources.known_branches)
    known = set(decided)
    for attribution in found.values():
        if attribution is not None and attribution.single is not None:
            known.update(attribution.held)
    if not feasible(known):
        known = set(decided)
    # a live variable no script line names: drift since says "perhaps set by LINE (not
    # followed)" when a line drift did not follow may have exported it
    unread = _unread_spots(facts.get("exec"))
    for name in env:
        if unread and f"export:{name}" not in facts:
            found[f"export:{name}"] = Attribution((), unsure=True, unread=unread)
    if "exec" in facts:
        # flags the caller passed through "$@" (or a word like it) that no line writes
        for name, passed in passed_flags(_version(facts["exec"]), argv, known, env).items():
            found[f"flag:{name}"] = either(found.get(f"flag:{name}"), passed)
    return found


def _unread_spots(exec_fact: Fact | None) -> tuple[Spot, ...]:
    """The lines drift did not follow that the exec fact lists (see script_facts)."""
    listed = exec_fact.provenance.get("unread") if exec_fact is not None else None
    return tuple(
        Spot(u["file"], u["line"])
        for u in listed or ()
        if isinstance(u, dict) and isinstance(u.get("file"), str) and isinstance(u.get("line"), int)
    )


def _judge(
    found: Attribution | None, truth: tuple[str, int] | None, name: str = ""
) -> tuple[str, str]:
    if found is None:
        return "unknown", "no line can give it"
    spot = found.single
    if spot is None:
        return "unsure", found.words()
    if truth is None:
        return ("right", str(spot)) if spot.given else ("wrong", f"{spot}, bash assigned none")
    same = (os.path.realpath(spot.file), spot.line) == (os.path.realpath(truth[0]), truth[1])
    if not same and name and _through_substitution(spot.file, spot.line, truth, name):
        same = True
    return ("right" if same else "wrong"), f"drift {spot}, bash {truth[0]}:{truth[1]}"


def _through_substitution(file: str, line: int, truth: tuple[str, int], name: str) -> bool:
    """``export $(grep -v '^#' .env | xargs)``: bash shows the export line, drift the .env line.

    The trace cannot see inside the substitution; the value is written at
    the file's own line, which that export line reads.
    """
    exporting = _line(*truth)
    written = _line(file, line).strip().removeprefix("export ").strip()
    return (
        "$(" in exporting and os.path.basename(file) in exporting and written.startswith(f"{name}=")
    )


def run_case(case: Path, work: Path) -> CaseResult:
    """One corpus case: bash runs it, drift reads it, every live value is judged.

    bash runs in the case's folder, and drift is told so (as systemd's
    WorkingDirectory= tells it for a unit); the same run also judges drift
    not told where the script was started (a service started by hand).
    """
    spec = json.loads((case / "case.json").read_text())
    folder = work / case.name
    shutil.copytree(case, folder)
    script = folder / "serve.sh"
    result = CaseResult(
        case.name,
        split=spec.get("split", "tuned"),
        idiom=spec.get("idiom", ""),
        lines=len(script.read_text().splitlines()),
    )

    data = script.read_bytes()
    start = StartFolder(str(folder), "the folder bash ran it in")
    started = time.perf_counter()
    for _ in range(5):
        script_model.__globals__["_CACHE"].clear()
        script_model(str(script), data, start=start)
    result.evaluate_ms = (time.perf_counter() - started) / 5 * 1000
    told, untold = (
        {
            item.key: item
            for item in collect_script("s", str(script), CollectContext(), start=given)
            if isinstance(item, Fact)
        }
        for given in (start, None)
    )
    with launched(
        script,
        sandbox=folder / ".sandbox",
        args=spec.get("args", []),
        env=spec.get("env", {}),
        cwd=folder,
    ) as run:
        result.exec_right = _score(
            told, run, spec, folder, (result.env, result.flags, result.exec), result.notes
        )
        result.exec_right_untold = _score(
            untold,
            run,
            spec,
            folder,
            (result.env_untold, result.flags_untold, result.exec_untold),
            result.notes_untold,
        )
    return result


def _score(
    facts: dict[str, Fact],
    run: Any,
    spec: dict[str, Any],
    folder: Path,
    counts: tuple[Count, Count, Count],
    notes: list[str],
) -> bool:
    """Judge drift's facts against what bash did: counts (variables, flags, exec) and notes.

    True if the exec is right. An exec line drift names that is not the one
    bash launched is wrong; several candidates unsure; none unknown.
    """
    env, flags, execs = counts
    script = folder / "serve.sh"
    found = attribute_live(facts, run.argv, run.env)
    for name in sorted(run.exported):
        if name not in run.assigned and f"export:{name}" not in facts:
            continue  # bash's own (PWD, SHLVL, _): no script line sets them
        verdict, why = _judge(found.get(f"export:{name}"), run.assigned.get(name), name)
        setattr(env, verdict, getattr(env, verdict) + 1)
        if verdict != "right":
            notes.append(f"{verdict}: ${name}: {why}")
    expected = spec.get("flags", {})
    for name in parse_flags(run.argv):
        line = expected.get(name)
        truth = None
        if isinstance(line, int):
            truth = (str(script), line)
        elif isinstance(line, str) and ":" in line:
            file, _, number = line.rpartition(":")
            truth = (str(folder / file), int(number))
        verdict, why = _judge(found.get(f"flag:{name}"), truth)
        if truth is None and verdict == "wrong":
            verdict, why = "unsure", f"not annotated in case.json ({why})"
        setattr(flags, verdict, getattr(flags, verdict) + 1)
        if verdict != "right":
            notes.append(f"{verdict}: {name}: {why}")
    exec_fact = facts.get("exec")
    exec_line = exec_fact.provenance.get("line") if exec_fact else None
    exec_file = exec_fact.provenance.get("file") if exec_fact else None
    picked = found.get("exec")
    if exec_line is None and picked is not None and picked.single is not None:
        exec_line, exec_file = picked.single.line, picked.single.file  # the live argv chose
    right = exec_line == run.launch[1] and os.path.realpath(
        str(exec_file or "")
    ) == os.path.realpath(run.launch[0])
    if right:
        verdict = "right"
    elif exec_line is not None:
        verdict = "wrong"
    else:
        verdict = "unsure" if picked is not None else "unknown"
    setattr(execs, verdict, getattr(execs, verdict) + 1)
    if not right:
        notes.append(f"{verdict}: exec: drift line {exec_line}, bash launched {run.launch}")
    return bool(right)


def generated_script(lines: int, seed: int = 1) -> bytes:
    """A launch script of about `lines` lines shaped like long real ones (deterministic).

    A quarter comments and blanks, log lines, exports (some with defaults),
    branches on the role, array flags, helper functions, mkdirs, one exec.
    """
    rng = random.Random(seed)
    out = [
        "#!/bin/bash",
        "set -euo pipefail",
        'SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)',
        "ARGS=()",
    ]
    i = 0
    while len(out) < lines:
        i += 1
        k = rng.random()
        if k < 0.25:
            out.append(f"# step {i}: tune the decode node")
        elif k < 0.32:
            out.append("")
        elif k < 0.45:
            out.append(f'echo "[$(date +%T)] starting step {i}"')
        elif k < 0.60:
            out.append(f"export OPT_{i}={i}")
        elif k < 0.68:
            out.append(f'export PATH_{i}="${{BASE_{i}:-/opt/x}}/lib"')
        elif k < 0.76:
            out += [f'if [ "${{ROLE:-decode}}" = r{i} ]; then', f"  export R_{i}=1", "fi"]
        elif k < 0.84:
            out.append(f"ARGS+=(--flag-{i} {i})")
        elif k < 0.90:
            out += [f"log_{i}() {{", '  echo "$1" >> /tmp/log', "}"]
        else:
            out.append(f'mkdir -p "$SCRIPT_DIR/run{i}"')
    out.append('exec python3 -m sglang.launch_server "${ARGS[@]}"')
    return "\n".join(out).encode()


def time_reading(lines: int, runs: int = 9) -> tuple[float, float]:
    """Median ms to read one generated script (parse, evaluate, facts) and for ``bash -n``."""
    from drift.collectors.script_facts import script_facts

    data = generated_script(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "serve.sh"
        path.write_bytes(data)
        drift_ms, bash_ms = [], []
        for _ in range(runs):
            script_model.__globals__["_CACHE"].clear()
            started = time.perf_counter()
            model = script_model(str(path), data)
            list(script_facts("script:s", model, {}))
            drift_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            subprocess.run(["bash", "-n", str(path)], check=True)
            bash_ms.append((time.perf_counter() - started) * 1000)
    return statistics.median(drift_ms), statistics.median(bash_ms)


def _rate(count: Count) -> str:
    return f"{count.right} of {count.total} ({100 * count.right / max(count.total, 1):.0f}%)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "shell_corpus")
    parser.add_argument("--json", type=Path, help="write the per-case results here")
    parser.add_argument("-v", "--verbose", action="store_true", help="every answer not right")
    parser.add_argument(
        "--misses-of",
        choices=("tuned", "heldout", "all"),
        default="tuned",
        help="whose misses -v lists (default: tuned; held-out is read for its figure only)",
    )
    args = parser.parse_args(argv)

    cases = sorted(p for p in args.corpus.iterdir() if (p / "case.json").exists())
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(prefix="drift-scripts-") as tmp:
        for case in cases:
            print(f"  {case.name}", file=sys.stderr)
            results.append(run_case(case, Path(tmp)))

    parts = {
        "all": Totals.of(results),
        "tuned": Totals.of([r for r in results if r.split != "heldout"]),
        "heldout": Totals.of([r for r in results if r.split == "heldout"]),
    }
    untold = Totals.of(results, untold=True)
    timing: dict[str, float] = {}
    timings = [r.evaluate_ms for r in results]
    print(f"\n{len(results)} scripts ({sum(r.lines for r in results)} lines)\n")
    columns = [parts["all"], parts["tuned"], parts["heldout"], untold]
    print(
        f"| measure | all ({parts['all'].cases}) | tuned ({parts['tuned'].cases}) "
        f"| held out ({parts['heldout'].cases}) | all, drift not told where the script starts |"
    )
    print("| --- | --- | --- | --- | --- |")
    for measure, show in Totals.ROWS:
        print(f"| {measure} | " + " | ".join(show(t) for t in columns) + " |")
    print(
        f"| read and evaluate one script (median, max) | {statistics.median(timings):.1f} ms, "
        f"{max(timings):.1f} ms | | | |"
    )
    for lines in (100, 1000):
        drift_ms, bash_ms = time_reading(lines)
        print(
            f"| read a generated {lines}-line script / `bash -n` | {drift_ms:.1f} ms / "
            f"{bash_ms:.1f} ms ({drift_ms / bash_ms:.1f}x) | | | |"
        )
        timing[f"generated_{lines}_ms"] = round(drift_ms, 1)
    if args.verbose:
        for r in results:
            if args.misses_of != "all" and r.split != args.misses_of:
                continue
            for note in r.notes:
                print(f"  {r.name}: {note}")
            for note in r.notes_untold:
                print(f"  {r.name} (not told where it starts): {note}")
        for split in ("tuned", "heldout"):
            missed = [r for r in results if r.split == split and r.wrong]
            print(f"\n{split}: {len(missed)} cases with a wrong claim")
            for r in missed:
                print(f"  {r.name} ({r.idiom or 'original'}): {r.wrong} wrong")
    summary: dict[str, Any] = {
        "scripts": len(results),
        **parts["all"].summary(),
        **{f"untold_{k}": v for k, v in untold.summary().items()},
        "tuned": parts["tuned"].summary(),
        "heldout": parts["heldout"].summary(),
        "evaluate_ms_median": round(statistics.median(timings), 2),
        **timing,
    }
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 1 if any(r.wrong for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
