"""`drift record` on a service run by a real systemd (booted in a container), read from the host.

The config points drift's systemctl at the container (nsenter) and its /proc
root at the container's /proc, as a user watching a containerised box would.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from collector_contract import facts_of, run_collector, undeclared
from conftest import changes_by_fact, run_drift
from systemd_container import SystemdContainer, systemd_container_fixture

from drift.collectors.registry import COLLECTORS
from drift.config import ServiceSpec
from drift.facts import CollectContext
from drift.subjects import SERVICE

pytestmark = pytest.mark.systemd

systemd_container = systemd_container_fixture()

TOKEN = "hf_" + "UnitEnvironmentTokenNeverStored77"

UNIT = f"""[Unit]
Description=decode server (test)

[Service]
ExecStart=/bin/bash /opt/serve/decode.sh
Environment=CUDA_VISIBLE_DEVICES=4,5,6,7 HF_TOKEN={TOKEN}
Environment=UNIT_NAME=%n
"""

SCRIPT = """#!/bin/bash
export SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0
exec /usr/bin/tail -f -n 0 --sleep-interval=30 /dev/null
"""


def since(tmp_path: Path, cfg: list[str], baseline: str) -> dict:
    out = run_drift(
        ["since", "--stable", baseline, "--all", "--format", "json", *cfg], tmp_path
    ).stdout
    return json.loads(out)["data"]


def changed(data: dict) -> dict[tuple[str, str], dict]:
    return changes_by_fact(data)


def test_unit_service_restart_env_and_pending_reload(
    systemd_container: SystemdContainer, tmp_path: Path
) -> None:
    box = systemd_container
    box.write_file("/opt/serve/decode.sh", SCRIPT)
    box.write_unit("decode.service", UNIT)
    box.write_unit("decode.service.d/override.conf", "[Service]\nEnvironment=DROPIN=yes\n")
    box.daemon_reload()
    box.start("decode.service")
    script_on_host = box.root / "opt/serve/decode.sh"
    config = tmp_path / "drift.toml"
    config.write_text(
        f'host = "ctr"\nsystemctl = {json.dumps(box.systemctl)}\nproc_root = "{box.proc_root}"\n'
        f'[[services]]\nname = "decode"\nunit = "decode.service"\nscript = "{script_on_host}"\n'
    )
    cfg = ["--config", str(config), "--db", str(tmp_path / "drift.db")]

    first = run_drift(["record", *cfg], tmp_path).stdout
    assert ", 0 errors," in first
    state = json.loads(
        run_drift(["show", "service:decode", "--format", "json", *cfg], tmp_path).stdout
    )["data"]["subjects"][0]["facts"]
    facts = {f["key"]: f for f in state}
    main_pid = int(box.run_systemctl("show", "-p", "MainPID", "--value", "decode.service").stdout)
    assert facts["pid"]["value"] == str(main_pid)
    assert facts["running"]["value"] == "true"
    assert facts["flag:--sleep-interval"]["value"] == "30"
    assert facts["env:SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"]["value"] == "0"
    assert facts["env:CUDA_VISIBLE_DEVICES"]["value"] == "4,5,6,7"
    assert facts["unit:environment:CUDA_VISIBLE_DEVICES"]["value"] == "4,5,6,7"
    assert facts["unit:environment:HF_TOKEN"]["secret"] is True
    # The line that wrote each variable, read from the unit's own files, as systemd merged them.
    assert facts["unit:environment:CUDA_VISIBLE_DEVICES"]["where"] == (
        "/etc/systemd/system/decode.service:6"
    )
    assert facts["unit:environment:DROPIN"]["where"] == (
        "/etc/systemd/system/decode.service.d/override.conf:2"
    )
    # systemd expanded %n: the line does not read as the value systemd holds, so none is claimed.
    assert facts["unit:environment:UNIT_NAME"]["value"] == "decode.service"
    assert facts["unit:environment:UNIT_NAME"]["where"] == "unit decode.service"
    assert facts["unit:need_daemon_reload"]["value"] == "no"
    assert facts["env:DROPIN"]["value"] == "yes"

    # The incident's change, on systemd: one export added, the unit restarted.
    box.write_file(
        "/opt/serve/decode.sh",
        SCRIPT.replace("exec ", "export SGLANG_SM120_MMA_TARGET_CTAS=512\nexec "),
    )
    box.restart("decode.service")
    run_drift(["record", *cfg], tmp_path)
    new_pid = int(box.run_systemctl("show", "-p", "MainPID", "--value", "decode.service").stdout)
    diff = changed(since(tmp_path, cfg, "#1"))
    export = diff[(f"script:{script_on_host}", "export:SGLANG_SM120_MMA_TARGET_CTAS")]
    assert export["after"] == "512" and export["provenance"]["line"] == 3
    live = diff[("service:decode", "env:SGLANG_SM120_MMA_TARGET_CTAS")]
    assert live["provenance"]["pid"] == new_pid != main_pid
    (restart,) = export["suspect"]["restarts"]  # the restart is context, not a suspect
    assert (restart["service"], restart["after_pid"]) == ("decode", str(new_pid))
    assert export["suspect"]["status"] == "live"
    assert ("service:decode", "unit:environment:CUDA_VISIBLE_DEVICES") not in diff

    # A drop-in edited but not reloaded: systemd says so; after daemon-reload the
    # unit's Environment= has the new value while the live process does not.
    box.write_unit(
        "decode.service.d/override.conf", "[Service]\nEnvironment=DROPIN=yes NEW_KNOB=1\n"
    )
    run_drift(["record", *cfg], tmp_path)
    diff = changed(since(tmp_path, cfg, "#2"))
    reload = diff[("service:decode", "unit:need_daemon_reload")]
    assert reload["after"] == "yes" and reload["suspect"]["status"] == "pending"
    box.daemon_reload()
    run_drift(["record", *cfg], tmp_path)
    diff = changed(since(tmp_path, cfg, "#2"))
    knob = diff[("service:decode", "unit:environment:NEW_KNOB")]
    assert knob["after"] == "1" and knob["suspect"]["status"] == "pending"
    assert knob["where"] == "/etc/systemd/system/decode.service.d/override.conf:2"
    assert knob["provenance"]["text"] == "Environment=DROPIN=yes NEW_KNOB=1"
    assert "not applied yet" in knob["suspect"]["label"]
    assert ("service:decode", "env:NEW_KNOB") not in diff
    assert ("service:decode", "unit:need_daemon_reload") not in diff

    box.stop_unit("decode.service")
    run_drift(["record", *cfg], tmp_path)
    diff = changed(since(tmp_path, cfg, "#4"))
    assert diff[("service:decode", "running")]["after"] == "false"
    assert diff[("service:decode", "env:SGLANG_SM120_MMA_TARGET_CTAS")]["kind"] == "removed"

    everything = run_drift(["history", "decode", *cfg], tmp_path).stdout
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("drift.db*"))
    assert TOKEN not in everything and TOKEN.encode() not in stored


def test_a_unit_service_writes_only_what_its_collector_declares(
    systemd_container: SystemdContainer,
) -> None:
    # The one kind of fact tests/test_collect_registry.py cannot produce: systemd's.
    box = systemd_container
    box.write_file("/opt/serve/declared.sh", SCRIPT)
    box.write_unit("declared.service", UNIT.replace("decode.sh", "declared.sh"))
    box.write_unit(
        "declared.service.d/override.conf",
        "[Service]\nEnvironment=DROPIN=yes\nEnvironmentFile=-/etc/declared.env\n"
        "PassEnvironment=container\n",
    )
    box.write_file("/etc/declared.env", "FROM_FILE=1\nexport IGNORED=1\n")
    box.write_unit(
        "declared.service.d/settings.conf",
        "[Service]\nExecStartPre=-/bin/true\nUser=root\nWorkingDirectory=/\nLimitNOFILE=65536\n"
        "CPUAffinity=0\nDeviceAllow=/dev/null rw\nRestart=on-failure\n",
    )
    box.daemon_reload()
    box.start("declared.service")
    try:
        services = COLLECTORS[0]
        ctx = CollectContext(systemctl=tuple(box.systemctl), proc_root=box.proc_root)
        items = run_collector(services, ServiceSpec("declared", unit="declared.service"), ctx)
    finally:
        box.stop_unit("declared.service")
    assert undeclared(services, items) == []
    facts = facts_of(items)
    written = {key.shown for fact in facts if (key := SERVICE.key(fact.key)) is not None}
    # How a run ended and the journal are read only while a unit fails (test_crash_loop.py).
    failing_only = {"unit:exec_main_status", "unit:journal"}
    assert {key.shown for key in SERVICE.keys if key.key.startswith("unit:")} - failing_only <= (
        written
    )
    assert {"unit", "fragment", "drop_ins"} <= {name for f in facts for name in f.provenance}


WAITER = """[Unit]
Description=a server whose start waits on its input (test)

[Service]
ExecStart=/bin/cat
StandardInput=file:/run/waiter.in
StandardOutput=null
"""


def test_systemd_s_child_caught_before_its_exec_is_a_blind_spot_not_the_service(
    systemd_container: SystemdContainer, tmp_path: Path
) -> None:
    """Mid-start, the unit's MainPID is systemd's fork, named `(cat)`, with the manager's
    environment. systemd opens the unit's input before the exec: a FIFO nobody writes
    holds the fork there for as long as the test needs, as a restart does for an instant."""
    box = systemd_container
    fifo = box.root / "run/waiter.in"
    os.mkfifo(fifo)
    box.write_unit("waiter.service", WAITER)
    box.daemon_reload()
    box.run_systemctl("start", "--no-block", "waiter.service")
    config = tmp_path / "drift.toml"
    config.write_text(
        f'host = "ctr"\nsystemctl = {json.dumps(box.systemctl)}\nproc_root = "{box.proc_root}"\n'
        '[[services]]\nname = "waiter"\nunit = "waiter.service"\n'
    )
    cfg = ["--config", str(config), "--db", str(tmp_path / "drift.db")]
    deadline = time.monotonic() + 30

    def main_pid() -> int:
        return int(box.run_systemctl("show", "-p", "MainPID", "--value", "waiter.service").stdout)

    while main_pid() <= 0:
        assert time.monotonic() < deadline, "systemd did not fork the unit's process"
        time.sleep(0.05)

    caught = run_drift(["record", *cfg], tmp_path, check=False)
    assert caught.returncode == 4, caught.stderr  # stored, with a blind spot
    assert "systemd is still starting waiter.service" in caught.stderr
    assert "has not run the unit's program yet" in caught.stderr
    shown = run_drift(["show", "service:waiter", "--format", "json", *cfg], tmp_path).stdout
    assert '"env:container"' not in shown and "systemd-nspawn" not in shown

    with open(fifo, "wb"):  # the fork's open returns, it runs cat, which reads until we close
        while not os.readlink(f"{box.proc_root}/{main_pid()}/exe").endswith("/cat"):
            assert time.monotonic() < deadline, "the unit never ran its program"
            time.sleep(0.05)
        run_drift(["record", *cfg], tmp_path)
        facts = {
            f["key"]: f["value"]
            for f in json.loads(
                run_drift(["show", "service:waiter", "--format", "json", *cfg], tmp_path).stdout
            )["data"]["subjects"][0]["facts"]
        }
    assert facts["running"] == "true" and facts["exe"].endswith("/cat")
    assert "env:container" not in facts  # the program's environment, not the manager's
    box.stop_unit("waiter.service")
