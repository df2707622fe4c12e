"""The fleet case: the same models, migrations and record path on a real PostgreSQL."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift, start_drift
from history_0005 import upgrades_losslessly
from postgres_server import postgres_server
from test_operator_hands import env_file_reads_back_as_its_assignments

from drift.facts import Fact
from drift.store.query import History
from drift.store.schema import HEAD_REVISION
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter, now_us


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


def test_the_last_process_of_a_service_reads_back_the_same_on_both_stores(
    pg_url: str, tmp_path: Path
) -> None:
    """What a stale-pidfile check compares with: pid, start, program, when the pidfile was written.

    The command line is longer than a value kept inline, so it comes back from the blob table.
    """
    padding = "x" * 600
    argv = [sys.executable, "-c", "import time; time.sleep(600)", padding]
    proc = subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        pidfile = tmp_path / "svc.pid"
        pidfile.write_text(f"{proc.pid}\n")
        config = tmp_path / "drift.toml"
        config.write_text(f'host = "pg-svc"\n[[services]]\nname = "svc"\npidfile = "{pidfile}"\n')
        deadline = time.monotonic() + 10
        while padding not in Path(f"/proc/{proc.pid}/cmdline").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for db in (pg_url, str(tmp_path / "d.db")):
            args = ["--config", str(config), "--db", db]
            run_drift(["record", *args], tmp_path)
            assert ", 0 changed, 0 errors," in run_drift(["record", *args], tmp_path).stdout
            with HistoryWriter.open(resolve_db_url(db)) as writer:
                last = writer.load_last_processes("pg-svc", ["service:svc", "service:other"])
            assert set(last) == {"service:svc"}
            got = last["service:svc"]
            assert set(got) == {"pid", "started_at", "exe", "argv", "pidfile_mtime"}
            assert got["pid"] == str(proc.pid)
            assert json.loads(got["argv"]) == argv
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_fleet_report_regenerates_without_its_password(pg_url: str, tmp_path: Path) -> None:
    # The test server trusts loopback, so a password in the URL is accepted and ignored:
    # what matters is that it never reaches the report, and the command still works.
    secret_url = pg_url.replace("drift@", "drift:s3cret-pw@", 1)
    (tmp_path / "v").write_text("575\n")
    path = tmp_path / "node-9.toml"
    path.write_text(f'host = "gpu-node-9"\n[[commands]]\nname = "v"\nrun = "cat {tmp_path}/v"\n')
    cfg = ["--config", str(path), "--db", secret_url]
    first = int(run_drift(["record", *cfg], tmp_path).stdout.split()[1].strip("#:"))
    (tmp_path / "v").write_text("580\n")
    run_drift(["record", *cfg], tmp_path)
    report = tmp_path / "r.md"
    run_drift(["report", "--stable", f"#{first}", "-o", str(report), *cfg], tmp_path)
    text = report.read_text()
    assert "s3cret-pw" not in text
    line = text.split("```sh\n", 2)[-1].split("\n", 1)[0]
    assert f"--db {pg_url}" in line  # the same server and user, no password
    (tmp_path / "v").write_text("590\n")
    run_drift(["record", *cfg], tmp_path)
    report.unlink()
    args = shlex.split(line)
    run_drift(args[1:], tmp_path)
    assert (
        report.read_text().split("## Suspects")[1].split("## Timeline")[0]
        == (text.split("## Suspects")[1].split("## Timeline")[0])
    )


def test_reading_during_a_hosts_first_record_says_one_is_running(
    pg_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "slow.toml"
    path.write_text('host = "gpu-node-10"\n[[commands]]\nname = "slow"\nrun = "sleep 4"\n')
    cfg = ["--config", str(path), "--db", pg_url]
    run_drift(["init", *cfg], tmp_path)
    first = start_drift(["record", *cfg], tmp_path)
    try:
        deadline = time.monotonic() + 20
        while True:
            result = run_drift(["since", "--stable", "#1", *cfg], tmp_path, check=False)
            if result.returncode != 2 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert result.returncode == 3, result.stderr
        assert "its first `drift record` is running now" in result.stderr
    finally:
        first.communicate(timeout=30)


def test_script_facts_and_a_moved_line_are_stored_on_postgres(pg_url: str) -> None:
    # The writer reads the open script facts' provenance with LIKE 'script:%':
    # psycopg must not take that % for a placeholder.
    db = resolve_db_url(pg_url)
    # A move alone changes the state digest: the record is compared and the line stored.
    run = [Fact("script:/srv/run.sh", "export:A", "1", {"line": 3}), Fact("service:s", "pid", "1")]
    moved = [
        Fact("script:/srv/run.sh", "export:A", "1", {"line": 4}),
        Fact("service:s", "pid", "1"),
    ]
    with HistoryWriter.open(db) as writer:
        written = [writer.write_snapshot("pg-scripts", now_us(), f, [], {}) for f in (run, moved)]
    assert [w.changed for w in written] == [2, 0]  # a moved line is stored, not a change
    with History.open(db, "pg-scripts") as history:
        versions = history.versions_of("script:/srv/run.sh export:A")
        counts = history.counts_between(0, written[-1].snapshot_id)
    assert [(v.value, v.provenance) for v in versions] == [("1", {"line": 3}), ("1", {"line": 4})]
    assert counts == {("script:/srv/run.sh", "export:A"): 1, ("service:s", "pid"): 1}


def test_a_0005_history_upgrades_losslessly_on_postgres(pg_url: str) -> None:
    # Migration 0006 on PostgreSQL: provenances by a hash join, short texts moved
    # inline, the partial index of open versions; and its downgrade.
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        for name in ("upgrade_new", "upgrade_old"):
            conn.execute(f"CREATE DATABASE {name}")
    base = pg_url.rsplit("/", 1)[0]
    upgrades_losslessly(
        resolve_db_url(f"{base}/upgrade_new"), resolve_db_url(f"{base}/upgrade_old")
    )


def test_marks_undone_logged_and_files_read_back_on_postgres(pg_url: str, tmp_path: Path) -> None:
    # The marks' undone_us, the log's queries and `drift cat`'s (a LIKE on the stored
    # provenances, which psycopg must not take for a placeholder) on PostgreSQL.
    import psycopg

    from drift.demo import IncidentSandbox

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE hands")
    url = f"{pg_url.rsplit('/', 1)[0]}/hands"
    env_file_reads_back_as_its_assignments(url, tmp_path)
    box = IncidentSandbox(tmp_path / "box")
    box.build()
    args = ["--config", str(box.config_path), "--db", url]
    box.start_all()
    try:
        run_drift(["record", *args], tmp_path)
        first = run_drift(["mark", "stable", "--note", "fine", *args], tmp_path).stdout
        box.add_culprit()
        run_drift(["record", *args], tmp_path)
    finally:
        box.stop_all()
    number = first.split()[1].strip("#:")
    run_drift(["unmark", number, *args], tmp_path)
    marks = json.loads(run_drift(["mark", "--list", "--format", "json", *args], tmp_path).stdout)
    assert [m["undone"] is not None for m in marks["data"]["marks"]] == [True]
    assert "no baseline" in run_drift(["since", *args], tmp_path, check=False).stderr
    log = run_drift(["log", "--marks", *args], tmp_path).stdout
    assert "(undone at " in log
    script = str(box.script("decode"))
    assert "SGLANG_SM120" in run_drift(["cat", script, *args], tmp_path).stdout
    patch = run_drift(["history", "decode.sh content", "-p", *args], tmp_path).stdout
    assert "+export SGLANG_SM120_MMA_TARGET_CTAS=512" in patch
