"""systemctl show parsing, first on recorded output, then against a real systemd in a container."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from systemd_container import SystemdContainer, systemd_container_fixture

from drift.collectors.systemd import (
    SystemdError,
    parse_show,
    parse_timestamp,
    parse_unit_state,
    show_unit,
    split_quoted,
    unit_facts,
)
from drift.errors import DriftError

# Recorded from systemd 252 in the container (shared/systemd-in-ci.md), byte for byte.
RECORDED = """\
MainPID=53
ExecMainStartTimestamp=Wed 2026-12-02 11:25:06 UTC
ExecStart={ path=/usr/bin/tail ; argv[]=/usr/bin/tail -f -n 0 --sleep-interval=30 /dev/null ; \
ignore_errors=no ; start_time=[Wed 2026-12-02 11:25:06 UTC] ; stop_time=[n/a] ; pid=53 ; \
code=(null) ; status=0/0 }
Environment=FOO=1 "SPACED=a b" DROPIN=yes
EnvironmentFiles=/etc/probe.env (ignore_errors=no)
EnvironmentFiles=/etc/missing.env (ignore_errors=yes)
FragmentPath=/etc/systemd/system/probe.service
DropInPaths=/etc/systemd/system/probe.service.d/override.conf
ActiveEnterTimestamp=Wed 2026-12-02 11:25:06 UTC
"""

# How systemd 252 prints values that need quoting (recorded while writing this test;
# the live test below checks the same values against a real process).
RECORDED_QUOTED = (
    r'Environment=FOO=1 "SPACED=a b" "SQ=x y" "ESC=q\"uo\\te" "NL=line1\nline2" '
    r'"TAB=a\tb" "DOLLAR=\$x" "UNI=é ü" "SEMI=a ; b" DROPIN=yes'
)

# Environment= values with every kind of quoting systemd does, as written in a unit
# file, and what the process must receive.
TRICKY_UNIT_LINE = (
    r'Environment="SPACED=a b" "ESC=q\"uo\\te" "NL=line1\nline2" "TAB=a\tb" '
    r'"DOLLAR=$x" "UNI=é ü" "SEMI=a ; b" EQ=a=b EMPTY= PERCENT=100%%'
)
TRICKY_VALUES = {
    "SPACED": "a b",
    "ESC": 'q"uo\\te',
    "NL": "line1\nline2",
    "TAB": "a\tb",
    "DOLLAR": "$x",
    "UNI": "é ü",
    "SEMI": "a ; b",
    "EQ": "a=b",
    "EMPTY": "",
    "PERCENT": "100%",
}

PROBE_UNIT = """\
[Service]
Environment=FOO=1 "SPACED=a b"
EnvironmentFile=/etc/probe.env
EnvironmentFile=-/etc/missing.env
ExecStart=/usr/bin/sleep infinity
"""


# --- parsing recorded output ----------------------------------------------------


def test_parse_show_keeps_systemd_order_and_repeated_properties() -> None:
    props = parse_show(RECORDED)
    assert list(props)[:3] == ["MainPID", "ExecMainStartTimestamp", "ExecStart"]
    assert props["EnvironmentFiles"] == [
        "/etc/probe.env (ignore_errors=no)",
        "/etc/missing.env (ignore_errors=yes)",
    ]
    assert props["Environment"] == ['FOO=1 "SPACED=a b" DROPIN=yes']


def test_parse_show_keeps_empty_properties() -> None:
    props = parse_show("MainPID=0\nExecMainStartTimestamp=\nDropInPaths=\n")
    assert props == {"MainPID": ["0"], "ExecMainStartTimestamp": [""], "DropInPaths": [""]}
    state = parse_unit_state("x.service", props)
    assert (state.main_pid, state.exec_main_start, state.drop_in_paths) == (0, None, ())


def test_parse_unit_state_from_recorded_output() -> None:
    state = parse_unit_state("probe.service", parse_show(RECORDED))
    assert state.unit == "probe.service"
    assert state.main_pid == 53
    assert state.environment == {"FOO": "1", "SPACED": "a b", "DROPIN": "yes"}
    assert state.environment_files == (("/etc/probe.env", False), ("/etc/missing.env", True))
    assert state.exec_start == (
        ("/usr/bin/tail", "-f", "-n", "0", "--sleep-interval=30", "/dev/null"),
    )
    assert state.fragment_path == "/etc/systemd/system/probe.service"
    assert state.drop_in_paths == ("/etc/systemd/system/probe.service.d/override.conf",)
    assert state.active_enter == datetime(2026, 12, 2, 11, 25, 6, tzinfo=UTC)
    assert state.exec_main_start == state.active_enter
    # Not asked for in that recording: empty, not invented.
    assert (state.load_state, state.active_state, state.need_daemon_reload) == ("", "", False)


def test_environment_quoting_as_systemd_prints_it() -> None:
    state = parse_unit_state("probe.service", parse_show(RECORDED_QUOTED))
    assert state.environment == {
        "FOO": "1",
        "SPACED": "a b",
        "SQ": "x y",
        "ESC": 'q"uo\\te',
        "NL": "line1\nline2",
        "TAB": "a\tb",
        "DOLLAR": "$x",
        "UNI": "é ü",
        "SEMI": "a ; b",
        "DROPIN": "yes",
    }


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("'x y' \"a b\"", ["x y", "a b"]),
        (r'"a\"b" c\\d', ['a"b', "c\\d"]),
        (r"\x41\101\u00e9 \s", ["AAé", " "]),
        ('A="a b"c ""', ["A=a bc", ""]),
        ("  spaced   out  ", ["spaced", "out"]),
        ("", []),
    ],
)
def test_split_quoted_undoes_systemd_quoting(text: str, words: list[str]) -> None:
    assert split_quoted(text) == words


def test_split_quoted_rejects_unterminated_quote() -> None:
    with pytest.raises(SystemdError, match="unterminated quote"):
        split_quoted('"a b')


def test_timestamps_are_aware_utc_with_microseconds() -> None:
    moment = parse_timestamp("Wed 2026-12-02 11:48:16.327100 UTC")
    assert moment == datetime(2026, 12, 2, 11, 48, 16, 327100, tzinfo=UTC)
    assert parse_timestamp("") is None
    assert parse_timestamp("n/a") is None
    with pytest.raises(SystemdError, match="expected UTC"):
        parse_timestamp("Wed 2026-12-02 12:48:16 CET")


def test_several_exec_start_entries_and_empty_argument() -> None:
    text = (
        "ExecStart={ path=/usr/bin/env ; argv[]=/usr/bin/env A=1;B  /usr/bin/true ; "
        "ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; "
        "status=0/0 }\n"
        "ExecStart={ path=/usr/bin/true ; argv[]=/usr/bin/true x ; ignore_errors=no d ; "
        "ignore_errors=yes ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; "
        "status=0/0 }\n"
    )
    state = parse_unit_state("multi.service", parse_show(text))
    assert state.exec_start == (
        ("/usr/bin/env", "A=1;B", "", "/usr/bin/true"),
        # An argument holding " ; ignore_errors=" must not end the argv early.
        ("/usr/bin/true", "x", ";", "ignore_errors=no", "d"),
    )


def test_unit_facts_from_recorded_output() -> None:
    state = parse_unit_state("probe.service", parse_show(RECORDED))
    facts = {fact.key: fact for fact in unit_facts("service:probe", state)}
    assert {key: fact.value for key, fact in facts.items()} == {
        "unit:load_state": "",
        "unit:active_state": "",
        "unit:fragment_path": "/etc/systemd/system/probe.service",
        "unit:drop_ins": "/etc/systemd/system/probe.service.d/override.conf",
        "unit:environment_files": "/etc/probe.env\n-/etc/missing.env",
        "unit:exec_start": "/usr/bin/tail -f -n 0 --sleep-interval=30 /dev/null",
        "unit:need_daemon_reload": "no",
        # The recording's start: context of restarts, kept to the microsecond.
        "unit:exec_main_start": "2026-12-02T11:25:06.000000+00:00",
        "unit:environment:FOO": "1",
        "unit:environment:SPACED": "a b",
        "unit:environment:DROPIN": "yes",
    }
    assert all(fact.subject == "service:probe" for fact in facts.values())
    assert facts["unit:environment:SPACED"].provenance == {
        "unit": "probe.service",
        "fragment": "/etc/systemd/system/probe.service",
        "drop_ins": ["/etc/systemd/system/probe.service.d/override.conf"],
    }


# --- show_unit failures, with real programs --------------------------------------


def test_show_unit_without_systemctl_is_a_one_line_error() -> None:
    with pytest.raises(SystemdError) as caught:
        show_unit("probe.service", systemctl=("/nonexistent/systemctl",))
    message = str(caught.value)
    assert "\n" not in message
    assert "/nonexistent/systemctl" in message and "not found" in message
    assert isinstance(caught.value, DriftError)


def test_show_unit_reports_a_failing_systemctl() -> None:
    with pytest.raises(SystemdError, match=r"failed \(exit 1\)"):
        show_unit("probe.service", systemctl=("false",))


def test_show_unit_times_out() -> None:
    slow = (sys.executable, "-c", "import time; time.sleep(10)")
    started = time.monotonic()
    with pytest.raises(SystemdError, match="did not answer within 0.3 s"):
        show_unit("probe.service", systemctl=slow, timeout=0.3)
    assert time.monotonic() - started < 5


def test_show_unit_rejects_option_like_unit_names() -> None:
    with pytest.raises(SystemdError, match="invalid unit name"):
        show_unit("--all", systemctl=("/nonexistent/systemctl",))


# --- a real systemd -------------------------------------------------------------

systemd_container = systemd_container_fixture()


@pytest.fixture(scope="module")
def probe(systemd_container: SystemdContainer) -> SystemdContainer:
    """probe.service running, with a drop-in, an env file and a missing optional one."""
    c = systemd_container
    c.write_file("/etc/probe.env", 'BAR=from_envfile\nBAZ="quoted value"\n')
    c.write_unit("probe.service", PROBE_UNIT)
    c.write_unit("probe.service.d/override.conf", "[Service]\nEnvironment=DROPIN=yes\n")
    c.daemon_reload()
    c.start("probe.service")
    return c


@pytest.mark.systemd
def test_running_unit_as_systemd_reports_it(probe: SystemdContainer) -> None:
    state = show_unit("probe.service", probe.systemctl)
    assert (state.load_state, state.active_state) == ("loaded", "active")
    assert state.environment == {"FOO": "1", "SPACED": "a b", "DROPIN": "yes"}
    assert state.environment_files == (("/etc/probe.env", False), ("/etc/missing.env", True))
    assert state.exec_start == (("/usr/bin/sleep", "infinity"),)
    assert state.fragment_path == "/etc/systemd/system/probe.service"
    assert state.drop_in_paths == ("/etc/systemd/system/probe.service.d/override.conf",)
    assert state.need_daemon_reload is False

    # MainPID is the container's PID of the real process, which got that environment.
    live = probe.environ(state.main_pid)
    assert {k: live[k] for k in ("FOO", "SPACED", "DROPIN", "BAR", "BAZ")} == {
        "FOO": "1",
        "SPACED": "a b",
        "DROPIN": "yes",
        "BAR": "from_envfile",
        "BAZ": "quoted value",
    }
    assert live["SYSTEMD_EXEC_PID"] == str(state.main_pid)

    now = datetime.now(UTC)
    assert state.active_enter is not None and state.exec_main_start is not None
    assert state.active_enter.tzinfo is UTC
    assert now - timedelta(minutes=1) < state.exec_main_start <= state.active_enter <= now


@pytest.mark.systemd
def test_live_unit_facts(probe: SystemdContainer) -> None:
    state = show_unit("probe.service", probe.systemctl)
    facts = {f.key: f.value for f in unit_facts("service:probe", state)}
    assert facts["unit:exec_start"] == "/usr/bin/sleep infinity"
    assert facts["unit:environment:SPACED"] == "a b"
    assert facts["unit:environment_files"] == "/etc/probe.env\n-/etc/missing.env"
    assert facts["unit:active_state"] == "active"
    assert not any("pid" in key or "timestamp" in key for key in facts)


@pytest.mark.systemd
def test_environment_quoting_round_trips_to_the_process(
    systemd_container: SystemdContainer,
) -> None:
    c = systemd_container
    c.write_unit(
        "tricky.service", f"[Service]\n{TRICKY_UNIT_LINE}\nExecStart=/usr/bin/sleep infinity\n"
    )
    c.daemon_reload()
    c.start("tricky.service")
    state = show_unit("tricky.service", c.systemctl)
    assert state.environment == TRICKY_VALUES
    live = c.environ(state.main_pid)
    assert {name: live[name] for name in TRICKY_VALUES} == TRICKY_VALUES


@pytest.mark.systemd
def test_restarts_within_a_second_have_distinct_timestamps(probe: SystemdContainer) -> None:
    probe.restart("probe.service")
    first = show_unit("probe.service", probe.systemctl)
    probe.restart("probe.service")
    second = show_unit("probe.service", probe.systemctl)
    assert first.active_enter is not None and second.active_enter is not None
    assert second.active_enter - first.active_enter < timedelta(seconds=1)
    assert second.active_enter > first.active_enter
    assert second.main_pid != first.main_pid


@pytest.mark.systemd
def test_stopped_unit(systemd_container: SystemdContainer) -> None:
    c = systemd_container
    c.write_unit("idle.service", "[Service]\nExecStart=/usr/bin/sleep infinity\n")
    c.daemon_reload()
    state = show_unit("idle.service", c.systemctl)
    assert (state.load_state, state.active_state, state.main_pid) == ("loaded", "inactive", 0)
    assert state.active_enter is None and state.exec_main_start is None
    assert state.exec_start == (("/usr/bin/sleep", "infinity"),)


@pytest.mark.systemd
def test_several_exec_start_entries_live(systemd_container: SystemdContainer) -> None:
    c = systemd_container
    c.write_unit(
        "steps.service",
        '[Service]\nType=oneshot\nExecStart=/usr/bin/env A=1;B "" /usr/bin/true\n'
        "ExecStart=-/usr/bin/true second\n",
    )
    c.daemon_reload()
    state = show_unit("steps.service", c.systemctl)
    assert state.exec_start == (
        ("/usr/bin/env", "A=1;B", "", "/usr/bin/true"),
        ("/usr/bin/true", "second"),
    )
    facts = {f.key: f.value for f in unit_facts("service:steps", state)}
    assert facts["unit:exec_start"] == "/usr/bin/env 'A=1;B' '' /usr/bin/true\n/usr/bin/true second"


@pytest.mark.systemd
def test_nonexistent_unit_is_a_state_not_an_error(systemd_container: SystemdContainer) -> None:
    state = show_unit("no-such-unit.service", systemd_container.systemctl)
    assert (state.load_state, state.active_state, state.main_pid) == ("not-found", "inactive", 0)
    assert state.fragment_path == ""
    assert (state.exec_start, state.environment, state.environment_files) == ((), {}, ())


@pytest.mark.systemd
def test_edited_drop_in_is_pending_drift(systemd_container: SystemdContainer) -> None:
    c = systemd_container
    c.write_unit("drifting.service", "[Service]\nExecStart=/usr/bin/sleep infinity\n")
    c.write_unit("drifting.service.d/mode.conf", "[Service]\nEnvironment=MODE=old\n")
    c.daemon_reload()
    c.start("drifting.service")
    before = show_unit("drifting.service", c.systemctl)
    assert before.environment == {"MODE": "old"} and not before.need_daemon_reload

    c.write_unit("drifting.service.d/mode.conf", "[Service]\nEnvironment=MODE=new\n")
    edited = show_unit("drifting.service", c.systemctl)
    # systemd noticed the file changed but still holds the old configuration.
    assert edited.need_daemon_reload is True
    assert edited.environment == {"MODE": "old"}

    c.daemon_reload()
    reloaded = show_unit("drifting.service", c.systemctl)
    assert reloaded.need_daemon_reload is False
    assert reloaded.environment == {"MODE": "new"}
    # The running process was not restarted: it keeps the old value. That gap is the drift.
    assert reloaded.main_pid == before.main_pid
    assert c.environ(reloaded.main_pid)["MODE"] == "old"
