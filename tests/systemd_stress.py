"""A restart storm on a real systemd while `drift record` runs back to back, and what it left.

Two units, each with a drop-in, an EnvironmentFile and a serve script that does
a little work before it execs the server, as launchers do:

- ``decode.service`` crash-loops: its server exits with a failure after a
  moment, and ``Restart=always``, ``RestartSec=50ms``, ``StartLimitIntervalSec=0``
  start it again, over and over. It is hardened (``PrivateTmp=``,
  ``ProtectSystem=``): systemd builds its mount namespace in the forked child,
  so the child holds the MainPID for longer before it execs;
- ``router.service`` runs until the host restarts it through the container's
  systemctl, again and again, a random moment apart.

Meanwhile real `drift record` processes write one SQLite history, one after
another with no pause, as cron would if a record took a minute. Beside them,
drift's own service collector runs in a forked process as often as it can, with a
spy on `systemd_child` that counts each time the finder met systemd's child and
asked again: the proof that the race is run, since a record that met the child
and then found the program says nothing of it. `StressRun` reads the history
through drift's own query layer. Used by tests/test_systemd_stress.py and
benchmarks/stress_systemd.py.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from conftest import run_drift
from systemd_container import SystemdContainer

from drift.collectors import locate
from drift.collectors.services import collect_service
from drift.config import ServiceSpec
from drift.facts import CollectContext, CollectionError, Fact
from drift.store.query import History, StoredVersion
from drift.store.urls import resolve_db_url

HOST = "stress"
SERVICES = {"decode": "decode.service", "router": "router.service"}
# The executables each unit's process may run: bash for the serve script, then the server.
PROGRAMS = {
    "decode": {"/usr/bin/bash", "/usr/bin/timeout"},
    "router": {"/usr/bin/bash", "/usr/bin/sleep"},
}
# What systemd's child runs before its exec: systemd itself (<= 254) or its executor (>= 255).
MANAGER_EXES = {"systemd", "systemd-executor"}
STILL_STARTING = "is still starting"  # drift's blind spot for a child that has not exec'd

ENV_FILE = "".join(f"SGLANG_KNOB_{i}=value-{i}\n" for i in range(40))

DECODE_UNIT = """[Unit]
Description=decode server that keeps crashing (stress test)
StartLimitIntervalSec=0

[Service]
ExecStart=/bin/bash /opt/serve/decode.sh
EnvironmentFile=/etc/serve/decode.env
Environment=CUDA_VISIBLE_DEVICES=4,5,6,7
Restart=always
RestartSec=50ms
PrivateTmp=yes
ProtectSystem=strict
ProtectHome=yes
"""

DECODE_SCRIPT = """#!/bin/bash
export SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0
# a little work before the exec, as launchers do: read the configs, pick a port
for f in /etc/serve/*.env; do while read -r line; do :; done < "$f"; done
export PORT=$((30000 + RANDOM % 10))
# the server "crashes" (timeout exits 124) a moment after it starts
exec /usr/bin/timeout 0.1 /usr/bin/sleep 60
"""

ROUTER_UNIT = """[Unit]
Description=router (stress test)
# The host restarts it far more often than the default 5 starts in 10 s allow.
StartLimitIntervalSec=0

[Service]
ExecStart=/bin/bash /opt/serve/router.sh
EnvironmentFile=/etc/serve/router.env
Environment=ROUTER_POLICY=round_robin
"""

ROUTER_SCRIPT = """#!/bin/bash
export ROUTER_WORKERS=2
for f in /etc/serve/*.env; do while read -r line; do :; done < "$f"; done
exec /usr/bin/sleep infinity
"""


@dataclass
class RecordRun:
    """One `drift record` process: its exit code, wall time and stderr."""

    returncode: int
    seconds: float
    stderr: str


@dataclass
class Outcome:
    """What one snapshot holds for one service."""

    snapshot: int
    kind: str  # "program", "stopped", "blind", or anything else (a failure)
    detail: str


@dataclass
class StressRun:
    """A finished storm: its config, what each loop counted, and the history it left."""

    box: SystemdContainer
    tmp_path: Path
    cfg: list[str]
    db: Path
    manager_only_env: set[str]
    services: dict[str, str] = field(default_factory=lambda: dict(SERVICES))
    records: list[RecordRun] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)  # what stopped a loop early
    # The in-process finder: what each collection gave, and systemd's children it met.
    collected: Counter[str] = field(default_factory=Counter)
    children_met: Counter[str] = field(default_factory=Counter)
    collected_from_manager: list[str] = field(default_factory=list)

    @property
    def unexpected_exits(self) -> list[tuple[int, str]]:
        """Records that neither stored cleanly (0) nor stored with a blind spot (4)."""
        return [(r.returncode, r.stderr[-500:]) for r in self.records if r.returncode not in (0, 4)]

    def history(self) -> History:
        return History.open(resolve_db_url(str(self.db)), HOST)

    def service_versions(self) -> list[StoredVersion]:
        """Every value any service fact ever had."""
        with self.history() as history:
            return history.versions_of("service:*")

    def pids_recorded(self, name: str) -> set[str]:
        return {
            v.value or ""
            for v in self.service_versions()
            if v.subject == f"service:{name}" and v.key == "pid"
        }

    def from_the_manager(self, key: str, value: str | None) -> str | None:
        """Why a service fact can only have come from systemd's child, or None."""
        return manager_trace(key, value or "", self.manager_only_env)

    def outcomes(self, name: str) -> list[Outcome]:
        """Per snapshot, what was recorded of service `name`."""
        subject = f"service:{name}"
        out = []
        with self.history() as history:
            for snap in history.snapshots_between(0, history.latest().id):
                errors = [e for e in snap.errors if e.get("subject") == subject]
                if errors:
                    out.append(Outcome(snap.id, "blind", "; ".join(e["message"] for e in errors)))
                    continue
                state = history.state_at(snap.id)
                running = state.get((subject, "running"))
                exe = state.get((subject, "exe"))
                if running is not None and running.value == "false":
                    out.append(Outcome(snap.id, "stopped", ""))
                elif exe is not None and exe.value in PROGRAMS[name]:
                    out.append(Outcome(snap.id, "program", exe.value or ""))
                else:
                    out.append(Outcome(snap.id, "other", repr((running, exe))))
        return out

    def blind_spots(self) -> Counter[str]:
        """How many records could not tell what each service ran, by reason."""
        counts: Counter[str] = Counter()
        for name in self.services:
            for outcome in self.outcomes(name):
                if outcome.kind == "blind":
                    counts[f"{name}: {_reason(outcome.detail)}"] += 1
        return counts

    def summary(self) -> str:
        """The figures, in words."""
        seconds = sorted(r.seconds for r in self.records) or [0.0]
        lines = [
            f"{len(self.records)} drift records in {self.seconds:.1f} s "
            f"(median {seconds[len(seconds) // 2]:.2f} s), "
            f"exit codes {dict(Counter(r.returncode for r in self.records))}",
            f"restarts: {self.restarts}",
        ]
        for name in self.services:
            kinds = Counter(o.kind for o in self.outcomes(name))
            lines.append(
                f"recorded of {name}: {dict(kinds)}, {len(self.pids_recorded(name))} distinct pids"
            )
        lines.append(f"blind spots in the history: {dict(self.blind_spots()) or 'none'}")
        lines.append(f"in-process collections: {dict(self.collected)}")
        lines.append(
            "systemd's child met by the finder (then asked again): "
            f"{dict(self.children_met) or 'never'}"
        )
        return "\n".join(lines)

    def figures(self) -> dict[str, object]:
        """The same figures as plain data (for --json)."""
        return {
            "records": len(self.records),
            "seconds": round(self.seconds, 1),
            "exit_codes": dict(Counter(r.returncode for r in self.records)),
            "restarts": self.restarts,
            "recorded": {
                name: dict(Counter(o.kind for o in self.outcomes(name))) for name in self.services
            },
            "distinct_pids": {name: len(self.pids_recorded(name)) for name in self.services},
            "blind_spots": dict(self.blind_spots()),
            "collected": dict(self.collected),
            "children_met": dict(self.children_met),
        }


def manager_trace(key: str, value: str, manager_only_env: set[str]) -> str | None:
    """Why a service fact (key, value) can only come from systemd's child, or None."""
    if key == "exe" and os.path.basename(value) in MANAGER_EXES:
        return f"exe {value}"
    if key == "argv":
        argv = json.loads(value)
        if argv and argv[0].startswith("(") and argv[0].endswith(")"):
            return f"argv {value}"
    if key.startswith("env:") and key.removeprefix("env:") in manager_only_env:
        return f"{key}, which only PID 1's environment has"
    return None


def _reason(message: str) -> str:
    if STILL_STARTING in message:
        return "caught systemd's child"
    return message.split(":")[0]


def deploy(box: SystemdContainer, tmp_path: Path) -> list[str]:
    """Write and start both units; return drift's --config/--db arguments for them."""
    for name, unit, script in (
        ("decode", DECODE_UNIT, DECODE_SCRIPT),
        ("router", ROUTER_UNIT, ROUTER_SCRIPT),
    ):
        box.write_file(f"/opt/serve/{name}.sh", script)
        box.write_file(f"/etc/serve/{name}.env", ENV_FILE.replace("SGLANG", name.upper()))
        box.write_unit(f"{name}.service", unit)
        box.write_unit(
            f"{name}.service.d/override.conf", f"[Service]\nEnvironment=DROPIN_{name.upper()}=1\n"
        )
    box.daemon_reload()
    for unit in SERVICES.values():
        box.start(unit)
    config = tmp_path / "drift.toml"
    services = "".join(
        f'[[services]]\nname = "{name}"\nunit = "{unit}"\n'
        f'script = "{box.root}/opt/serve/{name}.sh"\n'
        for name, unit in SERVICES.items()
    )
    config.write_text(
        f'host = "{HOST}"\nsystemctl = {json.dumps(box.systemctl)}\n'
        f'proc_root = "{box.proc_root}"\n{services}'
    )
    return ["--config", str(config), "--db", str(tmp_path / "drift.db")]


def manager_only_env(box: SystemdContainer) -> set[str]:
    """Variables PID 1 has and the router's server lacks: only systemd's child could show them."""
    deadline = time.monotonic() + 10
    while True:
        pid = main_pid(box, "router.service")
        try:
            if pid > 0 and os.readlink(f"{box.proc_root}/{pid}/exe") == "/usr/bin/sleep":
                return set(box.environ(1)) - set(box.environ(pid))
        except OSError:
            pass
        assert time.monotonic() < deadline, "router.service never ran its server"
        time.sleep(0.05)


def main_pid(box: SystemdContainer, unit: str) -> int:
    out = box.run_systemctl("show", "-p", "MainPID", "--value", unit).stdout.strip()
    return int(out or 0)


def n_restarts(box: SystemdContainer, unit: str) -> int:
    out = box.run_systemctl("show", "-p", "NRestarts", "--value", unit).stdout.strip()
    return int(out or 0)


@contextmanager
def spying_on_systemd_child(met: Callable[[psutil.Process], None]) -> Iterator[None]:
    """Call `met` each time drift's finder, in this process, judges a process systemd's child.

    The verdict is drift's own, unchanged; the spy only counts it.
    """
    real = locate.systemd_child

    def spy(proc: psutil.Process) -> bool:
        verdict = real(proc)
        if verdict:
            met(proc)
        return verdict

    locate.systemd_child = spy  # type: ignore[assignment]
    try:
        yield
    finally:
        locate.systemd_child = real  # type: ignore[assignment]


def child_shape(proc: psutil.Process) -> str:
    """Which of systemd's children it was: titled `(name)`, not yet named, or the executor."""
    try:
        argv, exe = proc.cmdline(), os.path.basename(proc.exe())
    except psutil.Error:
        return "gone before it could be read"
    if argv and argv[0].startswith("("):
        return f"titled {argv[0]}"
    return "systemd-executor" if exe == "systemd-executor" else "a fork not yet named"


def collect_once(run: StressRun, ctx: CollectContext, name: str) -> None:
    """Run drift's service collector for one unit in this process and file what it gave."""
    met: list[str] = []
    with spying_on_systemd_child(lambda proc: met.append(child_shape(proc))):
        items = list(collect_service(ServiceSpec(name, unit=SERVICES[name]), ctx))
    for shape in met:
        run.children_met[f"{name}: {shape}"] += 1
    facts = {i.key: i.value for i in items if isinstance(i, Fact)}
    errors = [i.message for i in items if isinstance(i, CollectionError)]
    for key, value in facts.items():
        trace = run.from_the_manager(key, value)
        if trace is not None:
            run.collected_from_manager.append(f"{name}: {trace}")
    if errors:
        outcome = f"blind ({_reason(errors[0])})"
    elif facts.get("running") == "false":
        outcome = "stopped"
    elif facts.get("exe") in PROGRAMS[name]:
        outcome = "program"
    else:
        outcome = f"other: {facts.get('exe')}"
    run.collected[f"{name} {outcome}"] += 1


def run_stress(
    box: SystemdContainer, tmp_path: Path, *, restarts: int, seconds: float, seed: int = 15
) -> StressRun:
    """Restart both units `restarts` times (or for `seconds`) while recording; return the run."""
    cfg = deploy(box, tmp_path)
    run = StressRun(box, tmp_path, cfg, tmp_path / "drift.db", manager_only_env(box))
    run_drift(["record", *cfg], tmp_path)  # the first record, before the storm
    stop = threading.Event()
    rng = random.Random(seed)
    router_restarts = [0]
    ctx = CollectContext(systemctl=tuple(box.systemctl), proc_root=box.proc_root)

    def restart_router() -> None:
        while not stop.is_set() and router_restarts[0] < restarts:
            result = box.run_systemctl("restart", SERVICES["router"], check=False)
            if result.returncode != 0:
                said = (result.stderr.strip() or result.stdout.strip() or "no output")[-300:]
                run.failures.append(
                    f"systemctl restart router.service exited {result.returncode}: {said}"
                )
                return
            router_restarts[0] += 1
            time.sleep(rng.uniform(0, 0.15))  # the server runs a moment, as a real one would

    def record() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            result = run_drift(["record", *cfg], tmp_path, check=False, timeout=60)
            run.records.append(
                RecordRun(result.returncode, time.perf_counter() - started, result.stderr)
            )

    # drift's collector runs in a process of its own: what it starts (journalctl) makes
    # it reap every new child of its process, as `drift record` does, and in this one
    # those would be the test's own systemctl and drift commands.
    fork = multiprocessing.get_context("fork")
    collecting, results = fork.Event(), fork.Queue()
    collector = fork.Process(target=collect_loop, args=(run, ctx, collecting, results))
    collecting.set()
    collector.start()  # before any thread, so the fork copies none
    threads = [
        threading.Thread(target=guarded(run, target), daemon=True)
        for target in (restart_router, record)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    try:
        while time.monotonic() - started < seconds and not run.failures:
            if router_restarts[0] >= restarts and n_restarts(box, SERVICES["decode"]) >= restarts:
                break
            time.sleep(0.5)
    finally:
        stop.set()
        collecting.clear()
        for thread in threads:
            thread.join(timeout=90)
        take_results(run, results)
        collector.join(timeout=30)
    run.seconds = time.monotonic() - started
    run.restarts = {"decode": n_restarts(box, SERVICES["decode"]), "router": router_restarts[0]}
    box.stop_unit(SERVICES["decode"])
    run_drift(["record", *cfg], tmp_path, check=False)  # the storm is over
    return run


def collect_loop(
    run: StressRun, ctx: CollectContext, collecting: Any, results: multiprocessing.Queue[Any]
) -> None:
    """In the collector's process: collect both units until told to stop, then send the tally."""
    try:
        while collecting.is_set():
            for name in SERVICES:
                collect_once(run, ctx, name)
    except Exception as exc:  # reported by the test, with its type
        run.failures.append(f"collect: {type(exc).__name__}: {exc}")
    results.put((run.collected, run.children_met, run.collected_from_manager, run.failures))


def take_results(run: StressRun, results: multiprocessing.Queue[Any]) -> None:
    """The collector process's tally, added to `run`."""
    try:
        collected, children_met, from_manager, failures = results.get(timeout=120)
    except queue.Empty:
        run.failures.append("collect: the collector process sent nothing in 120 s")
        return
    run.collected.update(collected)
    run.children_met.update(children_met)
    run.collected_from_manager.extend(from_manager)
    run.failures.extend(f for f in failures if f not in run.failures)


def guarded(run: StressRun, target: Callable[[], None]) -> Callable[[], None]:
    """`target`, with any exception it raises filed as a failure of the run."""

    def body() -> None:
        try:
            target()
        except Exception as exc:  # reported by the test, with its type
            run.failures.append(f"{target.__name__}: {type(exc).__name__}: {exc}")

    return body
