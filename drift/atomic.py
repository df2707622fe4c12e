"""Writing a file whole or not at all: a reader never sees half a report."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` (UTF-8) to `path` through a new file beside it, then rename it over `path`.

    A failure leaves `path` as it was and removes the new file; OSError says
    why. (click.open_file(atomic=True) was not enough: it renames even when the
    write failed, leaves its file behind when the rename fails, and takes
    `-` for stdout.)
    """
    target = Path(path)
    # O_EXCL on a fresh name: two reports written at once never share a half-written file.
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "w", encoding="utf-8") as out:
            out.write(text)
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
