"""Reading a service's process once it is found: its facts, from /proc under `ctx.proc_root`.

``running``, ``pid``, ``started_at``, ``ppid``, ``exe``, ``cwd``, ``user``,
``argv``, one ``flag:<name>`` per command-line flag and one ``env:<NAME>``
per variable of the live environment. What may not be read (another user's
process) is a CollectionError for that key, or for the ``flag:`` and ``env:``
prefixes, so those facts keep their last values. A process that rewrote its
title (setproctitle) has ``title`` instead of ``argv``, ``flag:`` and
``env:``, and one error (`LIVE_UNREADABLE`) that says so.

``started_at`` is the start of the clock tick (10 ms) in which the process
started: the kernel counts it in ticks of CLOCK_BOOTTIME, and drift adds the
boot time to the millisecond, so one process gives one value at every record.
For a unit's main process systemd's own stamp (ExecMainStartTimestamp, to the
microsecond) is taken instead, when the finder passes it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psutil

from drift.collectors.flags import parse_flags
from drift.facts import LIVE_UNREADABLE, CollectionError, Fact, storable
from drift.timespec import parse_stored_time

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_TICK_NS = 1_000_000_000 // _CLOCK_TICKS
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SAME_PROCESS = timedelta(seconds=1)
"""Start times of one pid closer than this are one process read twice, not two processes.

A pid is not reused within a second of its last start (pid_max is at least
32768), while a reading may move that much: drift before this one read the
boot time to the whole second, and a stepped wall clock moves every start.
"""

# Indexes in stat_fields, which start at field 3 (state) of proc(5).
STAT_FLAGS = 6
_STAT_STARTTIME = 19

Result = Fact | CollectionError


@dataclass(frozen=True)
class ExactStart:
    """A process's start as its manager stamped it (to the microsecond), and where that was read."""

    at: datetime
    source: str


def stat_fields(pid: int, proc_root: str) -> list[bytes]:
    """The fields of /proc/PID/stat after ``pid (comm)``; comm may hold spaces and parens."""
    try:
        with open(f"{proc_root}/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        raise psutil.NoSuchProcess(pid) from None
    return stat.rpartition(b")")[2].split()


def boot_time_ns() -> int:
    """When the kernel booted, in nanoseconds since the epoch, rounded to the millisecond.

    /proc/PID/stat counts a process's start in clock ticks of CLOCK_BOOTTIME
    (time since boot, suspend included), so the boot is CLOCK_REALTIME minus
    CLOCK_BOOTTIME. /proc/stat's btime, which psutil adds, is that moment cut
    to the second: start times were up to a second early. Of a few readings
    the one with the two BOOTTIME reads closest together wins; the rounding
    gives the same value at every record until the wall clock is stepped.
    Under a container's /proc too: its processes run on the same kernel, and
    a time namespace shifts their start times and drift's clock alike.
    """
    best_gap, best = -1, 0
    for _ in range(5):
        before = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        real = time.clock_gettime_ns(time.CLOCK_REALTIME)
        after = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        if best_gap < 0 or after - before < best_gap:
            best_gap, best = after - before, real - (before + after) // 2
    return (best + 500_000) // 1_000_000 * 1_000_000


def start_time_text(boot_ns: int, ticks: int) -> str:
    """``started_at`` for a process started `ticks` clock ticks after a boot at `boot_ns`."""
    moment = _EPOCH + timedelta(microseconds=(boot_ns + ticks * _TICK_NS) // 1000)
    return moment.isoformat(timespec="microseconds")


def process_facts(
    subject: str,
    proc: psutil.Process,
    found: dict[str, Any],
    proc_root: str,
    boot_ns: int,
    last: dict[str, str],
    exact_start: ExactStart | None = None,
) -> list[Result]:
    """Every fact of one live process; raises psutil.NoSuchProcess if it exits meanwhile.

    `found` says how the process was found (the provenance of its pid and
    start). `last` is what was last recorded of the service's process: when
    it had this pid and started within SAME_PROCESS of this reading, this is
    that process, and its recorded ``started_at`` is kept, so a reading that
    moved (a stepped clock, a boot time formerly cut to the second) is no restart.
    `exact_start`, when the finder knows it (systemd's ExecMainStartTimestamp),
    is ``started_at`` instead of the kernel's clock tick.
    """
    pid = proc.pid
    located = {"pid": pid, **found}
    with proc.oneshot():
        ppid = proc.ppid()
    exact = exact_start.at.isoformat(timespec="microseconds") if exact_start else None
    if exact is not None:
        started_at = _kept(pid, exact, last)
    else:
        started_at = _started_at(pid, proc_root, boot_ns, last)
    if exact_start is not None and started_at == exact:
        start = {**located, "source": exact_start.source, "uncertainty_ms": 0}
    else:
        # The kernel counts the start in whole ticks: the process started in the
        # tick that begins at started_at (a reading kept from the last record too).
        start = {**located, "uncertainty_ms": 1000 // _CLOCK_TICKS}
    out: list[Result] = [
        Fact(subject, "running", "true", dict(located)),
        Fact(subject, "pid", str(pid), dict(located)),
        Fact(subject, "started_at", started_at, start),
        Fact(subject, "ppid", str(ppid), {"pid": pid, "source": f"{proc_root}/{pid}/stat"}),
    ]
    identity = _identity(subject, proc, proc_root)
    out += identity
    known = {f.key: f.value for f in identity if isinstance(f, Fact)}
    title = _rewritten_title(proc, proc_root, known.get("exe"), known.get("cwd"))
    if title is not None:
        out += _title(subject, pid, title, proc_root)
    else:
        out += _command_line(subject, proc, proc_root)
        out += _environment(subject, proc, proc_root)
    # A process that died while we read it shows an empty cmdline and
    # environment as a zombie, and its pid may even be reused: such a reading
    # must not pass for the service dropping every flag and variable.
    if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
        raise psutil.NoSuchProcess(pid)
    return out


def _started_at(pid: int, proc_root: str, boot_ns: int, last: dict[str, str]) -> str:
    """The process's ``started_at``: the one last recorded if this is that same process."""
    try:
        ticks = int(stat_fields(pid, proc_root)[_STAT_STARTTIME])
    except (IndexError, ValueError):
        raise psutil.NoSuchProcess(pid) from None  # not a stat line: read it again
    return _kept(pid, start_time_text(boot_ns, ticks), last)


def _kept(pid: int, started_at: str, last: dict[str, str]) -> str:
    """`started_at`, or the one last recorded if that is the same process read again."""
    recorded = parse_stored_time(last.get("started_at"))
    if last.get("pid") == str(pid) and recorded is not None:
        moment = parse_stored_time(started_at)
        if moment is not None and abs(moment - recorded) < SAME_PROCESS:
            return last["started_at"]
    return started_at


def _identity(subject: str, proc: psutil.Process, proc_root: str) -> list[Result]:
    """``exe``, ``cwd`` and ``user``; each one not readable is an error for that key."""
    pid = proc.pid
    out: list[Result] = []
    for key, read, source in (
        ("exe", proc.exe, "exe"),
        ("cwd", proc.cwd, "cwd"),
        ("user", proc.username, "status"),
    ):
        try:
            value = read()
        except psutil.AccessDenied:
            out.append(_denied(subject, key, key, pid))
            continue
        provenance = {"pid": pid, "source": f"{proc_root}/{pid}/{source}"}
        out.append(Fact(subject, key, storable(value), provenance))
    return out


def _command_line(subject: str, proc: psutil.Process, proc_root: str) -> list[Result]:
    """``argv`` and one ``flag:<name>`` per flag (see parse_flags)."""
    pid = proc.pid
    try:
        argv = [storable(word) for word in proc.cmdline()]
    except psutil.AccessDenied:
        return [_denied(subject, "argv", "cmdline", pid), _denied(subject, "flag:", "cmdline", pid)]
    from_cmdline = {"pid": pid, "source": f"{proc_root}/{pid}/cmdline"}
    out: list[Result] = [Fact(subject, "argv", json.dumps(argv), dict(from_cmdline))]
    for name, value in parse_flags(argv).items():
        out.append(Fact(subject, f"flag:{name}", value, dict(from_cmdline)))
    return out


def _environment(subject: str, proc: psutil.Process, proc_root: str) -> list[Result]:
    """One ``env:<NAME>`` per variable of the live environment, by name."""
    pid = proc.pid
    try:
        environ = proc.environ()
    except psutil.AccessDenied:
        return [_denied(subject, "env:", "environment", pid)]
    from_environ = {"pid": pid, "source": f"{proc_root}/{pid}/environ"}
    return [
        Fact(subject, f"env:{storable(name)}", storable(environ[name]), dict(from_environ))
        for name in sorted(environ)
    ]


def _rewritten_title(
    proc: psutil.Process, proc_root: str, exe: str | None, cwd: str | None
) -> str | None:
    """The title a process wrote over its command line, or None if it shows its own.

    setproctitle (sglang-router, SGLang's and vLLM's workers, nginx) writes
    the title over the memory of argv and of the environment: the kernel then
    shows the title as the command line and the environment as NUL bytes.
    Taken as rewritten only when all three hold: the kernel names the
    executable (not a kernel thread, not another user's process), the
    environment holds no variable, and argv[0] names no executable file.
    A process started with an empty environment still shows its real argv[0].
    """
    if not exe:
        return None
    try:
        words = proc.cmdline()
        if proc.environ():
            return None
    except psutil.AccessDenied:
        return None
    if words and _names_a_program(words[0], exe, cwd, f"{proc_root}/{proc.pid}/root"):
        return None
    # A process in the middle of an exec (`exec -a NAME prog`) shows no environment for a
    # moment: a title is a lasting claim, taken only when a second reading says the same.
    try:
        if proc.environ() or proc.cmdline() != words:
            return None
    except psutil.AccessDenied:
        return None
    return storable(" ".join(w for w in words if w))


# Where a name without a slash is looked for when the process's own PATH is not known.
_USUAL_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def _names_a_program(argv0: str, exe: str, cwd: str | None, root: str) -> bool:
    """Whether argv[0] names an executable file: the one it runs, or one at that path or on PATH."""
    if not argv0:
        return False
    if "/" not in argv0:
        if argv0 == os.path.basename(exe.removesuffix(" (deleted)")):
            return True
        candidates = [f"{folder}/{argv0}" for folder in _USUAL_PATH]
    elif argv0.startswith("/"):
        candidates = [argv0]
    elif cwd is None:
        return True  # a relative path from a folder not known: not taken as a title
    else:
        candidates = [os.path.join(cwd, argv0)]
    return any(os.path.isfile(root + c) and os.access(root + c, os.X_OK) for c in candidates)


def _title(subject: str, pid: int, title: str, proc_root: str) -> list[Result]:
    """``title``, and one error for the command line and environment it hides (kept as were)."""
    provenance = {"pid": pid, "source": f"{proc_root}/{pid}/cmdline"}
    message = f"pid {pid} rewrote its title: its live command line and environment cannot be read"
    return [
        Fact(subject, "title", title, provenance),
        CollectionError(subject, LIVE_UNREADABLE, message, lasting=True),
    ]


def _denied(subject: str, key: str, what: str, pid: int) -> CollectionError:
    return CollectionError(subject, key, f"permission denied reading {what} of pid {pid}")
