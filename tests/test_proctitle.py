"""A service that rewrites its process title, as sglang-router, SGLang's and vLLM's workers do.

After ``setproctitle("sglang::router")`` the kernel shows the title as the
process's command line and its environment as NUL bytes. The test runs the
real `setproctitle` package in a real venv (``python -m venv``, pip) from a
serve script, as drift's services run; the venv holds a small distribution
of the test's own making whose extension library the process maps. What is
asserted is what `drift record` and `drift since` say.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import setproctitle  # the real package (test extras), run in the router's own venv
from conftest import run_drift
from python_dists import build_wheel, make_venv, pip
from shared_libs import system_libz

TITLE = "sglang::router"
MESSAGE = "rewrote its title: its live command line and environment cannot be read"

# What the router runs: it loads its native core, then rewrites its title, as sglang-router does.
LAUNCH = """
import ctypes, os, sys, time
from setproctitle import setproctitle
ctypes.CDLL(os.path.join(os.path.dirname(__file__), "sglang_router_rs.abi3.so"))
setproctitle("sglang::router")
time.sleep(3600)
"""


class Router:
    """The router service: a serve script that execs the venv's python, found by its pidfile."""

    def __init__(self, root: Path, python: Path) -> None:
        self.root = root
        self.pidfile = root / "run" / "router.pid"
        self.script = root / "serve" / "router.sh"
        self.pidfile.parent.mkdir(parents=True)
        self.script.parent.mkdir(parents=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.write_script(python, "cache_aware")

    def write_script(self, python: Path, policy: str) -> None:
        self.script.write_text(
            "#!/bin/bash\nset -e\nexport RUST_LOG=info\n"
            f"echo $$ > {self.pidfile}\n"
            f"exec {python} -m sglang_router.launch_router --policy {policy} --port 30002\n"
        )

    def start(self) -> int:
        self.pidfile.unlink(missing_ok=True)
        time.sleep(0.05)  # a start in a clock tick of its own
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.root)}
        self.proc = subprocess.Popen(
            ["bash", str(self.script)], start_new_session=True, env=env, cwd=self.root
        )
        deadline = time.monotonic() + 20
        while True:
            assert self.proc.poll() is None, "the router died"
            assert time.monotonic() < deadline, "the router did not rewrite its title"
            try:
                if Path(f"/proc/{self.proc.pid}/cmdline").read_bytes().startswith(TITLE.encode()):
                    return self.proc.pid
            except OSError:
                pass
            time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None


def router_wheel(wheels: Path, version: str, core: bytes) -> None:
    build_wheel(
        wheels,
        "sglang-router",
        version,
        {
            "sglang_router/__init__.py": "",
            "sglang_router/launch_router.py": LAUNCH,
            "sglang_router/sglang_router_rs.abi3.so": core,
        },
    )


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[tuple[Router, Path, Path]]:
    """A venv with sglang-router 0.3.2 (and setproctitle), its router running, and drift.toml."""
    libz = system_libz().read_bytes()
    wheels = tmp_path / "wheels"
    router_wheel(wheels, "0.3.1", libz)
    router_wheel(wheels, "0.3.2", libz + b"\0sglang-router 0.3.2\0")
    venv = tmp_path / "venv"
    python = make_venv(venv)
    pip(python, "--find-links", str(wheels), "sglang-router==0.3.2")
    # setproctitle as installed for drift's tests, put on the venv's path (pip runs offline)
    vendor = tmp_path / "vendor"
    shutil.copytree(Path(setproctitle.__file__).parent, vendor / "setproctitle")
    (venv / "lib" / f"python{_version(venv)}" / "site-packages" / "vendor.pth").write_text(
        f"{vendor}\n"
    )
    router = Router(tmp_path, python)
    (tmp_path / "drift.toml").write_text(
        'host = "gpu-node-7"\n[[services]]\nname = "router"\n'
        f'pidfile = "{router.pidfile}"\nscript = "{router.script}"\n'
    )
    router.start()
    try:
        yield router, python, wheels
    finally:
        router.stop()


def _version(venv: Path) -> str:
    for line in (venv / "pyvenv.cfg").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("version", "version_info"):
            return ".".join(value.strip().split(".")[:2])
    raise AssertionError("no version in pyvenv.cfg")


def drift(tmp_path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cfg = ["--config", str(tmp_path / "drift.toml"), "--db", str(tmp_path / "d.db")]
    return run_drift([*args, *cfg], tmp_path, check=check)


def test_a_router_that_rewrites_its_title_is_told_once_and_its_downgrade_and_flag_are_stories(
    tmp_path: Path, deployment: tuple[Router, Path, Path]
) -> None:
    router, python, wheels = deployment
    for _ in range(2):
        out = drift(tmp_path, "record", check=False)
        assert ", 1 error," in out.stdout, out.stdout + out.stderr
        # told, but no failed record: nothing on the host can lift it
        assert out.returncode == 0, out.stderr
        (line,) = out.stderr.splitlines()
        assert line.endswith(f"pid {router.proc.pid} {MESSAGE}"), line  # type: ignore[union-attr]
    # the engineer downgrades the router and changes its policy, then restarts it
    pip(python, "--find-links", str(wheels), "sglang-router==0.3.1")
    router.write_script(python, "round_robin")
    router.stop()
    pid = router.start()
    out = drift(tmp_path, "record", check=False)
    (line,) = out.stderr.splitlines()
    assert line.endswith(f"pid {pid} {MESSAGE}"), line

    data = json.loads(drift(tmp_path, "since", "--stable", "#2", "--format", "json").stdout)
    titles = [s["title"] for s in data["data"]["suspects"]]
    stories = {s["title"]: s for s in data["data"]["suspects"]}
    venv = python.parent.parent
    package = stories.get(f"sglang-router 0.3.2 -> 0.3.1 in the venv of router ({venv})")
    assert package is not None, titles
    keys = [c["key"] for c in package["changes"]]
    assert any(k.endswith("/sglang_router_rs.abi3.so") for k in keys), keys
    assert not any("sglang_router_rs.abi3.so" in t for t in titles), titles
    (flag,) = [s for s in data["data"]["suspects"] if "--policy" in s["title"]]
    assert flag["label"].startswith("as launched (unverified)"), flag
    assert "not in router" not in flag["label"] and flag["status"] == "launched", flag
    assert any(
        c["key"] == "flag:--policy"
        and c["subject"] == f"script:{router.script}"
        and c["after"] == "round_robin"
        for c in flag["changes"]
    ), flag["changes"]
    spots = [b for b in data["data"]["blind_spots"] if b["subject"] == "service:router"]
    assert [b["message"] for b in spots] == [f"pid {pid} {MESSAGE}"], spots

    text = drift(tmp_path, "since", "--stable", "#2").stdout
    assert f"flag --policy round_robin at {router.script}:5 (was cache_aware)" in text
    assert f"as launched (unverified) in router (pid {pid})" in text
    assert f"not in router (pid {pid})" not in text


def test_a_process_started_with_an_empty_environment_keeps_its_command_line(
    tmp_path: Path,
) -> None:
    """`env -i`: no variable at all, but argv[0] names its program, so its title is its own."""
    pidfile = tmp_path / "sleep.pid"
    proc = subprocess.Popen(["env", "-i", "/bin/sleep", "60"])
    pidfile.write_text(f"{proc.pid}\n")
    (tmp_path / "drift.toml").write_text(
        f'host = "h"\n[[services]]\nname = "s"\npidfile = "{pidfile}"\n'
    )
    try:
        deadline = time.monotonic() + 10
        # `env -i /bin/sleep 60` names sleep too: wait for the exec, argv[0] then is sleep
        while not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"/bin/sleep"):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert Path(f"/proc/{proc.pid}/environ").read_bytes() == b""
        assert ", 0 errors," in drift(tmp_path, "record").stdout
        shown = json.loads(drift(tmp_path, "show", "--format", "json").stdout)
        facts = {f["key"]: f["value"] for f in shown["data"]["subjects"][0]["facts"]}
        assert "title" not in facts and json.loads(facts["argv"]) == ["/bin/sleep", "60"], facts
    finally:
        proc.kill()
        proc.wait()
