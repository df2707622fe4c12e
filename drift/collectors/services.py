"""Services: find a service's main process and record what it really runs with.

Facts are ``service:<name>`` with keys ``running``, ``pid``, ``started_at``,
``exe``, ``cwd``, ``user``, ``argv``, ``ppid``, one ``flag:<name>`` per
command-line flag, one ``env:<NAME>`` per variable of the live environment,
``matches`` for a service found by regex and the ``unit:*`` facts of systemd
for a service found by unit.

A stopped service is a state, not a failure: it yields ``running = "false"``
and no process facts, so its env and flag facts end (that is real). Anything
that could not be read is a CollectionError, so its facts keep their value.

Processes are read with psutil under ``ctx.proc_root``, so drift on the host
can watch a container's processes through that container's /proc.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

import psutil

from drift.config import ServiceSpec
from drift.errors import DriftError
from drift.facts import CollectContext, CollectionError, Fact, printable

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


def collect_service(spec: ServiceSpec, ctx: CollectContext) -> Iterator[Result]:
    """Facts about one service's main process, found by pidfile, regex or systemd unit."""
    subject = f"service:{spec.name}"
    # Everything is read while PROCFS_PATH points at ctx.proc_root, then
    # yielded after it is restored, so no caller ever runs with it changed.
    with _PROCFS_LOCK:
        saved = psutil.PROCFS_PATH
        psutil.PROCFS_PATH = ctx.proc_root
        try:
            results = _collect(spec, ctx, subject)
        finally:
            psutil.PROCFS_PATH = saved
    yield from results


def _collect(spec: ServiceSpec, ctx: CollectContext, subject: str) -> list[Result]:
    """Find the process and read it; a process that exits while read is looked up once more."""
    vanished: list[int] = []
    out: list[Result] = []
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
            out.extend(_process_facts(subject, located.process, located.found_by, ctx.proc_root))
            return out
        except psutil.NoSuchProcess:  # ZombieProcess too: it died while we read it
            vanished.append(located.process.pid)
    pids = ", ".join(str(p) for p in vanished)
    out.append(CollectionError(subject, None, f"process exited while being read (pids {pids})"))
    return out


def _locate(spec: ServiceSpec, ctx: CollectContext, subject: str) -> _Located:
    if spec.pidfile is not None:
        return _from_pidfile(spec.pidfile, subject)
    if spec.match is not None:
        return _from_match(spec.match, ctx.proc_root, subject)
    if spec.unit is not None:
        return _from_unit(spec.unit, ctx, subject)
    return _Located("nothing", error=CollectionError(subject, None, "no unit, pidfile or match"))


def _from_pidfile(path: str, subject: str) -> _Located:
    found_by = f"pidfile {path}"
    try:
        with open(path, "rb") as f:
            data = f.read(64)
    except FileNotFoundError:
        return _Located(found_by)
    except PermissionError:
        return _Located(
            found_by,
            error=CollectionError(subject, None, f"permission denied reading pidfile {path}"),
        )
    except OSError as exc:
        return _Located(
            found_by,
            error=CollectionError(
                subject, None, f"cannot read pidfile {path}: {exc.strerror or exc}"
            ),
        )
    # An empty or garbled pidfile is what a crashed or half-started daemon
    # leaves behind: the service is not running, not unknown.
    words = data.split()
    try:
        pid = int(words[0]) if words else 0
    except ValueError:
        pid = 0
    return _Located(found_by, process=_alive(pid) if pid > 0 else None)


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
    try:
        me = int(os.readlink(os.path.join(proc_root, "self")))
    except (OSError, ValueError):
        return frozenset()
    lineage = {me}
    try:
        lineage.update(p.pid for p in psutil.Process(me).parents())
    except psutil.Error:
        pass
    return frozenset(lineage)


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
    subject: str, proc: psutil.Process, found_by: str, proc_root: str
) -> list[Result]:
    """Every fact of one live process; raises psutil.NoSuchProcess if it exits meanwhile."""
    pid = proc.pid
    where = f"{proc_root}/{pid}"
    located = {"pid": pid, "found_by": found_by}
    with proc.oneshot():
        created = proc.create_time()
        ppid = proc.ppid()
    started_at = datetime.fromtimestamp(created, UTC).isoformat(timespec="microseconds")
    out: list[Result] = [
        Fact(subject, "running", "true", dict(located)),
        Fact(subject, "pid", str(pid), dict(located)),
        Fact(subject, "started_at", started_at, dict(located)),
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
        out.append(Fact(subject, key, printable(value), provenance))

    try:
        argv = [printable(word) for word in proc.cmdline()]
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
                Fact(
                    subject, f"env:{printable(name)}", printable(environ[name]), dict(from_environ)
                )
            )

    # A process that died while we read it shows an empty cmdline and
    # environment as a zombie, and its pid may even be reused: such a reading
    # must not pass for the service dropping every flag and variable.
    if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
        raise psutil.NoSuchProcess(pid)
    return out


def _denied(subject: str, key: str, what: str, pid: int) -> CollectionError:
    return CollectionError(subject, key, f"permission denied reading {what} of pid {pid}")
