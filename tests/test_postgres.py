"""The fleet case: the same models, migrations and record path on a real PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift
from postgres_server import postgres_server

from drift.store.db import HEAD_REVISION


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


def test_two_hosts_record_into_one_postgres_history(pg_url: str, tmp_path: Path) -> None:
    config = {}
    for host in ("gpu-node-7", "gpu-node-8"):
        path = tmp_path / f"{host}.toml"
        path.write_text(
            f'host = "{host}"\n[[commands]]\nname = "driver"\nrun = "echo 575.57"\n'
            f'[[commands]]\nname = "token"\nrun = "echo Authorization: Bearer '
            f'abcdefghijklmnopqrstuvwxyz123456"\n'
        )
        config[host] = ["--config", str(path), "--db", pg_url]
    init = run_drift(["init", *config["gpu-node-7"]], tmp_path).stdout
    assert f"created schema {HEAD_REVISION}" in init
    # snapshot numbers are shared by the fleet: node 7 gets #1, node 8 #2
    assert run_drift(["record", *config["gpu-node-7"]], tmp_path).stdout.startswith("snapshot #1:")
    assert run_drift(["record", *config["gpu-node-8"]], tmp_path).stdout.startswith("snapshot #2:")
    (tmp_path / "gpu-node-8.toml").write_text(
        (tmp_path / "gpu-node-8.toml").read_text().replace("575.57", "580.01")
    )
    out = run_drift(["record", *config["gpu-node-8"]], tmp_path).stdout
    assert out.startswith("snapshot #3: 4 facts, 1 changed")
    # an unchanged record takes the one-row path (state digest read back as bytea)
    again = run_drift(["record", *config["gpu-node-7"]], tmp_path).stdout
    assert again.startswith("snapshot #4: 4 facts, 0 changed")
    import psycopg

    with psycopg.connect(pg_url) as conn:
        digests = conn.execute(
            "SELECT id, state_digest FROM snapshots WHERE id IN (1, 4) ORDER BY id"
        ).fetchall()
    assert len(digests) == 2 and bytes(digests[0][1]) == bytes(digests[1][1])
    assert len(bytes(digests[0][1])) == 16
    since = json.loads(
        run_drift(
            ["since", "--stable", "#2", "--format", "json", *config["gpu-node-8"]], tmp_path
        ).stdout
    )["data"]
    assert [(c["subject"], c["key"]) for s in since["suspects"] for c in s["changes"]] == [
        ("command:driver", "stdout")
    ]
    assert since["host"] == "gpu-node-8"
    # node 7 saw nothing change; its history is its own
    seven = json.loads(
        run_drift(
            ["since", "--stable", "#1", "--format", "json", *config["gpu-node-7"]], tmp_path
        ).stdout
    )["data"]
    assert seven["suspects"] == []
    assert "abcdefghijklmnopqrstuvwxyz123456" not in json.dumps(seven) + json.dumps(since)
