"""The delta of a record, computed without a database: STYLE.md's invariants, on any state.

A stored state here is a plain dict; `open_state` turns it into the
PreviousState the writer would read, and `apply` does what the writer's
transaction does with a Delta.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drift.facts import CollectionError, Fact, FactBlock
from drift.scope import Scope
from drift.store.delta import (
    INLINE_MAX,
    Delta,
    Ident,
    PreviousState,
    delta,
    needs_known_subjects,
    needs_script_provenance,
    provenance_json,
    stored_value,
)

Stored = tuple[str | None, str | None, bool, dict[str, Any]]
"""A fact as stored: inline value, blob digest, secret, provenance."""

FILE_KEYS = ("sha256", "size", "mode")


def collected(items: list[Fact | FactBlock]) -> dict[Ident, Stored]:
    """What a record of `items` stores: the first fact of each (subject, key) wins."""
    out: dict[Ident, Stored] = {}
    for item in items:
        for fact in [item] if isinstance(item, Fact) else item:
            value, digest, _blob = stored_value(fact.key, fact.value)
            out.setdefault((fact.subject, fact.key), (value, digest, fact.secret, fact.provenance))
    return out


def open_state(state: dict[Ident, Stored], closed: frozenset[str] = frozenset()) -> PreviousState:
    """The PreviousState of a host whose open versions hold `state`.

    `closed`: subjects the host had once and no longer has (their facts exist, closed).
    """
    return PreviousState(
        {
            ident: (n, 1_000 + n, value, digest, secret)
            for n, (ident, (value, digest, secret, _p)) in enumerate(state.items())
        },
        new_host=not state and not closed,
        known_subjects={ident[0] for ident in state} | closed,
        script_provenance={
            ident: provenance_json(stored[3])
            for ident, stored in state.items()
            if ident[0].startswith("script:")
        },
    )


def apply(
    state: dict[Ident, Stored], previous: PreviousState, change: Delta
) -> dict[Ident, Stored]:
    """The stored state after the writer applied `change` to `state` (read as `previous`)."""
    by_version = {version[1]: ident for ident, version in previous.open_versions.items()}
    after = dict(state)
    for vid in change.closing:
        del after[by_version[vid]]
    for new in change.opening:
        assert new.ident not in after, f"{new.ident} opened twice"
        after[new.ident] = (new.value, new.blob_sha256, new.secret, new.provenance)
    known = previous.known_subjects or set()
    for block in change.fresh:
        assert not known.intersection(block.subjects), "a fresh block holds a known subject"
        for fact in block:
            assert (fact.subject, fact.key) not in after
            value, digest, _blob = stored_value(fact.key, fact.value)
            after[(fact.subject, fact.key)] = (value, digest, False, fact.provenance)
    return after


def values(state: dict[Ident, Stored]) -> dict[Ident, tuple[str | None, str | None, bool]]:
    return {ident: stored[:3] for ident, stored in state.items()}


# ---------------------------------------------------------------- what a record may collect

SUBJECTS = ["service:decode", "script:/srv/run.sh", "file:/a", "file:/b", "file:/c", "file:/d"]
# Mostly short values, so blocks often go in column by column; now and then one with
# a NUL (JSON cannot carry it into SQLite) or one long enough for the blob table.
plain = st.text("ab0", max_size=2)
texts = st.one_of(
    plain,
    plain,
    plain,
    st.text("a\0", min_size=1, max_size=2),
    st.text("xy", min_size=INLINE_MAX + 1, max_size=INLINE_MAX + 3),
)
provenances = st.sampled_from([{}, {"line": 1}, {"line": 2}, {"glob": "/*", "set": "all"}])

loose_facts = st.builds(
    Fact,
    st.sampled_from(SUBJECTS),
    st.sampled_from([*FILE_KEYS, "env:A", "content"]),
    texts,
    provenances,
    st.booleans(),
)


@st.composite
def blocks(draw: st.DrawFn) -> FactBlock:
    files = draw(st.lists(st.sampled_from(SUBJECTS[2:]), unique=True, max_size=4))
    # Half the blocks short values only: those a record may store column by column.
    values = draw(st.sampled_from([plain, texts]))
    return FactBlock(
        FILE_KEYS,
        files,
        [[draw(values) for _ in files] for _ in FILE_KEYS],
        [draw(provenances) for _ in files],
    )


records = st.lists(st.one_of(loose_facts, blocks()), max_size=8)
errors = st.lists(
    st.builds(
        CollectionError,
        st.sampled_from([*SUBJECTS, "file:/"]),
        st.sampled_from([None, "env:", "sha256"]),
        st.just("permission denied"),
    ),
    max_size=2,
)
few_new = mock.patch("drift.store.delta.FRESH_MIN", 2)  # fresh blocks on a small host too


@settings(max_examples=300, deadline=None)
@given(items=records, fresh_blocks=st.booleans())
def test_the_delta_of_a_state_with_itself_is_empty(
    items: list[Fact | FactBlock], fresh_blocks: bool
) -> None:
    state = collected(items)
    with few_new:
        change = delta(open_state(state), items, fresh_blocks=fresh_blocks)
    assert change.empty
    assert (change.changed, change.unchanged, change.n_facts) == (0, len(state), len(state))
    assert change.gone_files == set()


@settings(max_examples=300, deadline=None)
@given(
    first=records,
    second=records,
    closed=st.sets(st.sampled_from(SUBJECTS[2:])),
    fresh_blocks=st.booleans(),
)
def test_applying_the_delta_gives_the_new_state_and_recording_it_again_adds_nothing(
    first: list[Fact | FactBlock],
    second: list[Fact | FactBlock],
    closed: set[str],
    fresh_blocks: bool,
) -> None:
    state = collected(first)
    previous = open_state(state, frozenset(closed - {ident[0] for ident in state}))
    with few_new:
        change = delta(previous, second, fresh_blocks=fresh_blocks)
    after = apply(state, previous, change)
    assert values(after) == values(collected(second))
    # Each fact added, removed or given another value is one change; a moved line is none.
    before_values, after_values = values(state), values(after)
    differs = {
        i
        for i in before_values.keys() | after_values.keys()
        if before_values.get(i) != after_values.get(i)
    }
    assert change.changed == len(differs)
    assert change.n_facts == len(after)
    assert change.gone_files == {
        ident[0][len("file:") :]
        for ident in state.keys() - after.keys()
        if ident[0].startswith("file:")
    }
    with few_new:
        again = delta(open_state(after), second, fresh_blocks=fresh_blocks)
    assert again.empty and again.changed == 0


@settings(max_examples=300, deadline=None)
@given(first=records, second=records, failed=errors)
def test_a_fact_a_collector_failed_to_read_keeps_its_last_value(
    first: list[Fact | FactBlock], second: list[Fact | FactBlock], failed: list[CollectionError]
) -> None:
    state = collected(first)
    previous = open_state(state)
    after = apply(state, previous, delta(previous, second, failed))
    kept = {
        ident: stored
        for ident, stored in state.items()
        if any(error.covers(*ident) for error in failed)
    }
    assert values(after) == values({**kept, **collected(second)})


def test_a_subject_the_host_had_before_is_never_stored_as_fresh() -> None:
    # Its facts exist (closed): new versions of them need their ids, not new rows.
    block = FactBlock(FILE_KEYS, ["file:/a", "file:/b"], [["1", "2"]] * 3, [{}, {}])
    previous = open_state({}, frozenset({"file:/a"}))
    with few_new:
        change = delta(previous, [block])
    assert [b.subjects for b in change.fresh] == [["file:/b"]]
    assert [new.ident for new in change.opening] == [("file:/a", key) for key in FILE_KEYS]
    assert values(apply({}, previous, change)) == values(collected([block]))


def test_a_script_line_that_moved_is_stored_but_is_no_change() -> None:
    before = [Fact("script:/srv/run.sh", "export:A", "1", {"line": 3})]
    moved = [Fact("script:/srv/run.sh", "export:A", "1", {"line": 4})]
    state = collected(before)
    change = delta(open_state(state), moved)
    assert (len(change.closing), len(change.opening), change.changed) == (1, 1, 0)
    assert apply(state, open_state(state), change)[("script:/srv/run.sh", "export:A")][3] == {
        "line": 4
    }


def test_facts_that_left_or_entered_the_scope_are_written_but_not_counted() -> None:
    web = Scope(services={"web": None}, files={"etc": ("/etc/*",)})
    api = Scope(services={"api": None}, files={"etc": ("/etc/*",)})
    state = collected([Fact("service:web", "pid", "1"), Fact("file:/etc/x", "size", "1")])
    now = [Fact("service:api", "pid", "2"), Fact("file:/etc/x", "size", "2")]
    change = delta(open_state(state), now, scopes=(web, api))
    assert change.scope_moves is not None
    assert change.scope_moves.untracked == 1 and change.scope_moves.tracked == 1
    assert not change.scope_moves.covers_none  # the file is covered by both
    assert change.changed == 1  # only the file's size
    assert len(change.closing) == 2 and len(change.opening) == 2


def test_what_the_writer_must_read_first_is_asked_for_not_guessed() -> None:
    files = [f"file:/srv/{i}" for i in range(3)]
    block = FactBlock(FILE_KEYS, files, [["v"] * 3 for _ in FILE_KEYS], [{}] * 3)
    established = PreviousState({("service:web", "pid"): (1, 1, "1", None, False)})
    with few_new:
        assert needs_known_subjects(established, [block])
        assert not needs_known_subjects(established, [block], fresh_blocks=False)
        assert not needs_known_subjects(PreviousState({}, new_host=True), [block])
        with pytest.raises(ValueError, match="known_subjects"):
            delta(established, [block])
    script = Fact("script:/srv/run.sh", "export:A", "1", {"line": 3})
    assert needs_script_provenance([block, script], config_changed=False)
    assert not needs_script_provenance([block], config_changed=False)
    assert needs_script_provenance([block], config_changed=True)
    stored = PreviousState({(script.subject, script.key): (1, 1, "1", None, False)})
    with pytest.raises(ValueError, match="script_provenance"):
        delta(stored, [script])
