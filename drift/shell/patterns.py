"""Values a shell word may take: literal text with holes where drift cannot know the text.

A `Pattern` is a tuple of parts, each a literal ``str`` or a `Hole` (the
output of ``$(cmd)``, a variable the script inherits from whoever started
it, the script's arguments). A live value matches a pattern when some text
in each hole makes them equal. This module is small and imports nothing
heavy: the analysis matches live values against stored patterns with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

HoleKind = Literal["caller", "command", "args", "unknown", "choice", "unread"]
"""What fills a hole; "unread": whatever a file or line drift could not read set there."""


@dataclass(frozen=True, slots=True)
class Hole:
    """Text drift cannot know from the script alone; `text` is how the script writes it.

    A hole of kind "choice" is one of several known words (`options`, each a
    pattern with whatever the evaluator keeps beside it): an array element
    or a word whose value depends on a branch, kept as one word so that ten
    such words do not make 2**10 command lines.
    """

    text: str
    kind: HoleKind = "unknown"
    options: tuple[Any, ...] = ()


Part = str | Hole
Pattern = tuple[Part, ...]


def pattern(*parts: Part) -> Pattern:
    """A normal pattern: adjacent literals joined, empty literals dropped."""
    out: list[Part] = []
    for part in parts:
        if isinstance(part, str):
            if not part:
                continue
            if out and isinstance(out[-1], str):
                out[-1] = out[-1] + part
                continue
        out.append(part)
    return tuple(out)


def unread(p: Pattern) -> bool:
    """True if a line drift could not read may have written the pattern (a hole "unread")."""
    return any(
        isinstance(part, Hole)
        and (
            part.kind == "unread"
            or (part.kind == "choice" and any(unread(o[0]) for o in part.options))
        )
        for part in p
    )


def is_literal(p: Pattern) -> bool:
    """True if the pattern has no hole: it stands for exactly one text."""
    return all(isinstance(part, str) for part in p)


def literal(p: Pattern) -> str | None:
    """The one text of a literal pattern, else None."""
    return "".join(p) if is_literal(p) else None  # type: ignore[arg-type]


def shown(p: Pattern) -> str:
    """The pattern as a person reads it: holes as the script writes them."""
    return "".join(part if isinstance(part, str) else part.text for part in p)


def matches(p: Pattern, text: str) -> bool:
    """True if some text in each hole makes the pattern equal `text`."""
    if is_literal(p):
        return "".join(p) == text  # type: ignore[arg-type]
    return _regex(p).fullmatch(text) is not None


@lru_cache(maxsize=4096)
def _regex(p: Pattern) -> re.Pattern[str]:
    return re.compile(_regex_text(p))


def _regex_text(p: Pattern) -> str:
    parts: list[str] = []
    for part in p:
        if isinstance(part, str):
            parts.append(re.escape(part))
        elif part.kind == "choice" and part.options:
            parts.append("(?:" + "|".join(_regex_text(o[0]) for o in part.options) + ")")
        else:
            parts.append("(?s:.*?)")
    return "".join(parts)


def to_json(p: Pattern) -> list[Any]:
    """A pattern as JSON: literals as strings, a hole as a one-item list of its text."""
    return [part if isinstance(part, str) else [part.text] for part in p]


def from_json(data: Sequence[Any]) -> Pattern:
    """The inverse of to_json; anything malformed reads as one hole (matches anything)."""
    parts: list[Part] = []
    for item in data:
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, list) and len(item) == 1 and isinstance(item[0], str):
            parts.append(Hole(item[0]))
        else:
            return (Hole("?"),)
    return pattern(*parts)


ELSE = "else of "
"""How a condition that did not hold is written: ``else of if [ "$ROLE" = prefill ]``."""


def feasible(conds: Iterable[str]) -> bool:
    """False if the conditions contradict each other (``if C`` and ``else of if C``).

    Branches merge, so a value from one branch can meet a value from the
    other branch of the same test in one command line; no run has both.
    """
    seen = set(conds)
    return not any(c.startswith(ELSE) and c[len(ELSE) :] in seen for c in seen)
