"""The words that name a story: its title, the phrases in its label, and values as shown in them.

A title says what changed, where (``export K=V added to FILE:LINE``); a
label says what it means (``not applied yet: ...``). Values are shown one
line each: secrets as their marker, long text shortened, blobs not at all.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence

from drift.analysis.diff import Change
from drift.analysis.kinds import FILE_IDENTITY_KEYS
from drift.analysis.origins import Spot, possibilities, with_default
from drift.analysis.restarts import PER_START_ENV
from drift.analysis.structured import STRUCTURED_FORMATS, KeyChange, diff_content
from drift.analysis.timing import Span
from drift.display import truncated
from drift.secrets.markers import shown_secret
from drift.store.query import StoredVersion
from drift.timespec import clock, clock_span

NOT_APPLIED = "not applied yet: takes effect on next restart"
SOURCE_UNKNOWN = "source unknown"


def joined_names(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(names) < 2:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def about_the_same_time(starts: Sequence[int], change: Span) -> str:
    """Starts in no known order with a change, in words, with the times that show it."""
    earliest, latest = clock_span(change.earliest_us, change.latest_us)
    times = f"change between {earliest} and {latest}{_by(change)}"
    if starts:
        noun = "start" if len(starts) == 1 else "starts"
        times = f"{noun} {', '.join(map(clock, starts))}; {times}"
    return f"at about the same time ({times}), order unknown"


def _by(change: Span) -> str:
    return " by file time" if change.edited_us is not None else ""


# The order variables are named in an environment story: first the unusual
# ones (NCCL_ALGO exported in that shell is likelier to shape the server),
# then what any login shell carries, last what a shell or the service
# manager sets about itself (where and how it was started, not how it runs).
_LOGIN_SHELL = frozenset(
    {
        "HOME",
        "PATH",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "MAIL",
        "HOSTNAME",
        "TERM",
        "COLORTERM",
        "LS_COLORS",
        "DISPLAY",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "LESS",
        "MOTD_SHOWN",
    }
)
_LOGIN_SHELL_PREFIXES = ("LC_", "XDG_", "SSH_", "PYENV_", "HIST", "DBUS_")
_SHELL_BOOKKEEPING = frozenset({"_", "OLDPWD", "PWD", "SHLVL"}) | PER_START_ENV


def environment_order(change: Change) -> tuple[int, str]:
    """Sort key for live variables: unusual ones first, login-shell ones, then bookkeeping."""
    name = change.key.removeprefix("env:")
    if name in _SHELL_BOOKKEEPING:
        return 2, name
    if name in _LOGIN_SHELL or name.startswith(_LOGIN_SHELL_PREFIXES):
        return 1, name
    return 0, name


def variable_names(changes: Sequence[Change]) -> str:
    """Variable names for a title: all of three or fewer, else the first two and how many more."""
    names = [c.key.removeprefix("env:") for c in sorted(changes, key=environment_order)]
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}, {names[1]}, +{len(names) - 2}"


def shown(version: StoredVersion | None, limit: int = 80) -> str:
    """A value for a title: secrets as [redacted:<8 hex>], long text shortened, blobs not shown."""
    if version is None:
        return ""
    if version.secret:
        return shown_secret(version.value)
    if version.value is None:
        return "[text]"
    if (default := with_default(version)) is not None:
        return default  # reads as a value, not as a quoted word
    text = version.value
    text = truncated(text, limit)
    if text == "" or any(c.isspace() for c in text):
        return shlex.quote(text)
    return text


def _where(change: Change) -> str:
    """FILE:LINE of a script fact; its candidate lines when several may give it."""
    latest = change.after or change.before
    assert latest is not None
    file = latest.provenance.get("file") or change.subject.split(":", 1)[1]
    line = latest.provenance.get("line")
    if line:
        return f"{file}:{line}"
    spots: dict[str, list[str]] = {}
    for p in possibilities(latest):
        if isinstance(p.get("file"), str) and isinstance(p.get("line"), int):
            lines = spots.setdefault(p["file"], [])
            if str(p["line"]) not in lines:
                lines.append(str(p["line"]))
    if spots:
        return " or ".join(f"{f}:{'|'.join(lines)}" for f, lines in spots.items())
    return str(file)


def script_title(
    change: Change,
    spot: Spot | None = None,
    live: StoredVersion | None = None,
    was: StoredVersion | None = None,
    steps: Sequence[StoredVersion] = (),
) -> str:
    """``export K=V added to FILE:LINE``, ``flag --x V at FILE:LINE (was W)`` ...

    `spot` is the line the live process singles out when the script may give
    several values, `live` the value it has (shown instead of them all) and
    `was` the value it had before, if the process shows that too. `steps`: the
    values the process took inside the window, in order; two or more are told
    with their times (``export K added to FILE:LINE: V1 at 12:01:05, then V2 at
    12:03:10``).
    """
    kind, _, name = change.key.partition(":")
    where = str(spot) if spot is not None else _where(change)
    if spot is not None and spot.value:
        where += f", value from {spot.value}"
    elif spot is None and change.after is not None:
        value_line = change.after.provenance.get("value_line")
        if isinstance(value_line, int):
            file = change.after.provenance.get("value_file") or change.after.provenance.get("file")
            where += f", value from {file}:{value_line}"
    after = live if live is not None else change.after
    if kind == "export":
        what = f"export {name}"
        new = f"{what}={shown(after)}"
    elif kind == "flag":
        what = f"flag {name}"
        value = shown(after)
        new = f"{what} {value}" if after is not None and after.value != "" else what
    elif kind == "exec":
        return f"exec line {'changed' if change.kind == 'modified' else change.kind} at {where}"
    else:
        return f"{change.subject.removeprefix('script:')} text {change.kind}"
    if change.kind != "removed" and len(steps) > 1:
        new = f"{what} {'added to' if change.kind == 'added' else 'at'} {where}: {told(steps)}"
        if change.kind == "added":
            return new
        return f"{new} (was {shown(was if was is not None else change.before)})"
    if change.kind == "added":
        return f"{new} added to {where}"
    if change.kind == "removed":
        return f"{what} removed from {where}"
    return f"{new} at {where} (was {shown(was if was is not None else change.before)})"


def told(steps: Sequence[StoredVersion]) -> str:
    """Values in the order a process took them, each with when it was first seen live:
    ``512 at 12:01:05, then 256 at 12:03:10``; more than three, the middle ones counted."""
    said = [f"{shown(v)} at {clock(v.first_taken_us)}" for v in steps]
    if len(said) > 3:
        said = [said[0], f"{len(said) - 2} other values", said[-1]]
    return f"{', '.join(said[:-1])}, then {said[-1]}"


NOT_LOADED = "not loaded: run systemctl daemon-reload"
NOT_RELOADED = "not applied yet: takes effect after systemctl daemon-reload and a restart"
MANAGER = "the systemd manager environment"


def unit_title(change: Change, *, not_loaded: bool = False) -> str:
    """``Environment=K=V added to FILE:LINE``, ``K=V in EnvironmentFile FILE:LINE (was W)`` ...

    `not_loaded`: the unit's files say this, systemd has not loaded it yet
    (``, not loaded: run systemctl daemon-reload``).
    """
    latest = change.after or change.before
    assert latest is not None
    unit = latest.provenance.get("unit") or change.subject.removeprefix("service:")
    family, _, name = change.key.removeprefix("unit:").partition(":")
    if family in ("environment", "disk_environment", "envfile", "pass_environment") and name:
        title = _variable_title(change, family, name, f"unit {unit}")
    elif change.key == "unit:envfile_ignored" and change.after is not None:
        lines = (change.after.value or "").split("\n")
        more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
        title = f"EnvironmentFile line ignored by systemd, not a variable name: {lines[0]}{more}"
    elif family == "envfile_sha256" and name:
        title = f"EnvironmentFile {name} {'changed' if change.kind == 'modified' else change.kind}"
    elif change.key == "unit:need_daemon_reload":
        return f"unit {unit} changed on disk, not reloaded (NeedDaemonReload={latest.value})"
    elif family == "file" and name:
        # The path names the unit: decode.service, decode.service.d/override.conf.
        what = "drop-in" if os.path.dirname(name).endswith(".d") else "unit file"
        title = f"{what} {name} {'changed' if change.kind == 'modified' else change.kind}"
    else:
        title = f"unit {unit}: {change.key.removeprefix('unit:')} {change.kind}"
    return f"{title}, {NOT_LOADED}" if not_loaded else title


def _variable_title(change: Change, family: str, name: str, unit: str) -> str:
    """A variable of a systemd source, where it is set: file and line when known."""
    latest = change.after or change.before
    assert latest is not None
    file, line = latest.provenance.get("file"), latest.provenance.get("line")
    where = f"{file}:{line}" if file and line else unit
    if family == "envfile":
        where = f"EnvironmentFile {where}"
    elif family == "pass_environment":
        where = "PassEnvironment= (from the manager's own environment)"
    setting = name if family in ("envfile", "pass_environment") else f"Environment={name}"
    if change.kind == "removed":
        return f"{setting} removed from {where}"
    new = f"{setting}={shown(change.after)}"
    at = ("added to" if change.kind == "added" else "at") if file and line else "in"
    was = "" if change.kind == "added" else f" (was {shown(change.before)})"
    return f"{new} {at} {where}{was}"


def manager_title(change: Change) -> str:
    """``K=V set in the systemd manager environment``, ``K removed from ...`` ..."""
    name = change.key.removeprefix("environment:")
    if change.kind == "removed":
        return f"{name} removed from {MANAGER}"
    new = f"{name}={shown(change.after)}"
    if change.kind == "added":
        return f"{new} set in {MANAGER}"
    return f"{new} in {MANAGER} (was {shown(change.before)})"


def live_title(change: Change, service: str) -> str:
    """``K=V in the live environment of S``, ``--x V on the live command line of S`` ..."""
    kind, _, name = change.key.partition(":")
    if kind == "env":
        if change.kind == "removed":
            return f"{name} gone from the live environment of {service}"
        new = f"{name}={shown(change.after)} in the live environment of {service}"
        return new if change.kind == "added" else f"{new} (was {shown(change.before)})"
    if kind == "flag":
        if change.kind == "removed":
            return f"{name} gone from the live command line of {service}"
        value = shown(change.after)
        new = f"{name} {value}".rstrip() if change.after and change.after.value else name
        new += f" on the live command line of {service}"
        return new if change.kind == "added" else f"{new} (was {shown(change.before)})"
    return f"{service} runs a different command line ({change.key} {change.kind})"


def generic_title(change: Change) -> str:
    """The title of a file, repo, command or health story, or of any other lone change."""
    kind, _, rest = change.subject.partition(":")
    if kind == "file":
        if change.key == "sha256" and change.kind == "modified":
            return f"{rest} content changed"
        if change.kind != "modified":
            whole = change.key in FILE_IDENTITY_KEYS  # the file itself appeared or went
            return f"{rest} {change.kind}" if whole else f"{rest}: {change.key} {change.kind}"
        return f"{rest}: {change.key} {shown(change.after)} (was {shown(change.before)})"
    if kind == "repo" and change.key == "head" and change.kind == "modified":
        old, new = shown(change.before, 12), shown(change.after, 12)
        return f"repo {rest}: HEAD moved to {new} (was {old})"
    if kind == "command":
        if change.key == "exit":
            return f"command {rest}: exit {shown(change.after)} (was {shown(change.before)})"
        return f"command {rest}: output {change.kind}"
    if kind == "health":
        return f"health check {rest}: ok {shown(change.before)} -> {shown(change.after)}"
    if change.kind == "modified" and change.after is not None and change.after.value is not None:
        return f"{change.subject} {change.key}: {shown(change.after)} (was {shown(change.before)})"
    return f"{change.subject} {change.key} {change.kind}"


CONTENT_KEYS_SHOWN = 2


def content_title(path: str, change: Change, text: Callable[[StoredVersion], str]) -> str:
    """A kept file's edit by the keys that moved: ``a.toml: server.port 8000 -> 8001``.

    A text file, or one that does not parse, is ``PATH content changed``.
    """
    assert change.before is not None and change.after is not None
    fmt = str(change.after.provenance.get("format", "text"))
    if change.before.secret or change.after.secret or fmt not in STRUCTURED_FORMATS:
        return f"{path} content changed"
    found = diff_content(text(change.before), text(change.after), fmt)
    if not found.key_changes:
        why = " (does not parse)" if found.parse_error else ""
        return f"{path} content changed{why}"
    moved = [_key_words(k) for k in found.key_changes[:CONTENT_KEYS_SHOWN]]
    more = len(found.key_changes) - len(moved)
    return f"{path}: {', '.join(moved)}" + (f" (+{more} more)" if more else "")


def _key_words(change: KeyChange) -> str:
    if change.kind == "added":
        return f"{change.path} = {truncated(change.after or '', 60)} added"
    if change.kind == "removed":
        return f"{change.path} removed (was {truncated(change.before or '', 60)})"
    return (
        f"{change.path} {truncated(change.before or '', 60)} -> {truncated(change.after or '', 60)}"
    )


def plain_label(change: Change) -> str:
    """A label for a story with no process to check against."""
    kind = change.subject.split(":", 1)[0]
    if kind in ("file", "repo"):
        return "on disk: whether a running process loaded it is not recorded"
    if kind == "health":
        return "a symptom, not a cause"
    return f"{change.kind} since the baseline"
