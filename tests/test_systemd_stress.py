"""Stress: two units restarted 200 times each on a real systemd while `drift record` runs.

During a restart a unit's MainPID can name systemd's child before it runs the
unit's program: argv ``(bash)`` (or, for an instant, the manager's own argv),
systemd's executable, PID 1's environment. Recorded as the service, that child
once gave 32 false suspects. The storm and what it records are in
tests/systemd_stress.py; this test reads the history it left, as a user would
(`drift since`) and through drift's query layer, and prints the figures.
`benchmarks/stress_systemd.py` runs longer storms with the same checks. The
last test holds still another moment a restart hides: a MainPID that has exited
and that systemd has not reaped yet.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import run_drift
from systemd_container import SystemdContainer, systemd_container_fixture
from systemd_stress import StressRun, run_stress

pytestmark = pytest.mark.systemd

systemd_container = systemd_container_fixture()

# The count. A storm takes about 45 s on two busy cores; the cap keeps a
# much slower runner from hanging, and the test then says how far it got.
RESTARTS = 200
CAP_SECONDS = 75.0


def test_200_restarts_while_recording_never_record_systemd_s_child(
    systemd_container: SystemdContainer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_stress(systemd_container, tmp_path, restarts=RESTARTS, seconds=CAP_SECONDS)
    with capsys.disabled():
        print(f"\n{run.summary()}")
    check_history(run)
    assert run.restarts["router"] == RESTARTS
    assert run.restarts["decode"] >= RESTARTS


def check_history(run: StressRun) -> None:
    """What a user could find in the history: never the child, always a known state."""
    assert run.failures == []
    assert run.unexpected_exits == [], run.unexpected_exits
    # Nothing of systemd's child, in the history or in any in-process collection.
    traces = [
        (v.subject, trace)
        for v in run.service_versions()
        if (trace := run.from_the_manager(v.key, v.value)) is not None
    ]
    assert traces == []
    assert run.collected_from_manager == []
    # Every record holds the unit's program, "not running", or says it could not tell.
    for name in run.services:
        for outcome in run.outcomes(name):
            assert outcome.kind in {"program", "stopped", "blind"}, outcome
    assert all(kind.split()[1] in {"program", "stopped", "blind"} for kind in run.collected), (
        run.collected
    )
    # The race was run: the records fell between restarts, and drift's finder met the child.
    for name in run.services:
        assert len(run.pids_recorded(name)) >= 5, (name, run.pids_recorded(name))
    assert run.children_met, "the finder never met systemd's child: the race was not run"
    # And `drift since` from the first record tells no story of PID 1's environment.
    data = json.loads(
        run_drift(
            ["since", "--stable", "#1", "--all", "--format", "json", *run.cfg], run.tmp_path
        ).stdout
    )["data"]
    told = json.dumps(data)
    for name in run.manager_only_env:
        assert f'"env:{name}"' not in told, name
    for trace in ("systemd-nspawn", '"/usr/lib/systemd/systemd"', "(bash)", "(timeout)"):
        assert trace not in told, trace


# Type=forking with a PIDFile naming a process that is not systemd's child: when it
# exits, its parent (a sleep) never reaps it and systemd, as it warns, does not
# notice. The MainPID stays a zombie for good: the moment a restart hides, held still.
UNREAPED_UNIT = """[Service]
Type=forking
PIDFile=/run/unreaped.pid
ExecStart=/bin/bash /opt/serve/unreaped.sh
"""

UNREAPED_SCRIPT = """#!/bin/bash
bash -c '( echo $BASHPID > /run/unreaped.pid; exec sleep 2 ) & exec sleep infinity' &
while [ ! -s /run/unreaped.pid ]; do sleep 0.01; done
"""


def test_a_main_pid_that_has_exited_is_a_blind_spot_that_says_so(
    systemd_container: SystemdContainer, tmp_path: Path
) -> None:
    """systemd still names a MainPID that has exited (mid-restart, it reaps it a moment
    later): drift asks again, then says the pid has exited, not that it is missing from
    /proc (which would point at a wrong proc_root) and not that the service stopped."""
    box = systemd_container
    box.write_file("/opt/serve/unreaped.sh", UNREAPED_SCRIPT)
    box.write_unit("unreaped.service", UNREAPED_UNIT)
    box.daemon_reload()
    box.start("unreaped.service")
    config = tmp_path / "drift.toml"
    config.write_text(
        f'host = "ctr"\nsystemctl = {json.dumps(box.systemctl)}\nproc_root = "{box.proc_root}"\n'
        '[[services]]\nname = "unreaped"\nunit = "unreaped.service"\n'
    )
    cfg = ["--config", str(config), "--db", str(tmp_path / "drift.db")]
    try:
        pid = box.run_systemctl("show", "-p", "MainPID", "--value", "unreaped.service").stdout
        run_drift(["record", *cfg], tmp_path)
        stat = Path(f"{box.proc_root}/{pid.strip()}/stat")
        deadline = time.monotonic() + 10
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the unit's main process did not exit"
            time.sleep(0.05)
        caught = run_drift(["record", *cfg], tmp_path, check=False)
        assert caught.returncode == 4, caught.stderr  # stored, with a blind spot
        assert f"systemd reports MainPID {pid.strip()}, which has exited" in caught.stderr
        assert "not found in" not in caught.stderr
        shown = json.loads(
            run_drift(["show", "service:unreaped", "--format", "json", *cfg], tmp_path).stdout
        )["data"]["subjects"][0]["facts"]
        facts = {f["key"]: f["value"] for f in shown}
        assert (facts["running"], facts["pid"]) == ("true", pid.strip())  # kept, not "stopped"
    finally:
        box.stop_unit("unreaped.service")
