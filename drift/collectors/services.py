"""Services: find a service's main process and record what it really runs with.

Facts are ``service:<name>`` with keys ``running``, ``pid``, ``started_at``,
``exe``, ``cwd``, ``user``, ``argv``, ``ppid``, one ``flag:<name>`` per
command-line flag, one ``env:<NAME>`` per variable of the live environment,
``matches`` for a service found by regex and the ``unit:*`` facts of systemd
for a service found by unit.

A stopped service is a state, not a failure: it yields ``running = "false"``
and no process facts, so its env and flag facts end (that is real). Anything
that could not be read is a CollectionError, so its facts keep their value.
So is a pidfile that cannot say which process is the service: one that is
missing, empty or garbled, one naming drift itself, the init process or a
kernel thread, and a stale one whose pid another program has taken since
the service was last recorded (``ctx.last_processes``).

``started_at`` is the start of the clock tick (10 ms) in which the process
started: the kernel counts it in ticks of CLOCK_BOOTTIME, and drift adds the
boot time to the millisecond, so one process gives one value at every record.

Processes are read with psutil under ``ctx.proc_root``, so drift on the host
can watch a container's processes through that container's /proc.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import psutil

from drift.config import ServiceSpec
from drift.errors import DriftError
from drift.facts import CollectContext, CollectionError, Fact, storable
from drift.timespec import parse_stored_time

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_TICK_NS = 1_000_000_000 // _CLOCK_TICKS
# A kernel thread (kworker, kthreadd ...): flags field of /proc/PID/stat.
_PF_KTHREAD = 0x00200000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SAME_PROCESS = timedelta(seconds=1)
"""Start times of one pid closer than this are one process read twice, not two processes.

A pid is not reused within a second of its last start (pid_max is at least
32768), while a reading may move that much: drift before this one read the
boot time to the whole second, and a stepped wall clock moves every start.
"""

# psutil.PROCFS_PATH is process-global; collecting two services from two
# threads with different proc roots must not interleave.
_PROCFS_LOCK = threading.Lock()

_PYTHON = re.compile(r"python[0-9.]*")
# CPython's own options (see `python --help`): these take no value ...
_PYTHON_BARE = frozenset("bBdEhiIOPqRsSuvVx?")
# ... these take one, and -c / -m end the interpreter's options.
_PYTHON_VALUED = frozenset("cmWX")

Result = Fact | CollectionError


def parse_flags(argv: Sequence[str]) -> dict[str, str]:
    """Flags of a command line (``argv[0]`` is the program), as ``{"--name": value}`` in order.

    ``--flag value`` and ``--flag=value`` give "value"; a bare flag (followed by
    another flag or by nothing) gives "", as does ``--flag=``: the two are not
    told apart. A repeated flag gives its values joined with "\\n" in order.
    Short flags (``-x value``) work the same way. A flag cannot know whether it
    takes a value, so ``--bare positional`` reads the positional as its value;
    words after ``--`` are positional. Python's own options follow CPython's
    rules (``python -u script.py`` leaves script.py positional; ``-m`` and
    ``-c`` take the next word).
    """
    values: dict[str, list[str]] = {}
    for name, _word, value, inline in flag_words(argv, lambda w: w):
        if inline is not None:
            values.setdefault(name, []).append(inline)
        else:
            values.setdefault(name, []).append(value if value is not None else "")
    return {name: "\n".join(vals) for name, vals in values.items()}


W = TypeVar("W")


def flag_words(
    argv: Sequence[W], text: Callable[[W], str | None]
) -> list[tuple[str, W, W | None, str | None]]:
    """The flags of a command line whose words may be unknown, in order.

    `text` gives a word's text, or None where it is not known (such a word is
    never a flag, but may be a value). Each flag is ``(name, word, value word,
    inline)``: `inline` is the text after ``=`` of ``--name=value`` (then the
    value is inside `word`), else the value is the next word or None (bare).
    The rules are parse_flags'.
    """
    out: list[tuple[str, W, W | None, str | None]] = []
    i = 1
    head = text(argv[0]) if argv else None
    if head is not None and _PYTHON.fullmatch(os.path.basename(head)):
        i = _python_options(argv, text, out)
    while i < len(argv):
        word = argv[i]
        written = text(word)
        i += 1
        if written == "--":
            break
        if written is None or not _looks_like_flag(written):
            continue
        name, eq, value = written.partition("=")
        if eq:
            out.append((name, word, None, value))
            continue
        following = text(argv[i]) if i < len(argv) else "--"
        if (
            i < len(argv)
            and following != "--"
            and (following is None or not _looks_like_flag(following))
        ):
            out.append((name, word, argv[i], None))
            i += 1
        else:
            out.append((name, word, None, None))
    return out


def _looks_like_flag(word: str) -> bool:
    """``-x``, ``--name``; not ``-`` (stdin) and not a negative number such as ``-1``."""
    return len(word) > 1 and word[0] == "-" and not (word[1].isdigit() or word[1] == ".")


def _python_options(
    argv: Sequence[W],
    text: Callable[[W], str | None],
    out: list[tuple[str, W, W | None, str | None]],
) -> int:
    """Read the interpreter's options; return where the program's own arguments start."""
    i = 1
    while i < len(argv):
        word = text(argv[i])
        if word is None or word == "--" or word == "-" or not word.startswith("-"):
            # A script path (or stdin) ends the interpreter's options; the
            # script's arguments follow it.
            return i + 1
        if word.startswith("--"):
            # --version, --help-env ...: none of CPython's long options take a value.
            out.append((word, argv[i], None, None))
            i += 1
            continue
        letter = word[1]
        if letter in _PYTHON_VALUED:
            if word[2:]:
                out.append((word[:2], argv[i], None, word[2:]))
            elif i + 1 < len(argv):
                out.append((word[:2], argv[i], argv[i + 1], None))
                i += 1
            else:
                out.append((word[:2], argv[i], None, None))
            i += 1
            if letter in "cm":
                return i
            continue
        if all(c in _PYTHON_BARE for c in word[1:]):
            out.append((word, argv[i], None, None))
            i += 1
            continue
        # Not an option CPython knows: let the generic rules read it.
        return i
    return i


@dataclass
class _Located:
    """What a finder decided: the main process (None: not running), or an error."""

    found_by: str
    process: psutil.Process | None = None
    facts: list[Result] = field(default_factory=list)
    error: CollectionError | None = None
    pidfile_mtime: str | None = None  # when the pidfile that named the process was written

    @property
    def provenance(self) -> dict[str, Any]:
        """How the process was found, for the provenance of its pid and start."""
        if self.pidfile_mtime is None:
            return {"found_by": self.found_by}
        return {"found_by": self.found_by, "pidfile_mtime": self.pidfile_mtime}


def collect_service(spec: ServiceSpec, ctx: CollectContext) -> Iterator[Result]:
    """Facts about one service's main process, found by pidfile, regex or systemd unit."""
    subject = f"service:{spec.name}"
    boot_ns = boot_time_ns()
    # Everything is read while PROCFS_PATH points at ctx.proc_root, then
    # yielded after it is restored, so no caller ever runs with it changed.
    with _PROCFS_LOCK:
        saved = psutil.PROCFS_PATH
        psutil.PROCFS_PATH = ctx.proc_root
        try:
            results = _collect(spec, ctx, subject, boot_ns)
        finally:
            psutil.PROCFS_PATH = saved
    yield from results


def _collect(spec: ServiceSpec, ctx: CollectContext, subject: str, boot_ns: int) -> list[Result]:
    """Find the process and read it; a process that exits while read is looked up once more."""
    vanished: list[int] = []
    out: list[Result] = []
    last = ctx.last_processes.get(subject, {})
    for _attempt in range(2):
        located = _locate(spec, ctx, subject)
        out = list(located.facts)
        if located.error is not None:
            out.append(located.error)
            return out
        if located.process is None:
            out.append(Fact(subject, "running", "false", {"found_by": located.found_by}))
            return out
        try:
            facts = _process_facts(
                subject, located.process, located.provenance, ctx.proc_root, boot_ns, last
            )
        except psutil.NoSuchProcess:  # ZombieProcess too: it died while we read it
            vanished.append(located.process.pid)
            continue
        if spec.pidfile is not None:
            stale = _stale_pidfile(spec.pidfile, subject, facts, last)
            if stale is not None:
                out.append(stale)
                return out
        out.extend(facts)
        return out
    pids = ", ".join(str(p) for p in vanished)
    out.append(CollectionError(subject, None, f"process exited while being read (pids {pids})"))
    return out


def _locate(spec: ServiceSpec, ctx: CollectContext, subject: str) -> _Located:
    if spec.pidfile is not None:
        return _from_pidfile(spec.pidfile, subject, ctx.proc_root)
    if spec.match is not None:
        return _from_match(spec.match, ctx.proc_root, subject)
    if spec.unit is not None:
        return _from_unit(spec.unit, ctx, subject)
    return _Located("nothing", error=CollectionError(subject, None, "no unit, pidfile or match"))


def _from_pidfile(path: str, subject: str, proc_root: str) -> _Located:
    found_by = f"pidfile {path}"
    service = subject.removeprefix("service:")

    def blind(problem: str) -> _Located:
        message = f"{problem}: cannot tell whether {service} runs"
        return _Located(found_by, error=CollectionError(subject, None, message))

    try:
        with open(path, "rb") as f:
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
        return _Located(found_by)
    other = _not_a_service(process, proc_root)
    if other is not None:
        return blind(f"pidfile {path} holds pid {pid}, {other}, not {service}")
    mtime = _EPOCH + timedelta(microseconds=written // 1000)
    return _Located(found_by, process=process, pidfile_mtime=mtime.isoformat())


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
        return bool(int(_stat_fields(pid, proc_root)[_STAT_FLAGS]) & _PF_KTHREAD)
    except (psutil.NoSuchProcess, IndexError, ValueError):
        return False


# Indexes in _stat_fields, which start at field 3 (state) of proc(5).
_STAT_FLAGS = 6
_STAT_STARTTIME = 19


def _stat_fields(pid: int, proc_root: str) -> list[bytes]:
    """The fields of /proc/PID/stat after ``pid (comm)``; comm may hold spaces and parens."""
    try:
        with open(f"{proc_root}/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        raise psutil.NoSuchProcess(pid) from None
    return stat.rpartition(b")")[2].split()


def _stale_pidfile(
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
    if not argv or not _PYTHON.fullmatch(os.path.basename(argv[0])):
        return None
    options: list[tuple[str, str, str | None, str | None]] = []
    start = _python_options(argv, lambda w: w, options)
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


def _from_match(pattern: str, proc_root: str, subject: str) -> _Located:
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
        return _Located(found_by, facts=[count])
    main = min(roots, key=lambda pid: (matched[pid][0], pid))
    return _Located(found_by, process=matched[main][2], facts=[count])


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


def _from_unit(unit: str, ctx: CollectContext, subject: str) -> _Located:
    from drift.collectors.systemd import show_unit, unit_facts

    found_by = f"unit {unit}"
    for _attempt in range(2):
        try:
            state = show_unit(unit, ctx.systemctl)
        except DriftError as exc:
            # Without systemd's answer the main PID is unknown too, so the error
            # covers the whole service: nothing of it may read as removed.
            return _Located(found_by, error=CollectionError(subject, None, f"unit: {exc}"))
        facts: list[Result] = list(unit_facts(subject, state))
        if state.main_pid <= 0:
            return _Located(found_by, facts=facts)
        process = _alive(state.main_pid)
        if process is not None:
            return _Located(found_by, process=process, facts=facts)
        # The MainPID is not in proc_root: it just exited (so ask again), or
        # systemd's pids are not proc_root's (a namespace mix-up), which must
        # not read as the service stopping.
    message = f"systemd reports MainPID {state.main_pid}, not found in {ctx.proc_root}"
    return _Located(found_by, facts=facts, error=CollectionError(subject, None, message))


def _process_facts(
    subject: str,
    proc: psutil.Process,
    found: dict[str, Any],
    proc_root: str,
    boot_ns: int,
    last: dict[str, str],
) -> list[Result]:
    """Every fact of one live process; raises psutil.NoSuchProcess if it exits meanwhile.

    `last` is what was last recorded of the service's process: when it had
    this pid and started within SAME_PROCESS of this reading, this is that
    process, and its recorded ``started_at`` is kept, so a reading that moved
    (a stepped clock, a boot time formerly cut to the second) is no restart.
    """
    pid = proc.pid
    where = f"{proc_root}/{pid}"
    located = {"pid": pid, **found}
    with proc.oneshot():
        ppid = proc.ppid()
    try:
        ticks = int(_stat_fields(pid, proc_root)[_STAT_STARTTIME])
    except (IndexError, ValueError):
        raise psutil.NoSuchProcess(pid) from None  # not a stat line: read it again
    started_at = start_time_text(boot_ns, ticks)
    recorded = parse_stored_time(last.get("started_at"))
    if last.get("pid") == str(pid) and recorded is not None:
        moment = parse_stored_time(started_at)
        if moment is not None and abs(moment - recorded) < SAME_PROCESS:
            started_at = last["started_at"]
    # The kernel counts the start in whole ticks: the process started in the
    # tick that begins at started_at.
    tick = {**located, "uncertainty_ms": 1000 // _CLOCK_TICKS}
    out: list[Result] = [
        Fact(subject, "running", "true", dict(located)),
        Fact(subject, "pid", str(pid), dict(located)),
        Fact(subject, "started_at", started_at, tick),
        Fact(subject, "ppid", str(ppid), {"pid": pid, "source": f"{where}/stat"}),
    ]
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
        provenance = {"pid": pid, "source": f"{where}/{source}"}
        out.append(Fact(subject, key, storable(value), provenance))

    try:
        argv = [storable(word) for word in proc.cmdline()]
    except psutil.AccessDenied:
        out += [_denied(subject, "argv", "cmdline", pid), _denied(subject, "flag:", "cmdline", pid)]
    else:
        from_cmdline = {"pid": pid, "source": f"{where}/cmdline"}
        out.append(Fact(subject, "argv", json.dumps(argv), dict(from_cmdline)))
        for name, value in parse_flags(argv).items():
            out.append(Fact(subject, f"flag:{name}", value, dict(from_cmdline)))

    try:
        environ = proc.environ()
    except psutil.AccessDenied:
        out.append(_denied(subject, "env:", "environment", pid))
    else:
        from_environ = {"pid": pid, "source": f"{where}/environ"}
        for name in sorted(environ):
            out.append(
                Fact(subject, f"env:{storable(name)}", storable(environ[name]), dict(from_environ))
            )

    # A process that died while we read it shows an empty cmdline and
    # environment as a zombie, and its pid may even be reused: such a reading
    # must not pass for the service dropping every flag and variable.
    if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
        raise psutil.NoSuchProcess(pid)
    return out


def _denied(subject: str, key: str, what: str, pid: int) -> CollectionError:
    return CollectionError(subject, key, f"permission denied reading {what} of pid {pid}")
