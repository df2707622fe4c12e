"""Shared helpers: run the real `drift` executable, as a user (or cron) would."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

DRIFT = str(Path(sys.executable).with_name("drift"))


def drift_env(tmp_path: Path) -> dict[str, str]:
    """An environment that cannot reach the user's real config or database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFT_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg-state")
    # Beside the test's folder, not in it: tests check that folder for leftovers, and the
    # compiled templates kept here are one user's cache shared by every run, as in life.
    env["XDG_CACHE_HOME"] = str(tmp_path.parent / "xdg-cache")
    return env


def run_drift(
    args: list[str],
    tmp_path: Path,
    *,
    check: bool = True,
    timeout: float = 60,
    memory: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the installed drift command; fail loudly with its output on a bad exit.

    `memory` bounds its address space (bytes): past it, an allocation fails.
    """

    def bound() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    result = subprocess.run(
        [DRIFT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=drift_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        preexec_fn=bound if memory is not None else None,
    )
    if check:
        assert result.returncode == 0, (
            f"drift {args} -> {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
    return result


def start_drift(args: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    """Start the installed drift command in the background, its output captured as text."""
    return subprocess.Popen(
        [DRIFT, *args],
        env=drift_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_terminal(controller: int) -> bytes:
    """All a pseudo-terminal got until its last writer is gone; closes `controller`."""
    screen = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: every writer is gone
            break
        if not chunk:
            break
        screen += chunk
    os.close(controller)
    return screen


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator:
    """The incident's deployment (scripts, git checkout, drift.toml) with its services running."""
    from drift.demo import IncidentSandbox

    box = IncidentSandbox(tmp_path / "box")
    box.build()
    box.start_all()
    try:
        yield box
    finally:
        box.stop_all()


def changes_by_fact(data: dict) -> dict[tuple[str, str], dict]:
    """Every change in a since/diff JSON report, root or evidence, by (subject, key)."""
    out = {}
    for suspect in data["suspects"]:
        for change in suspect["changes"]:
            out[(change["subject"], change["key"])] = {**change, "suspect": suspect}
    return out
