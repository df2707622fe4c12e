"""How the words of a command line read as flags, the same way for a live process and a script.

The services collector reads a running process's argv with `parse_flags`;
the scripts collector reads the command a serve script launches, whose words
may be unknown, with `flag_words`. One set of rules for both is what lets
the analysis set a live flag beside the script line that wrote it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

PYTHON = re.compile(r"python[0-9.]*")
"""The basename of a Python interpreter (``python3``, ``python3.11``)."""
# CPython's own options (see `python --help`): these take no value ...
_PYTHON_BARE = frozenset("bBdEhiIOPqRsSuvVx?")
# ... these take one, and -c / -m end the interpreter's options.
_PYTHON_VALUED = frozenset("cmWX")

W = TypeVar("W")

FlagWord = tuple[str, W, W | None, str | None]
"""A flag as flag_words finds it: (name, word, value word, inline value)."""


def parse_flags(argv: Sequence[str]) -> dict[str, str]:
    """Flags of a command line (``argv[0]`` is the program), as ``{"--name": value}`` in order.

    ``--flag value`` and ``--flag=value`` give "value"; a bare flag (followed by
    another flag or by nothing) gives "", as does ``--flag=``: the two are not
    told apart. A repeated flag gives its values joined with "\\n" in order.
    Short flags (``-x value``) work the same way. A flag cannot know whether it
    takes a value, so ``--bare positional`` reads the positional as its value;
    words after ``--`` are positional. Python's own options follow CPython's
    rules (``python -u script.py`` leaves script.py positional; ``-m`` and
    ``-c`` take the next word).
    """
    values: dict[str, list[str]] = {}
    for name, _word, value, inline in flag_words(argv, lambda w: w):
        if inline is not None:
            values.setdefault(name, []).append(inline)
        else:
            values.setdefault(name, []).append(value if value is not None else "")
    return {name: "\n".join(vals) for name, vals in values.items()}


def flag_words(argv: Sequence[W], text: Callable[[W], str | None]) -> list[FlagWord[W]]:
    """The flags of a command line whose words may be unknown, in order.

    `text` gives a word's text, or None where it is not known (such a word is
    never a flag, but may be a value). Each flag is ``(name, word, value word,
    inline)``: `inline` is the text after ``=`` of ``--name=value`` (then the
    value is inside `word`), else the value is the next word or None (bare).
    The rules are parse_flags'.
    """
    out: list[FlagWord[W]] = []
    i = 1
    head = text(argv[0]) if argv else None
    if head is not None and PYTHON.fullmatch(os.path.basename(head)):
        i = python_options(argv, text, out)
    while i < len(argv):
        word = argv[i]
        written = text(word)
        i += 1
        if written == "--":
            break
        if written is None or not _looks_like_flag(written):
            continue
        name, eq, value = written.partition("=")
        if eq:
            out.append((name, word, None, value))
            continue
        following = text(argv[i]) if i < len(argv) else "--"
        if (
            i < len(argv)
            and following != "--"
            and (following is None or not _looks_like_flag(following))
        ):
            out.append((name, word, argv[i], None))
            i += 1
        else:
            out.append((name, word, None, None))
    return out


def _looks_like_flag(word: str) -> bool:
    """``-x``, ``--name``; not ``-`` (stdin) and not a negative number such as ``-1``."""
    return len(word) > 1 and word[0] == "-" and not (word[1].isdigit() or word[1] == ".")


def python_options(
    argv: Sequence[W], text: Callable[[W], str | None], out: list[FlagWord[W]]
) -> int:
    """Read the interpreter's options into `out`; return where the program's own arguments start."""
    i = 1
    while i < len(argv):
        word = text(argv[i])
        if word is None or word == "--" or word == "-" or not word.startswith("-"):
            # A script path (or stdin) ends the interpreter's options; the
            # script's arguments follow it.
            return i + 1
        if word.startswith("--"):
            # --version, --help-env ...: none of CPython's long options take a value.
            out.append((word, argv[i], None, None))
            i += 1
            continue
        letter = word[1]
        if letter in _PYTHON_VALUED:
            if word[2:]:
                out.append((word[:2], argv[i], None, word[2:]))
            elif i + 1 < len(argv):
                out.append((word[:2], argv[i], argv[i + 1], None))
                i += 1
            else:
                out.append((word[:2], argv[i], None, None))
            i += 1
            if letter in "cm":
                return i
            continue
        if all(c in _PYTHON_BARE for c in word[1:]):
            out.append((word, argv[i], None, None))
            i += 1
            continue
        # Not an option CPython knows: let the generic rules read it.
        return i
    return i
