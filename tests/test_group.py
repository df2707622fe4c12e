"""Grouping changes into stories: the script line, the live value and the restart are one suspect.

The states are built fact by fact with the provenance the collectors give
(script lines, /proc pids, unit files), then compared with changes_between,
exactly as `drift since` does.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drift.analysis.diff import Change, State, changes_between
from drift.analysis.group import group_changes
from drift.analysis.restarts import CO_RESTART_US
from drift.analysis.story import STATUSES, Story, change_spots
from drift.analysis.titles import NOT_APPLIED, SOURCE_UNKNOWN
from drift.store.query import SnapshotInfo, StoredVersion
from drift.timespec import from_us, to_us

MIN = 60_000_000
T0 = to_us(datetime(2026, 12, 2, 10, 0, tzinfo=UTC))  # the first record
BASE = T0 + 120 * MIN  # the baseline record, noon
NOW = T0 + 452 * MIN  # the current record, 17:32
DIGEST = "hmac-sha256:" + "ab" * 16


def iso(us: int) -> str:
    return from_us(us).isoformat(timespec="microseconds")


def _snap(us: int) -> int:
    return (us - T0) // MIN + 1


@dataclass
class States:
    """A baseline state and a current state, built the way the store would return them."""

    before: State = field(default_factory=dict)
    after: State = field(default_factory=dict)

    def _version(
        self, subject: str, key: str, value: str | None, first: int, until: int | None, **kw: Any
    ) -> StoredVersion:
        return StoredVersion(
            subject=subject,
            key=key,
            value=value,
            blob_sha256=kw.pop("blob", None),
            secret=kw.pop("secret", False),
            first_snapshot_id=_snap(first),
            first_taken_us=first,
            until_snapshot_id=None if until is None else _snap(until),
            until_taken_us=until,
            provenance=kw,
        )

    def same(self, subject: str, key: str, value: str | None, **kw: Any) -> None:
        """A fact that holds the same value at the baseline and now."""
        version = self._version(subject, key, value, T0, None, **kw)
        self.before[subject, key] = self.after[subject, key] = version

    def old(self, subject: str, key: str, value: str | None, at: int = NOW, **kw: Any) -> None:
        """A fact that ended at `at`."""
        self.before[subject, key] = self._version(subject, key, value, T0, at, **kw)

    def new(self, subject: str, key: str, value: str | None, at: int = NOW, **kw: Any) -> None:
        """A fact first seen at `at`."""
        self.after[subject, key] = self._version(subject, key, value, at, None, **kw)

    def moved(
        self,
        subject: str,
        key: str,
        was: str | None,
        now: str | None,
        at: int = NOW,
        **kw: Any,
    ) -> None:
        """A fact whose value changed at `at` (`blobs`: the old and new text digests)."""
        was_provenance = kw.pop("was_provenance", {})
        old_blob, new_blob = kw.pop("blobs", (None, None))
        self.old(subject, key, was, at, blob=old_blob, **{**kw, **was_provenance})
        self.new(subject, key, now, at, blob=new_blob, **kw)

    def changes(self) -> list[Change]:
        return changes_between(self.before, self.after)

    # -------------------------------------------------------- as collectors write them

    def process(
        self, service: str, pid: int, started_us: int, *, env: dict[str, str] | None = None
    ) -> None:
        """A service running the same process at the baseline and now."""
        where = {"pid": pid, "found_by": f"pidfile /run/{service}.pid"}
        self.same(f"service:{service}", "running", "true", **where)
        self.same(f"service:{service}", "pid", str(pid), **where)
        # The start of the clock tick it started in, as the collector records it.
        self.same(f"service:{service}", "started_at", iso(started_us), **where, uncertainty_ms=10)
        for name, value in (env or {"PATH": "/usr/bin"}).items():
            self.same(
                f"service:{service}", f"env:{name}", value, pid=pid, source=f"/proc/{pid}/environ"
            )

    def restart(
        self, service: str, old_pid: int, new_pid: int, at_us: int, *, seen: int = NOW
    ) -> None:
        """The service's process replaced at `at_us`, first recorded at `seen`."""
        subject = f"service:{service}"
        self.same(subject, "running", "true", pid=new_pid)
        for key, was, now in (
            ("pid", str(old_pid), str(new_pid)),
            ("started_at", iso(T0 - 60 * MIN), iso(at_us)),
        ):
            tick = {"uncertainty_ms": 10} if key == "started_at" else {}
            self.moved(
                subject,
                key,
                was,
                now,
                seen,
                pid=new_pid,
                found_by=f"pidfile /run/{service}.pid",
                was_provenance={"pid": old_pid},
                **tick,
            )

    def env(self, service: str, name: str, pid: int) -> dict[str, Any]:
        return {"pid": pid, "source": f"/proc/{pid}/environ"}

    def script_line(self, service: str, line: int, text: str) -> dict[str, Any]:
        return {"file": f"/opt/serve/{service}.sh", "line": line, "text": text, "service": service}

    def script_text(self, service: str, *, changed_at: int | None = None) -> None:
        subject = f"script:/opt/serve/{service}.sh"
        where = {"file": f"/opt/serve/{service}.sh", "service": service}
        if changed_at is None:
            self.same(subject, "content", None, blob="1" * 64, **where)
        else:
            self.old(subject, "content", None, changed_at, blob="1" * 64, **where)
            self.new(subject, "content", None, changed_at, blob="2" * 64, **where)


CULPRIT = "export SGLANG_SM120_MMA_TARGET_CTAS=512"
DECODE = "script:/opt/serve/decode.sh"
TARGET = "SGLANG_SM120_MMA_TARGET_CTAS"


def export_added(s: States, *, at: int = NOW, service: str = "decode", line: int = 8) -> None:
    s.script_text(service, changed_at=at)
    s.new(
        f"script:/opt/serve/{service}.sh",
        f"export:{TARGET}",
        "512",
        at,
        **s.script_line(service, line, CULPRIT),
    )


def by_root(stories: list[Story]) -> dict[tuple[str, str], Story]:
    return {(s.root.subject, s.root.key): s for s in stories}


def idents(changes: tuple[Change, ...]) -> set[tuple[str, str]]:
    return {(c.subject, c.key) for c in changes}


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Labels show local times; make them predictable."""
    monkeypatch.setenv("TZ", "UTC")


# ---------------------------------------------------------------- linked by provenance


def test_export_line_live_env_and_restart_are_one_story_rooted_at_the_line() -> None:
    s = States()
    export_added(s)
    s.restart("decode", 100, 200, NOW - 12_000_000)
    s.new("service:decode", f"env:{TARGET}", "512", **s.env("decode", TARGET, 200))

    stories, events = group_changes(s.changes(), s.after)

    (story,) = stories
    assert (story.root.subject, story.root.key) == (DECODE, f"export:{TARGET}")
    assert story.title == f"{CULPRIT} added to /opt/serve/decode.sh:8"
    assert idents(story.evidence) == {("service:decode", f"env:{TARGET}"), (DECODE, "content")}
    assert story.status == "live"
    assert story.label == "live in decode (pid 200) since restart 17:31:48"
    assert story.services == ("decode",)
    assert [r.service for r in story.restarts] == ["decode"]
    (event,) = events
    (restart,) = event.restarts
    assert (restart.before_pid, restart.after_pid, restart.at_us) == (
        "100",
        "200",
        NOW - 12_000_000,
    )
    assert idents(restart.changes) == {("service:decode", "pid"), ("service:decode", "started_at")}


def test_flag_in_exec_line_joins_live_flag_argv_exec_and_text() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - MIN)
    s.script_text("decode", changed_at=NOW)
    line = s.script_line("decode", 9, "exec python -m sglang --cuda-graph-max-bs 128")
    s.moved(DECODE, "flag:--cuda-graph-max-bs", "96", "128", **line)
    s.moved(DECODE, "exec", "python -m sglang --cuda-graph-max-bs 96", "python ...128", **line)
    cmdline = {"pid": 200, "source": "/proc/200/cmdline"}
    s.moved("service:decode", "flag:--cuda-graph-max-bs", "96", "128", **cmdline)
    s.moved("service:decode", "argv", '["python", "96"]', '["python", "128"]', **cmdline)
    s.same("service:decode", "env:PATH", "/usr/bin", pid=200)

    stories, _ = group_changes(s.changes(), s.after)

    (story,) = stories
    assert story.root.key == "flag:--cuda-graph-max-bs" and story.root.subject == DECODE
    assert idents(story.evidence) == {
        ("service:decode", "flag:--cuda-graph-max-bs"),
        ("service:decode", "argv"),
        (DECODE, "exec"),
        (DECODE, "content"),
    }
    assert story.status == "live"
    assert story.title == "flag --cuda-graph-max-bs 128 at /opt/serve/decode.sh:9 (was 96)"


def test_unit_environment_and_live_env_are_one_story_rooted_at_the_unit() -> None:
    s = States()
    unit = {"unit": "sglang-decode.service", "fragment": "/etc/systemd/system/x", "drop_ins": []}
    s.restart("decode", 100, 200, NOW - MIN)
    s.new("service:decode", "unit:environment:NCCL_DEBUG", "INFO", **unit)
    s.moved("service:decode", "unit:drop_ins", "", "/etc/systemd/system/d/10.conf", **unit)
    s.new("service:decode", "env:NCCL_DEBUG", "INFO", pid=200, source="/proc/200/environ")

    stories, _ = group_changes(s.changes(), s.after)

    (story,) = stories
    assert story.root.key == "unit:environment:NCCL_DEBUG"
    assert idents(story.evidence) == {
        ("service:decode", "env:NCCL_DEBUG"),
        ("service:decode", "unit:drop_ins"),
    }
    assert story.status == "live"
    assert story.title == "Environment=NCCL_DEBUG=INFO in unit sglang-decode.service"


# ---------------------------------------------------------------- pending drift


def test_export_changed_but_service_not_restarted_is_pending() -> None:
    s = States()
    s.process("decode", 100, T0, env={TARGET: "256"})
    s.script_text("decode", changed_at=NOW)
    s.moved(DECODE, f"export:{TARGET}", "256", "512", **s.script_line("decode", 8, CULPRIT))

    stories, events = group_changes(s.changes(), s.after)

    (story,) = stories
    assert story.root.key == f"export:{TARGET}"
    assert story.status == "pending"
    assert story.label == NOT_APPLIED == "not applied yet: takes effect on next restart"
    assert story.restarts == () and events == []
    assert story.title == f"export {TARGET}=512 at /opt/serve/decode.sh:8 (was 256)"


def test_without_a_readable_environment_the_start_time_decides() -> None:
    """No env facts (environ unreadable): applied only if the process started since the edit."""

    def story_for(restarted: bool) -> Story:
        s = States()
        s.same("service:decode", "running", "true")
        export_added(s, at=NOW - 10 * MIN)
        if restarted:
            s.restart("decode", 100, 200, NOW - MIN)
        else:
            s.same("service:decode", "pid", "100")
            s.same("service:decode", "started_at", iso(T0))
        (story,) = group_changes(s.changes(), s.after)[0]
        return story

    assert story_for(restarted=False).status == "pending"
    assert story_for(restarted=True).status == "live"


def test_export_with_shell_expansion_is_matched_against_the_live_value() -> None:
    """`$HOME/cache` can give /root/cache: the live process has the new export."""
    s = States()
    s.restart("decode", 100, 200, NOW - MIN)
    s.script_text("decode", changed_at=NOW)
    line = s.script_line("decode", 6, "export HF_HOME=$HOME/cache")
    # As the collector records it: $HOME is a hole the live value fills.
    possible = [{**line, "match": [["$HOME"], "/cache"]}]
    s.new(DECODE, "export:HF_HOME", "$HOME/cache", **line, possible=possible)
    s.new("service:decode", "env:HF_HOME", "/root/cache", pid=200)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.root.key == "export:HF_HOME" and story.status == "live"
    assert ("service:decode", "env:HF_HOME") in idents(story.evidence)


def test_export_missing_from_a_process_started_after_it_is_not_called_pending() -> None:
    """Restarted since, yet the variable is absent: the next restart will not fix it either."""
    s = States()
    export_added(s, at=NOW - 10 * MIN)  # recorded before the restart: the order is certain
    s.restart("decode", 100, 200, NOW - MIN)
    s.same("service:decode", "env:PATH", "/usr/bin", pid=200)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.status == "on-disk"
    assert story.label == "not in decode (pid 200), although it started after the change"


def test_stopped_service_keeps_script_change_pending() -> None:
    s = States()
    s.same("service:decode", "running", "false")
    export_added(s)
    (story,) = group_changes(s.changes(), s.after)[0]
    assert story.status == "pending"
    assert story.label == f"{NOT_APPLIED} (decode is not running)"


def test_need_daemon_reload_and_unit_env_not_in_process_are_pending() -> None:
    s = States()
    unit = {"unit": "decode.service", "fragment": "/etc/systemd/system/decode.service"}
    s.process("decode", 100, T0, env={"NCCL_DEBUG": "WARN"})
    s.moved("service:decode", "unit:need_daemon_reload", "no", "yes", **unit)
    s.moved("service:decode", "unit:environment:NCCL_DEBUG", "WARN", "INFO", **unit)

    stories = by_root(group_changes(s.changes(), s.after)[0])

    assert set(stories) == {
        ("service:decode", "unit:need_daemon_reload"),
        ("service:decode", "unit:environment:NCCL_DEBUG"),
    }
    reload = stories["service:decode", "unit:need_daemon_reload"]
    assert reload.status == "pending" and reload.label.startswith(NOT_APPLIED)
    assert "daemon-reload" in reload.label
    env = stories["service:decode", "unit:environment:NCCL_DEBUG"]
    assert env.status == "pending" and env.label == NOT_APPLIED


# ---------------------------------------------------------------- live without a source


def test_live_env_with_no_source_says_source_unknown() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - MIN)
    s.new("service:decode", "env:LD_PRELOAD", "/tmp/x.so", pid=200)

    stories, events = group_changes(s.changes(), s.after)

    (story,) = stories
    assert story.root.key == "env:LD_PRELOAD"
    assert story.status == "unsourced" and story.label == SOURCE_UNKNOWN
    assert story.title == "LD_PRELOAD=/tmp/x.so in the live environment of decode"
    assert [r.service for r in story.restarts] == ["decode"]
    assert len(events) == 1


def test_live_env_names_the_unit_environment_it_could_come_from() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - MIN)
    # The unit had it all along (a pending change from before the baseline); the restart applied it.
    s.same("service:decode", "unit:environment:NCCL_DEBUG", "INFO", unit="decode.service")
    s.moved("service:decode", "env:NCCL_DEBUG", "WARN", "INFO", pid=200)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.status == "unsourced"
    assert story.label == "from unit Environment= (decode.service)"


def test_live_env_names_the_unchanged_script_line_it_could_come_from() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - MIN)
    s.same(DECODE, f"export:{TARGET}", "512", **s.script_line("decode", 8, CULPRIT))
    s.new("service:decode", f"env:{TARGET}", "512", pid=200)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.status == "unsourced"
    assert story.label == "from /opt/serve/decode.sh:8 (unchanged since the baseline)"


def operator_shell(s: States, pid: int = 200) -> None:
    """The service restarted by hand from a login shell: its own HOME, PATH, pyenv, SHLVL."""
    environ = {"pid": pid, "source": f"/proc/{pid}/environ"}
    s.moved("service:decode", "env:HOME", "/root", "/home/alice", **environ)
    s.moved(
        "service:decode", "env:PATH", "/usr/bin", "/home/alice/.pyenv/shims:/usr/bin", **environ
    )
    s.moved("service:decode", "env:SHLVL", "1", "2", **environ)
    s.new("service:decode", "env:OLDPWD", "/home/alice/src", **environ)
    s.new("service:decode", "env:PYENV_VERSION", "3.12.3", **environ)
    s.old("service:decode", "env:INVOCATION_ID", "4f2a", **environ)  # the unit started it before
    s.new("service:decode", "env:AWS_SESSION_TOKEN", DIGEST, secret=True, **environ)


def test_variables_a_new_shell_brought_are_one_story() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - 12_000_000)
    operator_shell(s)

    stories, events = group_changes(s.changes(), s.after)

    (story,) = stories
    assert (
        story.title
        == "the environment decode was started from changed: AWS_SESSION_TOKEN, HOME, +5"
    )
    assert [c.key for c in story.changes] == [
        "env:AWS_SESSION_TOKEN",
        "env:HOME",
        "env:PATH",
        "env:PYENV_VERSION",
        "env:INVOCATION_ID",
        "env:OLDPWD",
        "env:SHLVL",
    ]
    assert story.status == "unsourced"
    assert story.label == (
        "7 variables inherited from what started decode (no recorded script line or unit sets them)"
    )
    assert [r.service for r in story.restarts] == ["decode"] and len(events) == 1


def test_an_unusual_variable_in_the_shell_is_named_first() -> None:
    """NCCL_ALGO exported in the operator's shell: the title names it before HOME and PATH."""
    s = States()
    s.restart("decode", 100, 200, NOW - 12_000_000)
    for name, was, now in (("HOME", "/root", "/home/alice"), ("PATH", "/usr/bin", "/bin")):
        s.moved("service:decode", f"env:{name}", was, now, pid=200)
    s.new("service:decode", "env:SHLVL", "2", pid=200)
    s.new("service:decode", "env:NCCL_ALGO", "Tree", pid=200)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.title == "the environment decode was started from changed: NCCL_ALGO, HOME, +2"


def test_variables_with_a_source_stay_stories_of_their_own() -> None:
    """The export line added, the unit's setting, a line that writes the value: each named."""
    s = States()
    s.restart("decode", 100, 200, NOW - 12_000_000)
    operator_shell(s)
    export_added(s, at=NOW - 10 * MIN)
    s.new("service:decode", f"env:{TARGET}", "512", pid=200)
    s.same("service:decode", "unit:environment:NCCL_DEBUG", "INFO", unit="decode.service")
    s.moved("service:decode", "env:NCCL_DEBUG", "WARN", "INFO", pid=200)
    s.same(
        DECODE,
        "export:HF_HOME",
        "/data/hf",
        **s.script_line("decode", 5, "export HF_HOME=/data/hf"),
    )
    s.new("service:decode", "env:HF_HOME", "/data/hf", pid=200)
    # `export PYENV_ROOT` passes on what the script was given: inherited all the same.
    given = s.script_line("decode", 4, "export PYENV_ROOT")
    caller = [{**given, "match": [["$PYENV_ROOT"]], "kind": "caller"}]
    s.same(DECODE, "export:PYENV_ROOT", "", **given, inherited=True, possible=caller)
    s.moved("service:decode", "env:PYENV_ROOT", "/opt/pyenv", "/home/alice/.pyenv", pid=200)

    stories = by_root(group_changes(s.changes(), s.after)[0])

    assert stories[DECODE, f"export:{TARGET}"].status == "live"
    assert stories["service:decode", "env:NCCL_DEBUG"].label.startswith("from unit Environment=")
    assert stories["service:decode", "env:HF_HOME"].label.startswith("from /opt/serve/decode.sh:5")
    shell = stories["service:decode", "env:AWS_SESSION_TOKEN"]
    assert "env:PYENV_ROOT" in {c.key for c in shell.changes}
    assert len(shell.changes) == 8 and len(stories) == 4


def test_one_inherited_variable_keeps_its_own_story() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - 12_000_000)
    s.moved("service:decode", "env:HOME", "/root", "/home/alice", pid=200)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.title == "HOME=/home/alice in the live environment of decode (was /root)"


def test_variables_changed_at_two_starts_are_two_stories() -> None:
    """Started from one shell, then from another: where each start came from is its own story."""
    s = States()
    s.restart("decode", 100, 200, NOW - 12_000_000)
    operator_shell(s)
    earlier = NOW - 30 * MIN
    s.moved("service:decode", "env:LANG", "C", "C.UTF-8", earlier, pid=150)
    s.moved("service:decode", "env:TZ", "UTC", "Europe/Paris", earlier, pid=150)

    stories = by_root(group_changes(s.changes(), s.after)[0])

    assert {c.key for c in stories["service:decode", "env:TZ"].changes} == {"env:LANG", "env:TZ"}
    assert len(stories["service:decode", "env:AWS_SESSION_TOKEN"].changes) == 7


# ---------------------------------------------------------------- restarts


def test_co_restart_of_three_services_is_one_event_and_no_story() -> None:
    s = States()
    for i, name in enumerate(("prefill", "decode", "router")):
        s.restart(name, 100 + i, 200 + i, NOW - 9 * MIN + i * 2_000_000)
        s.same(f"service:{name}", "env:PATH", "/usr/bin", pid=200 + i)
    # A restart minutes later is an event of its own: it did not restart with them.
    s.restart("worker", 300, 301, NOW - 5 * MIN)

    stories, events = group_changes(s.changes(), s.after)

    assert stories == []
    assert [e.services for e in events] == [("prefill", "decode", "router"), ("worker",)]
    assert events[0].at_us == NOW - 9 * MIN


def test_restart_absorbs_per_start_ids_and_parent_pid() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - MIN)
    s.moved("service:decode", "ppid", "1", "7", pid=200)
    s.moved("service:decode", "env:INVOCATION_ID", "aaa", "bbb", pid=200)

    stories, (event,) = group_changes(s.changes(), s.after)

    assert stories == []
    assert idents(event.restarts[0].changes) == {
        ("service:decode", k) for k in ("pid", "started_at", "ppid", "env:INVOCATION_ID")
    }


def test_restart_time_falls_back_to_the_record_when_started_at_is_not_a_time() -> None:
    s = States()
    s.moved("service:decode", "pid", "100", "200", NOW - 5 * MIN)
    s.moved("service:decode", "started_at", "?", "garbled", NOW - 5 * MIN)
    (event,) = group_changes(s.changes(), s.after)[1]
    assert event.at_us == NOW - 5 * MIN


# ---------------------------------------------------------------- other stories


def test_stopped_service_is_one_story_with_its_process_facts_as_evidence() -> None:
    s = States()
    s.moved("service:decode", "running", "true", "false")
    for key, value in (("pid", "100"), ("started_at", iso(T0)), ("env:PATH", "/usr/bin")):
        s.old("service:decode", key, value)

    stories, events = group_changes(s.changes(), s.after)

    (story,) = stories
    assert story.title == "decode stopped" and story.root.key == "running"
    assert idents(story.evidence) == {
        ("service:decode", "pid"),
        ("service:decode", "started_at"),
        ("service:decode", "env:PATH"),
    }
    assert events == []


def test_secret_export_is_matched_by_digest_and_never_shown() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - MIN)
    s.script_text("decode", changed_at=NOW)
    s.moved(
        DECODE,
        "export:HF_TOKEN",
        "hmac-sha256:" + "cd" * 16,
        DIGEST,
        secret=True,
        **s.script_line("decode", 5, "export HF_TOKEN=[redacted:abababab]"),
    )
    s.moved("service:decode", "env:HF_TOKEN", "hmac-sha256:" + "cd" * 16, DIGEST, secret=True)

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.status == "live"
    assert ("service:decode", "env:HF_TOKEN") in idents(story.evidence)
    # The same marker a secret gets inside a text: the first hex digits of its digest.
    assert story.title == (
        "export HF_TOKEN=[redacted:abababab] at /opt/serve/decode.sh:5 (was [redacted:cdcdcdcd])"
    )
    assert "ab" * 8 not in story.title + story.label


def test_file_content_change_is_one_on_disk_story() -> None:
    s = States()
    path = "/opt/sglang/attention/flashmla_backend.py"
    s.moved(f"file:{path}", "sha256", "a" * 64, "b" * 64, glob="**/*.py", set="kernels")
    s.moved(f"file:{path}", "size", "100", "120", glob="**/*.py", set="kernels")
    s.same(f"file:{path}", "mode", "0644")

    (story,) = group_changes(s.changes(), s.after)[0]

    assert story.root.key == "sha256" and idents(story.evidence) == {(f"file:{path}", "size")}
    assert story.status == "on-disk"
    assert story.title == f"{path} content changed"


def test_grouping_does_not_depend_on_the_order_of_changes() -> None:
    s = States()
    export_added(s)
    s.restart("decode", 100, 200, NOW - 2 * MIN)
    s.new("service:decode", f"env:{TARGET}", "512", pid=200)
    s.new("service:decode", "env:EXTRA", "1", pid=200)
    s.moved("command:loadavg", "stdout", None, None, blobs=("3" * 64, "4" * 64), run="cat x")
    changes = s.changes()
    shuffled = list(changes)
    random.Random(7).shuffle(shuffled)
    assert group_changes(shuffled, s.after) == group_changes(changes, s.after)


# ---------------------------------------------------------------- properties

SERVICE_KEYS = (
    "running",
    "pid",
    "started_at",
    "ppid",
    "env:A",
    "env:B",
    "env:INVOCATION_ID",
    "flag:--x",
    "argv",
    "exe",
    "cwd",
    "matches",
    "unit:environment:A",
    "unit:exec_start",
    "unit:need_daemon_reload",
    "unit:drop_ins",
    "unit:active_state",
)
SCRIPT_KEYS = ("export:A", "export:B", "flag:--x", "exec", "content")
IDENTS = (
    [(f"service:{s}", k) for s in ("decode", "prefill") for k in SERVICE_KEYS]
    + [(f"script:/s/{s}.sh", k) for s in ("decode", "prefill", "orphan") for k in SCRIPT_KEYS]
    + [("script:/s/common.env", "content")]
    + [("file:/k/a.py", k) for k in ("sha256", "size", "mode")]
    + [("repo:/r", k) for k in ("head", "branch", "diff", "dirty", "untracked")]
    + [("command:c", k) for k in ("stdout", "exit")]
    + [("health:h", "ok"), ("weird:thing", "x")]
)
VALUES = st.sampled_from(["1", "2", "true", "false", "yes", "no", "", iso(NOW - 3 * MIN), None])


@st.composite
def histories(draw: st.DrawFn) -> States:
    """Random baseline and current states over a vocabulary that reaches every grouping rule."""
    s = States()
    chosen = draw(st.lists(st.sampled_from(IDENTS), unique=True, max_size=40))
    for subject, key in chosen:
        shape = draw(st.sampled_from(["same", "old", "new", "moved"]))
        secret = draw(st.booleans()) and key.startswith(("env:", "export:"))
        at = NOW - draw(st.integers(0, 20)) * MIN
        kw: dict[str, Any] = {"secret": secret}
        if subject == "script:/s/common.env":
            kw.update(file=subject[7:], sourced_by="/s/decode.sh:2", service="decode")
        elif subject.startswith("script:") and not subject.endswith("orphan.sh"):
            # A line of the script itself, or of the env file both scripts source.
            shared = key.startswith(("export:", "flag:")) and draw(st.booleans())
            file = "/s/common.env" if shared else subject[7:]
            service = subject.removeprefix("script:/s/").removesuffix(".sh")
            kw.update(file=file, line=draw(st.integers(1, 9)), service=service)
        was, now = draw(VALUES), draw(VALUES)
        if shape == "same":
            s.same(subject, key, was, **kw)
        elif shape == "old":
            s.old(subject, key, was, at, **kw)
        elif shape == "new":
            s.new(subject, key, now, at, **kw)
        else:
            s.moved(subject, key, was, now, at, **kw)
    return s


@settings(max_examples=300, deadline=None)
@given(histories(), st.randoms(use_true_random=False))
def test_every_change_lands_in_exactly_one_story_or_restart(s: States, rnd: random.Random) -> None:
    changes = s.changes()
    stories, events = group_changes(changes, s.after)

    placed = [c for story in stories for c in story.changes]
    placed += [c for e in events for r in e.restarts for c in r.changes]
    assert sorted(map(id, placed)) == sorted(map(id, changes))
    for story in stories:
        assert story.status in STATUSES
        assert story.title and story.root not in story.evidence
        # A story only carries restarts of its own services.
        for r in story.restarts:
            assert r.service in story.services
    # No two suspects alike; a text's change goes with an edit in that file, or alone.
    assert len({story.title for story in stories}) == len(stories)
    for story in stories:
        for change in story.evidence:
            if change.key == "content" and change.subject.startswith("script:"):
                file = change.subject.removeprefix("script:")
                assert story.root.subject == change.subject or file in {
                    f for f, _, _ in change_spots(story.root)
                }
    for event in events:
        times = [r.at_us for r in event.restarts]
        assert times == sorted(times) and max(times) - event.at_us <= CO_RESTART_US
    shuffled = list(changes)
    rnd.shuffle(shuffled)
    assert group_changes(shuffled, s.after) == (stories, events)


def test_file_changed_after_every_running_service_started_is_pending() -> None:
    from drift.analysis.titles import NOT_APPLIED

    hour = 60 * MIN
    states = States()
    states.process("decode", 318108, started_us=T0 + hour)
    states.moved("file:/opt/sglang/attn.py", "sha256", "aaa", "bbb", at=T0 + 3 * hour)
    (story,), _events = group_changes(states.changes(), states.after)
    assert story.status == "pending" and NOT_APPLIED in story.label

    restarted = States()
    restarted.process("decode", 318108, started_us=T0 + 4 * hour)
    restarted.moved("file:/opt/sglang/attn.py", "sha256", "aaa", "bbb", at=T0 + 3 * hour)
    (story,), _events = group_changes(restarted.changes(), restarted.after)
    assert story.status == "on-disk" and "decode started after it" in story.label


# ---------------------------------------------------------------- time order

SEC = 1_000_000
SEEN = T0 + 442 * MIN + 46 * SEC  # 17:22:46: the record that saw the change
PREV = SEEN - MIN  # 17:21:46: the record before it
REPO = "repo:/opt/sglang"


def records(
    *times: int, failed: dict[int, list[dict[str, Any]]] | None = None
) -> list[SnapshotInfo]:
    """Records taken at `times`, each a second long; `failed`: the collection errors of some."""
    errors = failed or {}
    return [
        SnapshotInfo(_snap(t), t, 1000, 0, 0, len(errors.get(t, [])), errors.get(t, []))
        for t in times
    ]


def head_moved(s: States, moved_at: int | None = None) -> None:
    """git HEAD seen moved by the record at SEEN; `moved_at`: the reflog's time for it."""
    said = {} if moved_at is None else {"moved_at": from_us(moved_at).isoformat(timespec="seconds")}
    s.moved(REPO, "head", "a" * 40, "b" * 40, SEEN, path="/opt/sglang", **said)


ON_DISK = "on disk: whether a running process loaded it is not recorded"


@pytest.mark.parametrize(
    ("moved_at", "status", "label"),
    [
        # The records alone: between 17:21:46 and the end of the record at 17:22:46.
        (
            None,
            "on-disk",
            f"{ON_DISK}; web started at about the same time "
            "(start 17:22:44; change between 17:21:46 and 17:22:47), order unknown",
        ),
        # The reflog puts the move seconds before the start ...
        (SEEN - 16 * SEC, "on-disk", f"{ON_DISK}; web started after it"),
        # ... or after it ...
        (SEEN - SEC, "pending", f"{NOT_APPLIED} (every running service started before it)"),
        # ... or in the same second as the start: still no order.
        (
            SEEN - 2 * SEC,
            "on-disk",
            f"{ON_DISK}; web started at about the same time "
            "(start 17:22:44; change between 17:22:44 and 17:22:45), order unknown",
        ),
        # A reflog time the records contradict (a faked committer date) is not believed.
        (
            SEEN - 90 * MIN,
            "on-disk",
            f"{ON_DISK}; web started at about the same time "
            "(start 17:22:44; change between 17:21:46 and 17:22:47), order unknown",
        ),
    ],
)
def test_started_after_a_head_move_only_when_the_times_say_so(
    moved_at: int | None, status: str, label: str
) -> None:
    s = States()
    s.process("web", 318, started_us=SEEN - 2 * SEC)
    head_moved(s, moved_at)

    (story,) = group_changes(s.changes(), s.after, records(PREV, SEEN))[0]

    assert (story.status, story.label) == (status, label)


def test_a_start_recorded_without_its_tick_may_be_a_second_early() -> None:
    """Drift once added a boot time cut to the second: such a start time can be late by that."""
    s = States()
    s.process("web", 318, started_us=SEEN - 2 * SEC)
    old = s.after["service:web", "started_at"]
    s.after["service:web", "started_at"] = replace(old, provenance={"pid": 318})
    head_moved(s, SEEN - SEC)  # 17:22:45, in the second after the recorded start

    (story,) = group_changes(s.changes(), s.after, records(PREV, SEEN))[0]

    assert story.status == "on-disk" and story.label.endswith(
        "web started at about the same time "
        "(start 17:22:44; change between 17:22:45 and 17:22:46), order unknown"
    )


def test_a_record_that_could_not_read_the_fact_widens_the_interval() -> None:
    """The repository failed to read at 17:21:46: the move may have happened before that."""
    s = States()
    s.process("web", 318, started_us=PREV - 40 * SEC)  # 17:21:06
    head_moved(s)
    read = records(PREV - MIN, PREV, SEEN)
    (story,) = group_changes(s.changes(), s.after, read)[0]
    assert story.status == "pending"

    error = {"subject": REPO, "key": None, "message": "git: timed out"}
    failed = records(PREV - MIN, PREV, SEEN, failed={PREV: [error]})
    (story,) = group_changes(s.changes(), s.after, failed)[0]
    assert story.status == "on-disk"
    assert story.label.endswith(
        "web started at about the same time "
        "(start 17:21:06; change between 17:20:46 and 17:22:47), order unknown"
    )


def test_a_restart_in_the_interval_of_an_edit_is_live_only_if_it_came_after() -> None:
    """The environment cannot be read: the start time decides, and it cannot here."""
    s = States()
    s.same("service:decode", "running", "true")
    export_added(s, at=SEEN)
    s.restart("decode", 100, 200, SEEN - 2 * SEC, seen=SEEN)

    (story,) = group_changes(s.changes(), s.after, records(PREV, SEEN))[0]

    assert story.status == "live"
    assert story.label == (
        "live in decode (pid 200) since restart 17:22:44, if it started after the change: "
        "it started at about the same time "
        "(start 17:22:44; change between 17:21:46 and 17:22:47), order unknown"
    )


def test_a_variable_missing_from_a_process_started_with_the_edit_claims_no_order() -> None:
    s = States()
    export_added(s, at=SEEN)
    s.restart("decode", 100, 200, SEEN - 2 * SEC, seen=SEEN)
    s.same("service:decode", "env:PATH", "/usr/bin", pid=200)

    (story,) = group_changes(s.changes(), s.after, records(PREV, SEEN))[0]

    assert story.status == "on-disk"
    assert story.label == (
        "not in decode (pid 200), which started at about the same time "
        "(start 17:22:44; change between 17:21:46 and 17:22:47), order unknown"
    )


# ---------------------------------------------------------------- a server's own view of a knob


def leaf_moved(s: States, pointer: str, was: str, now: str, *, service: str | None = "decode"):
    where = {"url": "http://127.0.0.1:30001/get_server_info"}
    s.moved("endpoint:decode-info", f"json:{pointer}", was, now, **where, service=service)


def test_a_leaf_reporting_a_live_variable_is_evidence_of_its_story() -> None:
    s = States()
    export_added(s)
    s.restart("decode", 100, 200, NOW - 12_000_000)
    s.new("service:decode", f"env:{TARGET}", "512", **s.env("decode", TARGET, 200))
    leaf_moved(s, "/mma_target_ctas", "null", "512")

    stories, _ = group_changes(s.changes(), s.after)

    (story,) = stories
    assert ("endpoint:decode-info", "json:/mma_target_ctas") in idents(story.evidence)
    assert story.label.endswith(
        "decode-info answers 512 at /mma_target_ctas: the running server has it"
    )


def test_a_leaf_two_stories_could_claim_equally_stays_its_own() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - 12_000_000)
    # a variable and a flag of no recorded source, both 512: two stories
    s.new("service:decode", "env:SGLANG_A_KNOB", "512", **s.env("decode", "SGLANG_A_KNOB", 200))
    s.new("service:decode", "flag:--b-knob", "512", pid=200)
    leaf_moved(s, "/unrelated_size", "256", "512")

    stories, _ = group_changes(s.changes(), s.after)

    alone = by_root(stories)[("endpoint:decode-info", "json:/unrelated_size")]
    assert alone.evidence == ()
    assert not any("answers" in story.label for story in stories)


def test_a_leaf_of_a_common_value_needs_a_name_and_a_named_one_wins() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - 12_000_000)
    s.new("service:decode", "env:SGLANG_ENABLE_JIT", "1", **s.env("decode", "SGLANG_JIT", 200))
    s.new("service:decode", "flag:--disable-overlap", "", pid=200)  # a bare flag
    leaf_moved(s, "/enable_mixed_chunk", "false", "true")  # no name: true is too common
    leaf_moved(s, "/server_args/disable_overlap", "false", "true")  # the name says which

    stories, _ = group_changes(s.changes(), s.after)

    roots = by_root(stories)
    assert roots[("endpoint:decode-info", "json:/enable_mixed_chunk")].evidence == ()
    named = roots[("service:decode", "flag:--disable-overlap")]
    assert ("endpoint:decode-info", "json:/server_args/disable_overlap") in idents(named.evidence)
    assert roots[("service:decode", "env:SGLANG_ENABLE_JIT")].evidence == ()


def test_a_leaf_changed_in_another_record_than_the_variable_is_not_its_evidence() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - 30 * MIN, seen=NOW - 30 * MIN)
    s.new("service:decode", f"env:{TARGET}", "512", NOW - 30 * MIN, **s.env("decode", TARGET, 200))
    leaf_moved(s, "/mma_target_ctas", "null", "512")  # while the process kept running

    snaps = [
        SnapshotInfo(_snap(at), at, 500, 10, 1, 0)
        for at in (BASE, NOW - 31 * MIN, NOW - 30 * MIN, NOW - MIN, NOW)
    ]
    stories, _ = group_changes(s.changes(), s.after, snaps)

    alone = by_root(stories)[("endpoint:decode-info", "json:/mma_target_ctas")]
    assert alone.evidence == () and alone.status == "changed"


def test_the_service_of_an_entry_naming_none_is_the_one_serving_its_port() -> None:
    s = States()
    s.restart("decode", 100, 200, NOW - 12_000_000)
    s.same("service:decode", "flag:--port", "30001", pid=200)
    s.same("service:prefill", "running", "true", pid=300)
    s.same("service:prefill", "flag:--port", "30000", pid=300)
    s.new("service:decode", "flag:--max-running-requests", "128", pid=200)
    leaf_moved(s, "/max_running_requests", "256", "128", service=None)

    stories, _ = group_changes(s.changes(), s.after)

    (story,) = (st for st in stories if st.root.key == "flag:--max-running-requests")
    assert idents(story.evidence) >= {("endpoint:decode-info", "json:/max_running_requests")}


# ---------------------------------------------------------------- file times


def edited(s: States, mtime: int, ctime: int, *, at: int = SEEN) -> None:
    """The culprit export added to decode.sh, its content read with these file times at `at`."""
    subject, where = DECODE, {"file": "/opt/serve/decode.sh", "service": "decode"}
    times = {"mtime": iso(mtime), "ctime": iso(ctime)}
    s.old(subject, "content", None, at, blob="1" * 64, **where)
    s.new(subject, "content", None, at, blob="2" * 64, **where, **times)
    s.new(subject, f"export:{TARGET}", "512", at, **s.script_line("decode", 8, CULPRIT))


RECORDS_ONLY = (
    "live in decode (pid 200) since restart 17:22:44, if it started after the change: "
    "it started at about the same time "
    "(start 17:22:44; change between 17:21:46 and 17:22:47), order unknown"
)


@pytest.mark.parametrize(
    ("mtime", "ctime", "label"),
    [
        # Written at 17:22:39, five seconds before the start: the ctime orders them.
        (
            SEEN - 7 * SEC,
            SEEN - 7 * SEC,
            "live in decode (pid 200) since restart 17:22:44, started after the edit (file time)",
        ),
        # Its mtime set back into the interval, its ctime after the start: no order.
        (
            SEEN - 7 * SEC,
            SEEN - SEC,
            "live in decode (pid 200) since restart 17:22:44, if it started after the change: "
            "it started at about the same time "
            "(start 17:22:44; change between 17:21:46 and 17:22:45 by file time), order unknown",
        ),
        # touch -d into the past, into the future, a ctime after the record read it: not
        # believed at all.
        (PREV - MIN, SEEN - 7 * SEC, RECORDS_ONLY),
        (SEEN + 60 * MIN, SEEN - 7 * SEC, RECORDS_ONLY),
        (SEEN - 7 * SEC, SEEN + 2 * SEC, RECORDS_ONLY),
        (PREV - SEC, PREV - SEC, RECORDS_ONLY),
    ],
)
def test_file_times_order_an_edit_and_a_restart_only_where_the_records_agree(
    mtime: int, ctime: int, label: str
) -> None:
    s = States()
    s.same("service:decode", "running", "true")
    edited(s, mtime, ctime)
    s.restart("decode", 100, 200, SEEN - 2 * SEC, seen=SEEN)

    (story,) = group_changes(s.changes(), s.after, records(PREV, SEEN))[0]

    assert (story.status, story.label) == ("live", label)
    believed = label is not RECORDS_ONLY
    assert story.changed is not None
    assert story.changed.edited_us == (mtime if believed else None)


@given(
    mtime=st.integers(PREV - 2 * MIN, SEEN + 2 * MIN),
    ctime=st.integers(PREV - 2 * MIN, SEEN + 2 * MIN),
    start=st.integers(PREV - MIN, SEEN),
)
@settings(max_examples=300, deadline=None)
def test_a_start_is_after_the_edit_only_when_the_ctime_says_so(
    mtime: int, ctime: int, start: int
) -> None:
    """Whatever the file times say, "started after" needs the start past the ctime (plus a
    tick), and the interval never reaches outside the records'."""
    s = States()
    s.same("service:decode", "running", "true")
    edited(s, mtime, ctime)
    s.restart("decode", 100, 200, start, seen=SEEN)

    (story,) = group_changes(s.changes(), s.after, records(PREV, SEEN))[0]

    assert story.changed is not None
    assert PREV <= story.changed.earliest_us <= story.changed.latest_us <= SEEN + SEC
    if "started after the edit" in story.label:
        assert PREV < mtime <= ctime <= SEEN + SEC and start > ctime


def test_an_environment_file_edit_orders_by_its_file_time() -> None:
    s = States()
    s.same("service:decode", "running", "true", unit="decode.service")
    times = {"mtime": iso(SEEN - 7 * SEC), "ctime": iso(SEEN - 7 * SEC)}
    place = {"unit": "decode.service", "file": "/etc/serve/decode.env", "line": 2, "text": "t"}
    s.moved("service:decode", "unit:envfile:TARGET", "256", "512", SEEN, **place, **times)
    s.restart("decode", 100, 200, SEEN - 2 * SEC, seen=SEEN)
    s.moved("service:decode", "env:TARGET", "256", "512", SEEN, pid=200)

    (story,) = group_changes(s.changes(), s.after, records(PREV, SEEN))[0]

    assert story.status == "live"
    assert story.label.endswith("since restart 17:22:44, started after the edit (file time)")
