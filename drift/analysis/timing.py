"""When things happened, as far as the evidence tells, and which came first.

A record sees a change, not the moment it happened. A fact first seen with
its new value by the record taken at T happened after the previous record
read it and before this one did: in (previous record's time, T + this
record's duration]. Records run about a minute apart, so a restart and an
edit in the same minute are in no known order. A source that says when it
changed (the reflog time of a git HEAD move) narrows that interval, when it
agrees with the records. A process start time is known to its clock tick
(10 ms), as ``started_at`` and its ``uncertainty_ms`` say.

"Started after" and "started before" are claimed only when the two
intervals do not overlap; otherwise the order is unknown, and the report
says "at about the same time".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from drift.analysis.diff import Change
from drift.store.query import SnapshotInfo, StoredVersion
from drift.timespec import parse_stored_time, to_us

Order = Literal["before", "after", "unknown"]

# A process's start time is counted in clock ticks (1/100 s) since boot.
START_PRECISION_US = 10_000
# A start time recorded without its uncertainty (drift then added a boot
# time cut to the second) may be up to a second early.
OLD_START_EARLY_US = 1_000_000
# Without the records (a caller that has none), the one before a change is
# taken to have run the usual cron interval earlier.
RECORD_INTERVAL_US = 60 * 1_000_000
# Provenance keys that say when a value took effect, and how finely:
# ``moved_at`` is the reflog time of a git HEAD move, in whole seconds.
_SAID_WHEN = {"moved_at": 1_000_000}


@dataclass(frozen=True)
class Span:
    """A moment known only to lie between `earliest_us` and `latest_us` (inclusive)."""

    earliest_us: int
    latest_us: int

    def order(self, other: Span) -> Order:
        """Whether this moment is certainly before or after `other`, or neither."""
        if self.latest_us < other.earliest_us:
            return "before"
        if self.earliest_us > other.latest_us:
            return "after"
        return "unknown"

    @classmethod
    def start(cls, at_us: int) -> Span:
        """A process start time as recorded: exact to a clock tick either way."""
        return cls(at_us - START_PRECISION_US, at_us + START_PRECISION_US)


def start_span(version: StoredVersion | None) -> Span | None:
    """When a process started, from its ``started_at`` fact; None if that is not a time.

    The value is the start of the clock tick it started in, `uncertainty_ms`
    long; one recorded without it may be up to a second early.
    """
    if version is None:
        return None
    at = parse_time_us(version.value)
    if at is None:
        return None
    tick = version.provenance.get("uncertainty_ms")
    if isinstance(tick, int) and not isinstance(tick, bool) and tick >= 0:
        return Span(at, at + tick * 1000)
    return Span(at - START_PRECISION_US, at + OLD_START_EARLY_US + START_PRECISION_US)


class Records:
    """The records of a window, to tell between which two of them a change happened."""

    def __init__(self, snapshots: Iterable[SnapshotInfo] = ()) -> None:
        self.snapshots = sorted(snapshots, key=lambda s: s.id)
        self.position = {s.id: i for i, s in enumerate(self.snapshots)}

    def span(self, change: Change) -> Span:
        """When `change` happened: after the record that last read the old value, by the next."""
        seen_us = change.changed_us
        if change.after is not None:
            seen_id: int | None = change.after.first_snapshot_id
        else:
            assert change.before is not None
            seen_id = change.before.until_snapshot_id
        earliest, latest = seen_us - RECORD_INTERVAL_US, seen_us
        at = self.position.get(seen_id) if seen_id is not None else None
        if at is not None:
            seen = self.snapshots[at]
            latest = seen.taken_us + seen.duration_ms * 1000
            # A record whose collection of this fact failed kept the old value
            # without reading it: the change may have happened before it.
            before = next(
                (
                    self.snapshots[i]
                    for i in range(at - 1, -1, -1)
                    if not _failed(self.snapshots[i], change.subject, change.key)
                ),
                None,
            )
            if before is not None:
                earliest = min(before.taken_us, seen.taken_us)
        span = Span(earliest, latest)
        said = _said_when(change.after)
        if said is not None and said.earliest_us <= latest and said.latest_us >= earliest:
            # The source's own time, where it agrees with the records.
            span = Span(max(earliest, said.earliest_us), min(latest, said.latest_us))
        return span


def _failed(snapshot: SnapshotInfo, subject: str, key: str) -> bool:
    from drift.facts import CollectionError

    return any(
        CollectionError(e["subject"], e.get("key"), e["message"]).covers(subject, key)
        for e in snapshot.errors
    )


def _said_when(version: StoredVersion | None) -> Span | None:
    """The interval a version's own provenance gives for when it took effect, if any."""
    if version is None:
        return None
    for key, resolution in _SAID_WHEN.items():
        moment = parse_time_us(version.provenance.get(key))
        if moment is not None:
            return Span(moment, moment + resolution)
    return None


def parse_time_us(text: object) -> int | None:
    """An ISO 8601 time with a zone (``started_at``, ``moved_at``) as microseconds, else None."""
    moment = parse_stored_time(text) if isinstance(text, str) else None
    return None if moment is None else to_us(moment)
