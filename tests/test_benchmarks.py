"""The benchmark script still runs end to end; `make bench` measures, these tests do not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_bench_runs_on_a_small_tree_and_reports_what_the_issue_asks(tmp_path: Path) -> None:
    result, out = run_bench(
        "bench_record.py",
        # Over 1,000 facts: the record line prints its counts with thousands separators.
        *("--files", "400", "--mb", "10", "--runs", "1", "--first-runs", "1"),
        *("--growth-records", "2", "--no-aide", "--no-git", "--no-profile"),
        tmp_path=tmp_path,
    )
    # Three facts (sha256, size, mode) per generated file, plus the tree's manifest.
    assert out["first_record_facts"] == 3 * (out["tree"]["files"] + 1)
    assert out["first_record_vs_hashlib"] > 0
    # An unchanged record adds one snapshot row and nothing else.
    assert out["growth"]["rows_added"] == {"snapshots": 2}
    assert 0 < out["used_bytes_per_unchanged_record"] <= 200
    assert out["heavy_imports_in_record"] == []
    assert "first record drift / hashlib" in result.stdout


@pytest.mark.slow
@pytest.mark.systemd
def test_systemd_bench_runs_with_a_unit_on_a_real_systemd(tmp_path: Path) -> None:
    from systemd_container import require_systemd

    require_systemd()
    # Exit 1 also when an unchanged record of the unit changed a fact or had an error.
    result, out = run_bench(
        "bench_systemd.py",
        *("--files", "150", "--mb", "5", "--services", "1", "--runs", "1"),
        *("--no-aide", "--no-profile"),
        tmp_path=tmp_path,
    )
    assert out["units_alone"]["facts"] > 0
    assert out["units_added"]["tree_s"] > 0 and out["units_added"]["units_tree_s"] > 0
    assert "added by the units (1)" in result.stdout


@pytest.mark.slow
def test_inference_bench_runs_with_every_collector_on(tmp_path: Path) -> None:
    if shutil.which("strace") is None:
        pytest.skip("needs strace: it counts the files a record opens")
    # Exit 1 also when an unchanged record changed a fact or read a metadata file again.
    result, out = run_bench(
        "bench_inference.py",
        *("--files", "150", "--mb", "5", "--dists", "20", "--libs", "3"),
        *("--leaves", "80", "--cache-files", "50", "--runs", "1", "--no-aide", "--no-profile"),
        tmp_path=tmp_path,
    )
    assert out["box"]["distributions"] == 20
    # The first record reads every distribution's METADATA; an unchanged one reads none.
    assert out["first_record_opens"]["metadata_by_name"]["METADATA"] == 20
    assert out["unchanged_opens"]["metadata_opens"] == 0
    assert set(out["added"]) == {"packages", "libraries", "endpoints", "caches", "gpu", "tree"}
    assert out["facts"]["all"] > out["facts"]["tree"]
    assert "every collector on" in result.stdout


@pytest.mark.slow
def test_bytes_bench_says_where_a_changed_minute_goes(tmp_path: Path) -> None:
    _, out = run_script(
        "bench_bytes.py",
        *("--depth", "day", "--minutes", "20", "--pairs", "1", "--plans", "--dir", str(tmp_path)),
        tmp_path=tmp_path,
    )
    day = out["day"]
    assert day["facts"] == 6443
    # One changed 26-byte output: a snapshot row and a version row, no blob, no provenance.
    assert day["changed"]["rows_per_minute"] == {"snapshots": 1.0, "versions": 1.0}
    assert 0 < day["changed"]["used_bytes_per_minute"] <= 160
    assert day["unchanged"]["rows_per_minute"] == {"snapshots": 1.0}
    # A changed record reads the open versions through the partial index, never a scan.
    plans = [step for _sql, plan in day["plans"]["changed"] for step in plan]
    assert any("ix_versions_open" in step for step in plans)
    assert not any(step.startswith("SCAN") and " versions" in step for step in plans)


def run_bench(
    script: str, *args: str, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run a bench script on a tree in `tmp_path`; its output and its JSON summary."""
    return run_script(script, "--tree", str(tmp_path / "tree"), *args, tmp_path=tmp_path)


def run_script(
    script: str, *args: str, tmp_path: Path, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run a script of benchmarks/ in `tmp_path`; its output and its JSON summary (--json)."""
    summary = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), *args, "--json", str(summary)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result, json.loads(summary.read_text())


@pytest.mark.slow
def test_history_bench_runs_on_a_short_history(tmp_path: Path) -> None:
    """Two hours of minutes instead of a week: every measure runs and lands in the JSON."""
    result, out = run_script(
        "bench_history.py",
        *("--depths", "week", "--minutes", "120", "--runs", "1", "--growth-minutes", "2"),
        *("--cache", str(tmp_path / "cache")),
        tmp_path=tmp_path,
        timeout=600,
    )
    week = out["depths"]["week"]
    assert week["build"]["minutes"] == 120
    for measure in ("since_1d", "history", "show"):
        assert week[measure]["s"] > 0 and week[measure]["rss_mib"] > 0
    # An unchanged record on either database writes no fact.
    assert week["record"]["ratio"] > 0
    # Only the loadavg line changed: a version and a snapshot row a minute.
    assert 0 < week["growth"]["used_bytes_per_minute"] < 4096
    assert out["postgres"]["after_s"] > 0
    assert "since --stable 1 day back" in result.stdout


@pytest.mark.slow
def test_fleet_bench_runs_on_a_short_history_of_a_few_hosts(tmp_path: Path) -> None:
    """Four hosts of two hours: loaded into a real PostgreSQL, compare --fleet finds the one
    odd host (the script exits 1 otherwise), and every measure lands in the JSON."""
    result, out = run_script(
        "bench_fleet.py",
        *("--hosts", "4", "--minutes", "120", "--runs", "1"),
        *("--cache", str(tmp_path / "cache")),
        tmp_path=tmp_path,
        timeout=600,
    )
    assert out["compare_fleet"]["hosts"] == 4 and out["compare_fleet"]["findings"] >= 1
    for measure in ("since_one", "compare_fleet", "since_fleet"):
        assert out[measure]["s"] > 0 and out[measure]["rss_mib"] > 0
    assert out["sizes"]["versions"] > 0 and out["one_host"]["snapshots"] == 120
    assert "B/host/day" in result.stdout


@pytest.mark.slow
def test_prune_bench_prunes_a_copy_and_checks_the_kept_states(tmp_path: Path) -> None:
    from drift.facts import Fact
    from drift.store.urls import resolve_db_url
    from drift.store.writer import HistoryWriter

    db = tmp_path / "history.db"
    hour = 3_600_000_000
    with HistoryWriter.open(resolve_db_url(str(db))) as writer:
        for i in range(300):  # 12.5 days, a record an hour
            facts = [
                Fact("command:load", "stdout", str(i % 7)),
                Fact("file:/k", "sha256", str(i // 50)),
            ]
            writer.write_snapshot("bench-host", 1_750_000_000_000_000 + i * hour, facts, [], {})
    original = db.read_bytes()
    result, out = run_script(
        "bench_prune.py", "--db", str(db), "--keep-days", "3", "--runs", "1", tmp_path=tmp_path
    )
    assert db.read_bytes() == original  # a copy was pruned, never the history given
    assert out["rows_before"]["snapshots"] == 300
    assert out["rows_after"]["snapshots"] == 3 * 24 + 1
    assert "prune --keep 3d: median" in result.stdout
