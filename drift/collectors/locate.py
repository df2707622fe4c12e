"""Finding a service's main process: by pidfile, by a regex on command lines, or by systemd unit.

A stopped service is a state: the finder says "not running". What cannot say
which process is the service is an error instead, so the service's facts keep
their last values: a pidfile that is missing, empty or garbled, one naming
drift itself, the init process or a kernel thread, a stale one whose pid
another program has taken since the service was last recorded, a unit
whose MainPID is not in `ctx.proc_root`, and one whose MainPID is still
systemd's child that has not run the unit's program (caught mid-restart).
A service found by regex gets a ``matches`` fact (how many processes
matched); one found by unit gets the ``unit:*`` facts of systemd
(`drift.collectors.systemd`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import psutil

from drift.collectors.flags import PYTHON, FlagWord, python_options
from drift.collectors.process import SAME_PROCESS, STAT_FLAGS, ExactStart, Result, stat_fields
from drift.config import ServiceSpec
from drift.errors import DriftError
from drift.facts import CollectContext, CollectionError, Fact
from drift.timespec import parse_stored_time

if TYPE_CHECKING:
    from drift.collectors.systemd import UnitState

# How long to wait, each time, for systemd's child to run the unit's program
# (a fork-to-exec takes milliseconds): about a quarter of a second in all.
STARTING_WAITS = (0.01, 0.02, 0.04, 0.08, 0.1)
# A kernel thread (kworker, kthreadd ...): flags field of /proc/PID/stat.
_PF_KTHREAD = 0x00200000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Located:
    """What a finder decided: the main process (None: not running), or an error."""

    found_by: str
    process: psutil.Process | None = None
    facts: list[Result] = field(default_factory=list)
    error: CollectionError | None = None
    pidfile_mtime: str | None = None  # when the pidfile that named the process was written
    # When the process started, to the microsecond, and who said so, where its
    # finder knows (systemd); else the kernel's start, to the clock tick.
    exact_start: ExactStart | None = None

    @property
    def provenance(self) -> dict[str, Any]:
        """How the process was found, for the provenance of its pid and start."""
        if self.pidfile_mtime is None:
            return {"found_by": self.found_by}
        return {"found_by": self.found_by, "pidfile_mtime": self.pidfile_mtime}


def locate(spec: ServiceSpec, ctx: CollectContext, subject: str) -> Located:
    """Find the service's main process the way its config says."""
    if spec.pidfile is not None:
        return _from_pidfile(spec.pidfile, subject, ctx)
    if spec.match is not None:
        return _from_match(spec.match, ctx.proc_root, subject)
    if spec.unit is not None:
        return _from_unit(spec.unit, ctx, subject)
    return Located("nothing", error=CollectionError(subject, None, "no unit, pidfile or match"))


def _from_pidfile(path: str, subject: str, ctx: CollectContext) -> Located:
    found_by = f"pidfile {path}"
    service = subject.removeprefix("service:")

    def blind(problem: str) -> Located:
        message = f"{problem}: cannot tell whether {service} runs"
        return Located(found_by, error=CollectionError(subject, None, message))

    try:
        # In a container, its own pidfile: read inside it, its symlinks too.
        opened = ctx.files.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(opened, "rb") as f:
            data = f.read(64)
            written = os.fstat(f.fileno()).st_mtime_ns
    except FileNotFoundError:
        # A daemon that removed its pidfile on a clean exit looks just like a
        # typo in the path; the typo must not read as a stop, so neither does.
        return blind(f"pidfile {path} does not exist")
    except PermissionError:
        return blind(f"permission denied reading pidfile {path}")
    except OSError as exc:
        return blind(f"cannot read pidfile {path}: {exc.strerror or exc}")
    # Empty or garbled: a daemon caught writing it, or not a pidfile at all.
    words = data.split()
    if not words:
        return blind(f"pidfile {path} is empty")
    try:
        pid = int(words[0])
    except ValueError:
        pid = 0
    if pid <= 0:
        return blind(f"pidfile {path} holds no pid")
    process = _alive(pid)
    if process is None:
        # The pid of a process that is gone: what a daemon that died leaves behind.
        return Located(found_by)
    other = _not_a_service(process, ctx.proc_root)
    if other is not None:
        return blind(f"pidfile {path} holds pid {pid}, {other}, not {service}")
    mtime = _EPOCH + timedelta(microseconds=written // 1000)
    return Located(found_by, process=process, pidfile_mtime=mtime.isoformat())


def _not_a_service(proc: psutil.Process, proc_root: str) -> str | None:
    """What the process is when it cannot be anyone's service (drift, init, a kernel thread)."""
    me = _self_pid(proc_root)
    if proc.pid == me:
        return "drift itself"
    try:
        name = proc.name()
    except psutil.Error:
        name = "?"
    # pid 1 is the service itself in a container whose /proc drift reads from
    # outside, or enters with `docker exec`: refused only when drift runs under it.
    if proc.pid == 1 and me is not None and 1 in _own_lineage(proc_root):
        return f"the init process ({name})"
    if _kernel_thread(proc.pid, proc_root):
        return f"a kernel thread ({name})"
    return None


def _kernel_thread(pid: int, proc_root: str) -> bool:
    try:
        return bool(int(stat_fields(pid, proc_root)[STAT_FLAGS]) & _PF_KTHREAD)
    except (psutil.NoSuchProcess, IndexError, ValueError):
        return False


def stale_pidfile(
    path: str, subject: str, facts: list[Result], last: dict[str, str]
) -> CollectionError | None:
    """A pidfile still holding the pid last recorded, now another program started since.

    Nothing rewrote the pidfile, yet the process under its pid started at
    another time and runs another program: the service that wrote it is gone
    and its pid was reused. A rewritten pidfile, or the same program under the
    same pid, is a restart (a container's services get the same pids again)
    and stays the service.
    """
    now = {f.key: f.value for f in facts if isinstance(f, Fact)}
    pid = now.get("pid")
    if pid is None or last.get("pid") != pid:
        return None
    pid_fact = next(f for f in facts if isinstance(f, Fact) and f.key == "pid")
    written, written_before = pid_fact.provenance.get("pidfile_mtime"), last.get("pidfile_mtime")
    if written and written_before and written != written_before:
        return None
    before_at = parse_stored_time(last.get("started_at"))
    at = parse_stored_time(now.get("started_at"))
    if before_at is None or at is None or abs(at - before_at) < SAME_PROCESS:
        return None
    before, current = _program(last), _program(now)
    if not _different_programs(before, current):
        return None
    service = subject.removeprefix("service:")
    return CollectionError(
        subject,
        None,
        f"pidfile {path} is stale: pid {pid} now runs {_program_text(current)} "
        f"(started {_clock(at)}), not the {_program_text(before)} "
        f"(started {_clock(before_at)}) last recorded for {service}: "
        f"cannot tell whether {service} runs",
    )


_Program = tuple[str | None, str | None, str | None]


def _program(facts: dict[str, str]) -> _Program:
    """(executable, basename of argv[0], python's script or module) of a process, where known."""
    try:
        argv = json.loads(facts.get("argv") or "[]")
    except ValueError:
        argv = []
    if not isinstance(argv, list) or not all(isinstance(w, str) for w in argv):
        argv = []
    head = os.path.basename(argv[0]) if argv else None
    return facts.get("exe") or None, head or None, _python_program(argv)


def _python_program(argv: list[str]) -> str | None:
    """For a python command line, what it runs: ``-m MODULE``, ``-c`` or the script path."""
    if not argv or not PYTHON.fullmatch(os.path.basename(argv[0])):
        return None
    options: list[FlagWord[str]] = []
    start = python_options(argv, lambda w: w, options)
    for name, _word, value, inline in options:
        if name == "-m":
            return f"-m {inline if inline is not None else value or ''}"
        if name == "-c":
            return "-c"
    script = argv[start - 1] if 1 <= start - 1 < len(argv) else None
    return script if script is not None and not script.startswith("-") else None


def _different_programs(before: _Program, current: _Program) -> bool:
    """True when what is known of both says they differ: executable (else argv[0]), script."""
    exe_before, head_before, script_before = before
    exe_now, head_now, script_now = current
    if exe_before and exe_now:
        if exe_before != exe_now:
            return True
    elif head_before and head_now and head_before != head_now:
        return True
    return bool(script_before and script_now and script_before != script_now)


def _program_text(program: _Program) -> str:
    exe, head, script = program
    text = exe or head or "an unknown program"
    return f"{text} {script}" if script else text


def _clock(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _alive(pid: int) -> psutil.Process | None:
    """The process with this pid if it exists and is not a zombie."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:
        pass  # it exists; reading it will tell what we may see
    return proc


def _zombie(pid: int) -> bool:
    """Whether the process with this pid has exited and is waiting for its parent to reap it."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _from_match(pattern: str, proc_root: str, subject: str) -> Located:
    found_by = f"match {pattern}"
    regex = re.compile(pattern)
    skip = _own_lineage(proc_root)
    matched: dict[int, tuple[float, int, psutil.Process]] = {}
    for pid in psutil.pids():
        if pid in skip:
            continue
        try:
            proc = psutil.Process(pid)
            argv = proc.cmdline()
            # Kernel threads and zombies have no command line.
            if not argv or not regex.search(shlex.join(argv)):
                continue
            matched[pid] = (proc.create_time(), proc.ppid(), proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    count = Fact(subject, "matches", str(len(matched)), {"found_by": found_by})
    # Workers (forked children, often with the same command line) are not the
    # service: take a process whose parent does not match. Create times tick
    # at 10 ms, so a fork can share its parent's; the parent rule settles it.
    roots = [pid for pid, (_, ppid, _) in matched.items() if ppid not in matched]
    if not roots:
        roots = list(matched)
    if not roots:
        return Located(found_by, facts=[count])
    main = min(roots, key=lambda pid: (matched[pid][0], pid))
    return Located(found_by, process=matched[main][2], facts=[count])


def _own_lineage(proc_root: str) -> frozenset[int]:
    """drift's own pid and its ancestors as seen in proc_root (empty if drift is not in it).

    ``<proc_root>/self`` names the reader's pid in that procfs's pid
    namespace, so a container's /proc, where drift is invisible, excludes
    nothing, while os.getpid() could name an unrelated container process.
    """
    me = _self_pid(proc_root)
    if me is None:
        return frozenset()
    lineage = {me}
    try:
        lineage.update(p.pid for p in psutil.Process(me).parents())
    except psutil.Error:
        pass
    return frozenset(lineage)


def _self_pid(proc_root: str) -> int | None:
    """drift's own pid as seen in proc_root, or None if drift is not in it."""
    try:
        return int(os.readlink(os.path.join(proc_root, "self")))
    except (OSError, ValueError):
        return None


def _from_unit(unit: str, ctx: CollectContext, subject: str) -> Located:
    located, state = _ask_systemd(unit, ctx, subject)
    if state is None:
        return located
    if state.runtime.failing:
        located.facts.append(_journal(subject, unit, ctx))
    pid = located.process.pid if located.process is not None else 0
    if pid and state.runtime.exec_main_pid == pid and state.exec_main_start is not None:
        # systemd stamps the start in microseconds as it forks the main process.
        located.exact_start = ExactStart(state.exec_main_start, f"ExecMainStartTimestamp of {unit}")
    return located


def _journal(subject: str, unit: str, ctx: CollectContext) -> Result:
    """``unit:journal``: the lines of the unit's last runs, or why they could not be read."""
    from drift.collectors.journal import JournalError, unit_journal

    try:
        lines = unit_journal(unit, ctx.systemctl)
    except JournalError as exc:
        return CollectionError(subject, "unit:journal", str(exc))
    provenance: dict[str, Any] = {
        "unit": unit,
        "run": lines.command,
        "invocations": list(lines.invocations),
    }
    if lines.skipped:
        provenance["skipped"] = lines.skipped
        provenance["unsure"] = f"{lines.skipped} of its entries could not be read: not shown"
    return Fact(subject, "unit:journal", lines.text, provenance)


def _ask_systemd(unit: str, ctx: CollectContext, subject: str) -> tuple[Located, UnitState | None]:
    """The unit's main process as systemd names it (asked again while it is mid-start)."""
    from drift.collectors.systemd import show_unit
    from drift.collectors.unit_files import files_root
    from drift.collectors.unit_limits import limit_facts
    from drift.collectors.unit_sources import unit_source_facts

    found_by = f"unit {unit}"
    waits = iter(STARTING_WAITS)
    vanished = 0
    while True:
        try:
            state = show_unit(unit, ctx.systemctl)
        except DriftError as exc:
            # Without systemd's answer the main PID is unknown too, so the error
            # covers the whole service: nothing of it may read as removed.
            error = CollectionError(subject, None, f"unit: {exc}")
            return Located(found_by, error=error), None
        facts: list[Result] = unit_source_facts(subject, state, ctx)
        facts += limit_facts(subject, state, files_root(ctx.proc_root))
        if state.main_pid <= 0:
            return Located(found_by, facts=facts), state
        process = _alive(state.main_pid)
        if process is None:
            # The MainPID has exited: systemd reaps it in a moment (mid-restart), so
            # ask again shortly; or it is not in proc_root, as when systemd's pids are
            # not proc_root's (a namespace mix-up). Neither may read as the service stopping.
            exited = _zombie(state.main_pid)
            wait = next(waits, None) if exited else None
            if wait is not None:
                time.sleep(wait)
                continue
            vanished += 1
            if vanished < 2 and not exited:
                continue
            where = "which has exited" if exited else f"not found in {ctx.proc_root}"
            message = f"systemd reports MainPID {state.main_pid}, {where}"
            break
        if not systemd_child(process):
            return Located(found_by, process=process, facts=facts), state
        # Caught between systemd's fork and the exec of the unit's program: what this
        # process runs with is systemd's own, not the service's. Ask again shortly.
        wait = next(waits, None)
        if wait is None:
            message = (
                f"systemd is still starting {unit}: pid {process.pid} has not run the "
                "unit's program yet"
            )
            break
        time.sleep(wait)
    return Located(found_by, facts=facts, error=CollectionError(subject, None, message)), state


def systemd_child(proc: psutil.Process) -> bool:
    """Whether `proc` is systemd's child for a unit, before it runs the unit's program.

    Between its fork and the exec, the child runs systemd's own executable
    (systemd-executor from systemd 255 on) with the manager's environment.
    It names itself after the program to come, ``(bash)``, a moment after the
    fork; before that it is a copy of the manager, argv and all. Read as the
    service, every fact of it would be a false change.
    """
    try:
        with proc.oneshot():
            argv = proc.cmdline()
            exe = proc.exe()
    except psutil.Error:
        return False
    program = os.path.basename(exe.removesuffix(" (deleted)"))
    if program == "systemd-executor":
        return True  # it only ever runs to exec a unit's program
    if program != "systemd":
        return False
    # The title overwrites systemd's own argv in place: words after it are blank, if any.
    if argv and argv[0].startswith("(") and argv[0].endswith(")"):
        return not any(word.strip() for word in argv[1:])
    return _copy_of_parent(proc, argv, exe)


def _copy_of_parent(proc: psutil.Process, argv: list[str], exe: str) -> bool:
    """Whether `proc` still runs its parent's program with its parent's argv: a fork not yet named.

    `systemd --user` under PID 1 runs the same executable with other words, so it stays a service.
    """
    try:
        parent = proc.parent()
        return parent is not None and parent.exe() == exe and parent.cmdline() == argv
    except psutil.Error:
        return False
