"""What systemd 252 prints about a unit's runs and launch settings, parsed as drift records it.

The outputs are recorded from `systemctl show --timestamp=us+utc` on systemd
252.39 (the container of tests/systemd_container.py); tests/test_crash_loop.py
checks the same parsers against a live systemd.
"""

from __future__ import annotations

from pathlib import Path

from drift.collectors.journal import JournalEntry, journalctl_command, select_runs
from drift.collectors.systemd import exit_text, parse_show, parse_unit_state, unit_facts
from drift.collectors.unit_limits import limit_facts, limits_set, service_assignments

# Between two runs of a unit whose server exits 1 (Restart=always, RestartSec=1).
AUTO_RESTART = """\
Restart=always
MainPID=0
Result=exit-code
NRestarts=4
ExecMainStartTimestamp=Thu 2026-12-03 18:19:37.899536 UTC
ExecMainPID=63
ExecMainCode=1
ExecMainStatus=1
ExecStartPre={ path=/bin/true ; argv[]=/bin/true ; ignore_errors=no ; \
start_time=[Thu 2026-12-03 18:19:36.869175 UTC] ; stop_time=[n/a] ; pid=60 ; \
code=(null) ; status=0/0 }
ExecStartPre={ path=/bin/mkdir ; argv[]=/bin/mkdir -p /run/x ; ignore_errors=yes ; \
start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
DeviceAllow=char-nvidia rwm
DeviceAllow=/dev/null rw
LimitCORE=infinity
LimitCORESoft=0
LimitNOFILE=65536
LimitNOFILESoft=65536
LimitNPROC=96362
LimitNPROCSoft=96362
LimitMEMLOCK=infinity
LimitMEMLOCKSoft=infinity
WorkingDirectory=/opt/serve
CPUAffinity=0-1
User=root
Id=crash.service
ActiveState=activating
SubState=auto-restart
InvocationID=2e7854980be548cfa4447c5f13f7cc63
"""

# A unit killed by SIGSEGV, in the same state.
KILLED = """Result=signal
NRestarts=0
ExecMainCode=2
ExecMainStatus=11
SubState=auto-restart
"""

# Starting again: systemd has reset how the last run went.
START_PRE = """Result=success
NRestarts=5
ExecMainStartTimestamp=
ExecMainPID=0
ExecMainCode=0
ExecMainStatus=0
SubState=start-pre
Restart=no
"""


def test_how_the_last_run_went_as_systemd_says_it() -> None:
    state = parse_unit_state("crash.service", parse_show(AUTO_RESTART))
    runtime = state.runtime
    assert (runtime.sub_state, runtime.result, runtime.n_restarts) == (
        "auto-restart",
        "exit-code",
        4,
    )
    assert (runtime.exec_main_pid, runtime.exec_main_code, runtime.exec_main_status) == (
        63,
        "exited",
        1,
    )
    assert runtime.invocation_id == "2e7854980be548cfa4447c5f13f7cc63" and runtime.failing
    facts = {f.key: f.value for f in unit_facts("service:crash", state)}
    assert facts["unit:exec_main_status"] == "exited 1"
    assert facts["unit:exec_main_start"] == "2026-12-03T18:19:37.899536+00:00"
    assert facts["unit:n_restarts"] == "4" and facts["unit:sub_state"] == "auto-restart"

    killed = parse_unit_state("x.service", parse_show(KILLED)).runtime
    assert exit_text(killed.exec_main_code, killed.exec_main_status) == "killed SIGSEGV"
    assert exit_text("dumped", 6) == "dumped SIGABRT" and exit_text("", 0) == ""

    fresh = parse_unit_state("x.service", parse_show(START_PRE))
    assert not fresh.runtime.failing and fresh.exec_main_start is None
    keys = {f.key for f in unit_facts("service:x", fresh)}
    # A run that has not ended says nothing of how it ended; Restart=no is the default.
    assert "unit:exec_main_status" not in keys and "unit:exec_main_start" not in keys
    assert "unit:restart" not in keys


def test_the_launch_settings_as_systemd_prints_them() -> None:
    state = parse_unit_state("crash.service", parse_show(AUTO_RESTART))
    settings = state.settings
    assert settings.exec_start_pre == ("/bin/true", "-/bin/mkdir -p /run/x")
    assert settings.device_allow == ("char-nvidia rwm", "/dev/null rw")
    assert (settings.user, settings.working_directory, settings.cpu_affinity) == (
        "root",
        "/opt/serve",
        "0-1",
    )
    assert settings.limits["NOFILE"] == "65536" and settings.limits["CORE"] == "0:infinity"
    facts = {f.key: f.value for f in unit_facts("service:crash", state)}
    assert facts["unit:exec_start_pre"] == "/bin/true\n-/bin/mkdir -p /run/x"
    assert facts["unit:restart"] == "always"
    assert not any(key.startswith("unit:limit:") for key in facts)  # the files decide


def test_only_the_limits_the_unit_files_set_are_recorded(tmp_path: Path) -> None:
    unit = tmp_path / "etc/systemd/system/crash.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(
        "[Unit]\nLimitNPROC=1\n[Service]\n# LimitAS=1\n"
        "LimitNOFILE=\\\n  65536\nLimitCORE=infinity\n"
    )
    drop_in = tmp_path / "etc/systemd/system/crash.service.d/reset.conf"
    drop_in.parent.mkdir(parents=True)
    drop_in.write_text("[Service]\nLimitCORE=\nLimitMEMLOCK=infinity\n")
    paths = ["/etc/systemd/system/crash.service", "/etc/systemd/system/crash.service.d/reset.conf"]
    # [Unit] and comments do not count; the drop-in's empty LimitCORE= unsets it.
    assert limits_set(paths, str(tmp_path)) == {"LimitNOFILE", "LimitMEMLOCK"}
    (continued,) = [
        a for a in service_assignments(unit.read_text().split("\n")) if a.key == "LimitNOFILE"
    ]
    assert (continued.line, continued.value) == (5, "65536")
    props = parse_show(AUTO_RESTART + f"FragmentPath={paths[0]}\nDropInPaths={paths[1]}\n")
    state = parse_unit_state("crash.service", props)
    facts = {f.key: f.value for f in limit_facts("service:crash", state, str(tmp_path))}
    assert facts == {"unit:limit:NOFILE": "65536", "unit:limit:MEMLOCK": "infinity"}
    # A file that cannot be read leaves the question open: no limit rather than a guess.
    assert limit_facts("service:crash", state, str(tmp_path / "elsewhere")) == []


def test_journalctl_is_the_configured_systemctl_s_neighbour() -> None:
    assert journalctl_command(["systemctl"]) == ["journalctl"]
    assert journalctl_command(["/usr/bin/systemctl"]) == ["/usr/bin/journalctl"]
    assert journalctl_command(["nsenter", "-t", "7", "-a", "systemctl"]) == [
        "nsenter",
        "-t",
        "7",
        "-a",
        "journalctl",
    ]


def test_the_journal_keeps_the_last_lines_of_the_last_runs() -> None:
    entries = []
    for run in ("r1", "r2", "r3", "r4"):
        entries += [JournalEntry(run, True, f"{run} line {i}") for i in range(10)]
        entries.append(
            JournalEntry(run, False, f"{run} Main process exited, code=exited, status=1/FAILURE")
        )
        entries.append(JournalEntry(run, False, f"{run} Stopped decode.service"))
    kept = select_runs(entries, "journalctl")
    assert kept.invocations == ("r2", "r3", "r4")
    lines = kept.text.split("\n")
    assert lines[:7] == [f"r2 line {i}" for i in range(4, 10)] + [
        "r2 Main process exited, code=exited, status=1/FAILURE"
    ]
    assert not any("Stopped" in line for line in lines)
