"""The Python of a process that rewrote its title, from what the kernel still shows of it.

A process that calls setproctitle (sglang-router, SGLang's and vLLM's
workers) shows its title as its command line and NUL bytes as its
environment (`drift.collectors.process`): the path its Python searches
cannot be worked out, and one error of the process (`LIVE_UNREADABLE`)
covers those facts. What is still sure: ``python`` from /proc/PID/exe and a
venv whose site folder holds a file it maps, and for each distribution
whose ``*.dist-info/RECORD`` lists a library it maps, that distribution's
``package:NAME`` (and its source), since that dist-info describes the
very file the process runs. Its other distributions are not read.
"""

from __future__ import annotations

from typing import Any

import psutil

from drift.collectors.libraries import Owners, mapped_files, read_maps
from drift.collectors.packages import (
    Result,
    distribution,
    folder_name,
    normalise,
    package_facts,
    unread_facts,
)
from drift.collectors.python_env import PythonUnknown, mapped_interpreter
from drift.facts import CollectContext, Fact, storable
from drift.small_files import Unread


def retitled_python_facts(subject: str, pid: int, exe: str, ctx: CollectContext) -> list[Result]:
    """``python`` and the ``package:`` facts of mapped libraries' distributions, if it runs."""
    source = f"{ctx.proc_root}/{pid}/maps"
    try:
        maps = read_maps(pid, ctx.proc_root)
    except (OSError, psutil.NoSuchProcess):
        return []  # gone or unreadable: its one error already covers its Python's facts
    mapped = [m.path for m in mapped_files(maps)]
    out: list[Result] = []
    how = f"it rewrote its title: from {ctx.proc_root}/{pid}/exe and the files it maps ({source})"
    try:
        prefix, base, version = mapped_interpreter(exe, mapped)
    except PythonUnknown:
        pass  # kept as last recorded, under the process's one error
    else:
        python: dict[str, Any] = {
            "pid": pid,
            "executable": exe,
            "resolved": how,
            "python_version": version,
            "base_prefix": base,
        }
        out.append(Fact(subject, "python", storable(prefix), python))
    owners = Owners(ctx, f"{ctx.proc_root}/{pid}/root")
    read: set[str] = set()
    names: set[str] = set()
    for path in mapped:
        where = owners.dist_info(path)
        if where is None or where in read:
            continue
        read.add(where)
        try:
            found = distribution(where, ctx)
        except Unread as exc:
            name = folder_name(where)
            if name not in names:
                names.add(name)
                out += unread_facts(subject, name, str(exc))
            continue
        if found is None or normalise(found[0]) in names:
            continue  # one version of a name: the first mapped, as its path is unknown
        names.add(normalise(found[0]))
        via = f"the distribution of {path}, which it maps ({how})"
        out += package_facts(subject, where, found, via)
    return out
