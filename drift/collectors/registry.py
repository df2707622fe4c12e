"""The collectors drift runs, what each may write, and the order they run in.

`drift record` walks `COLLECTORS` through `collection_order`: section by
section of the config, entry by entry, and for each entry every collector
that reads that section, in the order listed here (a service, then its serve
script). The declarations live here rather than beside each collector's
code, so that knowing what a collector writes never imports it: psutil,
GitPython and the shell reader load only when the config uses them.

To add a collector: write its module, declare it below and add it to
COLLECTORS, and document its keys (docs/collectors.md, "Adding a collector").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from drift.collectors.base import Collector, FactKey, Item, SubjectKind
from drift.config import CommandSpec, Config, FileSpec, HealthSpec, RepoSpec, ServiceSpec
from drift.facts import CollectContext

_PROCESS = "process id"
_COMMAND_LINE = "live command line"
_STATE = "service state"
_UNIT = "unit"

# Settings a unit starts its process with: a change is a suspect, pending until a restart.
_UNIT_SETTINGS = (
    FactKey("unit:exec_start_pre", "its ExecStartPre= command lines, one a line", _UNIT, "value"),
    FactKey("unit:user", "its User=, when set", _UNIT, "value"),
    FactKey("unit:working_directory", "its WorkingDirectory=, when set", _UNIT, "value"),
    FactKey("unit:cpu_affinity", "its CPUAffinity=, when set", _UNIT, "value"),
    FactKey("unit:device_allow", "its DeviceAllow= entries, one a line", _UNIT, "value"),
    FactKey("unit:restart", "its Restart=, when not `no`", _UNIT, "value"),
    FactKey(
        "unit:limit:",
        "a Limit*= its files set, as systemd applies it (`SOFT:HARD` when they differ)",
        _UNIT,
        "value",
        "NAME",
    ),
)
# How the unit's last run went: volatile context of restarts and crash loops, never a suspect.
_RUNTIME = "unit runtime"
_UNIT_RUNTIME = (
    FactKey(
        "unit:sub_state",
        "systemd's SubState (running, auto-restart, failed ...)",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:result",
        "systemd's Result of the last run (success, exit-code ...)",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:n_restarts",
        "systemd's NRestarts: automatic restarts since the last start by hand",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:exec_main_status",
        "how the last main process ended: `exited 1`, `killed SIGSEGV`, `dumped SIGABRT`",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:invocation_id",
        "systemd's InvocationID of the current (or last) run",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:exec_main_start",
        "when systemd started the current (or last) main process, to the microsecond",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:journal",
        "while the unit fails: its journal lines of its last few runs, a few each",
        _RUNTIME,
        "value",
    ),
)

SERVICE = SubjectKind(
    "service",
    "NAME",
    "the main process of a [[services]] entry, as it runs now",
    (
        FactKey(
            "running", '"true" while the process runs, "false" once it is gone', _STATE, "value"
        ),
        FactKey("pid", "its process id", _PROCESS, "never"),
        FactKey(
            "started_at",
            "when it started (ISO 8601, UTC): systemd's stamp for a unit's main process, "
            "else to the clock tick",
            _PROCESS,
            "never",
        ),
        FactKey("ppid", "its parent's process id", _PROCESS, "value"),
        FactKey("exe", "the executable it runs", _COMMAND_LINE, "value"),
        FactKey("cwd", "its working folder", _COMMAND_LINE, "value"),
        FactKey("user", "the user it runs as", _COMMAND_LINE, "value"),
        FactKey("argv", "its command line, a JSON list of words", _COMMAND_LINE, "value"),
        FactKey(
            "flag:",
            "one flag of its command line and the flag's value",
            "live flag",
            "name",
            "--NAME",
        ),
        FactKey("env:", "one variable of its live environment", "live env", "name", "NAME"),
        FactKey("matches", "how many processes the `match` regex found", _PROCESS, "value"),
        FactKey("unit:load_state", "systemd's LoadState of the unit", _STATE, "value"),
        FactKey("unit:active_state", "systemd's ActiveState of the unit", _STATE, "value"),
        FactKey("unit:fragment_path", "the unit file systemd loaded", _UNIT, "value"),
        FactKey("unit:drop_ins", "its drop-in files, one a line", _UNIT, "value"),
        FactKey(
            "unit:environment_files", "its EnvironmentFile= entries, one a line", _UNIT, "value"
        ),
        FactKey("unit:exec_start", "its ExecStart= command lines, one a line", _UNIT, "value"),
        FactKey(
            "unit:need_daemon_reload",
            '"yes" when unit files changed since systemd read them',
            _UNIT,
            "value",
        ),
        FactKey(
            "unit:environment:",
            "one variable of the unit's Environment=",
            "unit environment",
            "name",
            "NAME",
        ),
        *_UNIT_SETTINGS,
        *_UNIT_RUNTIME,
        FactKey(
            "unit:file:",
            "the text of its unit file or a drop-in, on disk now",
            _UNIT,
            "value",
            "PATH",
        ),
        FactKey(
            "unit:disk_environment:",
            "one variable its files on disk set with Environment= (what a daemon-reload loads)",
            "unit environment",
            "name",
            "NAME",
        ),
        FactKey(
            "unit:envfile:",
            "one variable its EnvironmentFile= files set now (read at its next start)",
            "unit environment",
            "name",
            "NAME",
        ),
        FactKey(
            "unit:envfile_sha256:",
            "the SHA-256 of one of its EnvironmentFile= files",
            _UNIT,
            "value",
            "PATH",
        ),
        FactKey(
            "unit:envfile_ignored",
            "lines of its EnvironmentFile= files systemd ignores (not a variable name)",
            _UNIT,
            "value",
        ),
        FactKey(
            "unit:pass_environment:",
            "one variable PassEnvironment= hands on from the manager's own environment",
            "unit environment",
            "name",
            "NAME",
        ),
    ),
)

SYSTEMD = SubjectKind(
    "systemd",
    "manager",
    "the systemd manager of the services found by unit (one per `systemctl`)",
    (
        FactKey(
            "environment:",
            "one variable of its environment (`systemctl show-environment`): units start with it",
            "unit environment",
            "name",
            "NAME",
        ),
    ),
)

SCRIPT = SubjectKind(
    "script",
    "PATH",
    "a [[services]] entry's serve script, or a file it sources; read, never run",
    (
        FactKey("content", "the whole text", "script content", "value"),
        FactKey(
            "symlink",
            "the target of a script that is a symlink (never followed)",
            "script content",
            "value",
        ),
        FactKey(
            "export:",
            "a variable the launched command may receive, every value it may have",
            "script export",
            "name",
            "NAME",
        ),
        FactKey(
            "exec",
            "the command the script launches, every form it may take",
            "script exec",
            "value",
        ),
        FactKey(
            "flag:",
            "one flag of the launched command, every value it may have",
            "script exec",
            "name",
            "--NAME",
        ),
    ),
    notes=("reading",),
)

FILE = SubjectKind(
    "file",
    "PATH",
    "a file a [[files]] glob matched (an error on `file:DIR/` covers a whole folder)",
    (
        FactKey("sha256", "its content's SHA-256, or why it was not read", "file", "never"),
        FactKey("size", "its size in bytes", "file", "never"),
        FactKey("mode", "its permission bits, in octal", "file", "never"),
        FactKey("symlink", "the target of a symlink (never followed)", "file", "value"),
        FactKey(
            "type", "fifo, socket, char-device or block-device (never opened)", "file", "value"
        ),
        FactKey("content", "its text, for a set with `content = true`", "file", "value"),
    ),
)

FILE_SET = SubjectKind(
    "files",
    "SET",
    "a [[files]] set, in errors only: a pattern of it matched nothing",
)

REPO = SubjectKind(
    "repo",
    "PATH",
    "the git checkout of a [[repos]] entry, by its path as configured",
    (
        FactKey("head", "the commit HEAD names", "repo", "never"),
        FactKey("branch", 'the branch checked out, or "(detached)"', "repo", "value"),
        FactKey(
            "dirty", '"yes" when tracked content differs from HEAD', "repo working tree", "never"
        ),
        FactKey("diff", "the SHA-256 of `git diff HEAD`'s patch", "repo working tree", "value"),
        FactKey(
            "untracked",
            "how many untracked files (`1000+` past 1,000)",
            "repo working tree",
            "value",
        ),
        FactKey(
            "state", "clean, empty, or an operation in progress (rebasing ...)", "repo", "value"
        ),
        FactKey("shallow", '"yes" for a shallow clone', "repo", "value"),
    ),
)

COMMAND = SubjectKind(
    "command",
    "NAME",
    "a [[commands]] entry, run under a time and output bound",
    (
        FactKey("stdout", "what it printed (at most 1 MiB)", "command", "value"),
        FactKey("exit", 'its exit code, or "signal NAME"', "command", "never"),
    ),
)

HEALTH = SubjectKind(
    "health",
    "NAME",
    "a [[health]] check, run at every record",
    (FactKey("ok", '"true" when the check exited 0 within its timeout', "health", "never"),),
)


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


COLLECTORS: tuple[Collector[Any], ...] = (
    ServicesCollector(),
    ScriptsCollector(),
    ManagerCollector(),
    FilesCollector(),
    ReposCollector(),
    CommandsCollector(),
    HealthCollector(),
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
