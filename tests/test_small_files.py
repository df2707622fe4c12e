"""Files a service's user controls, planted in a real venv under a real running service.

The service's user owns its venv: a METADATA, INSTALLER, RECORD, pyvenv.cfg
or ``.pth`` may be a FIFO nobody writes, a link to /dev/zero or to a root-only
file, or 16 MB with no blank line. `drift record` (root, every minute) must
come back within its time, in bounded memory, store nothing of a file it was
not meant to read, and say what it could not read: never read a package as
removed because its metadata could not be read.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift
from python_dists import build_wheel, editable_checkout, make_venv, pip
from test_packages import Server

MEMORY = 2 << 30  # address space a record may take here (a normal one takes a fraction)
TIMEOUT = 30.0  # a record of one service takes a second or two


def record(tmp_path: Path, cfg: list[str]) -> subprocess.CompletedProcess[str]:
    """`drift record` with a wall-clock and address-space bound; it must exit 0 or 4."""
    try:
        result = run_drift(["record", *cfg], tmp_path, check=False, timeout=TIMEOUT, memory=MEMORY)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"drift record did not come back within {TIMEOUT:g} s") from None
    assert result.returncode in (0, 4), f"{result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


class Venv:
    """flashinfer-python 0.2.5 installed by pip in a venv, run by a service drift records."""

    def __init__(self, tmp_path: Path, *venv_args: str) -> None:
        self.tmp_path = tmp_path
        wheels = tmp_path / "wheels"
        build_wheel(wheels, "flashinfer-python", "0.2.5")
        self.venv = tmp_path / "venv"
        self.python = make_venv(self.venv, *venv_args)
        pip(self.python, "--find-links", str(wheels), "flashinfer-python==0.2.5")
        (self.dist_info,) = self.venv.glob("lib/python*/site-packages/flashinfer_python-*")
        self.site = self.dist_info.parent
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
        self.server = Server(self.python, tmp_path, "flashinfer_python", env)
        config = tmp_path / "drift.toml"
        config.write_text(
            f'host = "pk"\n[[services]]\nname = "decode"\npidfile = "{self.server.pidfile}"\n'
        )
        self.cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]

    def facts(self) -> dict[str, str]:
        shown = run_drift(["show", "--format", "json", *self.cfg], self.tmp_path).stdout
        return {
            f["key"]: f["value"]
            for subject in json.loads(shown)["data"]["subjects"]
            for f in subject["facts"]
        }

    def suspects(self, stable: str) -> list[dict[str, object]]:
        out = run_drift(
            ["since", "--stable", stable, "--all", "--format", "json", *self.cfg], self.tmp_path
        ).stdout
        found: list[dict[str, object]] = json.loads(out)["data"]["suspects"]
        return found


@pytest.fixture
def venv(tmp_path: Path) -> Iterator[Venv]:
    box = Venv(tmp_path)
    box.server.start()
    try:
        yield box
    finally:
        box.server.stop()


def plant_fifo(path: Path) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    os.mkfifo(path)


# What each planted file is, in the venv of the running service.
PLANTED = {
    "METADATA": lambda v: v.dist_info / "METADATA",
    "INSTALLER": lambda v: v.dist_info / "INSTALLER",
    "RECORD": lambda v: v.dist_info / "RECORD",
    "direct_url.json": lambda v: v.dist_info / "direct_url.json",
    "pyvenv.cfg": lambda v: v.venv / "pyvenv.cfg",
    "a .pth": lambda v: v.site / "extra.pth",
}


@pytest.mark.parametrize("name", list(PLANTED))
def test_a_fifo_in_the_venv_never_hangs_a_record_nor_removes_a_package(
    venv: Venv, name: str
) -> None:
    record(venv.tmp_path, venv.cfg)
    record(venv.tmp_path, venv.cfg)
    assert venv.facts()["package:flashinfer-python"] == "0.2.5"
    planted = PLANTED[name](venv)
    plant_fifo(planted)
    first = record(venv.tmp_path, venv.cfg)
    # A later record is not stuck behind the first: one service user cannot stop them all.
    record(venv.tmp_path, venv.cfg)
    said = first.stdout + first.stderr
    if name in ("METADATA", "INSTALLER", "direct_url.json", "pyvenv.cfg", "a .pth"):
        # What sets a fact was not read: a blind spot that names the file and why.
        assert str(planted) in said and "a FIFO, not a regular file" in said, said
    # The package keeps its version: unknown this time, never removed.
    assert venv.facts()["package:flashinfer-python"] == "0.2.5"
    titles = [str(s["title"]) for s in venv.suspects("#2")]
    assert not any("flashinfer" in t and "removed" in t for t in titles), titles


def test_a_metadata_linked_to_a_root_only_file_is_refused_and_not_stored(venv: Venv) -> None:
    secret = venv.tmp_path / "shadow"
    secret.write_text("Name: root-only-secret-name\nVersion: 6.6.6-secret\n\n")
    secret.chmod(0o600)
    record(venv.tmp_path, venv.cfg)
    for planted in ("METADATA", "INSTALLER"):
        (venv.dist_info / planted).unlink()
        (venv.dist_info / planted).symlink_to(secret)
    result = record(venv.tmp_path, venv.cfg)
    assert "a symlink, where drift expects a file" in result.stdout + result.stderr
    raw = (venv.tmp_path / "d.db").read_bytes()
    assert b"root-only-secret-name" not in raw and b"6.6.6-secret" not in raw
    assert venv.facts()["package:flashinfer-python"] == "0.2.5"


def test_a_16_mb_metadata_with_no_blank_line_is_read_in_linear_time(venv: Venv) -> None:
    metadata = venv.dist_info / "METADATA"
    head = metadata.read_text().split("\n\n", 1)[0]
    pad = "Classifier: " + "x" * 80 + "\n"
    metadata.write_text(head + "\n" + pad * (16_800_000 // len(pad)))
    started = time.monotonic()
    record(venv.tmp_path, venv.cfg)
    assert time.monotonic() - started < 10, "a big METADATA is read past its headers"
    assert venv.facts()["package:flashinfer-python"] == "0.2.5"


@pytest.mark.parametrize("plant", ["link to /dev/zero", "fifo"])
def test_an_editable_checkout_s_packed_refs_is_bounded(tmp_path: Path, plant: str) -> None:
    checkout = tmp_path / "sglang"
    project, git = editable_checkout(checkout)
    venv = tmp_path / "venv"
    python = make_venv(venv, "--system-site-packages")
    pip(python, "--no-build-isolation", "-e", str(project))
    subprocess.run([*git, "pack-refs", "--all", "--prune"], check=True)
    packed = checkout / ".git" / "packed-refs"
    assert packed.is_file() and "refs/heads/" in packed.read_text()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    server = Server(python, tmp_path, "sglang", env)
    server.start()
    config = tmp_path / "drift.toml"
    config.write_text(f'host = "pk"\n[[services]]\nname = "decode"\npidfile = "{server.pidfile}"\n')
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    try:
        record(tmp_path, cfg)
        packed.unlink()
        if plant == "fifo":
            os.mkfifo(packed)
        else:
            packed.symlink_to("/dev/zero")
        result = record(tmp_path, cfg)
        said = result.stdout + result.stderr
        assert "packed-refs" in said, said
        # The commit read at the first record is kept, unknown this time: not removed.
        shown = run_drift(["show", "package_head:sglang", "--format", "json", *cfg], tmp_path)
        [fact] = [f for s in json.loads(shown.stdout)["data"]["subjects"] for f in s["facts"]]
        assert len(fact["value"]) == 40
    finally:
        server.stop()
