"""[[commands]]: run a shell command under a time and output bound, record stdout and exit code.

`run_bounded` and `stream_bounded` are the one place drift starts external
programs: in a new session, stdin from /dev/null, and with the whole process
group killed on timeout and again once the command is done, so a `sleep 100 &`
left behind by a command (or a health check) never outlives `drift record`.
A process that left the group (`setsid`, a daemon's double fork) is ended
too: while a command runs drift is a child subreaper (Linux), so every
descendant orphaned meanwhile becomes drift's child instead of init's, and
once the command is done each new child of drift is killed with everything
below it, and reaped.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from drift.config import CommandSpec, HealthSpec
from drift.facts import CollectContext, CollectionError, Fact

if TYPE_CHECKING:
    import ctypes

MAX_OUTPUT = 1024 * 1024
"""Bytes of stdout kept per command; the rest is read and dropped."""

TRUNCATED_NOTE = "\n[truncated]"

_STDERR_TAIL = 64 * 1024  # enough for the last line of any sane error message
_CHUNK = 64 * 1024
# After the command itself exits, how long background children that still hold
# its stdout may keep writing before the process group is killed.
_LINGER = 0.2
_POLL = 0.05
# How long the descendants killed after a command get to die and be reaped
# (a process stuck in the kernel, on a dead NFS server, may never).
_REAP_WAIT = 1.0
_REAP_ROUNDS = 8


@dataclass(frozen=True)
class CompletedRun:
    """The outcome of one bounded run.

    `exit_code` is None when the command did not finish on its own (it timed
    out, was stopped by the stdout consumer, or never started); it is negative
    (-N) when the command was killed by signal N. `error` is set only when the
    program could not be started at all.
    """

    args: tuple[str, ...]
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    duration: float
    truncated: bool = False
    timed_out: bool = False
    stopped: bool = False
    error: str | None = None

    @property
    def stderr_last_line(self) -> str:
        """The last non-blank line of stderr, decoded, or ""."""
        for line in reversed(self.stderr.decode("utf-8", errors="replace").splitlines()):
            if line.strip():
                return line.strip()
        return ""


def run_bounded(
    argv_or_shell: str | Sequence[str],
    timeout: float,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    max_output: int = MAX_OUTPUT,
) -> CompletedRun:
    """Run a shell command line (a str, via /bin/sh -c) or an argv; keep at most `max_output` bytes.

    Never raises for the command's own failures: look at `error`, `timed_out` and `exit_code`.
    """
    kept = bytearray()
    overflow = False

    def keep(chunk: bytes) -> bool:
        nonlocal overflow
        room = max_output - len(kept)
        if len(chunk) > room:
            overflow = True
        if room > 0:
            kept.extend(chunk[:room])
        return False  # keep draining so the exit code is the command's own

    run = stream_bounded(argv_or_shell, timeout, on_stdout=keep, cwd=cwd, env=env)
    return CompletedRun(
        args=run.args,
        exit_code=run.exit_code,
        stdout=bytes(kept),
        stderr=run.stderr,
        duration=run.duration,
        truncated=overflow,
        timed_out=run.timed_out,
        stopped=run.stopped,
        error=run.error,
    )


def stream_bounded(
    argv_or_shell: str | Sequence[str],
    timeout: float,
    *,
    on_stdout: Callable[[bytes], bool],
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> CompletedRun:
    """Run like `run_bounded`, handing stdout chunks to `on_stdout` instead of keeping them.

    `on_stdout` returns True to stop early: the process group is then killed
    and the result has `stopped` set. The returned `stdout` is always empty.
    """
    if isinstance(argv_or_shell, str):
        args: tuple[str, ...] = ("/bin/sh", "-c", argv_or_shell)
    else:
        args = tuple(argv_or_shell)
    started = time.monotonic()
    deadline = started + timeout
    strays = _Strays()  # before the fork: the command inherits where its orphans go
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        strays.end()
        if cwd and not os.path.isdir(cwd):
            # The child's chdir failed, not the program: say which folder.
            error = f"cannot run in {cwd}: no such folder"
        else:
            error = f"cannot start {args[0]}: {exc.strerror or exc}"
        return CompletedRun(args, None, b"", b"", time.monotonic() - started, error=error)

    assert proc.stdout is not None and proc.stderr is not None
    err_tail = bytearray()
    timed_out = stopped = False
    exited_at: float | None = None
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            sel.register(proc.stderr, selectors.EVENT_READ)
            while sel.get_map():
                now = time.monotonic()
                if now >= deadline:
                    timed_out = True
                    break
                if exited_at is None and _exited(proc.pid):
                    exited_at = now
                if exited_at is not None and now >= exited_at + _LINGER:
                    break  # only background children still hold the pipes open
                # Poll rather than block so a leader that exits while a child keeps
                # the pipe open is noticed promptly.
                for key, _ in sel.select(min(deadline - now, _POLL)):
                    chunk = os.read(key.fd, _CHUNK)
                    if not chunk:
                        sel.unregister(key.fileobj)
                    elif key.fileobj is proc.stdout:
                        stopped = stopped or on_stdout(chunk)
                    else:
                        err_tail.extend(chunk)
                        del err_tail[:-_STDERR_TAIL]
                if stopped:
                    break
        while not (timed_out or stopped or _exited(proc.pid)):
            if time.monotonic() >= deadline:
                timed_out = True
            else:
                time.sleep(0.005)  # pipes closed: the leader is on its way out
    finally:
        # Kill the whole group: on timeout or stop to end the command, otherwise to
        # end stray background children. The leader is not reaped yet (its zombie
        # keeps the group id taken), so this cannot hit an unrelated process.
        _kill_group(proc.pid)
        exit_code = proc.wait()
        strays.end()  # what left the group: reparented to drift by now
        proc.stdout.close()
        proc.stderr.close()
    return CompletedRun(
        args,
        None if (timed_out or stopped) else exit_code,
        b"",
        bytes(err_tail),
        time.monotonic() - started,
        timed_out=timed_out,
        stopped=stopped,
    )


def _exited(pid: int) -> bool:
    """True once the child has exited, without reaping it (WNOWAIT)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


class _Strays:
    """The processes one command leaves behind outside its group, and their ending.

    Made just before the command starts: drift becomes a child subreaper and
    notes the children it already has. `end`, once the command's leader is
    reaped, kills every other child drift has gained, and all below each,
    then reaps them and puts the subreaper setting back. Only a process the
    command started can be among them: drift runs one command at a time, and
    the orphans of older children (the demo's services) go to init, since the
    kernel looks for a subreaper only above a process forked from one (unless
    one sits above drift too). Without a subreaper (not Linux), the group
    kill is all there is.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.previous = _set_subreaper(True)
        self.before: frozenset[tuple[int, int]] = frozenset()
        if self.previous is not None and _has_children():
            self.before = frozenset(
                (pid, start) for pid, (ppid, start) in _process_table().items() if ppid == self.pid
            )

    def end(self) -> None:
        if self.previous is None:
            return
        try:
            deadline = time.monotonic() + _REAP_WAIT
            for _round in range(_REAP_ROUNDS):
                if not _has_children():
                    return
                # A descendant killed here has its own children reparented to
                # drift when it dies: the next round reaps them.
                table = _process_table()
                below: dict[int, list[int]] = {}
                for pid, (ppid, _start) in table.items():
                    below.setdefault(ppid, []).append(pid)
                mine = [
                    pid
                    for pid, (ppid, start) in table.items()
                    if ppid == self.pid and (pid, start) not in self.before
                ]
                if not mine:
                    return
                doomed, seen = list(mine), set(mine)
                for pid in doomed:  # grows as it goes: every descendant once
                    for child in below.get(pid, ()):
                        if child not in seen:
                            seen.add(child)
                            doomed.append(child)
                for pid in doomed:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                for pid in mine:
                    _reap(pid, deadline)
        finally:
            if not self.previous:
                _set_subreaper(False)


def _set_subreaper(on: bool) -> bool | None:
    """Make this process a child subreaper (or not); its previous setting, None if unsupported."""
    libc = _libc()
    if libc is None:
        return None
    import ctypes

    # prctl takes unsigned longs: said so, no upper half is left to chance.
    zero = ctypes.c_ulong(0)
    was = ctypes.c_int()
    if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(was), zero, zero, zero) != 0:
        return None
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(on), zero, zero, zero) != 0:
        return None
    return bool(was.value)


@cache
def _libc() -> ctypes.CDLL | None:
    """The C library, for prctl; None where there is no PR_SET_CHILD_SUBREAPER."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _has_children() -> bool:
    """True if this process has a child, live or not yet reaped (one system call)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _process_table() -> dict[int, tuple[int, int]]:
    """Every process's (parent pid, start time in clock ticks), from /proc."""
    table: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                text = f.read()
        except OSError:
            continue  # gone meanwhile
        # The name in parentheses may hold anything, spaces and ")" included.
        fields = text[text.rfind(b")") + 2 :].split()
        try:
            table[int(name)] = (int(fields[1]), int(fields[19]))
        except (IndexError, ValueError):
            continue
    return table


def _reap(pid: int, deadline: float) -> None:
    """Wait for a killed child until `deadline`; one that will not die stays a zombie-to-be."""
    while True:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # reaped already, or never ours
        if done or time.monotonic() >= deadline:
            return
        time.sleep(0.002)


def exit_text(exit_code: int) -> str:
    """The exit code as a fact value: "0", "127", or "signal SIGKILL" for a signal death."""
    if exit_code >= 0:
        return str(exit_code)
    try:
        return f"signal {signal.Signals(-exit_code).name}"
    except ValueError:
        return f"signal {-exit_code}"


def collect_command(spec: CommandSpec, ctx: CollectContext) -> Iterator[Fact | CollectionError]:
    """Run one [[commands]] entry: facts `stdout` and `exit`, or a CollectionError."""
    subject = f"command:{spec.name}"
    run = run_bounded(spec.run, spec.timeout, cwd=spec.cwd)
    if run.error is not None:
        yield CollectionError(subject, None, run.error)
        return
    if run.timed_out or run.exit_code is None:
        last = run.stderr_last_line
        yield CollectionError(
            subject, None, f"timed out after {spec.timeout:g}s" + (f": {last}" if last else "")
        )
        return
    text = run.stdout.decode("utf-8", errors="replace")
    if run.truncated:
        text += TRUNCATED_NOTE
    provenance = _provenance(spec)
    yield Fact(subject, "stdout", text, provenance)
    yield Fact(subject, "exit", exit_text(run.exit_code), provenance)


def collect_health(spec: HealthSpec, ctx: CollectContext) -> Iterator[Fact | CollectionError]:
    """`health:NAME ok`: "true" when the check exits 0 within its timeout, else "false".

    A check that times out or cannot start (its folder gone included) is
    unhealthy, not a blind spot: a decode server that does not answer in 20 s
    is exactly what it detects, and a check that cannot run vouches for nothing.
    """
    run = run_bounded(spec.run, spec.timeout, cwd=spec.cwd)
    ok = run.exit_code == 0 and not run.timed_out and run.error is None
    if run.timed_out:
        outcome = f"timed out after {spec.timeout:g}s"
    elif run.error is not None:
        outcome = run.error
    else:
        outcome = f"exit {exit_text(run.exit_code)}" if run.exit_code is not None else "stopped"
    yield Fact(
        f"health:{spec.name}",
        "ok",
        "true" if ok else "false",
        {**_provenance(spec), "outcome": outcome},
    )


def _provenance(spec: CommandSpec | HealthSpec) -> dict[str, str]:
    """The command line, and the folder it ran in when the config gave one."""
    if spec.cwd is None:
        return {"run": spec.run}
    return {"run": spec.run, "cwd": spec.cwd}
