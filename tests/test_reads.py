"""Reading a long history: a window read as counts in SQL tells what reading every record
told, `drift history` pages newest first, and the state query's plan on PostgreSQL."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift
from postgres_server import postgres_server

from drift.analysis.diff import blind_spots
from drift.analysis.scope import config_switches
from drift.analysis.windows import clock_steps
from drift.facts import CollectionError, Fact
from drift.scope import ConfigInfo, Scope
from drift.store.query import History
from drift.store.urls import resolve_db_url
from drift.store.window import state_after, window_records, window_versions
from drift.store.writer import HistoryWriter
from drift.timespec import When

HOST = "reads-host"
MINUTE = 60_000_000
START = 1_790_000_000_000_000


def record_history(db: Path, records: int, seed: int) -> None:
    """`records` per-minute records with what a long history holds now and then: collection
    errors (runs of them), recording gaps, the clock stepped back, a config switched."""
    rng = random.Random(seed)
    configs = [
        ConfigInfo(f"/etc/drift/{name}.toml", name * 8, Scope(commands=("load", name)))
        for name in ("a", "b")
    ]
    at, config, failing = START, 0, 0
    with HistoryWriter.open(resolve_db_url(str(db))) as writer:
        for i in range(records):
            roll = rng.random()
            if roll < 0.03:
                at += rng.choice([7, 20, 90]) * MINUTE  # a gap
            elif roll < 0.05:
                at -= rng.choice([1, 5]) * MINUTE  # the clock went back
            else:
                at += MINUTE + rng.randrange(-2, 3) * 1_000_000
            if rng.random() < 0.02:
                config = 1 - config
            if failing == 0 and rng.random() < 0.04:
                failing = rng.randrange(1, 4)
            errors = [CollectionError("command:gpu", "stdout", "timed out")] if failing else []
            failing = max(failing - 1, 0)
            facts = [
                Fact("command:load", "stdout", str(rng.randrange(3))),
                Fact("service:decode", "pid", str(100 + i // 25)),
                Fact("health:ok", "ok", "true" if rng.random() < 0.9 else "false"),
                Fact("file:/k.py", "sha256", "a" * 64 if i < records // 2 else "b" * 64),
            ]
            writer.write_snapshot(HOST, at, facts, errors, {}, config=configs[config])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_window_read_in_sql_tells_what_every_record_tells(tmp_path: Path, seed: int) -> None:
    db = tmp_path / "drift.db"
    record_history(db, 400, seed)
    with History.open(resolve_db_url(str(db)), HOST) as history:
        configs = history.configs()
        last = history.latest()
        for first_id in (1, 2, 57, 200, 399, last.id):
            first = history.snapshot_for(When(snapshot=first_id))
            every = history.snapshots_between(first.id, last.id)
            before = history.state_at(first.id)
            after = state_after(history, before, first.id, last.id)
            assert after == history.state_at(last.id)

            inside = window_versions(history, first.id, last.id, ("service:",))
            changed_at = {v.first_snapshot_id for v in inside.versions}
            middle = [every[len(every) // 2].taken_us] if every else []
            records = window_records(history, first, last, changed_at, middle)
            kept = records.snapshots
            assert records.count == len(every)
            assert records.with_errors == sum(1 for s in every if s.n_errors)
            assert (kept[-1] if kept else first) == (every[-1] if every else first)
            assert {s.id for s in kept} <= {s.id for s in every}
            if every:  # a record named by its time is kept
                assert any(s.taken_us == middle[0] for s in kept)
            assert blind_spots(first, kept, (records.usual_us or 0, records.gaps)) == blind_spots(
                first, every
            )
            assert clock_steps([first, *kept]) == clock_steps([first, *every])
            assert config_switches([first, *kept], configs) == config_switches(
                [first, *every], configs
            )
            # Every record of a value's start is kept, with the record before it.
            position = {s.id: i for i, s in enumerate([first, *every])}
            for snap_id in changed_at:
                assert snap_id in {s.id for s in kept}
                assert [first, *every][position[snap_id] - 1] in [first, *kept]
            assert len(kept) < len(every) or len(every) < 40

            counts: dict[tuple[str, str], int] = {}
            for v in history.versions_of("*"):
                if first.id < v.first_snapshot_id <= last.id:
                    counts[(v.subject, v.key)] = counts.get((v.subject, v.key), 0) + 1
            assert inside.counts == counts


def test_history_shows_the_newest_values_first_and_says_how_many_it_left_out(
    tmp_path: Path,
) -> None:
    db = tmp_path / "drift.db"
    with HistoryWriter.open(resolve_db_url(str(db))) as writer:
        for i in range(30):
            writer.write_snapshot(
                HOST, START + i * MINUTE, [Fact("command:tick", "stdout", f"tick {i}")], [], {}
            )
    args = ["--db", str(db), "--host", HOST]
    text = run_drift(["history", "tick", *args], tmp_path).stdout
    shown = [line.strip() for line in text.splitlines() if line.strip().startswith("= ")]
    assert shown == [f"= tick {i}" for i in range(29, 9, -1)]
    assert (
        "... and 10 older values (the newest 20 shown: --limit N shows more, --all every one)"
        in text
    )

    (fact,) = json.loads(
        run_drift(["history", "tick", "--limit", "3", "--format", "json", *args], tmp_path).stdout
    )["data"]["facts"]
    assert [v["value"] for v in fact["versions"]] == ["tick 29", "tick 28", "tick 27"]
    assert fact["older"] == 27 and fact["versions"][0]["until_snapshot"] is None
    assert fact["versions"][1]["until_snapshot"] == fact["versions"][0]["from_snapshot"]

    every = run_drift(["history", "tick", "--all", *args], tmp_path).stdout
    assert every.count("      = tick ") == 30 and "older value" not in every
    refused = run_drift(["history", "tick", "--limit", "0", *args], tmp_path, check=False)
    assert refused.returncode == 2 and "--limit" in refused.stderr


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


def test_the_state_query_is_an_index_seek_per_fact_on_postgres_before_and_after_analyze(
    pg_url: str,
) -> None:
    """Before its first ANALYZE PostgreSQL has no statistics to plan a correlated max() from;
    the state query's shape (a LATERAL seek per fact) must not depend on them."""
    import psycopg

    db = resolve_db_url(pg_url)
    facts = [Fact("file:/k.py", f"line:{i}", str(i)) for i in range(2_000)]
    with HistoryWriter.open(db) as writer:
        for i in range(3):
            load = [Fact("command:load", "stdout", str(i))]
            writer.write_snapshot(HOST, START + i * MINUTE, facts + load, [], {})
    # A year of a command changing every minute, in the writer's shape, without its minutes.
    minutes = 40_000
    with psycopg.connect(pg_url, autocommit=True) as pg:
        host_id, config, first = pg.execute(
            "SELECT host_id, config_id, max(id) + 1 FROM snapshots GROUP BY host_id, config_id"
        ).fetchone()
        (fact_id,) = pg.execute("SELECT id FROM facts WHERE subject = 'command:load'").fetchone()
        with pg.cursor().copy(
            "COPY snapshots (id, host_id, taken_us, duration_ms, n_facts, n_changed, n_errors, "
            "config_id) FROM STDIN"
        ) as copy:
            for i in range(minutes):
                copy.write_row(
                    (first + i, host_id, START + (3 + i) * MINUTE, 1, 2_001, 1, 0, config)
                )
        pg.execute(
            "UPDATE versions SET until_snapshot_id = %s "
            "WHERE fact_id = %s AND until_snapshot_id IS NULL",
            (first, fact_id),
        )
        with pg.cursor().copy(
            "COPY versions (fact_id, value, secret, first_snapshot_id, until_snapshot_id) "
            "FROM STDIN"
        ) as copy:
            for i in range(minutes):
                until = first + i + 1 if i < minutes - 1 else None
                copy.write_row((fact_id, f"load {i}", False, first + i, until))
        pg.execute(
            "SELECT setval(pg_get_serial_sequence('snapshots', 'id'), %s)", (first + minutes,)
        )
        analyzed = pg.execute(
            "SELECT count(*) FROM pg_stats WHERE tablename = 'versions'"
        ).fetchone()[0]

        with History.open(db, HOST) as history:
            for _ in ("before", "after"):
                for at in (first + minutes // 2, history.latest().id):
                    sql, params = history.state_sql(at)
                    plan = "\n".join(
                        r[0] for r in pg.execute("EXPLAIN " + sql.replace("?", "%s"), params)
                    )
                    assert "Backward using ix_versions_fact_first" in plan, plan
                    # Never every version read to pick each fact's newest.
                    assert "Seq Scan on versions" not in plan, plan
                    assert "Bitmap Heap Scan on versions" not in plan, plan
                    state = history.state_at(at)
                    assert len(state) == 2_001
                    load = state[("command:load", "stdout")]
                    assert history.text(load) == f"load {at - first}"
                pg.execute("ANALYZE")
    assert analyzed == 0  # the first pass ran on a database without statistics


def test_a_script_line_that_only_moved_is_no_value_of_the_window(tmp_path: Path) -> None:
    """A line added above an export moves it: the writer keeps the new line as a version
    with the same value, which is no change, so it is never told as changed and back."""
    db = tmp_path / "drift.db"
    script = "script:/opt/serve/decode.sh"

    def facts(line: int, added: bool) -> list[Fact]:
        out = [Fact(script, "export:PORT", "30001", {"file": "/opt/serve/decode.sh", "line": line})]
        if added:
            out.append(
                Fact(script, "export:NEW", "512", {"file": "/opt/serve/decode.sh", "line": 2})
            )
        return out

    with HistoryWriter.open(resolve_db_url(str(db))) as writer:
        for i, (line, added) in enumerate([(2, False), (2, False), (3, True), (3, True)]):
            writer.write_snapshot(HOST, START + i * MINUTE, facts(line, added), [], {})
    with History.open(resolve_db_url(str(db)), HOST) as history:
        counts = history.counts_between(2, 4)
    assert counts == {(script, "export:NEW"): 1}
    out = run_drift(["diff", "#2", "#4", "--db", str(db), "--host", HOST], tmp_path).stdout
    assert "export:PORT" not in out.split("Verified unchanged")[0]
    assert "changed 0 times" not in out


def test_the_state_query_seeks_each_facts_version_on_sqlite(tmp_path: Path) -> None:
    """The state at a snapshot is one seek per fact, never a walk over a fact's later
    versions: a command that changed every minute for a year has half a million."""
    db = tmp_path / "drift.db"
    record_history(db, 60, seed=4)
    with History.open(resolve_db_url(str(db)), HOST) as history:
        for began_after in (0, 10):
            sql, params = history.state_sql(30, began_after=began_after)
            plan = [r[-1] for r in history.rows("EXPLAIN QUERY PLAN " + sql, params)]
            version = [p for p in plan if p.startswith("SEARCH v ")]
            assert version == [
                "SEARCH v USING INDEX ix_versions_fact_first (fact_id=? AND first_snapshot_id=?)"
            ], plan
