"""Restarts: counted per service over the whole window, and co-restarts only for starts together."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drift.analysis.restarts import (
    CO_RESTART_US,
    Restart,
    co_restarts,
    counted,
    systemd_restarts,
    window_starts,
)
from drift.analysis.unit_history import service_runs
from drift.store.query import StoredVersion
from drift.timespec import from_us

SEC = 1_000_000
MIN = 60 * SEC

RESTARTS = st.lists(
    st.builds(
        Restart,
        service=st.sampled_from(["prefill", "decode", "router", "web"]),
        before_pid=st.none(),
        after_pid=st.none(),
        at_us=st.integers(0, 120 * MIN),
        changes=st.just(()),
        starts=st.lists(st.integers(0, 120 * MIN), max_size=5).map(lambda s: tuple(sorted(s))),
    ),
    max_size=12,
    unique_by=lambda r: r.service,
)


@given(RESTARTS)
def test_every_start_is_in_one_event_and_events_hold_only_starts_together(
    restarts: list[Restart],
) -> None:
    events = co_restarts(restarts)
    for restart in restarts:
        # Each start of a service is in exactly one event (a start shared with
        # another start of the same service within the threshold counts once).
        holding = [e for e in events if restart in e.restarts]
        assert 1 <= len(holding) <= len(restart.times)
    for event in events:
        assert len(set(event.services)) == len(event.services)
        for restart in event.restarts:
            assert any(0 <= t - event.at_us <= CO_RESTART_US for t in restart.times)
    for earlier, later in zip(events, events[1:], strict=False):
        assert later.at_us - earlier.at_us > CO_RESTART_US


def at(service: str, *times: int) -> Restart:
    return Restart(service, None, None, max(times), (), starts=tuple(times), count=len(times))


def test_starts_five_seconds_apart_are_together_and_six_are_not() -> None:
    together = co_restarts([at("decode", 5 * SEC), at("prefill", 0)])
    assert [e.services for e in together] == [("prefill", "decode")]
    apart = co_restarts([at("prefill", 0), at("decode", 6 * SEC)])
    assert [e.services for e in apart] == [("prefill",), ("decode",)]


def test_ten_router_restarts_are_never_tied_to_decode_s_one() -> None:
    router = at("router", *(i * MIN for i in range(10)))
    decode = at("decode", 4 * MIN + 30 * SEC)
    events = co_restarts([router, decode])
    assert [e.services for e in events] == [("router",)] * 5 + [("decode",)] + [("router",)] * 5
    # Once decode does start with one of them, that one start is a co-restart, and only it.
    decode = at("decode", 4 * MIN + 2 * SEC)
    tied = [e.services for e in co_restarts([router, decode]) if len(e.services) > 1]
    assert tied == [("router", "decode")]


# ---------------------------------------------------------------- counting


def version(key: str, value: str, first: int, until: int | None, **prov: object) -> StoredVersion:
    return StoredVersion(
        subject="service:router",
        key=key,
        value=value,
        blob_sha256=None,
        secret=False,
        first_snapshot_id=first,
        first_taken_us=first * MIN,
        until_snapshot_id=until,
        until_taken_us=None if until is None else until * MIN,
        provenance=dict(prov),
    )


def iso(us: int) -> str:
    return from_us(us).isoformat(timespec="microseconds")


def test_every_start_the_records_saw_counts_once() -> None:
    """Snapshot 1 is the baseline; each record from 2 on saw a new process."""
    before = {("service:router", "started_at"): version("started_at", iso(30 * SEC), 1, 2)}
    inside = [
        version("started_at", iso(n * MIN + 5 * SEC), n, n + 1 if n < 11 else None)
        for n in range(2, 12)
    ]
    # systemd's stamp of the same starts, a few ms from the kernel's clock tick: the same starts.
    inside += [
        version(
            "unit:exec_main_start", iso(n * MIN + 5 * SEC + 4_000), n, n + 1 if n < 11 else None
        )
        for n in range(3, 12)
    ]
    # drift began recording systemd's stamp of the baseline's process inside the window:
    # that is no restart.
    inside.append(version("unit:exec_main_start", iso(30 * SEC), 2, 3))
    runs = service_runs(before, inside)["router"]
    assert len(window_starts(runs, 1)) == 10


def test_systemd_counts_restarts_across_a_reset_by_hand() -> None:
    inside = [
        version("unit:n_restarts", value, first, until)
        for value, first, until in (("0", 1, 3), ("4", 3, 5), ("1", 5, 6), ("3", 6, None))
    ]
    runs = service_runs({}, inside)["router"]
    # 0 -> 4: four; reset by hand, then 1: one more; 1 -> 3: two more.
    assert systemd_restarts(runs) == 7


def test_the_count_is_systemd_s_when_it_saw_more_than_the_records() -> None:
    inside = [
        version("unit:n_restarts", "0", 1, 4),
        version("unit:n_restarts", "9", 4, None),
        version("started_at", iso(3 * MIN), 3, 4),
        version("started_at", iso(4 * MIN), 4, None),
    ]
    runs = service_runs({}, inside)["router"]
    restart = counted(Restart("router", "1", "2", 4 * MIN, ()), runs, 1)
    assert (restart.count, restart.counted_by) == (9, "systemd")
    assert restart.starts == (3 * MIN, 4 * MIN)
    # Without systemd's counter, the records' count stands, and the restart keeps its starts.
    plain = [v for v in inside if v.key == "started_at"]
    restart = counted(
        Restart("router", "1", "2", 4 * MIN, ()), service_runs({}, plain)["router"], 1
    )
    assert (restart.count, restart.counted_by) == (2, "records")


def test_a_new_process_started_within_a_second_of_the_last_is_a_start() -> None:
    """A restart made at once after the baseline process started (a quick replay, a crash a
    moment after start) is a new pid: it counts, however close the two starts are."""
    before = {
        ("service:router", "started_at"): version("started_at", iso(30 * SEC), 1, 2),
        ("service:router", "pid"): version("pid", "4100", 1, 2),
    }
    inside = [
        version("started_at", iso(30 * SEC + 400_000), 2, None),
        version("pid", "4177", 2, None),
    ]
    runs = service_runs(before, inside)["router"]
    assert window_starts(runs, 1) == [30 * SEC + 400_000]
    # The same process read again (drift began to record systemd's stamp of it) stays none.
    same = service_runs(before, [version("unit:exec_main_start", iso(30 * SEC + 4_000), 2, None)])
    assert window_starts(same["router"], 1) == []
