"""Co-restarts: restarts close in time are one event, and every restart is in exactly one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drift.analysis.restarts import CO_RESTART_US, Restart, co_restarts

MIN = 60_000_000

RESTARTS = st.lists(
    st.builds(
        Restart,
        service=st.sampled_from(["prefill", "decode", "router", "web"]),
        before_pid=st.none(),
        after_pid=st.none(),
        at_us=st.integers(0, 120 * MIN),
        changes=st.just(()),
    ),
    max_size=12,
)


@given(RESTARTS)
def test_co_restarts_hold_each_restart_once_in_time_order(restarts: list[Restart]) -> None:
    events = co_restarts(restarts)
    joined = [r for e in events for r in e.restarts]
    assert sorted(map(id, joined)) == sorted(map(id, restarts))
    assert joined == sorted(joined, key=lambda r: (r.at_us, r.service))
    for event in events:
        assert event.at_us == event.restarts[0].at_us
        assert all(r.at_us - event.at_us <= CO_RESTART_US for r in event.restarts)
    for earlier, later in zip(events, events[1:], strict=False):
        assert later.at_us - earlier.at_us > CO_RESTART_US


def test_restarts_ten_minutes_apart_are_one_event_and_a_minute_more_is_two() -> None:
    def at(service: str, us: int) -> Restart:
        return Restart(service, None, None, us, ())

    together = co_restarts([at("decode", 10 * MIN), at("prefill", 0)])
    assert [e.services for e in together] == [("prefill", "decode")]
    apart = co_restarts([at("prefill", 0), at("decode", 11 * MIN)])
    assert [e.services for e in apart] == [("prefill",), ("decode",)]
