"""The services collector against real processes: a serve script that exports and execs."""

from __future__ import annotations

import json
import os
import pwd
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest
from privileges import as_nobody

from drift.collectors.scripts import collect_script
from drift.collectors.services import collect_service, parse_flags
from drift.config import ServiceSpec
from drift.facts import CollectContext, CollectionError, Fact

SLEEPER = "import time; time.sleep(600)"
FLAGS = [
    "--tp-size",
    "4",
    "--cuda-graph-max-bs=96",
    "--disaggregation-mode",
    "decode",
    "--enable-metrics",
]

SERVE_SCRIPT = """\
#!/bin/bash
export SGLANG_SM120_MMA_TARGET_CTAS=512
export HF_HOME="/data/hf cache"
echo $$ > "$1"
exec {python} -c '{code}' {flags} --drift-test {token}
"""

Spawn = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """Start processes in their own process group; the whole group is killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            argv,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **kwargs,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


class Serve:
    """A running serve script: bash that exported variables and exec'd python (same pid)."""

    def __init__(
        self, proc: subprocess.Popen[bytes], script: Path, pidfile: Path, token: str, cwd: Path
    ) -> None:
        self.proc, self.script, self.pidfile, self.token, self.cwd = (
            proc,
            script,
            pidfile,
            token,
            cwd,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def serve(tmp_path: Path, spawn: Spawn) -> Serve:
    token = uuid.uuid4().hex
    script = tmp_path / "decode.sh"
    script.write_text(
        SERVE_SCRIPT.format(
            python=shlex.quote(sys.executable), code=SLEEPER, flags=" ".join(FLAGS), token=token
        )
    )
    pidfile = tmp_path / "decode.pid"
    env = {**os.environ, "FROM_PARENT": "yes"}
    proc = spawn(["bash", str(script), str(pidfile)], cwd=tmp_path, env=env)
    _wait_for(lambda: token in " ".join(_cmdline(proc.pid)) and pidfile.exists())
    return Serve(proc, script, pidfile, token, tmp_path)


def _cmdline(pid: int) -> list[str]:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the test process")
        time.sleep(0.01)


def collect(
    spec: ServiceSpec,
    ctx: CollectContext | None = None,
) -> tuple[dict[str, Fact], list[CollectionError]]:
    facts: dict[str, Fact] = {}
    errors: list[CollectionError] = []
    for item in collect_service(spec, ctx or CollectContext()):
        if isinstance(item, Fact):
            assert item.key not in facts, f"duplicate fact {item.key}"
            assert item.subject == f"service:{spec.name}"
            facts[item.key] = item
        else:
            errors.append(item)
    return facts, errors


def values(facts: dict[str, Fact]) -> dict[str, str]:
    return {key: fact.value for key, fact in facts.items()}


# --- parse_flags -------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["srv", "--port", "30000"], {"--port": "30000"}),
        (["srv", "--port=30000"], {"--port": "30000"}),
        (["srv", "--enable-metrics"], {"--enable-metrics": ""}),
        (["srv", "--enable-metrics", "--port", "1"], {"--enable-metrics": "", "--port": "1"}),
        (["srv", "--flag="], {"--flag": ""}),
        (["srv", "-p", "8080", "-v"], {"-p": "8080", "-v": ""}),
        (["srv", "--offset", "-1", "--scale", "-.5"], {"--offset": "-1", "--scale": "-.5"}),
        (["srv", "--opt", "a", "--opt=b", "--opt"], {"--opt": "a\nb\n"}),
        (["srv", "--url=http://x/?a=b"], {"--url": "http://x/?a=b"}),
        (["srv", "positional", "--a", "1", "--", "--not-a-flag", "x"], {"--a": "1"}),
        (["srv", "-", "--a", "1"], {"--a": "1"}),
        (["java", "-Dkey=value", "-jar", "app.jar"], {"-Dkey": "value", "-jar": "app.jar"}),
        (
            ["python", "-m", "sglang.launch_server", "--model-path", "X"],
            {"-m": "sglang.launch_server", "--model-path": "X"},
        ),
        (["/usr/bin/python3.11", "-u", "serve.py", "--port", "1"], {"-u": "", "--port": "1"}),
        (
            ["python3", "-uB", "-X", "dev", "-Wignore", "-c", "pass", "--tp", "2"],
            {"-uB": "", "-X": "dev", "-W": "ignore", "-c": "pass", "--tp": "2"},
        ),
        (["python3", "-mhttp.server", "8000"], {"-m": "http.server"}),
        (["ipython", "-u", "serve.py"], {"-u": "serve.py"}),
        (["srv"], {}),
        ([], {}),
    ],
)
def test_parse_flags(argv: list[str], expected: dict[str, str]) -> None:
    assert parse_flags(argv) == expected


def test_parse_flags_keeps_command_line_order() -> None:
    assert list(parse_flags(["srv", "--b", "1", "--a", "--c=3"])) == ["--b", "--a", "--c"]


# --- pidfile -----------------------------------------------------------------


def test_pidfile_service_reports_its_live_process(serve: Serve) -> None:
    spec = ServiceSpec(name="decode", pidfile=str(serve.pidfile))
    facts, errors = collect(spec)
    assert errors == []
    got = values(facts)
    pid = serve.pid
    assert got["running"] == "true"
    assert got["pid"] == str(pid)
    assert got["ppid"] == str(os.getpid())
    assert got["exe"] == os.path.realpath(sys.executable)
    assert got["cwd"] == str(serve.cwd)
    assert got["user"] == pwd.getpwuid(os.getuid()).pw_name

    started = datetime.fromisoformat(got["started_at"])
    assert started.tzinfo is not None and started.utcoffset() == UTC.utcoffset(None)
    assert got["started_at"].endswith("+00:00") and "." in got["started_at"]
    expected_start = datetime.fromtimestamp(psutil.Process(pid).create_time(), UTC)
    assert started == expected_start
    assert abs((datetime.now(UTC) - started).total_seconds()) < 60

    assert json.loads(got["argv"]) == [
        sys.executable,
        "-c",
        SLEEPER,
        *FLAGS,
        "--drift-test",
        serve.token,
    ]
    assert got["flag:-c"] == SLEEPER
    assert got["flag:--tp-size"] == "4"
    assert got["flag:--cuda-graph-max-bs"] == "96"
    assert got["flag:--disaggregation-mode"] == "decode"
    assert got["flag:--enable-metrics"] == ""
    assert got["flag:--drift-test"] == serve.token

    # The live environment: what the script exported and what it inherited.
    assert got["env:SGLANG_SM120_MMA_TARGET_CTAS"] == "512"
    assert got["env:HF_HOME"] == "/data/hf cache"
    assert got["env:FROM_PARENT"] == "yes"
    assert "matches" not in got

    assert facts["pid"].provenance == {"pid": pid, "found_by": f"pidfile {serve.pidfile}"}
    assert facts["started_at"].provenance == facts["pid"].provenance
    assert facts["env:HF_HOME"].provenance == {"pid": pid, "source": f"/proc/{pid}/environ"}
    assert facts["flag:--tp-size"].provenance == {"pid": pid, "source": f"/proc/{pid}/cmdline"}
    assert facts["argv"].provenance == facts["flag:--tp-size"].provenance


def test_script_exports_are_the_live_values(serve: Serve) -> None:
    """The export lines of the serve script and the live process tell one story."""
    service, _ = collect(ServiceSpec(name="decode", pidfile=str(serve.pidfile)))
    script = {
        f.key: f
        for f in collect_script("decode", str(serve.script), CollectContext())
        if isinstance(f, Fact)
    }
    exports = {k.removeprefix("export:"): f for k, f in script.items() if k.startswith("export:")}
    assert set(exports) == {"SGLANG_SM120_MMA_TARGET_CTAS", "HF_HOME"}
    for name, fact in exports.items():
        assert service[f"env:{name}"].value == fact.value
    assert exports["SGLANG_SM120_MMA_TARGET_CTAS"].provenance["line"] == 2
    script_flags = {k: f.value for k, f in script.items() if k.startswith("flag:")}
    live_flags = {k: f.value for k, f in service.items() if k.startswith("flag:")}
    assert script_flags == live_flags


def test_proc_root_elsewhere_is_used_and_restored(serve: Serve, tmp_path: Path) -> None:
    """A /proc mounted elsewhere (a container's, seen from the host) is read through."""
    proc_root = tmp_path / "hostproc"
    proc_root.symlink_to("/proc")
    ctx = CollectContext(proc_root=str(proc_root))
    facts, errors = collect(ServiceSpec(name="decode", pidfile=str(serve.pidfile)), ctx)
    assert errors == []
    assert facts["pid"].value == str(serve.pid)
    assert facts["env:HF_HOME"].provenance["source"] == f"{proc_root}/{serve.pid}/environ"
    assert psutil.PROCFS_PATH == "/proc"


def test_stopped_service_is_not_running_and_has_no_process_facts(serve: Serve) -> None:
    spec = ServiceSpec(name="decode", pidfile=str(serve.pidfile))
    assert collect(spec)[0]["running"].value == "true"
    serve.stop()
    facts, errors = collect(spec)
    assert errors == []
    assert values(facts) == {"running": "false"}
    assert facts["running"].provenance == {"found_by": f"pidfile {serve.pidfile}"}


@pytest.mark.parametrize("content", ["dead", "", "garbage\n", "-5\n", "0\n", None])
def test_stale_or_broken_pidfile_means_not_running(tmp_path: Path, content: str | None) -> None:
    pidfile = tmp_path / "svc.pid"
    if content == "dead":
        dead = subprocess.Popen(["true"])
        dead.wait()
        content = f"{dead.pid}\n"
    if content is not None:
        pidfile.write_text(content)
    facts, errors = collect(ServiceSpec(name="svc", pidfile=str(pidfile)))
    assert errors == []
    assert values(facts) == {"running": "false"}


def test_unreadable_pidfile_is_a_blind_spot_not_a_stop(tmp_path: Path) -> None:
    pidfile = tmp_path / "svc.pid"
    pidfile.mkdir()
    facts, errors = collect(ServiceSpec(name="svc", pidfile=str(pidfile)))
    assert facts == {}
    assert len(errors) == 1
    assert errors[0].key is None and errors[0].covers("service:svc", "env:HF_HOME")
    assert str(pidfile) in errors[0].message


# --- match -------------------------------------------------------------------


def test_match_finds_the_service_and_not_drift_or_its_parents(serve: Serve) -> None:
    """drift runs under a bash whose command line contains the regex too; neither counts."""
    code = (
        "import json, sys\n"
        "from drift.collectors.services import collect_service\n"
        "from drift.config import ServiceSpec\n"
        "from drift.facts import CollectContext, Fact\n"
        f"spec = ServiceSpec(name='decode', match={serve.token!r})\n"
        "out = {f.key: f.value for f in collect_service(spec, CollectContext())"
        " if isinstance(f, Fact)}\n"
        "print(json.dumps(out))\n"
    )
    # "; true" keeps bash alive as the parent instead of exec'ing python.
    result = subprocess.run(
        ["bash", "-c", '"$0" -c "$1"; true', sys.executable, code],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    got = json.loads(result.stdout)
    assert got["pid"] == str(serve.pid)
    assert got["matches"] == "1"
    assert got["env:SGLANG_SM120_MMA_TARGET_CTAS"] == "512"


def test_match_in_process_gives_same_facts_as_pidfile(serve: Serve) -> None:
    by_match, errors = collect(ServiceSpec(name="decode", match=rf"--drift-test {serve.token}$"))
    assert errors == []
    by_pidfile, _ = collect(ServiceSpec(name="decode", pidfile=str(serve.pidfile)))
    assert by_match["pid"].provenance["found_by"] == f"match --drift-test {serve.token}$"
    assert by_match.pop("matches").value == "1"
    assert values(by_match) == values(by_pidfile)


def test_match_takes_the_main_process_not_its_workers(spawn: Spawn) -> None:
    token = uuid.uuid4().hex
    forking = "import os, time; os.fork(); time.sleep(600)"
    main = spawn([sys.executable, "-c", forking, "--drift-test", token])
    _wait_for(lambda: len(_matching(token)) == 2)
    time.sleep(0.05)  # the second service starts clearly later
    later = spawn([sys.executable, "-c", SLEEPER, "--drift-test", token])
    _wait_for(lambda: len(_matching(token)) == 3)

    facts, errors = collect(ServiceSpec(name="svc", match=token))
    assert errors == []
    assert facts["pid"].value == str(main.pid)
    assert facts["matches"].value == "3"
    assert facts["flag:-c"].value == forking

    main_and_worker = {main.pid, *(c.pid for c in psutil.Process(main.pid).children())}
    os.killpg(main.pid, signal.SIGKILL)
    main.wait()
    _wait_for(lambda: not (_matching(token) & main_and_worker))
    facts, _ = collect(ServiceSpec(name="svc", match=token))
    assert facts["pid"].value == str(later.pid)
    assert facts["matches"].value == "1"


def _matching(token: str) -> set[int]:
    found = set()
    for proc in psutil.process_iter():
        try:
            if token in proc.cmdline():
                found.add(proc.pid)
        except psutil.Error:
            continue
    return found


def test_match_with_nothing_running(serve: Serve) -> None:
    spec = ServiceSpec(name="decode", match=serve.token)
    serve.stop()
    facts, errors = collect(spec)
    assert errors == []
    assert values(facts) == {"running": "false", "matches": "0"}


# --- races and permissions ---------------------------------------------------


def test_processes_exiting_while_read_never_crash(tmp_path: Path, spawn: Spawn) -> None:
    """Processes living a few ms each: found, then gone before (or while) being read."""
    token = uuid.uuid4().hex
    pidfile = tmp_path / "churn.pid"
    name = f"drift-vanish-{token}"
    loop = f'while :; do (echo $BASHPID > "$0"; exec -a {name} sleep 0.002); done'
    spawn(["bash", "-c", loop, str(pidfile)])
    _wait_for(pidfile.exists)

    kinds: dict[str, int] = {"running": 0, "stopped": 0, "error": 0}
    deadline = time.monotonic() + 1.5
    specs = [
        ServiceSpec(name="churn", pidfile=str(pidfile)),
        ServiceSpec(name="churn", match=f"^{name} "),
    ]
    while time.monotonic() < deadline:
        for spec in specs:
            facts, errors = collect(spec)
            if errors:
                assert all(e.key is None for e in errors)
                assert "running" not in facts
                kinds["error"] += 1
            elif facts["running"].value == "true":
                assert {"pid", "started_at", "argv"} <= set(facts)
                if spec.match:
                    assert json.loads(facts["argv"].value)[0] == name
                kinds["running"] += 1
            else:
                assert set(facts) <= {"running", "matches"}
                kinds["stopped"] += 1
    assert kinds["running"] > 0, kinds


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_unreadable_environment_is_a_blind_spot(serve: Serve) -> None:
    # By regex: the pidfile sits in a tmp_path that only root may enter.
    spec = ServiceSpec(name="decode", match=serve.token)

    def work() -> list[list[Any]]:
        return [
            [
                type(item).__name__,
                item.key,
                getattr(item, "value", None),
                getattr(item, "message", None),
            ]
            for item in collect_service(spec, CollectContext())
        ]

    items = as_nobody(work)
    facts = {key: value for kind, key, value, _ in items if kind == "Fact"}
    errors = {key: message for kind, key, _, message in items if kind == "CollectionError"}
    assert errors["env:"] == f"permission denied reading environment of pid {serve.pid}"
    assert {"exe", "cwd"} <= set(errors)
    assert not any(key.startswith("env:") for key in facts)
    assert facts["running"] == "true"
    assert facts["pid"] == str(serve.pid)
    assert facts["flag:--tp-size"] == "4"


# --- unit --------------------------------------------------------------------


def test_unit_without_systemd_answer_is_a_blind_spot() -> None:
    """systemctl failing says nothing about the service: no fact of it may end."""
    ctx = CollectContext(systemctl=("false",))
    facts, errors = collect(ServiceSpec(name="decode", unit="sglang-decode.service"), ctx)
    assert facts == {}
    assert len(errors) == 1
    assert errors[0].covers("service:decode", "env:HF_HOME")
    assert errors[0].covers("service:decode", "unit:exec_start")
    assert "sglang-decode.service" in errors[0].message
