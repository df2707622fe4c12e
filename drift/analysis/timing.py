"""When things happened, as far as the evidence tells, and which came first.

A record sees a change, not the moment it happened. A fact first seen with
its new value by the record taken at T happened after the previous record
read it and before this one did: in (previous record's time, T + this
record's duration]. Records run about a minute apart, so a restart and an
edit in the same minute are in no known order. A source that says when it
changed (the reflog time of a git HEAD move) narrows that interval, when it
agrees with the records. A process start time is known to its clock tick
(10 ms), as ``started_at`` and its ``uncertainty_ms`` say.

A file says when it was written: the record that saw its new bytes kept
its mtime and ctime (`drift.facts.FILE_TIME_KEYS`). Where both lie inside
the records' interval (mtime no later than ctime), the edit is placed at
the mtime and happened no later than the ctime, which only the kernel sets:
the interval then ends there, and the words that use it say "(file time)".
An mtime outside the interval was set by hand (``touch -d``), by a copy
keeping times (``cp -p``, ``tar x``, ``rsync -t``) or by a clock gone
wrong: the file's times are then not believed at all.

"Started after" and "started before" are claimed only when the two
intervals do not overlap; otherwise the order is unknown, and the report
says "at about the same time".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from drift.analysis.diff import Change
from drift.facts import FILE_TIME_KEYS
from drift.store.query import SnapshotInfo, StoredVersion
from drift.timespec import parse_stored_time, to_us

Order = Literal["before", "after", "unknown"]
Ident = tuple[str, str]

# A process's start time is counted in clock ticks (1/100 s) since boot.
START_PRECISION_US = 10_000
# A start time recorded without its uncertainty (drift then added a boot
# time cut to the second) may be up to a second early.
OLD_START_EARLY_US = 1_000_000
# Without the records (a caller that has none), the one before a change is
# taken to have run the usual cron interval earlier.
RECORD_INTERVAL_US = 60 * 1_000_000
# A file's times come from the kernel's coarse clock, up to a clock tick behind.
FILE_TIME_PRECISION_US = 10_000
# Provenance keys that say when a value took effect, and how finely:
# ``moved_at`` is the reflog time of a git HEAD move, in whole seconds.
_SAID_WHEN = {"moved_at": 1_000_000}


@dataclass(frozen=True)
class Span:
    """A moment known only to lie between `earliest_us` and `latest_us` (inclusive)."""

    earliest_us: int
    latest_us: int
    # The file's own time of the edit (its mtime), where the records agree with it;
    # the interval then ends at the file's ctime.
    edited_us: int | None = None

    @property
    def by(self) -> str:
        """What the interval rests on, in words to put after an order: "" or " (file time)"."""
        return "" if self.edited_us is None else " (file time)"

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

    def __init__(
        self,
        snapshots: Iterable[SnapshotInfo] = (),
        state: Mapping[Ident, StoredVersion] | None = None,
    ) -> None:
        self.snapshots = sorted(snapshots, key=lambda s: s.id)
        self.position = {s.id: i for i, s in enumerate(self.snapshots)}
        # The current state, where a script's or a file's content version holds
        # the file times its other facts' changes share.
        self.state: Mapping[Ident, StoredVersion] = state or {}

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
        written = self.file_time(change, seen_id, span) if at is not None else None
        if written is not None:
            span = written
        said = _said_when(change.after)
        if said is not None and said.earliest_us <= span.latest_us and said.latest_us >= earliest:
            # The source's own time, where it agrees with the records.
            span = Span(
                max(earliest, said.earliest_us), min(span.latest_us, said.latest_us), span.edited_us
            )
        return span

    def file_time(self, change: Change, seen_id: int | None, records: Span) -> Span | None:
        """`records` narrowed by the file times the record that saw `change` read, if believed.

        Believed only when the mtime is inside the records' interval and no
        later than the ctime, itself inside it: the last write of the bytes
        that record read is no later than the ctime (kept as read after
        them), and the mtime is when it was, unless someone set it.
        """
        times = self._file_times(change, seen_id)
        if times is None:
            return None
        mtime, ctime = times
        if not records.earliest_us < mtime <= ctime <= records.latest_us:
            return None
        latest = min(records.latest_us, ctime + FILE_TIME_PRECISION_US)
        return Span(records.earliest_us, latest, edited_us=mtime)

    def _file_times(self, change: Change, seen_id: int | None) -> tuple[int, int] | None:
        """(mtime, ctime) of the file as the record `seen_id` read it, if it kept them."""
        if seen_id is None:
            return None
        # The version itself (a file's, an EnvironmentFile's variable), or the one
        # that holds its file's times in that record: a script's exports share the
        # script's content's, a variable gone from an EnvironmentFile that file's.
        candidates = [change.after, self.state.get((change.subject, "content"))]
        last = change.after or change.before
        named = last.provenance.get("file") if last is not None else None
        if isinstance(named, str):
            envfile = (change.subject, f"unit:envfile_sha256:{named}")
            candidates.append(self.state.get(envfile))
        for version in candidates:
            if version is None or version.first_snapshot_id != seen_id:
                continue
            mtime, ctime = (parse_time_us(version.provenance.get(k)) for k in FILE_TIME_KEYS)
            if mtime is not None and ctime is not None:
                return mtime, ctime
        return None


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
