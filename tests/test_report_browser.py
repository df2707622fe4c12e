"""The incident's HTML report in a real headless Chromium: self-contained, and the culprit first.

Screenshots are kept in test-artifacts/ for a person to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import artifact_dir, check_page, launch_chromium
from conftest import run_drift

from drift.demo import CULPRIT, DEMO_TOKEN


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with launch_chromium() as b:
        yield b


def test_incident_report_loads_nothing_and_shows_the_culprit_above_the_fold(
    sandbox, tmp_path: Path, browser
) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["mark", "stable", "--note", "decode answers", *cfg], tmp_path)
    sandbox.add_culprit()
    sandbox.touch_kernel()
    sandbox.restart_all()
    run_drift(["record", *cfg], tmp_path)
    report = tmp_path / "postmortem.html"
    out = run_drift(["report", "-o", str(report), *cfg], tmp_path).stdout
    assert out.startswith(f"wrote {report} (html, ")
    html = report.read_text()
    assert DEMO_TOKEN not in html
    assert f"drift report -o {report}" in html  # the command that regenerates it

    title = CULPRIT.removeprefix("export ")  # "SGLANG_SM120_MMA_TARGET_CTAS=512"
    for dark in (False, True):
        name = "incident-report-dark.png" if dark else "incident-report.png"
        check = check_page(
            report, text=title, screenshot=artifact_dir() / name, dark=dark, browser=browser
        )
        assert check.requests == []
        assert check.console == []
        assert check.visible_above_fold, check.text_box
        assert check.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
