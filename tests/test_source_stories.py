"""Stories from systemd's sources: one per variable, named by file and line, pending or live right.

The states are built as the collectors write them (`drift.collectors.unit_sources`,
`drift.collectors.manager`); tests/test_unit_sources.py replays the same on a
real systemd, end to end.
"""

from __future__ import annotations

import pytest
from test_group import NOW, States, by_root, idents

from drift.analysis.group import group_changes
from drift.analysis.titles import NOT_APPLIED, NOT_RELOADED, SOURCE_UNKNOWN

DROPIN = "/etc/systemd/system/decode.service.d/override.conf"
ENVFILE = "/etc/serve/decode.env"
UNIT = {"unit": "decode.service"}
CONTAINER = "/proc/4242/root/"


def line(file: str, number: int, text: str, **kw: str) -> dict[str, object]:
    return {**UNIT, "file": file, "line": number, "text": text, **kw}


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")


def unit_service(s: States, *, restarted: bool) -> None:
    if restarted:
        s.restart("decode", 100, 200, NOW - 60_000_000)
    else:
        s.process("decode", 100, NOW - 3600 * 1_000_000 * 5)
    s.same("service:decode", "unit:load_state", "loaded", **UNIT)


def test_a_drop_in_value_its_text_its_files_entry_and_the_live_value_are_one_story() -> None:
    s = States()
    unit_service(s, restarted=True)
    where = line(DROPIN, 2, "Environment=X=512", root=CONTAINER)
    s.new("service:decode", "unit:environment:X", "512", **where)
    s.new("service:decode", "unit:disk_environment:X", "512", **where)
    s.new("service:decode", f"unit:file:{DROPIN}", "[Service]\nEnvironment=X=512\n", file=DROPIN)
    s.moved("service:decode", "unit:drop_ins", "", DROPIN, **UNIT)
    s.new("service:decode", "env:X", "512", pid=200)
    s.new(f"file:{CONTAINER.rstrip('/')}{DROPIN}", "sha256", "ab" * 32, glob="*.conf")

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.root.key == "unit:environment:X"
    assert story.title == f"Environment=X=512 added to {DROPIN}:2"
    assert story.status == "live"
    assert idents(story.evidence) == {
        ("service:decode", "env:X"),
        ("service:decode", "unit:disk_environment:X"),
        ("service:decode", f"unit:file:{DROPIN}"),
        ("service:decode", "unit:drop_ins"),
        (f"file:/proc/4242/root{DROPIN}", "sha256"),
    }


def test_an_edit_without_daemon_reload_is_the_pending_story_and_says_what_changed() -> None:
    s = States()
    unit_service(s, restarted=False)
    s.moved("service:decode", "unit:need_daemon_reload", "no", "yes", **UNIT)
    s.new("service:decode", "unit:disk_environment:NEW_KNOB", "1", **line(DROPIN, 3, "x"))
    s.moved("service:decode", f"unit:file:{DROPIN}", "[Service]\n", "[Service]\nx\n", file=DROPIN)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.title == (
        f"Environment=NEW_KNOB=1 added to {DROPIN}:3, not loaded: run systemctl daemon-reload"
    )
    assert (story.status, story.label) == ("pending", NOT_RELOADED)
    assert ("service:decode", "unit:need_daemon_reload") in idents(story.evidence)


def test_a_unit_file_changed_without_reload_and_no_variable_is_named_by_its_file() -> None:
    s = States()
    unit_service(s, restarted=False)
    s.moved("service:decode", "unit:need_daemon_reload", "no", "yes", **UNIT)
    s.moved("service:decode", f"unit:file:{DROPIN}", "LimitNOFILE=1", "LimitNOFILE=2", file=DROPIN)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.title == f"drop-in {DROPIN} changed, not loaded: run systemctl daemon-reload"
    assert story.status == "pending"


def test_an_environment_file_value_is_pending_until_the_process_has_it() -> None:
    def story_for(restarted: bool) -> tuple[str, str, str]:
        s = States()
        unit_service(s, restarted=restarted)
        s.moved("service:decode", "unit:envfile:TARGET", "256", "512", **line(ENVFILE, 2, "t"))
        if restarted:
            s.moved("service:decode", "env:TARGET", "256", "512", pid=200)
        else:
            s.same("service:decode", "env:TARGET", "256", pid=100)
        (story,) = group_changes(s.changes(), s.after)[0]
        return story.title, story.status, story.label

    title, status, label = story_for(restarted=False)
    assert title == f"TARGET=512 at EnvironmentFile {ENVFILE}:2 (was 256)"
    assert (status, label) == ("pending", NOT_APPLIED)
    assert story_for(restarted=True)[1] == "live"


def test_a_value_a_stronger_source_overrides_says_which() -> None:
    s = States()
    unit_service(s, restarted=True)
    s.new("service:decode", "unit:environment:TARGET", "128", **line(DROPIN, 2, "t"))
    s.same("service:decode", "unit:envfile:TARGET", "512", **line(ENVFILE, 2, "t"))
    s.same("service:decode", "env:TARGET", "512", pid=200)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.status == "on-disk"
    assert story.label.endswith(f"EnvironmentFile {ENVFILE}:2 sets TARGET over it")


def test_a_live_value_names_the_strongest_systemd_source_or_none() -> None:
    s = States()
    unit_service(s, restarted=True)
    s.same("service:decode", "unit:envfile:A", "file", **line(ENVFILE, 1, "A=file"))
    s.same("service:decode", "unit:environment:A", "unit", **line(DROPIN, 2, "A=unit"))
    s.same("service:decode", "unit:environment:B", "unit", **line(DROPIN, 2, "B=unit"))
    s.same("systemd:manager", "environment:B", "mgr", run="systemctl show -p Environment")
    s.same("systemd:manager", "environment:C", "mgr", run="systemctl show -p Environment")
    s.new("service:decode", "env:A", "unit", pid=200)  # what neither source says now
    s.new("service:decode", "env:B", "unit", pid=200)
    s.new("service:decode", "env:C", "mgr", pid=200)

    stories = by_root(group_changes(s.changes(), s.after)[0])

    labels = {key: story.label for (_s, key), story in stories.items()}
    assert labels["env:A"] == f"{SOURCE_UNKNOWN} (EnvironmentFile {ENVFILE}:1 sets file now)"
    assert labels["env:B"] == f"from unit Environment= ({DROPIN}:2)"
    assert labels["env:C"].startswith("from the systemd manager environment")


def test_a_manager_variable_is_one_story_of_the_unit_services_started_since() -> None:
    s = States()
    unit_service(s, restarted=True)
    s.process("router", 300, NOW - 3600 * 1_000_000 * 5)  # found by pidfile: not systemd's
    s.new("systemd:manager", "environment:MGR", "1", run="systemctl show -p Environment")
    s.new("service:decode", "env:MGR", "1", pid=200)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert (story.root.subject, story.title) == (
        "systemd:manager",
        "MGR=1 set in the systemd manager environment",
    )
    assert story.status == "live" and story.services == ("decode",)
    assert idents(story.evidence) == {("service:decode", "env:MGR")}
    assert [r.service for r in story.restarts] == ["decode"]


def test_a_manager_variable_no_unit_has_restarted_for_is_pending() -> None:
    s = States()
    unit_service(s, restarted=False)
    s.new("systemd:manager", "environment:MGR", "1", run="systemctl show -p Environment")

    (story,) = group_changes(s.changes(), s.after)[0]

    assert (story.status, story.label) == ("pending", f"{NOT_APPLIED} of decode")


def test_a_line_systemd_ignores_in_an_environment_file_is_said_as_such() -> None:
    s = States()
    unit_service(s, restarted=False)
    s.new("service:decode", "unit:envfile_ignored", f"{ENVFILE}:3: export X=1", **UNIT)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.title == (
        f"EnvironmentFile line ignored by systemd, not a variable name: {ENVFILE}:3: export X=1"
    )
    assert story.status == "changed"


def test_the_manager_is_in_scope_only_while_a_service_is_found_by_unit() -> None:
    """A config that stops naming unit services stops asking the manager: not a removal."""
    from drift.config import Config, ServiceSpec
    from drift.scope import Scope

    with_unit = Config(path=None, host="h", services=(ServiceSpec("d", unit="d.service"),))
    without = Config(path=None, host="h", services=(ServiceSpec("d", pidfile="/run/d.pid"),))
    assert Scope.of(with_unit).covers("systemd:manager")
    assert not Scope.of(without).covers("systemd:manager")
    assert not Scope.from_json(Scope.of(without).to_json()).covers("systemd:manager")
    # A scope stored before drift asked the manager does not know: never guessed away.
    assert Scope.from_json('{"services": {"d": null}}').covers("systemd:manager")
