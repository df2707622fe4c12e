"""The corpus of launch scripts, run by bash and read by drift: no claim is ever wrong.

benchmarks/bench_scripts.py measures how many live values drift links to
their line on these scripts; here every case must hold the one promise that
does not bend: a single line drift names (a variable's, a flag's, the
exec's) is the line bash ran. Cases the reader does not handle yet are
expected to fail, strictly: when the reader is fixed they pass and the mark
must go (tests/shell_corpus/README, "Known misses").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scripts import run_case  # noqa: E402

CORPUS = ROOT / "tests" / "shell_corpus"
CASES = sorted(p for p in CORPUS.iterdir() if (p / "case.json").exists())

# case -> the idiom the reader does not yet get right (a wrong claim today)
KNOWN_MISSES = {}


def _param(case: Path) -> object:
    miss = KNOWN_MISSES.get(case.name)
    if miss is None:
        return pytest.param(case, id=case.name)
    held = json.loads((case / "case.json").read_text()).get("split") == "heldout"
    reason = "reader does not yet handle: " + ("a held-out case" if held else miss)
    return pytest.param(case, id=case.name, marks=pytest.mark.xfail(strict=True, reason=reason))


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_no_wrong_claim(case: Path, tmp_path: Path) -> None:
    result = run_case(case, tmp_path)
    wrong = [note for note in result.notes if note.startswith("wrong")]
    assert result.env.wrong == result.flags.wrong == result.exec.wrong == 0, wrong
    # Not told the folder bash started the script in (a service started by hand), the same.
    wrong = [note for note in result.notes_untold if note.startswith("wrong")]
    assert result.env_untold.wrong == result.flags_untold.wrong == 0, wrong
    assert result.exec_untold.wrong == 0, wrong


def test_corpus_is_split() -> None:
    """About a third held out, each case in one part (README: nobody tunes on the held-out)."""
    splits = [json.loads((c / "case.json").read_text()).get("split") for c in CASES]
    assert set(splits) == {"tuned", "heldout"}
    assert 0.25 <= splits.count("heldout") / len(splits) <= 0.45
