"""A unit's serve script reads its relative paths from the unit's WorkingDirectory=.

On a real systemd (booted in a container): the same script, ``. ./common.sh``,
run by units with each kind of WorkingDirectory= (none: ``/``; a folder; ``~``;
``-DIR`` not there) and through a wrapper that hides where it starts. What the
unit's process really got (/proc/PID/environ) decides what drift may claim.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_drift
from systemd_container import SystemdContainer, systemd_container_fixture

pytestmark = pytest.mark.systemd

systemd_container = systemd_container_fixture()

SCRIPT = """#!/bin/bash
. ./common.sh
export TP=8
exec /usr/bin/tail -f -n 0 --sleep-interval=30 /dev/null
"""

# unit -> (its [Service] lines, how it runs /opt/serve/UNIT.sh)
UNITS = {
    "plain": ("", "{script}"),
    "served": ("WorkingDirectory=/opt/serve", "{script}"),
    "tmp": ("WorkingDirectory=/tmp", "/bin/bash {script}"),
    "home": ("WorkingDirectory=~", "{script}"),
    "gone": ("WorkingDirectory=-/nonexistent", "{script}"),
    "wrapped": ("WorkingDirectory=/tmp", "/bin/sh -c 'exec {script}'"),
}


def test_the_start_folder_is_the_units_working_directory(
    systemd_container: SystemdContainer, tmp_path: Path
) -> None:
    box = systemd_container
    box.write_file("/opt/serve/common.sh", "export COMMON=serve\n")
    box.write_file("/tmp/common.sh", "# another folder's\nexport COMMON=tmp\n")
    services = ""
    for name, (setting, exec_start) in UNITS.items():
        script = f"/opt/serve/{name}.sh"
        os.chmod(box.write_file(script, SCRIPT), 0o755)
        unit = f"[Service]\nExecStart={exec_start.format(script=script)}\n{setting}\n"
        box.write_unit(f"{name}.service", unit)
        services += f'[[services]]\nname = "{name}"\nunit = "{name}.service"\nscript = "{script}"\n'
    box.daemon_reload()
    for name in UNITS:
        box.start(f"{name}.service")
    (tmp_path / "leader.pid").write_text(f"{box.leader_pid}\n")
    config = tmp_path / "drift.toml"
    container = '[container]\nname = "box"\npidfile = "leader.pid"\n'
    config.write_text(f'host = "box"\n{container}{services}')
    cfg = ["--config", str(config), "--db", str(tmp_path / "drift.db")]
    try:
        recorded = run_drift(["record", *cfg], tmp_path, check=False)
        shown = json.loads(run_drift(["show", "--format", "json", *cfg], tmp_path).stdout)["data"]
        live = {name: _live_env(box, f"{name}.service") for name in UNITS}
    finally:
        for name in UNITS:
            box.stop_unit(f"{name}.service")
    facts = {s["subject"]: {f["key"]: f for f in s["facts"]} for s in shown["subjects"]}
    script = {name: facts[f"script:/opt/serve/{name}.sh"] for name in UNITS}

    # systemd is the oracle: what each process got.
    assert {name: env.get("COMMON") for name, env in live.items()} == {
        "plain": None,
        "served": "serve",
        "tmp": "tmp",
        "home": None,
        "gone": None,
        "wrapped": "tmp",
    }
    # What drift says the launch gets for sure (one line, no condition) the process has.
    for name, exports in script.items():
        for key, fact in exports.items():
            sure = fact["provenance"].get("line") and not {"when", "possible"} & set(
                fact["provenance"]
            )
            if key.startswith("export:") and sure:
                assert live[name].get(key.removeprefix("export:")) == fact["value"], (name, key)
    # Read from the unit's working folder; none there: not claimed, and said.
    assert script["served"]["export:COMMON"]["where"] == "/opt/serve/common.sh:1 in container box"
    assert script["tmp"]["export:COMMON"]["where"] == "/tmp/common.sh:2 in container box"
    for name in ("plain", "home", "gone"):
        assert "export:COMMON" not in script[name]
        assert script[name]["export:TP"]["value"] == "8"
    gaps = [line for line in recorded.stderr.splitlines() if "no such file" in line]
    assert sorted(gaps) == sorted(
        f"  ! script:/opt/serve/{name}.sh reading: /opt/serve/{name}.sh:2: sources ./common.sh: "
        f"no such file in {why}"
        for name, why in (
            ("plain", "/ (unit plain.service sets no WorkingDirectory=)"),
            ("home", "/root (the home of root, unit home.service's WorkingDirectory=~)"),
            ("gone", "/ (unit gone.service's WorkingDirectory=-/nonexistent is not there)"),
        )
    )
    # Through a wrapper the folder it starts in is not the unit's to say: never one line.
    wrapped = script["wrapped"]["export:COMMON"]
    assert "line" not in wrapped["provenance"]
    assert {p.get("kind") for p in wrapped["provenance"]["possible"]} == {None, "unknown"}


def _live_env(box: SystemdContainer, unit: str) -> dict[str, str]:
    pid = int(box.run_systemctl("show", "-p", "MainPID", "--value", unit).stdout)
    assert pid > 0, f"{unit} is not running"
    return box.environ(pid)
