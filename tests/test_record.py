"""`drift record` from the command line: one line, one transaction, one at a time, schema gate."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import random
import re
import select
import shutil
import signal
import sqlite3
import struct
import subprocess
import time
from pathlib import Path

import pytest
from conftest import DRIFT, drift_env, read_terminal, run_drift, start_drift

from drift.store.db import connect_dbapi
from drift.store.schema import HEAD_REVISION, current_revision_dbapi
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter


def config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "drift.toml"
    path.write_text('host = "rec"\n[[commands]]\nname = "hello"\nrun = "echo hello"\n' + extra)
    return path


def snapshots(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM snapshots").fetchone()[0]


def test_record_prints_one_line_and_quiet_prints_nothing(tmp_path: Path) -> None:
    cfg = ["--config", str(config(tmp_path)), "--db", str(tmp_path / "d.db")]
    out = run_drift(["record", *cfg], tmp_path).stdout
    assert out.count("\n") == 1
    assert out.startswith("snapshot #1: 2 facts, 2 changed, 0 errors, ")
    assert run_drift(["record", "--quiet", *cfg], tmp_path).stdout == ""
    assert run_drift(["record", *cfg], tmp_path).stdout.startswith(
        "snapshot #3: 2 facts, 0 changed"
    )


def test_default_database_lives_in_the_xdg_state_dir(tmp_path: Path) -> None:
    run_drift(["record", "--config", str(config(tmp_path))], tmp_path)
    db = tmp_path / "xdg-state" / "drift" / "drift.db"
    assert snapshots(db) == 1
    assert (db.parent / "secret.key").stat().st_mode & 0o777 == 0o600


def test_overlapping_record_exits_at_once_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    cfg = [
        "--config",
        str(config(tmp_path, '[[commands]]\nname = "slow"\nrun = "sleep 3"\n')),
        "--db",
        str(db),
    ]
    run_drift(["init", *cfg], tmp_path)
    first = start_drift(["record", *cfg], tmp_path)
    time.sleep(1.0)  # the first record is inside its slow command now
    started = time.monotonic()
    second = run_drift(["record", *cfg], tmp_path, check=False)
    assert time.monotonic() - started < 2.5
    assert second.returncode == 3
    assert second.stderr.count("\n") == 1 and "another drift record is running" in second.stderr
    out, _err = first.communicate(timeout=30)
    assert first.returncode == 0 and out.startswith("snapshot #1")
    assert snapshots(db) == 1


@pytest.mark.slow
def test_record_killed_at_any_point_leaves_complete_snapshots(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for i in range(1500):
        folder = tree / f"d{i % 30}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.py").write_bytes(random.randbytes(2000))
    db = tmp_path / "d.db"
    cfg = [
        "--config",
        str(config(tmp_path, f'[[files]]\nname = "t"\npaths = ["{tree}/**"]\n')),
        "--db",
        str(db),
    ]
    run_drift(["init", *cfg], tmp_path)
    rng = random.Random(7)
    for round_ in range(6):
        # change some files so every record has real writing to do
        for i in rng.sample(range(1500), 200):
            (tree / f"d{i % 30}" / f"f{i}.py").write_bytes(random.randbytes(2000))
        proc = subprocess.Popen(
            [DRIFT, "record", *cfg],
            env=drift_env(tmp_path),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.05, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok", round_
            for snap, n_facts in conn.execute("SELECT id, n_facts FROM snapshots"):
                open_at = conn.execute(
                    "SELECT count(*) FROM versions WHERE first_snapshot_id <= ? "
                    "AND (until_snapshot_id IS NULL OR until_snapshot_id > ?)",
                    (snap, snap),
                ).fetchone()[0]
                assert open_at == n_facts, f"snapshot {snap} is incomplete"
    after = run_drift(["record", *cfg], tmp_path).stdout
    assert after.startswith(f"snapshot #{snapshots(db)}: 4,502 facts")  # 1500 files x 3 + 2


def _tree_to_record(tmp_path: Path, count: int) -> tuple[Path, list[str]]:
    """`count` small files in a tree, and the database and options that record them."""
    tree = tmp_path / "tree"
    for i in range(count):
        folder = tree / f"d{i % 40}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.py").write_text(f"value = {i}\n")
    path = config(tmp_path, f'[[files]]\nname = "t"\npaths = ["{tree}/**"]\n')
    db = tmp_path / "d.db"
    return db, ["--config", str(path), "--db", str(db)]


# SQLite's locks on a rollback-journal database are fcntl locks on bytes past
# 1 GiB of the file (os_unix.c): one byte a writer takes first (RESERVED),
# and a range every reader holds a read lock on, which a commit must lock whole.
_SQLITE_RESERVED_BYTE = 0x40000001
_SQLITE_SHARED = (0x40000002, 510)


def _ofd_lock(fd: int, kind: int, start: int, length: int) -> None:
    """Take (or with F_UNLCK drop) an open-file-description lock on bytes of `fd`'s file.

    SQLite's own locks see it like any other process's, and unlike a POSIX
    lock it survives the test closing a connection of its own to the same file.
    """
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", kind, os.SEEK_SET, start, length, 0))


def _read_until(controller: int, marker: bytes, timeout: float = 60) -> bytes:
    """What a pseudo-terminal shows until `marker`; fails if it never comes."""
    screen = b""
    deadline = time.monotonic() + timeout
    while marker not in screen:
        ready, _, _ = select.select([controller], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no {marker!r} on the terminal: {screen!r}"
        try:
            screen += os.read(controller, 65536)
        except OSError:  # EIO: drift is gone
            pytest.fail(f"drift exited before {marker!r}: {screen!r}")
    return screen


def test_a_first_record_killed_in_its_journaled_write_leaves_a_usable_database(
    tmp_path: Path,
) -> None:
    # A database's first snapshot is written through a rollback journal; a
    # record killed while the journal exists leaves it hot, and the next
    # connection rolls it back: no snapshot, an intact schema, WAL again.
    #
    # SQLite's own locks hold the record inside that write, so the kill lands
    # there on any machine: the database starts in rollback mode (where a
    # first write whose switch back to WAL found a reader leaves it), the
    # test keeps the RESERVED byte until the record says it is storing, and
    # a reader of its own keeps the commit from taking the file.
    db, cfg = _tree_to_record(tmp_path, 6_000)
    journal = tmp_path / "d.db-journal"
    run_drift(["init", *cfg], tmp_path)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    conn.close()
    locks = os.open(db, os.O_RDWR | os.O_CLOEXEC)
    controller, terminal = pty.openpty()
    reader = None
    try:
        _ofd_lock(locks, fcntl.F_WRLCK, _SQLITE_RESERVED_BYTE, 1)
        # With a writer's byte taken, neither this reader nor the record can
        # turn the database back to WAL; the reader reads, and keeps reading.
        reader = connect_dbapi(resolve_db_url(str(db)))
        reader.execute("BEGIN")
        assert current_revision_dbapi(reader) == HEAD_REVISION
        proc = subprocess.Popen(
            [DRIFT, "record", *cfg],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=terminal,
            env=drift_env(tmp_path),
            cwd=tmp_path,
        )
        os.close(terminal)
        terminal = -1
        try:
            _read_until(controller, b"store: ")  # collected; now it waits to begin writing
            _ofd_lock(locks, fcntl.F_UNLCK, _SQLITE_RESERVED_BYTE, 1)
            # It writes, and its commit waits for the reader: the journal stays.
            deadline = time.monotonic() + 30
            while not journal.exists():
                assert proc.poll() is None, "the record ended before its journal existed"
                assert time.monotonic() < deadline, "no journal in 30 s"
                time.sleep(0.001)
            # Meanwhile the reader reads the database as it was.
            assert current_revision_dbapi(reader) == HEAD_REVISION
            assert reader.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 0
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    finally:
        if reader is not None:
            reader.close()
        os.close(locks)
        os.close(controller)
        if terminal != -1:
            os.close(terminal)
    assert journal.exists(), "the kill did not land inside the journaled write"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM versions").fetchone()[0] == 0
    out = run_drift(["record", *cfg], tmp_path).stdout
    assert out.startswith("snapshot #1: 18,002 facts, 18,002 changed")
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert not journal.exists()


def test_a_first_record_beside_an_open_reader_goes_through_the_wal_at_once(
    tmp_path: Path,
) -> None:
    # The rollback journal needs the database to itself: with a reader
    # holding it open the first record neither waits for it nor fails.
    db, cfg = _tree_to_record(tmp_path, 600)
    run_drift(["init", *cfg], tmp_path)
    reader = sqlite3.connect(db)
    try:
        assert reader.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 0
        started = time.monotonic()
        out = run_drift(["record", *cfg], tmp_path).stdout
        assert time.monotonic() - started < 5  # not the 10 s busy timeout
        assert out.startswith("snapshot #1: 1,802 facts, 1,802 changed")
        assert reader.execute("SELECT count(*) FROM versions").fetchone()[0] == 1802
        assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        reader.close()


def test_record_refuses_a_database_from_a_newer_drift(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    cfg = ["--config", str(config(tmp_path)), "--db", str(db)]
    run_drift(["record", *cfg], tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    result = run_drift(["record", *cfg], tmp_path, check=False)
    assert result.returncode == 2
    assert "written by a newer drift" in result.stderr and result.stderr.count("\n") == 1
    assert snapshots(db) == 1
    upgrade = run_drift(["db", "upgrade", *cfg], tmp_path, check=False)
    assert upgrade.returncode == 2 and "newer drift" in upgrade.stderr
    # `db current` names the newer schema and the way out: a newer drift, not `db upgrade`.
    current = run_drift(["db", "current", *cfg], tmp_path).stdout
    assert "schema 9999;" in current and "written by a newer drift: upgrade drift" in current
    assert "run `drift db upgrade`" not in current


def test_a_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    db.write_text("this is not sqlite, it is a text file that happens to be here\n" * 20)
    result = run_drift(
        ["record", "--config", str(config(tmp_path)), "--db", str(db)], tmp_path, check=False
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("drift: ") and result.stderr.count("\n") == 1


def test_drift_never_hashes_its_own_files_and_forgets_deleted_ones(tmp_path: Path) -> None:
    # The files glob covers the folder holding the database, its WAL, lock and key.
    (tmp_path / "app.conf").write_text("workers = 4\n")
    (tmp_path / "old.conf").write_text("gone soon\n")
    db = tmp_path / "drift.db"
    path = tmp_path / "drift.toml"
    path.write_text(
        f'host = "rec"\nsecret_key_file = "{tmp_path}/secret.key"\n'
        '[[files]]\nname = "all"\npaths = ["**"]\n'
    )
    cfg = ["--config", str(path), "--db", str(db)]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)
    (tmp_path / "old.conf").unlink()
    run_drift(["record", *cfg], tmp_path)
    with sqlite3.connect(db) as conn:
        subjects = {r[0] for r in conn.execute("SELECT DISTINCT subject FROM facts")}
    writer = HistoryWriter.open(resolve_db_url(str(db)))
    try:
        cached = set(writer.load_file_cache("rec"))
    finally:
        writer.close()
    files = {s for s in subjects if s.startswith("file:")}
    assert files == {
        f"file:{tmp_path}/app.conf",
        f"file:{tmp_path}/drift.toml",
        f"file:{tmp_path}/old.conf",
    }
    assert cached == {f"{tmp_path}/app.conf", f"{tmp_path}/drift.toml"}
    assert "removed" in run_drift(["since", "--stable", "#2", *cfg], tmp_path).stdout


def test_a_file_name_that_is_not_utf8_is_recorded_cached_and_forgotten(tmp_path: Path) -> None:
    # A Latin-1 name (bytes no UTF-8 decoder takes) once made every record
    # fail; it is stored with the odd byte as \\xNN, and the stat cache knows it.
    tree = tmp_path / "tree"
    tree.mkdir()
    odd = os.fsencode(tree) + b"/caf\xe9.conf"
    with open(odd, "wb") as handle:
        handle.write(b"workers = 4\n")
    os.symlink(b"caf\xe9.conf", os.fsencode(tree) + b"/latest")
    path = tmp_path / "drift.toml"
    path.write_text(f'host = "rec"\n[[files]]\nname = "t"\npaths = ["{tree}/*"]\n')
    cfg = ["--config", str(path), "--db", str(tmp_path / "d.db")]
    assert run_drift(["record", *cfg], tmp_path).stdout.startswith("snapshot #1: 4 facts")
    shown = run_drift(["show", *cfg], tmp_path).stdout
    assert f"file:{tree}/caf\\xe9.conf" in shown
    assert "symlink = caf\\xe9.conf" in shown
    assert ", 0 changed," in run_drift(["record", *cfg], tmp_path).stdout
    os.unlink(odd)
    assert ", 3 changed," in run_drift(["record", *cfg], tmp_path).stdout
    writer = HistoryWriter.open(resolve_db_url(str(tmp_path / "d.db")))
    try:
        assert writer.load_file_cache("rec") == {}
    finally:
        writer.close()


def test_a_chmod_of_a_cached_file_is_a_change_and_an_untouched_tree_is_not(tmp_path: Path) -> None:
    # Cached files go to the store as one block compared by digest: the block
    # must still tell a mode change, and say nothing when nothing moved.
    tree = tmp_path / "tree"
    for i in range(40):
        (tree / f"d{i % 4}").mkdir(parents=True, exist_ok=True)
        (tree / f"d{i % 4}" / f"f{i}.py").write_text(f"x = {i}\n")
    path = tmp_path / "drift.toml"
    path.write_text(f'host = "rec"\n[[files]]\nname = "tree"\npaths = ["{tree}/**"]\n')
    cfg = ["--config", str(path), "--db", str(tmp_path / "d.db")]
    time.sleep(0.1)  # past the racy window, so the first record fills the stat cache
    assert ": 120 facts, 120 changed" in run_drift(["record", *cfg], tmp_path).stdout
    assert ": 120 facts, 0 changed" in run_drift(["record", *cfg], tmp_path).stdout
    (tree / "d1" / "f5.py").chmod(0o600)
    assert ": 120 facts, 1 changed" in run_drift(["record", *cfg], tmp_path).stdout
    since = run_drift(["since", "--stable", "#2", "--format", "json", *cfg], tmp_path).stdout
    (suspect,) = json.loads(since)["data"]["suspects"]
    (change,) = suspect["changes"]
    assert (change["subject"], change["key"]) == (f"file:{tree}/d1/f5.py", "mode")
    assert (change["before"], change["after"]) == ("0644", "0600")


def test_the_record_after_a_file_change_takes_the_unchanged_shortcut(tmp_path: Path) -> None:
    # A changed file is read, so it reaches the store in the block of files read;
    # at the next record the stat cache vouches for it and it is in the other block.
    # Same state: that record must write its snapshot row without reading a value.
    from drift.config import load_config
    from drift.record import record

    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(30):
        (tree / f"f{i:02d}.txt").write_text(f"{i}\n")
    path = tmp_path / "drift.toml"
    path.write_text(
        f'host = "rec"\nsecret_key_file = "{tmp_path}/secret.key"\n'
        f'[[files]]\nname = "tree"\npaths = ["{tree}/*"]\n'
    )
    cfg, db = load_config(path), resolve_db_url(str(tmp_path / "d.db"))
    time.sleep(0.1)  # past the racy window, so a record fills the stat cache
    assert record(cfg, db).changed == 90
    assert (record(cfg, db).changed, record(cfg, db).values_read) == (0, 0)
    (tree / "f07.txt").write_text("seven\n")
    time.sleep(0.1)
    changed = record(cfg, db)
    assert (changed.changed, changed.values_read) == (2, 90)  # sha256 and size
    after = record(cfg, db)
    assert (after.changed, after.values_read) == (0, 0)


def _stderr_on_a_terminal(args: list[str], tmp_path: Path) -> tuple[str, str]:
    """Run drift with stderr on a real pseudo-terminal: (stdout, what the terminal got)."""
    controller, terminal = pty.openpty()
    try:
        result = subprocess.run(
            [DRIFT, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=terminal,
            env=drift_env(tmp_path),
            cwd=tmp_path,
            timeout=60,
            check=True,
        )
    finally:
        os.close(terminal)
    screen = read_terminal(controller)
    return result.stdout.decode(), screen.decode()


def preallocated(path: Path, size: int) -> Path:
    """A file of `size` bytes, allocated but never written (fallocate); skips where that costs.

    Not on tmpfs, where it would take memory, nor where fallocate would write
    zeros or the disk would be left with less than as much again free.
    """
    kind = subprocess.run(
        ["stat", "-f", "-c", "%T", str(path.parent)], capture_output=True, text=True, check=True
    ).stdout.strip()
    if kind in ("tmpfs", "ramfs"):
        pytest.skip(f"{path.parent} is on {kind}: preallocating would take memory")
    if shutil.disk_usage(path.parent).free < 2 * size:
        pytest.skip(f"not {2 * size >> 30} GiB free to preallocate {path.name}")
    made = subprocess.run(["fallocate", "-l", str(size), str(path)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot preallocate {path.name}: {made.stderr.strip()}")
    return path


def test_ctrl_c_while_huge_files_are_hashed_ends_at_once_and_writes_nothing(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(50):
        (tree / f"f{i:02}.txt").write_text(f"{i}\n")
    # Preallocated, not sparse: drift never reads a sparse file, but reads these
    # whole (zeros, no disk reads), for longer than the 5 s allowed below.
    images = {tree / "huge.img": 24 << 30, tree / "big.img": 4 << 30}
    request.addfinalizer(lambda: [image.unlink(missing_ok=True) for image in images])
    for image, size in images.items():
        preallocated(image, size)
    path = tmp_path / "drift.toml"
    path.write_text(
        f'host = "rec"\n[[files]]\nname = "tree"\npaths = ["{tree}/*"]\nmax_size = "32GiB"\n'
    )
    db = tmp_path / "d.db"
    proc = start_drift(["record", "--config", str(path), "--db", str(db)], tmp_path)
    deadline = time.monotonic() + 30
    # Both threads are hashing once both images are open.
    while {"huge.img", "big.img"} - {os.path.basename(t) for t in _open_files(proc.pid)}:
        assert time.monotonic() < deadline, "drift never opened both images"
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 5, "drift waited for the other thread's file to be hashed"
    assert proc.returncode == 130 and err == "drift: interrupted\n"
    assert snapshots(db) == 0


def _open_files(pid: int) -> list[str]:
    """What process `pid` has open, by path; fds that close while we look are skipped."""
    folder = f"/proc/{pid}/fd"
    targets = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    for name in names:
        try:
            targets.append(os.readlink(os.path.join(folder, name)))
        except OSError:
            continue
    return targets


def test_a_terminal_sees_hashing_progress_and_cron_sees_none(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(30):
        (tree / f"f{i:02}.bin").write_bytes(os.urandom(64 << 10))
    for i in range(2):  # large files are read on a second thread; they count too
        (tree / f"large{i}.bin").write_bytes(os.urandom(4 << 20))
    share = tmp_path / "share"  # a set whose name reads like a verb after "files"
    share.mkdir()
    for i in range(3):
        (share / f"s{i}.txt").write_text(f"{i}\n")
    path = tmp_path / "drift.toml"
    path.write_text(
        f'host = "rec"\n[[files]]\nname = "tree"\npaths = ["{tree}/*"]\n'
        f'[[files]]\nname = "share"\npaths = ["{share}/*"]\n'
    )
    cfg = ["--config", str(path), "--db", str(tmp_path / "d.db")]

    stdout, screen = _stderr_on_a_terminal(["record", *cfg], tmp_path)
    assert stdout.startswith("snapshot #1: 105 facts, 105 changed")
    # What it is doing comes first, then which set: each set shows as soon as it starts.
    assert re.search(r"\rlisting files of set tree: \d+ found", screen), screen
    assert re.search(r"\rhashing files of set tree: [123] of 32 \(\d of 10 MiB\)", screen), screen
    assert re.search(r"\rhashing files of set share: [123] of 3 \(0 of 0 MiB\)", screen), screen
    assert "files share" not in screen
    # Storing follows at once: a new kind of work is not held back by the rate limit.
    assert "\rstore: 105 facts, writing what changed" in screen
    # The status line is blanked again: the terminal is left on a clean line.
    assert screen.endswith("\r") and screen.rsplit("\r", 2)[-2].strip() == ""

    _, quiet = _stderr_on_a_terminal(["record", "--quiet", *cfg], tmp_path)
    assert quiet == ""
    piped = run_drift(["record", *cfg], tmp_path)
    assert piped.stderr == ""


SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def cron_command(config_path: Path) -> str:
    """The shipped cron line's command, pointed at this drift and `config_path`."""
    line = next(
        line
        for line in (SAMPLES / "cron" / "drift").read_text().splitlines()
        if line.startswith("* ")
    )
    command = " ".join(line.split()[6:])  # after the five time fields and the user
    return command.replace("drift record", f"{DRIFT} record").replace(
        "/etc/drift/drift.toml", str(config_path)
    )


def test_quiet_record_under_cron_mails_each_new_collection_error_once(tmp_path: Path) -> None:
    # The shipped sample config on a box without that deployment: its units, serve
    # scripts, kernels and checkout are not here. Under cron this used to print nothing
    # and exit 0, every minute: the broken config stayed hidden.
    config_path = tmp_path / "drift.toml"
    config_path.write_text((SAMPLES / "sglang-pd" / "drift.toml").read_text())
    env = {**drift_env(tmp_path), "DRIFT_DB": str(tmp_path / "d.db")}

    def cron() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["/bin/sh", "-c", cron_command(config_path)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )

    first = cron()
    assert first.returncode == 4 and first.stdout == ""
    lines = first.stderr.splitlines()
    assert len(lines) >= 4  # 3 serve scripts and 4 globs at least, wherever this runs
    assert all(line.startswith("drift: new collection error in snapshot #1: ") for line in lines)
    assert any(line.endswith("script not found: /opt/serve/decode.sh") for line in lines)
    assert "Traceback" not in first.stderr

    # The same errors a minute later: recorded (exit 4) but not mailed again.
    second = cron()
    assert (second.returncode, second.stdout, second.stderr) == (4, "", "")

    # A new problem is mailed once, alone.
    config_path.write_text(
        config_path.read_text() + '\n[[files]]\nname = "gone"\npaths = ["/nonexistent/x.conf"]\n'
    )
    third = cron()
    assert third.returncode == 4
    assert third.stderr == (
        "drift: new collection error in snapshot #3: files:gone: no file matches "
        "/nonexistent/x.conf\n"
    )
    assert snapshots(tmp_path / "d.db") == 3  # every record was stored


def test_without_quiet_every_collection_error_is_listed_and_the_exit_code_says_so(
    tmp_path: Path,
) -> None:
    cfg = [
        "--config",
        str(config(tmp_path, '[[files]]\nname = "gone"\npaths = ["/nonexistent/x.conf"]\n')),
        "--db",
        str(tmp_path / "d.db"),
    ]
    for number in (1, 2):  # listed at every record, not only when new
        result = run_drift(["record", *cfg], tmp_path, check=False)
        assert result.returncode == 4
        assert result.stdout.startswith(f"snapshot #{number}: 2 facts, ")
        assert ", 1 error, " in result.stdout
        assert result.stderr == "  ! files:gone: no file matches /nonexistent/x.conf\n"
    clean = ["--config", str(config(tmp_path)), "--db", str(tmp_path / "d.db")]
    assert run_drift(["record", "--quiet", *clean], tmp_path).returncode == 0
