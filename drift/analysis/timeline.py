"""The timeline of an investigation: restarts, failures, changes, health, flapping and marks.

Restarts are told per service: one line for a service restarted several
times ("router restarted 10 times (12:01:00-12:10:00)"), one for a single
restart, and one for each moment services restarted together (a co-restart,
`drift.analysis.restarts.CO_RESTART_US`), so one service's restarts are never
folded into another's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from drift.analysis.excursions import RoundTrips, ServiceStop
from drift.analysis.failures import Failure
from drift.analysis.investigation import TimelineEntry, TimelineKind
from drift.analysis.kinds import service_name
from drift.analysis.rank import RankedStory
from drift.analysis.restarts import CO_RESTART_US, Restart, RestartEvent
from drift.analysis.scope import ConfigSwitch
from drift.analysis.timing import Span
from drift.store.query import MarkInfo, SnapshotInfo, StoredVersion
from drift.timespec import clock, clock_span, iso, local_time


def timeline_entries(
    marks: list[MarkInfo],
    baseline: SnapshotInfo,
    current: SnapshotInfo,
    ranked: list[RankedStory],
    events: list[RestartEvent],
    inside: list[StoredVersion],
    flapped: dict[tuple[str, str], int],
    switches: list[ConfigSwitch] | None = None,
    failures: Mapping[str, Failure] | None = None,
    trips: RoundTrips | None = None,
    *,
    up_to_now: bool = False,
) -> list[TimelineEntry]:
    """Restarts, failures, changes, config switches, health, flapping and marks, in time order.

    `trips` are the round trips of the facts that `flapped`: a change undone
    inside the window is its suspect's, placed when it came and when it went;
    a service that stopped and came back is one line, its facts with it.
    With `up_to_now` (the window runs to the latest record), a mark made since that record
    is in too: "it broke again" or a note typed a minute ago belongs in the story now, not
    only once the next record is taken.
    """
    entries: list[tuple[int, TimelineKind, str]] = [
        (s.taken_us, "config", s.text) for s in switches or ()
    ]
    trips = trips or RoundTrips({}, {}, (), frozenset())
    # A service seen stopped and back is told by its stop line, with both pids.
    stopped = frozenset(stop.service for stop in trips.stops)
    entries += restart_entries(events, after_edits(ranked), stopped, edit_times(ranked))
    for failure in (failures or {}).values():
        entries.append((failure.since_us, "failure", f"{failure.service} {failure.summary()}"))
    for r in ranked:
        entries.append(change_entry(r))
    for v in inside:
        if v.subject.startswith("health:") and v.key == "ok":
            state = "passing" if v.value == "true" else "failing"
            entries.append((v.first_taken_us, "health", f"health check {v.subject[7:]} {state}"))
    told: set[tuple[str, str]] = set()
    for r in ranked:
        if r.story.round_trip is not None:
            told.update((c.subject, c.key) for c in r.story.changes)
            root = r.story.root
            entries.append(
                (
                    r.story.round_trip.back_us,
                    "change",
                    f"#{r.rank} undone: {root.subject} {root.key} back to its baseline value",
                )
            )
    for stop in trips.stops:
        entries.append((stop.stopped_us, "restart", stop_text(stop)))
    # A failing service's process went and came back: its facts flap together, one line.
    gone_and_back: dict[str, int] = {}
    for (subject, key), count in sorted(flapped.items()):
        if subject.startswith("health:") or (subject, key) in told | trips.with_stops:
            continue
        name = service_name(subject)
        if name is not None and name in (failures or {}):
            gone_and_back[name] = gone_and_back.get(name, 0) + 1
            continue
        entries.append(flap_entry(subject, key, count, trips, current.taken_us))
    for name, facts in sorted(gone_and_back.items()):
        entries.append(
            (
                current.taken_us,
                "flapping",
                f"{facts:,} {'fact' if facts == 1 else 'facts'} of {name} changed and "
                f"{'is' if facts == 1 else 'are'} back at the baseline: its process went and "
                "came back while it failed",
            )
        )
    for mark in marks:
        if baseline.taken_us < mark.at_us and (up_to_now or mark.at_us <= current.taken_us):
            note = f": {mark.note}" if mark.note else ""
            entries.append((mark.at_us, "mark", f"marked {mark.kind}{note}"))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [
        TimelineEntry(at=iso(at), local=local_time(at), kind=kind, text=text)
        for at, kind, text in entries
    ]


def stop_text(stop: ServiceStop) -> str:
    """``prefill stopped at 12:01:00, running again since 12:03:00 (pid 7 -> 9), its values
    as before``: a service's stop and return, the facts that went with it in one line."""
    pids = f" (pid {stop.pid_before or '-'} -> {stop.pid_after or '-'})"
    same = "its other values as before" if stop.changed else "its values as before"
    stopped, back = clock_span(stop.stopped_us, stop.back_us)
    return f"{stop.service} stopped at {stopped}, running again since {back}{pids}, {same}"


def flap_entry(
    subject: str, key: str, count: int, trips: RoundTrips, current_us: int
) -> tuple[int, TimelineKind, str]:
    """A fact that changed and is back at its baseline value, placed when it first went.

    `count` is how many values it took inside the window; its trips, when read,
    say when it went and came back.
    """
    its = trips.trips.get((subject, key))
    if not its:
        return current_us, "flapping", f"{subject} {key} changed {count:,} times and is back"
    changes = trips.changes[(subject, key)]
    first, last = its[0], its[-1]
    if changes <= 2:
        away, back = clock_span(first.away_us, first.back_us)
        text = f"{subject} {key} changed at {away} and was back to its baseline value at {back}"
    else:
        away, back = clock_span(first.away_us, last.back_us)
        text = (
            f"{subject} {key} changed {changes:,} times and is back to its baseline value "
            f"({away} to {back})"
        )
    return first.away_us, "flapping", text


def change_entry(ranked: RankedStory) -> tuple[int, TimelineKind, str]:
    """A suspect on the timeline: when the record saw it, or when its file says it was written;
    when a process held an earlier new value of it (`Story.began_us`), at that value's time.

    A file time the records agree with (`drift.analysis.timing.Records.file_time`)
    places the edit before a restart that followed it, with the record that saw it beside.
    """
    story = ranked.story
    seen = story.root.changed_us
    edited = story.changed.edited_us if story.changed is not None else None
    if edited is None or story.began_us < edited:
        # A knob live with an earlier value first sits at that value's time.
        return story.began_us, "change", f"#{ranked.rank} {story.title}"
    new_file = story.root.before is None and story.root.key in ("content", "sha256")
    verb = "written" if new_file else "edited"
    when = f"{verb} at about {clock(edited)} (file time), seen at {clock(seen)}"
    return edited, "change", f"#{ranked.rank} {when}: {story.title}"


def after_edits(ranked: list[RankedStory]) -> dict[str, list[int]]:
    """Service -> the suspects (by rank) its latest start came after, by their file times.

    Only file times are precise enough to order a start and an edit of the same minute;
    the records alone say "order unknown" (`drift.analysis.applied`).
    """
    found: dict[str, list[int]] = {}
    for r in ranked:
        edit = r.story.changed
        if edit is None or edit.edited_us is None:
            continue
        for restart in r.story.restarts:
            start = restart.started or Span.start(restart.at_us)
            if start.order(edit) == "after":
                found.setdefault(restart.service, []).append(r.rank)
    return found


def restart_entries(
    events: list[RestartEvent],
    after_edits: Mapping[str, list[int]] | None = None,
    stopped: frozenset[str] = frozenset(),
    edited_at: Mapping[int, int] | None = None,
) -> list[tuple[int, TimelineKind, str]]:
    """The timeline's restarts: one line per service restarted several times, one per
    single restart (but of a service `stopped` and back, told by its stop), and one per
    moment services restarted together; a single start that came after an edit by its
    file time (`after_edits`) says so, and is placed after that edit (`edited_at`: each
    suspect's file time, by rank), even where a start read to the clock tick reads earlier."""
    edits = after_edits or {}

    def placed(at_us: int, restarts: Sequence[Restart]) -> int:
        times = [
            (edited_at or {}).get(rank, at_us)
            for r in restarts
            if r.count == 1
            for rank in edits.get(r.service, [])
        ]
        return max([at_us, *(t + 1 for t in times)])

    entries: list[tuple[int, TimelineKind, str]] = []
    restarts = {id(r): r for e in events for r in e.restarts}.values()
    for r in restarts:
        if r.count > 1:
            # Records catch only the restarts they see; systemd counts every one of its own.
            many = f"{r.count} times" if r.counted_by == "systemd" else f"at least {r.count} times"
            span = "-".join(clock_span(r.times[0], r.times[-1]))
            if len(r.times) == 1:
                span = f"until {clock(r.times[0])}"
            entries.append((r.times[0], "restart", f"{r.service} restarted {many} ({span})"))
    for event in events:
        if len(event.restarts) > 1:
            # Pids only for a service restarted once: a repeated one's ends are not this event's.
            names = ", ".join(
                f"{r.service} ({_pids(r)})" if r.count == 1 else r.service for r in event.restarts
            )
            within = f"started within {CO_RESTART_US // 1_000_000} s"
            ordered = "".join(
                f"; {r.service}{_after(edits, r)}" for r in event.restarts if _after(edits, r)
            )
            entries.append(
                (
                    placed(event.at_us, event.restarts),
                    "restart",
                    f"co-restart of {names}, {within}{ordered}",
                )
            )
        elif event.restarts[0].count == 1 and event.restarts[0].service not in stopped:
            r = event.restarts[0]
            text = f"restart of {r.service} ({_pids(r)})"
            if _after(edits, r):
                text += f",{_after(edits, r)}"
            entries.append((placed(event.at_us, [r]), "restart", text))
    return entries


def edit_times(ranked: list[RankedStory]) -> dict[int, int]:
    """Each suspect's file time (by rank), where the records agree with one."""
    return {
        r.rank: r.story.changed.edited_us
        for r in ranked
        if r.story.changed is not None and r.story.changed.edited_us is not None
    }


def _after(edits: Mapping[str, list[int]], r: Restart) -> str:
    """`` started after the edit #1 (file time)`` for a start the file times order, else ""."""
    ranks = edits.get(r.service)
    if not ranks or r.count != 1:
        return ""
    listed = ", ".join(f"#{rank}" for rank in ranks)
    return f" started after the edit {listed} (file time)"


def _pids(r: Restart) -> str:
    """``pids 54 -> 61``: the process before and after, ``-`` where there was none."""
    return f"pids {r.before_pid or '-'} -> {r.after_pid or '-'}"
