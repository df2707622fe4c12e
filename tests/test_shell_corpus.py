"""The corpus of launch scripts, run by bash and read by drift: no claim is ever wrong.

benchmarks/bench_scripts.py measures how many live values drift links to
their line on these scripts; here every case must hold the one promise that
does not bend: a single line drift names is the line bash ran.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scripts import run_case  # noqa: E402

CASES = sorted(p for p in (ROOT / "tests" / "shell_corpus").iterdir() if (p / "case.json").exists())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_no_wrong_claim(case: Path, tmp_path: Path) -> None:
    result = run_case(case, tmp_path)
    wrong = [note for note in result.notes if note.startswith("wrong")]
    assert result.env.wrong == result.flags.wrong == 0, wrong
    # Not told the folder bash started the script in (a service started by hand), the same.
    wrong = [note for note in result.notes_untold if note.startswith("wrong")]
    assert result.env_untold.wrong == result.flags_untold.wrong == 0, wrong
