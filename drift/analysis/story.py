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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from drift.analysis.diff import Change
from drift.analysis.failures import Failure
from drift.analysis.kinds import category
from drift.analysis.restarts import Restart
from drift.analysis.timing import Span

Status = Literal["live", "failing", "pending", "unsourced", "on-disk", "changed"]
STATUSES: tuple[Status, ...] = ("live", "failing", "pending", "unsourced", "on-disk", "changed")


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

    @property
    def category(self) -> str:
        return category(self.root.subject, self.root.key)

    @property
    def changes(self) -> tuple[Change, ...]:
        """Root first, then the evidence."""
        return (self.root, *self.evidence)

    @property
    def effective_us(self) -> int:
        """When the change could first have mattered: for a live one, the restart that took it."""
        moment = self.root.changed_us
        if self.status in ("live", "unsourced") and self.restarts:
            moment = max(moment, max(r.at_us for r in self.restarts))
        return moment

    @property
    def effective_span(self) -> Span:
        """`effective_us` as an interval: the change's, or the restart's if that came later."""
        moment = self.changed or Span(self.root.changed_us, self.root.changed_us)
        if self.status in ("live", "unsourced") and self.restarts:
            latest = max(self.restarts, key=lambda r: r.at_us)
            start = latest.started or Span.start(latest.at_us)
            moment = Span(
                max(moment.earliest_us, start.earliest_us), max(moment.latest_us, start.latest_us)
            )
        return moment
