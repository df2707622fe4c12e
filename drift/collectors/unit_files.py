"""Where a unit's `Environment=` values are written: the file and line, in the unit or a drop-in.

systemd merges the unit file and its drop-ins (`FragmentPath`, `DropInPaths`)
into one `Environment=` list and `systemctl show` gives only the result. drift
reads the same files in the same order and names the line that set each
variable last. systemd stays the judge: a line is claimed only when what drift
reads there is exactly the value systemd reports (a specifier such as `%i`, a
file drift cannot read, a syntax it does not follow: no claim, the provenance
stays "unit NAME").
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from drift.collectors.systemd import split_quoted

MAX_UNIT_FILE = 1 << 20  # a unit file or drop-in larger than this is not read


@dataclass(frozen=True)
class Origin:
    """The line of a unit file that set a variable."""

    file: str  # the path as systemd names it (inside the container, if any)
    line: int
    text: str


def files_root(proc_root: str) -> str | None:
    """The root the unit's paths are under, from `proc_root` (`/proc/N/root/proc` -> its root).

    None when proc_root does not end in /proc: then drift cannot tell where the
    files systemd names are, and claims no line.
    """
    trimmed = proc_root.rstrip("/")
    if not trimmed.endswith("/proc") and trimmed != "/proc":
        return None
    return trimmed[: -len("proc")] or "/"


def environment_origins(
    paths: list[str], environment: dict[str, str], root: str | None
) -> dict[str, Origin]:
    """For each variable of `environment` (systemd's merged value), the line that set it.

    `paths` are the unit file then its drop-ins, in systemd's order.
    """
    if root is None:
        return {}
    last: dict[str, tuple[str, Origin]] = {}
    for path in paths:
        lines = _read_lines(os.path.join(root, path.lstrip("/")))
        if lines is None:
            return {}  # one unreadable file could hold the last word on any variable
        for number, text, value in _environment_lines(lines):
            if value.strip() == "":
                last.clear()  # an empty Environment= resets the list
                continue
            for word in split_quoted(value):
                name, sep, assigned = word.partition("=")
                if sep and name:
                    last[name] = (assigned, Origin(path, number, text))
    return {
        name: origin
        for name, (assigned, origin) in last.items()
        if environment.get(name) == assigned
    }


def _read_lines(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_UNIT_FILE + 1)
    except OSError:
        return None
    if len(data) > MAX_UNIT_FILE:
        return None
    return data.decode("utf-8", "replace").split("\n")


def _environment_lines(lines: list[str]) -> list[tuple[int, str, str]]:
    """(line number, the line's text, the value) of each `Environment=` in [Service]."""
    return [(a.line, a.text, a.value) for a in service_assignments(lines) if a.key == "Environment"]


@dataclass(frozen=True)
class Assignment:
    """One `KEY=value` of a unit file's [Service] section, and the line it starts on."""

    line: int
    text: str  # the line as written (its first line, for one continued with a backslash)
    key: str
    value: str


def service_assignments(lines: list[str]) -> list[Assignment]:
    """Every assignment of the [Service] section, in file order.

    A line ending in a backslash continues on the next; comments start with
    # or ;, as systemd reads them.
    """
    out = []
    section = ""
    index = 0
    while index < len(lines):
        start = index
        text = lines[index].strip()
        while text.endswith("\\") and index + 1 < len(lines):
            index += 1
            text = text[:-1] + " " + lines[index].strip()
        index += 1
        if not text or text[0] in "#;":
            continue
        if text.startswith("["):
            section = text
            continue
        key, sep, value = text.partition("=")
        if section == "[Service]" and sep:
            out.append(Assignment(start + 1, lines[start].strip(), key.strip(), value.strip()))
    return out
