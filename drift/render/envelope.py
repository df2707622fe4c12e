"""The versioned JSON envelope every `--format json` output is, errors and warnings included.

    {"drift_result_version": 1, "command": "since", "data": {...}, "errors": [...]}

An entry of `errors` is one of two shapes, and both keep their keys:
`{"level": "error", "message": ..., "exit_code": 2}` for what stopped the
command (then `data` is null), `{"level": "warning", "message": ...,
"exit_code": null}` for what to know about a result that is still given.
"""

from __future__ import annotations

import json
from typing import Any

from drift.display import hidden

RESULT_VERSION = 1


def error_entry(message: str, exit_code: int) -> dict[str, Any]:
    """An `errors` entry for what stopped the command, with the exit code it ended with."""
    return {"level": "error", "message": message, "exit_code": exit_code}


def warning_entry(message: str) -> dict[str, Any]:
    """An `errors` entry for a warning: the command still gave its result."""
    return {"level": "warning", "message": message, "exit_code": None}


def envelope(command: str, data: Any, errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The versioned JSON envelope every --format json output uses."""
    return {
        "drift_result_version": RESULT_VERSION,
        "command": command,
        "data": data,
        "errors": errors or [],
    }


def render_json(command: str, data: Any, errors: list[dict[str, Any]] | None = None) -> str:
    """The envelope as indented JSON; non-ASCII text stays readable.

    JSON itself escapes only C0 controls: every other character `printable`
    would escape (a bidi override, U+2028, NEL, a lone surrogate) is written
    as a `\\uXXXX` escape too, so the same text comes back out of the JSON but
    cannot break or reorder the lines of the JSON where it is shown.
    """
    text = json.dumps(envelope(command, data, errors), indent=2, ensure_ascii=False)
    if text.isprintable():
        return text
    return "\n".join(
        line if line.isprintable() else "".join(_json_escaped(c) if hidden(c) else c for c in line)
        for line in text.split("\n")
    )


def _json_escaped(char: str) -> str:
    """`char` as a JSON string escape: a character past U+FFFF as its UTF-16 surrogate pair."""
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
