"""Stories of a server's own view of its config (`[[endpoints]]`): one per batch of leaves.

A room of the grouper (see `drift.analysis.group`). One engine upgrade
moves many defaults at once: the leaves of one endpoint that changed
between the same two records are one story, each leaf listed old -> new;
a leaf that changed alone is a story of its own. The document is read
from the running server, so when the entry names its service and that
service's process started between the same two records, the values came
with that start (live in it); a value that moved while the process kept
running, or on an endpoint tied to no service, is "changed": drift does
not guess what moved it.
"""

from __future__ import annotations

from drift.analysis.applied import Applied
from drift.analysis.claims import value_of
from drift.analysis.diff import Change
from drift.analysis.story import Status
from drift.analysis.timing import parse_time_us
from drift.analysis.titles import shown
from drift.timespec import clock

_PREFIX = "json:"


class EndpointStories(Applied):
    """The [[endpoints]] leaves, in batches by the record that saw them, mixed into the grouper."""

    def endpoint_stories(self) -> None:
        """One story per endpoint and record that saw its leaves change."""
        subjects = sorted(
            {c.subject for c in self.unclaimed() if c.subject.startswith("endpoint:")}
        )
        for subject in subjects:
            batches: dict[int, list[Change]] = {}
            for change in self.unclaimed(subject, _PREFIX):
                batches.setdefault(_seen_by(change), []).append(change)
            for seen in sorted(batches):
                root, *rest = batches[seen]
                service = _service_of(root)
                status, label = self.endpoint_status(service, root)
                title = endpoint_title(root, rest)
                self.add(root, rest, status, label, title, () if service is None else (service,))

    def endpoint_status(self, service: str | None, change: Change) -> tuple[Status, str]:
        """Live when the service's process started between the records that saw the change."""
        if service is None:
            return "changed", (
                "the server's own view changed; the entry names no service, "
                "so whether a restart brought it is not known"
            )
        subject = f"service:{service}"
        not_running = self.not_running(service)
        if not_running is not None:
            return "changed", f"the server's own view changed; {not_running}"
        pid = value_of(self.after.get((subject, "pid")))
        where = f"{service} (pid {pid})" if pid else service
        started = self.after.get((subject, "started_at"))
        if started is None:
            return "changed", f"the server's own view changed; when {where} started is not recorded"
        at = parse_time_us(started.value)
        start = clock(at) if at is not None else str(started.value)
        order = self.start_order(service, change)
        if order == "unknown":
            # The process started between the record that read the old value and the
            # one that read the new: the server came up with it.
            label = self.live_label(service, change, live=change)
            return "live", f"{label}: came with its start {start}"
        if order == "after":
            return "live", (
                f"live in {where}; served already before its start {start}, "
                "so an earlier run brought it"
            )
        return "changed", (
            f"changed while {where} kept running (started {start}): not with a restart"
        )


def endpoint_title(root: Change, rest: list[Change]) -> str:
    """``endpoint E: /chunked_prefill_size 8192 (was 4096)``, or how many moved together."""
    name = root.subject.removeprefix("endpoint:")
    if rest:
        pointers = [pointer_of(c) for c in (root, *rest)]
        listed = ", ".join(pointers[:3]) + (f", +{len(pointers) - 3}" if len(pointers) > 3 else "")
        return f"endpoint {name}: {len(pointers)} values changed together ({listed})"
    pointer = pointer_of(root)
    if root.kind == "added":
        return f"endpoint {name}: {pointer} = {shown(root.after)} added"
    if root.kind == "removed":
        return f"endpoint {name}: {pointer} removed (was {shown(root.before)})"
    return f"endpoint {name}: {pointer} {shown(root.after)} (was {shown(root.before)})"


def pointer_of(change: Change) -> str:
    """The leaf's JSON pointer, ``(the document)`` for a document that is one value."""
    return change.key.removeprefix(_PREFIX) or "(the document)"


def _seen_by(change: Change) -> int:
    """The snapshot that first saw the change: leaves it saw moved between the same records."""
    if change.after is not None:
        return change.after.first_snapshot_id
    assert change.before is not None and change.before.until_snapshot_id is not None
    return change.before.until_snapshot_id


def _service_of(change: Change) -> str | None:
    """The [[services]] entry the endpoint's server is, as its entry said when last read."""
    latest = change.after or change.before
    service = None if latest is None else latest.provenance.get("service")
    return service if isinstance(service, str) and service else None
