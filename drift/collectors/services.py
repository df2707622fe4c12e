"""Services: find a service's main process and record what it really runs with.

Facts are ``service:<name>`` with keys ``running``, ``pid``, ``started_at``,
``exe``, ``cwd``, ``user``, ``argv``, ``ppid``, one ``flag:<name>`` per
command-line flag, one ``env:<NAME>`` per variable of the live environment,
``matches`` for a service found by regex and the ``unit:*`` facts of systemd
for a service found by unit.

Two steps, each in a module of its own: `drift.collectors.locate` finds the
process (pidfile, regex or unit) and says when it cannot tell which process
is the service; `drift.collectors.process` reads the facts of the process it
found. This module runs them in turn, once more if the process exits while
read, and keeps psutil pointed at ``ctx.proc_root`` meanwhile, so drift on
the host can watch a container's processes through that container's /proc.

A stopped service is a state, not a failure: it yields ``running = "false"``
and no process facts, so its env and flag facts end (that is real). Anything
that could not be read is a CollectionError, so its facts keep their value.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psutil

from drift.collectors.libraries import library_facts
from drift.collectors.locate import locate, stale_pidfile
from drift.collectors.process import Result, boot_time_ns, process_facts
from drift.config import ServiceSpec
from drift.facts import CollectContext, CollectionError, Fact
from drift.rooted import Files

# psutil.PROCFS_PATH is process-global; collecting two services from two
# threads with different proc roots must not interleave.
_PROCFS_LOCK = threading.Lock()


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
    if ctx.files.container is not None:
        _in_container(results, ctx.files)
    yield from results


def _in_container(results: list[Result], files: Files) -> None:
    """A container's process: its /proc files named as the container names them
    (``/proc/53/environ``, not the host's road to it), and the container in the provenance.
    """
    # Many facts share one provenance: one copy of each (the original kept, so its id stays its).
    moved: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
    for item in results:
        if not isinstance(item, Fact):
            continue
        original = item.provenance
        pair = moved.get(id(original))
        if pair is None:
            provenance = dict(original, container=files.container)
            source = provenance.get("source")
            if isinstance(source, str):
                provenance["source"] = files.inner_path(source)
            pair = moved[id(original)] = (original, provenance)
        item.provenance = pair[1]


def _collect(spec: ServiceSpec, ctx: CollectContext, subject: str, boot_ns: int) -> list[Result]:
    """Find the process and read it; a process that exits while read is looked up once more."""
    vanished: list[int] = []
    out: list[Result] = []
    last = ctx.last_processes.get(subject, {})
    for _attempt in range(2):
        located = locate(spec, ctx, subject)
        out = list(located.facts)
        if located.error is not None:
            out.append(located.error)
            return out
        if located.process is None:
            out.append(Fact(subject, "running", "false", {"found_by": located.found_by}))
            return out
        try:
            facts = process_facts(
                subject,
                located.process,
                located.provenance,
                ctx.proc_root,
                boot_ns,
                last,
                exact_start=located.exact_start,
            )
            if spec.libraries:  # the files it maps executable (drift.collectors.libraries)
                facts += library_facts(subject, located.process.pid, ctx)
        except psutil.NoSuchProcess:  # ZombieProcess too: it died while we read it
            vanished.append(located.process.pid)
            continue
        if spec.pidfile is not None:
            stale = stale_pidfile(spec.pidfile, subject, facts, last)
            if stale is not None:
                out.append(stale)
                return out
        out.extend(facts)
        if spec.packages:
            from drift.collectors.packages import python_facts

            out.extend(python_facts(subject, facts, ctx))
        return out
    pids = ", ".join(str(p) for p in vanished)
    out.append(CollectionError(subject, None, f"process exited while being read (pids {pids})"))
    return out
