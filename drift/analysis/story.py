"""The story: one suspect, its root change, the evidence that follows from it, and its status.

A story is one suspect: a root cause (the line someone edited) and the
evidence that follows from it (the same value in the live process, the
script's diff). Each story has a status:

- ``live``: the new value is in a running process (checked against the
  process's own environment or command line; for script text and unit
  settings without a live counterpart, the process was started since, or
  at about the same time, which the label then says).
- ``pending``: changed at its source (serve script, systemd unit) but not in
  the running process yet: "not applied yet: takes effect on next restart".
- ``failing``: changed at its source before a systemd service began to fail,
  and applied at the failing starts: the service is crash-looping (or failed)
  with it. The label says so, with the restart count and how it ended.
- ``unsourced``: changed in a running process while no changed source in the
  window explains it; the label says where it could have come from. The
  variables nothing recorded sets that changed at one start (a restart from
  another shell) are one such story.
- ``on-disk``: a file or repository changed; drift cannot tell whether a
  running process has loaded it.
- ``changed``: anything else (command output, health, a service that
  stopped, volatile ids).

A change several services read (a line of an env file two serve scripts
source) is one story with the strongest of its statuses there (`combined`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from drift.analysis.diff import Change
from drift.analysis.failures import Failure
from drift.analysis.kinds import category
from drift.analysis.origins import possibilities
from drift.analysis.restarts import Restart
from drift.analysis.timing import Span
from drift.analysis.titles import joined_names
from drift.store.query import StoredVersion

Status = Literal["live", "launched", "failing", "pending", "unsourced", "on-disk", "changed"]
STATUSES: tuple[Status, ...] = (
    "live",
    "launched",
    "failing",
    "pending",
    "unsourced",
    "on-disk",
    "changed",
)
# A change read by several services takes the strongest of its statuses there:
# in a process (or failing with it) over unknown over known not applied yet.
Side = Literal["old", "new"]


def version_spots(version: StoredVersion) -> set[tuple[str, int]]:
    """The lines (file, line) a script value is read from: its own, or each candidate's."""
    file, line = version.provenance.get("file"), version.provenance.get("line")
    spots = {(file, line)} if isinstance(file, str) and isinstance(line, int) else set()
    for p in possibilities(version):
        if isinstance(p.get("file"), str) and isinstance(p.get("line"), int):
            spots.add((p["file"], p["line"]))
    return spots


def change_spots(change: Change) -> set[tuple[str, Side, int]]:
    """Where in its files' diffs a script change is: the old side's lines, the new side's.

    A value set on another line (``TP=${TP:-4}`` for ``--tp "$TP"``) counts
    too: that line is the edit.
    """
    found: set[tuple[str, Side, int]] = set()
    sides: tuple[tuple[Side, StoredVersion | None], ...] = (
        ("old", change.before),
        ("new", change.after),
    )
    for side, version in sides:
        if version is None or not change.subject.startswith("script:"):
            continue
        found.update((file, side, line) for file, line in version_spots(version))
        file = version.provenance.get("value_file") or version.provenance.get("file")
        line = version.provenance.get("value_line")
        if isinstance(file, str) and isinstance(line, int):
            found.add((file, side, line))
    return found


STRENGTH: tuple[Status, ...] = (
    "failing",
    "live",
    "launched",
    "unsourced",
    "on-disk",
    "changed",
    "pending",
)


def combined(outcomes: Sequence[tuple[str | None, Status, str]]) -> tuple[Status, str]:
    """One status and label for a change read by several services, from each one's.

    The status is the strongest; the label says each service's part once, strongest
    first. Services whose parts say the same are one part (``decode and prefill: not
    applied yet: ...``), the notes that name one of them kept after it (``(prefill is not
    running)``); a part that does not name its services itself is labelled with them
    (``live in decode (pid 7); prefill: not applied yet: ...``).
    """
    if len(outcomes) == 1:
        return outcomes[0][1], outcomes[0][2]
    ordered = sorted(outcomes, key=lambda o: (STRENGTH.index(o[1]), o[0] or ""))
    parts: dict[str, tuple[list[str], list[str]]] = {}
    for service, _, label in ordered:
        head, note = _split_note(label, service)
        services, notes = parts.setdefault(head, ([], []))
        services.append(service or "?")
        if note and note not in notes:
            notes.append(note)
    said = []
    for head, (services, notes) in parts.items():
        part = (
            head if all(_names(head, s) for s in services) else f"{joined_names(services)}: {head}"
        )
        said.append(f"{part} ({'; '.join(notes)})" if notes else part)
    return ordered[0][1], "; ".join(said)


def _names(text: str, service: str) -> bool:
    """Whether `text` names `service` as a word (not `decode` in `decode-2`)."""
    return re.search(rf"(?<![\w.-]){re.escape(service)}(?![\w-])", text) is not None


def _split_note(label: str, service: str | None) -> tuple[str, str | None]:
    """A label and its closing note about its own service, apart: ``not applied yet: ...``
    and ``prefill is not running``; the label whole when it has no such note."""
    if service is None or not label.endswith(")"):
        return label, None
    depth = 0
    for at in range(len(label) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(label[at], 0)
        if depth == 0:
            break
    head, note = label[:at], label[at + 1 : -1]
    if not head.endswith(" ") or not _names(note, service) or _names(head, service):
        return label, None
    return head.rstrip(), note


@dataclass(frozen=True)
class Story:
    """One suspect: the root change, the changes that follow from it, and what it means."""

    root: Change
    evidence: tuple[Change, ...]
    status: Status
    label: str
    title: str
    services: tuple[str, ...]
    restarts: tuple[Restart, ...]
    # When the root change happened, as far as the records tell (None: only
    # when it was first recorded is known).
    changed: Span | None = None
    # The failing service the change reached (a crash loop), if any.
    failure: Failure | None = None
    # When its value first ran in the service: the start of the process the first
    # record to see it read it from, kept through the restarts since that did not
    # change it (None: not known; the latest restart then stands for it).
    live_from: LiveStart | None = None
    # When a running process first held another value than the baseline's for one of the
    # story's live facts, if that was before its current value (512, then 256): the change
    # of the knob began then, whatever value it has now.
    departed_us: int | None = None
    # A change that came and went inside the window: when its fact was back at the baseline's
    # value, and how many times it went and came back (drift.analysis.excursions).
    round_trip: RoundTrip | None = None

    @property
    def category(self) -> str:
        return category(self.root.subject, self.root.key)

    @property
    def changes(self) -> tuple[Change, ...]:
        """Root first, then the evidence."""
        return (self.root, *self.evidence)

    @property
    def began_us(self) -> int:
        """When the story began: its root's change, or earlier when a running process held
        a new value of one of its facts before (512 before the failure, 256 now)."""
        moment = self.root.changed_us
        return moment if self.departed_us is None else min(moment, self.departed_us)

    @property
    def effective_us(self) -> int:
        """When the change could first have mattered: for a live one, the start that took it."""
        moment = self.root.changed_us
        start = self._start()
        return moment if start is None else max(moment, start.at_us)

    @property
    def effective_span(self) -> Span:
        """`effective_us` as an interval: the change's, or the start's if that came later."""
        moment = self.changed or Span(self.root.changed_us, self.root.changed_us)
        start = self._start()
        if start is not None:
            moment = Span(
                max(moment.earliest_us, start.span.earliest_us),
                max(moment.latest_us, start.span.latest_us),
            )
        return moment

    def _start(self) -> LiveStart | None:
        """The start that took a live change: its first one, else the latest restart."""
        if self.status not in ("live", "launched", "unsourced"):
            return None
        if self.live_from is not None:
            return self.live_from
        if not self.restarts:
            return None
        latest = max(self.restarts, key=lambda r: r.at_us)
        return LiveStart(latest.at_us, latest.started or Span.start(latest.at_us), latest.after_pid)


@dataclass(frozen=True)
class RoundTrip:
    """When a story's change was undone (its fact back at the baseline's value), and how many
    times that fact went and came back inside the window."""

    back_us: int
    times: int


@dataclass(frozen=True)
class LiveStart:
    """The start of the process a value was first live in: when, as precisely as known, and its pid.

    A restart that kept the value is no new start of it; one that changed it is.
    """

    at_us: int
    span: Span
    pid: str | None
