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
