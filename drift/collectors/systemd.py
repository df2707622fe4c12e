"""What systemd says about a unit: parse `systemctl show` into a UnitState and Facts.

The parser follows what systemd (252 and current) really prints: properties in
systemd's own order, `EnvironmentFiles=` once per file, empty properties as
``NAME=``, string lists quoted C-style only where needed, one ``ExecStart=`` line
per command. The systemctl command is a parameter so drift can query a systemd
inside a container (``nsenter -t PID -a systemctl``) from the host.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from drift.errors import DriftError
from drift.facts import Fact

SHOW_PROPERTIES: tuple[str, ...] = (
    "Id",
    "LoadState",
    "ActiveState",
    "MainPID",
    "ActiveEnterTimestamp",
    "ExecMainStartTimestamp",
    "Environment",
    "EnvironmentFiles",
    "ExecStart",
    "FragmentPath",
    "DropInPaths",
    "NeedDaemonReload",
    "PassEnvironment",
)

# How the unit's last run went: volatile, read as context of restarts and crash loops.
RUNTIME_PROPERTIES = (
    "SubState",
    "Result",
    "NRestarts",
    "ExecMainPID",
    "ExecMainCode",
    "ExecMainStatus",
    "InvocationID",
)
# The resource limits systemd knows (`LimitNOFILE=` ...), each also printed as `...Soft`.
LIMITS = (
    "CPU",
    "FSIZE",
    "DATA",
    "STACK",
    "CORE",
    "RSS",
    "NOFILE",
    "AS",
    "NPROC",
    "MEMLOCK",
    "LOCKS",
    "SIGPENDING",
    "MSGQUEUE",
    "NICE",
    "RTPRIO",
    "RTTIME",
)
# Settings a unit starts its process with, beyond its environment and command line.
SETTING_PROPERTIES = (
    "ExecStartPre",
    "User",
    "WorkingDirectory",
    "CPUAffinity",
    "DeviceAllow",
    "Restart",
    *(f"Limit{name}{soft}" for name in LIMITS for soft in ("", "Soft")),
)
SHOW_PROPERTIES += RUNTIME_PROPERTIES + SETTING_PROPERTIES


class SystemdError(DriftError):
    """systemctl could not be run or did not answer about a unit."""


@dataclass(frozen=True)
class UnitRuntime:
    """How a unit's last run went, as systemd tells it: volatile, changes at every start.

    `exec_main_code` is ``exited``, ``killed`` or ``dumped`` (empty before a
    main process ever ran) and `exec_main_status` its exit status or signal
    number; in ``auto-restart`` and ``failed`` they describe the run that
    ended, and `invocation_id` is still that run's.
    """

    sub_state: str = ""
    result: str = ""
    n_restarts: int | None = None
    exec_main_pid: int = 0
    exec_main_code: str = ""
    exec_main_status: int = 0
    invocation_id: str = ""

    @property
    def failing(self) -> bool:
        """Whether systemd is between failed runs, or gave up: worth the journal's words."""
        return self.sub_state in ("auto-restart", "failed") or self.result not in ("", "success")


@dataclass(frozen=True)
class UnitSettings:
    """What a unit starts its process with, besides its environment and ExecStart.

    Empty strings and tuples are settings the unit leaves unset. `limits` holds
    every limit systemd reports (``NOFILE`` -> ``1024:524288``, one value when
    soft and hard agree); which of them the unit's files set is for the caller.
    """

    exec_start_pre: tuple[str, ...] = ()
    user: str = ""
    working_directory: str = ""
    cpu_affinity: str = ""
    device_allow: tuple[str, ...] = ()
    restart: str = ""
    limits: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class UnitState:
    """One unit as systemd sees it now, including config it has loaded but not applied."""

    unit: str
    load_state: str
    active_state: str
    main_pid: int
    active_enter: datetime | None
    exec_main_start: datetime | None
    environment: dict[str, str]
    environment_files: tuple[tuple[str, bool], ...]
    exec_start: tuple[tuple[str, ...], ...]
    fragment_path: str
    drop_in_paths: tuple[str, ...]
    need_daemon_reload: bool
    runtime: UnitRuntime = field(default_factory=UnitRuntime)
    settings: UnitSettings = field(default_factory=UnitSettings)
    pass_environment: tuple[str, ...] = ()  # names passed on from the manager's own environment


def parse_show(text: str) -> dict[str, list[str]]:
    """Split `systemctl show` output into property -> values, in the order printed.

    A property printed on several lines (`EnvironmentFiles=`, `ExecStart=`) keeps
    every value; an empty property (``NAME=``) is ``[""]``.
    """
    props: dict[str, list[str]] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        # Blank lines separate units when several are shown; anything without
        # "=" is not a property line.
        if not sep or not name:
            continue
        props.setdefault(name, []).append(value)
    return props


def parse_unit_state(unit: str, props: dict[str, list[str]]) -> UnitState:
    """Build a UnitState from parsed `systemctl show` properties; missing ones are empty."""

    def first(name: str) -> str:
        values = props.get(name)
        return values[0] if values else ""

    environment: dict[str, str] = {}
    for assignment in split_quoted(" ".join(props.get("Environment", []))):
        name, sep, value = assignment.partition("=")
        if sep:
            environment[name] = value

    main_pid = first("MainPID")
    try:
        pid = int(main_pid) if main_pid else 0
    except ValueError:
        raise SystemdError(f"{unit}: unexpected MainPID={main_pid!r} from systemctl") from None

    return UnitState(
        unit=unit,
        load_state=first("LoadState"),
        active_state=first("ActiveState"),
        main_pid=pid,
        active_enter=parse_timestamp(first("ActiveEnterTimestamp")),
        exec_main_start=parse_timestamp(first("ExecMainStartTimestamp")),
        environment=environment,
        environment_files=tuple(
            _parse_environment_file(v) for v in props.get("EnvironmentFiles", []) if v
        ),
        exec_start=tuple(_parse_exec(v) for v in props.get("ExecStart", []) if v),
        fragment_path=first("FragmentPath"),
        drop_in_paths=tuple(split_quoted(" ".join(props.get("DropInPaths", [])))),
        need_daemon_reload=first("NeedDaemonReload") == "yes",
        runtime=parse_runtime(props),
        settings=parse_settings(props),
        pass_environment=tuple(split_quoted(" ".join(props.get("PassEnvironment", [])))),
    )


def show_unit(
    unit: str, systemctl: Sequence[str] = ("systemctl",), timeout: float = 5.0
) -> UnitState:
    """Ask systemd about `unit`; a unit that does not exist is a state (not-found), not an error."""
    # A leading "-" would be read as an option; control characters would break
    # the one-line error messages and are never valid in a unit name.
    if not unit or unit.startswith("-") or any(ord(c) < 32 or ord(c) == 127 for c in unit):
        raise SystemdError(f"invalid unit name {unit!r}")
    argv = [*systemctl, "show", "--timestamp=us+utc", unit, "-p", ",".join(SHOW_PROPERTIES)]
    command = shlex.join(argv[: len(systemctl) + 1] + [unit])
    text = _show(argv, command, f"query {unit}", timeout)
    props = parse_show(text)
    if "LoadState" not in props:
        raise SystemdError(f"{command} printed no LoadState: {_first_line(text)!r}")
    return parse_unit_state(unit, props)


def show_manager(
    properties: Sequence[str], systemctl: Sequence[str] = ("systemctl",), timeout: float = 5.0
) -> dict[str, list[str]]:
    """The systemd manager's own properties (`systemctl show -p ...` without a unit)."""
    argv = [*systemctl, "show", "-p", ",".join(properties)]
    return parse_show(_show(argv, shlex.join(argv), "query the systemd manager", timeout))


def _show(argv: list[str], command: str, what: str, timeout: float) -> str:
    """What one `systemctl show` prints; any failure is a SystemdError."""
    systemctl = argv[0]
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise SystemdError(f"cannot {what}: {systemctl!r} not found") from None
    except PermissionError:
        raise SystemdError(f"cannot {what}: {systemctl!r} is not executable") from None
    except subprocess.TimeoutExpired:
        raise SystemdError(f"{command} did not answer within {timeout:g} s") from None
    if result.returncode != 0:
        reason = _first_line(result.stderr) or _first_line(result.stdout) or "no output"
        raise SystemdError(f"{command} failed (exit {result.returncode}): {reason}")
    return result.stdout


def unit_facts(
    subject: str, state: UnitState, lines: Mapping[str, Any] | None = None
) -> Iterator[Fact]:
    """The facts systemd holds about a unit's configuration, with where they come from.

    MainPID is left out: the services collector records the process itself
    (pid, started_at); how the unit's runs went is context. `lines` names the
    unit file line that set an `Environment=` variable
    (`drift.collectors.unit_files`), where it is known. The `Limit*=` its files
    set are `drift.collectors.unit_limits`'s.
    """
    provenance = {
        "unit": state.unit,
        "fragment": state.fragment_path,
        "drop_ins": list(state.drop_in_paths),
    }
    values = {
        "unit:load_state": state.load_state,
        "unit:active_state": state.active_state,
        "unit:fragment_path": state.fragment_path,
        "unit:drop_ins": "\n".join(state.drop_in_paths),
        # "-" marks an optional file, as in EnvironmentFile= itself.
        "unit:environment_files": "\n".join(
            ("-" if ignore else "") + path for path, ignore in state.environment_files
        ),
        "unit:exec_start": "\n".join(shlex.join(argv) for argv in state.exec_start),
        "unit:need_daemon_reload": "yes" if state.need_daemon_reload else "no",
    }
    for key, value in values.items():
        yield Fact(subject, key, value, dict(provenance))
    yield from _setting_facts(subject, state.settings, provenance)
    yield from _runtime_facts(subject, state, provenance)
    for name, value in state.environment.items():
        where = dict(provenance)
        origin = (lines or {}).get(name)
        if origin is not None:
            where.update(file=origin.file, line=origin.line, text=origin.text)
        yield Fact(subject, f"unit:environment:{name}", value, where)


_TIMESTAMP = re.compile(
    r"^(?:\w{3} )?(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))? (UTC|GMT|UCT|Z)$"
)


def parse_timestamp(text: str) -> datetime | None:
    """Parse a `--timestamp=us+utc` (or second-resolution UTC) value; empty or n/a is None."""
    text = text.strip()
    if not text or text == "n/a":
        return None
    match = _TIMESTAMP.match(text)
    if match is None:
        # Only UTC is accepted: a local zone abbreviation cannot be mapped reliably.
        raise SystemdError(f"unexpected systemd timestamp {text!r} (expected UTC)")
    moment = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S")
    micro = int((match[2] or "0").ljust(6, "0"))
    return moment.replace(microsecond=micro, tzinfo=UTC)


_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "s": " ",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


def split_quoted(text: str) -> list[str]:
    """Split a systemd string list into words, undoing its quoting and C escapes.

    Inverse of systemd's shell_maybe_quote(): words are separated by whitespace,
    may be wrapped in "..." or '...', and backslash escapes (``\\n``, ``\\"``,
    ``\\\\``, ``\\xNN``, octal ``\\NNN``) apply inside and outside quotes.
    """
    words: list[str] = []
    current: list[str] = []
    in_word = False
    quote: str | None = None
    i = 0
    while i < len(text):
        char = text[i]
        if quote is None and char in " \t\n":
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            i += 1
            continue
        in_word = True
        if char == "\\":
            decoded, i = _unescape(text, i)
            current.append(decoded)
        elif quote is None and char in "\"'":
            quote = char
            i += 1
        elif char == quote:
            quote = None
            i += 1
        else:
            current.append(char)
            i += 1
    if quote is not None:
        raise SystemdError(f"unterminated quote in systemd value {text!r}")
    if in_word:
        words.append("".join(current))
    return words


def _unescape(text: str, i: int) -> tuple[str, int]:
    """Decode the backslash escape at text[i]; return it and the index after it."""
    if i + 1 >= len(text):
        return "\\", i + 1
    code = text[i + 1]
    if code in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[code], i + 2
    if code in _HEX_ESCAPES:
        width = _HEX_ESCAPES[code]
        digits = text[i + 2 : i + 2 + width]
        if len(digits) == width and all(c in "0123456789abcdefABCDEF" for c in digits):
            return chr(int(digits, 16)), i + 2 + width
    digits = text[i + 1 : i + 4]
    if len(digits) == 3 and all(c in "01234567" for c in digits):
        return chr(int(digits, 8)), i + 4
    # \" \' \\ \$ \` and anything unknown: the character itself.
    return code, i + 2


_ENVIRONMENT_FILE = re.compile(r"^(.*) \(ignore_errors=(yes|no)\)$")


def _parse_environment_file(value: str) -> tuple[str, bool]:
    """``/etc/x.env (ignore_errors=yes)`` -> ("/etc/x.env", True)."""
    match = _ENVIRONMENT_FILE.match(value)
    if match is None:
        return value, False
    return match[1], match[2] == "yes"


def _parse_exec(value: str) -> tuple[str, ...]:
    """argv of one ``{ path=... ; argv[]=... ; ignore_errors=... ; ... }`` entry.

    systemd joins argv with single spaces and no quoting (strv_join), so the
    split is exact unless an argument itself contains a space. The argv field
    ends at the last ``ignore_errors=`` (or ``flags=`` for ExecStartEx), since
    an argument may contain `` ; `` too.
    """
    body = value.strip()
    start = body.find(" ; argv[]=")
    if not body.startswith("{") or start < 0:
        raise SystemdError(f"unexpected ExecStart value {value!r}")
    start += len(" ; argv[]=")
    end = max(body.rfind(" ; ignore_errors="), body.rfind(" ; flags="))
    argv = body[start:end] if end >= start else body[start:]
    return tuple(argv.split(" ")) if argv else ()


def _first_line(text: str) -> str:
    """The first non-blank line of a command's output, stripped."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


# ---------------------------------------------------------------- runs and settings


def parse_runtime(props: dict[str, list[str]]) -> UnitRuntime:
    """How the unit's last run went; a property systemd does not print for the unit is empty."""

    def first(name: str) -> str:
        values = props.get(name)
        return values[0] if values else ""

    code = _integer(first("ExecMainCode"))
    return UnitRuntime(
        sub_state=first("SubState"),
        result=first("Result"),
        n_restarts=_integer(first("NRestarts")),
        exec_main_pid=_integer(first("ExecMainPID")) or 0,
        exec_main_code=_CHILD_CODES.get(code or 0, f"code {code}"),
        exec_main_status=_integer(first("ExecMainStatus")) or 0,
        invocation_id=first("InvocationID"),
    )


# siginfo's si_code for a child (CLD_*), as `systemctl show` prints ExecMainCode.
_CHILD_CODES = {0: "", 1: "exited", 2: "killed", 3: "dumped", 4: "trapped", 5: "stopped"}


def parse_settings(props: dict[str, list[str]]) -> UnitSettings:
    """The settings a unit starts its process with, as systemd has loaded them."""

    def first(name: str) -> str:
        values = props.get(name)
        return values[0] if values else ""

    limits = {}
    for name in LIMITS:
        hard, soft = first(f"Limit{name}"), first(f"Limit{name}Soft")
        if hard:
            limits[name] = hard if soft in ("", hard) else f"{soft}:{hard}"
    return UnitSettings(
        exec_start_pre=tuple(_exec_line(v) for v in props.get("ExecStartPre", []) if v),
        user=first("User"),
        working_directory=first("WorkingDirectory"),
        cpu_affinity=first("CPUAffinity"),
        device_allow=tuple(v for v in props.get("DeviceAllow", []) if v),
        restart=first("Restart"),
        limits=limits,
    )


def _exec_line(value: str) -> str:
    """One ``Exec*=`` entry as its command line, ``-`` first when its failure is ignored."""
    line = shlex.join(_parse_exec(value))
    return "-" + line if " ; ignore_errors=yes ; " in value else line


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _setting_facts(
    subject: str, settings: UnitSettings, provenance: dict[str, Any]
) -> Iterator[Fact]:
    """``unit:user``, ``unit:restart`` ...: each setting the unit sets (unset ones: none)."""
    values = {
        "unit:exec_start_pre": "\n".join(settings.exec_start_pre),
        "unit:user": settings.user,
        "unit:working_directory": settings.working_directory,
        "unit:cpu_affinity": settings.cpu_affinity,
        "unit:device_allow": "\n".join(settings.device_allow),
        # Restart=no is systemd's default: recorded as unset, like the others.
        "unit:restart": "" if settings.restart == "no" else settings.restart,
    }
    for key, value in values.items():
        if value:
            yield Fact(subject, key, value, dict(provenance))


def _runtime_facts(subject: str, state: UnitState, provenance: dict[str, Any]) -> Iterator[Fact]:
    """How the last run went (``unit:sub_state``, ``unit:n_restarts`` ...): never a suspect."""
    runtime = state.runtime
    values = {
        "unit:sub_state": runtime.sub_state,
        "unit:result": runtime.result,
        "unit:n_restarts": "" if runtime.n_restarts is None else str(runtime.n_restarts),
        "unit:exec_main_status": exit_text(runtime.exec_main_code, runtime.exec_main_status),
        "unit:invocation_id": runtime.invocation_id,
        "unit:exec_main_start": (
            state.exec_main_start.isoformat(timespec="microseconds")
            if state.exec_main_start is not None
            else ""
        ),
    }
    for key, value in values.items():
        if value:
            yield Fact(subject, key, value, dict(provenance))


def exit_text(code: str, status: int) -> str:
    """How a main process ended, as stored: ``exited 1``, ``killed SIGSEGV``, ``dumped SIGABRT``."""
    if not code:
        return ""
    if code in ("killed", "dumped"):
        try:
            return f"{code} {signal.Signals(status).name}"
        except ValueError:
            return f"{code} signal {status}"
    return f"{code} {status}"
