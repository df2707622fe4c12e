"""Whether a value a server reports ([[endpoints]]) is the knob a variable or flag sets.

An engine reports the settings it runs with: `/max_running_requests` is the
knob `--max-running-requests` and `SGLANG_MAX_RUNNING_REQUESTS` set, named in
another spelling. A reported leaf and a live variable or flag are the same
knob when their names are, once spelled alike (case, `_`/`-`, camelCase, an
engine's prefix such as `SGLANG_` or `VLLM_` left out): the same words, or
one name the other's last words (`/mma_target_ctas` in
`SGLANG_SM120_MMA_TARGET_CTAS`, with the values agreeing). Without a name,
only a value that few knobs share (`512`, `"fa3"`; not `true`, `1`, `0` or
`null`) ties them.

`knob_match` scores one pair; the callers pick the best and leave a leaf
alone when two stories tie. Pure: names and values in, a score out.
"""

from __future__ import annotations

import json
import re
from typing import Any

ENGINE_PREFIXES = frozenset({"sglang", "vllm", "trtllm", "tllm", "lmdeploy", "tgi"})
"""Words an engine puts before its variables' names: not part of the knob's name."""

COMMON_WORDS = frozenset(
    {"none", "null", "true", "false", "yes", "no", "on", "off", "auto", "default", ""}
)
"""String values too many knobs share to tie a leaf to a variable without a name."""

SAME_NAME = 4
SAME_NAME_OTHER_VALUE = 3
NAME_END_SAME_VALUE = 3
SAME_RARE_VALUE = 2
"""How strongly a leaf is a variable's or flag's knob, best first; 0 is not at all."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")
_TRUE = frozenset({"true", "1", "yes", "on", ""})  # "": a bare flag
_FALSE = frozenset({"false", "0", "no", "off"})


def knob_words(name: str) -> tuple[str, ...]:
    """A variable's, flag's or leaf's name as words, spelled alike:
    ``--max-running-requests``, ``SGLANG_MAX_RUNNING_REQUESTS`` and
    ``maxRunningRequests`` are all ``("max", "running", "requests")``."""
    words = [w for w in _SEPARATORS.split(_CAMEL.sub("_", name).lower()) if w]
    if len(words) > 1 and words[0] in ENGINE_PREFIXES:
        words = words[1:]
    return tuple(words)


def live_knob(key: str) -> str | None:
    """The variable's or flag's name of a live fact's key (``env:X``, ``flag:--x``)."""
    for prefix in ("env:", "flag:"):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return None


def leaf_name(pointer: str) -> str:
    """The name a leaf's JSON pointer gives it: its last part that is not a list index
    (``/server_args/max_running_requests`` -> ``max_running_requests``)."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    return next((p for p in reversed(parts) if not p.isdigit()), "")


def knob_match(
    pointer: str, leaf: str | None, name: str, value: str | None, *, secret: bool = False
) -> int:
    """How strongly the leaf at `pointer` (its JSON text `leaf`, None when it is gone) is the
    knob the variable or flag `name` sets to `value` (None when unset): 0 when it is not.
    `secret`: one of the two values is a keyed hash, so values cannot be compared."""
    leaf_words, knob = knob_words(leaf_name(pointer)), knob_words(name)
    same = not secret and same_value(leaf, value)
    if leaf_words and leaf_words == knob:
        return SAME_NAME if same else SAME_NAME_OTHER_VALUE
    shorter, longer = sorted((leaf_words, knob), key=len)
    if same and len(shorter) >= 2 and longer[-len(shorter) :] == shorter:
        return NAME_END_SAME_VALUE
    if same and rare(leaf):
        return SAME_RARE_VALUE
    return 0


def same_value(leaf: str | None, value: str | None) -> bool:
    """Whether a leaf's JSON text says what a variable's or flag's text says: ``512`` and
    ``"512"``, ``true`` and ``1`` or a bare flag, ``null`` (or no leaf) and no variable."""
    decoded = _decoded(leaf)
    if decoded is None or value is None:
        return decoded is None and value is None
    if isinstance(decoded, bool):
        return value.strip().lower() in (_TRUE if decoded else _FALSE)
    if isinstance(decoded, int | float):
        try:
            return float(value) == float(decoded)
        except ValueError:
            return False
    return isinstance(decoded, str) and decoded == value


def rare(leaf: str | None) -> bool:
    """Whether a leaf's value is one few knobs share: a number of three digits or more, a
    fraction of three, a word that is not a yes, no, auto or none."""
    decoded = _decoded(leaf)
    if isinstance(decoded, bool) or decoded is None:
        return False
    if isinstance(decoded, int):
        return abs(decoded) >= 100
    if isinstance(decoded, float):
        return len(repr(decoded).lstrip("-0.").replace(".", "")) >= 3
    return isinstance(decoded, str) and len(decoded) >= 3 and decoded.lower() not in COMMON_WORDS


def _decoded(leaf: str | None) -> Any:
    if leaf is None:
        return None
    try:
        return json.loads(leaf)
    except ValueError:
        return ...  # not JSON (a redacted value): equal to nothing
