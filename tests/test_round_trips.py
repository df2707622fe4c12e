"""Changes that came and went inside the window, as the operator lives them.

A bad export added and picked up by a restart, health failing, then removed
and restarted away, health passing again: `drift since` and `drift report`
still name it, as a suspect of its own placed when it came and when it went.
A service stopped and started again is one timeline line, not a flap per
variable, library and package that went with its process.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import run_drift

from drift.demo import CULPRIT, IncidentSandbox

CULPRIT_KEY = "export:SGLANG_SM120_MMA_TARGET_CTAS"


def _with_health(box: IncidentSandbox) -> None:
    """A health check that fails while decode's live environment has the culprit."""
    pidfile = box.pidfile("decode")
    probe = f"! tr '\\\\0' '\\\\n' < /proc/$(cat {pidfile})/environ | grep -q ^SGLANG_SM120_MMA"
    box.config_path.write_text(
        box.config_path.read_text()
        + f'\n[[health]]\nname = "decode-answers"\nrun = "{probe}"\ntimeout = 5\n'
    )


def _drift(box: IncidentSandbox, tmp: Path, *args: str):  # type: ignore[no-untyped-def]
    return run_drift([*args, "--config", str(box.config_path), "--db", str(box.db_path)], tmp)


def _record(box: IncidentSandbox, tmp: Path) -> None:
    _drift(box, tmp, "record")
    time.sleep(1.1)


def test_a_bad_export_removed_after_the_failure_is_still_the_cause(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    _with_health(sandbox)
    _record(sandbox, tmp_path)
    _record(sandbox, tmp_path)
    sandbox.add_culprit()
    sandbox.stop("decode")
    sandbox.start("decode")
    _record(sandbox, tmp_path)  # health fails
    _record(sandbox, tmp_path)
    script = sandbox.script("decode")
    script.write_text(script.read_text().replace(CULPRIT + "\n", ""))
    sandbox.stop("decode")
    sandbox.start("decode")
    _record(sandbox, tmp_path)  # health passes again
    _record(sandbox, tmp_path)

    data = json.loads(_drift(sandbox, tmp_path, "since", "--format", "json").stdout)["data"]
    first = data["suspects"][0]
    assert any(c["key"] == CULPRIT_KEY for c in first["changes"]), [
        s["title"] for s in data["suspects"]
    ]
    assert first["status"] == "live"
    assert "then removed at" in first["title"]
    assert first["undone_at"] is not None
    assert not any("cannot have caused it" in r for r in first["reasons"])
    # Its lines are placed when it came and when it went, not at the latest record.
    current = data["current"]["time"]
    culprit_lines = [e for e in data["timeline"] if "SGLANG_SM120_MMA_TARGET_CTAS" in e["text"]]
    assert culprit_lines and all(e["at"] < current for e in culprit_lines), culprit_lines
    assert not any(e["kind"] == "flapping" for e in culprit_lines), culprit_lines
    assert any(e["at"] <= first["undone_at"] and "undone" in e["text"] for e in culprit_lines)

    report = _drift(sandbox, tmp_path, "report", "-o", str(tmp_path / "pm.html"))
    assert report.returncode == 0
    assert "then removed at" in (tmp_path / "pm.html").read_text()


def test_a_service_stopped_and_started_again_is_one_timeline_line(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    _record(sandbox, tmp_path)
    _drift(sandbox, tmp_path, "mark", "stable", "--note", "fine")
    _record(sandbox, tmp_path)
    before = sandbox.pid("prefill")
    sandbox.stop("prefill")
    _record(sandbox, tmp_path)  # prefill seen stopped
    after = sandbox.start("prefill")
    _record(sandbox, tmp_path)
    _record(sandbox, tmp_path)

    data = json.loads(_drift(sandbox, tmp_path, "since", "--format", "json").stdout)["data"]
    prefill = [e for e in data["timeline"] if "prefill" in e["text"]]
    assert len(prefill) == 1, [e["text"] for e in prefill]
    text = prefill[0]["text"]
    assert "prefill stopped at" in text and "running again since" in text, text
    assert f"pid {before} -> {after}" in text and "its values as before" in text, text
    assert prefill[0]["at"] < data["current"]["time"]
    assert not any(e["kind"] == "flapping" for e in data["timeline"]), data["timeline"]
    # None of the facts that went with the process is a suspect of its own.
    assert not any("prefill" in s["title"] for s in data["suspects"])
    text_out = _drift(sandbox, tmp_path, "since").stdout
    assert "changed 1 time" not in text_out
