"""`$'...'` strings read as bash reads them: bash itself is the oracle."""

from __future__ import annotations

import os
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from drift.shell.evaluate import evaluate
from drift.shell.patterns import literal

# Pieces that make escapes (and near-escapes) when joined: letters that start
# an escape, digits that may or may not continue one, and plain text.
PIECES = [
    "\\", "\\\\", "x", "u", "U", "c", "e", "n", "t", "0", "1", "4", "7", "8", "9",
    "a", "f", "F", "g", "?", "@", "[", " ", '"', "é", "z", "D8", "00",
]  # fmt: skip


def bash_value(text: str) -> bytes:
    """What bash (in a UTF-8 locale) makes of ``$'text'``."""
    script = f"printf '%s' $'{text}'"
    env = {"LC_ALL": "C.UTF-8", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, check=True).stdout


def drift_value(text: str) -> bytes:
    model = evaluate("/srv/serve.sh", f"export A=$'{text}'\n".encode("utf-8", "surrogateescape"))
    (binding,) = model.exported["A"]
    assert binding.alts is not None
    (alt,) = binding.alts
    value = literal(alt.pattern)
    assert value is not None
    return value.encode("utf-8", "surrogateescape")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12))
def test_ansi_c_strings_decode_as_bash_decodes_them(pieces: list[str]) -> None:
    # A trailing backslash would escape the closing quote: end on a plain letter.
    text = "".join(pieces) + "z"
    assert drift_value(text) == bash_value(text)


def test_the_escapes_a_launch_script_uses() -> None:
    for text, value in [
        (r"a\tb", "a\tb"),
        (r"\x41\101\u00e9", "AAé"),
        (r"line\nnext", "line\nnext"),
        (r"\cA", "\x01"),
        (r"cut\0here", "cut"),
        (r"it\'s", "it's"),
    ]:
        assert drift_value(text) == value.encode(), text
