"""`drift prune`: the history older than a horizon goes, and the state at every kept record
reads as it did, on SQLite and PostgreSQL, with a record writing meanwhile."""

from __future__ import annotations

import itertools
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_drift
from fleet_writer import MINUTE, START, expected_state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from postgres_server import postgres_server

from drift.facts import CollectionError, Fact
from drift.store.db import connect_dbapi
from drift.store.prune import prune_history
from drift.store.query import History
from drift.store.urls import DbUrl, resolve_db_url
from drift.store.writer import HistoryWriter, add_mark

WRITER = str(Path(__file__).with_name("fleet_writer.py"))
LONG = "line of a long output\n" * 30  # past what is kept inline: a blob

# A record: for each of a few facts, absent (None) or one of a few values; the values
# past 512 characters go to blobs, the script fact's line (its provenance) moves.
IDENTS = [
    ("service:decode", "pid"),
    ("service:decode", "env:CTAS"),
    ("script:/opt/serve/decode.sh", "export:CTAS"),
    ("command:driver", "stdout"),
    ("file:/etc/serve.json", "sha256"),
]
record_strategy = st.tuples(
    st.lists(
        st.one_of(st.none(), st.sampled_from(["1", "2", "3", LONG, LONG + "x"])),
        min_size=5,
        max_size=5,
    ),
    st.integers(1, 3),  # the script line
    st.booleans(),  # a collection error on the service
)
history_strategy = st.lists(record_strategy, min_size=1, max_size=25)
# Two hosts' histories, a horizon (in minutes) and stable marks (minutes).
two_hosts = given(
    one=history_strategy,
    two=history_strategy,
    horizon=st.integers(0, 30),
    marks=st.lists(st.integers(0, 25), max_size=4),
)


def examples(n: int) -> Any:
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def facts_of(
    record: tuple[list[str | None], int, bool],
) -> tuple[list[Fact], list[CollectionError]]:
    values, line, failing = record
    facts = [
        Fact(
            subject,
            key,
            value,
            {"file": subject[7:], "line": line} if subject.startswith("script:") else {"run": key},
        )
        for (subject, key), value in zip(IDENTS, values, strict=True)
        if value is not None
    ]
    errors = [CollectionError("service:decode", None, "cannot read /proc")] if failing else []
    return facts, errors


def seen(history: History, snapshot: int) -> dict[tuple[str, str], Any]:
    """The state at a snapshot as a user sees it: each fact's text, secrecy and provenance."""
    return {
        ident: (history.text(v), v.secret, v.provenance, v.until_snapshot_id)
        for ident, v in history.state_at(snapshot).items()
    }


def write_history(db: DbUrl, host: str, records: list[Any], marks: list[int]) -> list[int]:
    ids = []
    with HistoryWriter.open(db) as writer:
        for i, record in enumerate(records):
            facts, errors = facts_of(record)
            ids.append(
                writer.write_snapshot(host, START + i * MINUTE, facts, errors, {}).snapshot_id
            )
    for minute in marks:
        add_mark(db, host, "stable", START + minute * MINUTE + 1, f"at {minute}")
    return ids


def check_prune_keeps_every_kept_state(
    db: DbUrl, hosts: dict[str, list[Any]], horizon: int, marks: list[int]
) -> None:
    ids = {host: write_history(db, host, records, marks) for host, records in hosts.items()}
    before: dict[str, dict[int, Any]] = {}
    for host, written in ids.items():
        with History.open(db, host) as history:
            before[host] = {s: seen(history, s) for s in written}
    horizon_us = START + horizon * MINUTE + MINUTE // 2
    prune_history(db, horizon_us)
    for host, written in ids.items():
        # The last record at or before the horizon is the first kept.
        first = written[min(horizon, len(written) - 1)]
        with History.open(db, host) as history:
            kept = [s.id for s in history.snapshots_between(0, history.latest().id)]
            assert kept == [s for s in written if s >= first]
            for s in kept:
                assert seen(history, s) == before[host][s], (host, s)
            assert all(m.at_us >= history.first().taken_us for m in history.marks())
            assert len(history.marks()) == sum(
                START + m * MINUTE + 1 >= history.first().taken_us for m in marks
            )
    conn = connect_dbapi(db)
    try:
        # Nothing kept that no value uses, nothing used that is gone.
        missing = "NOT EXISTS (SELECT 1 FROM {} x WHERE x.{} = v.{})"
        unused = [
            "SELECT count(*) FROM blobs WHERE sha256 NOT IN "
            "(SELECT blob_sha256 FROM versions WHERE blob_sha256 IS NOT NULL)",
            "SELECT count(*) FROM provenances WHERE id NOT IN "
            "(SELECT provenance_id FROM versions WHERE provenance_id IS NOT NULL)",
            "SELECT count(*) FROM versions v WHERE v.blob_sha256 IS NOT NULL AND "
            + missing.format("blobs", "sha256", "blob_sha256"),
            "SELECT count(*) FROM versions v WHERE "
            + missing.format("snapshots", "id", "first_snapshot_id"),
            "SELECT count(*) FROM versions v WHERE v.until_snapshot_id IS NOT NULL AND "
            + missing.format("snapshots", "id", "until_snapshot_id"),
        ]
        assert [conn.execute(sql).fetchone()[0] for sql in unused] == [0] * len(unused)
        if conn.dialect == "sqlite":
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()
    # The next record compares with what was kept: a change, then nothing.
    for host, records in hosts.items():
        facts, _errors = facts_of(records[-1])
        with HistoryWriter.open(db) as writer:
            later = START + (len(records) + 5) * MINUTE
            writer.write_snapshot(host, later, facts, [], {})
            again = writer.write_snapshot(host, later + MINUTE, facts, [], {})
        assert again.changed == 0
        with History.open(db, host) as history:
            assert {i: history.text(v) for i, v in history.state_at(again.snapshot_id).items()} == {
                (f.subject, f.key): f.value for f in facts
            }


@examples(40)
@two_hosts
def test_state_at_every_kept_record_is_the_same_after_a_prune_on_sqlite(
    tmp_path_factory: pytest.TempPathFactory,
    one: list[Any],
    two: list[Any],
    horizon: int,
    marks: list[int],
) -> None:
    db = resolve_db_url(str(tmp_path_factory.mktemp("prune") / "drift.db"))
    # Two hosts sharing values (blobs, provenances): one's prune must keep what the other uses.
    check_prune_keeps_every_kept_state(db, {"one": one, "two": two}, horizon, marks)


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


_databases = itertools.count()


def fresh_pg(server: str) -> DbUrl:
    import psycopg

    name = f"prune_{next(_databases)}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return resolve_db_url(f"{server.rsplit('/', 1)[0]}/{name}")


@examples(6)
@two_hosts
def test_state_at_every_kept_record_is_the_same_after_a_prune_on_postgres(
    pg_url: str, one: list[Any], two: list[Any], horizon: int, marks: list[int]
) -> None:
    check_prune_keeps_every_kept_state(fresh_pg(pg_url), {"one": one, "two": two}, horizon, marks)


def snapshot_count(db: DbUrl, host: str) -> int:
    conn = connect_dbapi(db)
    try:
        row = conn.execute(
            "SELECT count(*) FROM snapshots s JOIN hosts h ON h.id = s.host_id WHERE h.name = ?",
            (host,),
        ).fetchone()
        return int(row[0])
    finally:
        conn.close()


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_a_prune_while_the_host_records_loses_no_record(
    store: str, pg_url: str, tmp_path: Path
) -> None:
    db = resolve_db_url(str(tmp_path / "d.db")) if store == "sqlite" else fresh_pg(pg_url)
    host, records = "busy-node", 400
    writer = subprocess.Popen(
        [
            sys.executable,
            WRITER,
            db.url if store != "sqlite" else str(db.sqlite_path),
            host,
            str(records),
            "shared",
            "0",
            "0.01",  # a record every 10 ms at most: four seconds of writing
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if snapshot_count(db, host) >= 150:
                    break
            except Exception:  # the writer is still creating the database  # noqa: BLE001
                pass
            time.sleep(0.05)
        # Prune again and again while the writer goes on past the horizon.
        prune_history(db, START + 100 * MINUTE)
        assert writer.poll() is None, "the writer finished before the prune: nothing tested"
        for _ in range(4):
            prune_history(db, START + 100 * MINUTE)
    finally:
        out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    import json

    written = json.loads(out)
    prune_history(db, START + 100 * MINUTE)
    with History.open(db, host) as history:
        kept = history.snapshots_between(0, history.latest().id)
        assert [s.id for s in kept] == written[100:]
        for i, snap in zip(range(100, records), kept, strict=True):
            got = {ident: history.text(v) for ident, v in history.state_at(snap.id).items()}
            assert got == expected_state(host, i, True), i


def cli_history(tmp_path: Path, keep: str | None = None) -> tuple[Path, list[str]]:
    """A history recorded a minute apart at old times, and the options to reach it."""
    db = tmp_path / "d.db"
    url = resolve_db_url(str(db))
    ancient = START  # 2026-09: long before now
    with HistoryWriter.open(url) as writer:
        for i in range(6):
            value = "old" if i < 3 else "new"
            writer.write_snapshot(
                "cli-host", ancient + i * MINUTE, [Fact("command:v", "stdout", value)], [], {}
            )
        writer.write_snapshot(
            "cli-host",
            int(time.time() * 1e6) - MINUTE,
            [Fact("command:v", "stdout", "now")],
            [],
            {},
        )
    add_mark(url, "cli-host", "stable", ancient + 2 * MINUTE, "old")
    config = tmp_path / "drift.toml"
    config.write_text('host = "cli-host"\n' + (f'keep = "{keep}"\n' if keep else ""))
    return db, ["--config", str(config), "--db", str(db)]


def test_drift_prune_dry_run_changes_nothing_and_prune_drops_what_it_said(tmp_path: Path) -> None:
    db, cfg = cli_history(tmp_path, keep="1d")
    before = db.read_bytes()
    dry = run_drift(["prune", "--dry-run", *cfg], tmp_path).stdout
    assert dry.startswith("cli-host: history begins at #6 (")
    assert (
        "would drop 5 records, 1 value, 1 mark (1 stable); 1 value held then now begins there"
        in dry
    )
    assert db.read_bytes() == before
    # It drops a stable mark: not without --yes.
    asked = run_drift(["prune", *cfg], tmp_path, check=False)
    assert asked.returncode == 2 and "pass --yes" in asked.stderr
    out = run_drift(["prune", "--yes", *cfg], tmp_path).stdout
    assert out.startswith(dry.splitlines()[0].replace("would drop", "dropped")[:40])
    assert "dropped 5 records, 1 value, 1 mark (1 stable)" in out
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 2
        assert conn.execute("SELECT count(*) FROM marks").fetchone()[0] == 0
    # --keep wins over the config's keep; nothing older now
    again = run_drift(["prune", "--keep", "2d", *cfg], tmp_path).stdout
    assert "nothing older than" in again
    # Reads across the horizon say where the history begins.
    diff = run_drift(["diff", "#2", "#7", *cfg], tmp_path, check=False)
    assert diff.returncode == 2
    assert "no snapshot #2 for host 'cli-host' (its history begins at #6, " in diff.stderr
    since = run_drift(["diff", "#6", "#7", *cfg], tmp_path).stdout
    assert "now" in since
    history = run_drift(["history", "command:v", *cfg], tmp_path).stdout
    assert "(#6, where the history begins) to " in history
    assert "= new" in history and "= old" not in history


@pytest.mark.parametrize(
    ("args", "toml", "message"),
    [
        (["--keep", "90x"], "", "'90x' is not a length of time"),
        (["--keep", "0d"], "", "'0d' keeps nothing"),
        ([], 'keep = "soon"\n', "keep: 'soon' is not a length of time"),
        ([], "keep = 90\n", "keep: expected a string, got an integer"),
        ([], "", "how much to keep? give --keep 90d"),
    ],
)
def test_a_bad_keep_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], toml: str, message: str
) -> None:
    config = tmp_path / "drift.toml"
    config.write_text(toml)
    result = run_drift(
        ["prune", *args, "--config", str(config), "--db", str(tmp_path / "d.db")],
        tmp_path,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_prune_with_host_prunes_only_that_hosts_history(tmp_path: Path) -> None:
    db, cfg = cli_history(tmp_path, keep="1d")
    with HistoryWriter.open(resolve_db_url(str(db))) as writer:
        for i in range(3):
            facts = [Fact("command:v", "stdout", str(i))]
            writer.write_snapshot("other-host", START + i * MINUTE, facts, [], {})
    # Another host's history is another writer's: named once, nothing is dropped.
    refused = run_drift(["prune", "--host", "other-host", *cfg], tmp_path, check=False)
    assert refused.returncode == 2 and refused.stderr == (
        "drift: nothing dropped: other-host is not this host (cli-host); to prune another "
        "host's history name it twice: drift prune --host other-host --yes\n"
    )
    assert snapshot_and_mark_counts(db)[0] == 10
    out = run_drift(["prune", "--host", "other-host", "--yes", *cfg], tmp_path).stdout
    assert out.startswith(
        "pruning host other-host's history, not this host's (cli-host): named by --host and "
        "confirmed by --yes\nother-host: history begins at #"
    )
    assert "cli-host:" not in out
    with sqlite3.connect(db) as conn:
        per_host = dict(
            conn.execute(
                "SELECT h.name, count(*) FROM snapshots s JOIN hosts h ON h.id = s.host_id "
                "GROUP BY h.name"
            ).fetchall()
        )
    assert per_host == {"cli-host": 7, "other-host": 1}


def snapshot_and_mark_counts(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as conn:
        snaps = conn.execute("SELECT count(*) FROM snapshots").fetchone()[0]
        marks = conn.execute("SELECT count(*) FROM marks").fetchone()[0]
    return int(snaps), int(marks)


def test_keep_in_m_is_refused_as_minutes_or_months(sandbox: Any, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["mark", "stable", *cfg], tmp_path)
    time.sleep(1.1)
    run_drift(["record", *cfg], tmp_path)
    before = snapshot_and_mark_counts(sandbox.db_path)
    for keep in ("6m", "6M", "1w 6m"):
        for extra in ([], ["--yes"], ["--dry-run"]):
            result = run_drift(["prune", "--keep", keep, *extra, *cfg], tmp_path, check=False)
            assert (result.returncode, result.stdout) == (2, ""), result.stderr
            amount = keep.split()[-1][:-1]
            assert result.stderr == (
                f"drift: {keep!r} is ambiguous: say {amount}min for minutes or {amount}mo "
                "for months\n"
            )
    assert snapshot_and_mark_counts(sandbox.db_path) == before
    # The same in drift.toml: refused before anything is read or dropped.
    text = sandbox.config_path.read_text()
    sandbox.config_path.write_text(
        text.replace('host = "gpu-node-7"\n', 'host = "gpu-node-7"\nkeep = "6m"\n')
    )
    result = run_drift(["prune", *cfg], tmp_path, check=False)
    assert result.returncode == 2 and "keep: '6m' is ambiguous" in result.stderr
    sandbox.config_path.write_text(text)
    # Spelled out, both are lengths: six months keeps it all, six minutes too (seconds old).
    for keep in ("6mo", "6min", "6 months", "6 minutes"):
        out = run_drift(["prune", "--keep", keep, *cfg], tmp_path).stdout
        assert ": nothing older than " in out
    assert snapshot_and_mark_counts(sandbox.db_path) == before


def test_a_prune_that_drops_a_stable_mark_asks_for_yes(sandbox: Any, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["mark", "stable", "--note", "decode answers", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)
    sandbox.add_culprit()
    sandbox.restart_all()
    run_drift(["record", *cfg], tmp_path)
    time.sleep(1.1)
    before = snapshot_and_mark_counts(sandbox.db_path)
    assert before == (3, 1)
    # No terminal, no --yes: what it would drop, then one line saying how to go on.
    refused = run_drift(["prune", "--keep", "1s", *cfg], tmp_path, check=False)
    assert refused.returncode == 2
    assert refused.stdout.startswith("gpu-node-7: history begins at #3 (")
    assert "would drop 2 records, " in refused.stdout
    assert ", 1 mark (1 stable); " in refused.stdout
    assert refused.stderr == (
        "drift: nothing dropped: this would drop 1 stable mark of gpu-node-7; pass --yes to "
        "drop it (or --dry-run to only see what would go)\n"
    )
    assert snapshot_and_mark_counts(sandbox.db_path) == before
    dry = run_drift(["prune", "--keep", "1s", "--dry-run", *cfg], tmp_path)
    assert dry.stdout == refused.stdout
    assert snapshot_and_mark_counts(sandbox.db_path) == before
    done = run_drift(["prune", "--keep", "1s", "--yes", *cfg], tmp_path).stdout
    assert "gpu-node-7: history begins at #3 (" in done
    assert "dropped 2 records, " in done and ", 1 mark (1 stable); " in done
    assert snapshot_and_mark_counts(sandbox.db_path) == (1, 0)
    # What is kept still reads: the culprit is in the state of the one record left.
    shown = run_drift(["show", "SGLANG_SM120_MMA_TARGET_CTAS", *cfg], tmp_path).stdout
    assert "=512" in shown or "= 512" in shown


def days_history(tmp_path: Path) -> tuple[Path, list[str]]:
    """Records a day apart, long ago, and one now; no marks."""
    db = tmp_path / "d.db"
    url = resolve_db_url(str(db))
    with HistoryWriter.open(url) as writer:
        for i in range(4):
            fact = Fact("command:v", "stdout", f"day {i}")
            writer.write_snapshot("cli-host", START + i * 1440 * MINUTE, [fact], [], {})
        now = int(time.time() * 1e6) - MINUTE
        writer.write_snapshot("cli-host", now, [Fact("command:v", "stdout", "now")], [], {})
    config = tmp_path / "drift.toml"
    config.write_text('host = "cli-host"\n')
    return db, ["--config", str(config), "--db", str(db)]


def prune_on_a_terminal(args: list[str], tmp_path: Path, answer: bytes) -> tuple[int, bytes]:
    """Run `drift prune` with a terminal for stdin and stderr, answering its question."""
    import os
    import pty

    from conftest import DRIFT, drift_env, read_terminal

    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [DRIFT, "prune", *args],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=terminal,
        env=drift_env(tmp_path),
        cwd=tmp_path,
    )
    os.close(terminal)
    os.write(controller, answer)
    out, _ = proc.communicate(timeout=60)
    return proc.wait(), out + read_terminal(controller)


def test_a_prune_of_more_than_a_day_asks_on_a_terminal_and_refuses_without(
    tmp_path: Path,
) -> None:
    db, cfg = days_history(tmp_path)
    refused = run_drift(["prune", "--keep", "30d", *cfg], tmp_path, check=False)
    assert refused.returncode == 2
    assert "would drop 3 records, 3 values, 0 marks; 0 values held then now begin there" in (
        refused.stdout
    )
    assert refused.stderr.startswith(
        "drift: nothing dropped: this would drop 3 days of cli-host's history; pass --yes"
    )
    assert snapshot_and_mark_counts(db) == (5, 0)
    # On a terminal it asks; "n" keeps everything, "y" drops it.
    code, screen = prune_on_a_terminal(["--keep", "30d", *cfg], tmp_path, b"n\n")
    assert code == 1 and b"Drop 3 days of cli-host's history? [y/N]" in screen
    assert snapshot_and_mark_counts(db) == (5, 0)
    code, screen = prune_on_a_terminal(["--keep", "30d", *cfg], tmp_path, b"y\n")
    assert code == 0, screen
    assert b"dropped 3 records, 3 values, 0 marks" in screen
    assert snapshot_and_mark_counts(db) == (2, 0)
