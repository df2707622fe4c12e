"""The globs of [[files]]: which paths a set's `paths` match and which its `exclude` drops.

One set of rules for the collector's walk, the config's checks and the scope
analysis reads: ``**`` is zero or more directories (``dir/**`` every file
below dir); ``*``, ``?`` and ``[...]`` stay within one name and match a leading
dot. An exclude drops a path when it matches the path or one of the folders
above it, so an excluded folder is never walked into.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from fnmatch import translate
from functools import lru_cache

_GLOB_CHARS = frozenset("*?[")


def glob_problem(pattern: str) -> str | None:
    """Why `pattern` is no glob drift can match (None when it is one)."""
    if not pattern.strip("/"):
        return "an empty pattern excludes nothing"
    for part in pattern.split("/"):
        if "**" in part and part != "**":
            return f"{part!r}: ** must be a whole path component (a/**/b, **/x)"
        problem = _bracket_problem(part)
        if problem is not None:
            return f"{part!r}: {problem}"
    return None


def _bracket_problem(part: str) -> str | None:
    """An unclosed `[` or a range that runs backwards (`[z-a]`, which matches nothing)."""
    i = 0
    while i < len(part):
        if part[i] != "[":
            i += 1
            continue
        j = i + 1
        if j < len(part) and part[j] in "!^":
            j += 1
        if j < len(part) and part[j] == "]":
            j += 1  # a ] first is a literal ]
        end = part.find("]", j)
        if end < 0:
            return "unclosed [ (write [[] for a literal [)"
        inside = part[i + 1 : end].lstrip("!^")
        for k in range(1, len(inside) - 1):
            if inside[k] == "-" and inside[k - 1] > inside[k + 1]:
                return f"range {inside[k - 1]}-{inside[k + 1]} runs backwards"
        i = end + 1
    return None


def excluded(
    patterns: Sequence[str], path: str, *, folder: bool = False, above: bool = True
) -> bool:
    """Whether an exclude glob (absolute) matches `path` or (`above`) a folder above it; with
    `folder`, also whether it drops everything below the folder `path` (`x/**` of a matching
    x). A walk that never enters an excluded folder asks about each path alone."""
    if not patterns:
        return False
    names = tuple(os.path.abspath(path).split("/")[1:])
    below = [p[:-3] for p in patterns if folder and p.endswith("/**") and p[:-3].strip("/")]
    lengths = range(1, len(names) + 1) if above else (len(names),)
    for pattern in [*patterns, *below]:
        parts = _glob_parts(pattern)
        if any(_match(parts, names[:n]) for n in lengths):
            return True
    return False


def glob_matches(pattern: str, path: str) -> bool:
    """Whether `path` is a file the files collector's `pattern` matches.

    The same rules as the collector: ``**`` is zero or more directories (and
    ``dir/**`` every file below dir); ``*``, ``?`` and ``[...]`` stay within one
    name and match a leading dot.
    """
    parts = _glob_parts(pattern)
    names = os.path.abspath(path).split("/")[1:]
    return _match(parts, tuple(names))


@lru_cache(maxsize=256)
def _glob_parts(pattern: str) -> tuple[str, ...]:
    parts: list[str] = []
    for part in os.path.abspath(pattern).split("/")[1:]:
        if part == "**" and parts and parts[-1] == "**":
            continue
        parts.append(part)
    if parts and parts[-1] == "**":
        parts.append("*")
    return tuple(parts)


@lru_cache(maxsize=1024)
def _component(part: str) -> re.Pattern[str] | None:
    return re.compile(translate(part)) if _GLOB_CHARS.intersection(part) else None


def _match(parts: tuple[str, ...], names: tuple[str, ...]) -> bool:
    # Positions (i in parts) still alive after each name: an NFA, no backtracking blow-up.
    states = _close(parts, {0})
    for name in names:
        following: set[int] = set()
        for i in states:
            if i == len(parts):
                continue
            part = parts[i]
            if part == "**":
                following.add(i)
                continue
            matcher = _component(part)
            if (matcher.match(name) is not None) if matcher is not None else part == name:
                following.add(i + 1)
        states = _close(parts, following)
        if not states:
            return False
    return len(parts) in states


def _close(parts: tuple[str, ...], states: set[int]) -> set[int]:
    """Add the states reachable by letting each ``**`` match no directory."""
    out = set(states)
    todo = list(states)
    while todo:
        i = todo.pop()
        if i < len(parts) and parts[i] == "**" and i + 1 not in out:
            out.add(i + 1)
            todo.append(i + 1)
    return out
