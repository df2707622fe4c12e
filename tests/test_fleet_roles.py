"""The fleet's per-host roles (docs/fleet.md), applied as written to a real PostgreSQL: each
host records, marks and reads the fleet as before, and cannot write or delete another's rows.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg
import pytest
from conftest import run_drift
from postgres_server import postgres_server
from test_spool import host_config

from drift.demo import IncidentSandbox

DOC = Path(__file__).resolve().parent.parent / "docs" / "fleet.md"
HOST_TABLES = ("snapshots", "facts", "marks", "stat_cache")


def recipe() -> tuple[str, str]:
    """The fleet docs' SQL: the policies, and the statement that makes one host's role."""
    blocks = re.findall(r"```sql\n(.*?)```", DOC.read_text(), re.S)
    policies = next(b for b in blocks if "ROW LEVEL SECURITY" in b)
    role = next(b for b in blocks if 'CREATE ROLE "decode-1"' in b)
    return policies, role


def rows_of(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row a host owns, table by table, read as the owner."""
    with psycopg.connect(url) as conn:
        out = {
            "hosts": conn.execute("SELECT * FROM hosts ORDER BY id").fetchall(),
            "versions": conn.execute("SELECT * FROM versions ORDER BY id").fetchall(),
        }
        for table in HOST_TABLES:
            out[table] = conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
    return out


def test_a_hosts_role_cannot_write_or_delete_another_hosts_rows(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    policies, role = recipe()
    with postgres_server() as url:
        run_drift(["db", "upgrade", "--db", url], tmp_path)
        with psycopg.connect(url, autocommit=True) as owner:
            owner.execute(policies)
            owner.execute(policies)  # run again after an upgrade: safe
            for host in ("host-a", "host-b"):
                owner.execute(role.replace("decode-1", host))
        as_a, as_b = (url.replace("drift@", f"{h}@", 1) for h in ("host-a", "host-b"))
        a = host_config(sandbox, "a.toml", "host-a", as_a, None)
        b = host_config(sandbox, "b.toml", "host-b", as_b, None)
        for args in (a, b, b):
            run_drift(["record", *args], tmp_path)
        run_drift(["mark", "stable", "--note", "b works", *b], tmp_path)
        run_drift(["mark", "note", "--note", "a's own", *a], tmp_path)
        time.sleep(1.5)
        before = rows_of(url)

        # Through drift: host-a's role writing as host-b writes nothing.
        posing = host_config(sandbox, "posing.toml", "host-b", as_a, None)
        refused = run_drift(["record", *posing], tmp_path, check=False)
        marked = run_drift(["mark", "unstable", "--host", "host-b", *a], tmp_path, check=False)
        pruned = run_drift(
            ["prune", "--keep", "1s", "--host", "host-b", "--yes", *a], tmp_path, check=False
        )
        for result in (refused, marked, pruned):
            assert result.returncode in (1, 2), result.stderr  # refused by the server: exit 1
            assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
        assert rows_of(url) == before

        # Straight in SQL, as host-a: another host's rows are out of reach.
        with psycopg.connect(as_a, autocommit=True) as conn:
            b_id = conn.execute("SELECT id FROM hosts WHERE name = 'host-b'").fetchone()[0]
            b_facts = "SELECT id FROM facts WHERE host_id = %s"
            for sql in (
                *(f"DELETE FROM {t} WHERE host_id = %s" for t in HOST_TABLES),
                *(f"UPDATE {t} SET host_id = host_id WHERE host_id = %s" for t in HOST_TABLES),
                f"DELETE FROM versions WHERE fact_id IN ({b_facts})",
                f"UPDATE versions SET value = 'forged' WHERE fact_id IN ({b_facts})",
                "DELETE FROM hosts WHERE id = %s",
                "UPDATE hosts SET key_fingerprint = 'forged' WHERE id = %s",
            ):
                assert conn.execute(sql, (b_id,)).rowcount == 0, sql
            for sql, params in (
                (
                    "INSERT INTO marks (host_id, at_us, kind, note) VALUES (%s, 1, 'stable', 'x')",
                    (b_id,),
                ),
                ("UPDATE marks SET host_id = %s", (b_id,)),
                ("INSERT INTO hosts (name) VALUES ('host-c')", ()),
                ("DELETE FROM blobs", ()),
                ("UPDATE provenances SET content = content", ()),
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match=".") as denied:
                    conn.execute(sql, params)
                assert denied.value.sqlstate == "42501", sql
        assert rows_of(url) == before

        # Each host still records and marks its own, and reads the whole fleet.
        run_drift(["record", *a], tmp_path)
        run_drift(["mark", "stable", *a], tmp_path)
        compared = run_drift(["compare", "host-a", "host-b", *a], tmp_path)
        assert "host-a" in compared.stdout + compared.stderr
        shown = run_drift(["show", "--host", "host-b", "--format", "json", *a], tmp_path)
        assert '"drift_result_version"' in shown.stdout
        # The owner prunes any host's history.
        run_drift(["prune", "--keep", "1s", "--host", "host-b", "--yes", "--db", url, *b], tmp_path)
        b_snapshots = [row for row in rows_of(url)["snapshots"] if row[1] == b_id]
        assert len(b_snapshots) == 1  # of its two, the one at the horizon stays
