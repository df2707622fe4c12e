"""A real PostgreSQL on loopback for tests: initdb in a temp folder, a free port, torn down after.

Skips locally when PostgreSQL is not installed; fails in CI (`CI=true`), where
.ci/run installs it.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root; these machines run tests as root.
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@contextmanager
def postgres_server(options: str = "") -> Iterator[str]:
    """Start a throwaway server; yields a postgresql:// URL of an empty database.

    `options`: more server settings, as ``-c name=value ...``.
    """
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not initdb or not pg_ctl:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("PostgreSQL is not installed: .ci/run should have installed it")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    base = Path(tempfile.mkdtemp(prefix="drift-pg-"))
    data = base / "data"
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
    port = _free_port()
    subprocess.run(
        _as_postgres([initdb, "-D", str(data), "-U", "drift", "--auth=trust", "-E", "UTF8"]),
        check=True,
        capture_output=True,
    )
    opts = (
        f"-c listen_addresses=127.0.0.1 -c port={port} "
        f"-c unix_socket_directories={base} -c fsync=off {options}"
    )
    subprocess.run(
        _as_postgres([pg_ctl, "-D", str(data), "-o", opts, "-l", str(base / "log"), "-w", "start"]),
        check=True,
        capture_output=True,
    )
    try:
        url = f"postgresql://drift@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        subprocess.run(
            _as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True
        )
        shutil.rmtree(base, ignore_errors=True)
