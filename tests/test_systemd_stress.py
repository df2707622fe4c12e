"""Stress: two units restarted 200 times each on a real systemd while `drift record` runs.

During a restart a unit's MainPID can name systemd's child before it runs the
unit's program: argv ``(bash)`` (or, for an instant, the manager's own argv),
systemd's executable, PID 1's environment. Recorded as the service, that child
once gave 32 false suspects. The storm and what it records are in
tests/systemd_stress.py; this test reads the history it left, as a user would
(`drift since`) and through drift's query layer, and prints the figures.
`benchmarks/stress_systemd.py` runs longer storms with the same checks.
"""

from __future__ import annotations

import json
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
        assert len(run.pids_recorded(name)) >= 10, (name, run.pids_recorded(name))
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
