"""When a mark is for: `drift mark --at WHEN` names a time, or a snapshot by its number."""

from __future__ import annotations

from drift.store.query import History
from drift.store.writer import now_us
from drift.timespec import When, refuse_future, to_us


def mark_time(history: History, when: When | None) -> int:
    """The moment (microseconds) a mark given `--at WHEN` is for: that time, the moment
    snapshot #N of `history` was taken, or now without a WHEN. A future time is refused."""
    if when is None:
        return now_us()
    refuse_future(when, "--at")
    if when.at is not None:
        return to_us(when.at)
    return history.snapshot_for(when, "--at").taken_us
