"""Ranking over a day of per-minute history, written through the store API."""

from __future__ import annotations

from pathlib import Path

from drift.facts import Fact
from drift.report import since_context
from drift.store.db import resolve_db_url
from drift.store.query import History
from drift.store.writer import HistoryWriter
from drift.timespec import When

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
        context = since_context(history, When(snapshot=ids[1200], text="#1200"), None, top=None)
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
