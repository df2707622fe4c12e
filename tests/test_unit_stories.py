"""A unit's stories: a crash loop's cause and symptom, its settings, what drift began to record.

The states are built as the services collector writes them for a unit
(tests/test_crash_loop.py replays the same on a real systemd).
"""

from __future__ import annotations

import pytest
from test_group import MIN, NOW, T0, TARGET, States, by_root, export_added, iso

from drift.analysis.failures import Failure
from drift.analysis.group import group_changes
from drift.analysis.rank import ChurnInfo, rank_stories
from drift.timespec import clock

UNIT = {"unit": "decode.service", "fragment": "/etc/systemd/system/decode.service"}


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")


def looping(since: int, *, starts: tuple[int, ...] = (), state: str = "failing") -> Failure:
    return Failure(
        service="decode",
        since_us=since,
        last_us=max(starts or (since,)),
        failing_starts=starts or (since,),
        restarts=4,
        exit="exit 1",
        result="exit-code",
        state=state,  # type: ignore[arg-type]
        running_since_us=None,
        running_pid=None,
        journal=("2026-12-03T12:00:00.000000Z 0a1b2c3d bash[7]: CUDA error",),
    )


def crashed(s: States, pid: int = 100) -> None:
    """decode ran at the baseline; now it is between two failing runs."""
    s.moved("service:decode", "running", "true", "false", NOW - 8 * MIN)
    s.old("service:decode", "pid", str(pid), NOW - 8 * MIN, found_by="unit decode.service")
    s.old("service:decode", "env:PATH", "/usr/bin", NOW - 8 * MIN, pid=pid)
    s.moved("service:decode", "unit:active_state", "active", "activating", NOW - 8 * MIN, **UNIT)
    s.moved("service:decode", "unit:sub_state", "running", "auto-restart", NOW - 8 * MIN, **UNIT)
    s.moved("service:decode", "unit:invocation_id", "aaa", "bbb", NOW - 8 * MIN, **UNIT)
    s.moved("service:decode", "unit:n_restarts", "0", "4", NOW - 8 * MIN, **UNIT)
    s.new("service:decode", "unit:exec_main_status", "exited 1", NOW - 8 * MIN, **UNIT)
    s.same("service:decode", "unit:load_state", "loaded", **UNIT)


def test_a_change_before_the_failing_starts_is_their_cause_and_ranks_first() -> None:
    s = States()
    export_added(s, at=NOW - 10 * MIN)
    crashed(s)
    # Noise: prefill changed too, and runs with it.
    export_added(s, at=NOW - 9 * MIN, service="prefill")
    s.restart("prefill", 300, 301, NOW - 9 * MIN + 5_000_000)
    s.new("service:prefill", f"env:{TARGET}", "512", NOW - 9 * MIN, pid=301)
    failure = looping(NOW - 9 * MIN, starts=(NOW - 9 * MIN, NOW - 8 * MIN - 30_000_000))

    stories, _events = group_changes(s.changes(), s.after, failures={"decode": failure})
    ranked = rank_stories(stories, ChurnInfo({}, 10), failures=[failure])

    cause = ranked[0].story
    assert cause.root.key == f"export:{TARGET}" and cause.services == ("decode",)
    assert cause.status == "failing" and cause.failure is failure
    assert cause.label == (
        f"applied at every start of decode since {clock(NOW - 9 * MIN)}: decode crash-looping "
        f"since {clock(NOW - 9 * MIN)} (4 restarts, exit 1)"
    )
    assert "not applied yet" not in cause.label
    symptom = by_root(stories)["service:decode", "running"]
    assert (
        symptom.title == f"decode crash-looping since {clock(NOW - 9 * MIN)} (4 restarts, exit 1)"
    )
    assert symptom.status == "changed"
    order = [r.story for r in ranked]
    prefill = by_root(stories)["script:/opt/serve/prefill.sh", f"export:{TARGET}"]
    assert order.index(cause) < order.index(prefill) < order.index(symptom)
    # systemd's words on the runs are the restart's, never a story of their own.
    assert not any(st.root.key.startswith("unit:sub_state") for st in stories)


def test_a_change_after_the_failing_began_cannot_be_its_cause() -> None:
    s = States()
    crashed(s)
    export_added(s, at=NOW - 2 * MIN)  # someone tries a fix while it fails
    failure = looping(NOW - 9 * MIN, starts=(NOW - 9 * MIN, NOW - 8 * MIN))

    stories, _ = group_changes(s.changes(), s.after, failures={"decode": failure})
    ranked = rank_stories(stories, ChurnInfo({}, 10), failures=[failure])

    (edit,) = [r for r in ranked if r.story.root.key == f"export:{TARGET}"]
    assert edit.story.status == "pending" and edit.story.label.startswith("not applied yet")
    assert any("cannot have caused it" in reason for reason in edit.reasons)


def test_exec_start_is_judged_by_the_command_line_the_process_runs() -> None:
    old, new = "/usr/bin/server --tp 4", "/usr/bin/server --tp 8"
    s = States()
    s.process("decode", 100, T0)
    s.same("service:decode", "argv", '["/usr/bin/server", "--tp", "4"]', pid=100)
    s.moved("service:decode", "unit:exec_start", old, new, NOW - 5 * MIN, **UNIT)
    (story,) = group_changes(s.changes(), s.after)[0]
    assert story.status == "pending"
    assert story.label == (
        "not applied yet: takes effect on next restart; decode (pid 100) still runs with the "
        "old value"
    )

    s = States()
    s.restart("decode", 100, 200, NOW - 4 * MIN)
    s.moved(
        "service:decode",
        "argv",
        '["/usr/bin/server", "--tp", "4"]',
        '["/usr/bin/server", "--tp", "8"]',
        NOW - 4 * MIN,
        pid=200,
    )
    s.moved("service:decode", "unit:exec_start", old, new, NOW - 5 * MIN, **UNIT)
    (story,) = group_changes(s.changes(), s.after)[0]
    assert story.status == "live" and story.label.startswith("live in decode (pid 200)")


def test_a_launch_setting_is_a_story_of_its_own() -> None:
    s = States()
    s.process("decode", 100, T0)
    s.same("service:decode", "user", "root", pid=100)
    s.moved("service:decode", "unit:user", "root", "svc", NOW - 5 * MIN, **UNIT)
    s.new("service:decode", "unit:limit:MEMLOCK", "infinity", NOW - 5 * MIN, **UNIT)
    stories = by_root(group_changes(s.changes(), s.after)[0])
    user = stories["service:decode", "unit:user"]
    assert user.status == "pending" and "still runs with the old value" in user.label
    limit = stories["service:decode", "unit:limit:MEMLOCK"]
    assert limit.status == "pending" and limit.label.startswith("not applied yet")
    assert limit.title == "unit decode.service: limit:MEMLOCK added"


def test_what_drift_only_began_to_record_is_no_edit() -> None:
    """Upgraded drift records systemd's runs and more settings: they appear, nothing changed."""
    s = States()
    s.process("decode", 100, T0)
    s.same("service:decode", "unit:load_state", "loaded", **UNIT)
    first = NOW - 3 * MIN
    for key, value in (
        ("unit:sub_state", "running"),
        ("unit:invocation_id", "aaa"),
        ("unit:exec_main_start", iso(T0)),
        ("unit:user", "svc"),
        ("unit:limit:NOFILE", "65536"),
    ):
        s.new("service:decode", key, value, first, **UNIT)
    stories, events = group_changes(s.changes(), s.after)
    (story,) = stories
    assert events == []
    assert story.status == "changed"
    assert story.title.startswith(
        "decode: systemd's view of its runs and settings recorded since #"
    )
    assert story.label == "first recorded by this drift, not a change on the box"
    assert len(story.changes) == 5


def test_a_new_run_of_the_unit_is_a_restart_even_when_no_record_saw_its_process() -> None:
    s = States()
    s.same("service:decode", "running", "false", found_by="unit decode.service")
    s.same("service:decode", "unit:load_state", "loaded", **UNIT)
    s.moved("service:decode", "unit:invocation_id", "aaa", "bbb", NOW - MIN, **UNIT)
    s.moved(
        "service:decode",
        "unit:exec_main_start",
        iso(NOW - 3 * MIN),
        iso(NOW - 90_000_000),
        NOW - MIN,
        **UNIT,
    )
    s.moved("service:decode", "unit:n_restarts", "3", "4", NOW - MIN, **UNIT)
    stories, (event,) = group_changes(s.changes(), s.after)
    assert stories == []
    (restart,) = event.restarts
    assert restart.at_us == NOW - 90_000_000 and restart.after_pid is None
    assert {c.key for c in restart.changes} == {
        "unit:invocation_id",
        "unit:exec_main_start",
        "unit:n_restarts",
    }
