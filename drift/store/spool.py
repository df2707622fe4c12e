"""The spool on disk: where it is, whether drift may trust it, and what to do when it is damaged.

A spool holds records on their way to a fleet's central database, which
drift ships there as its own. So drift uses only a spool nobody else can
have written or read: its folder is private to the user drift runs as
(mode 0700, like the history's), no folder above it can be renamed by
another user, and its files are that user's alone. A spool SQLite cannot
read whole is set aside under a name that says so, never deleted: what
can still be read from it is shipped on, and the rest waits there for a
person. Each config and host has a spool of its own by default, so two
hosts (or two configs) sharing a state folder never share one; one that
does share is emptied host by host, of what was shipped only.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from drift.errors import StoreError
from drift.store.db import DbapiConnection, write_transaction
from drift.store.files import sqlite_side_files
from drift.store.urls import DbUrl, default_db_path

LEGACY_SPOOL_NAME = "spool.db"  # the one default spool of drift before spools per config and host
SET_ASIDE_MARK = ".damaged-"

# SQLite's answers for a file that is not, or no longer, a whole database.
_DAMAGED_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


def spool_path(
    db: DbUrl, configured: str | None, config_path: Path | None, host: str
) -> Path | None:
    """Where a host keeps its records while `db` is unreachable: the config's `spool`, else
    one per config file and host in drift's state folder. None for an SQLite history."""
    if db.sqlite_path is not None:
        return None
    if configured:
        return Path(configured)
    which = f"{os.path.abspath(config_path) if config_path else ''}\0{host}"
    digest = hashlib.sha256(which.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", host)[:64]
    return default_db_path().parent / f"spool-{readable}-{digest}.db"


def legacy_spool(db: DbUrl, configured: str | None) -> Path | None:
    """The default spool of an older drift (one for every config and host), still shipped
    from so an upgrade loses no record it holds; None when the config names its spool."""
    if db.sqlite_path is not None or configured:
        return None
    return default_db_path().parent / LEGACY_SPOOL_NAME


def check_spool_place(spool: Path) -> None:
    """Raise StoreError unless the spool may be trusted: its folder private to the user running
    drift, no folder above it open to another user's renames, each of its files theirs alone."""
    spool = Path(os.path.abspath(spool))
    _check_links(spool)
    folder = Path(os.path.realpath(spool.parent))
    _check_folders(spool, folder)
    _check_files(spool)


def _check_links(spool: Path) -> None:
    """No link on the way to the spool's folder belongs to another user: whoever owns a link
    can point it elsewhere at any time."""
    me = os.geteuid()
    for part in [*reversed(spool.parent.parents), spool.parent]:
        try:
            info = os.lstat(part)
        except OSError:
            return  # made by drift from here on, private
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in (me, 0):
            _refuse(spool, f"{part} on its way is a link owned by {_user(info.st_uid)}")


def _check_folders(spool: Path, folder: Path) -> None:
    """The folders above the spool's are root's or drift's user's and no one else can rename in
    them (sticky if open to writing); the spool's own folder is that user's alone."""
    me = os.geteuid()
    for above in reversed(folder.parents):
        try:
            info = os.stat(above)
        except OSError:
            return
        if info.st_uid not in (me, 0):
            _refuse(spool, f"{above} above it is owned by {_user(info.st_uid)}")
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            _refuse(spool, f"{above} above it is writable by other users ({_mode(info)})")
    try:
        info = os.stat(folder)
    except FileNotFoundError:
        return  # drift makes it 0700
    except OSError as exc:
        _refuse(spool, f"cannot look at its folder {folder}: {exc.strerror or exc}")
    if info.st_uid != me:
        _refuse(spool, f"its folder {folder} is owned by {_user(info.st_uid)}, not {_user(me)}")
    if info.st_mode & 0o077:
        _refuse(spool, f"its folder {folder} is open to other users ({_mode(info)}); chmod 700 it")


def _check_files(spool: Path) -> None:
    """The spool and its companions, where they exist, are regular files of drift's user, 0600."""
    me = os.geteuid()
    for path in sqlite_side_files(spool):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode):
            _refuse(spool, f"{path} is not a regular file")
        if info.st_uid != me:
            _refuse(spool, f"{path} is owned by {_user(info.st_uid)}, not {_user(me)}")
        if info.st_mode & 0o077:
            _refuse(spool, f"other users can read or write {path} ({_mode(info)}); chmod 600 it")


def _refuse(spool: Path, why: str) -> NoReturn:
    raise StoreError(
        f"{spool}: refusing this spool: {why} (another user could read the records or "
        "plant some to ship; set `spool` to a file in a folder only drift's user can enter)"
    )


def _mode(info: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(info.st_mode):04o}"


def _user(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def spool_damage(spool: Path) -> str | None:
    """Why SQLite cannot read the spool whole (its own words), or None when it can."""
    if os.path.getsize(spool) == 0:
        return "it is empty: cut before its first record was whole"
    try:
        raw = sqlite3.connect(str(spool), isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"{spool}: cannot open the spool: {exc}") from None
    try:
        rows = raw.execute("PRAGMA quick_check").fetchall()
        problems = [str(row[0]) for row in rows if row[0] != "ok"]
        if problems:
            return problems[0]
        if (
            os.path.getsize(spool)
            and not raw.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'"
            ).fetchone()
        ):
            return "it holds no drift history"
        return None
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            return str(exc)
        raise StoreError(f"{spool}: cannot read the spool: {exc}") from None
    finally:
        raw.close()


def spool_too_new(spool: Path) -> str | None:
    """Bring a spool an older drift wrote to this drift's schema (it is drift's own file, and
    its records wait to be shipped by this drift); why it cannot be, when a newer drift wrote it.
    """
    from drift.errors import SchemaTooNew, SchemaTooOld
    from drift.store.db import connect_dbapi
    from drift.store.schema import check_revision, current_revision_dbapi, upgrade_database
    from drift.store.urls import resolve_db_url

    url = resolve_db_url(str(spool))
    conn = connect_dbapi(url)
    try:
        revision = current_revision_dbapi(conn)
    finally:
        conn.close()
    if revision is None:
        return None  # a new spool: made at head when first written
    try:
        check_revision(revision)
    except SchemaTooNew as exc:
        return str(exc)
    except SchemaTooOld:
        upgrade_database(url)
    return None


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite failed because the file is not (or no longer) a whole database."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _DAMAGED_CODES


def set_aside(spool: Path) -> Path:
    """Rename a damaged spool and its companions to `SPOOL.damaged-STAMP`, kept for a person;
    the next record starts a spool afresh. Returns the new name."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = spool.with_name(f"{spool.name}{SET_ASIDE_MARK}{stamp}")
    n = 1
    while os.path.lexists(aside):
        n += 1
        aside = spool.with_name(f"{spool.name}{SET_ASIDE_MARK}{stamp}-{n}")
    # The database with its WAL and shared memory; its lock file stays where it is.
    for path, new in zip(sqlite_side_files(spool)[:3], sqlite_side_files(aside)[:3], strict=True):
        try:
            os.rename(path, new)
        except FileNotFoundError:
            pass
    return aside


def whole(copy: Path) -> bool:
    """Whether SQLite's full integrity check finds nothing wrong in a spool's copy: only then
    is what it reads what was written (a zeroed page can read as rows with other values)."""
    try:
        raw = sqlite3.connect(str(copy), isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        rows = raw.execute("PRAGMA integrity_check").fetchall()
        return [str(r[0]) for r in rows] == ["ok"]
    except sqlite3.DatabaseError:
        return False
    finally:
        raw.close()


@contextmanager
def readable_copy(aside: Path) -> Iterator[Path]:
    """A private copy of a set-aside spool (with its WAL) for SQLite to read what it can, the
    original kept as it is. A file cut short is padded back to the size its header gives: the
    pages it lost then read as damaged, and every other page as it was."""
    copy = aside.with_name(f"{aside.name}.reading")
    try:
        for source, target in zip(
            sqlite_side_files(aside)[:2], sqlite_side_files(copy)[:2], strict=True
        ):
            _remove_quietly(target)
            try:
                with open(source, "rb") as src:
                    fd = os.open(
                        target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600
                    )
                    with os.fdopen(fd, "wb") as out:
                        shutil.copyfileobj(src, out)
            except FileNotFoundError:
                continue
        with open(copy, "r+b") as handle:
            header = handle.read(100)
            if len(header) == 100 and header.startswith(b"SQLite format 3\0"):
                page = int.from_bytes(header[16:18], "big")
                page = 65536 if page == 1 else page
                pages = int.from_bytes(header[28:32], "big")
                if page * pages > os.fstat(handle.fileno()).st_size:
                    handle.truncate(page * pages)
        yield copy
    finally:
        for path in sqlite_side_files(copy):
            _remove_quietly(path)


def _remove_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def drop_host(conn: DbapiConnection, host_id: int) -> None:
    """Remove one host's records from a spool, and the texts, provenances and configs that no
    one else's use: what it shipped, leaving every other host's records as they are."""
    facts = "SELECT id FROM facts WHERE host_id = ?"
    with write_transaction(conn):
        conn.execute(f"DELETE FROM versions WHERE fact_id IN ({facts})", (host_id,))
        for table in ("facts", "marks", "stat_cache", "snapshots"):
            conn.execute(f"DELETE FROM {table} WHERE host_id = ?", (host_id,))
        conn.execute("DELETE FROM hosts WHERE id = ?", (host_id,))
        conn.execute(
            "DELETE FROM blobs WHERE sha256 NOT IN "
            "(SELECT blob_sha256 FROM versions WHERE blob_sha256 IS NOT NULL)"
        )
        conn.execute(
            "DELETE FROM provenances WHERE id NOT IN "
            "(SELECT provenance_id FROM versions WHERE provenance_id IS NOT NULL)"
        )
        conn.execute(
            "DELETE FROM configs WHERE id NOT IN "
            "(SELECT config_id FROM snapshots WHERE config_id IS NOT NULL)"
        )
