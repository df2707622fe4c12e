"""A host that cannot reach its central PostgreSQL keeps recording into its spool, and the
next record that reaches it (or drift push) ships what it kept, in order, once.

The outage is real: the central database is reached through a TCP gate the test shuts
and opens again, so drift sees its connections refused as it would on a network cut.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import sqlite3
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import run_drift
from postgres_server import postgres_server

from drift.demo import IncidentSandbox
from drift.store.db import connect_dbapi
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
    spool.chmod(0o600)  # drift's own spool is its user's alone; the copy took the umask's mode
    twice = run_drift(["push", *args], tmp_path)
    assert "shipped 0 snapshots" in twice.stdout and "3 it already had" in twice.stdout
    assert states(url) == shipped
    since = run_drift(["since", *args, "--stable", "#1", "--format", "json"], tmp_path)
    assert "SGLANG_SM120_MMA_TARGET_CTAS" in since.stdout


Fleet = tuple[str, Gate, IncidentSandbox]


@pytest.fixture
def fleet(central: tuple[str, Gate], sandbox: IncidentSandbox) -> Fleet:
    """The central database (its URL and the gate to it) and a running sandbox to record."""
    return (*central, sandbox)


def gated_url(url: str, gate: Gate) -> str:
    """The central database's URL through the gate."""
    return url.replace(url.rsplit(":", 1)[1].split("/")[0], str(gate.port), 1)


def host_config(
    box: IncidentSandbox, name: str, host: str, db: str, spool: Path | None
) -> list[str]:
    """A config `name` for `host` watching the sandbox, beside its drift.toml; the --config
    arguments."""
    path = box.config_path.with_name(name)
    config = box.config_path.read_text().replace('host = "gpu-node-7"', f'host = "{host}"')
    head = f'db = "{db}"\n' + (f'spool = "{spool}"\n' if spool is not None else "")
    path.write_text(head + config)
    return ["--config", str(path)]


def hosts_in(db: str | Path) -> dict[str, int]:
    """How many snapshots each host has in a history."""
    conn = connect_dbapi(resolve_db_url(str(db)))
    try:
        rows = conn.execute(
            "SELECT h.name, count(s.id) FROM hosts h LEFT JOIN snapshots s ON s.host_id = h.id "
            "GROUP BY h.name"
        ).fetchall()
    finally:
        conn.close()
    return {str(name): int(n) for name, n in rows}


def other_user() -> str:
    """A real user that is not root: nobody, else one made for the test."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to act as another user")
    for name in ("nobody", "drift-other"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "--no-create-home", "drift-other"], check=True)
    return "drift-other"


def as_user(user: str, command: list[str], **kwargs: Any) -> None:
    """Run a command as `user` (setpriv: its uid, its group, no other group)."""
    entry = pwd.getpwnam(user)
    subprocess.run(
        [
            "setpriv",
            f"--reuid={entry.pw_uid}",
            f"--regid={entry.pw_gid}",
            "--clear-groups",
            *command,
        ],
        check=True,
        **kwargs,
    )


def test_a_spool_another_user_could_write_or_read_is_refused(fleet: Fleet, tmp_path: Path) -> None:
    url, gate, box = fleet
    user = other_user()
    # Another user plants a drift history claiming this host in a world-writable folder.
    shared = Path(tempfile.mkdtemp(prefix="drift-shared-", dir="/tmp"))
    shared.chmod(0o1777)
    planted = shared / "spool.db"
    forged = tmp_path / "forged.db"
    try:
        forging = host_config(box, "forge.toml", HOST, str(forged), None)
        run_drift(["record", *forging], tmp_path)
        run_drift(["mark", "stable", "--note", "FORGED-BY-OTHER-USER", *forging], tmp_path)
        with open(forged, "rb") as src:
            as_user(user, ["sh", "-c", f"umask 022; cat > {planted}"], stdin=src)
        assert planted.stat().st_uid == pwd.getpwnam(user).pw_uid
        before = planted.read_bytes()
        args = host_config(box, "host.toml", HOST, gated_url(url, gate), planted)

        # Reachable: the planted history is not shipped into the central database.
        refused = run_drift(["record", *args], tmp_path, check=False)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
        assert f"{planted}: refusing this spool" in refused.stderr
        pushed = run_drift(["push", *args], tmp_path, check=False)
        assert pushed.returncode == 2 and "refusing this spool" in pushed.stderr
        # Out of reach: nothing is written where the other user can read it.
        gate.shut()
        kept = run_drift(["record", *args], tmp_path, check=False)
        assert kept.returncode == 2 and "refusing this spool" in kept.stderr
        assert planted.read_bytes() == before

        # The folder alone, with no file in it yet, is refused too: anyone could plant one.
        planted.unlink()
        empty = run_drift(["record", *args], tmp_path, check=False)
        assert empty.returncode == 2 and f"its folder {shared}" in empty.stderr
        assert "mode 1777" in empty.stderr and not planted.exists()

        # drift's own spool that other users may read is refused, in a private folder too.
        private = tmp_path / "private"
        args = host_config(box, "host.toml", HOST, gated_url(url, gate), private / "s.db")
        first = run_drift(["record", *args], tmp_path)
        assert "database out of reach" in first.stderr
        assert stat.S_IMODE(private.stat().st_mode) == 0o700
        (private / "s.db").chmod(0o644)
        readable = run_drift(["record", *args], tmp_path, check=False)
        assert readable.returncode == 2 and "other users can read or write" in readable.stderr
        (private / "s.db").chmod(0o600)
        # Nor through a link the other user owns (they could point it elsewhere at any time).
        as_user(user, ["ln", "-s", str(private), str(shared / "link")])
        linked = host_config(box, "link.toml", HOST, gated_url(url, gate), shared / "link" / "s.db")
        through = run_drift(["record", *linked], tmp_path, check=False)
        assert (
            through.returncode == 2
            and f"{shared}/link on its way is a link owned by {user}" in (through.stderr)
        )
        # A FIFO for a spool is no file to trust, and never waited on.
        os.mkfifo(private / "fifo.db", 0o600)
        fifo = host_config(box, "fifo.toml", HOST, gated_url(url, gate), private / "fifo.db")
        piped = run_drift(["record", *fifo], tmp_path, check=False, timeout=30)
        assert piped.returncode == 2 and "fifo.db is not a regular file" in piped.stderr
        gate.open()
        back = run_drift(["record", *args], tmp_path)
        assert "shipped 1 spooled snapshot first" in back.stderr
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert hosts_in(url) == {HOST: 2}  # drift's own two records, nothing of the planted one
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM marks").fetchone() == (0,)


def outage(fleet: Fleet, args: list[str], spool: Path, tmp_path: Path) -> dict[int, set[Any]]:
    """The database goes out of reach for two records, the culprit landing between them; the
    states the spool kept."""
    _url, gate, box = fleet
    gate.shut()
    run_drift(["record", *args], tmp_path)
    box.add_culprit()
    box.restart_all()
    run_drift(["record", *args], tmp_path)
    kept = states(spool)
    assert len(kept) == 2
    return kept


def set_aside_named(stderr: str, spool: Path) -> Path:
    """The file a warning says a damaged spool was set aside as."""
    line = next(line for line in stderr.splitlines() if "is damaged" in line)
    assert line.startswith(f"drift: spool {spool} is damaged (")
    aside = Path(line.split("set aside as ", 1)[1].split(";", 1)[0])
    assert aside.parent == spool.parent and aside.name.startswith(f"{spool.name}.damaged-")
    return aside


def test_a_damaged_spool_is_set_aside_and_recording_goes_on(fleet: Fleet, tmp_path: Path) -> None:
    url, gate, box = fleet
    spool = tmp_path / "spool" / "spool.db"
    args = host_config(box, "host.toml", HOST, gated_url(url, gate), spool)
    run_drift(["record", *args], tmp_path)  # #1, central
    kept = outage(fleet, args, spool, tmp_path)
    # A power cut: the spool's last page is lost. A torn file is read only when SQLite's
    # integrity check finds it whole: rows of a torn one can read with other values. Its
    # snapshots stay in the set-aside file, and the record goes on into a new spool.
    with sqlite3.connect(spool) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    os.truncate(spool, spool.stat().st_size - 4096)
    cut = spool.read_bytes()
    during = run_drift(["record", *args], tmp_path)
    aside = set_aside_named(during.stderr, spool)
    assert aside.read_bytes() == cut  # set aside as it was, never deleted
    saved = re.search(r"; (all )?(\d+) snapshots? of host decode-7", during.stderr)
    assert saved is not None, during.stderr
    read = int(saved.group(2))
    assert read == 0 and "the rest could not be read and stays there" in during.stderr
    assert "database out of reach" in during.stderr
    renewed = states(spool)
    assert len(renewed) == read + 1
    assert {t: renewed[t] for t in sorted(kept)[:read]} == {t: kept[t] for t in sorted(kept)[:read]}

    # The new spool is damaged too (its header overwritten) while the database is back.
    with open(spool, "r+b") as handle:
        handle.write(b"\0garbage" * 16)
    gate.open()
    back = run_drift(["record", *args], tmp_path)
    second = set_aside_named(back.stderr, spool)
    assert second != aside and second.exists() and aside.exists()
    assert "0 snapshots of host decode-7 could be read from it" in back.stderr
    assert "the rest could not be read and stays there" in back.stderr
    assert not spool.exists()
    again = run_drift(["record", *args], tmp_path)  # nothing more to say
    assert "damaged" not in again.stderr
    assert hosts_in(url) == {HOST: 3}  # #1, and the two records that reached it


def test_two_hosts_sharing_a_spool_each_ship_their_own(fleet: Fleet, tmp_path: Path) -> None:
    url, gate, box = fleet
    spool = tmp_path / "shared-spool" / "spool.db"
    x = host_config(box, "x.toml", HOST, gated_url(url, gate), spool)
    y = host_config(box, "y.toml", "decode-8", gated_url(url, gate), spool)
    gate.shut()
    run_drift(["record", *x], tmp_path)
    run_drift(["record", *y], tmp_path)
    run_drift(["record", *y], tmp_path)
    assert hosts_in(spool) == {HOST: 1, "decode-8": 2}
    gate.open()
    back = run_drift(["record", *x], tmp_path)
    assert "shipped 1 spooled snapshot first" in back.stderr
    assert hosts_in(spool) == {"decode-8": 2}  # the other host's records stay
    pushed = run_drift(["push", *y], tmp_path)
    assert "shipped 2 snapshots of host decode-8" in pushed.stdout
    assert not spool.exists()
    assert hosts_in(url) == {HOST: 2, "decode-8": 2}


def test_the_default_spool_is_one_per_config_and_host(fleet: Fleet, tmp_path: Path) -> None:
    url, gate, box = fleet
    x = host_config(box, "x.toml", HOST, gated_url(url, gate), None)
    y = host_config(box, "y.toml", "decode-8", gated_url(url, gate), None)
    x2 = host_config(box, "x2.toml", HOST, gated_url(url, gate), None)
    state = tmp_path / "xdg-state" / "drift"
    gate.shut()
    spools = set()
    for args in (x, y, x2):
        kept = run_drift(["record", *args], tmp_path).stderr
        spools.add(Path(kept.split("; kept in ", 1)[1].split(" (", 1)[0]))
    assert len(spools) == 3 and {s.parent for s in spools} == {state}
    # A spool an older drift kept at the one default path is shipped too, not forgotten.
    older = state / "spool.db"
    (state / [s for s in spools if "decode-8" in s.name][0].name).rename(older)
    gate.open()
    back = run_drift(["record", *y], tmp_path)
    assert "shipped 1 spooled snapshot first" in back.stderr and not older.exists()
    run_drift(["record", *x], tmp_path)
    assert hosts_in(url) == {HOST: 2, "decode-8": 2}
    # x2's spool is its own: shipping x's took nothing of it.
    (left,) = state.glob("spool*.db")
    assert left in spools and hosts_in(left) == {HOST: 1}


def test_a_spool_an_older_drift_wrote_is_brought_up_and_shipped(
    fleet: Fleet, tmp_path: Path
) -> None:
    from history_0005 import write_as_0005

    url, gate, box = fleet
    spool = tmp_path / "spool" / "spool.db"
    args = host_config(box, "host.toml", HOST, gated_url(url, gate), spool)
    kept = outage(fleet, args, spool, tmp_path)
    # The same records as the drift before migration 0006 stored them; then drift is upgraded.
    old = tmp_path / "old.db"
    write_as_0005(resolve_db_url(str(spool)), resolve_db_url(str(old)))
    for path in spool.parent.glob("spool.db*"):
        path.unlink()
    old.rename(spool)
    spool.chmod(0o600)
    during = run_drift(["record", *args], tmp_path)  # still out of reach: kept in it
    assert "database out of reach" in during.stderr and "damaged" not in during.stderr
    gate.open()
    back = run_drift(["record", *args], tmp_path)
    assert "shipped 3 spooled snapshots first" in back.stderr
    shipped = states(url)
    assert {t: shipped[t] for t in kept} == kept
    # One a newer drift wrote (drift downgraded meanwhile) is set aside unread, not misread.
    gate.shut()
    run_drift(["record", *args], tmp_path)
    with sqlite3.connect(spool) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    gate.open()
    newer = run_drift(["record", *args], tmp_path)
    line = next(
        line for line in newer.stderr.splitlines() if "cannot be read by this drift" in line
    )
    aside = Path(line.split("set aside as ", 1)[1].split(",", 1)[0])
    assert "schema 9999" in line and aside.exists() and not spool.exists()
    assert len(states(url)) == len(shipped) + 1
