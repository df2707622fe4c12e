"""A history as schema 0005's writer stored it, for the tests of migration 0006.

Today's writer records a few states into one database; the same history goes,
row by row, into another at revision 0005 the way 0005's writer stored it: a
script's content and a command's output always in a blob (sha256 hex, size,
zlib level 6), every version with its provenance's JSON. Upgraded, the second
must hold and read exactly what the first does. Works on SQLite and PostgreSQL.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

from alembic import command
from sqlalchemy import text

from drift.facts import Fact
from drift.store.db import open_engine
from drift.store.schema import alembic_config, upgrade_database
from drift.store.urls import DbUrl
from drift.store.writer import HistoryWriter

HOST = "old"
T0 = 1_788_220_800_000_000  # 2026-09-01 00:00 UTC
MINUTE = 60_000_000
TEXT_KEYS = ("content", "stdout")  # what 0005's writer always stored in blobs

_ENV = {"pid": 7, "source": "/proc/7/environ"}
_SCRIPT = {"file": "/opt/a.sh", "service": "a"}
_LOAD = {"run": "cat /proc/loadavg"}


def _state(load: str, script_line: int, pid: str, env_b: bool) -> list[Fact]:
    script = "#!/bin/sh\n" + "\n" * (script_line - 2) + "export A=1\nexec serve\n"
    facts = [
        Fact("service:a", "pid", pid, {"pid": int(pid), "found_by": "pidfile /run/a.pid"}),
        Fact("service:a", "env:A", "1", _ENV),
        Fact("service:a", "env:TOKEN", "k1:9f86d081884c7d65", _ENV, secret=True),
        Fact("service:a", "python:path", "/opt/lib/python3.11/site-packages\n" * 20, _ENV),
        Fact("script:/opt/a.sh", "content", script, _SCRIPT),
        Fact(
            "script:/opt/a.sh",
            "export:A",
            "1",
            {**_SCRIPT, "line": script_line, "text": "export A=1"},
        ),
        Fact("command:load", "stdout", load, _LOAD),
        Fact("command:load", "exit", "0", _LOAD),
        Fact("command:big", "stdout", "x" * 600 + "\n", {"run": "big"}),
        Fact("command:bin", "stdout", "a\0b\n", {"run": "printf 'a\\0b'"}),
        Fact("command:token", "stdout", "k1:2c26b46b68ffc68f", {"run": "token"}, secret=True),
    ]
    if env_b:
        facts.insert(2, Fact("service:a", "env:B", "2", _ENV))
    return facts


# Three records: the loadavg line changes and changes back, a variable goes, the
# serve script's export moves a line down (a new version, no change), the service
# restarts. Then two more after the upgrade: unchanged, and a new loadavg line.
STATES = [
    _state("0.10 0.20 0.30 1/300 4242\n", 2, "7", True),
    _state("0.40 0.50 0.60 2/300 4243\n", 3, "8", False),
    _state("0.10 0.20 0.30 1/300 4242\n", 3, "8", False),
]
LATER = [STATES[-1], _state("0.70 0.80 0.90 1/301 4244\n", 3, "8", False)]


def record(db: DbUrl, states: list[list[Fact]], first_minute: int = 0) -> list[int]:
    """Record `states` one a minute with today's writer; the number of changes of each."""
    with HistoryWriter.open(db) as writer:
        return [
            writer.write_snapshot(HOST, T0 + (first_minute + i) * MINUTE, facts, [], {}).changed
            for i, facts in enumerate(states)
        ]


def write_as_0005(source: DbUrl, target: DbUrl) -> None:
    """`target` at revision 0005, holding `source`'s history as 0005's writer stored it."""
    rows = _rows(source)
    engine = open_engine(target)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0005")
            for table in ("hosts", "configs", "snapshots", "facts"):
                _insert(conn, table, rows[table])
            blobs = {r["sha256"]: r for r in rows["blobs"]}
            versions = []
            for v in rows["versions"]:
                v = dict(v)
                if v.pop("key") in TEXT_KEYS and v["value"] is not None:
                    data = v["value"].encode("utf-8", "surrogateescape")
                    sha = hashlib.sha256(data).hexdigest()
                    blobs.setdefault(
                        sha, {"sha256": sha, "size": len(data), "content": zlib.compress(data, 6)}
                    )
                    v["value"], v["blob_sha256"] = None, sha
                versions.append(v)
            _insert(conn, "blobs", list(blobs.values()))
            _insert(conn, "versions", versions)
            if conn.dialect.name == "postgresql":  # ids were given: move the sequences on
                for table in ("hosts", "configs", "snapshots", "facts", "versions"):
                    conn.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                            f"coalesce((SELECT max(id) FROM {table}), 1))"
                        )
                    )
    finally:
        engine.dispose()


def _rows(db: DbUrl) -> dict[str, list[dict[str, Any]]]:
    queries = {
        "hosts": "SELECT id, name, key_fingerprint FROM hosts ORDER BY id",
        "configs": "SELECT id, path, digest, scope FROM configs ORDER BY id",
        "snapshots": (
            "SELECT id, host_id, taken_us, duration_ms, n_facts, n_changed, n_errors, errors, "
            "state_digest, config_id FROM snapshots ORDER BY id"
        ),
        "facts": "SELECT id, host_id, subject, key FROM facts ORDER BY id",
        "blobs": "SELECT sha256, size, content FROM blobs ORDER BY sha256",
        "versions": (
            "SELECT v.id, v.fact_id, f.key, v.value, v.blob_sha256, v.secret, "
            "v.first_snapshot_id, v.until_snapshot_id, p.content AS provenance "
            "FROM versions v JOIN facts f ON f.id = v.fact_id "
            "LEFT JOIN provenances p ON p.id = v.provenance_id ORDER BY v.id"
        ),
    }
    engine = open_engine(db)
    try:
        with engine.connect() as conn:
            return {
                t: [dict(r._mapping) for r in conn.execute(text(q))] for t, q in queries.items()
            }
    finally:
        engine.dispose()


def _insert(conn: Any, table: str, rows: list[dict[str, Any]]) -> None:
    if rows:
        columns = list(rows[0])
        conn.execute(
            text(
                f"INSERT INTO {table} ({', '.join(columns)}) "
                f"VALUES ({', '.join(':' + c for c in columns)})"
            ),
            rows,
        )


def rows_0005(db: DbUrl) -> dict[str, list[dict[str, Any]]]:
    """The versions and blobs of a history at revision 0005."""
    engine = open_engine(db)
    try:
        with engine.connect() as conn:
            return {
                "versions": [
                    dict(r._mapping)
                    for r in conn.execute(
                        text(
                            "SELECT id, fact_id, value, blob_sha256, secret, first_snapshot_id, "
                            "until_snapshot_id, provenance FROM versions ORDER BY id"
                        )
                    )
                ],
                "blobs": [
                    dict(r._mapping)
                    for r in conn.execute(
                        text("SELECT sha256, size, content FROM blobs ORDER BY sha256")
                    )
                ],
            }
    finally:
        engine.dispose()


def stored(db: DbUrl) -> dict[str, Any]:
    """What a history at head holds (how long each record took aside)."""
    rows = _rows(db)
    return {
        "snapshots": [
            {k: v for k, v in r.items() if k != "duration_ms"} for r in rows["snapshots"]
        ],
        "facts": rows["facts"],
        "versions": rows["versions"],
        "blobs": rows["blobs"],
    }


def upgrades_losslessly(new: DbUrl, old: DbUrl, read_alike: Any = None) -> None:
    """Record STATES into `new`, write them into `old` as 0005 did, and upgrade `old`.

    Then `old` must hold what `new` does (and `read_alike()` may compare how they
    read), give back exactly its 0005 rows when downgraded, and after upgrading
    again take the same next records as `new`.
    """
    assert record(new, STATES) == [12, 4, 1]  # a moved export line is stored, not a change
    write_as_0005(new, old)
    before = rows_0005(old)
    upgrade_database(old)
    assert stored(old) == stored(new)
    if read_alike is not None:
        read_alike()
    engine = open_engine(old)
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0005")
    finally:
        engine.dispose()
    assert rows_0005(old) == before
    upgrade_database(old)
    assert stored(old) == stored(new)
    # The writer carries on alike: an unchanged record, then a new loadavg line.
    assert record(old, LATER, 3) == record(new, LATER, 3) == [0, 1]
    assert stored(old) == stored(new)
