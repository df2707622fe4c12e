"""What came after the failure, what came before it, and what a shared file's story says.

The operator's sequences, with real processes and a real health check that
fails while decode's live environment has BAD set: a common.env sourced by
prefill and decode, a kept server.toml, records a moment apart, then

- a real change before the failure and an edit of common.env after it: the
  later edit cannot have caused the failure, so it ranks below every change
  that could have, listed all the same, and a restart that came before the
  edit is no evidence of it;
- common.env edited while prefill is stopped: each service's part of the
  label is said once, identical parts merged;
- BAD set to one value before the failure and to another after it: the story
  tells both values with their times and sits at the first one's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import run_drift
from test_shared_stories import _deploy

from drift.demo import IncidentSandbox
from drift.timespec import clock, parse_stored_time, to_us

NOT_APPLIED = "not applied yet: takes effect on next restart"


def deploy(box: IncidentSandbox) -> tuple[list[str], Path, Path]:
    """common.env sourced by prefill and decode, a kept server.toml (`_deploy`), and a health
    check failing while decode's process has BAD. The drift options, the two files."""
    common, config = _deploy(box)
    check = box.root / "decode-healthy.sh"
    check.write_text(
        "#!/bin/sh\n"
        f"pid=$(cat {box.pidfile('decode')})\n"
        "! tr '\\0' '\\n' < /proc/$pid/environ | grep -q '^BAD='\n"
    )
    check.chmod(0o755)
    with box.config_path.open("a") as fh:
        fh.write(f'\n[[health]]\nname = "decode-healthy"\nrun = "{check}"\ntimeout = 5\n')
    return ["--config", str(box.config_path), "--db", str(box.db_path)], common, config


def record(cfg: list[str], tmp_path: Path) -> None:
    run_drift(["record", *cfg], tmp_path)
    time.sleep(1.1)  # the next step a moment later, as a person at a terminal


def restart(box: IncidentSandbox, name: str) -> int:
    box.stop(name)
    return box.start(name)


def set_bad(box: IncidentSandbox, value: str) -> None:
    """BAD in decode.sh, just before its pidfile line, set to `value`."""
    script = box.script("decode")
    lines = [line for line in script.read_text().splitlines() if not line.startswith("export BAD=")]
    at = next(i for i, line in enumerate(lines) if line.startswith("echo $$"))
    lines.insert(at, f"export BAD={value}")
    script.write_text("\n".join(lines) + "\n")


def since(cfg: list[str], tmp_path: Path) -> dict:
    out = run_drift(["since", "--all", "--format", "json", *cfg], tmp_path)
    return json.loads(out.stdout)["data"]


def story_of(suspects: list[dict], subject: str, key: str) -> dict:
    (found,) = [
        s for s in suspects if any((c["subject"], c["key"]) == (subject, key) for c in s["changes"])
    ]
    return found


def test_an_edit_after_the_failure_ranks_below_every_possible_cause(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    cfg, common, config = deploy(sandbox)
    record(cfg, tmp_path)
    record(cfg, tmp_path)
    # The break: server.toml edited, BAD added to decode.sh, decode restarted.
    config.write_text(config.read_text().replace('"lpm"', '"fcfs"'))
    set_bad(sandbox, "kernel_v2")
    restart(sandbox, "decode")
    record(cfg, tmp_path)  # the first unhealthy record
    # After it: common.env edited, prefill restarted to take it; decode is not.
    common.write_text(common.read_text() + "export NCCL_ALGO=ring\n")
    prefill = restart(sandbox, "prefill")
    record(cfg, tmp_path)

    data = since(cfg, tmp_path)
    assert data["baseline"]["source"] == "health"
    suspects = data["suspects"]
    late = story_of(suspects, f"script:{common}", "content")
    assert late["status"] == "live"
    assert any("cannot have caused it" in r for r in late["reasons"]), late["reasons"]
    # Below every suspect that could have caused it (the two edits before the failure
    # among them), listed all the same, and the reasons say why.
    possible = [s for s in suspects if not any("cannot have caused" in r for r in s["reasons"])]
    assert story_of(possible, f"file:{config}", "content")
    assert story_of(possible, f"script:{sandbox.script('decode')}", "export:BAD")
    assert all(s["rank"] < late["rank"] for s in possible), [
        (s["rank"], s["score"], s["title"]) for s in suspects
    ]
    assert all(s["score"] > late["score"] for s in possible), [
        (s["score"], s["title"]) for s in suspects
    ]
    assert any("ranks below every change that could have" in r for r in late["reasons"])
    # Only prefill's restart took the edit; decode's came before it and did not.
    assert [r["service"] for r in late["restarts"]] == ["prefill"], late["restarts"]
    assert late["restarts"][0]["after_pid"] == str(prefill)

    text = run_drift(["since", "--all", *cfg], tmp_path).stdout
    block = text.split(f"\n {late['rank']}. ")[1].split("\n\n")[0]
    assert "restart of decode" not in block, block


def test_a_shared_file_edited_while_one_reader_is_stopped_says_each_service_once(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    cfg, common, _config = deploy(sandbox)
    record(cfg, tmp_path)
    record(cfg, tmp_path)
    common.write_text(common.read_text() + "export NCCL_ALGO=ring\n")
    sandbox.stop("prefill")
    record(cfg, tmp_path)

    suspects = run_drift(
        ["since", "--stable", "#2", "--all", "--format", "json", *cfg], tmp_path
    ).stdout
    shared = story_of(json.loads(suspects)["data"]["suspects"], f"script:{common}", "content")
    assert shared["status"] == "pending"
    label = shared["label"]
    assert label == f"decode and prefill: {NOT_APPLIED} (prefill is not running)", label
    assert label.count(NOT_APPLIED) == 1


def test_a_knob_set_twice_tells_both_values_and_sits_at_the_first(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    cfg, _common, _config = deploy(sandbox)
    record(cfg, tmp_path)
    record(cfg, tmp_path)
    set_bad(sandbox, "kernel_v2")
    restart(sandbox, "decode")
    record(cfg, tmp_path)  # the first unhealthy record: kernel_v2 live
    set_bad(sandbox, "kernel_v3")
    restart(sandbox, "decode")
    record(cfg, tmp_path)  # kernel_v3 live

    data = since(cfg, tmp_path)
    first = data["baseline"]["unhealthy_at"]
    assert first is not None
    first_us = to_us(parse_stored_time(first))  # type: ignore[arg-type]
    story = story_of(data["suspects"], f"script:{sandbox.script('decode')}", "export:BAD")
    (env,) = [c for c in story["changes"] if c["key"] == "env:BAD"]
    second_us = to_us(parse_stored_time(env["changed_at"]))  # type: ignore[arg-type]
    assert second_us > first_us
    told = f"kernel_v2 at {clock(first_us)}, then kernel_v3 at {clock(second_us)}"
    assert told in story["title"], story["title"]
    assert not story["title"].startswith("export BAD=kernel_v3 added"), story["title"]
    assert story["rank"] == 1
    root = story["changes"][0]
    assert root["role"] == "root" and root["changed_at"] == first
    # On the timeline it sits at kernel_v2's time, with the first failing check.
    (entry,) = [e for e in data["timeline"] if e["text"].startswith(f"#{story['rank']} ")]
    assert entry["at"] == first, (entry, data["timeline"])

    text = run_drift(["since", *cfg], tmp_path).stdout
    assert told in text
    report = tmp_path / "r.html"
    run_drift(["report", "-o", str(report), *cfg], tmp_path)
    assert told in report.read_text()
