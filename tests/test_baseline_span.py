"""The two snapshots a report compares: never a false all-clear, and times read as they were meant.

A baseline after the last record (a time in the future, or after recording
stopped) used to compare the latest snapshot with itself and print "No change
since the baseline"; a clock stepped back left a baseline later than the
current snapshot without a word. Histories here are written with chosen times,
as a real clock would have stamped them, and read by the real `drift`.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import DRIFT, drift_env, run_drift

from drift.facts import Fact
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter, now_us

HOST = "span"
SECOND = 1_000_000


def write(db: Path, taken_us: int, value: str) -> int:
    """One snapshot of one command's output, stamped `taken_us`."""
    writer = HistoryWriter.open(resolve_db_url(str(db)))
    try:
        facts = [Fact("command:knob", "stdout", value, {"run": "cat knob"})]
        return writer.write_snapshot(HOST, taken_us, facts, [], {}).snapshot_id
    finally:
        writer.close()


def drift(
    args: list[str], tmp_path: Path, db: Path, tz: str = "UTC"
) -> subprocess.CompletedProcess[str]:
    env = {**drift_env(tmp_path), "TZ": tz}
    return subprocess.run(
        [DRIFT, *args, "--db", str(db), "--host", HOST],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )


def refused(result: subprocess.CompletedProcess[str], *phrases: str) -> str:
    """Exit 2, nothing on stdout, one line on stderr holding every phrase."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("drift: ") and result.stderr.count("\n") == 1, result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr
    return result.stderr


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """Three records a minute apart, ending a minute ago; the knob changes at the third."""
    db = tmp_path / "d.db"
    start = now_us() - 3 * 60 * SECOND
    for i, value in enumerate(["256", "256", "512"]):
        write(db, start + i * 60 * SECOND, value)
    return db


@pytest.mark.parametrize(
    "args",
    [
        ["since", "--stable", "2030-01-01T00:00"],
        ["report", "--stable", "2030-01-01T00:00", "-o", "r.md"],
        ["diff", "2030-01-01T00:00", "2030-01-02T00:00"],
    ],
)
def test_a_baseline_in_the_future_is_refused_not_an_all_clear(
    tmp_path: Path, history: Path, args: list[str]
) -> None:
    refused(drift(args, tmp_path, history), "2030-01-01T00:00", "in the future", "snapshot #3")
    assert not (tmp_path / "r.md").exists()


def test_a_baseline_after_the_last_record_is_refused(tmp_path: Path, history: Path) -> None:
    # Recording stopped a minute ago: "30s ago" has nothing recorded after it.
    refused(
        drift(["since", "--stable", "30s ago"], tmp_path, history),
        "--stable 30s ago (",
        "is after the latest record (snapshot #3, ",
        "nothing was recorded after it",
    )


@pytest.mark.parametrize(
    ("args", "phrases"),
    [
        (
            ["since", "--stable", "150s ago", "--until", "170s ago"],
            ["--until 170s ago (", "is before --stable 150s ago ("],
        ),
        (["since", "--stable", "#3", "--until", "#2"], ["--until #2 is snapshot #2, before"]),
        (
            ["report", "--stable", "#3", "--until", "150s ago", "-o", "r.md"],
            ["--until 150s ago (", "before --stable #3, snapshot #3"],
        ),
        (["diff", "#3", "#1"], ["the second WHEN #1 is snapshot #1, before the first WHEN #3"]),
        (
            ["since", "--stable", "150s ago", "--until", "140s ago"],
            ["nothing was recorded between --stable 150s ago (", "and --until 140s ago ("],
        ),
    ],
)
def test_until_before_stable_is_refused_in_every_command(
    tmp_path: Path, history: Path, args: list[str], phrases: list[str]
) -> None:
    refused(drift(args, tmp_path, history), *phrases)
    assert not (tmp_path / "r.md").exists()


def test_a_real_window_still_reports(tmp_path: Path, history: Path) -> None:
    out = drift(["since", "--stable", "150s ago"], tmp_path, history)
    assert out.returncode == 0, out.stderr
    assert "baseline  #1 " in out.stdout and "command knob: output modified" in out.stdout


def _noon_zone(now: datetime) -> str:
    """An Etc/GMT zone where it is about noon now, so no time here is near midnight."""
    offset = 12 - now.hour  # hours east of UTC: -11 .. +12
    return f"Etc/GMT{'-' if offset > 0 else '+'}{abs(offset)}" if offset else "UTC"


def test_a_time_of_day_read_as_yesterday_says_so(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    tz = _noon_zone(now)
    db = tmp_path / "d.db"
    day = 24 * 3600 * SECOND
    # Yesterday at noon and 14:00 local, then a minute ago; the knob changed at the last.
    write(db, now_us() - day, "256")
    write(db, now_us() - day + 2 * 3600 * SECOND, "256")
    write(db, now_us() - 60 * SECOND, "512")
    later = (now + timedelta(hours=1)).astimezone(_zone(tz)).strftime("%H:%M")
    out = drift(["since", "--stable", later], tmp_path, db, tz)
    assert out.returncode == 0, out.stderr
    header = out.stdout.split("\n\n")[0]
    assert f"(given with --stable {later}, read as yesterday {later})" in header
    assert "baseline  #1 " in header

    # A history that began a minute ago: the error says which day the time was read as.
    recent = tmp_path / "recent.db"
    write(recent, now_us() - 60 * SECOND, "256")
    write(recent, now_us() - 30 * SECOND, "512")
    yesterday = (now - timedelta(days=1)).astimezone(_zone(tz)).date().isoformat()
    refused(
        drift(["since", "--stable", later], tmp_path, recent, tz),
        f"--stable {later} (read as yesterday {later}, {yesterday} ",
        "is before the first record",
    )


def _zone(name: str):  # noqa: ANN202 - a tzinfo
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def test_a_clock_stepped_back_is_a_warning_in_the_header_and_the_trust_line(
    tmp_path: Path,
) -> None:
    db = tmp_path / "d.db"
    t = now_us() - 2 * 3600 * SECOND
    write(db, t, "256")
    write(db, t + 60 * SECOND, "256")
    # NTP steps the clock back an hour: the next records are stamped before #2.
    write(db, t - 3600 * SECOND, "512")
    write(db, t - 3540 * SECOND, "512")

    text = drift(["since", "--stable", "#2", "--until", "#3"], tmp_path, db)
    assert text.returncode == 0, text.stderr
    header = text.stdout.split("\n\n")[0]
    assert "clock went back 1 time" in header.split("trust", 1)[1].splitlines()[0]
    assert (
        "warning   the clock went back: snapshot #3 was taken at " in header
        and "1h 01m before #2 (" in header
    )
    assert "command knob: output modified" in text.stdout  # the report itself still stands

    # Markdown escapes `#3` so that it cannot link an issue when pasted.
    for fmt, number in (("md", "\\#3"), ("html", "#3")):
        report = drift(["since", "--stable", "#1", "--format", fmt], tmp_path, db)
        assert f"the clock went back: snapshot {number} was taken at " in report.stdout
    data = json.loads(drift(["since", "--stable", "#1", "--format", "json"], tmp_path, db).stdout)
    assert data["data"]["trust"]["clock_steps"] == 1

    # After the step, times are in order again: no warning.
    calm = drift(["since", "--stable", "#3", "--until", "#4"], tmp_path, db)
    assert "warning" not in calm.stdout and "clock went back" not in calm.stdout


def test_the_diff_header_says_how_its_times_were_given(tmp_path: Path, history: Path) -> None:
    out = drift(["diff", "#1", "#3"], tmp_path, history).stdout
    assert "(given as the first WHEN: #1)" in out and "(given as the second WHEN: #3)" in out
    assert "--stable" not in out
    since = drift(["since", "--stable", "#1"], tmp_path, history).stdout
    assert "(given with --stable #1)" in since


def test_a_stable_mark_after_recording_stopped_is_no_all_clear(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    write(db, now_us() - 120 * SECOND, "256")
    write(db, now_us() - 60 * SECOND, "512")
    # Marked stable after the last record, then nothing was recorded (cron broke).
    run_drift(["mark", "stable", "--db", str(db), "--host", HOST], tmp_path)
    refused(
        drift(["since"], tmp_path, db),
        "the baseline (stable mark at ",
        "is after the latest record (snapshot #2, ",
    )
    assert os.path.exists(db)
