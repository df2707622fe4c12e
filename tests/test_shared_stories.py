"""One edit is one suspect: a file several services read, a config file's key, a script's lines.

The operator's sequence with real processes: an env file sourced by the
prefill and decode serve scripts, a kept TOML config, a record; then a line
added to the env file, a value changed in decode.sh (and a flag on its exec
line), the config's key edited, one or both services restarted, a record,
and `drift since`. Each edit must be one story with one status, no two
suspects may share a title, and a text's diff must sit under the story of
the file that changed, each story showing its own hunk.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from conftest import run_drift
from hypothesis import given
from hypothesis import strategies as st

from drift.analysis.story import combined

NEVER_TOGETHER = ("whether a running process loaded it is not recorded", "not applied yet")


def _deploy(sandbox) -> tuple[Path, Path]:
    """common.env sourced by prefill and decode, and a kept TOML config; then all start."""
    serve = sandbox.root / "serve"
    common = serve / "common.env"
    common.write_text("export MODEL=deepseek\nexport A=1\nexport B=2\nexport C=3\n")
    sandbox.stop_all()
    for name in ("prefill", "decode"):
        lines = sandbox.script(name).read_text().splitlines()
        lines[3:3] = [f"source {common}", "export MEM=0.85"]
        sandbox.script(name).write_text("\n".join(lines) + "\n")
    config = sandbox.root / "server.toml"
    config.write_text('[scheduler]\nschedule_policy = "lpm"\nmax_running = 4\n')
    with sandbox.config_path.open("a") as fh:
        fh.write(
            f'\n[[files]]\nname = "server-config"\npaths = ["{config}"]\n'
            'content = true\nformat = "toml"\n'
        )
    sandbox.start_all()
    return common, config


def _since(sandbox, tmp_path: Path) -> list[dict]:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    out = run_drift(["since", "--stable", "#1", "--all", "--format", "json", *cfg], tmp_path)
    return json.loads(out.stdout)["data"]["suspects"]


def _record(sandbox, tmp_path: Path) -> None:
    run_drift(
        ["record", "--config", str(sandbox.config_path), "--db", str(sandbox.db_path)], tmp_path
    )


def _one_story_each(suspects: list[dict]) -> None:
    """No two titles alike, every change in one story, never two statuses for one edit."""
    titles = [s["title"] for s in suspects]
    assert len(titles) == len(set(titles)), titles
    facts = [(c["subject"], c["key"]) for s in suspects for c in s["changes"]]
    assert len(facts) == len(set(facts)), facts
    for s in suspects:
        assert not all(words in s["label"] for words in NEVER_TOGETHER), s["label"]


def _story_of(suspects: list[dict], subject: str, key: str) -> dict:
    (found,) = [
        s for s in suspects for c in s["changes"] if (c["subject"], c["key"]) == (subject, key)
    ]
    return found


@pytest.mark.parametrize("restarted", ["none", "decode", "both"])
def test_a_line_in_a_shared_env_file_is_one_story_naming_both_services(
    sandbox, tmp_path: Path, restarted: str
) -> None:
    common, config = _deploy(sandbox)
    _record(sandbox, tmp_path)
    time.sleep(1.1)

    common.write_text(common.read_text() + "export NCCL_ALGO=ring\n")
    decode = sandbox.script("decode")
    decode.write_text(
        decode.read_text()
        .replace("MEM=0.85", "MEM=0.80")
        .replace("--cuda-graph-max-bs 96", "--cuda-graph-max-bs 128")
    )
    config.write_text(config.read_text().replace('"lpm"', '"fcfs"'))
    if restarted == "decode":
        sandbox.stop("decode")
        sandbox.start("decode")
    elif restarted == "both":
        sandbox.restart_all()
    time.sleep(1.1)
    _record(sandbox, tmp_path)

    suspects = _since(sandbox, tmp_path)
    _one_story_each(suspects)
    decode_sh, prefill_sh = f"script:{decode}", f"script:{sandbox.script('prefill')}"

    # The env file's line: one story for both scripts, titled by the line and its readers.
    shared = _story_of(suspects, decode_sh, "export:NCCL_ALGO")
    assert shared is _story_of(suspects, prefill_sh, "export:NCCL_ALGO")
    assert shared["title"] == (
        f"export NCCL_ALGO=ring added to {common}:5, read by decode and prefill"
    )
    assert shared["services"] == ["decode", "prefill"]
    assert _story_of(suspects, f"script:{common}", "content") is shared
    if restarted == "none":
        assert shared["status"] == "pending"
        assert (
            shared["label"] == "decode and prefill: not applied yet: takes effect on next restart"
        )
    elif restarted == "decode":
        assert shared["status"] == "live"
        assert shared["label"].startswith(f"live in decode (pid {sandbox.pid('decode')})")
        assert "; prefill: not applied yet: takes effect on next restart" in shared["label"]
    else:
        assert shared["status"] == "live"
        assert f"live in prefill (pid {sandbox.pid('prefill')})" in shared["label"]
        assert f"live in decode (pid {sandbox.pid('decode')})" in shared["label"]
    if restarted != "none":
        assert _story_of(suspects, "service:decode", "env:NCCL_ALGO") is shared

    # decode.sh's own edits: their stories, the text under one of them, each its own hunk.
    mem = _story_of(suspects, decode_sh, "export:MEM")
    flag = _story_of(suspects, decode_sh, "flag:--cuda-graph-max-bs")
    assert mem is not shared and flag is not shared and mem is not flag
    assert _story_of(suspects, decode_sh, "content") is mem
    assert _story_of(suspects, decode_sh, "exec") is flag
    text = next(c for c in mem["changes"] if c["key"] == "content")
    assert "+export MEM=0.80" in text["diff"]["lines"]
    assert not any("128" in line for line in text["diff"]["lines"])
    hunk = flag["changes"][0]["diff"]["lines"]
    assert any(line.startswith("+") and "--cuda-graph-max-bs 128" in line for line in hunk)
    assert not any("MEM" in line for line in hunk)
    assert not any("NCCL_ALGO" in line for line in mem["changes"][-1]["diff"]["lines"])

    # The config file's one edit: one story, one status, titled by the key that moved.
    (kept,) = [s for s in suspects if any(c["subject"] == f"file:{config}" for c in s["changes"])]
    assert kept["title"] == f'{config}: scheduler.schedule_policy "lpm" -> "fcfs"'
    assert {c["key"] for c in kept["changes"]} == {"content", "sha256", "size"}
    if restarted == "none":
        assert kept["status"] == "pending"


# ---------------------------------------------------------------- the combined label

_NAMES = ("decode", "decode-2", "prefill", "router")
_NOT_APPLIED = "not applied yet: takes effect on next restart"
_SHAPES = (
    lambda s: ("pending", _NOT_APPLIED),
    lambda s: ("pending", f"{_NOT_APPLIED} ({s} is not running)"),
    lambda s: ("pending", f"{_NOT_APPLIED} (no process recorded for {s})"),
    lambda s: ("live", f"live in {s} (pid 7)"),
    lambda s: ("failing", f"applied at every start of {s} since 12:01: {s} failed (exit 1)"),
)


@given(
    st.lists(
        st.tuples(st.sampled_from(_NAMES), st.integers(0, 4)), min_size=2, unique_by=lambda o: o[0]
    )
)
def test_a_combined_label_says_each_service_once_and_each_part_once(
    drawn: list[tuple[str, int]],
) -> None:
    outcomes = [(name, *_SHAPES[shape](name)) for name, shape in drawn]
    _status, label = combined(outcomes)  # type: ignore[arg-type]
    parts = label.split("; ")
    heads = [p.split(": ", 1)[-1] if ":" in p else p for p in parts]
    # identical parts are merged: no part said twice
    assert label.count(_NOT_APPLIED) == (1 if any(s < 3 for _n, s in drawn) else 0), label
    assert len(heads) == len(set(heads)), label
    for name, _shape in drawn:
        # every service is named, and none is named twice as a part's label
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", label), (name, label)
        assert not re.search(
            rf"(?<![\w-]){re.escape(name)}: .*(?<![\w-]){re.escape(name)}: ", label
        )


def test_a_shared_line_a_script_passes_on_through_a_default_is_one_story(
    sandbox, tmp_path: Path
) -> None:
    """decode's script re-exports the shared value with a default of its own
    (`export CTAS="${CTAS:-256}"` after `source common.env`), prefill reads common.env as it
    is. A line added to common.env is one story read by both, never a story of its own at
    decode's line, which did not change."""
    common, _config = _deploy(sandbox)
    decode = sandbox.script("decode")
    lines = decode.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("source ")) + 1
    lines[at:at] = ['export CTAS="${CTAS:-256}"']
    decode.write_text("\n".join(lines) + "\n")
    sandbox.restart_all()
    _record(sandbox, tmp_path)
    common.write_text(common.read_text() + "export CTAS=128\n")
    sandbox.restart_all()
    _record(sandbox, tmp_path)

    suspects = _since(sandbox, tmp_path)
    _one_story_each(suspects)
    story = _story_of(suspects, f"script:{decode}", "export:CTAS")
    assert story is _story_of(suspects, f"script:{sandbox.script('prefill')}", "export:CTAS")
    assert f"{common}:5" in story["title"], story["title"]
    assert "read by decode and prefill" in story["title"], story["title"]
    assert story["status"] == "live"
