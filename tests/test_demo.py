"""`drift demo`, the main job: it tells the story, writes the report, leaves nothing behind."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
from conftest import DRIFT, drift_env, run_drift, start_drift

from drift.demo import CULPRIT, DEMO_TOKEN


def demo_servers() -> list[psutil.Process]:
    """The sleeping servers the demo starts, wherever they came from."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "--model-path" in cmdline and "deepseek-ai/DeepSeek-V4-Flash" in cmdline:
            found.append(proc)
    return found


def test_demo_names_the_line_writes_the_report_and_cleans_up(tmp_path: Path) -> None:
    before = {p.pid for p in demo_servers()}
    report = tmp_path / "postmortem.html"
    out = run_drift(["demo", "-o", str(report)], tmp_path, timeout=120).stdout
    assert "drift mark stable" in out
    suspects = out.split("Suspects")[1]
    first = suspects.split("\n 2. ")[0]
    assert " 1. " in first and CULPRIT.split()[1] in first and "live in decode" in first
    assert f"HTML report for the postmortem: {report}" in out
    html = report.read_text()
    assert "SGLANG_SM120_MMA_TARGET_CTAS=512" in html
    assert DEMO_TOKEN not in out and DEMO_TOKEN not in html
    sandbox = re.search(r"sandbox (/\S+):", out)
    assert sandbox and not Path(sandbox.group(1)).exists()
    assert {p.pid for p in demo_servers()} <= before


def test_ctrl_c_stops_the_services_and_removes_the_sandbox(tmp_path: Path) -> None:
    before = {p.pid for p in demo_servers()}
    proc = start_drift(["demo", "-o", str(tmp_path / "r.html")], tmp_path)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # "sandbox ...: ... running": the servers are up
    sandbox = Path(first.split()[1].rstrip(":"))
    assert {p.pid for p in demo_servers()} - before, "the demo's servers should be running"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 10
    while {p.pid for p in demo_servers()} - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not {p.pid for p in demo_servers()} - before
    assert not sandbox.exists()


def test_demo_keeps_one_report_where_the_user_is_and_nothing_in_tmp(tmp_path: Path) -> None:
    # Every run used to leave a new drift-demo-report-*.html in the temp folder.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    here = tmp_path / "here"
    here.mkdir()
    env = {**drift_env(tmp_path), "TMPDIR": str(tmp)}
    for _ in range(2):
        result = subprocess.run(
            [DRIFT, "demo"], capture_output=True, text=True, env=env, cwd=here, timeout=120
        )
        assert result.returncode == 0, result.stderr
        report = here / "drift-demo-report.html"
        assert (
            f"HTML report for the postmortem: {report} (the next `drift demo` replaces it)"
            in result.stdout
        )
    assert [p.name for p in here.iterdir()] == ["drift-demo-report.html"]
    assert "SGLANG_SM120_MMA_TARGET_CTAS=512" in report.read_text()
    assert list(tmp.iterdir()) == []  # the sandbox went too
