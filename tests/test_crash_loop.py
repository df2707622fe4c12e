"""Crash loops and restarts on a real systemd (booted in a container), read from the host.

systemd is the oracle: what it says about the unit (NRestarts, how the main
process ended, ExecMainStartTimestamp) is what drift must report, and the
unit's journal is where the evidence lines come from.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from collector_contract import facts_of, run_collector, undeclared
from conftest import run_drift
from systemd_container import SystemdContainer, systemd_container_fixture

from drift.collectors.registry import COLLECTORS
from drift.config import ServiceSpec
from drift.facts import CollectContext

pytestmark = pytest.mark.systemd

systemd_container = systemd_container_fixture()

TOKEN = "hf_" + "CrashLoopJournalTokenNeverStored42"
KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"

# The server refuses the knob: with it set, it prints why and exits 1 at once.
SERVER = f"""#!/bin/bash
echo "loading weights (token {TOKEN})"
if [ -n "${KNOB}" ]; then
    echo "CUDA error: invalid CTAS target ${KNOB} for sm120" >&2
    exit 1
fi
exec /usr/bin/tail -f -n 0 --sleep-interval=30 /dev/null
"""
SCRIPT = """#!/bin/bash
export SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0
exec /bin/bash /opt/serve/server.sh
"""


def unit(script: str, restart_sec: str = "300ms") -> str:
    return f"""[Unit]
Description=test service
StartLimitIntervalSec=0

[Service]
ExecStart=/bin/bash {script}
Restart=always
RestartSec={restart_sec}
"""


def show(box: SystemdContainer, unit_name: str, *props: str) -> dict[str, str]:
    out = box.run_systemctl("show", "--timestamp=us+utc", unit_name, "-p", ",".join(props)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def wait_for(check: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Box:
    """A container with drift's config pointed at it, and a database in tmp_path."""

    def __init__(self, box: SystemdContainer, tmp_path: Path, services: list[str]) -> None:
        self.box = box
        self.tmp_path = tmp_path
        config = tmp_path / "drift.toml"
        lines = [
            'host = "ctr"',
            f"systemctl = {json.dumps(box.systemctl)}",
            f'proc_root = "{box.proc_root}"',
        ]
        for name in services:
            script = box.root / f"opt/serve/{name}.sh"
            lines += [
                "[[services]]",
                f'name = "{name}"',
                f'unit = "{name}.service"',
                f'script = "{script}"',
            ]
        lines += ["[[files]]", 'name = "notes"', f'paths = ["{box.root}/etc/serve/*.txt"]']
        config.write_text("\n".join(lines) + "\n")
        self.cfg = ["--config", str(config), "--db", str(tmp_path / "drift.db")]

    def record(self) -> str:
        # A record during a crash loop may find a blind spot (a run mid-start): exit 4 is fine.
        result = run_drift(["record", *self.cfg], self.tmp_path, check=False)
        assert result.returncode in (0, 4), result.stderr
        return result.stdout

    def since(self, baseline: str, *extra: str) -> dict[str, Any]:
        out = run_drift(
            ["since", "--stable", baseline, "--all", "--format", "json", *extra, *self.cfg],
            self.tmp_path,
        ).stdout
        data: dict[str, Any] = json.loads(out)["data"]
        return data

    def text(self, baseline: str) -> str:
        return run_drift(["since", "--stable", baseline, *self.cfg], self.tmp_path).stdout


def serve_script(name: str, export: str = "") -> str:
    """NAME's serve script, with one more export line if given."""
    text = SCRIPT.replace("server.sh", f"{name}-server.sh")
    return text.replace("exec ", f"export {export}\nexec ") if export else text


def serve(box: SystemdContainer, name: str) -> None:
    box.write_file(f"/opt/serve/{name}.sh", serve_script(name))
    box.write_file(f"/opt/serve/{name}-server.sh", SERVER)
    box.write_unit(f"{name}.service", unit(f"/opt/serve/{name}.sh"))


def test_a_crash_loop_is_told_with_its_cause_first(
    systemd_container: SystemdContainer, tmp_path: Path
) -> None:
    box = systemd_container
    for name in ("decode", "prefill"):
        serve(box, name)
    # Long enough between runs for a record (a new drift process) to see decode between two.
    box.write_unit("decode.service", unit("/opt/serve/decode.sh", restart_sec="2s"))
    box.write_file("/etc/serve/notes.txt", "tuning notes\n")
    box.daemon_reload()
    for name in ("decode", "prefill"):
        box.restart(f"{name}.service")
    drift = Box(box, tmp_path, ["decode", "prefill"])
    drift.record()
    drift.record()  # #2: the stable baseline

    # The incident: decode.sh gains the export; decode is restarted and crash-loops.
    box.write_file("/opt/serve/decode.sh", serve_script("decode", f"{KNOB}=512"))
    # Noise: another service changed and restarted, and an unrelated file edited.
    box.write_file("/opt/serve/prefill.sh", serve_script("prefill", "NCCL_DEBUG=INFO"))
    box.restart("prefill.service")
    box.write_file("/etc/serve/notes.txt", "tuning notes, edited\n")
    box.restart("decode.service")
    for _ in range(3):
        drift.record()
        time.sleep(0.4)
    # The last record catches decode between two runs, as systemd says before and after it.
    props = ("SubState", "InvocationID", "NRestarts", "ExecMainStatus", "ExecMainCode")
    for _ in range(40):
        wait_for(
            lambda: show(box, "decode.service", "SubState")["SubState"] == "auto-restart",
            "decode between runs",
        )
        before = show(box, "decode.service", *props)
        drift.record()
        after = show(box, "decode.service", *props)
        if before == after and int(after["NRestarts"]) >= 3:
            break
    else:
        raise AssertionError("no record caught decode between two runs")
    restarts = int(after["NRestarts"])
    # What the services collector writes of a failing unit is all declared, the journal too.
    wait_for(
        lambda: show(box, "decode.service", "SubState")["SubState"] == "auto-restart",
        "decode between runs",
    )
    items = run_collector(
        COLLECTORS[0],
        ServiceSpec("decode", unit="decode.service"),
        CollectContext(systemctl=tuple(box.systemctl), proc_root=box.proc_root),
    )
    assert undeclared(COLLECTORS[0], items) == []
    keys = {f.key for f in facts_of(items)}
    assert {"unit:exec_main_status", "unit:journal", "unit:sub_state", "unit:result"} <= keys
    assert restarts >= 3 and after["ExecMainStatus"] == "1" and after["ExecMainCode"] == "1"

    data = drift.since("#2")
    top = data["suspects"][0]
    assert top["title"].startswith(f"export {KNOB}=512 added to ")
    assert top["title"].endswith("/opt/serve/decode.sh:3")
    assert top["status"] == "failing"
    assert "not applied yet" not in top["label"]
    # The edit and the first failing start fell between the same two records: the label
    # claims "every start" only for those known to come after the change.
    assert re.match(r"applied at (every start|the failing starts) of decode", top["label"])
    assert "decode crash-looping since " in top["label"]
    assert f"({restarts} restarts, exit 1)" in top["label"]
    failure = top["failure"]
    assert failure["service"] == "decode" and failure["restarts"] == restarts
    assert failure["exit"] == "exit 1" and failure["state"] == "failing"
    # The evidence: the unit's own journal lines of its failing runs, the secret masked.
    journal = "\n".join(failure["journal"])
    assert "CUDA error: invalid CTAS target 512 for sm120" in journal
    assert "status=1/FAILURE" in journal
    assert TOKEN not in journal and "[redacted:" in journal
    # The noise ranks below; the stop is a symptom, never above the cause.
    titles = [s["title"] for s in data["suspects"]]
    prefill = next(s for s in data["suspects"] if "NCCL_DEBUG" in s["title"])
    assert prefill["status"] == "live" and prefill["rank"] > 1
    symptom = next(s for s in data["suspects"] if s["title"].startswith("decode crash-looping"))
    assert symptom["rank"] > prefill["rank"] and symptom["status"] == "changed"
    assert not any(t == "decode stopped" for t in titles)
    assert any(
        t["kind"] == "failure" and t["text"].startswith("decode crash-looping since")
        for t in data["timeline"]
    )

    text = drift.text("#2")
    assert "crash-looping since" in text and "journal of decode's failing runs:" in text
    assert "CUDA error: invalid CTAS target 512" in text
    for fmt in ("md", "html"):
        report = tmp_path / f"report.{fmt}"
        run_drift(["report", "--stable", "#2", "-o", str(report), *drift.cfg], tmp_path)
        shown = report.read_text()
        assert "crash-looping since" in shown and "invalid CTAS target 512" in shown

    stored = b"".join(p.read_bytes() for p in tmp_path.glob("drift.db*"))
    assert TOKEN.encode() not in stored

    # The loop ends: the export goes, decode runs again; the loop is told as one that ended.
    box.write_file("/opt/serve/decode.sh", serve_script("decode"))
    wait_for(
        lambda: show(box, "decode.service", "SubState")["SubState"] == "running", "decode running"
    )
    drift.record()
    time.sleep(0.3)
    drift.record()
    data = drift.since("#2")
    (loop,) = [t for t in data["timeline"] if t["kind"] == "failure"]
    assert loop["text"].startswith("decode crash-looped from ")
    assert "running again since" in loop["text"]
    assert not any("crash-looping" in s["label"] for s in data["suspects"])


def test_ten_restarts_of_router_are_counted_and_not_tied_to_decode(
    systemd_container: SystemdContainer, tmp_path: Path
) -> None:
    box = systemd_container
    for name in ("router", "web"):
        serve(box, name)
        box.write_unit(f"{name}.service", unit(f"/opt/serve/{name}.sh", restart_sec="100ms"))
    box.daemon_reload()
    for name in ("router", "web"):
        box.restart(f"{name}.service")
    drift = Box(box, tmp_path, ["router", "web"])
    drift.record()

    box.restart("web.service")  # once, by hand
    drift.record()
    time.sleep(6)  # further from web's restart than any co-restart
    for _ in range(10):
        pid = show(box, "router.service", "MainPID")["MainPID"]
        box.run_systemctl("kill", "-s", "KILL", "router.service")

        def restarted(pid: str = pid) -> bool:
            now = show(box, "router.service", "MainPID", "SubState")
            return now["SubState"] == "running" and now["MainPID"] not in ("0", pid)

        wait_for(restarted, "router restarted")
        drift.record()
    counted = int(show(box, "router.service", "NRestarts")["NRestarts"])
    assert counted == 10  # systemd's own count: the oracle

    timeline = [t["text"] for t in drift.since("#1")["timeline"] if t["kind"] == "restart"]
    (router,) = [t for t in timeline if t.startswith("router restarted")]
    assert router.startswith(f"router restarted {counted} times (")
    assert any(t.startswith("restart of web (pids ") for t in timeline)
    assert not any(t.startswith("co-restart") for t in timeline), timeline

    # Restarted together by one command: that is a co-restart, of those two only.
    box.run_systemctl("restart", "router.service", "web.service")
    drift.record()
    timeline = [t["text"] for t in drift.since("#12")["timeline"] if t["kind"] == "restart"]
    assert any(
        t.startswith("co-restart of router, web") or t.startswith("co-restart of web, router")
        for t in timeline
    ), timeline


def test_started_at_is_systemd_s_own_stamp_to_the_microsecond(
    systemd_container: SystemdContainer, tmp_path: Path
) -> None:
    box = systemd_container
    serve(box, "stamp")
    box.daemon_reload()
    box.restart("stamp.service")
    drift = Box(box, tmp_path, ["stamp"])
    drift.record()
    facts = json.loads(
        run_drift(["show", "service:stamp", "--format", "json", *drift.cfg], tmp_path).stdout
    )["data"]["subjects"][0]["facts"]
    started = {f["key"]: f for f in facts}["started_at"]
    stamp = show(box, "stamp.service", "ExecMainStartTimestamp", "ExecMainPID", "MainPID")
    assert stamp["ExecMainPID"] == stamp["MainPID"]
    moment = datetime.strptime(stamp["ExecMainStartTimestamp"], "%a %Y-%m-%d %H:%M:%S.%f UTC")
    assert started["value"] == moment.replace(tzinfo=UTC).isoformat(timespec="microseconds")
    assert started["provenance"]["source"] == "ExecMainStartTimestamp of stamp.service"
