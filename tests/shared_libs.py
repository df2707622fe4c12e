"""Real shared libraries for tests: the system's libz, and a copy of it with other bytes."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from pathlib import Path

# A long-running server: loads each library named after its pidfile's path, then writes the
# pidfile (renamed into place, so a reader never sees it half written).
SERVER = """
import ctypes, os, sys, time
for path in sys.argv[2:]:
    ctypes.CDLL(path)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(3600)
"""


def system_libz() -> Path:
    """The real path of the system's libz, as the dynamic linker finds it."""
    name = ctypes.util.find_library("z")
    assert name is not None, "the test needs libz"
    ctypes.CDLL(name)
    for line in Path("/proc/self/maps").read_text().splitlines():
        if "/" in line and os.path.basename(line.split(None, 5)[-1]).startswith("libz.so"):
            return Path(line.split(None, 5)[-1])
    raise AssertionError("libz not mapped")


def other_bytes(lib: Path, dest: Path) -> None:
    """A copy of `lib` with bytes appended (it still loads), renamed over `dest`."""
    tmp = dest.with_name(dest.name + ".new")
    shutil.copyfile(lib, tmp)
    with tmp.open("ab") as f:
        f.write(b"\0drift-test-upgrade\0" + os.urandom(16))
    os.rename(tmp, dest)
