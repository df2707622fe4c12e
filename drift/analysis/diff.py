"""Compare two states of the history: the changes, the facts verified unchanged, the blind spots."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from drift.store.query import SnapshotInfo, StoredVersion
from drift.store.window import median

State = dict[tuple[str, str], StoredVersion]
ChangeKind = Literal["added", "removed", "modified"]


@dataclass(frozen=True)
class Change:
    """One fact whose value differs between the baseline and the current state."""

    subject: str
    key: str
    kind: ChangeKind
    before: StoredVersion | None
    after: StoredVersion | None

    @property
    def changed_us(self) -> int:
        """When the change was first recorded."""
        if self.after is not None:
            return self.after.first_taken_us
        assert self.before is not None and self.before.until_taken_us is not None
        return self.before.until_taken_us


def changes_between(before: State, after: State) -> list[Change]:
    """Every fact added, removed or modified from `before` to `after`, in subject/key order."""
    changes = []
    for ident in sorted(before.keys() | after.keys()):
        old, new = before.get(ident), after.get(ident)
        if old is None:
            changes.append(Change(*ident, "added", None, new))
        elif new is None:
            changes.append(Change(*ident, "removed", old, None))
        elif old.identity != new.identity:
            changes.append(Change(*ident, "modified", old, new))
    return changes


def unchanged_between(
    before: State, after: State, failing: set[tuple[str, str]]
) -> list[StoredVersion]:
    """Facts with the same value in both states, minus those whose collection failed at the end.

    A value kept only because it could not be read is not verified unchanged.
    """
    return [
        after[i]
        for i in sorted(before.keys() & after.keys())
        if i not in failing and before[i].identity == after[i].identity
    ]


@dataclass(frozen=True)
class BlindSpot:
    """A hole in the evidence: a collection error, or a gap in recording."""

    kind: Literal["error", "gap"]
    subject: str
    key: str | None
    message: str
    first_us: int
    last_us: int
    count: int
    current: bool  # still true at the current snapshot


# A process id in an error message: "pid 812", "/proc/812/".
_PIDS = re.compile(r"(\bpid |/proc/)\d+")


def blind_spots(
    baseline: SnapshotInfo,
    window: list[SnapshotInfo],
    gaps: tuple[float, list[tuple[SnapshotInfo, SnapshotInfo]]] | None = None,
) -> list[BlindSpot]:
    """Collection errors in (baseline, current], merged by what failed, and recording gaps.

    `window` is the snapshots after the baseline up to and including the current one.
    A gap is a pause between snapshots over 3x the usual (median) interval.
    `gaps`, the usual interval and the gaps, is given when `window` holds only
    the records where something happened (drift.store.window.WindowRecords).
    """
    # One blind spot per fact and problem: a message that names a pid changes with each
    # restart, yet it is the same hole (told by its latest message); two problems of one
    # subject (a secret key both replaced and readable by others) stay two.
    Ident = tuple[str, str | None, str]
    spots: dict[Ident, list[int]] = {}
    latest: dict[Ident, tuple[int, str]] = {}
    current_id = window[-1].id if window else baseline.id
    current_errors: set[Ident] = set()
    for snap in window:
        for err in snap.errors:
            ident = (err["subject"], err.get("key"), _PIDS.sub(r"\1N", err["message"]))
            spots.setdefault(ident, []).append(snap.taken_us)
            if snap.taken_us >= latest.get(ident, (-1, ""))[0]:
                latest[ident] = (snap.taken_us, err["message"])
            if snap.id == current_id:
                current_errors.add(ident)
    out = [
        BlindSpot(
            "error",
            ident[0],
            ident[1],
            latest[ident][1],
            min(times),
            max(times),
            len(times),
            ident in current_errors,
        )
        for ident, times in spots.items()
    ]
    usual, pairs = gaps if gaps is not None else record_gaps([baseline, *window])
    for a, b in pairs:
        out.append(
            BlindSpot(
                "gap",
                "recording",
                None,
                f"no record for {duration_text(b.taken_us - a.taken_us)} "
                f"(usual interval {duration_text(int(usual))})",
                a.taken_us,
                b.taken_us,
                1,
                False,
            )
        )
    out.sort(key=lambda s: (not s.current, s.kind, s.first_us, s.subject))
    return out


def record_gaps(
    series: list[SnapshotInfo],
) -> tuple[float, list[tuple[SnapshotInfo, SnapshotInfo]]]:
    """The median interval between consecutive records, and the pairs over 3x that apart."""
    intervals = [b.taken_us - a.taken_us for a, b in zip(series, series[1:], strict=False)]
    if len(intervals) < 2:
        return 0, []
    usual = median(intervals)
    pairs = zip(series, series[1:], strict=False)
    return usual, [(a, b) for a, b in pairs if usual > 0 and b.taken_us - a.taken_us > 3 * usual]


def failing_at(snapshot: SnapshotInfo, state: State) -> set[tuple[str, str]]:
    """The facts of `state` covered by a collection error of `snapshot`."""
    from drift.facts import CollectionError

    errors = [CollectionError(e["subject"], e.get("key"), e["message"]) for e in snapshot.errors]
    if not errors:
        return set()
    return {ident for ident in state if any(e.covers(*ident) for e in errors)}


def duration_text(us: int) -> str:
    """A span of microseconds as people say it: 45s, 12m, 3h05m."""
    seconds = us // 1_000_000
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes}m"
    return f"{minutes // 60}h{minutes % 60:02d}m"
