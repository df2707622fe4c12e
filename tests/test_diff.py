"""Properties of comparing two states: nothing from a state to itself, and symmetry."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drift.analysis.diff import changes_between
from drift.store.query import StoredVersion

idents = st.tuples(
    st.sampled_from(["service:decode", "file:/k.py", "repo:/r"]), st.text(min_size=1, max_size=4)
)
states = st.dictionaries(idents, st.text(max_size=4), max_size=10).map(
    lambda d: {
        ident: StoredVersion(*ident, value, None, False, 1, 0, None, None, {})
        for ident, value in d.items()
    }
)


@given(states)
def test_a_state_compared_with_itself_has_no_change(state: dict) -> None:
    assert changes_between(state, state) == []


@given(states, states)
def test_comparing_backwards_swaps_added_and_removed(a: dict, b: dict) -> None:
    forward = {(c.subject, c.key): c.kind for c in changes_between(a, b)}
    backward = {(c.subject, c.key): c.kind for c in changes_between(b, a)}
    swap = {"added": "removed", "removed": "added", "modified": "modified"}
    assert backward == {ident: swap[kind] for ident, kind in forward.items()}
    assert set(forward) == {i for i in a.keys() | b.keys() if a.get(i) != b.get(i)}
