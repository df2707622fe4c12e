"""The motivating incident, replayed end to end with real processes, git and SQLite.

A baseline is recorded; one export line is added to the decode serve script;
a kernel file is touched but not changed; all three services are restarted.
`drift since` must show the new variable with its script line and live pid,
the kernel file and git HEAD as verified unchanged, and no secret anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import changes_by_fact, run_drift

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
        run_drift(["since", "--stable", "#2", "--all", "--format", "json", *cfg], tmp_path).stdout
    )
    assert data["drift_result_version"] == 1 and data["command"] == "since"
    suspects = data["data"]["suspects"]
    decode_sh = str(sandbox.script("decode"))

    # Rank 1 is the export line, live in the restarted decode process.
    top = suspects[0]
    assert top["rank"] == 1 and top["status"] == "live"
    root = top["changes"][0]
    assert (root["subject"], root["key"], root["kind"], root["role"]) == (
        f"script:{decode_sh}",
        "export:SGLANG_SM120_MMA_TARGET_CTAS",
        "added",
        "root",
    )
    assert root["after"] == "512"
    assert root["provenance"]["line"] == line
    assert root["provenance"]["text"] == CULPRIT
    assert f"{decode_sh}:{line}" in top["title"]
    live = changes_by_fact(data["data"])[("service:decode", "env:SGLANG_SM120_MMA_TARGET_CTAS")]
    assert live["suspect"]["rank"] == 1 and live["role"] == "evidence"
    assert live["after"] == "512" and live["provenance"]["pid"] == decode_pid
    assert top["reasons"] and 0 <= top["score"] <= 1
    # only decode's environment gained the variable
    assert not any(
        c["key"] == "env:SGLANG_SM120_MMA_TARGET_CTAS" and c["subject"] != "service:decode"
        for s in suspects
        for c in s["changes"]
    )
    # the churning command ranks below every config change; restarts are never suspects
    command = next(s for s in suspects if s["changes"][0]["subject"] == "command:loadavg")
    assert all(s["rank"] < command["rank"] for s in suspects if s["category"] != "command")
    assert not any(s["changes"][0]["key"] in ("pid", "started_at") for s in suspects)
    assert {r["service"] for r in top["restarts"]} == {"decode"}
    restarts = [t for t in data["data"]["timeline"] if t["kind"] == "restart"]
    assert len(restarts) == 1 and "co-restart of" in restarts[0]["text"]

    unchanged = data["data"]["unchanged"]
    kernel = f"file:{sandbox.kernel}"
    repo = f"repo:{sandbox.repo}"
    assert kernel in unchanged["subjects"] and repo in unchanged["subjects"]
    assert not any(c["subject"] == kernel for s in suspects for c in s["changes"])
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


def test_an_edit_without_restart_is_pending_not_live(sandbox, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)
    sandbox.add_culprit()  # edited, but nobody restarted decode
    run_drift(["record", *cfg], tmp_path)
    data = json.loads(
        run_drift(["since", "--stable", "#2", "--all", "--format", "json", *cfg], tmp_path).stdout
    )["data"]
    by_fact = changes_by_fact(data)
    export = by_fact[(f"script:{sandbox.script('decode')}", "export:SGLANG_SM120_MMA_TARGET_CTAS")]
    story = export["suspect"]
    assert story["status"] == "pending"
    assert "not applied yet: takes effect on next restart" in story["label"]
    assert ("service:decode", "env:SGLANG_SM120_MMA_TARGET_CTAS") not in by_fact
    text = run_drift(["since", "--stable", "#2", *cfg], tmp_path).stdout
    assert "not applied yet" in text


def test_report_options_filter_explain_and_list_digests(sandbox, tmp_path: Path) -> None:
    import hashlib

    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    line = sandbox.add_culprit()
    sandbox.restart_all()
    run_drift(["record", *cfg], tmp_path)

    top1 = run_drift(["since", "--stable", "#1", "--top", "1", *cfg], tmp_path).stdout
    assert "Suspects (1 of 2" in top1 and "--all shows every one" in top1
    suspects = top1.split("Timeline")[0]
    assert f"decode.sh:{line}" in suspects and "command loadavg" not in suspects
    assert "\x1b[" not in top1  # piped: no colour

    router = run_drift(["since", "--stable", "#1", "--service", "router", *cfg], tmp_path).stdout
    assert "SGLANG_SM120_MMA_TARGET_CTAS" not in router.split("Timeline")[0]

    explained = run_drift(["since", "--stable", "#1", "--explain", *cfg], tmp_path).stdout
    assert "score = liveness" in explained

    kernel_sha = hashlib.sha256(sandbox.kernel.read_bytes()).hexdigest()
    digests = run_drift(["since", "--stable", "#1", "--digests", *cfg], tmp_path).stdout
    assert f"{kernel_sha}  file:{sandbox.kernel}" in digests
    assert kernel_sha not in run_drift(["since", "--stable", "#1", *cfg], tmp_path).stdout

    diffed = json.loads(run_drift(["diff", "#1", "#2", "--format", "json", *cfg], tmp_path).stdout)
    assert diffed["command"] == "diff"
    assert diffed["data"]["suspects"][0]["changes"][0]["key"] == (
        "export:SGLANG_SM120_MMA_TARGET_CTAS"
    )
    assert run_drift(["diff", "#2", "#1", *cfg], tmp_path, check=False).returncode == 2


def test_a_rotated_token_is_a_change_without_either_value_anywhere(sandbox, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    new_token = "hf_" + "RotatedTokenAlsoNotRealButTokenShaped9"
    script = sandbox.script("decode")
    script.write_text(script.read_text().replace(DEMO_TOKEN, new_token))
    sandbox.restart_all()
    run_drift(["record", *cfg], tmp_path)

    outputs = [
        run_drift(["since", "--stable", "#1", "--all", *flags, *cfg], tmp_path).stdout
        for flags in ([], ["--format", "json"], ["--format", "md"], ["--format", "html"])
    ]
    outputs.append(run_drift(["history", "HF_TOKEN", *cfg], tmp_path).stdout)
    stored = b"".join(p.read_bytes() for p in sandbox.db_path.parent.glob("drift.db*"))
    for token in (DEMO_TOKEN, new_token):
        assert all(token not in out for out in outputs)
        assert token.encode() not in stored
    data = json.loads(outputs[1])["data"]
    rotated = changes_by_fact(data)[(f"script:{script}", "export:HF_TOKEN")]
    assert rotated["kind"] == "modified" and rotated["secret"] is True
    assert rotated["before"] != rotated["after"]  # changed, shown as two different digests
    assert "[redacted" in outputs[0]


def test_a_secret_reads_as_one_marker_in_show_history_titles_and_diffs(
    sandbox, tmp_path: Path
) -> None:
    import re

    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    script = sandbox.script("decode")
    script.write_text(script.read_text().replace(DEMO_TOKEN, "hf_" + "OtherTokenNotRealEither77"))
    run_drift(["record", *cfg], tmp_path)

    marker = re.compile(r"\[redacted:[0-9a-f]{8}\]")
    shown = run_drift(["show", "--at", "#1", "HF_TOKEN", *cfg], tmp_path).stdout
    (old,) = set(marker.findall(shown))  # one token, one marker, in value and source line
    new_show = run_drift(["show", f"script:{script} export:HF_TOKEN", *cfg], tmp_path).stdout
    (new,) = set(marker.findall(new_show))
    assert new != old

    since = run_drift(["since", "--stable", "#1", "--all", *cfg], tmp_path).stdout
    title = next(line for line in since.splitlines() if "export HF_TOKEN=" in line)
    assert f"export HF_TOKEN={new}" in title and f"(was {old})" in title
    assert f"-export HF_TOKEN={old}" in since and f"+export HF_TOKEN={new}" in since
    history = run_drift(["history", "HF_TOKEN", *cfg], tmp_path).stdout
    assert f"= {old}" in history and f"= {new}" in history
    for out in (shown, new_show, since, history):
        assert "[redacted " not in out and "[redacted]" not in out
