"""A Python service's distributions as history: real venvs, real wheels, real pip, real processes.

The wheels are built here (a wheel is a zip with a dist-info, per the wheel
spec), installed with ``pip install --no-index`` into a real ``python -m
venv``, and run by a real long-running interpreter that `drift record`
finds by its pidfile. What is asserted is what `drift since` says.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift
from python_dists import build_wheel, editable_checkout, make_venv, pip
from shared_libs import system_libz


class Server:
    """A long-running Python process that imports a package, found by a pidfile."""

    def __init__(self, python: Path, tmp_path: Path, module: str, env: dict[str, str]) -> None:
        self.python, self.tmp_path, self.module, self.env = python, tmp_path, module, env
        self.pidfile = tmp_path / "server.pid"
        self.script = tmp_path / "server.py"
        self.script.write_text(f"import time, {module}\nwhile True:\n    time.sleep(60)\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.stop()
        time.sleep(0.05)  # a start in a clock tick of its own, after what came before
        self.proc = subprocess.Popen(
            [str(self.python), str(self.script)], cwd=self.tmp_path, env=self.env
        )
        self.pidfile.write_text(f"{self.proc.pid}\n")
        time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture
def server_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    yield env


def drift(tmp_path: Path, server: Server, *args: str) -> str:
    config = tmp_path / "drift.toml"
    config.write_text(f'host = "pk"\n[[services]]\nname = "decode"\npidfile = "{server.pidfile}"\n')
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    return run_drift([*args, *cfg], tmp_path).stdout


def suspects(tmp_path: Path, server: Server, stable: str) -> list[dict[str, object]]:
    out = drift(tmp_path, server, "since", "--stable", stable, "--format", "json")
    found: list[dict[str, object]] = json.loads(out)["data"]["suspects"]
    return found


def test_a_package_upgrade_is_one_story_pending_until_restart_then_live(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "flashinfer-python", "0.2.5")
    build_wheel(wheels, "flashinfer-python", "0.2.6")
    venv = tmp_path / "venv"
    python = make_venv(venv)
    pip(python, "--find-links", str(wheels), "flashinfer-python==0.2.5")
    server = Server(python, tmp_path, "flashinfer_python", server_env)
    server.start()
    try:
        drift(tmp_path, server, "record")
        drift(tmp_path, server, "record")
        pip(python, "--find-links", str(wheels), "--upgrade", "flashinfer-python==0.2.6")
        drift(tmp_path, server, "record")
        (story,) = suspects(tmp_path, server, "#2")
        assert story["title"] == (
            f"flashinfer-python 0.2.5 -> 0.2.6 in the venv of decode ({venv})"
        )
        assert story["status"] == "pending"
        # pure Python: nothing mapped says whether the process imported it yet
        assert story["label"].endswith("(unless decode first imports it after the change)")
        assert story["services"] == ["decode"]
        server.start()
        drift(tmp_path, server, "record")
        stories = {s["title"]: s for s in suspects(tmp_path, server, "#2")}
        story = stories[f"flashinfer-python 0.2.5 -> 0.2.6 in the venv of decode ({venv})"]
        assert story["status"] == "live"
        assert "since restart" in str(story["label"])
    finally:
        server.stop()


def test_an_editable_checkout_whose_head_moved_is_its_package_story(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    checkout = tmp_path / "sglang"
    project, git = editable_checkout(checkout)
    venv = tmp_path / "venv"
    python = make_venv(venv, "--system-site-packages")
    pip(python, "--no-build-isolation", "-e", str(project))
    server = Server(python, tmp_path, "sglang", server_env)
    server.start()
    try:
        drift(tmp_path, server, "record")
        (project / "sglang" / "attention.py").write_text("CTAS = 512\n")
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", "two"], check=True)
        head = subprocess.run(
            [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
        ).stdout.strip()
        drift(tmp_path, server, "record")
        (story,) = suspects(tmp_path, server, "#1")
        assert story["title"] == (
            f"sglang's checkout moved to {head[:12]} (was "
            f"{story['changes'][0]['before'][:12]}) in the venv of decode ({venv})"  # type: ignore[index]
        )
        assert story["status"] == "pending"
    finally:
        server.stop()


def test_a_process_that_is_not_python_has_no_python_facts_and_no_error(tmp_path: Path) -> None:
    proc = subprocess.Popen(["sleep", "60"])
    pidfile = tmp_path / "sleep.pid"
    pidfile.write_text(f"{proc.pid}\n")
    try:
        config = tmp_path / "drift.toml"
        config.write_text(f'host = "pk"\n[[services]]\nname = "s"\npidfile = "{pidfile}"\n')
        cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
        out = run_drift(["record", *cfg], tmp_path).stdout
        assert ", 0 errors" in out
        shown = run_drift(["show", "--format", "json", *cfg], tmp_path).stdout
        assert '"python' not in shown and '"package:' not in shown
    finally:
        proc.kill()
        proc.wait()


def test_an_upgrade_that_replaces_a_mapped_library_is_one_story_with_the_library_as_evidence(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    """pip replaces a .so the server has mapped: the package's story carries it, pending then live.

    One story, not a package story and a library story: the library's change
    is evidence of the upgrade (its RECORD lists it), and while the process
    still maps the old file the story is pending.
    """
    libz = system_libz()
    changed = tmp_path / "libz-other.so"
    shutil.copyfile(libz, changed)
    with changed.open("ab") as f:
        f.write(b"\0another build\0")
    loader = (
        "import ctypes, os\n"
        "ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'native_core', '_core.so'))\n"
    )
    wheels = tmp_path / "wheels"
    for version, lib in (("1.0", libz), ("1.1", changed)):
        extra: dict[str, str | bytes] = {
            "native_loader.py": loader,
            "native_core/__init__.py": "",
            "native_core/_core.so": lib.read_bytes(),
        }
        build_wheel(wheels, "native-ext", version, extra)
    venv = tmp_path / "venv"
    python = make_venv(venv)
    pip(python, "--find-links", str(wheels), "native-ext==1.0")
    server = Server(python, tmp_path, "native_loader", server_env)
    server.start()
    title = f"native-ext 1.0 -> 1.1 in the venv of decode ({venv})"
    try:
        drift(tmp_path, server, "record")
        drift(tmp_path, server, "record")
        pip(python, "--find-links", str(wheels), "--upgrade", "native-ext==1.1")
        drift(tmp_path, server, "record")
        (story,) = suspects(tmp_path, server, "#2")
        assert story["title"] == title
        assert story["status"] == "pending"
        assert "unless" not in story["label"]  # its library, still mapped, says it is the old
        keys = [c["key"] for c in story["changes"]]  # type: ignore[union-attr]
        assert any(k.startswith("lib_disk:") and k.endswith("/_core.so") for k in keys), keys
        server.start()
        drift(tmp_path, server, "record")
        (story,) = suspects(tmp_path, server, "#2")
        assert story["title"] == title
        assert story["status"] == "live"
        keys = [c["key"] for c in story["changes"]]  # type: ignore[union-attr]
        assert any(k.startswith("lib:") and k.endswith("/_core.so") for k in keys), keys
    finally:
        server.stop()


def test_a_record_between_pips_metadata_and_its_direct_url_reads_the_source_next_time(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    """pip writes METADATA, then INSTALLER and direct_url.json: a record that came in between
    must not keep the package without its source while METADATA stays as it was."""
    python = make_venv(tmp_path / "venv")
    (site,) = (tmp_path / "venv" / "lib").glob("python3*/site-packages")
    (site / "sglang").mkdir()
    (site / "sglang" / "__init__.py").write_text("")
    info = site / "sglang-0.4.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.4.0\n\n")
    server = Server(python, tmp_path, "sglang", server_env)
    server.start()  # waits: METADATA is older than a timestamp's tick by the first record
    cfg = ["--config", str(tmp_path / "drift.toml"), "--db", str(tmp_path / "d.db")]
    try:
        drift(tmp_path, server, "record")
        assert (
            '"package_source:sglang"'
            not in run_drift(["show", "--format", "json", *cfg], tmp_path).stdout
        )
        (info / "INSTALLER").write_text("pip\n")
        direct_url = {"url": f"file://{tmp_path}/src", "dir_info": {"editable": True}}
        (info / "direct_url.json").write_text(json.dumps(direct_url))
        drift(tmp_path, server, "record")
        shown = run_drift(["show", "--format", "json", *cfg], tmp_path).stdout
        assert f"editable {tmp_path}/src" in shown
    finally:
        server.stop()


def test_two_metadata_folders_of_one_distribution_make_its_version_unsure(
    tmp_path: Path, server_env: dict[str, str]
) -> None:
    """An interrupted install leaves a second dist-info: drift names both, never picks silently."""
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "flashinfer-python", "0.2.6")
    python = make_venv(tmp_path / "venv")
    pip(python, "--find-links", str(wheels), "flashinfer-python==0.2.6")
    server = Server(python, tmp_path, "flashinfer_python", server_env)
    server.start()
    try:
        drift(tmp_path, server, "record")
        drift(tmp_path, server, "record")
        (site,) = (tmp_path / "venv" / "lib").glob("python3*/site-packages")
        stale = site / "flashinfer_python-0.2.5.dist-info"
        stale.mkdir()
        (stale / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 0.2.5\n\n"
        )
        drift(tmp_path, server, "record")
        (story,) = suspects(tmp_path, server, "#2")
        assert story["title"].startswith("flashinfer-python 0.2.6 -> 0.2.5")
        label = str(story["label"])
        assert "unsure:" in label
        assert "flashinfer_python-0.2.6.dist-info (0.2.6)" in label
        assert "which one describes its files is unknown" in label
    finally:
        server.stop()
