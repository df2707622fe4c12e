"""Run test code as user nobody, so permission errors are real even when tests run as root."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Callable
from typing import Any


def as_nobody(work: Callable[[], object]) -> Any:
    """Run `work` in a forked child with uid/gid nobody; return what it returns (JSON)."""
    nobody = pwd.getpwnam("nobody")
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            payload = json.dumps(work()).encode()
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as inp:
        data = inp.read()
    os.waitpid(child, 0)
    return json.loads(data)
