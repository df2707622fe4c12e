"""The motivating incident, replayed end to end with real processes, git and SQLite.

A baseline is recorded; one export line is added to the decode serve script;
a kernel file is touched but not changed; all three services are restarted.
`drift since` must show the new variable with its script line and live pid,
the kernel file and git HEAD as verified unchanged, and no secret anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_drift

from drift.demo import CULPRIT, DEMO_TOKEN


def test_since_points_at_the_export_line_and_clears_the_kernel(sandbox, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    first = run_drift(["record", *cfg], tmp_path).stdout
    assert first.startswith("snapshot #1: ")
    run_drift(["record", *cfg], tmp_path)  # the stable morning: #2

    line = sandbox.add_culprit()
    sandbox.touch_kernel()
    sandbox.restart_all()
    decode_pid = sandbox.pid("decode")
    assert "changed" in run_drift(["record", *cfg], tmp_path).stdout

    text = run_drift(["since", "--stable", "#2", *cfg], tmp_path).stdout
    data = json.loads(
        run_drift(["since", "--stable", "#2", "--format", "json", *cfg], tmp_path).stdout
    )
    assert data["drift_result_version"] == 1 and data["command"] == "since"
    suspects = data["data"]["suspects"]
    decode_sh = str(sandbox.script("decode"))

    top = suspects[0]
    assert (top["subject"], top["key"], top["kind"]) == (
        f"script:{decode_sh}",
        "export:SGLANG_SM120_MMA_TARGET_CTAS",
        "added",
    )
    assert top["after"] == "512"
    assert top["provenance"]["line"] == line
    assert top["provenance"]["text"] == CULPRIT
    live = next(
        s
        for s in suspects
        if s["subject"] == "service:decode" and s["key"] == "env:SGLANG_SM120_MMA_TARGET_CTAS"
    )
    assert live["after"] == "512" and live["provenance"]["pid"] == decode_pid
    # only decode's environment gained the variable
    assert not any(
        s["key"] == "env:SGLANG_SM120_MMA_TARGET_CTAS" and s["subject"] != "service:decode"
        for s in suspects
    )

    unchanged = data["data"]["unchanged"]
    kernel = f"file:{sandbox.kernel}"
    repo = f"repo:{sandbox.repo}"
    assert kernel in unchanged["subjects"] and repo in unchanged["subjects"]
    assert not any(s["subject"] == kernel for s in suspects)
    assert any(f["subject"] == repo and f["key"] == "head" for f in unchanged["facts"])
    assert data["data"]["blind_spots"] == []

    assert f"{decode_sh}:{line}" in text and CULPRIT in text
    assert f"= {kernel}" in text and f"= {repo}" in text
    assert text.index("export:SGLANG_SM120_MMA_TARGET_CTAS") < text.index("Verified unchanged")

    # The demo's HF_TOKEN is in every script and every live environment: it must
    # not surface in the terminal, the JSON or the database file's bytes.
    assert DEMO_TOKEN not in text
    assert DEMO_TOKEN not in json.dumps(data)
    stored = b"".join(p.read_bytes() for p in sandbox.db_path.parent.glob("drift.db*"))
    assert DEMO_TOKEN.encode() not in stored
    token = next(
        s
        for s in run_drift(
            ["show", "HF_TOKEN", "--format", "json", *cfg], tmp_path
        ).stdout.splitlines()
        if "HF_TOKEN" in s
    )
    assert DEMO_TOKEN not in token


def test_history_tells_every_value_with_its_source(sandbox, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    sandbox.add_culprit()
    sandbox.restart_all()
    run_drift(["record", *cfg], tmp_path)
    data = json.loads(
        run_drift(
            ["history", "SGLANG_SM120_MMA_TARGET_CTAS", "--format", "json", *cfg], tmp_path
        ).stdout
    )["data"]
    subjects = {(f["subject"], f["key"]) for f in data["facts"]}
    assert subjects == {
        (f"script:{sandbox.script('decode')}", "export:SGLANG_SM120_MMA_TARGET_CTAS"),
        ("service:decode", "env:SGLANG_SM120_MMA_TARGET_CTAS"),
    }
    for fact in data["facts"]:
        (only,) = fact["versions"]
        assert only["from_snapshot"] == 2 and only["until"] is None
    text = run_drift(["history", "SGLANG_SM120_MMA_TARGET_CTAS", *cfg], tmp_path).stdout
    assert CULPRIT in text and "until now" in text
