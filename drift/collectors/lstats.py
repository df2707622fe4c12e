"""lstat many paths on two threads: the system calls of one overlap those of the other.

os.lstat releases the GIL, and on a large tree an unchanged record spends
most of its time in it (git status spreads the same calls over several
threads). A helper thread takes every other chunk; each result is an
os.stat_result or the OSError that lstat raised, in the order asked.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import queue
    import threading

Lstat = os.stat_result | OSError

MIN_SHARED = 256
# Fewer paths than this are lstat'ed on the calling thread alone: handing
# work over costs more than a few calls.


def lstat_each(paths: list[str]) -> list[Lstat]:
    """The lstat of each path, or the OSError it raised, on this thread."""
    out: list[Lstat] = []
    lstat, add = os.lstat, out.append
    for path in paths:
        try:
            add(lstat(path))
        except OSError as exc:
            add(exc)
    return out


class TwoLstats:
    """A helper thread, started on first use, that lstats half of what `lstat_all` is given.

    Use as a context manager: leaving it stops the helper.
    """

    def __init__(self) -> None:
        self.todo: queue.SimpleQueue[list[str] | None] | None = None
        self.done: queue.SimpleQueue[list[Lstat] | BaseException] | None = None
        self.thread: threading.Thread | None = None
        self.usable = len(os.sched_getaffinity(0)) >= 2

    def __enter__(self) -> TwoLstats:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.todo is not None:
            self.todo.put(None)

    def lstat_all(self, paths: list[str]) -> list[Lstat]:
        """The lstat of each path (or its OSError), in order; the second half on the helper."""
        if not self.usable or len(paths) < MIN_SHARED:
            return lstat_each(paths)
        todo, done = self._start()
        half = len(paths) // 2
        todo.put(paths[half:])
        mine = lstat_each(paths[:half])
        theirs = done.get()
        if isinstance(theirs, BaseException):
            raise theirs
        return mine + theirs

    def _start(
        self,
    ) -> tuple[queue.SimpleQueue[list[str] | None], queue.SimpleQueue[list[Lstat] | BaseException]]:
        if self.todo is None or self.done is None:
            import queue
            import threading

            self.todo, self.done = queue.SimpleQueue(), queue.SimpleQueue()
            self.thread = threading.Thread(target=self._help, name="drift-lstat", daemon=True)
            self.thread.start()
        return self.todo, self.done

    def _help(self) -> None:
        assert self.todo is not None and self.done is not None
        while (paths := self.todo.get()) is not None:
            try:
                self.done.put(lstat_each(paths))
            except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
                self.done.put(exc)
