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

from drift.collectors.systemd import LIMITS, UnitState
from drift.collectors.unit_files import MAX_UNIT_FILE, service_assignments
from drift.facts import Fact
from drift.small_files import Unread, as_text, read_small


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


def _read(path: str) -> str | None:
    try:
        # Unit files are links into /lib/systemd/system as often as not.
        data = read_small(path, MAX_UNIT_FILE, follow=True)
    except Unread:
        return None
    return None if data is None else as_text(data)
