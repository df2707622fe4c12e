"""[container]: find the container a box lives in, afresh at every record.

Everything drift reads of a container from the host hangs on its leader, the
container's init, by its host PID: ``nsenter -t PID -a systemctl`` reaches its
systemd, ``/proc/PID/root/proc`` shows its processes and ``/proc/PID/root``
its files (read through `drift.rooted.RootedFiles`, every symlink resolved
inside the container). That PID changes each time the container starts, so
it is never written in the config nor in any subject: it is looked up at each
record, by machinectl, a pidfile or a command (``docker inspect``), and
checked: a PID that is gone, whose root is the host's own, or that started
after its pidfile was written (a stale pidfile, the PID reused since) is not
the container. What cannot be found is `ContainerNotFound`, which `drift
record` turns into a blind spot on everything the container holds.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from drift.config import ContainerSpec
from drift.rooted import RootedFiles
from drift.secrets.shapes import cut

# A pidfile written this long before the process it names started cannot have
# been written for it: the boot time is known to the second, a start to the tick.
_PIDFILE_SLACK_NS = 1_500_000_000
_PID_BYTES = 64


class ContainerNotFound(Exception):
    """The container's leader could not be found or is not a container; the message says why."""


@dataclass(frozen=True)
class Container:
    """A container found for one record: its name, its leader's host PID, how it was found."""

    name: str
    leader: int
    found_by: str

    @property
    def enter(self) -> tuple[str, ...]:
        """The command prefix that runs a program inside the container: all its namespaces,
        and its root (a container that is only a chroot shares the host's mount namespace).
        """
        return ("nsenter", "-t", str(self.leader), "-a", "--root")

    @property
    def systemctl(self) -> tuple[str, ...]:
        """The command prefix that runs systemctl inside the container."""
        return (*self.enter, "systemctl")

    @property
    def proc_root(self) -> str:
        """The container's /proc, seen from the host (its processes by their own PIDs)."""
        return f"/proc/{self.leader}/root/proc"

    def files(self) -> RootedFiles:
        """The container's files, by their paths inside it."""
        return RootedFiles(f"/proc/{self.leader}/root", self.name, f"/proc/{self.leader}/mountinfo")


def find_container(spec: ContainerSpec) -> Container:
    """The container `spec` names, as it runs now; ContainerNotFound says why not."""
    if spec.pidfile is not None:
        found_by = f"pidfile {spec.pidfile}"
        leader, written_ns = _read_pidfile(spec)
    else:
        argv = (
            ("machinectl", "show", "--property=Leader", "--value", "--", spec.machine)
            if spec.machine is not None
            else spec.leader_command
        )
        found_by = f"$ {shlex.join(argv)}"
        leader, written_ns = _run_leader_command(spec, argv), None
    _check_leader(spec, leader, found_by, written_ns)
    return Container(spec.name, leader, found_by)


def _not_found(spec: ContainerSpec, why: str) -> ContainerNotFound:
    return ContainerNotFound(f"container {spec.name} not found: {why}")


def _read_pidfile(spec: ContainerSpec) -> tuple[int, int]:
    """The PID in the pidfile and when the pidfile was written (ns since the epoch)."""
    assert spec.pidfile is not None
    path = spec.pidfile
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _not_found(spec, f"pidfile {path} does not exist") from None
    except OSError as exc:
        raise _not_found(spec, f"cannot read pidfile {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(_PID_BYTES)
        written = os.fstat(f.fileno()).st_mtime_ns
    return _pid(spec, data, f"pidfile {path}"), written


def _run_leader_command(spec: ContainerSpec, argv: tuple[str, ...]) -> int:
    """The PID the command prints; its failure, timeout or silence is ContainerNotFound."""
    from drift.collectors.commands import run_bounded

    shown = f"`{shlex.join(argv)}`"
    run = run_bounded(argv, spec.timeout, max_output=4096)
    if run.error is not None:
        raise _not_found(spec, f"{shown} could not run: {run.error}")
    if run.timed_out:
        raise _not_found(spec, f"{shown} timed out after {spec.timeout:g}s")
    if run.exit_code != 0:
        said = run.stderr_last_line or "no message"
        raise _not_found(spec, f"{shown} failed (exit {run.exit_code}): {said}")
    return _pid(spec, run.stdout, shown)


def _pid(spec: ContainerSpec, data: bytes, source: str) -> int:
    """The one PID `data` holds; 0 (what docker prints for a stopped container) is not running."""
    words = data.split()
    if len(words) != 1 or not words[0].isdigit():
        text = cut(data[:4096].decode("utf-8", "replace").strip(), 60)
        raise _not_found(spec, f"{source} gave {text!r}, not one PID")
    pid = int(words[0])
    if pid == 0:
        raise _not_found(spec, f"{source} gave PID 0: the container is not running")
    return pid


def _check_leader(spec: ContainerSpec, pid: int, found_by: str, written_ns: int | None) -> None:
    """Refuse a PID that is gone, is no container's (its root is the host's) or is newer
    than the pidfile that names it.
    """
    try:
        root = os.stat(f"/proc/{pid}/root")
        host = os.stat("/")
    except FileNotFoundError:
        raise _not_found(spec, f"its leader PID {pid} ({found_by}) is not running") from None
    except OSError as exc:
        raise _not_found(
            spec,
            f"cannot read /proc/{pid}/root: {exc.strerror or exc} (drift reads a "
            "container from the host as root)",
        ) from None
    if (root.st_dev, root.st_ino) == (host.st_dev, host.st_ino):
        raise _not_found(
            spec,
            f"PID {pid} ({found_by}) is not in a container: its root is the host's / "
            "(give the PID of the container's init)",
        )
    if written_ns is not None:
        started = _started_ns(pid)
        if started is not None and started > written_ns + _PIDFILE_SLACK_NS:
            raise _not_found(
                spec,
                f"{found_by} is stale: PID {pid} started after the pidfile was written",
            )


def _started_ns(pid: int) -> int | None:
    """When process `pid` started (ns since the epoch, to about a second), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/stat", "rb") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
    except (OSError, IndexError, ValueError, StopIteration):
        return None
    hertz = os.sysconf("SC_CLK_TCK")
    return btime * 1_000_000_000 + ticks * 1_000_000_000 // hertz
