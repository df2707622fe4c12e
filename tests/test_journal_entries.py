"""A damaged journal entry on a real systemd: skipped and counted, the unit still read.

systemd 252's journalctl refuses an entry whose stamp is past 2^55 us, but an
older one (a container's own, or a copied journal file) passes it on as
written. The container's journalctl here is wrapped to add such an entry to
the real journal's answer; what drift makes of it is what is under test.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import zlib
from pathlib import Path

import pytest
from conftest import run_drift
from systemd_container import SystemdContainer, systemd_container_fixture

pytestmark = pytest.mark.systemd

systemd_container = systemd_container_fixture()

FAILING = """#!/bin/bash
echo "loading the model"
echo "CUDA error: out of memory" >&2
exit 1
"""
UNIT = """[Unit]
StartLimitIntervalSec=0

[Service]
ExecStart=/bin/bash /opt/serve/decode.sh
Restart=always
RestartSec=2s
"""
# Newest first, as `journalctl --reverse` writes: a stamp no datetime can hold (year 3 million).
BAD_ENTRY = {
    "__REALTIME_TIMESTAMP": "99999999999999999999",
    "_SYSTEMD_INVOCATION_ID": "0123456789abcdef0123456789abcdef",
    "MESSAGE": "an entry from a damaged journal file",
    "_PID": "1",
    "SYSLOG_IDENTIFIER": "decode",
}
JOURNALCTL = f"""#!/bin/bash
echo '{json.dumps(BAD_ENTRY)}'
exec /usr/bin/journalctl "$@"
"""


def test_an_entry_stamped_past_year_9999_is_skipped_and_counted(
    systemd_container: SystemdContainer, tmp_path: Path
) -> None:
    box = systemd_container
    box.write_file("/opt/serve/decode.sh", FAILING)
    box.write_unit("decode.service", UNIT)
    box.write_file("/opt/tools/journalctl", JOURNALCTL).chmod(0o755)
    link = box.root / "opt/tools/systemctl"
    if not link.is_symlink():
        os.symlink("/usr/bin/systemctl", link)
    box.daemon_reload()
    box.restart("decode.service")
    # The container's own systemctl, named from a folder whose journalctl is the wrapper.
    settings = {
        "host": "ctr",
        "systemctl": [*box.systemctl[:-1], "/opt/tools/systemctl"],
        "proc_root": box.proc_root,
    }
    config = tmp_path / "drift.toml"
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    lines += ["[[services]]", 'name = "decode"', 'unit = "decode.service"']
    config.write_text("\n".join(lines) + "\n")
    cfg = ["--config", str(config), "--db", str(tmp_path / "drift.db")]
    deadline = time.monotonic() + 30
    while True:
        shown = box.run_systemctl("show", "decode.service", "-p", "SubState,NRestarts").stdout
        if "SubState=auto-restart" in shown and "NRestarts=0" not in shown:
            break
        assert time.monotonic() < deadline, shown
        time.sleep(0.1)
    recorded = run_drift(["record", *cfg], tmp_path, check=False)
    assert recorded.returncode in (0, 4), recorded.stderr
    assert "Traceback" not in recorded.stderr
    assert "date value out of range" not in recorded.stdout + recorded.stderr

    out = run_drift(["show", "decode unit:journal", "--format", "json", *cfg], tmp_path)
    [fact] = [
        f
        for subject in json.loads(out.stdout)["data"]["subjects"]
        for f in subject["facts"]
        if f["key"] == "unit:journal"
    ]
    # The real lines are there, the damaged one is not, and the fact says one was left out.
    digest = fact["value"].removeprefix("sha256:").split()[0]
    with sqlite3.connect(tmp_path / "drift.db") as db:
        (packed,) = db.execute(
            "SELECT content FROM blobs WHERE sha256 LIKE ?", (digest + "%",)
        ).fetchone()
    text = zlib.decompress(packed).decode()
    assert "CUDA error: out of memory" in text
    assert "damaged journal file" not in text
    assert fact["provenance"]["skipped"] == 1
    assert "could not be read" in fact["provenance"]["unsure"]
