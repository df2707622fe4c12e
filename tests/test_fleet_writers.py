"""Many hosts writing one history at once: on PostgreSQL every record lands once, whole, with
no deadlock, and a fresh database is migrated once however many start on it; on SQLite
concurrent writers wait their turn (busy timeout) and lose nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift, start_drift
from fleet_writer import START, expected_state
from postgres_server import postgres_server

from drift.store.query import History
from drift.store.schema import HEAD_REVISION
from drift.store.urls import resolve_db_url

WRITER = str(Path(__file__).with_name("fleet_writer.py"))


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    with postgres_server("-c max_connections=60") as url:
        yield url


def fresh_database(server: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server.rsplit('/', 1)[0]}/{name}"


def write_concurrently(
    db: str, hosts: dict[str, bool], records: int, tick: float = 0.0
) -> dict[str, list[int]]:
    """Start one writer process per host at once, each writing a record every `tick`
    seconds from the same moment; wait for all; the snapshot ids each wrote."""
    start = time.time() + 2  # every writer started and connected by then
    procs = {
        host: subprocess.Popen(
            [
                sys.executable,
                WRITER,
                db,
                host,
                str(records),
                "shared" if hosts[host] else "own",
                str(start),
                str(tick),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for host in hosts
    }
    ids: dict[str, list[int]] = {}
    failures = []
    for host, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            failures.append(f"{host}: exit {proc.returncode}\n{err[-2000:]}")
        else:
            ids[host] = json.loads(out)
    assert not failures, "\n".join(failures)
    return ids


def check_every_state(db: str, ids: dict[str, list[int]], hosts: dict[str, bool]) -> None:
    """Each host has exactly its records, in order, each with the state its writer wrote."""
    url = resolve_db_url(db)
    for host, written in ids.items():
        with History.open(url, host) as history:
            snaps = history.snapshots_between(0, history.latest().id)
            assert [s.id for s in snaps] == written, host
            assert [s.taken_us for s in snaps] == [
                START + i * 60_000_000 for i in range(len(written))
            ]
            for i, snap in enumerate(snaps):
                state = history.state_at(snap.id)
                got = {ident: history.text(v) for ident, v in state.items()}
                assert got == expected_state(host, i, hosts[host]), (host, i)
    every = [i for written in ids.values() for i in written]
    assert len(every) == len(set(every)), "two records got one snapshot"


def deadlocks(db: str) -> int:
    import psycopg

    with psycopg.connect(db) as conn:
        row = conn.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def test_sixteen_hosts_record_a_hundred_times_each_into_one_postgres(pg_server: str) -> None:
    db = fresh_database(pg_server, "fleet")
    # Half the hosts write facts of their own; the other half the same subjects, values,
    # provenances and long outputs as each other, changing at the same records.
    hosts = {f"gpu-node-{n:02d}": n >= 8 for n in range(16)}
    # Racing first records on a fresh database: one migrates it, the others wait for it.
    ids = write_concurrently(db, hosts, 100, tick=0.15)
    assert deadlocks(db) == 0
    check_every_state(db, ids, hosts)


def test_racing_upgrades_and_first_records_migrate_a_fresh_postgres_once(
    pg_server: str, tmp_path: Path
) -> None:
    db = fresh_database(pg_server, "racing_upgrades")
    config = tmp_path / "drift.toml"
    config.write_text('[[commands]]\nname = "v"\nrun = "echo 1"\n')
    procs = [
        start_drift([*args, "--db", db], tmp_path)
        for n in range(4)
        for args in (
            ["db", "upgrade"],
            ["record", "--config", str(config), "--host", f"racer-{n}"],
        )
    ]
    results = [(p.args, *p.communicate(timeout=60), p.returncode) for p in procs]
    assert [r for r in results if r[3] != 0] == []
    upgraded = [out for args, out, _err, _rc in results if "upgrade" in args]
    # Exactly one process created the schema (a record that won the race says nothing).
    assert sum("upgraded schema (empty) -> " in out for out in upgraded) <= 1
    import psycopg

    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (HEAD_REVISION,)
        ]
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 4


def test_writers_sharing_one_sqlite_file_wait_their_turn_and_lose_nothing(
    tmp_path: Path,
) -> None:
    # Through the library, without `drift record`'s lock (which makes a second record of
    # one SQLite file exit 3 at once): the busy timeout queues the transactions.
    db = str(tmp_path / "fleet.db")
    hosts = {f"box-{n}": n > 0 for n in range(4)}
    ids = write_concurrently(db, hosts, 40)
    check_every_state(db, ids, hosts)


def test_overlapping_records_of_one_sqlite_file_store_or_exit_3_and_store_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "d.db"
    config = tmp_path / "drift.toml"
    config.write_text('[[commands]]\nname = "v"\nrun = "sleep 0.3"\n')
    run_drift(["init", "--config", str(config), "--db", str(db)], tmp_path)
    procs = [
        start_drift(
            ["record", "--config", str(config), "--db", str(db), "--host", f"h{n}"], tmp_path
        )
        for n in range(5)
    ]
    codes = [(p.communicate(timeout=60), p.returncode) for p in procs]
    assert {rc for _out, rc in codes} <= {0, 3}
    stored = sum(rc == 0 for _out, rc in codes)
    assert stored >= 1
    import sqlite3

    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone()[0] == stored
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
