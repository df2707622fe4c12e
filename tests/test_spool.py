"""A host that cannot reach its central PostgreSQL keeps recording into its spool, and the
next record that reaches it (or drift push) ships what it kept, in order, once.

The outage is real: the central database is reached through a TCP gate the test shuts
and opens again, so drift sees its connections refused as it would on a network cut.
"""

from __future__ import annotations

import shutil
import socket
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift
from postgres_server import postgres_server

from drift.demo import IncidentSandbox
from drift.store.query import History
from drift.store.urls import resolve_db_url

HOST = "decode-7"


class Gate:
    """A TCP forwarder to a server's port, shut and opened again like a network link."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener: socket.socket | None = None
        self.port = 0
        self.links: list[socket.socket] = []
        self.open()

    def open(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def shut(self) -> None:
        assert self.listener is not None
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        except OSError:
            pass
        self.listener.close()
        for link in self.links:
            link.close()
        self.links.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self.links += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.fixture
def central() -> Iterator[tuple[str, Gate]]:
    with postgres_server() as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        gate = Gate(port)
        try:
            yield url, gate
        finally:
            gate.shut()


def states(db: str | Path) -> dict[int, set[tuple[str, str, str | None, str | None, bool]]]:
    """Every snapshot's state of HOST, by its time."""
    with History.open(resolve_db_url(str(db)), HOST) as history:
        snaps = history.snapshots_between(0, history.latest().id)
        return {
            s.taken_us: {
                (v.subject, v.key, v.value, v.blob_sha256, v.secret)
                for v in history.state_at(s.id).values()
            }
            for s in snaps
        }


def test_records_kept_during_an_outage_are_shipped_in_order_once(
    central: tuple[str, Gate], tmp_path: Path
) -> None:
    url, gate = central
    box = IncidentSandbox(tmp_path / "box")
    box.build()
    spool = tmp_path / "spool" / "spool.db"
    gated = url.replace(url.rsplit(":", 1)[1].split("/")[0], str(gate.port), 1)
    config = box.config_path.read_text().replace('host = "gpu-node-7"', f'host = "{HOST}"')
    box.config_path.write_text(f'db = "{gated}"\nspool = "{spool}"\n' + config)
    args = ["--config", str(box.config_path)]
    box.start_all()
    try:
        run_drift(["record", *args], tmp_path)  # #1, straight to the central database
        gate.shut()
        first = run_drift(["record", *args], tmp_path)
        assert "database out of reach" in first.stderr and str(spool) in first.stderr
        box.add_culprit()
        box.stop("decode")
        box.start("decode")
        quiet = run_drift(["record", "--quiet", *args], tmp_path)
        assert quiet.stderr == ""  # cron hears of an outage once, at its first record
        again = run_drift(["record", "--quiet", *args], tmp_path)
        assert again.stderr == ""
        kept = states(spool)
        assert len(kept) == 3
        copy = tmp_path / "spool-copy.db"
        with sqlite3.connect(spool) as src, sqlite3.connect(copy) as dst:
            src.backup(dst)
        refused = run_drift(["push", *args], tmp_path, check=False)
        assert refused.returncode == 2 and "cannot connect" in refused.stderr
        assert spool.exists()  # still out of reach: the spool stays

        gate.open()
        back = run_drift(["record", *args], tmp_path)
        assert "shipped 3 spooled snapshots first" in back.stderr
        assert not spool.exists()
    finally:
        box.stop_all()

    shipped = states(url)
    assert len(shipped) == 5
    assert {t: shipped[t] for t in kept} == kept  # the spool's states, record for record
    assert list(shipped) == sorted(shipped)
    nothing = run_drift(["push", *args], tmp_path)
    assert "nothing to ship" in nothing.stdout
    # The same spool again (a push cut short and run again): nothing is shipped twice.
    spool.parent.mkdir(exist_ok=True)
    shutil.copy(copy, spool)
    twice = run_drift(["push", *args], tmp_path)
    assert "shipped 0 snapshots" in twice.stdout and "3 it already had" in twice.stdout
    assert states(url) == shipped
    since = run_drift(["since", *args, "--stable", "#1", "--format", "json"], tmp_path)
    assert "SGLANG_SM120_MMA_TARGET_CTAS" in since.stdout
