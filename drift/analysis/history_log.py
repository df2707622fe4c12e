"""`drift log` and `drift mark --list`: the records and marks of a host, newest first.

What `git log` is to a repository: each record with how many facts it
changed, its collection errors and a gap in recording before it; each mark
with its kind, note and number, and whether `drift unmark` took it back.
"""

from __future__ import annotations

from dataclasses import dataclass

from drift.analysis.diff import duration_text, record_gaps
from drift.store.query import History, MarkInfo
from drift.timespec import When, iso, local_time, refuse_future, to_us


@dataclass(slots=True, kw_only=True)
class MarkEntry:
    """One mark: its number, kind, time and note; `undone` when `drift unmark` took it back."""

    mark: int
    kind: str
    time: str
    local: str
    note: str | None
    undone: str | None
    undone_local: str | None


@dataclass(slots=True, kw_only=True)
class LogEntry:
    """One line of the log: a record (`record` set) or a mark (`mark` set)."""

    time: str
    local: str
    record: int | None = None
    facts: int = 0
    changed: int = 0
    errors: int = 0
    gap: str | None = None  # no record for this long before it, against the usual interval
    mark: MarkEntry | None = None


@dataclass(frozen=True, kw_only=True)
class HistoryLog:
    """The records (and with --marks the marks) of a host since a time, newest first."""

    host: str
    since: str | None
    with_marks: bool
    entries: list[LogEntry]


@dataclass(frozen=True, kw_only=True)
class MarkList:
    """Every mark of a host, newest first, those undone included (and said so)."""

    host: str
    marks: list[MarkEntry]


def mark_entry(m: MarkInfo) -> MarkEntry:
    return MarkEntry(
        mark=m.id,
        kind=m.kind,
        time=iso(m.at_us),
        local=local_time(m.at_us),
        note=m.note,
        undone=iso(m.undone_us) if m.undone_us is not None else None,
        undone_local=local_time(m.undone_us) if m.undone_us is not None else None,
    )


def mark_list(history: History) -> MarkList:
    """Every mark of the host, newest first, those taken back included."""
    marks = sorted(history.marks(undone=True), key=lambda m: (m.at_us, m.id), reverse=True)
    return MarkList(host=history.host, marks=[mark_entry(m) for m in marks])


def history_log(history: History, since: When | None, with_marks: bool) -> HistoryLog:
    """The records taken since `since` (default: all), newest first, with the marks among
    them when `with_marks`."""
    refuse_future(since, "--since")
    start = 0
    if since is not None and since.at is not None:
        start = to_us(since.at)
    elif since is not None:
        start = history.snapshot_for(since, "--since").taken_us
    snapshots = history.snapshots_from(start)
    usual, pairs = record_gaps(list(reversed(snapshots)))
    gap_before = {
        b.id: f"no record for {duration_text(b.taken_us - a.taken_us)} before it "
        f"(usual interval {duration_text(int(usual))})"
        for a, b in pairs
    }
    timed = [
        (
            s.taken_us,
            False,
            LogEntry(
                time=iso(s.taken_us),
                local=local_time(s.taken_us),
                record=s.id,
                facts=s.n_facts,
                changed=s.n_changed,
                errors=s.n_errors,
                gap=gap_before.get(s.id),
            ),
        )
        for s in snapshots
    ]
    if with_marks:
        timed += [
            (
                m.at_us,
                True,
                LogEntry(time=iso(m.at_us), local=local_time(m.at_us), mark=mark_entry(m)),
            )
            for m in history.marks(undone=True)
            if m.at_us >= start
        ]
    # Newest first; at one moment a mark reads after the record it marks.
    timed.sort(key=lambda t: (t[0], t[1]), reverse=True)
    entries = [entry for _us, _is_mark, entry in timed]
    return HistoryLog(
        host=history.host,
        since=since.text if since is not None else None,
        with_marks=with_marks,
        entries=entries,
    )
