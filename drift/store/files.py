"""The SQLite file on disk: its companion files, whether it can be reached, and creating it
(and its folders) private to its owner.

The history holds every script's text and every value that is not a secret,
so drift makes its file 0600 and its folders 0700 whatever the umask.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from drift.errors import StoreError
from drift.private_dirs import make_private_dirs


def sqlite_side_files(path: Path) -> list[Path]:
    """The database file with its WAL, shared-memory and lock companions."""
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}.lock")]


def sqlite_exists(path: Path) -> bool:
    """Whether the SQLite file is there; a StoreError naming the folder in the way if drift
    cannot even look (a folder it may not search, a file where a folder should be)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StoreError(
            _in_the_way(path) or f"{path}: cannot reach the database: {exc.strerror or exc}"
        ) from None
    return True


def _in_the_way(path: Path) -> str | None:
    """`PATH: cannot reach the database: ...` naming the folder on the way that fails, if any."""
    for part in [*reversed(path.parents), path]:
        try:
            os.stat(part)
        except NotADirectoryError:
            return f"{path}: cannot reach the database: {part.parent} is not a folder"
        except PermissionError:
            return f"{path}: cannot reach the database: permission denied to search {part.parent}"
        except OSError:
            return None
    return None


def create_private_sqlite(path: Path) -> None:
    """Create an empty SQLite file readable by its owner only (0600), in folders made 0700.

    It holds every script's text and every value that is not a secret. SQLite
    gives its -wal, -shm and journal files the database file's mode.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        make_private_dirs(path.parent)
        os.close(os.open(path, flags, 0o600))
    except FileExistsError:
        return  # another drift created it first
    except OSError as exc:
        raise StoreError(
            _in_the_way(path) or f"{path}: cannot create the database: {exc.strerror or exc}"
        ) from None


def sqlite_privacy(path: Path) -> str:
    """Who can read an SQLite history, as `drift init` says it: its mode, and a fix if needed."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o044:
        exposed = "other users can read every script and value it holds"
    elif mode & 0o022:
        exposed = "other users can change it"
    else:
        return f"mode {mode:04o}: only its owner can read it"
    return f"mode {mode:04o}: {exposed}; chmod 600 {path}*"
