"""Kinds of fact: every kind drift can name has a place in the listing order and a rank weight."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drift.analysis.kinds import CATEGORY_ORDER, category, category_rank
from drift.analysis.rank import WEIGHTS

# The subject kinds the collectors record.
RECORDED = ("script", "service", "repo", "file", "command", "health")
# Key shapes the collectors give, plus any text.
KEYS = st.one_of(
    st.sampled_from(
        [
            "content",
            "symlink",
            "exec",
            "pid",
            "started_at",
            "running",
            "argv",
            "exe",
            "cwd",
            "user",
            "unit:active_state",
            "unit:load_state",
            "unit:exec_start",
            "diff",
            "dirty",
            "untracked",
            "head",
            "sha256",
            "exit",
            "stdout",
            "ok",
        ]
    ),
    st.builds(
        str.__add__,
        st.sampled_from(["export:", "env:", "flag:", "unit:", "unit:environment:"]),
        st.text(),
    ),
    st.text(),
)


@given(kind=st.sampled_from(RECORDED), name=st.text(), key=KEYS)
def test_every_category_of_a_recorded_fact_is_in_the_order(kind: str, name: str, key: str) -> None:
    assert category(f"{kind}:{name}", key) in CATEGORY_ORDER


@given(subject=st.text(), key=KEYS)
def test_a_category_outside_the_order_ranks_after_every_one_in_it(subject: str, key: str) -> None:
    name = category(subject, key)
    if name in CATEGORY_ORDER:
        assert CATEGORY_ORDER[category_rank(name)] == name
    else:
        assert category_rank(name) == len(CATEGORY_ORDER)


def test_category_rank_is_the_position_in_the_order() -> None:
    assert [category_rank(name) for name in CATEGORY_ORDER] == list(range(len(CATEGORY_ORDER)))
    assert len(set(CATEGORY_ORDER)) == len(CATEGORY_ORDER)


def test_ranking_weighs_every_kind_in_the_order() -> None:
    assert set(WEIGHTS.kind_values) == set(CATEGORY_ORDER)
