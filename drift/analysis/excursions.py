"""Values that left the baseline's and came back inside a window: round trips.

A fact with the same value at both ends of a window may still have changed in
between: `export BAD=1` added, live in decode while its health check failed,
then removed. Each such trip (when it went, what it held, when it came back)
is read here from the fact's versions; `drift.analysis.investigate` makes a
suspect of it. A service that stopped and came back took its facts with it:
those went and came back unchanged with the process, and are one event, the
stop (`ServiceStop`), not a flap each.

Everything here is pure: versions in, trips out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from drift.analysis.timing import parse_time_us
from drift.store.query import StoredVersion

# A fact that took more values than this inside the window flaps: its trips are not read
# one by one (a command flipping every minute for a month), it is counted.
MAX_VALUES = 12

Ident = tuple[str, str]
Identity = tuple[str | None, str | None, bool] | None


@dataclass(frozen=True)
class Trip:
    """One departure of a fact from its baseline value and its return.

    `away` is the first value it took (None: the fact was gone); the ids and
    times are those of the records that first saw it away and back.
    """

    subject: str
    key: str
    away: StoredVersion | None
    away_id: int
    away_us: int
    back_id: int
    back_us: int

    @property
    def ident(self) -> Ident:
        return (self.subject, self.key)


@dataclass(frozen=True)
class ServiceStop:
    """A service seen stopped inside the window and running again, its facts as before."""

    service: str
    stopped_us: int
    back_us: int
    pid_before: str | None
    pid_after: str | None
    facts: int  # the facts that went with the process and came back unchanged
    changed: bool  # some other fact of it came back with another value


@dataclass(frozen=True)
class RoundTrips:
    """The window's round trips: per fact its trips and how many changes they were, the
    service stops that took facts with them, and the facts those stops explain."""

    trips: Mapping[Ident, tuple[Trip, ...]]
    changes: Mapping[Ident, int]
    stops: tuple[ServiceStop, ...]
    with_stops: frozenset[Ident]


def trips_of(
    subject: str,
    key: str,
    baseline: StoredVersion | None,
    versions: Sequence[StoredVersion],
    start: tuple[int, int],
) -> tuple[list[Trip], int]:
    """A fact's trips away from its `baseline` value, and how many changes they made.

    `versions` are those open at the baseline record or begun after it (oldest
    first), `start` that record's (id, taken_us). A gap between two versions is
    a time the fact was gone; a version with the same value (a moved line) is
    no change.
    """
    segments: list[tuple[Identity, StoredVersion | None, int, int]] = []

    def push(version: StoredVersion | None, at_id: int, at_us: int) -> None:
        identity = version.identity if version is not None else None
        if not segments or segments[-1][0] != identity:
            segments.append((identity, version, at_id, at_us))

    ordered = sorted(versions, key=lambda v: v.first_snapshot_id)
    if not ordered or ordered[0].first_snapshot_id > start[0]:
        push(None, *start)
    previous: StoredVersion | None = None
    for v in ordered:
        ended = previous.until_snapshot_id if previous is not None else None
        if previous is not None and ended is not None and ended < v.first_snapshot_id:
            push(None, ended, previous.until_taken_us or v.first_taken_us)
        push(v, max(v.first_snapshot_id, start[0]), max(v.first_taken_us, start[1]))
        previous = v
    if previous is not None and previous.until_snapshot_id is not None:
        push(None, previous.until_snapshot_id, previous.until_taken_us or start[1])
    base = baseline.identity if baseline is not None else None
    trips: list[Trip] = []
    away: tuple[StoredVersion | None, int, int] | None = None
    for identity, version, at_id, at_us in segments:
        if identity != base and away is None:
            away = (version, at_id, at_us)
        elif identity == base and away is not None:
            trips.append(Trip(subject, key, away[0], away[1], away[2], at_id, at_us))
            away = None
    return trips, len(segments) - 1


def round_trips(
    before: Mapping[Ident, StoredVersion],
    versions: Mapping[Ident, Sequence[StoredVersion]],
    start: tuple[int, int],
) -> RoundTrips:
    """The trips of the facts whose `versions` are given, and the service stops among them.

    A service whose `running` went false (or whose facts went) and came back is
    one stop; its facts that were gone only while it was stopped and came back
    with their baseline values went with it.
    """
    trips: dict[Ident, tuple[Trip, ...]] = {}
    changes: dict[Ident, int] = {}
    for ident, found in versions.items():
        got, count = trips_of(*ident, before.get(ident), found, start)
        if got:
            trips[ident] = tuple(got)
            changes[ident] = count
    stops: list[ServiceStop] = []
    with_stops: set[Ident] = set()
    for (subject, key), went in sorted(trips.items()):
        if key != "running" or not subject.startswith("service:"):
            continue
        down = [t for t in went if t.away is None or t.away.value == "false"]
        if not down:
            continue
        gone = [
            ident
            for ident, its in trips.items()
            if ident[0] == subject
            and all(
                t.away is None
                and any(d.away_id <= t.away_id and t.back_id <= d.back_id for d in down)
                for t in its
            )
        ]
        with_stops.update(gone)
        with_stops.add((subject, key))
        pids = _following(before.get((subject, "pid")), versions.get((subject, "pid"), ()))
        starts = _following(
            before.get((subject, "started_at")), versions.get((subject, "started_at"), ())
        )
        changed = any(i[0] == subject and i not in with_stops for i in trips)
        for d in down:
            ended = _ended_at(pids, d.away_id, d.back_id)
            started = parse_time_us(_ended_at(starts, d.away_id, d.back_id)[1])
            stops.append(
                ServiceStop(
                    service=subject.removeprefix("service:"),
                    stopped_us=d.away_us,
                    back_us=started if started is not None else d.back_us,
                    pid_before=ended[0],
                    pid_after=ended[1],
                    facts=len(gone),
                    changed=changed,
                )
            )
    return RoundTrips(trips, changes, tuple(stops), frozenset(with_stops))


def _ended_at(
    ended: Mapping[int, tuple[str | None, str | None]], after_id: int, upto_id: int
) -> tuple[str | None, str | None]:
    """The value that ended in [after_id, upto_id] and the one that followed it."""
    found = [ended[i] for i in sorted(ended) if after_id <= i <= upto_id]
    return found[0] if found else (None, None)


def _following(
    baseline: StoredVersion | None, versions: Sequence[StoredVersion]
) -> dict[int, tuple[str | None, str | None]]:
    """For each record a value ended at: the value that ended there and the next one."""
    by_start = {v.first_snapshot_id: v for v in [*([baseline] if baseline else []), *versions]}
    ordered = [by_start[i] for i in sorted(by_start)]
    out: dict[int, tuple[str | None, str | None]] = {}
    for i, v in enumerate(ordered):
        if v.until_snapshot_id is not None:
            following = ordered[i + 1].value if i + 1 < len(ordered) else None
            out[v.until_snapshot_id] = (v.value, following)
    return out
