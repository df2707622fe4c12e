"""The services collector against real processes: a serve script that exports and execs."""

from __future__ import annotations

import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import run_drift
from privileges import as_nobody

from drift.collectors.flags import parse_flags
from drift.collectors.scripts import collect_script
from drift.collectors.services import collect_service
from drift.config import ServiceSpec
from drift.facts import PROCESS_KEYS, CollectContext, CollectionError, Fact

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
    # psutil adds the boot time cut to the second, so its start is up to 1 s early;
    # drift's is the same tick count from a boot time to the millisecond.
    whole_second_boot = datetime.fromtimestamp(psutil.Process(pid).create_time(), UTC)
    assert timedelta(0) <= started - whole_second_boot < timedelta(seconds=1)
    assert started.microsecond % 1000 == 0
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

    written = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
        microseconds=serve.pidfile.stat().st_mtime_ns // 1000
    )
    assert facts["pid"].provenance == {
        "pid": pid,
        "found_by": f"pidfile {serve.pidfile}",
        "pidfile_mtime": written.isoformat(),
    }
    assert facts["started_at"].provenance == {**facts["pid"].provenance, "uncertainty_ms": 10}
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


def test_pidfile_of_a_process_that_is_gone_means_not_running(tmp_path: Path) -> None:
    """What a daemon that died leaves behind: the pid of a process that no longer exists."""
    pidfile = tmp_path / "svc.pid"
    dead = subprocess.Popen(["true"])
    dead.wait()
    pidfile.write_text(f"{dead.pid}\n")
    facts, errors = collect(ServiceSpec(name="svc", pidfile=str(pidfile)))
    assert errors == []
    assert values(facts) == {"running": "false"}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "does not exist"),
        ("", "is empty"),
        ("  \n", "is empty"),
        ("garbage\n", "holds no pid"),
        ("-5\n", "holds no pid"),
        ("0\n", "holds no pid"),
    ],
)
def test_missing_or_garbled_pidfile_is_a_blind_spot_not_a_stop(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    """A typo in the path must not read as the service stopping: its facts keep their values."""
    pidfile = tmp_path / "svc.pid"
    if content is not None:
        pidfile.write_text(content)
    facts, errors = collect(ServiceSpec(name="svc", pidfile=str(pidfile)))
    assert facts == {}
    assert errors == [
        CollectionError(
            "service:svc", None, f"pidfile {pidfile} {problem}: cannot tell whether svc runs"
        )
    ]


def test_unreadable_pidfile_is_a_blind_spot_not_a_stop(tmp_path: Path) -> None:
    pidfile = tmp_path / "svc.pid"
    pidfile.mkdir()
    facts, errors = collect(ServiceSpec(name="svc", pidfile=str(pidfile)))
    assert facts == {}
    assert len(errors) == 1
    assert errors[0].key is None and errors[0].covers("service:svc", "env:HF_HOME")
    assert str(pidfile) in errors[0].message


# --- what a pidfile points at ------------------------------------------------


def _kernel_thread() -> int | None:
    """The pid of a kernel thread visible here (kthreadd on a host), if any."""
    for pid in psutil.pids():
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            continue
        if int(stat.rpartition(b")")[2].split()[6]) & 0x00200000:
            return pid
    return None


@pytest.mark.parametrize("who", ["init", "drift", "kernel thread"])
def test_pidfile_naming_init_drift_or_a_kernel_thread_is_a_blind_spot(
    tmp_path: Path, who: str
) -> None:
    """Such a pidfile is wrong (a `$PPID`, a stale pid): what it names is no one's service."""
    if who == "init":
        if 1 not in {p.pid for p in psutil.Process().parents()}:
            pytest.skip("pid 1 is not an ancestor here")
        pid, what = 1, f"the init process ({psutil.Process(1).name()})"
    elif who == "drift":
        pid, what = os.getpid(), "drift itself"
    else:
        found = _kernel_thread()
        if found is None:
            pytest.skip("no kernel thread visible")
        pid, what = found, f"a kernel thread ({psutil.Process(found).name()})"
    pidfile = tmp_path / "svc.pid"
    pidfile.write_text(f"{pid}\n")
    facts, errors = collect(ServiceSpec(name="svc", pidfile=str(pidfile)))
    assert facts == {}
    assert errors == [
        CollectionError(
            "service:svc",
            None,
            f"pidfile {pidfile} holds pid {pid}, {what}, not svc: cannot tell whether svc runs",
        )
    ]


def test_pid_1_of_a_container_seen_from_outside_is_its_service(
    serve: Serve, tmp_path: Path
) -> None:
    """In a /proc drift does not run in (a container's), pid 1 is not drift's init."""
    fake_proc = tmp_path / "proc"
    fake_proc.mkdir()
    (fake_proc / "1").symlink_to(f"/proc/{serve.pid}")  # the container's pid 1: the service
    pidfile = tmp_path / "one.pid"
    pidfile.write_text("1\n")
    # psutil reads <proc_root>/1/...; without <proc_root>/self drift is not in it.
    spec = ServiceSpec(name="decode", pidfile=str(pidfile))
    facts, errors = collect(spec, CollectContext(proc_root=str(fake_proc)))
    assert errors == []
    assert facts["pid"].value == "1"
    assert facts["flag:--drift-test"].value == serve.token


def _seconds(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_started_at_is_the_tick_the_process_started_in_not_a_second_early(
    tmp_path: Path, spawn: Spawn
) -> None:
    """The kernel counts a start in 10 ms ticks; the boot time is read to the millisecond."""
    pidfile = tmp_path / "svc.pid"
    spec = ServiceSpec(name="svc", pidfile=str(pidfile))
    for _ in range(3):
        before = time.time()
        proc = spawn([sys.executable, "-c", SLEEPER])
        after = time.time()
        pidfile.write_text(f"{proc.pid}\n")
        facts, errors = collect(spec)
        assert errors == []
        started = _seconds(facts["started_at"].value)
        # At most a tick (10 ms) before the fork, never after it; 20 ms either way.
        assert before - 0.020 <= started <= after + 0.020, (before, started, after)
        assert facts["started_at"].provenance["uncertainty_ms"] == 10
        # The same process read again gives the same text, clock readings apart.
        assert collect(spec)[0]["started_at"].value == facts["started_at"].value


def test_a_start_read_a_little_differently_keeps_the_recorded_one(serve: Serve) -> None:
    """Same pid, start moved under a second (a stepped clock, the old whole-second boot):
    the process recorded before, so its recorded start stays and no restart is invented."""
    spec = ServiceSpec(name="decode", pidfile=str(serve.pidfile))
    fresh = collect(spec)[0]["started_at"].value
    earlier = (datetime.fromisoformat(fresh) - timedelta(milliseconds=640)).isoformat(
        timespec="microseconds"
    )
    last = {"service:decode": {"pid": str(serve.pid), "started_at": earlier}}
    facts, errors = collect(spec, CollectContext(last_processes=last))
    assert errors == []
    assert facts["started_at"].value == earlier
    # Another pid, or the same pid a whole restart apart: the reading is the start.
    for pid, moved in ((serve.pid + 1, 640), (serve.pid, 5000)):
        before = datetime.fromisoformat(fresh) - timedelta(milliseconds=moved)
        last = {"service:decode": {"pid": str(pid), "started_at": before.isoformat()}}
        facts, errors = collect(spec, CollectContext(last_processes=last))
        assert errors == []
        assert facts["started_at"].value == fresh


def _history(
    pid: int, started: datetime, exe: str, argv: list[str], pidfile_mtime: str | None = None
) -> dict[str, Any]:
    last = {
        "pid": str(pid),
        "started_at": started.isoformat(timespec="microseconds"),
        "exe": exe,
        "argv": json.dumps(argv),
    }
    if pidfile_mtime is not None:
        last["pidfile_mtime"] = pidfile_mtime
    return {"service:decode": last}


@pytest.mark.parametrize(
    ("taker", "written"), [("sleep", "same"), ("python -c", "same"), ("sleep", "unknown")]
)
def test_stale_pidfile_whose_pid_another_program_took_is_a_blind_spot(
    tmp_path: Path, spawn: Spawn, taker: str, written: str
) -> None:
    """decode (python -m sglang...) was recorded under pid N; now pid N is another program.

    The pidfile was not rewritten since (or the record is from a drift that did
    not note when it was written).
    """
    argv = ["sleep", "600"] if taker == "sleep" else [sys.executable, "-c", SLEEPER]
    other = spawn(argv)
    _wait_for(lambda: _cmdline(other.pid) == argv)
    pidfile = tmp_path / "decode.pid"
    pidfile.write_text(f"{other.pid}\n")
    spec = ServiceSpec(name="decode", pidfile=str(pidfile))
    mtime = collect(spec)[0]["pid"].provenance["pidfile_mtime"]
    python = os.path.realpath(sys.executable)
    then = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    last = _history(
        other.pid,
        then,
        python,
        [sys.executable, "-m", "sglang.launch_server"],
        mtime if written == "same" else None,
    )
    facts, errors = collect(spec, CollectContext(last_processes=last))
    assert facts == {}
    started = collect(spec)[0]["started_at"].value
    now_runs = psutil.Process(other.pid).exe() + ("" if taker == "sleep" else " -c")
    at = datetime.fromisoformat(started).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert errors == [
        CollectionError(
            "service:decode",
            None,
            f"pidfile {pidfile} is stale: pid {other.pid} now runs {now_runs} (started {at}), "
            f"not the {python} -m sglang.launch_server "
            f"(started {then.strftime('%Y-%m-%d %H:%M:%S UTC')}) last recorded for decode: "
            "cannot tell whether decode runs",
        )
    ]


@pytest.mark.parametrize("again", ["the same program", "a rewritten pidfile"])
def test_a_restart_under_the_same_pid_is_still_the_service(serve: Serve, again: str) -> None:
    """A container's services get the same pids at every start: that is still the service,
    whether it runs the same program or a new one that wrote its pidfile anew."""
    spec = ServiceSpec(name="decode", pidfile=str(serve.pidfile))
    now = collect(spec)[0]
    then = datetime.fromisoformat(now["started_at"].value) - timedelta(hours=1)
    if again == "the same program":
        last = _history(serve.pid, then, now["exe"].value, json.loads(now["argv"].value))
    else:
        earlier = then.isoformat()  # the pidfile as it was written for the earlier process
        last = _history(serve.pid, then, "/usr/bin/java", ["java", "-jar", "x.jar"], earlier)
    facts, errors = collect(spec, CollectContext(last_processes=last))
    assert errors == []
    assert facts["started_at"].value == now["started_at"].value
    assert facts["env:SGLANG_SM120_MMA_TARGET_CTAS"].value == "512"


# --- the same, through drift record and drift since ----------------------------


def _config(tmp_path: Path, pidfile: Path) -> list[str]:
    path = tmp_path / "drift.toml"
    path.write_text(f'host = "h"\n[[services]]\nname = "decode"\npidfile = "{pidfile}"\n')
    return ["--config", str(path), "--db", str(tmp_path / "d.db")]


def _shown(args: list[str], tmp_path: Path) -> dict[str, str]:
    out = run_drift(["show", *args, "--format", "json", "service:"], tmp_path).stdout
    subjects = json.loads(out)["data"]["subjects"]
    return {f["key"]: f["value"] for s in subjects for f in s["facts"]}


def test_an_unchanged_process_recorded_twice_changes_nothing(serve: Serve, tmp_path: Path) -> None:
    """Each record reads the boot time anew; the start of one process must not move."""
    args = _config(tmp_path, serve.pidfile)
    first = run_drift(["record", *args], tmp_path).stdout
    assert re.match(r"snapshot #1: \d+ facts, \d+ changed, 0 errors", first)
    for n in (2, 3):
        out = run_drift(["record", *args], tmp_path).stdout
        assert re.match(rf"snapshot #{n}: \d+ facts, 0 changed, 0 errors", out), out


def test_a_missing_pidfile_is_a_blind_spot_of_record_and_since(
    serve: Serve, tmp_path: Path
) -> None:
    """The pidfile path gone (a typo, a daemon that removed it): decode does not read as stopped."""
    args = _config(tmp_path, serve.pidfile)
    run_drift(["record", *args], tmp_path)
    serve.pidfile.rename(tmp_path / "elsewhere.pid")
    blind = f"pidfile {serve.pidfile} does not exist: cannot tell whether decode runs"
    result = run_drift(["record", *args], tmp_path, check=False)
    assert result.returncode == 4  # stored, with a collection error
    assert result.stdout.startswith("snapshot #2: ") and ", 0 changed, 1 error," in result.stdout
    assert result.stderr == f"  ! service:decode: {blind}\n"
    assert _shown(args, tmp_path)["running"] == "true"  # its last known value
    report = run_drift(["since", *args, "--stable", "#1"], tmp_path).stdout
    assert "No change since the baseline." in report
    assert f"  ! service:decode: {blind} (1x, " in report


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to choose a pid (ns_last_pid)")
def test_a_pid_reused_by_another_program_is_a_blind_spot_not_a_new_service(
    tmp_path: Path, spawn: Spawn
) -> None:
    """decode dies leaving its pidfile; later `sleep` gets its pid. That is not decode."""
    pidfile = tmp_path / "decode.pid"
    decode = spawn([sys.executable, "-c", SLEEPER, "--drift-test", uuid.uuid4().hex])
    pidfile.write_text(f"{decode.pid}\n")
    args = _config(tmp_path, pidfile)
    run_drift(["record", *args], tmp_path)
    os.killpg(decode.pid, signal.SIGKILL)
    decode.wait()
    assert ", 0 errors," in run_drift(["record", *args], tmp_path).stdout
    assert _shown(args, tmp_path)["running"] == "false"

    taker = _spawn_with_pid(spawn, decode.pid, ["sleep", "600"])
    result = run_drift(["record", *args], tmp_path, check=False)
    assert result.returncode == 4  # stored, with a collection error
    assert ", 0 changed, 1 error," in result.stdout
    assert result.stderr.startswith(
        f"  ! service:decode: pidfile {pidfile} is stale: pid {taker.pid} now runs "
        f"{psutil.Process(taker.pid).exe()} (started "
    )
    assert f"not the {os.path.realpath(sys.executable)} -c (started " in result.stderr
    assert _shown(args, tmp_path)["running"] == "false"  # sleep's env is not decode's
    report = run_drift(["since", *args, "--stable", "#2"], tmp_path).stdout
    assert "No change since the baseline." in report
    assert f"  ! service:decode: pidfile {pidfile} is stale: pid {taker.pid} " in report


def _spawn_with_pid(spawn: Spawn, pid: int, argv: list[str]) -> subprocess.Popen[bytes]:
    """Start `argv` as pid `pid`, as pid reuse would (other processes may fork in between)."""
    for _ in range(200):
        Path("/proc/sys/kernel/ns_last_pid").write_text(f"{pid - 1}")
        proc = spawn(argv)
        if proc.pid == pid:
            return proc
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    pytest.skip(f"pid {pid} kept going to other processes")


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
    # The second reading knows the first, as the next record knows the last one: the
    # same process keeps its recorded start time (the boot moment is only known to a
    # millisecond, so two readings may round it apart).
    last = {k: by_match[k].value for k in PROCESS_KEYS if k in by_match}
    ctx = CollectContext(last_processes={"service:decode": last})
    by_pidfile, _ = collect(ServiceSpec(name="decode", pidfile=str(serve.pidfile)), ctx)
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
                assert all(e.key is None for e in errors), errors
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


def test_systemd_s_child_before_its_exec_is_not_taken_for_the_service(tmp_path: Path) -> None:
    """Mid-restart, a unit's MainPID can be systemd's fork, named `(bash)`, not yet the program.

    Its environment is the manager's: read as the service, every variable would be a
    false change. Real processes stand in: one whose executable is named systemd and
    whose argv is `(bash)`, as systemd's child is, and two that each have only one of
    the two marks.
    """
    from drift.collectors.locate import systemd_child

    fake = tmp_path / "systemd"
    shutil.copy("/bin/cat", fake)  # cat waits on its stdin with no argument but its name

    def start(argv: list[str], executable: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, executable=executable, stdin=subprocess.PIPE)

    procs = {
        "child": start(["(bash)"], str(fake)),
        "only named so": start(["(bash)"], "/bin/cat"),
        "systemd's binary itself": start([str(fake)], str(fake)),
        "a program with an argument after the title": start(["(bash)", "-"], str(fake)),
    }
    try:
        for proc in procs.values():  # until the exec is done
            deadline = time.monotonic() + 10
            while psutil.Process(proc.pid).exe() not in (str(fake), "/usr/bin/cat", "/bin/cat"):
                assert time.monotonic() < deadline
                time.sleep(0.01)
        seen = {name: systemd_child(psutil.Process(p.pid)) for name, p in procs.items()}
        assert seen == {
            "child": True,
            "only named so": False,
            "systemd's binary itself": False,
            "a program with an argument after the title": False,
        }
    finally:
        for proc in procs.values():
            proc.kill()
            proc.communicate()  # closes its stdin


def test_systemd_s_fork_before_it_names_itself_and_its_executor_are_not_the_service(
    tmp_path: Path,
) -> None:
    """The two other shapes of systemd's child, before it runs the unit's program.

    For an instant after the fork, before it takes the `(bash)` title, the child is a
    copy of the manager: its executable, its argv, its environment (the stress test in
    tests/test_systemd_stress.py sees it on systemd 252). From systemd 255 on, the child
    runs systemd-executor until the exec (on a Debian trixie rootfs, systemd 257, the
    FIFO test of tests/test_record_systemd.py holds it there: `(cat)`, executable
    /usr/lib/systemd/systemd-executor, PID 1's environment). A bash named systemd stands
    in for the manager: its subshell is a fork that runs no other program, and the same
    executable started again with other words is what `systemd --user` under PID 1 is: a
    service.
    """
    from drift.collectors.locate import systemd_child

    manager = tmp_path / "systemd"
    shutil.copy("/bin/bash", manager)
    executor = tmp_path / "systemd-executor"
    shutil.copy("/bin/bash", executor)
    # Each child reads the manager's stdin (fd 3) until the test closes it.
    script = 'exec 3<&0; ( read -r _ <&3 ) & "$0" -c "read -r _ <&3" --user & wait'
    procs = [
        subprocess.Popen([str(manager), "-c", script], stdin=subprocess.PIPE),
        subprocess.Popen([str(executor), "-c", "read -r _"], stdin=subprocess.PIPE),
    ]
    try:
        deadline = time.monotonic() + 10
        ran = psutil.Process(procs[0].pid)
        while {len(c.cmdline()) for c in ran.children()} != {3, 4}:  # the fork, and --user
            assert time.monotonic() < deadline, "bash did not start its two children"
            time.sleep(0.01)
        assert ran.cmdline() == [str(manager), "-c", script]
        by_argv = {tuple(c.cmdline()): c for c in ran.children()}
        fork = by_argv[(str(manager), "-c", script)]
        user = by_argv[(str(manager), "-c", "read -r _ <&3", "--user")]
        assert fork.exe() == user.exe() == ran.exe() == str(manager)
        while psutil.Process(procs[1].pid).exe() != str(executor):  # until its exec is done
            assert time.monotonic() < deadline
            time.sleep(0.01)
        seen = {
            "the manager": systemd_child(ran),
            "the manager's fork": systemd_child(fork),
            "systemd --user": systemd_child(user),
            "the executor": systemd_child(psutil.Process(procs[1].pid)),
        }
        assert seen == {
            "the manager": False,
            "the manager's fork": True,
            "systemd --user": False,
            "the executor": True,
        }
    finally:
        for proc in procs:
            proc.communicate(timeout=10)  # closes stdin: every reader ends
