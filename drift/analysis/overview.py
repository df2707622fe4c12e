"""What the report's drawn timeline needs beyond the rest of the investigation.

The health checks and the services' runs as stretches of time (passing,
failing, no check; running, stopped, crash-looping), every start each
service made, and the marks around the window. Computed from what
`investigate` already read (the baseline state, the versions begun in the
window, the services' runs, their failures, the marks): no query of its own.
Pure: values in, an `Overview` out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from drift.analysis.failures import Failure
from drift.analysis.investigation import MarkPoint, Overview, ServiceLane, Stretch
from drift.analysis.restarts import window_starts
from drift.analysis.unit_history import ServiceRuns
from drift.store.query import MarkInfo, StoredVersion
from drift.timespec import iso, local_time

# How much of the time before the baseline (its stable window) and after the current
# record the picture shows, as a share of the window, and at least this long.
LEAD_SHARE = 0.12
MIN_LEAD_US = 5_000_000  # a window of seconds (a replayed incident) still spreads out


def overview(
    health: Iterable[StoredVersion],
    runs: Mapping[str, ServiceRuns],
    failures: Mapping[str, Failure],
    marks: Sequence[MarkInfo],
    baseline: tuple[int, int],
    current_us: int,
) -> Overview:
    """The drawn timeline's data: from a little before the baseline to a little after
    `current_us`, or after the latest mark where that came later.

    `health` are the versions of the health checks (open at the baseline, or
    begun inside the window); `baseline` is the baseline's (snapshot id, time).
    """
    baseline_id, baseline_us = baseline
    # A mark made after the current record (`mark unstable` at now) is drawn: the
    # picture reaches it.
    current_us = max([current_us, *(m.at_us for m in marks if m.at_us > baseline_us)])
    lead = max(int((current_us - baseline_us) * LEAD_SHARE), MIN_LEAD_US)
    start, end = baseline_us - lead, current_us + lead // 2
    # What the current record saw is drawn on to the end: a check failing only at the
    # current record is a stretch the reader can see, not a line of no width.
    return Overview(
        start=iso(start),
        end=iso(end),
        health=health_stretches(health, start, end),
        services=[
            service_lane(runs[name], failures.get(name), baseline_id, start, end)
            for name in sorted(runs)
        ],
        marks=[
            MarkPoint(at=iso(m.at_us), local=local_time(m.at_us), kind=m.kind, note=m.note)
            for m in sorted(marks, key=lambda m: (m.at_us, m.id))
            if start <= m.at_us <= current_us
        ],
    )


def health_stretches(checks: Iterable[StoredVersion], start: int, end: int) -> list[Stretch]:
    """The health of [start, end]: passing where every check passed, failing where one failed,
    unknown where none ran; each stretch as long as nothing changes.

    One sweep over the versions in time order: a check flapping every minute for
    months is many versions, and each moment asks only those open then.
    """
    # In order of their start alone: two checks recorded together begin at the same time,
    # and one may have ended (None is open) where the other goes on.
    spans = sorted(
        (
            (
                v.first_taken_us,
                v.until_taken_us,
                v.subject.removeprefix("health:"),
                v.value == "true",
            )
            for v in checks
            if v.subject.startswith("health:") and v.key == "ok"
        ),
        key=lambda span: (span[0], span[2]),
    )
    cuts = sorted(
        {start, end}
        | {t for a, b, _n, _ok in spans for t in (a, b) if t is not None and start < t < end}
    )
    out: list[Stretch] = []
    open_: dict[int, tuple[str, bool]] = {}
    until: dict[int, int | None] = {}
    taken = 0
    for a, b in zip(cuts, cuts[1:], strict=False):
        while taken < len(spans) and spans[taken][0] <= a:
            first, last, name, ok = spans[taken]
            open_[taken], until[taken] = (name, ok), last
            taken += 1
        for i in [i for i, last in until.items() if last is not None and last <= a]:
            del open_[i], until[i]
        state, text = _health_words(list(open_.values()))
        _extend(out, a, b, state, text)
    return out


def _health_words(covering: list[tuple[str, bool]]) -> tuple[str, str]:
    """The band's state where these checks hold, and what it says."""
    if not covering:
        return "unknown", "no health check ran"
    failing = sorted({n for n, ok in covering if not ok})
    if failing:
        return "failing", "failing: " + ", ".join(failing)
    return "passing", "passing: " + ", ".join(sorted({n for n, _ok in covering}))


def service_lane(
    runs: ServiceRuns, failure: Failure | None, baseline_id: int, start: int, end: int
) -> ServiceLane:
    """One service over [start, end]: when it ran, was stopped or crash-looped, and its starts."""
    stretches: list[Stretch] = []
    for v in runs.of("running"):
        a, b = max(v.first_taken_us, start), min(v.until_taken_us or end, end)
        if a < b:
            running = v.value == "true"
            state = "running" if running else "stopped"
            _extend(stretches, a, b, state, state if running else "not running")
    if failure is not None:
        since = max(failure.since_us, start)
        until = end if failure.ongoing else max(failure.last_us, since)
        state = "crash-loop" if failure.loop else "failed"
        stretches.append(
            _stretch(since, max(until, since), state, f"{runs.service} {failure.summary()}")
        )
    starts = [t for t in window_starts(runs, baseline_id) if start <= t <= end]
    return ServiceLane(
        service=runs.service,
        starts=[iso(t) for t in starts],
        starts_local=[local_time(t) for t in starts],
        stretches=stretches,
    )


def _stretch(a: int, b: int, state: str, text: str) -> Stretch:
    return Stretch(
        start=iso(a),
        end=iso(b),
        start_local=local_time(a),
        end_local=local_time(b),
        state=state,
        text=text,
    )


def _extend(out: list[Stretch], a: int, b: int, state: str, text: str) -> None:
    """Add [a, b) to `out`, merged with the stretch before when it says the same."""
    if out and out[-1].state == state and out[-1].text == text and out[-1].end == iso(a):
        last = out.pop()
        out.append(
            Stretch(
                start=last.start,
                end=iso(b),
                start_local=last.start_local,
                end_local=local_time(b),
                state=state,
                text=text,
            )
        )
        return
    out.append(_stretch(a, b, state, text))
