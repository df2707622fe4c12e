"""The drawn timeline's geometry: the axis folds quiet stretches without reordering anything,
its ticks are readable and inside it, and every shape lands inside the plot."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st
from investigations import baseline, change, investigation, overview, snapshot, suspect

from drift.analysis.failures import Failure
from drift.analysis.investigation import MarkPoint, ServiceLane, Stretch
from drift.analysis.overview import health_stretches, service_lane
from drift.analysis.plain import plain
from drift.analysis.unit_history import ServiceRuns
from drift.render.axis import (
    BREAK_WIDTH,
    DAY_US,
    HOUR_US,
    MIN_TICK_SPACING,
    MINUTE_US,
    make_axis,
    tick_step,
    ticks,
)
from drift.render.glance import glance_lines
from drift.render.timeline import (
    MARKER_GAP,
    MARKER_R,
    MAX_MARKER_RANK,
    MAX_MARKER_ROWS,
    hatch,
    picture,
    stack_markers,
)
from drift.store.query import StoredVersion
from drift.timespec import iso

T0 = 1_796_000_000_000_000  # 2026-12-01
ZONES = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"])
SPANS = st.integers(min_value=10 * 1_000_000, max_value=60 * DAY_US)


@st.composite
def windows(draw: st.DrawFn) -> tuple[int, int, list[int]]:
    span = draw(SPANS)
    moments = draw(st.lists(st.integers(T0 - span, T0 + 2 * span), max_size=40))
    return T0, T0 + span, moments


@given(windows(), st.lists(st.integers(0, 10**6), min_size=2, max_size=30))
def test_folding_keeps_the_order_of_every_moment(
    window: tuple[int, int, list[int]], fractions: list[int]
) -> None:
    t0, t1, moments = window
    axis = make_axis(t0, t1, moments, 128.0, 1108.0)
    assert axis.x(t0) == 128.0 and axis.x(t1) == 1108.0
    times = sorted(t0 + (t1 - t0) * f // 10**6 for f in fractions)
    xs = [axis.x(t) for t in times]
    assert xs == sorted(xs)
    assert all(128.0 <= x <= 1108.0 for x in xs)
    # Two distinct moments are never drawn at one point of the window's inside.
    for a, b in zip(times, times[1:], strict=False):
        if a < b:
            assert axis.x(a) < axis.x(b)


@given(windows(), ZONES)
def test_ticks_are_in_order_apart_and_inside_the_axis(
    window: tuple[int, int, list[int]], zone: str
) -> None:
    t0, t1, moments = window
    axis = make_axis(t0, t1, moments, 128.0, 1108.0)
    shown = ticks(axis, ZoneInfo(zone))
    xs = [t.x for t in shown]
    assert xs == sorted(xs)
    assert all(axis.x0 <= x <= axis.x1 for x in xs)
    assert all(b - a >= MIN_TICK_SPACING for a, b in zip(xs, xs[1:], strict=False))
    assert [t.at for t in shown] == sorted({t.at for t in shown})
    # No tick inside a folded stretch: its time would be a lie about the scale.
    for t in shown:
        assert not any(p.t0 < t.at < p.t1 for p in axis.folds)
    # A readable count: at least one label unless everything is folded away, never a crowd.
    assert len(shown) <= (axis.x1 - axis.x0) / MIN_TICK_SPACING + 1


def test_tick_steps_go_from_seconds_to_weeks() -> None:
    width = 980.0
    assert tick_step(width / (2 * MINUTE_US)) < MINUTE_US
    assert tick_step(width / (3 * HOUR_US)) in (15 * MINUTE_US, 30 * MINUTE_US)
    assert tick_step(width / (7 * DAY_US)) == DAY_US
    assert tick_step(width / (60 * DAY_US)) == 7 * DAY_US


def test_hours_fall_on_the_readers_clock_across_a_clock_change() -> None:
    # 2026-10-25: Berlin goes from CEST back to CET at 03:00, so 02:00-03:00 happens twice.
    berlin = ZoneInfo("Europe/Berlin")
    start = 1_792_879_200_000_000  # 2026-10-24 22:00 UTC, midnight in Berlin
    every_half_hour = [start + i * 30 * MINUTE_US for i in range(21)]
    axis = make_axis(start, start + 10 * HOUR_US, every_half_hour, 0.0, 1000.0)
    assert axis.folds == []
    shown = ticks(axis, berlin)
    assert tick_step(axis.scale) == HOUR_US
    assert [t.label for t in shown[:4]] == ["01:00", "02:00", "03:00", "04:00"]
    # 02:00 CEST to 03:00 CET is two hours: drawn to scale, not as one.
    one, two = shown[1].x - shown[0].x, shown[2].x - shown[1].x
    assert abs(two - 2 * one) < 0.01
    assert shown[0].day == "Sun 25 Oct"


def test_a_quiet_week_is_folded_and_the_incidents_get_the_width() -> None:
    week = 7 * DAY_US
    first = [T0 + DAY_US + i * MINUTE_US for i in range(30)]
    second = [T0 + 5 * DAY_US + i * MINUTE_US for i in range(30)]
    axis = make_axis(T0, T0 + week, first + second, 0.0, 1000.0)
    assert len(axis.folds) >= 2
    assert all(abs(p.x1 - p.x0 - BREAK_WIDTH) < 1e-6 for p in axis.folds)
    # Each incident's half hour is wide enough to tell its minutes apart.
    assert axis.x(first[-1]) - axis.x(first[0]) > 29 * 2.0
    assert axis.x(second[-1]) - axis.x(second[0]) > 29 * 2.0


@given(st.floats(0, 900), st.floats(1, 300), st.floats(2, 30))
def test_hatch_strokes_stay_inside_their_rectangle(x: float, width: float, height: float) -> None:
    path = hatch(x, 10.0, width, height)
    for segment in filter(None, path.split("M")):
        for point in segment.split("L"):
            px, py = map(float, point.split())
            assert x - 0.06 <= px <= x + width + 0.06
            assert 10.0 - 0.06 <= py <= 10.0 + height + 0.06


def stored(subject: str, key: str, value: str, first: int, until: int | None) -> StoredVersion:
    """A value held from minute `first` of T0 until minute `until` (None: still held)."""
    return StoredVersion(
        subject=subject,
        key=key,
        value=value,
        blob_sha256=None,
        secret=False,
        first_snapshot_id=first,
        first_taken_us=T0 + first * MINUTE_US,
        until_snapshot_id=until,
        until_taken_us=None if until is None else T0 + until * MINUTE_US,
        provenance={},
    )


def version(value: str, first: int, until: int | None, name: str = "ok") -> StoredVersion:
    return stored(f"health:{name}", "ok", value, first, until)


def test_health_is_red_where_one_check_fails_and_grey_where_none_ran() -> None:
    checks = [
        version("true", 2, 10),
        version("false", 10, 12),
        version("true", 12, None),
        version("true", 5, None, "router"),
    ]
    stretches = health_stretches(checks, T0, T0 + 20 * MINUTE_US)
    assert [(s.state, s.start, s.end) for s in stretches] == [
        ("unknown", iso(T0), iso(T0 + 2 * MINUTE_US)),
        ("passing", iso(T0 + 2 * MINUTE_US), iso(T0 + 5 * MINUTE_US)),
        ("passing", iso(T0 + 5 * MINUTE_US), iso(T0 + 10 * MINUTE_US)),
        ("failing", iso(T0 + 10 * MINUTE_US), iso(T0 + 12 * MINUTE_US)),
        ("passing", iso(T0 + 12 * MINUTE_US), iso(T0 + 20 * MINUTE_US)),
    ]
    assert stretches[3].text == "failing: ok"
    assert stretches[2].text == "passing: ok, router"


@given(
    st.lists(st.integers(0, 3 * DAY_US), min_size=1, max_size=30),
    st.lists(st.integers(0, 3 * DAY_US), max_size=8),
)
def test_every_marker_and_flag_lands_inside_the_plot(changes: list[int], marks: list[int]) -> None:
    start, end = T0 - HOUR_US, T0 + 3 * DAY_US + HOUR_US
    suspects = [
        suspect(
            i + 1,
            f"change {i}",
            changes=[change("script:/s", "export:A", "added", None, "1", changed_at=iso(T0 + at))],
        )
        for i, at in enumerate(changes)
    ]
    lane = ServiceLane(
        service="decode",
        starts=[iso(T0 + at) for at in changes],
        starts_local=["x" for _ in changes],
        stretches=[
            Stretch(
                start=iso(T0),
                end=iso(T0 + DAY_US),
                start_local="",
                end_local="",
                state="running",
                text="",
            )
        ],
    )
    context = plain(
        investigation(
            suspects,
            baseline=baseline(1, time=iso(T0)),
            current=snapshot(2, time=iso(T0 + 3 * DAY_US)),
            overview=overview(
                start=iso(start),
                end=iso(end),
                services=[lane],
                marks=[
                    MarkPoint(at=iso(T0 + at), local="", kind="note", note="n" * 50) for at in marks
                ],
            ),
        )
    )
    p = picture(context, ZoneInfo("UTC"))
    # The ten most likely are always drawn; a suspect without room is counted in "+N more".
    assert len(p.markers) + p.undrawn == len(suspects)
    ranks = {m.rank for m in p.markers}
    assert len(ranks) == len(p.markers) and set(range(1, min(10, len(suspects)) + 1)) <= ranks
    assert sorted(m.href for m in p.markers) == sorted(f"#suspect-{r}" for r in ranks)
    assert p.markers[-1].rank == 1  # drawn last: on top
    assert_apart([(m.x, m.y) for m in p.markers])
    for m in p.markers:
        assert p.plot_x0 <= m.x <= p.plot_x1 and 0 <= m.y <= p.health_y
    for f in p.flags:
        assert p.plot_x0 <= f.x <= p.plot_x1 and 0 <= f.y <= p.top
    for t in p.lanes[0].starts:
        assert p.plot_x0 <= t.x <= p.plot_x1
    assert p.axis_y < p.height


def assert_apart(centres: list[tuple[float, float]]) -> None:
    """No two markers' circles (outline included) overlap or touch."""
    for i, (x, y) in enumerate(centres):
        for x2, y2 in centres[i + 1 :]:
            assert y != y2 or abs(x - x2) >= 2 * MARKER_R + MARKER_GAP, (x, y, x2, y2)
            assert abs(y - y2) >= 2 * MARKER_R + 1.5 or y == y2, (y, y2)


@given(st.lists(st.one_of(st.none(), st.floats(0, 1000)), max_size=120), st.integers(1, 12))
def test_stacked_markers_never_overlap_and_the_first_ones_always_find_room(
    xs: list[float | None], limit: int
) -> None:
    rows = stack_markers(xs, limit)
    assert len(rows) == len(xs)
    placed = [(x, r) for x, r in zip(xs, rows, strict=True) if r is not None]
    assert all(x is not None and 0 <= r < limit for x, r in placed)
    for i, (x, r) in enumerate(placed):
        for x2, r2 in placed[i + 1 :]:
            assert r != r2 or abs(x - x2) >= 2 * MARKER_R + MARKER_GAP  # type: ignore[operator]
    # Each of the first `limit` to be drawn finds a row: at most limit - 1 came before it.
    wanted = [i for i, x in enumerate(xs) if x is not None][:limit]
    assert all(rows[i] is not None for i in wanted)
    # A marker left out had no room: every row has one too close to it.
    for x, r in zip(xs, rows, strict=True):
        if x is not None and r is None:
            used = {r2 for x2, r2 in placed if abs(x - x2) < 2 * MARKER_R + MARKER_GAP}
            assert used == set(range(limit))


def test_suspects_past_the_drawable_ranks_are_counted_not_drawn() -> None:
    suspects = [
        suspect(
            i + 1,
            f"change {i}",
            changes=[
                change(
                    "script:/s", "export:A", "added", None, "1", changed_at=iso(T0 + i * HOUR_US)
                )
            ],
        )
        for i in range(MAX_MARKER_RANK + 5)
    ]
    context = plain(
        investigation(
            suspects,
            baseline=baseline(1, time=iso(T0)),
            current=snapshot(2, time=iso(T0 + 5 * DAY_US)),
            overview=overview(start=iso(T0), end=iso(T0 + 5 * DAY_US)),
        )
    )
    p = picture(context, ZoneInfo("UTC"))
    assert max(m.rank for m in p.markers) <= MAX_MARKER_RANK
    assert p.undrawn == len(suspects) - len(p.markers) >= 5
    assert p.marker_rows <= MAX_MARKER_ROWS
    assert_apart([(m.x, m.y) for m in p.markers])


def run_version(key: str, value: str, first: int, until: int | None) -> StoredVersion:
    return stored("service:router", key, value, first, until)


def test_a_lane_shows_a_crash_loop_hatched_and_a_stop_as_a_gap() -> None:
    runs = ServiceRuns(
        "router",
        {
            "running": [
                run_version("running", "true", 1, 10),
                run_version("running", "false", 10, 15),
                run_version("running", "true", 15, None),
            ],
            "started_at": [
                run_version("started_at", iso(T0), 1, 4),
                *(run_version("started_at", iso(T0 + m * MINUTE_US), m, m + 1) for m in (4, 5, 6)),
                run_version("started_at", iso(T0 + 15 * MINUTE_US), 15, None),
            ],
        },
    )
    loop = Failure(
        service="router",
        since_us=T0 + 4 * MINUTE_US,
        last_us=T0 + 6 * MINUTE_US,
        failing_starts=(T0 + 4 * MINUTE_US, T0 + 5 * MINUTE_US, T0 + 6 * MINUTE_US),
        restarts=3,
        exit="exit 1",
        result="exit-code",
        state="running again",
        running_since_us=T0 + 15 * MINUTE_US,
        running_pid="7",
        journal=(),
    )
    lane = service_lane(runs, loop, 1, T0, T0 + 20 * MINUTE_US)
    states = [(s.state, s.start, s.end) for s in lane.stretches]
    assert ("stopped", iso(T0 + 10 * MINUTE_US), iso(T0 + 15 * MINUTE_US)) in states
    assert ("crash-loop", iso(T0 + 4 * MINUTE_US), iso(T0 + 6 * MINUTE_US)) in states
    assert len(lane.starts) == 4
    context = plain(
        investigation(
            [],
            baseline=baseline(1, time=iso(T0)),
            current=snapshot(2, time=iso(T0 + 20 * MINUTE_US)),
            overview=overview(start=iso(T0), end=iso(T0 + 21 * MINUTE_US), services=[lane]),
        )
    )
    drawn = {r.kind: r for r in picture(context, ZoneInfo("UTC")).lanes[0].stretches}
    assert drawn["crash-loop"].hatch and not drawn["running"].hatch
    assert "crash-looped" in drawn["crash-loop"].title


def naive_health(checks: list[StoredVersion], start: int, end: int) -> list[tuple[int, str]]:
    """The band's state at every minute, asking every version: what the sweep must agree with."""
    out = []
    for t in range(start, end, MINUTE_US):
        covering = [
            (v.subject, v.value == "true")
            for v in checks
            if v.first_taken_us <= t and (v.until_taken_us is None or v.until_taken_us > t)
        ]
        state = (
            "unknown"
            if not covering
            else "passing"
            if all(ok for _s, ok in covering)
            else "failing"
        )
        out.append((t, state))
    return out


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.booleans(),
            st.integers(0, 30),
            st.none() | st.integers(1, 10),  # None: still held at the latest record
        ),
        max_size=20,
    )
)
def test_the_health_sweep_agrees_with_asking_every_check(
    spans: list[tuple[str, bool, int, int | None]],
) -> None:
    checks = [
        version("true" if ok else "false", first, None if length is None else first + length, name)
        for name, ok, first, length in spans
    ]
    end = T0 + 45 * MINUTE_US
    stretches = health_stretches(checks, T0, end)
    assert stretches[0].start == iso(T0) and stretches[-1].end == iso(end)
    for a, b in zip(stretches, stretches[1:], strict=False):
        assert a.end == b.start
    for t, state in naive_health(checks, T0, end):
        [drawn] = [s for s in stretches if s.start <= iso(t) < s.end]
        assert drawn.state == state, (t, drawn)


def test_a_check_flapping_for_months_is_thin_but_every_failure_shows() -> None:
    flapping = [version("false" if i % 97 == 0 else "true", i, i + 1) for i in range(20_000)]
    end = T0 + 20_000 * MINUTE_US
    stretches = health_stretches(flapping, T0, end)
    lane = ServiceLane(service="decode", starts=[], starts_local=[], stretches=[])
    context = plain(
        investigation(
            [],
            baseline=baseline(1, time=iso(T0)),
            current=snapshot(2, time=iso(end)),
            overview=overview(start=iso(T0), end=iso(end), health=stretches, services=[lane]),
        )
    )
    band = picture(context, ZoneInfo("UTC")).health
    assert len(band) < 1000
    assert all(b.x >= a.x for a, b in zip(band, band[1:], strict=False))
    # Failures every 97 minutes: at this scale every stretch of the band holds one.
    assert sum(1 for r in band if r.kind == "failing") >= len(band) // 2
    lines = glance_lines(context, ZoneInfo("UTC"))
    assert len(lines) < 20
    assert any("more health changes up to here" in line for line in lines)
