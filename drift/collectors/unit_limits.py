"""The `Limit*=` a unit's files set, as systemd applies them: ``unit:limit:NOFILE = 65536``.

systemd reports every resource limit of a unit, set or not (an unset one is
the manager's default), so its answer alone cannot say which the unit sets.
The unit file and its drop-ins can: a limit is recorded when they assign it
(the last assignment wins; an empty one unsets), with the value systemd has
loaded (``SOFT:HARD`` when the two differ). Files drift cannot read leave
the question open, and no limit is recorded rather than a guess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from drift.collectors.systemd import LIMITS, UnitState
from drift.facts import Fact

MAX_UNIT_FILE = 1 << 20  # a unit file or drop-in larger than this is not read


@dataclass(frozen=True)
class Assignment:
    """One `KEY=value` of a unit file's [Service] section, and the line it starts on."""

    line: int
    text: str  # the line as written (its first line, for one continued with a backslash)
    key: str
    value: str


def limit_facts(subject: str, state: UnitState, root: str | None) -> list[Fact]:
    """``unit:limit:NAME`` for each limit the unit's files set; none when they cannot be read."""
    paths = [p for p in (state.fragment_path, *state.drop_in_paths) if p]
    assigned = limits_set(paths, root)
    if not assigned:
        return []
    provenance = {
        "unit": state.unit,
        "fragment": state.fragment_path,
        "drop_ins": list(state.drop_in_paths),
    }
    limits = state.settings.limits
    return [
        Fact(subject, f"unit:limit:{name}", limits[name], dict(provenance))
        for name in LIMITS
        if f"Limit{name}" in assigned and name in limits
    ]


def limits_set(paths: list[str], root: str | None) -> frozenset[str] | None:
    """The `Limit*=` keys (`LimitNOFILE` ...) the files leave set, or None: a file unread."""
    if root is None:
        return None
    last: dict[str, str] = {}
    for path in paths:
        text = _read(os.path.join(root, path.lstrip("/")))
        if text is None:
            return None
        for assignment in service_assignments(text.split("\n")):
            if assignment.key.startswith("Limit"):
                last[assignment.key] = assignment.value
    return frozenset(key for key, value in last.items() if value)


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


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_UNIT_FILE + 1)
    except OSError:
        return None
    if len(data) > MAX_UNIT_FILE:
        return None
    return data.decode("utf-8", "replace")
