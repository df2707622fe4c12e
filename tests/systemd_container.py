"""A real systemd booted in a systemd-nspawn container, for tests on machines without one.

Booting and stopping go through `.ci/systemd-container` (one implementation for
CI, local runs and these tests). The host reaches the container's systemd with
``nsenter -t LEADER -a systemctl`` and its files and processes through
``/proc/LEADER/root``. Without a prepared rootfs the tests skip locally and
fail in CI (``CI=true``), where a missing container is a broken pipeline.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "systemd-container"
BOOT_TIMEOUT = 60.0
_names = itertools.count(1)


def state_dir() -> Path:
    """The rootfs and per-container state: $DRIFT_SYSTEMD_ROOT or /var/tmp/drift-systemd."""
    return Path(os.environ.get("DRIFT_SYSTEMD_ROOT") or "/var/tmp/drift-systemd")


def systemd_available() -> str | None:
    """None if a container can be booted here, else why not (in words a developer can act on)."""
    if not sys.platform.startswith("linux"):
        return "a systemd container needs Linux"
    if os.geteuid() != 0:
        return "a systemd container needs root (systemd-nspawn, nsenter)"
    for tool in ("systemd-nspawn", "nsenter", "pgrep"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: run `{SCRIPT} setup`"
    if not (state_dir() / "rootfs.complete").is_file():
        return f"no container rootfs in {state_dir()}: run `{SCRIPT} setup {state_dir()}`"
    return None


def in_ci() -> bool:
    """True on a CI runner, where a test that cannot run must fail rather than skip."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def require_systemd() -> None:
    """Skip the calling test (fail it in CI) when no systemd container can be booted."""
    reason = systemd_available()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"systemd container required in CI: {reason}", pytrace=False)
    pytest.skip(reason)


class SystemdContainer:
    """One booted container: its systemd's host PID, a systemctl for it, its files and /proc."""

    def __init__(self, name: str | None = None, directory: Path | None = None) -> None:
        self.name = name or f"drift-test-{os.getpid()}-{next(_names)}"
        self.directory = directory or state_dir()
        self.leader_pid = 0

    def boot(self) -> SystemdContainer:
        """Boot (or reuse a live container of this name) and wait until systemd is running."""
        try:
            result = self._script("boot", timeout=BOOT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._script("stop", timeout=60)
            message = f"container {self.name} did not boot in {BOOT_TIMEOUT:g} s"
            raise RuntimeError(message) from None
        lines = result.stdout.split()
        if result.returncode != 0 or not lines or not lines[-1].isdigit():
            # Whatever half-started must not outlive the failed boot.
            self._script("stop", timeout=30)
            tail = "\n".join(result.stderr.splitlines()[-15:])
            raise RuntimeError(f"could not boot container {self.name}:\n{tail}")
        self.leader_pid = int(lines[-1])
        return self

    def stop(self) -> None:
        """Power the container off and remove its cgroups; stopping twice is harmless."""
        self._script("stop", timeout=60)
        self.leader_pid = 0

    def __enter__(self) -> SystemdContainer:
        return self.boot()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def systemctl(self) -> list[str]:
        """The command prefix that runs systemctl inside the container."""
        return ["nsenter", "-t", str(self.leader_pid), "-a", "systemctl"]

    @property
    def root(self) -> Path:
        """The container's / as seen from the host."""
        return Path(f"/proc/{self.leader_pid}/root")

    @property
    def proc_root(self) -> str:
        """The container's /proc as seen from the host (PIDs are the container's own)."""
        return f"/proc/{self.leader_pid}/root/proc"

    def write_file(self, path: str, text: str) -> Path:
        """Write `text` to the absolute `path` inside the container, creating folders."""
        if not path.startswith("/"):
            raise ValueError(f"container path must be absolute: {path!r}")
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def write_unit(self, name: str, text: str) -> Path:
        """Write a unit (or ``UNIT.d/NAME.conf`` drop-in) under /etc/systemd/system."""
        return self.write_file(f"/etc/systemd/system/{name}", text)

    def run_systemctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run systemctl in the container; raise with its stderr if it fails and `check`."""
        result = subprocess.run(
            [*self.systemctl, *args], capture_output=True, text=True, timeout=30, check=False
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"systemctl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result

    def daemon_reload(self) -> None:
        """Make systemd re-read unit files, drop-ins and environment file names."""
        self.run_systemctl("daemon-reload")

    def start(self, unit: str) -> None:
        """Start a unit and wait for the job to finish."""
        self.run_systemctl("start", unit)

    def restart(self, unit: str) -> None:
        """Restart a unit and wait for the job to finish."""
        self.run_systemctl("restart", unit)

    def stop_unit(self, unit: str) -> None:
        """Stop a unit and wait for the job to finish."""
        self.run_systemctl("stop", unit)

    def environ(self, pid: int) -> dict[str, str]:
        """The live environment of container process `pid`, read from the host."""
        raw = Path(self.proc_root, str(pid), "environ").read_bytes()
        pairs = (item.decode(errors="surrogateescape").partition("=") for item in raw.split(b"\0"))
        return {name: value for name, sep, value in pairs if sep}

    def _script(self, command: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPT), command, str(self.directory), self.name],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )


def systemd_container_fixture(scope: Any = "module") -> Callable[..., Any]:
    """A pytest fixture that boots one container per `scope` and stops it afterwards.

    Use in a test module as ``systemd_container = systemd_container_fixture()``.
    """

    @pytest.fixture(scope=scope)
    def systemd_container() -> Iterator[SystemdContainer]:
        require_systemd()
        container = SystemdContainer()
        try:
            container.boot()
        except RuntimeError as exc:
            # The rootfs is there, so a failed boot is a real failure, not a skip.
            pytest.fail(str(exc), pytrace=False)
        try:
            yield container
        finally:
            container.stop()

    return systemd_container
