"""Progress of long work on a terminal: one status line, rewritten in place."""

from __future__ import annotations

import os
import re
import time
from typing import Any


class StatusLine:
    """One status line on a terminal, rewritten in place at most ten times a second.

    For long work (listing and hashing a large tree on a first record, then
    storing it). A new kind of work, the text before its first digit, shows at
    once, so that a switch from hashing to storing is never lost to the limit.
    `clear` blanks the line again, so the one-line result prints on a clean line.
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.next_at = 0.0
        self.width = 0
        self.kind = ""

    def __call__(self, text: str) -> None:
        now = time.monotonic()
        if now < self.next_at and text.startswith(self.kind):
            return
        self.next_at = now + 0.1
        self.kind = re.split(r"\d", text, maxsplit=1)[0]
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError):
            columns = 0
        line = text[: (columns or 80) - 1]  # a pty nobody sized says 0 columns
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def clear(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
