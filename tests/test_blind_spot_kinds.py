"""A blind spot is what could not be read, whatever pid the message names.

The operator's sequence: a service that rewrites its process title (as
sglang-router does, with the real setproctitle) is recorded, restarted (a new
pid), and recorded again. The one fact drift cannot read is one blind spot,
told with its latest message, not "2 kinds of collection error".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import run_drift

TITLE = "sglang::router"


def start(root: Path) -> subprocess.Popen[bytes]:
    pidfile = root / "run" / "router.pid"
    pidfile.unlink(missing_ok=True)
    proc = subprocess.Popen(
        ["bash", str(root / "serve" / "router.sh")],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "HOME": str(root)},
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(TITLE.encode()):
                return proc
        except OSError:
            pass
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError("the router did not rewrite its title")


def test_a_blind_spot_is_one_kind_however_its_pid_changes(tmp_path: Path) -> None:
    root = tmp_path / "box"
    (root / "run").mkdir(parents=True)
    (root / "serve").mkdir()
    code = f"import setproctitle, time; setproctitle.setproctitle({TITLE!r}); time.sleep(3600)"
    (root / "serve" / "router.sh").write_text(
        f'#!/bin/bash\necho $$ > {root}/run/router.pid\nexec {sys.executable} -c "{code}"\n'
    )
    config = root / "drift.toml"
    config.write_text(
        'host = "h"\n[[services]]\nname = "router"\npidfile = "run/router.pid"\n'
        'script = "serve/router.sh"\n'
    )
    cfg = ["--config", str(config), "--db", str(root / "drift.db")]
    proc = start(root)
    try:
        run_drift(["record", *cfg], tmp_path)
        run_drift(["record", *cfg], tmp_path)  # in the window: the message names this pid
        first_pid = proc.pid
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc = start(root)
        run_drift(["record", *cfg], tmp_path)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    since = ["since", "--stable", "#1", *cfg]
    data = json.loads(run_drift([*since, "--format", "json"], tmp_path).stdout)["data"]
    errors = [b for b in data["blind_spots"] if b["kind"] == "error"]
    assert len(errors) == 1, errors
    assert f"pid {proc.pid} " in errors[0]["message"] and str(first_pid) not in errors[0]["message"]
    assert errors[0]["current"] is True
    text = run_drift(since, tmp_path).stdout
    assert "1 kind of collection error" in text and "2 kinds" not in text
