"""How text from the box is shown to people: one line that shows what it holds.

Values, names and messages come from the box (an env var, a file name, a
script line) and may hold newlines, terminal escapes or bidi controls that
would forge or hide report lines. Every renderer and every one-line CLI
message shows them through `printable`. Kept apart from drift/render/ so that
printing an error imports neither Jinja nor the analysis.
"""

from __future__ import annotations

import os
import re
import unicodedata

SHORT_VALUE = 160  # characters of a value shown in a line before it is cut short

# Whole escape sequences (CSI like ESC[31m, a terminated OSC like ESC]0;title BEL) vanish, so
# no residue such as "[31m" is left behind. An OSC without its end is not one: only its ESC
# goes, so a value cannot hide the rest of itself behind one.
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\)|\x1b[@-_]?"
)
# Characters that print nothing of their own yet move the cursor, break the line or reorder
# the text around them: controls (Cc), format characters such as bidi overrides and
# zero-width spaces (Cf), lone surrogates (Cs), line and paragraph separators (Zl, Zp).
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_NAMED = {"\n": "\\n", "\r": "\\r"}


def hidden(char: str) -> bool:
    """Whether `char` shows nothing of itself: a control, format or separator character."""
    return unicodedata.category(char) in _HIDDEN


def escaped(char: str) -> str:
    """`char` as a Python escape: `\\n`, `\\x07`, `\\u202e`, `\\U000e0001`."""
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 mark`, `2 marks`, `1,200 long texts`: a count with its noun agreeing (`nouns` for
    a plural not made with -s)."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def truncated(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short(text: str | None, limit: int = SHORT_VALUE) -> str | None:
    """`text` cut to `limit` characters (templates' `short` filter); None stays None."""
    return None if text is None else truncated(text, limit)


def short_against(text: str | None, other: str | None, limit: int = SHORT_VALUE) -> str | None:
    """`text` shortened so that where it differs from `other` stays in view.

    Two long paths that differ only after the cut would read as the same
    value on both sides of the arrow: start a little before the difference.
    """
    if text is None or other is None or len(text) <= limit:
        return short(text, limit)
    common = len(os.path.commonprefix([text, other]))
    if common < limit - 1:
        return short(text, limit)
    return short("…" + text[common - limit // 4 :], limit)


def printable(text: object) -> str:
    """Untrusted text (values come from the box) as one line that shows what it holds.

    Terminal escape sequences vanish; a newline shows as `\\n`, and every other
    control, bidi or format character, line separator or lone surrogate as its
    escape (`\\r`, `\\x0b`, `\\u202e`, `\\u200b`), so a value can neither start a
    line of its own nor reorder or hide the text around it. Tabs stay. Anything
    not a string (a pid) is shown as text; None is empty; an undefined value
    stays an error. Idempotent: showing shown text changes nothing.
    """
    if text is None:
        return ""
    text = str(text)
    if text.isprintable():  # the common case: nothing to look at one by one
        return text
    text = _ESCAPE_SEQUENCE.sub("", text)
    return "".join(escaped(c) if c != "\t" and hidden(c) else c for c in text)
