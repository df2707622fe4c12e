"""What a window's two ends do not tell: a knob's earlier value, a change undone.

`drift since` compares the baseline with the current record. A variable set to
512 before the failure and to 256 after it began to change before the failure
(`with_departures`); `export BAD=1` added, live while health failed, then
removed, has the same value at both ends and is still the answer
(`round_trip_stories`). Both are read from the window's versions here, for
`drift.analysis.investigate`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from drift.analysis.diff import State, changes_between
from drift.analysis.excursions import MAX_VALUES, RoundTrips, Trip, round_trips
from drift.analysis.failures import Failure
from drift.analysis.group import group_changes
from drift.analysis.kinds import UNIT_RUNTIME_KEYS
from drift.analysis.story import RoundTrip, Story
from drift.analysis.unit_history import RUN_KEYS, service_runs
from drift.store.query import History, SnapshotInfo, StoredVersion
from drift.store.window import versions_between
from drift.timespec import clock


def with_departures(stories: list[Story], versions: Sequence[StoredVersion]) -> list[Story]:
    """Each story with when a running process first held a new value of one of its live facts.

    A variable set to 512 before the first failure and to 256 after it began
    to change before the failure: the story of 256 must not read as begun
    after it.
    """
    first: dict[tuple[str, str], int] = {}
    for v in versions:
        if v.subject.startswith("service:") and v.key.startswith(_LIVE_VALUE_KEYS):
            ident = (v.subject, v.key)
            first[ident] = min(first.get(ident, v.first_taken_us), v.first_taken_us)
    out = []
    for story in stories:
        times = [first[(c.subject, c.key)] for c in story.changes if (c.subject, c.key) in first]
        out.append(replace(story, departed_us=min(times)) if times else story)
    return out


_LIVE_VALUE_KEYS = ("env:", "flag:")


def flapping(
    before: State, after: State, started: Mapping[tuple[str, str], int]
) -> dict[tuple[str, str], int]:
    """Facts that changed inside the window and are back where they started: how many times.

    `started`: how many values each fact took inside the window (WindowVersions.counts).
    """
    out = {}
    for ident, count in started.items():
        # systemd's words on the runs come and go with every restart: context, not flapping.
        if ident[1] in UNIT_RUNTIME_KEYS:
            continue
        old, new = before.get(ident), after.get(ident)
        same = (old is None and new is None) or (
            old is not None and new is not None and old.identity == new.identity
        )
        if same:
            out[ident] = count
    return out


def window_round_trips(
    history: History,
    before: State,
    flapped: Mapping[tuple[str, str], int],
    first: SnapshotInfo,
    last: SnapshotInfo,
) -> RoundTrips:
    """The trips of the facts that changed and came back inside the window; those that took
    more than MAX_VALUES values flap, and are only counted."""
    idents = [
        ident
        for ident, count in flapped.items()
        if count <= MAX_VALUES and not ident[0].startswith("health:")
    ]
    # A stopped service's pids and starts say which process went and which came back.
    idents += [
        (subject, key)
        for subject, running in flapped
        if running == "running" and subject.startswith("service:")
        for key in ("pid", "started_at")
    ]
    versions = versions_between(history, idents, first.id, last.id)
    return _on_the_box(
        history, before, round_trips(before, versions, (first.id, first.taken_us)), first, last
    )


def _on_the_box(
    history: History, before: State, trips: RoundTrips, first: SnapshotInfo, last: SnapshotInfo
) -> RoundTrips:
    """The trips that happened on the box: not a fact the config stopped asking for and asked
    for again (an `exclude` added, then taken out), nor one it asked for only a while."""
    if not trips.trips:
        return trips
    series = [first, *history.snapshots_between(first.id, last.id)]
    previous = {b.id: a.id for a, b in zip(series, series[1:], strict=False)}
    configs = history.configs()
    config_at = {s.id: configs.get(s.config_id) for s in series if s.config_id is not None}
    if len({id(c) for c in config_at.values()}) < 2:
        return trips  # one config over the window: every trip is the box's

    def covered(snapshot: int | None, trip: Trip, version: StoredVersion | None) -> bool:
        config = config_at.get(snapshot) if snapshot is not None else None
        provenance = version.provenance if version is not None else {}
        return config is None or config.scope.covers(trip.subject, provenance, trip.key)

    kept = {}
    for ident, its in trips.trips.items():
        baseline = before.get(ident)
        real = tuple(
            t
            for t in its
            if (
                covered(previous.get(t.away_id), t, t.away) and covered(t.back_id, t, t.away)
                if t.away is not None
                else covered(t.away_id, t, baseline)
            )
        )
        if real:
            kept[ident] = real
    dropped = set(trips.trips) - set(kept)
    changes = {i: n for i, n in trips.changes.items() if i not in dropped}
    return replace(trips, trips=kept, changes=changes)


def trip_moments(trips: RoundTrips) -> set[int]:
    """The records where a fact left its baseline value or came back to it."""
    return {i for its in trips.trips.values() for t in its for i in (t.away_id, t.back_id)}


# The keys that tell a service's process: a round trip's story names the start that took it.
_PROCESS_KEYS = RUN_KEYS | {"ppid"}
# How many moments inside the window round trips are read at (a state each).
MAX_TRIP_MOMENTS = 8


def round_trip_stories(
    history: History,
    before: State,
    trips: RoundTrips,
    records: list[SnapshotInfo],
    unhealthy_us: int | None,
    window: tuple[Sequence[StoredVersion], Mapping[str, Failure]],
) -> list[Story]:
    """A story for each change that came and went inside the window, as it was while present.

    Its fact has the same value at both ends, so the diff of the two ends
    does not show it; `export BAD=1` added, live in decode while the health
    check failed, then removed, is still the answer to "what broke it". Each
    is grouped at the record where it was away from its baseline value: the
    first failing record if it was away then, else the first record that saw
    it go; facts that went only
    with their stopped service are its stop, not stories.
    """
    failing = next((s.id for s in records if unhealthy_us and s.taken_us == unhealthy_us), None)
    moments: dict[int, dict[tuple[str, str], Trip]] = {}
    for ident, its in trips.trips.items():
        if ident in trips.with_stops or ident[1] in UNIT_RUNTIME_KEYS:
            continue
        if _applied_at_return(history, before, ident, its[-1]):
            continue
        trip = next(
            (t for t in its if failing is not None and t.away_id <= failing < t.back_id), None
        )
        moment = failing if trip is not None and failing is not None else its[0].away_id
        moments.setdefault(moment, {})[ident] = trip or its[0]
    out = []
    for moment, away in sorted(moments.items())[:MAX_TRIP_MOMENTS]:
        state = history.state_at(moment)
        changes = [
            c
            for c in changes_between(before, state)
            if (c.subject, c.key) in away
            or (c.subject.startswith("service:") and c.key in _PROCESS_KEYS)
        ]
        # The service's runs up to that record: a later restart is not one it went through.
        runs = service_runs(before, [v for v in window[0] if v.first_snapshot_id <= moment])
        stories, _events = group_changes(
            changes,
            state,
            [s for s in records if s.id <= moment],
            runs=runs,
            failures=window[1],
            text=history.text,
        )
        for story in stories:
            trip = away.get((story.root.subject, story.root.key))
            if trip is not None:
                out.append(undone(story, trip, len(trips.trips[trip.ident])))
    return out


def _applied_at_return(history: History, before: State, ident: tuple[str, str], trip: Trip) -> bool:
    """Whether a fact that says a change waits went away because the change was applied.

    `lib_disk:PATH` exists only while PATH on disk is not what the process
    maps, `unit:need_daemon_reload` only while unit files are newer than what
    systemd loaded: their return is the change taken up (the mapped `lib:PATH`,
    the unit's loaded settings, now other than at the baseline), a story the
    ends of the window already tell; not a change undone. When what they
    waited for is as it was, the change was undone: a round trip after all.
    """
    subject, key = ident
    if key.startswith("lib_disk:"):
        waited = [("lib:" + key.removeprefix("lib_disk:"))]
    elif key == "unit:need_daemon_reload":
        waited = None  # any of the unit's loaded settings
    else:
        return False
    state = history.state_at(trip.back_id)
    for (s, k), version in state.items():
        if s != subject or k == key or k in UNIT_RUNTIME_KEYS:
            continue
        if waited is None and not k.startswith("unit:") or waited is not None and k not in waited:
            continue
        was = before.get((s, k))
        if (was.value if was else None) != version.value:
            return True
    return False


def undone(story: Story, trip: Trip, times: int) -> Story:
    """A story whose change was undone at `trip`'s return: said in its title and label."""
    root = story.root
    verb = "removed" if root.before is None else "restored" if root.after is None else "reverted"
    back = clock(trip.back_us)
    return replace(
        story,
        title=f"{story.title}, then {verb} at {back}",
        label=f"{story.label}; until {back} ({verb})",
        round_trip=RoundTrip(trip.back_us, times),
    )
