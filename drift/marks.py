"""When a mark is for: `drift mark --at WHEN` names a time, or a snapshot by its number."""

from __future__ import annotations

from drift.store.query import History
from drift.store.writer import now_us
from drift.timespec import (
    When,
    describe_when,
    from_us,
    local_time,
    quote_when,
    refuse_future,
    to_us,
)

# A mark at now this long after the latest record: recording may have stopped.
STALE_US = 10 * 60 * 1_000_000


def mark_time(history: History, when: When | None) -> int:
    """The moment (microseconds) a mark given `--at WHEN` is for: that time, the moment
    snapshot #N of `history` was taken, or now without a WHEN. A future time is refused."""
    if when is None:
        return now_us()
    refuse_future(when, "--at")
    if when.at is not None:
        return to_us(when.at)
    return history.snapshot_for(when, "--at").taken_us


def mark_warnings(history: History, moment: int, given: bool = True) -> list[str]:
    """What is odd about a mark at `moment`: one before the first record marks a time no
    record shows, so it says nothing about any recorded state; one after the latest record
    (given with --at, or a now long past it: recording stopped?) marks a state no record
    has seen yet, which the next record is taken as."""
    first = history.first()
    if moment < first.taken_us:
        return [
            f"the mark is at {local_time(moment)}, before the first record of host "
            f"{history.host} (#{first.id} at {local_time(first.taken_us)}): no record shows "
            "the state then"
        ]
    latest = history.latest()
    # A time given within the minute ahead is read as now (refuse_future): so is it here.
    as_now = not given or moment >= now_us()
    if moment <= latest.taken_us or (as_now and moment - latest.taken_us < STALE_US):
        return []
    return [
        f"the mark is at {local_time(moment)}, after the latest record of host "
        f"{history.host} (#{latest.id} at {local_time(latest.taken_us)}): it speaks of a "
        "state no record has seen yet (run `drift record` now if it is so)"
    ]


def mark_said(when: When | None, moment: int) -> str:
    """The mark's time as `drift mark` says it: with how a WHEN that could mean two days was
    read (`23:59 (read as yesterday 23:59, 2026-12-06 23:59:00 UTC)`)."""
    if when is not None and when.reading:
        return quote_when(when)
    return describe_when(When(at=from_us(moment)))
