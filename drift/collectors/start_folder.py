"""Where systemd starts a unit's serve script: the folder bash reads its relative paths from.

A script that runs ``source ./common.sh`` reads common.sh from its working
folder. A unit's process starts in the unit's WorkingDirectory=: ``/`` when
the unit sets none (a system unit), the User='s home for ``~``, and ``/``
again for ``-DIR`` (shown ``!DIR``) when DIR is not there. That is the
script's start folder only when the unit runs the script itself
(``ExecStart=/opt/serve/decode.sh`` or ``ExecStart=/bin/bash
/opt/serve/decode.sh``); a wrapper in between may start it anywhere, and a
RootDirectory= puts every path elsewhere: then the folder is not known.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from drift.facts import CollectContext
from drift.rooted import Files

_PROPERTIES = ("ExecStart", "WorkingDirectory", "User", "RootDirectory", "RootImage")
_SHELLS = frozenset({"bash", "sh", "dash"})


@dataclass(frozen=True)
class StartFolder:
    """The folder a script is started in, and how drift knows (said beside it in a gap)."""

    path: str
    how: str


def unit_start_folder(unit: str, script: str, ctx: CollectContext) -> StartFolder | None:
    """The folder `unit` starts `script` in, if the unit runs it itself; else None."""
    from drift.collectors.commands import run_bounded
    from drift.collectors.systemd import SystemdError, parse_show, parse_unit_state

    run = run_bounded([*ctx.systemctl, "show", unit, "-p", ",".join(_PROPERTIES)], timeout=5.0)
    if run.exit_code != 0:
        return None  # the services collector says what is wrong with systemd
    props = parse_show(run.stdout.decode("utf-8", "surrogateescape"))
    try:
        exec_start = parse_unit_state(unit, props).exec_start
    except SystemdError:
        return None
    if any(_first(props, name) for name in ("RootDirectory", "RootImage")):
        return None
    if not any(_runs(argv, script, ctx.files) for argv in exec_start):
        return None
    return working_folder(unit, _first(props, "WorkingDirectory"), _first(props, "User"), ctx.files)


def working_folder(unit: str, setting: str, user: str, files: Files) -> StartFolder | None:
    """The folder systemd starts `unit`'s process in, from its WorkingDirectory= as shown."""
    if not setting:
        return StartFolder("/", f"unit {unit} sets no WorkingDirectory=")
    if setting == "~":
        home = _home(user or "root", files)
        if home is None:
            return None
        return StartFolder(home, f"the home of {user or 'root'}, unit {unit}'s WorkingDirectory=~")
    optional = setting.startswith("!")
    folder = os.path.normpath(setting.removeprefix("!"))
    if not os.path.isabs(folder):
        return None
    if optional and not _is_folder(folder, files):
        return StartFolder("/", f"unit {unit}'s WorkingDirectory=-{folder} is not there")
    return StartFolder(folder, f"unit {unit}'s WorkingDirectory=")


def _first(props: dict[str, list[str]], name: str) -> str:
    values = props.get(name)
    return values[0] if values else ""


def _runs(argv: Sequence[str], script: str, files: Files) -> bool:
    """Whether a command line runs `script` itself: as its program, or a shell's script file."""
    if not argv:
        return False
    if _same_file(argv[0], script, files):
        return True
    if os.path.basename(argv[0]) not in _SHELLS:
        return False
    for word in argv[1:]:
        if word.startswith("-"):
            if "c" in word.lstrip("-") and not word.startswith("--"):
                return False  # `bash -c STRING`: the script runs from a string, anywhere
            continue
        return _same_file(word, script, files)
    return False


def _same_file(path: str, script: str, files: Files) -> bool:
    if not os.path.isabs(path):
        return False
    if os.path.normpath(path) == os.path.normpath(script):
        return True
    return files.realpath(path) == files.realpath(script)


def _is_folder(path: str, files: Files) -> bool:
    try:
        return stat.S_ISDIR(files.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _home(user: str, files: Files) -> str | None:
    """`user`'s home from /etc/passwd (by name or uid), where drift reads the box's files."""
    data = files.read_regular("/etc/passwd", 4 << 20)
    if data is None:
        return None
    for line in data.decode("utf-8", "replace").splitlines():
        fields = line.split(":")
        if len(fields) >= 6 and user in (fields[0], fields[2]) and os.path.isabs(fields[5]):
            return os.path.normpath(fields[5])
    return None
