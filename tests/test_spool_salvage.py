"""A spool cut short anywhere: shipping it never stops, never ships a state the spool did not
hold, and ships every snapshot SQLite can still read, in order (a property over cut points)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift.facts import Fact
from drift.store.push import ship
from drift.store.query import History
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter

HOST = "decode-7"
T0 = 1_800_000_000_000_000
State = set[tuple[str, str, str | None, str | None]]


def states(path: Path) -> list[State]:
    """Every snapshot's state of HOST, oldest first."""
    with History.open(resolve_db_url(str(path)), HOST) as history:
        return [
            {(v.subject, v.key, v.value, v.blob_sha256) for v in history.state_at(s.id).values()}
            for s in history.snapshots_between(0, history.latest().id)
        ]


class Spooled:
    """A spool's file and the states it holds (shown short when a case fails)."""

    def __init__(self, path: Path, held: list[State]) -> None:
        self.path, self.held = path, held

    def __repr__(self) -> str:
        return f"Spooled({self.path}, {len(self.held)} snapshots)"


@pytest.fixture(scope="module")
def spooled() -> Iterator[Spooled]:
    """A spool of six snapshots (values, long texts, facts coming and going), and its states."""
    folder = Path(tempfile.mkdtemp(prefix="drift-spool-"))
    spool = folder / "spool.db"
    with HistoryWriter.open(resolve_db_url(str(spool))) as writer:
        for i in range(6):
            facts = [Fact(f"file:/opt/f{n}", "sha256", f"{n * i:064x}") for n in range(40 + i * 9)]
            facts.append(Fact("command:v", "stdout", f"run {i}\n" * (300 + 50 * i)))
            writer.write_snapshot(HOST, T0 + i * 60_000_000, facts, [], {})
    try:
        yield Spooled(spool, states(spool))
    finally:
        shutil.rmtree(folder)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.floats(min_value=0.0, max_value=1.0))
def test_a_spool_cut_anywhere_ships_a_prefix_of_what_it_held(spooled: Spooled, cut: float) -> None:
    source, held = spooled.path, spooled.held
    folder = Path(tempfile.mkdtemp(prefix="drift-cut-"))
    try:
        spool = folder / "spool.db"
        shutil.copy(source, spool)
        spool.chmod(0o600)
        size = spool.stat().st_size
        os.truncate(spool, int(size * cut))
        central = folder / "central.db"
        with HistoryWriter.open(resolve_db_url(str(central))) as writer:
            done = ship(spool, writer, HOST)
        shipped = states(central) if done.shipped else []
        assert shipped == held[: len(shipped)]  # never a state the spool did not hold
        if done.set_aside is not None:
            assert done.set_aside.exists()
            assert done.set_aside.stat().st_size == int(size * cut)  # kept as it was
            assert not list(folder.glob("*.reading*"))
        else:
            # Not set aside only when SQLite reads it whole (a cut in the last page's unused
            # bytes): then every snapshot it held is shipped.
            assert done.shipped == len(held)
    finally:
        shutil.rmtree(folder)
