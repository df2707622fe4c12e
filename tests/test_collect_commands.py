"""[[commands]]: real shell commands, real process groups, real timeouts."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import run_drift

from drift.collectors.commands import MAX_OUTPUT, collect_command, collect_health, run_bounded
from drift.config import CommandSpec, HealthSpec, load_config
from drift.facts import CollectContext, CollectionError, Fact


def collect(run: str, timeout: float = 5.0, name: str = "probe") -> list[Fact | CollectionError]:
    return list(collect_command(CommandSpec(name=name, run=run, timeout=timeout), CollectContext()))


def values(items: list[Fact | CollectionError]) -> dict[str, str]:
    assert all(isinstance(i, Fact) for i in items), items
    return {i.key: i.value for i in items if isinstance(i, Fact)}


def alive(pid: int) -> bool:
    """True if pid is a live process (a zombie waiting for its reaper counts as dead)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def pidfile(tmp_path: Path) -> Iterator[Path]:
    """Where a test command writes its background child's pid; the child is killed afterwards."""
    path = tmp_path / "child.pid"
    yield path
    if path.exists() and path.read_text().strip():
        pid = int(path.read_text())
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_stdout_and_exit_recorded_exactly() -> None:
    items = collect("printf '  535.104.05\\n\\n'", name="gpu-driver")
    assert values(items) == {"stdout": "  535.104.05\n\n", "exit": "0"}
    assert {i.subject for i in items} == {"command:gpu-driver"}
    assert all(
        i.provenance == {"run": "printf '  535.104.05\\n\\n'"} for i in items if isinstance(i, Fact)
    )


def test_nonzero_exit_is_a_fact_and_stderr_is_not_recorded() -> None:
    assert values(collect("echo out; echo oops >&2; exit 3")) == {"stdout": "out\n", "exit": "3"}


def test_missing_program_still_ran_the_shell() -> None:
    assert values(collect("no-such-program-drift-test")) == {"stdout": "", "exit": "127"}


def test_death_by_signal_is_named() -> None:
    assert values(collect("echo before; kill -9 $$"))["exit"] == "signal SIGKILL"


def test_stdin_is_dev_null_so_a_reader_does_not_hang() -> None:
    started = time.monotonic()
    assert values(collect("cat", timeout=5)) == {"stdout": "", "exit": "0"}
    assert time.monotonic() - started < 2


def test_undecodable_bytes_are_replaced() -> None:
    assert values(collect("printf 'x\\377y'"))["stdout"] == "x\ufffdy"


def test_timeout_kills_the_whole_group(pidfile: Path) -> None:
    started = time.monotonic()
    items = collect(f"sleep 100 & echo $! > {pidfile}; echo warming up >&2; sleep 100", timeout=1)
    elapsed = time.monotonic() - started
    assert items == [CollectionError("command:probe", None, "timed out after 1s: warming up")]
    assert elapsed < 2
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(grandchild)


def test_background_child_left_behind_is_killed_without_waiting(pidfile: Path) -> None:
    # The child keeps stdout open after the shell exits; drift must neither wait
    # for it until the timeout nor leave it running.
    started = time.monotonic()
    items = collect(f"sleep 100 & echo $! > {pidfile}; echo done", timeout=10)
    assert values(items) == {"stdout": "done\n", "exit": "0"}
    assert time.monotonic() - started < 2
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(grandchild)


def test_huge_output_is_capped_and_marked() -> None:
    stdout = values(collect("head -c 3000000 /dev/zero | tr '\\0' x; exit 4"))
    assert stdout["exit"] == "4"  # drained to the end: the exit code is the command's own
    assert stdout["stdout"] == "x" * MAX_OUTPUT + "\n[truncated]"


def test_output_of_exactly_the_cap_is_not_marked() -> None:
    assert values(collect(f"head -c {MAX_OUTPUT} /dev/zero | tr '\\0' x"))["stdout"] == (
        "x" * MAX_OUTPUT
    )


def test_run_bounded_reports_a_program_that_cannot_start(tmp_path: Path) -> None:
    run = run_bounded(["/nonexistent/drift-probe"], 1)
    assert run.exit_code is None
    assert run.error == "cannot start /nonexistent/drift-probe: No such file or directory"
    missing = tmp_path / "gone"
    run = run_bounded("true", 1, cwd=str(missing))
    assert run.error is not None and str(missing) in run.error


def test_run_bounded_in_cwd_with_argv(tmp_path: Path) -> None:
    run = run_bounded(["pwd"], 5, cwd=str(tmp_path))
    assert (run.exit_code, run.stdout, run.timed_out) == (0, f"{tmp_path}\n".encode(), False)


# --- the folder a command runs in ----------------------------------------------


def test_commands_and_checks_run_beside_the_config_not_where_drift_was_started(
    tmp_path: Path,
) -> None:
    """The same record from another folder must not flip an exit code or an output."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "marker").write_text("beside the config")
    (tmp_path / "marker").write_text("where drift was started")  # run_drift's own folder
    (conf / "drift.toml").write_text(
        'host = "h"\n'
        '[[commands]]\nname = "marker"\nrun = "cat ./marker"\n'
        '[[health]]\nname = "marker-here"\nrun = "grep -q config ./marker"\n'
    )
    db = tmp_path / "d.db"
    args = ["--config", str(conf / "drift.toml"), "--db", str(db)]
    assert run_drift(["record", *args], tmp_path).stdout.startswith(
        "snapshot #1: 3 facts, 3 changed, 0 errors"
    )
    shown = json.loads(run_drift(["show", *args, "--format", "json"], tmp_path).stdout)
    facts = {
        (subject["subject"], fact["key"]): fact
        for subject in shown["data"]["subjects"]
        for fact in subject["facts"]
    }
    assert facts["command:marker", "stdout"]["value"] == "beside the config"
    assert facts["command:marker", "exit"]["value"] == "0"
    assert facts["health:marker-here", "ok"]["value"] == "true"
    assert facts["command:marker", "exit"]["provenance"] == {
        "run": "cat ./marker",
        "cwd": str(conf),
    }


def test_cwd_of_an_entry_is_taken_from_the_config_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "drift.toml").write_text(
        '[[commands]]\nname = "rel"\nrun = "pwd"\ncwd = "data"\n'
        f'[[commands]]\nname = "abs"\nrun = "pwd"\ncwd = "{tmp_path}"\n'
    )
    rel, absolute = load_config(tmp_path / "drift.toml").commands
    assert (rel.cwd, absolute.cwd) == (str(tmp_path / "data"), str(tmp_path))
    assert values(list(collect_command(rel, CollectContext())))["stdout"] == (
        f"{tmp_path / 'data'}\n"
    )
    assert values(list(collect_command(absolute, CollectContext())))["stdout"] == f"{tmp_path}\n"


def test_a_folder_gone_is_a_blind_spot_for_a_command_and_a_failure_for_a_check(
    tmp_path: Path,
) -> None:
    gone = tmp_path / "gone"
    command = CommandSpec(name="probe", run="true", cwd=str(gone))
    assert list(collect_command(command, CollectContext())) == [
        CollectionError("command:probe", None, f"cannot run in {gone}: no such folder")
    ]
    # A check that cannot run vouches for nothing: it must not extend a stable window.
    (check,) = collect_health(HealthSpec(name="up", run="true", cwd=str(gone)), CollectContext())
    assert isinstance(check, Fact) and check.value == "false"
    assert check.provenance["outcome"] == f"cannot run in {gone}: no such folder"


def test_a_spec_without_a_folder_runs_in_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert values(collect("pwd")) == {"stdout": f"{tmp_path}\n", "exit": "0"}


# --- processes that leave the command's group ------------------------------------


def marker() -> str:
    """A sleep length no other process on the machine is using: its command line is the marker."""
    return f"300.{os.getpid()}{time.monotonic_ns() % 10**9:09d}"


def left_running(mark: str, wait: float = 2.0) -> list[psutil.Process]:
    """The live processes whose command line holds `mark`, once they had `wait` seconds to die."""
    deadline = time.monotonic() + wait
    while True:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            if mark in (proc.info["cmdline"] or []) and alive(proc.pid):
                found.append(proc)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


@pytest.fixture
def marks() -> Iterator[list[str]]:
    """Markers a test hands out; any process still carrying one afterwards is killed by pid."""
    handed: list[str] = []
    yield handed
    for mark in handed:
        for proc in left_running(mark, wait=0):
            proc.kill()


def setsid_sleep(marks: list[str]) -> str:
    mark = marker()
    marks.append(mark)
    return mark


def test_a_setsid_child_is_killed_once_the_command_is_done(marks: list[str]) -> None:
    mark = setsid_sleep(marks)
    started = time.monotonic()
    items = collect(f"setsid sleep {mark} & echo started")
    assert values(items) == {"stdout": "started\n", "exit": "0"}
    assert time.monotonic() - started < 2  # not waited for: it holds stdout, and is killed
    assert left_running(mark) == []


def test_a_double_forked_daemon_is_killed_too(marks: list[str]) -> None:
    mark = setsid_sleep(marks)
    # The usual daemon: fork, setsid, fork again, let the middle process exit, drop stdout.
    items = collect(f"( setsid sh -c 'sleep {mark} >/dev/null 2>&1 &' & ); echo started")
    assert values(items) == {"stdout": "started\n", "exit": "0"}
    assert left_running(mark) == []


def test_a_setsid_child_of_a_command_that_times_out_is_killed(marks: list[str]) -> None:
    mark = setsid_sleep(marks)
    started = time.monotonic()
    items = collect(f"setsid sleep {mark} & sleep 100", timeout=1)
    assert items == [CollectionError("command:probe", None, "timed out after 1s")]
    assert time.monotonic() - started < 3
    assert left_running(mark) == []


def test_a_health_check_leaves_nothing_behind_either(marks: list[str]) -> None:
    mark = setsid_sleep(marks)
    spec = HealthSpec(name="up", run=f"setsid sleep {mark} >/dev/null & exit 0", timeout=5)
    (check,) = collect_health(spec, CollectContext())
    assert isinstance(check, Fact) and check.value == "true"
    assert left_running(mark) == []


def test_a_process_drift_did_not_start_for_the_command_is_left_alone(marks: list[str]) -> None:
    # A child this process had before the command, and one it starts afterwards:
    # neither descends from the command, so neither is killed.
    before_mark, after_mark = setsid_sleep(marks), setsid_sleep(marks)
    before = psutil.Popen(["sleep", before_mark], start_new_session=True)
    try:
        assert values(collect("setsid sleep 1 & echo ok"))["stdout"] == "ok\n"
        after = psutil.Popen(["sleep", after_mark])
        try:
            assert alive(before.pid) and alive(after.pid)
            assert values(collect("true")) == {"stdout": "", "exit": "0"}
            assert alive(before.pid) and alive(after.pid)
        finally:
            after.kill()
            after.wait(5)
    finally:
        before.kill()
        before.wait(5)


def test_drift_record_leaves_no_process_of_its_commands_or_checks(
    tmp_path: Path, marks: list[str]
) -> None:
    by_command, by_check, by_timeout = (setsid_sleep(marks) for _ in range(3))
    (tmp_path / "drift.toml").write_text(
        'host = "h"\n'
        f'[[commands]]\nname = "spawns"\nrun = "setsid sleep {by_command} & echo started"\n'
        f'[[commands]]\nname = "hangs"\nrun = "setsid sleep {by_timeout} & sleep 60"\n'
        "timeout = 1\n"
        f'[[health]]\nname = "daemon"\nrun = "( setsid sleep {by_check} >/dev/null 2>&1 & )"\n'
    )
    args = ["--config", str(tmp_path / "drift.toml"), "--db", str(tmp_path / "d.db")]
    started = time.monotonic()
    result = run_drift(["record", *args], tmp_path, check=False, timeout=30)
    assert result.returncode == 4, result.stderr  # the command that hangs is a blind spot
    assert result.stdout.startswith("snapshot #1: 3 facts, 3 changed, 1 error, ")
    assert time.monotonic() - started < 10
    for mark in (by_command, by_check, by_timeout):
        assert left_running(mark) == [], mark
    shown = json.loads(run_drift(["show", *args, "--format", "json"], tmp_path).stdout)
    facts = {
        (subject["subject"], fact["key"]): fact["value"]
        for subject in shown["data"]["subjects"]
        for fact in subject["facts"]
    }
    assert facts["command:spawns", "stdout"] == "started"
    assert facts["health:daemon", "ok"] == "true"
