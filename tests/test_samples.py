"""The samples a user copies onto a real box: they must load and be valid as shipped."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drift.config import load_config

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def test_sglang_sample_config_loads_with_its_services_kernels_and_health_check() -> None:
    config = load_config(SAMPLES / "sglang-pd" / "drift.toml")
    assert [s.name for s in config.services] == ["prefill", "decode", "router"]
    assert all(s.unit and s.script for s in config.services)
    assert any("attention" in p for f in config.files for p in f.paths)
    assert config.repos and config.repos[0].path == "/opt/sglang"
    assert config.gpu.enabled is True
    assert [e.service for e in config.endpoints] == ["decode"]
    assert {c.name for c in config.caches} == {"triton", "flashinfer", "deep-gemm"}
    (check,) = config.health
    assert check.name == "decode-answers" and "max_new_tokens" in check.run
    assert check.timeout < 60  # below the record interval


def test_cron_line_runs_drift_quietly_every_minute() -> None:
    lines = [
        line
        for line in (SAMPLES / "cron" / "drift").read_text().splitlines()
        if line and not line.startswith("#") and "=" not in line.split()[0]
    ]
    (line,) = lines
    fields = line.split()
    assert fields[:6] == ["*", "*", "*", "*", "*", "root"]
    assert "drift record --quiet" in line and "flock" not in line


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_service_and_timer_are_valid_units(tmp_path: Path) -> None:
    drift = Path(sys.executable).with_name("drift")
    for name in ("drift-record.service", "drift-record.timer"):
        text = (SAMPLES / "systemd" / name).read_text()
        (tmp_path / name).write_text(text.replace("/usr/local/bin/drift", str(drift)))
    service = (tmp_path / "drift-record.service").read_text()
    assert "Nice=19" in service and "IOSchedulingClass=idle" in service
    assert "OnCalendar=minutely" in (tmp_path / "drift-record.timer").read_text()
    result = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            str(tmp_path / "drift-record.service"),
            str(tmp_path / "drift-record.timer"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "drift-record" not in result.stderr, result.stderr
