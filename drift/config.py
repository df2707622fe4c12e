"""drift.toml: find it, parse it, validate it into plain dataclasses.

Every problem is a ConfigError whose message names the file, the key and
what is wrong, on one line.

One idea, kept whole past 500 lines: each section's dataclass sits beside
the checks that build it, and every check shares one way of naming a key in
an error; split by section, each piece would import the same helpers back.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from drift.display import printable
from drift.errors import ConfigError
from drift.globs import glob_problem

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

SEARCH_PATHS = ("./drift.toml", "/etc/drift/drift.toml")
CONTENT_FORMATS = ("json", "yaml", "toml", "text")

MAX_SIZE = 1 << 30
"""Default `max_size` of a [[files]] set: a larger file is recorded by its stat, not read."""

MAX_FILES = 200_000
"""Default `max_files` of a [[files]] set: a set matching more is refused, not recorded."""

SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_SIZE_EXPECTED = f'expected a number of bytes or a size like "4GiB" ({", ".join(SIZE_UNITS)})'


@dataclass(frozen=True)
class ServiceSpec:
    """A service found by systemd unit, pidfile or command-line regex, with its serve script."""

    name: str
    unit: str | None = None
    pidfile: str | None = None
    match: str | None = None
    script: str | None = None
    # A Python process's interpreter and distributions (`drift.collectors.packages`).
    packages: bool = True
    # Record the files its process maps executable (`drift.collectors.libraries`).
    libraries: bool = True


@dataclass(frozen=True)
class FileSpec:
    """A named set of files given by globs (``**`` crosses directories).

    With `content`, each file's text is kept too (up to 1 MiB) and changes are
    diffed as `format`: json, yaml or toml by key, text line by line. A file
    over `max_size` bytes, or a sparse one, is recorded by its stat, not read;
    the walk stays on the filesystem of each glob's fixed directory unless
    `one_file_system` is off; a set matching over `max_files` files is refused.
    """

    name: str
    paths: tuple[str, ...]
    content: bool = False
    format: str = "text"
    max_size: int = MAX_SIZE
    one_file_system: bool = True
    max_files: int = MAX_FILES
    # Absolute globs of what the set leaves out, as AIDE's `!` rules: neither hashed nor
    # reported (a name alone, `*.log`, is `/**/*.log`: that name at any depth).
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class RepoSpec:
    """A git checkout whose HEAD, branch and dirtiness are recorded."""

    path: str
    timeout: float = 10.0


@dataclass(frozen=True)
class CommandSpec:
    """A command whose output and exit code are recorded.

    It runs in `cwd`: from drift.toml, the config file's folder unless the
    entry names another; None (a spec built in code) is the current folder.
    """

    name: str
    run: str
    timeout: float = 10.0
    cwd: str | None = None


@dataclass(frozen=True)
class HealthSpec:
    """A check run at every record; exit 0 within the timeout means healthy.

    It runs in `cwd`, as a CommandSpec does.
    """

    name: str
    run: str
    timeout: float = 20.0
    cwd: str | None = None


_Run = TypeVar("_Run", CommandSpec, HealthSpec)


@dataclass(frozen=True)
class NotifySpec:
    """Whom to tell after a record that saw a live or pending change (`drift.notify`).

    Exactly one of `url` (the `since` JSON envelope is POSTed to it) and `run`
    (a shell command, run in `cwd` with the envelope's path in
    $DRIFT_NOTIFY_JSON and a one-line summary in $DRIFT_NOTIFY_TEXT).
    """

    name: str
    url: str | None = None
    run: str | None = None
    timeout: float = 5.0
    cwd: str | None = None


CACHE_HASHES = ("stat", "content")


@dataclass(frozen=True)
class CacheSpec:
    """A JIT or kernel cache: the files below its folders (or globs), recorded as one summary.

    With `hash` "stat" (the default) each file counts by its name, size and
    mtime, never its content; with "content" by its name, size and content.
    """

    name: str
    paths: tuple[str, ...]
    hash: str = "stat"


ENDPOINT_TIMEOUT = 5.0
"""Default `timeout` of an [[endpoints]] entry, in seconds: for the whole request."""


@dataclass(frozen=True)
class EndpointSpec:
    """A server's JSON document (its config, version, server info), fetched at every record.

    Each leaf is a fact; `pointer` keeps only that subtree, `ignore` leaves
    out the subtrees named (counters a server reports that move every
    minute); `service` is the [[services]] entry whose server answers.
    """

    name: str
    url: str
    timeout: float = ENDPOINT_TIMEOUT
    pointer: str = ""
    ignore: tuple[str, ...] = ()
    service: str | None = None


@dataclass(frozen=True)
class ContainerSpec:
    """The container this box's services, scripts, files and repos live in.

    Its leader (the container's init, by its host PID) is found afresh at
    every record by exactly one of: `machine` (a machine systemd-machined
    knows, through machinectl), `pidfile` (a host file holding the PID) or
    `leader_command` (a command that prints it, such as ``docker inspect``).
    The other paths of the config are the container's own; `name` is how
    drift names the container to the user.
    """

    name: str
    machine: str | None = None
    pidfile: str | None = None
    leader_command: tuple[str, ...] = ()
    timeout: float = 10.0


@dataclass(frozen=True)
class GpuSpec:
    """[gpu]: the GPUs and their driver, read with `command` (nvidia-smi -q -x) or NVML.

    `enabled` None is "auto": read them when the command is on PATH or NVML
    loads, and say nothing when neither is there; True makes a missing tool a
    blind spot; False never reads them.
    """

    enabled: bool | None = None
    command: tuple[str, ...] = ("nvidia-smi", "-q", "-x")
    timeout: float = 10.0
    # The host's /proc (the config's `proc_root`): its driver/nvidia/gpus lists the GPUs
    # the loaded driver knows, so auto reads a box whose tool went missing as a blind spot.
    proc_root: str = "/proc"


@dataclass(frozen=True)
class SecretsSpec:
    """Extra env/flag names to always redact, and names never to redact."""

    redact: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    """A validated drift.toml. `path` is None for the empty default config."""

    path: Path | None
    host: str
    role: str | None = None  # what the host is in a fleet ("decode"): drift compare groups by it
    services: tuple[ServiceSpec, ...] = ()
    files: tuple[FileSpec, ...] = ()
    repos: tuple[RepoSpec, ...] = ()
    commands: tuple[CommandSpec, ...] = ()
    health: tuple[HealthSpec, ...] = ()
    notify: tuple[NotifySpec, ...] = ()
    secrets: SecretsSpec = field(default_factory=SecretsSpec)
    db: str | None = None  # where the history is: an SQLite path (absolute) or a URL
    # where records wait while a central `db` is out of reach (default: one per config and host
    # in the state dir, drift.store.spool.spool_path)
    spool: str | None = None
    keep: timedelta | None = None  # how much history `drift prune` keeps (None: --keep)
    secret_key_file: str | None = None
    systemctl: tuple[str, ...] = ("systemctl",)
    proc_root: str = "/proc"
    templates_dir: str | None = None
    container: ContainerSpec | None = None
    gpu: GpuSpec = field(default_factory=GpuSpec)
    endpoints: tuple[EndpointSpec, ...] = ()
    caches: tuple[CacheSpec, ...] = ()


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The config to use: --config, then $DRIFT_CONFIG, ./drift.toml, /etc/drift/drift.toml."""
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found")
        return path
    env = os.environ.get("DRIFT_CONFIG")
    if env:
        path = Path(env)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found (from $DRIFT_CONFIG)")
        return path
    for candidate in SEARCH_PATHS:
        path = Path(candidate)
        if path.is_file():
            return path
    return None


def load_config(explicit: str | os.PathLike[str] | None = None) -> Config:
    """Find and parse the config; with none anywhere, an empty config for this host."""
    path = find_config(explicit)
    if path is None:
        return Config(path=None, host=os.uname().nodename)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: TOML syntax error: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return parse_config(data, path)


class _Reader:
    """Checks one table of the TOML document; knows its own dotted name for messages."""

    def __init__(self, path: Path, where: str, table: Any, base: Path) -> None:
        self.path, self.where, self.base = path, where, base
        if not isinstance(table, dict):
            self.fail("", f"expected a table, got {_type_name(table)}")
        self.table: dict[str, Any] = table

    def fail(self, key: str, what: str) -> NoReturn:
        key = _key_name(key)
        name = f"{self.where}.{key}" if self.where and key else (self.where or key)
        # One line whatever a key or value holds: the message is printed as it is.
        raise ConfigError(printable(f"{self.path}: {name}: {what}"))

    def check_keys(self, allowed: set[str]) -> None:
        for key in self.table:
            if key not in allowed:
                hint = ", ".join(sorted(allowed))
                self.fail(key, f"unknown key (known keys: {hint})")

    def string(self, key: str, *, required: bool = False) -> str | None:
        value = self.table.get(key)
        if value is None:
            if required:
                self.fail(key, "missing (required)")
            return None
        if not isinstance(value, str):
            self.fail(key, f"expected a string, got {_type_name(value)}")
        if required and not value.strip():
            self.fail(key, "must not be empty")
        return value

    def path_string(
        self, key: str, *, required: bool = False, inside: str | None = None
    ) -> str | None:
        """A path; relative paths are taken from the config file's folder."""
        value = self.string(key, required=required)
        if value is None:
            return None
        return self.path_from(key, value, inside)

    def path_from(self, key: str, value: str, inside: str | None = None) -> str:
        """`value` as a path: `~` expanded, relative to the config file's folder.

        A path `inside` a container is the container's own: absolute, as written.
        """
        if "\x00" in value:  # no file has one: os refuses it, and so does ~user lookup
            self.fail(key, "a path cannot hold a NUL character")
        if inside is not None:
            if not value.startswith("/"):
                self.fail(
                    key,
                    f"{_short_repr(value)}: a path in container {inside} must be absolute "
                    "(it is read inside the container)",
                )
            return str(Path(value))
        return str(self.base / os.path.expanduser(value))

    def command(self, key: str) -> tuple[str, ...] | None:
        """A command line: a list of words, or a string split as a shell would."""
        raw = self.table.get(key)
        if raw is None:
            return None
        if isinstance(raw, str):
            try:
                words = tuple(shlex.split(raw))
            except ValueError as exc:  # an unclosed quote or a trailing backslash
                self.fail(key, f"not a command line: {exc}")
        else:
            words = self.strings(key)
        if not words:
            self.fail(key, "must not be empty")
        return words

    def strings(self, key: str, *, required: bool = False) -> tuple[str, ...]:
        value = self.table.get(key)
        if value is None:
            if required:
                self.fail(key, "missing (required)")
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(key, f"expected a list of strings, got {_type_name(value)}")
        if required and not value:
            self.fail(key, "must not be empty")
        return tuple(value)

    def boolean(self, key: str, default: bool = False) -> bool:
        value = self.table.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {_type_name(value)}")
        return value

    def number(self, key: str, default: float) -> float:
        value = self.table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(key, f"expected a number of seconds, got {_type_name(value)}")
        if value <= 0:
            self.fail(key, "must be greater than 0")
        if not math.isfinite(value):
            self.fail(key, "must be a finite number of seconds")
        return float(value)

    def count(self, key: str, default: int) -> int:
        """A whole number greater than 0 (a count of files)."""
        value = self.table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"expected a whole number, got {_type_name(value)}")
        if value <= 0:
            self.fail(key, "must be greater than 0")
        return value

    def size(self, key: str, default: int) -> int:
        """A size in bytes: a whole number, or a string such as "512MiB" or "4 GiB"."""
        value = self.table.get(key, default)
        if isinstance(value, str):
            import re

            found = re.fullmatch(r"\s*0*([0-9]{1,30})\s*([KMGT]iB|B)?\s*", value)
            if found is None:  # over 30 digits: more than any disk, and past what int() reads
                self.fail(key, f"{_SIZE_EXPECTED}, got {_short_repr(value)}")
            value = int(found[1]) * SIZE_UNITS[found[2] or "B"]
        elif isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"{_SIZE_EXPECTED}, got {_type_name(value)}")
        if value <= 0:
            self.fail(key, "must be greater than 0")
        return value

    def tables(self, key: str) -> list[_Reader]:
        value = self.table.get(key, [])
        if not isinstance(value, list):
            self.fail(key, f"expected an array of tables ([[{key}]]), got {_type_name(value)}")
        return [_Reader(self.path, f"{key}[{i}]", item, self.base) for i, item in enumerate(value)]


def _key_name(key: str) -> str:
    """A key as TOML would write it: bare when it can be, else quoted (`"a key"`, `"\\n"`)."""
    if key == "" or _BARE_KEY.fullmatch(key):
        return key
    return json.dumps(key, ensure_ascii=False)


def _short_repr(value: str, limit: int = 60) -> str:
    """`value` quoted for a message, its middle dropped when long."""
    return repr(value) if len(value) <= limit else repr(value[: limit - 20] + "..." + value[-10:])


def _type_name(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def _exclude_glob(r: _Reader, pattern: str, box: str | None) -> str:
    """An `exclude` entry as an absolute glob: a name alone (`*.log`) or one starting with
    `**/` matches at any depth; any other is a path, relative to the config's folder."""
    problem = glob_problem(pattern)
    if problem is not None:
        r.fail("exclude", problem)
    if "/" not in pattern.rstrip("/"):
        return "/**/" + pattern.rstrip("/")
    if pattern.startswith("**/"):
        return "/" + pattern
    return r.path_from("exclude", pattern, inside=box)


def _unique_names(readers: list[_Reader], names: list[str]) -> None:
    seen: set[str] = set()
    for reader, name in zip(readers, names, strict=True):
        if name in seen:
            reader.fail("name", f"duplicate name {name!r}")
        seen.add(name)


def parse_config(data: dict[str, Any], path: Path) -> Config:
    """Validate a parsed TOML document; raises ConfigError naming the first bad key."""
    base = path.resolve().parent
    top = _Reader(path, "", data, base)
    top.check_keys(
        {
            "host",
            "role",
            "services",
            "files",
            "repos",
            "commands",
            "health",
            "secrets",
            "db",
            "spool",
            "keep",
            "secret_key_file",
            "systemctl",
            "proc_root",
            "templates_dir",
            "container",
            "gpu",
            "endpoints",
            "caches",
            "notify",
        }
    )
    container = _container(top)
    box = None if container is None else container.name

    services = []
    service_readers = top.tables("services")
    for r in service_readers:
        r.check_keys({"name", "unit", "pidfile", "match", "script", "packages", "libraries"})
        finders = [k for k in ("unit", "pidfile", "match") if r.table.get(k) is not None]
        if len(finders) != 1:
            found = ", ".join(finders) if finders else "none"
            r.fail("", f"give exactly one of unit, pidfile, match (found: {found})")
        match = r.string("match")
        if match is not None:
            import re

            try:
                re.compile(match)
            except (re.error, OverflowError, RecursionError) as exc:
                # OverflowError: a{99999999999}; RecursionError: parentheses nested too deep.
                r.fail("match", f"invalid regular expression: {exc}")
        services.append(
            ServiceSpec(
                name=_name(r),
                unit=r.string("unit"),
                pidfile=r.path_string("pidfile", inside=box),
                match=match,
                script=r.path_string("script", inside=box),
                packages=r.boolean("packages", True),
                libraries=r.boolean("libraries", True),
            )
        )
    _unique_names(service_readers, [s.name for s in services])

    files = []
    file_readers = top.tables("files")
    for r in file_readers:
        r.check_keys(
            {
                "name",
                "paths",
                "exclude",
                "content",
                "format",
                "max_size",
                "one_file_system",
                "max_files",
            }
        )
        paths = tuple(
            r.path_from("paths", p, inside=box) for p in r.strings("paths", required=True)
        )
        content = r.boolean("content")
        fmt = r.string("format")
        if fmt is not None:
            if fmt not in CONTENT_FORMATS:
                r.fail("format", f"unknown format {fmt!r} (known: {', '.join(CONTENT_FORMATS)})")
            if not content:
                r.fail("format", "format needs content = true")
        files.append(
            FileSpec(
                name=_name(r),
                paths=paths,
                content=content,
                format=fmt or "text",
                max_size=r.size("max_size", MAX_SIZE),
                one_file_system=r.boolean("one_file_system", True),
                max_files=r.count("max_files", MAX_FILES),
                exclude=tuple(_exclude_glob(r, p, box) for p in r.strings("exclude")),
            )
        )
    _unique_names(file_readers, [f.name for f in files])

    repos = []
    for r in top.tables("repos"):
        r.check_keys({"path", "timeout"})
        repos.append(
            RepoSpec(
                path=r.path_string("path", required=True, inside=box) or "",
                timeout=r.number("timeout", 10.0),
            )
        )

    commands = _runs(top, "commands", CommandSpec, default_timeout=10.0)
    health = _runs(top, "health", HealthSpec, default_timeout=20.0)
    notify = _notify(top)

    secrets = SecretsSpec()
    if "secrets" in data:
        r = _Reader(path, "secrets", data["secrets"], base)
        r.check_keys({"redact", "allow"})
        secrets = SecretsSpec(redact=r.strings("redact"), allow=r.strings("allow"))

    for derived in ("systemctl", "proc_root"):
        if container is not None and derived in data:
            top.fail(
                derived,
                "not with [container]: drift derives it from the container's leader PID, "
                "found afresh at every record",
            )
    systemctl = top.command("systemctl") or ("systemctl",)
    proc_root = top.path_string("proc_root") or "/proc"

    return Config(
        path=path,
        host=top.string("host") or os.uname().nodename,
        role=_role(top),
        services=tuple(services),
        files=tuple(files),
        repos=tuple(repos),
        commands=tuple(commands),
        health=tuple(health),
        notify=tuple(notify),
        secrets=secrets,
        db=_db_location(top),
        spool=top.path_string("spool"),
        keep=_keep(top),
        secret_key_file=top.path_string("secret_key_file"),
        systemctl=systemctl,
        proc_root=proc_root,
        templates_dir=top.path_string("templates_dir"),
        container=container,
        gpu=_gpu(top, proc_root),
        endpoints=tuple(_endpoints(top, [s.name for s in services])),
        caches=_caches(top, box),
    )


def _role(top: _Reader) -> str | None:
    """`role`: what this host is among its siblings (`decode`), one short word or name."""
    role = top.string("role")
    if role is None:
        return None
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", role):
        top.fail("role", "must be a short name: letters, digits, '.', '_' or '-' (e.g. decode)")
    return role


def _caches(top: _Reader, box: str | None) -> tuple[CacheSpec, ...]:
    """[[caches]]: a unique name, the folders or globs it lives in, how its files count."""
    readers = top.tables("caches")
    caches = []
    for r in readers:
        r.check_keys({"name", "paths", "hash"})
        paths = tuple(
            r.path_from("paths", p, inside=box) for p in r.strings("paths", required=True)
        )
        mode = r.string("hash") or "stat"
        if mode not in CACHE_HASHES:
            r.fail("hash", f"unknown hash {mode!r} (known: {', '.join(CACHE_HASHES)})")
        caches.append(CacheSpec(name=_name(r), paths=paths, hash=mode))
    _unique_names(readers, [c.name for c in caches])
    return tuple(caches)


CONTAINER_FINDERS = ("machine", "pidfile", "leader_command")
_MACHINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _container(top: _Reader) -> ContainerSpec | None:
    """[container]: its name and how to find its leader PID (exactly one way)."""
    if "container" not in top.table:
        return None
    r = _Reader(top.path, "container", top.table["container"], top.base)
    r.check_keys({"name", "timeout", *CONTAINER_FINDERS})
    finders = [k for k in CONTAINER_FINDERS if r.table.get(k) is not None]
    if len(finders) != 1:
        found = ", ".join(finders) if finders else "none"
        r.fail("", f"give exactly one of machine, pidfile, leader_command (found: {found})")
    machine = r.string("machine")
    if machine is not None and not _MACHINE_NAME.fullmatch(machine):
        r.fail("machine", f"{_short_repr(machine)} is not a machine name")
    if r.table.get("name") is None and machine is not None:
        name = machine
    else:
        name = _name(r)
    return ContainerSpec(
        name=name,
        machine=machine,
        pidfile=r.path_string("pidfile"),
        leader_command=r.command("leader_command") or (),
        timeout=r.number("timeout", 10.0),
    )


DB_SCHEMES = ("sqlite", "postgresql", "postgres", "postgresql+psycopg")


def _db_location(top: _Reader) -> str | None:
    """`db`: a file path or a URL; a relative path (plain or sqlite:///) is from the
    config's folder. The scheme is checked here, so a typo names the file and key.
    """
    value = top.string("db")
    if value is None:
        return None
    if not value.strip():
        top.fail("db", "must not be empty")
    if "://" not in value:
        return top.path_from("db", value)
    scheme, rest = value.split("://", 1)
    if scheme not in DB_SCHEMES:
        top.fail(
            "db",
            f"unsupported scheme {scheme!r}: use a file path, sqlite:///PATH or postgresql://...",
        )
    if scheme == "sqlite":
        if rest == "/:memory:":
            top.fail("db", "an in-memory database keeps no history: give a file path")
        if not rest.startswith("/") or rest == "/":
            top.fail("db", "an SQLite URL is sqlite:///PATH")
        return "sqlite:///" + top.path_from("db", rest[1:])
    return value


def _keep(top: _Reader) -> timedelta | None:
    """`keep`: how much history `drift prune` keeps, a length such as "90d"."""
    value = top.string("keep")
    if value is None:
        return None
    from drift.errors import TimeSpecError
    from drift.timespec import parse_span

    try:
        return parse_span(value)
    except TimeSpecError as exc:
        top.fail("keep", str(exc))


def _runs(top: _Reader, key: str, spec: type[_Run], *, default_timeout: float) -> list[_Run]:
    """[[commands]] and [[health]]: a unique name, a command line, a timeout, a folder.

    They run in the config file's folder unless `cwd` names another, so
    `./check.sh` means the same whichever folder `drift record` is started
    from, as every other relative path of the config does. A folder that does
    not exist is reported when the command runs, not here: a record from cron
    must not lose every other fact over one folder.
    """
    readers = top.tables(key)
    runs = []
    for r in readers:
        r.check_keys({"name", "run", "timeout", "cwd"})
        runs.append(
            spec(
                name=_name(r),
                run=r.string("run", required=True) or "",
                timeout=r.number("timeout", default_timeout),
                cwd=r.path_string("cwd") or str(r.base),
            )
        )
    _unique_names(readers, [run.name for run in runs])
    return runs


def _notify(top: _Reader) -> list[NotifySpec]:
    """[[notify]]: a unique name, one of an http(s) `url` or a command `run`, a timeout."""
    from urllib.parse import urlsplit

    readers = top.tables("notify")
    out = []
    for r in readers:
        r.check_keys({"name", "url", "run", "timeout", "cwd"})
        url, run = r.string("url"), r.string("run")
        if (url is None) == (run is None):
            r.fail("", "give exactly one of url, run")
        if url is not None and urlsplit(url).scheme not in ("http", "https"):
            # Never echo the URL: a webhook's URL is its credential.
            r.fail("url", "expected an http:// or https:// URL")
        out.append(
            NotifySpec(
                name=_name(r),
                url=url,
                run=run,
                timeout=r.number("timeout", NotifySpec.timeout),
                cwd=r.path_string("cwd") or str(r.base),
            )
        )
    _unique_names(readers, [n.name for n in out])
    return out


def _name(r: _Reader) -> str:
    name = r.string("name", required=True) or ""
    if any(c in name for c in "\n\r\t"):
        r.fail("name", "must be one line")
    return name


def _gpu(top: _Reader, proc_root: str) -> GpuSpec:
    """[gpu]: `enabled` ("auto", true or false), `command` and `timeout`."""
    if "gpu" not in top.table:
        return GpuSpec(proc_root=proc_root)
    r = _Reader(top.path, "gpu", top.table["gpu"], top.base)
    r.check_keys({"enabled", "command", "timeout"})
    enabled = r.table.get("enabled", "auto")
    if enabled != "auto" and not isinstance(enabled, bool):
        r.fail("enabled", f'expected "auto", true or false, got {_short_repr(str(enabled))}')
    return GpuSpec(
        enabled=None if enabled == "auto" else bool(enabled),
        command=r.command("command") or GpuSpec.command,
        timeout=r.number("timeout", GpuSpec.timeout),
        proc_root=proc_root,
    )


def _endpoints(top: _Reader, services: list[str]) -> list[EndpointSpec]:
    """[[endpoints]]: a unique name, an http(s) URL, a timeout, pointers, the service it serves."""
    from urllib.parse import urlsplit

    from drift.json_pointer import PointerError, parse

    readers = top.tables("endpoints")
    endpoints = []
    for r in readers:
        r.check_keys({"name", "url", "timeout", "pointer", "ignore", "service"})
        url = r.string("url", required=True) or ""
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018  # raises on a port that is not a number
        except ValueError as exc:
            r.fail("url", f"{_short_repr(url)} is not a URL: {exc}")
        if any(c.isspace() or not c.isprintable() for c in url):
            r.fail("url", f"{_short_repr(url)}: a URL holds no space or control character")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            r.fail("url", f"{_short_repr(url)}: expected http://HOST... or https://HOST...")
        pointers = {"pointer": [r.string("pointer") or ""], "ignore": list(r.strings("ignore"))}
        for key, values in pointers.items():
            for value in values:
                try:
                    parse(value)
                except PointerError as exc:
                    r.fail(key, f"not a JSON pointer (RFC 6901): {exc}")
                if key == "ignore" and value == "":
                    r.fail(key, '"" is the whole document: name the parts to leave out')
        service = r.string("service")
        if service is not None and service not in services:
            known = ", ".join(services) or "none"
            r.fail("service", f"no [[services]] entry named {service!r} (known: {known})")
        endpoints.append(
            EndpointSpec(
                name=_name(r),
                url=url,
                timeout=r.number("timeout", ENDPOINT_TIMEOUT),
                pointer=pointers["pointer"][0],
                ignore=tuple(pointers["ignore"]),
                service=service,
            )
        )
    _unique_names(readers, [e.name for e in endpoints])
    return endpoints
