"""`drift mark --at WHEN` says how it read the time, and a mark made now is in `since` now.

The operator's sequence on the incident's real processes: records a moment
apart, then marks typed as an operator types them (`--at 23:59`, `2h ago`, an
ISO time a few minutes ahead), and `drift since` right after a mark, before
the next record.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import run_drift

from drift.demo import IncidentSandbox
from drift.timespec import local_zone


def drift(box: IncidentSandbox, tmp: Path, *args: str, check: bool = True):  # type: ignore[no-untyped-def]
    cfg = ["--config", str(box.config_path), "--db", str(box.db_path)]
    return run_drift([*args, *cfg], tmp, check=check)


def test_a_mark_says_how_its_time_was_read_and_when_it_marks_nothing_recorded(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    drift(sandbox, tmp_path, "record")
    drift(sandbox, tmp_path, "record")
    now = datetime.now(local_zone())
    later = now + timedelta(minutes=3)
    if later.date() != now.date():
        pytest.skip("no later minute today to be read as yesterday")
    typed = later.strftime("%H:%M")
    # A clock time later than now is read as yesterday: the mark says so, and warns that
    # no record shows that time (the history began minutes ago).
    result = drift(sandbox, tmp_path, "mark", "stable", "--at", typed)
    assert f"stable at {typed} (read as yesterday {typed}, " in result.stdout
    warning = result.stderr.splitlines()
    assert len(warning) == 1 and warning[0].startswith("drift: warning: the mark is at ")
    assert "before the first record of host gpu-node-7 (#1 at " in warning[0]
    # Before the first record by a span: the same one-line warning.
    early = drift(sandbox, tmp_path, "mark", "note", "--at", "2h ago", "--note", "x")
    assert "read as" not in early.stdout and "before the first record" in early.stderr
    # A mark inside the history: no warning, the time as it is.
    inside = drift(sandbox, tmp_path, "mark", "stable", "--at", "#2")
    assert inside.stderr == "" and "read as" not in inside.stdout
    # A future time is refused in one line (a mistyped date); within a minute is now.
    ahead = (datetime.now(UTC) + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    refused = drift(sandbox, tmp_path, "mark", "stable", "--at", ahead, check=False)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "is in the future" in refused.stderr
    soon = (datetime.now(UTC) + timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert drift(sandbox, tmp_path, "mark", "note", "--at", soon, "--note", "x").stderr == ""


def test_a_mark_made_after_the_latest_record_is_in_since_at_once(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    drift(sandbox, tmp_path, "record")
    drift(sandbox, tmp_path, "record")
    drift(sandbox, tmp_path, "mark", "stable")
    sandbox.add_culprit()
    sandbox.stop("decode")
    sandbox.start("decode")
    drift(sandbox, tmp_path, "record")
    # Seen broken after the record: the operator says so and asks at once.
    drift(sandbox, tmp_path, "mark", "note", "--note", "decode answers garbage")
    text = drift(sandbox, tmp_path, "since").stdout
    timeline = text.split("\nTimeline", 1)[1]
    assert "marked note: decode answers garbage" in timeline
    data = json.loads(drift(sandbox, tmp_path, "since", "--format", "json").stdout)["data"]
    marks = [t["text"] for t in data["timeline"] if t["kind"] == "mark"]
    assert marks[-1] == "marked note: decode answers garbage"
    # Up to a record given with --until, the timeline stops at that record.
    until = json.loads(
        drift(sandbox, tmp_path, "since", "--until", "#3", "--format", "json").stdout
    )["data"]
    assert all("garbage" not in t["text"] for t in until["timeline"])
