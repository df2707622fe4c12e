"""A record sees a change, not the moment it happened: the file's own times narrow that.

The operator's sequence: a record, an edit of decode.sh, a restart of decode a second
later, a record. The records alone cannot order the edit and the restart (both lie
between the two records); the script's mtime and ctime, kept by the record that saw the
new bytes, can, where they lie inside that interval. A time set by hand (``touch -d``)
is not believed, and a touch with the same bytes is no change.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_drift

from drift.timespec import clock


def _cfg(box: Any) -> list[str]:
    return ["--config", str(box.config_path), "--db", str(box.db_path)]


def _edit_then_restart(box: Any, tmp_path: Path, set_mtime: float | None = None) -> None:
    """record; edit decode.sh (optionally setting its mtime); restart decode; record."""
    run_drift(["record", *_cfg(box)], tmp_path)
    time.sleep(1.1)
    box.add_culprit()
    if set_mtime is not None:
        os.utime(box.script("decode"), (set_mtime, set_mtime))
    time.sleep(1.1)
    box.stop("decode")
    box.start("decode")
    time.sleep(1.1)
    run_drift(["record", *_cfg(box)], tmp_path)


def _since(box: Any, tmp_path: Path, fmt: str = "json") -> str:
    return run_drift(["since", "--stable", "#1", "--format", fmt, *_cfg(box)], tmp_path).stdout


def _culprit(data: dict[str, Any]) -> dict[str, Any]:
    return next(
        s
        for s in data["suspects"]
        if any(c["key"] == "export:SGLANG_SM120_MMA_TARGET_CTAS" for c in s["changes"])
    )


def test_the_edit_is_placed_at_its_file_time_before_the_restart_it_caused(
    sandbox: Any, tmp_path: Path
) -> None:
    _edit_then_restart(sandbox, tmp_path)
    written = os.stat(sandbox.script("decode")).st_mtime_ns // 1000

    data = json.loads(_since(sandbox, tmp_path))["data"]
    story = _culprit(data)
    seen = clock(_us(story["changes"][0]["changed_at"]))
    assert story["status"] == "live"
    assert "started after the edit (file time)" in story["label"]

    timeline = data["timeline"]
    (edit,) = [t for t in timeline if t["kind"] == "change" and "SGLANG_SM120" in t["text"]]
    (restart,) = [t for t in timeline if t["kind"] == "restart"]
    assert f"edited at about {clock(written)} (file time), seen at {seen}" in edit["text"]
    assert edit["at"] < restart["at"] and timeline.index(edit) < timeline.index(restart)
    assert restart["text"].startswith("restart of decode (")
    rank = story["rank"]
    assert restart["text"].endswith(f", started after the edit #{rank} (file time)")

    for fmt in ("text", "md", "html"):
        shown = _since(sandbox, tmp_path, fmt)
        assert f"edited at about {clock(written)} (file time), seen at {seen}" in shown, fmt
        assert shown.index("edited at about") < shown.index("restart of decode ("), fmt


def test_a_watched_file_edited_before_a_restart_says_the_services_started_after_it(
    sandbox: Any, tmp_path: Path
) -> None:
    run_drift(["record", *_cfg(sandbox)], tmp_path)
    time.sleep(1.1)
    sandbox.kernel.write_text(sandbox.kernel.read_text() + "BLOCK = 128\n")
    written = os.stat(sandbox.kernel).st_mtime_ns // 1000
    time.sleep(1.1)
    sandbox.restart_all()
    time.sleep(1.1)
    run_drift(["record", *_cfg(sandbox)], tmp_path)

    data = json.loads(_since(sandbox, tmp_path))["data"]
    (story,) = [
        s for s in data["suspects"] if s["changes"][0]["subject"] == f"file:{sandbox.kernel}"
    ]
    assert story["status"] == "on-disk"
    assert story["label"].endswith("; decode, prefill, router started after it (file time)")
    (edit,) = [t for t in data["timeline"] if t["text"].startswith(f"#{story['rank']} ")]
    assert f"edited at about {clock(written)} (file time)" in edit["text"]
    (restart,) = [t for t in data["timeline"] if t["kind"] == "restart"]
    assert edit["at"] < restart["at"]


@pytest.mark.parametrize("moved", [3600.0, -3600.0], ids=["future", "past"])
def test_a_file_time_set_by_hand_is_not_believed(
    sandbox: Any, tmp_path: Path, moved: float
) -> None:
    """``touch -d`` an hour away: the records' interval is all drift knows."""
    _edit_then_restart(sandbox, tmp_path, set_mtime=time.time() + moved)

    data = json.loads(_since(sandbox, tmp_path))["data"]
    story = _culprit(data)
    assert "file time" not in story["label"]
    (edit,) = [t for t in data["timeline"] if "SGLANG_SM120" in t["text"]]
    (restart,) = [t for t in data["timeline"] if t["kind"] == "restart"]
    assert edit["at"] == story["changes"][0]["changed_at"] and edit["at"] > restart["at"]
    for fmt in ("text", "md", "html", "json"):
        assert "file time" not in _since(sandbox, tmp_path, fmt), fmt


def test_a_touch_with_the_same_bytes_is_no_change(sandbox: Any, tmp_path: Path) -> None:
    run_drift(["record", *_cfg(sandbox)], tmp_path)
    time.sleep(1.1)
    os.utime(sandbox.script("decode"))
    sandbox.touch_kernel()
    run_drift(["record", *_cfg(sandbox)], tmp_path)

    data = json.loads(_since(sandbox, tmp_path))["data"]
    subjects = {c["subject"] for s in data["suspects"] for c in s["changes"]}
    assert f"script:{sandbox.script('decode')}" not in subjects
    assert f"file:{sandbox.kernel}" not in subjects
    assert "file time" not in _since(sandbox, tmp_path, "text")


def _us(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text).timestamp() * 1_000_000)


def test_a_restart_said_to_follow_the_edit_is_listed_after_it_however_close(
    sandbox: Any, tmp_path: Path
) -> None:
    """The incident's own pace: the edit, then at once a co-restart of all three. A start is
    read to the clock tick (10 ms), so it may read a little earlier than the edit's file
    time; a restart line that says it came after the edit is listed after it all the same."""
    claims = 0
    for n in range(5):  # the tick makes it a matter of luck: give it several chances to bite
        before = run_drift(["record", *_cfg(sandbox)], tmp_path).stdout.split()[1].rstrip(":")
        script = sandbox.script("decode")
        script.write_text(script.read_text() + f"export TRY_{n}=1\n")
        sandbox.restart_all()
        run_drift(["record", *_cfg(sandbox)], tmp_path)
        out = run_drift(["since", "--stable", before, "--format", "json", *_cfg(sandbox)], tmp_path)
        timeline = json.loads(out.stdout)["data"]["timeline"]
        for restart in (t for t in timeline if t["kind"] == "restart"):
            for rank in re.findall(r"#(\d+)", restart["text"].partition("after the edit")[2]):
                edit = next(
                    t
                    for t in timeline
                    if t["kind"] == "change" and t["text"].startswith(f"#{rank} ")
                )
                claims += 1
                assert timeline.index(edit) < timeline.index(restart), timeline
                assert edit["at"] < restart["at"], (edit, restart)
    assert claims, "no restart was ordered after an edit by its file time"
