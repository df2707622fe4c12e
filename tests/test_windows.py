"""Stable windows from marks and health checks: where `drift since` starts when not told."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drift.analysis.windows import HEALTH_LOOKBACK, choose_baseline, health_series
from drift.errors import NoBaselineError
from drift.facts import Fact
from drift.store.query import History, SnapshotInfo, StoredVersion
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter, add_mark
from drift.timespec import When, from_us

HOST = "gpu-node-7"
MINUTE = 60_000_000
T0 = 1_780_000_000_000_000  # some morning, in microseconds


def record(db_path: Path, minute: int, healthy: bool | None, ctas: str = "256") -> int:
    db = resolve_db_url(str(db_path))
    facts = [Fact("service:decode", "env:SGLANG_SM120_MMA_TARGET_CTAS", ctas)]
    if healthy is not None:
        facts.append(Fact("health:decode-answers", "ok", "true" if healthy else "false"))
    writer = HistoryWriter.open(db)
    try:
        return writer.write_snapshot(HOST, T0 + minute * MINUTE, facts, [], {}).snapshot_id
    finally:
        writer.close()


def baseline(db_path: Path, stable: When | None = None):
    history = History.open(resolve_db_url(str(db_path)), HOST)
    try:
        chosen = choose_baseline(history, stable)
        return chosen, history.snapshot_for(chosen.when).id
    finally:
        history.close()


def test_health_checks_end_the_window_at_the_last_passing_record(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    ids = [record(db, m, healthy=m < 5) for m in range(8)]  # healthy 0-4, failing 5-7
    chosen, snapshot = baseline(db)
    assert snapshot == ids[4]
    assert chosen.source == "health"
    assert (
        chosen.why.startswith("end of stable window ")
        and "health check decode-answers" in chosen.why
    )
    assert chosen.unhealthy_us == T0 + 5 * MINUTE


def test_latest_closed_window_wins_and_recovery_opens_a_new_one(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    pattern = [True, True, False, True, True, True, False, False, True]
    ids = [record(db, m, healthy=h) for m, h in enumerate(pattern)]
    _chosen, snapshot = baseline(db)
    assert snapshot == ids[5]  # the window 3-5, closed by the failure at 6


def test_marks_make_a_window_and_the_later_end_wins(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    ids = [record(db, m, healthy=None) for m in range(6)]
    url = resolve_db_url(str(db))
    add_mark(url, HOST, "stable", T0 + 1 * MINUTE, "decode answers")
    chosen, snapshot = baseline(db)
    assert (chosen.source, snapshot) == ("marks", ids[1])
    assert "stable mark at " in chosen.why and "no unstable mark since" in chosen.why
    add_mark(url, HOST, "unstable", T0 + 4 * MINUTE + 1, "wedged")
    chosen, snapshot = baseline(db)
    # "bad by 4" says nothing of 2-4: the baseline stays at the stable mark
    assert snapshot == ids[1] and "unstable mark at " in chosen.why
    assert chosen.caveat is not None and "when it broke is not known" in chosen.caveat
    assert (chosen.unhealthy_us, chosen.unhealthy_by_mark) == (T0 + 4 * MINUTE + 1, True)


def test_given_baseline_still_knows_the_first_failure_after_it(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    ids = [record(db, m, healthy=m < 3) for m in range(5)]
    chosen, snapshot = baseline(db, When(snapshot=ids[1], text=f"#{ids[1]}"))
    assert snapshot == ids[1] and chosen.source == "given"
    assert chosen.unhealthy_us == T0 + 3 * MINUTE


def test_no_marks_and_no_failing_check_says_how_to_give_a_baseline(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    for m in range(3):
        record(db, m, healthy=True)
    with pytest.raises(NoBaselineError, match="give --stable WHEN"):
        baseline(db)


def test_health_check_in_drift_toml_gives_since_its_baseline(tmp_path: Path) -> None:
    from conftest import run_drift

    flag = tmp_path / "answers"
    flag.write_text("ok\n")
    knob = tmp_path / "knob.conf"
    knob.write_text("ctas = 256\n")
    config = tmp_path / "drift.toml"
    config.write_text(
        f'host = "h"\n[[files]]\nname = "knob"\npaths = ["{knob}"]\n'
        f'[[health]]\nname = "decode-answers"\nrun = "test -f {flag}"\ntimeout = 5\n'
    )
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)  # #2: the last healthy record
    knob.write_text("ctas = 512\n")
    flag.unlink()  # it stops answering
    run_drift(["record", *cfg], tmp_path)
    given = run_drift(["since", "--stable", "#1", *cfg], tmp_path).stdout
    assert "knob.conf" in given
    out = run_drift(["since", *cfg], tmp_path).stdout
    assert "baseline  #2 " in out and "from health check decode-answers" in out
    assert "knob.conf" in out
    marked = run_drift(["mark", "stable", "--at", "#3", "--note", "odd but fine", *cfg], tmp_path)
    assert marked.stdout.startswith("mark #1: stable at ")
    assert "health check decode-answers was failing" in marked.stderr
    # #3 failed its check: the mark is contested, the last passing check stays the baseline
    # and the header says how to take the mark instead.
    out = run_drift(["since", *cfg], tmp_path).stdout
    assert "baseline  #2 " in out and "takes the mark instead" in out
    assert "baseline  #3 " in run_drift(["since", "--stable", "#3", *cfg], tmp_path).stdout


def test_a_failing_check_closes_a_window_a_stable_mark_opened(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    # no check until minute 6, when the new check fails straight away
    ids = [record(db, m, healthy=None if m < 6 else False) for m in range(8)]
    add_mark(resolve_db_url(str(db)), HOST, "stable", T0 + 1 * MINUTE, "looked fine")
    chosen, snapshot = baseline(db)
    # no record passed a check after the mark: the mark is the last evidence of health
    assert snapshot == ids[1]
    assert chosen.source == "marks" and "decode-answers failing from " in chosen.why
    assert chosen.unhealthy_us == T0 + 6 * MINUTE


@settings(max_examples=60, deadline=None)
@given(
    checks=st.lists(
        st.lists(st.sampled_from([True, False, None]), min_size=1, max_size=40),
        min_size=1,
        max_size=3,
    )
)
def test_health_series_is_every_check_covering_each_record(checks: list[list[bool | None]]) -> None:
    """Swept with a cursor per check, the series says what the definition says: a record is
    in it when some check covers it, healthy when every covering check passed."""
    minutes = max(len(c) for c in checks)
    snaps = [SnapshotInfo(i + 1, T0 + i * MINUTE, 1, 1, 0, 0, [], None) for i in range(minutes)]
    versions: list[StoredVersion] = []
    for n, outcomes in enumerate(checks):
        runs: list[tuple[bool, int, int]] = []  # (passed, first id, until id)
        for i, outcome in enumerate(outcomes, 1):
            if outcome is None:
                continue
            if runs and runs[-1][0] == outcome and runs[-1][2] == i:
                runs[-1] = (outcome, runs[-1][1], i + 1)
            else:
                runs.append((outcome, i, i + 1))
        for passed, first, until in runs:
            versions.append(
                StoredVersion(
                    f"health:c{n}", "ok", "true" if passed else "false", None, False,
                    first, T0, None if until > minutes else until, None, {},
                )
            )  # fmt: skip
    naive = []
    for snap in snaps:
        covering = [
            v.value
            for v in versions
            if v.first_snapshot_id <= snap.id
            and (v.until_snapshot_id is None or v.until_snapshot_id > snap.id)
        ]
        if covering:
            naive.append((snap, all(value == "true" for value in covering)))
    assert health_series(snaps, versions) == naive


def test_a_baseline_older_than_the_health_lookback_finds_its_first_failure(tmp_path: Path) -> None:
    """A failure before the last HEALTH_LOOKBACK records is still the first failure after a
    baseline given before it: read from the check's versions, not from the recent records."""
    db_path = tmp_path / "drift.db"
    db = resolve_db_url(str(db_path))
    failing = {100, 101, HEALTH_LOOKBACK + 400}  # minutes; 100 is outside the lookback
    with HistoryWriter.open(db) as writer:
        for m in range(HEALTH_LOOKBACK + 500):
            ok = "false" if m in failing else "true"
            facts = [Fact("health:decode-answers", "ok", ok)]
            writer.write_snapshot(HOST, T0 + m * MINUTE, facts, [], {})
    chosen, _ = baseline(db_path, When(at=from_us(T0 + 50 * MINUTE)))
    assert chosen.unhealthy_us == T0 + 100 * MINUTE
    chosen, _ = baseline(db_path, When(at=from_us(T0 + 101 * MINUTE)))
    assert chosen.unhealthy_us == T0 + (HEALTH_LOOKBACK + 400) * MINUTE
    chosen, _ = baseline(db_path, When(at=from_us(T0 + 100 * MINUTE)))
    assert chosen.unhealthy_us == T0 + 101 * MINUTE  # failing already: the next record fails
