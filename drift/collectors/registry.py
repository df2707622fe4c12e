"""The collectors drift runs, and the order they run in.

`drift record` walks `COLLECTORS` through `collection_order`: section by
section of the config, entry by entry, and for each entry every collector
that reads that section, in the order listed here (a service, then its serve
script). What each writes is declared in `drift.subjects` (its subject
kinds, their keys, each key's category and secrecy), which the analysis and
redaction read too; the collector classes here only name those kinds and
load their code when the config uses them: psutil, GitPython and the shell
reader load only then.

To add a collector: write its module, declare its subject kind in
`drift.subjects`, add a collector below to COLLECTORS, and document its keys
(docs/collectors.md, "Adding a collector").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from drift.collectors.base import Collector, Item
from drift.config import (
    CacheSpec,
    CommandSpec,
    Config,
    EndpointSpec,
    FileSpec,
    GpuSpec,
    HealthSpec,
    RepoSpec,
    ServiceSpec,
)
from drift.facts import CollectContext, Fact
from drift.subjects import (
    CACHE,
    COMMAND,
    ENDPOINT,
    FILE,
    FILE_SET,
    GPU,
    HEALTH,
    HOST,
    REPO,
    SCRIPT,
    SERVICE,
    SYSTEMD,
)


class RoleCollector(Collector[str]):
    """The host's role from drift.toml (`role = "decode"`): what `drift compare` groups by."""

    name = "role"
    section = "role"  # one top-level key, not a table: one entry while it is set
    subjects = (HOST,)
    in_container = False  # the host's own config, whatever container it watches

    def entries(self, config: Config) -> tuple[str, ...]:
        return (config.role,) if config.role else ()

    def scope(self, entry: str) -> str:
        return "host:drift.toml"

    def collect(self, entry: str, ctx: CollectContext) -> Iterable[Item]:
        return [Fact("host:drift.toml", "role", entry, {"config": "role"})]


class ServicesCollector(Collector[ServiceSpec]):
    """A service's main process: found by pidfile, regex or unit (`drift.collectors.services`)."""

    name = "services"
    section = "services"
    subjects = (SERVICE,)

    def scope(self, entry: ServiceSpec) -> str:
        return f"service:{entry.name}"

    def collect(self, entry: ServiceSpec, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.services import collect_service

        return collect_service(entry, ctx)


class ScriptsCollector(Collector[ServiceSpec]):
    """A service's serve script, read, never run (`drift.collectors.scripts`)."""

    name = "scripts"
    section = "services"
    subjects = (SCRIPT,)

    def scope(self, entry: ServiceSpec) -> str | None:
        return None if not entry.script else f"script:{entry.script}"

    def collect(self, entry: ServiceSpec, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.scripts import collect_script

        assert entry.script is not None  # scope() skips a service without one
        return collect_script(entry.name, entry.script, ctx, unit=entry.unit)


class ManagerCollector(Collector[str]):
    """The systemd manager's environment, once a record (`drift.collectors.manager`)."""

    name = "manager"
    section = "systemd"  # not a section of drift.toml: one entry while a service is found by unit
    subjects = (SYSTEMD,)

    def entries(self, config: Config) -> tuple[str, ...]:
        return ("manager",) if any(s.unit for s in config.services) else ()

    def scope(self, entry: str) -> str:
        return "systemd:manager"

    def collect(self, entry: str, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.manager import collect_manager

        return collect_manager(ctx)


class FilesCollector(Collector[FileSpec]):
    """The files a set's globs match (`drift.collectors.files`)."""

    name = "files"
    section = "files"
    subjects = (FILE, FILE_SET)

    def scope(self, entry: FileSpec) -> str:
        return "file:/"  # every file: a crashed walk must not read as deletions

    def collect(self, entry: FileSpec, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.files import collect_files

        return collect_files(entry, ctx)


class ReposCollector(Collector[RepoSpec]):
    """A git checkout, read without running anything of its own (`drift.collectors.repos`)."""

    name = "repos"
    section = "repos"
    subjects = (REPO,)

    def scope(self, entry: RepoSpec) -> str:
        return f"repo:{entry.path}"

    def collect(self, entry: RepoSpec, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.repos import collect_repo

        return collect_repo(entry, ctx)


class CommandsCollector(Collector[CommandSpec]):
    """A command's output and exit code (`drift.collectors.commands`)."""

    name = "commands"
    section = "commands"
    subjects = (COMMAND,)
    in_container = False  # runs on the host, as written

    def scope(self, entry: CommandSpec) -> str:
        return f"command:{entry.name}"

    def collect(self, entry: CommandSpec, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.commands import collect_command

        return collect_command(entry, ctx)


class HealthCollector(Collector[HealthSpec]):
    """A health check: healthy or not (`drift.collectors.commands`)."""

    name = "health"
    section = "health"
    subjects = (HEALTH,)
    in_container = False  # runs on the host, as written

    def scope(self, entry: HealthSpec) -> str:
        return f"health:{entry.name}"

    def collect(self, entry: HealthSpec, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.commands import collect_health

        return collect_health(entry, ctx)


class GpuCollector(Collector[GpuSpec]):
    """The NVIDIA driver and each GPU's settings (`drift.collectors.gpu`)."""

    name = "gpu"
    section = "gpu"
    subjects = (GPU,)
    in_container = False  # the host's GPUs and driver, whatever container uses them

    def entries(self, config: Config) -> tuple[GpuSpec, ...]:
        spec = config.gpu
        if spec.enabled is False:
            return ()
        if spec.enabled is None and not _gpu_tool_here(spec):
            return ()  # auto, and nothing here to read GPUs with: no GPU, and no module loaded
        return (spec,)

    def scope(self, entry: GpuSpec) -> str:
        return "gpu:"  # every GPU and the driver: a crash must not read as GPUs removed

    def collect(self, entry: GpuSpec, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.gpu import collect_gpus

        return collect_gpus(entry, ctx)


def _gpu_tool_here(spec: GpuSpec) -> bool:
    """Whether the GPU command is on PATH, NVML's Python binding is installed (no import),
    or the NVIDIA driver is loaded (then a missing tool is a blind spot, not GPUs removed)."""
    import os
    import shutil
    from importlib.util import find_spec

    return (
        shutil.which(spec.command[0]) is not None
        or find_spec("pynvml") is not None
        or os.path.isdir(os.path.join(spec.proc_root, "driver", "nvidia", "gpus"))
    )


class EndpointsCollector(Collector[EndpointSpec]):
    """A server's JSON document, leaf by leaf (`drift.collectors.endpoints`)."""

    name = "endpoints"
    section = "endpoints"
    subjects = (ENDPOINT,)
    in_container = False  # a URL is asked from the host, as written

    def scope(self, entry: EndpointSpec) -> str:
        return f"endpoint:{entry.name}"

    def collect(self, entry: EndpointSpec, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.endpoints import collect_endpoint

        return collect_endpoint(entry, ctx)


class CachesCollector(Collector[CacheSpec]):
    """A JIT or kernel cache, summed up (`drift.collectors.caches`)."""

    name = "caches"
    section = "caches"
    subjects = (CACHE,)

    def scope(self, entry: CacheSpec) -> str:
        return f"cache:{entry.name}"

    def collect(self, entry: CacheSpec, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.caches import collect_cache

        return collect_cache(entry, ctx)


COLLECTORS: tuple[Collector[Any], ...] = (
    ServicesCollector(),
    ScriptsCollector(),
    ManagerCollector(),
    FilesCollector(),
    ReposCollector(),
    CommandsCollector(),
    HealthCollector(),
    GpuCollector(),
    EndpointsCollector(),
    CachesCollector(),
    RoleCollector(),
)
"""Every collector, in the order they run."""


def collection_order(config: Config) -> Iterator[tuple[Collector[Any], Any, str]]:
    """(collector, entry, scope) for everything `config` asks to collect, in order.

    Section by section, in the order the sections' first collectors are
    listed; within a section entry by entry, each entry by every collector
    of that section. An entry a collector skips (scope None) is left out.
    """
    sections: dict[str, list[Collector[Any]]] = {}
    for collector in COLLECTORS:
        sections.setdefault(collector.section, []).append(collector)
    for collectors in sections.values():
        for entry in collectors[0].entries(config):
            for collector in collectors:
                scope = collector.scope(entry)
                if scope is not None:
                    yield collector, entry, scope
