"""Ranking over a day of per-minute history, written through the store API."""

from __future__ import annotations

from pathlib import Path

from drift.analysis.investigate import InvestigateOptions, investigate
from drift.analysis.plain import plain
from drift.facts import Fact
from drift.store.query import History
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter
from drift.timespec import When, from_us

MINUTE = 60_000_000
T0 = 1_780_000_000_000_000


def test_a_day_of_churn_does_not_hide_the_one_env_change(tmp_path: Path) -> None:
    db = resolve_db_url(str(tmp_path / "day.db"))
    writer = HistoryWriter.open(db)
    ids = []
    try:
        for minute in range(1440):
            facts = [
                Fact("service:decode", "pid", "318108", {"pid": 318108}),
                Fact("service:decode", "env:CUDA_VISIBLE_DEVICES", "4,5,6,7", {"pid": 318108}),
                Fact(
                    "service:decode",
                    "env:SGLANG_SM120_MMA_TARGET_CTAS",
                    "512" if minute >= 1300 else "256",
                    {"pid": 318108},
                ),
                Fact("command:clock", "stdout", f"{T0 + minute * MINUTE}\n", {"run": "date +%s"}),
                Fact("command:clock", "exit", "0", {"run": "date +%s"}),
            ]
            snap = writer.write_snapshot("gpu-node-7", T0 + minute * MINUTE, facts, [], {})
            ids.append(snap.snapshot_id)
    finally:
        writer.close()

    history = History.open(db, "gpu-node-7")
    try:
        context = plain(
            investigate(
                history, When(snapshot=ids[1200], text="#1200"), None, InvestigateOptions(top=None)
            )
        )
    finally:
        history.close()
    suspects = context["suspects"]
    first = suspects[0]["changes"][0]
    assert (first["subject"], first["key"]) == (
        "service:decode",
        "env:SGLANG_SM120_MMA_TARGET_CTAS",
    )
    clock = next(s for s in suspects if s["changes"][0]["subject"] == "command:clock")
    assert clock["rank"] > 1 and clock["score"] < suspects[0]["score"]
    assert (
        "changes at every record: 1,200 times in the 1,201 records before the baseline"
        in clock["reasons"]
    )
    assert "never changed in the 1,201 records before the baseline" in suspects[0]["reasons"]
    assert context["trust"]["after_baseline"] == 239


def _restart_during_the_failing_record(tmp_path: Path, restarted_after_us: int) -> list[str]:
    """Records a minute apart, each two seconds long; health fails from the fourth on.

    The service is read early in each record and the health check runs last:
    a restart `restarted_after_us` into the fourth record is seen only by the
    fifth. Returns the reasons of the top suspect (the new variable it started with).
    """
    import time

    db = resolve_db_url(str(tmp_path / "health.db"))
    writer = HistoryWriter.open(db)
    ids = []
    restart_us = T0 + 3 * MINUTE + restarted_after_us
    try:
        for minute in range(5):
            new = minute == 4
            pid = "200" if new else "100"
            started = from_us(restart_us if new else T0 - 60 * MINUTE).isoformat()
            facts = [
                Fact("service:decode", "running", "true", {"pid": pid}),
                Fact("service:decode", "pid", pid, {"pid": pid}),
                Fact("service:decode", "started_at", started, {"pid": pid, "uncertainty_ms": 10}),
                Fact("service:decode", "env:NCCL_ALGO", "Tree" if new else "Ring", {"pid": pid}),
                Fact("health:decode", "ok", "false" if minute >= 3 else "true", {"run": "curl"}),
            ]
            started_at = time.monotonic() - 2.0  # each record took two seconds
            snap = writer.write_snapshot(
                "gpu-node-7", T0 + minute * MINUTE, facts, [], {}, started=started_at
            )
            ids.append(snap.snapshot_id)
    finally:
        writer.close()

    history = History.open(db, "gpu-node-7")
    try:
        context = plain(
            investigate(
                history, When(snapshot=ids[1], text="#2"), None, InvestigateOptions(top=None)
            )
        )
    finally:
        history.close()
    (suspect,) = context["suspects"]
    assert suspect["changes"][0]["key"] == "env:NCCL_ALGO"
    return suspect["reasons"]


def test_a_restart_while_the_failing_record_ran_is_not_cleared_by_timing(tmp_path: Path) -> None:
    """Restarted 0.3 s into the record whose health check (run last) failed: maybe the cause."""
    reasons = _restart_during_the_failing_record(tmp_path, 300_000)
    assert not any("cannot have caused it" in r for r in reasons)
    assert any(
        r.startswith("at about the same time as the first unhealthy record (")
        and r.endswith("), order unknown")
        for r in reasons
    )


def test_a_restart_after_the_failing_record_ended_cannot_have_caused_it(tmp_path: Path) -> None:
    reasons = _restart_during_the_failing_record(tmp_path, 2_500_000)
    assert any(r.endswith("cannot have caused it") for r in reasons)


def test_churn_is_counted_over_the_month_before_the_baseline(tmp_path: Path) -> None:
    """Past a month, what a fact did long ago no longer counts against it: churn is read
    over the 30 days before the baseline, and the reasons say so."""
    db = resolve_db_url(str(tmp_path / "deep.db"))
    hour = 60 * MINUTE
    hours = 40 * 24
    with HistoryWriter.open(db) as writer:
        for h in range(hours + 2):
            facts = [
                Fact("service:decode", "pid", "318108", {"pid": 318108}),
                # Changed 35 days before the baseline only (and after it).
                Fact("service:decode", "env:OLD", "b" if 5 * 24 <= h < hours + 1 else "a"),
                # Changed 20 days before the baseline (and after it).
                Fact("service:decode", "env:RECENT", "b" if 20 * 24 <= h < hours + 1 else "a"),
            ]
            writer.write_snapshot("gpu-node-7", T0 + h * hour, facts, [], {})
    with History.open(db, "gpu-node-7") as history:
        context = plain(
            investigate(
                history, When(at=from_us(T0 + hours * hour)), None, InvestigateOptions(top=None)
            )
        )
    reasons = {s["changes"][0]["key"]: s["reasons"] for s in context["suspects"]}
    month = "the 721 records of the 30 days before the baseline"  # hours 240..960
    assert f"never changed in {month}" in reasons["env:OLD"]
    assert any(r.startswith(f"changed once in {month}") for r in reasons["env:RECENT"])
    assert context["suspects"][0]["changes"][0]["key"] == "env:OLD"
