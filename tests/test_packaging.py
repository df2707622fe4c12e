"""migrations/ and templates/ ship inside the wheel and are found from any working directory."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from drift.store.schema import HEAD_REVISION

ROOT = Path(__file__).resolve().parent.parent


def run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


def test_editable_install_finds_resources_from_another_directory(tmp_path: Path) -> None:
    drift = Path(sys.executable).with_name("drift")
    env = {**os.environ, "DRIFT_CONFIG": "", "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("DRIFT_DB", None)
    (tmp_path / "drift.toml").write_text(
        'host = "editable"\n[[commands]]\nname = "c"\nrun = "echo hi"\n'
    )
    run([str(drift), "db", "upgrade"], tmp_path, env)
    out = run([str(drift), "record"], tmp_path, env).stdout
    assert out.startswith("snapshot #1: 2 facts")
    assert (tmp_path / "state" / "drift" / "drift.db").exists()
    out = run([str(drift), "since", "--stable", "#1"], tmp_path, env).stdout
    assert "No change since the baseline" in out


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_migrates_records_and_reports(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(ROOT),
        ],
        ROOT,
    )
    wheel = next(dist.glob("drift_provenance-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    metadata = zipfile.ZipFile(wheel).read("drift_provenance-0.1.0.dist-info/METADATA").decode()
    assert "Name: drift-provenance\n" in metadata and "License-File: LICENSE\n" in metadata
    assert "drift_provenance-0.1.0.dist-info/licenses/LICENSE" in names
    entry_points = zipfile.ZipFile(wheel).read("drift_provenance-0.1.0.dist-info/entry_points.txt")
    assert b"drift = drift.cli:main" in entry_points  # the command stays drift
    assert "drift/migrations/env.py" in names
    assert "drift/migrations/versions/0001_initial.py" in names
    assert "drift/migrations/versions/0002_stat_cache_shards.py" in names
    assert "drift/templates/since.txt.j2" in names

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            str(wheel),
        ],
        tmp_path,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "drift.toml").write_text('host = "wheel"\n[[commands]]\nname = "c"\nrun = "echo hi"\n')
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "st"),
    }
    drift = str(venv / "bin" / "drift")
    db = str(work / "w.db")
    assert f"created schema {HEAD_REVISION}" in run([drift, "init", "--db", db], work, env).stdout
    upgrade = run([drift, "db", "upgrade", "--db", db], work, env).stdout
    assert f"already at schema {HEAD_REVISION}" in upgrade
    assert run([drift, "record", "--db", db], work, env).stdout.startswith("snapshot #1")
    assert f"schema {HEAD_REVISION}" in run([drift, "db", "current", "--db", db], work, env).stdout
    out = run([drift, "since", "--stable", "#1", "--db", db], work, env).stdout
    assert "drift since: host wheel" in out


def test_the_distribution_is_not_pypis_drift_and_every_install_hint_says_so() -> None:
    # `pip install drift` fetches an unrelated project of that name.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "drift-provenance"
    assert project["scripts"] == {"drift": "drift.cli:main"}
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License\n\nCopyright (c) 2026 the drift authors\n")
    hints = []
    for path in [ROOT / "README.md", *ROOT.glob("drift/**/*.py"), *ROOT.glob("samples/**/*")]:
        if path.is_file():
            hints += [line for line in path.read_text().splitlines() if "pip install" in line]
    assert hints and all("'drift[" not in line and "install drift " not in line for line in hints)
    assert any("drift-provenance[postgres]" in line for line in hints)
