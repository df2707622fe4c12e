"""Folders only their owner can enter: made 0700 whatever the umask.

Below the store and the secret key alike, which both keep what they create
(the history, the key) in folders drift may have to make.
"""

from __future__ import annotations

import os
from pathlib import Path


def make_private_dirs(folder: Path) -> None:
    """Create `folder` and any missing parents with mode 0700 (mkdir(parents=True) would not)."""
    missing: list[Path] = []
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    for part in reversed(missing):
        try:
            part.mkdir(mode=0o700)
        except FileExistsError:
            pass
