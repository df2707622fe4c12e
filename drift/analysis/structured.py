"""Say what changed inside a config file: the keys for JSON, YAML and TOML, the lines for text.

A file kept with ``content = true`` is stored whole; when it changes, the
report names the keys that moved (``server.port: 8000 -> 8001``) instead of
"content changed", and shows a unified diff next to them. A side that does
not parse (a half-written edit, a syntax error) sets `parse_error` and
leaves the unified diff to tell the story.

Paths read like the file: ``server.port``, ``workers[2].name``; a key that
holds a dot, a space, a bracket or a quote, or is empty, is quoted
(``"a.b".c``); a non-string key (YAML allows ``8080:``) is shown as JSON
(``ports.8080``); a change of the whole document is ``(root)``. A YAML file
with several documents is diffed as a list of them (``[1].spec.replicas``).

Texts arrive already redacted; masked secrets diff like any other text.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from drift.display import truncated

KeyChangeKind = Literal["added", "removed", "changed", "type"]

STRUCTURED_FORMATS = frozenset({"json", "yaml", "toml"})
VALUE_MAX = 120
UNIFIED_MAX = 200
ROOT = "(root)"

_CONTAINERS = (Mapping, list, tuple, set, frozenset)
_PLAIN_KEY = re.compile(r"[^\s.\[\]\"']+")
_KINDS: dict[str, KeyChangeKind] = {
    "values_changed": "changed",
    "type_changes": "type",
    "dictionary_item_added": "added",
    "iterable_item_added": "added",
    "set_item_added": "added",
    "dictionary_item_removed": "removed",
    "iterable_item_removed": "removed",
    "set_item_removed": "removed",
}


@dataclass(frozen=True)
class KeyChange:
    """One key whose value was added, removed, changed, or changed type (``8000`` -> ``"8000"``).

    `before` and `after` are short JSON renderings (at most VALUE_MAX
    characters), None on the side where the key does not exist.
    """

    path: str
    kind: KeyChangeKind
    before: str | None
    after: str | None


@dataclass(frozen=True)
class ContentDiff:
    """How a kept file's content changed: by key when it parses, always line by line."""

    format: str
    key_changes: tuple[KeyChange, ...]
    unified: tuple[str, ...]
    parse_error: str | None


class _Unparsable(Exception):
    """One side of the diff is not valid in its declared format."""


def diff_content(
    before: str | None,
    after: str | None,
    fmt: str,
    *,
    labels: tuple[str, str] = ("before", "after"),
) -> ContentDiff:
    """Compare two versions of a file's text as `fmt` (json, yaml, toml, anything else: text).

    With a side missing (the file appeared or vanished) there are no key
    changes, only the unified diff. `labels` name the sides in its header.
    """
    unified = unified_lines(before, after, labels)
    if fmt not in STRUCTURED_FORMATS:
        return ContentDiff(fmt, (), unified, None)
    parsed: list[Any] = []
    for side, text in zip(("before", "after"), (before, after), strict=True):
        if text is None:
            continue
        try:
            parsed.append(_parse(text, fmt))
        except _Unparsable as exc:
            return ContentDiff(fmt, (), unified, f"{side}: {exc}")
    if before is None or after is None:
        return ContentDiff(fmt, (), unified, None)
    return ContentDiff(fmt, _key_changes(parsed[0], parsed[1]), unified, None)


def unified_lines(
    before: str | None, after: str | None, labels: tuple[str, str] = ("before", "after")
) -> tuple[str, ...]:
    """A unified diff with one line of context, cut after UNIFIED_MAX lines."""
    old = before.splitlines() if before is not None else []
    new = after.splitlines() if after is not None else []
    import difflib  # only when a long text changed: 9 ms of every since otherwise

    lines = list(difflib.unified_diff(old, new, labels[0], labels[1], lineterm="", n=1))
    if len(lines) > UNIFIED_MAX:
        lines = lines[:UNIFIED_MAX] + [f"... {len(lines) - UNIFIED_MAX} more lines"]
    return tuple(lines)


@dataclass(frozen=True)
class Hunk:
    """The lines one hunk of a unified diff spans on each side (1-based, end excluded)."""

    old: range
    new: range

    def touches(self, side: Literal["old", "new"], line: int) -> bool:
        """True if `line` of that side is in the hunk (or, for an empty side, right at it)."""
        span = self.old if side == "old" else self.new
        return line in span or not span and line == span.start


_HUNK_HEAD = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def select_hunks(unified: tuple[str, ...], keep: Callable[[Hunk], bool]) -> tuple[str, ...]:
    """A unified diff with only the hunks `keep` says yes to (its header kept if any is)."""
    head: list[str] = []
    kept: list[str] = []
    keeping = False
    for line in unified:
        found = _HUNK_HEAD.match(line)
        if found is not None:
            a, b, c, d = (int(g) if g is not None else 1 for g in found.groups())
            # An empty side (",0") names the line before the change: its span is empty.
            old = range(a, a + b) if b else range(a + 1, a + 1)
            new = range(c, c + d) if d else range(c + 1, c + 1)
            keeping = keep(Hunk(old, new))
        elif not kept and not keeping and line.startswith(("---", "+++")):
            head.append(line)
            continue
        if keeping:
            kept.append(line)
    return tuple(head + kept) if kept else ()


def _parse(text: str, fmt: str) -> Any:
    if fmt == "yaml":
        import yaml  # PyYAML, needed only once a YAML file changed

        errors: tuple[type[Exception], ...] = (yaml.YAMLError, RecursionError)
    else:
        # JSONDecodeError and TOMLDecodeError are ValueErrors; absurd nesting recurses.
        errors = (ValueError, RecursionError)
    try:
        if fmt == "json":
            return json.loads(text)
        if fmt == "toml":
            return tomllib.loads(text)
        documents = list(yaml.safe_load_all(text))
    except errors as exc:
        raise _Unparsable(_one_line(f"invalid {fmt.upper()}: {_problem(exc)}")) from None
    # The usual single-document file reads as itself, not as a one-item list.
    return documents[0] if len(documents) == 1 else documents


def _problem(exc: Exception) -> str:
    # PyYAML's own text quotes the offending lines under carets and names the
    # stream "<unicode string>"; its parts make a shorter line.
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return str(exc)


def _one_line(message: str) -> str:
    # YAML errors span several lines with a caret drawing; the report wants one.
    text = " ".join(message.split())
    return truncated(text, 300)


def _key_changes(old: Any, new: Any) -> tuple[KeyChange, ...]:
    from deepdiff import DeepDiff  # heavy import, only when a structured file changed

    # The tree view keeps each step's container, so a list index ([2]) and an
    # integer dict key (.2) read differently, and keys need no re-parsing.
    tree = DeepDiff(
        _wrap_bools(old),
        _wrap_bools(new),
        ignore_order=False,
        verbose_level=2,
        ignore_nan_inequality=True,  # NaN != NaN would report an unchanged value
        view="tree",
    )
    found: list[tuple[tuple[tuple[int, int, str], ...], KeyChange]] = []
    for report, levels in tree.items():
        kind = _KINDS.get(report)
        if kind is None:
            continue  # attribute and repetition reports cannot arise from parsed data
        for level in levels:
            steps = _steps(level)
            before = None if kind == "added" else _short(level.t1)
            after = None if kind == "removed" else _short(level.t2)
            found.append((_sort_key(steps), KeyChange(_render(steps), kind, before, after)))
    found.sort(key=lambda pair: (pair[0], pair[1].kind))
    return tuple(change for _, change in found)


def _steps(level: Any) -> list[tuple[bool, Any]]:
    """(is a mapping key, key or index) for each step from the document root to `level`.

    A step into a set (YAML ``!!set``) has no key: the change is named by the
    set's path and its value is the item added or removed.
    """
    steps: list[tuple[bool, Any]] = []
    node = level.all_up
    while node.down is not None:
        relation = node.t1_child_rel or node.t2_child_rel
        container = node.t1 if isinstance(node.t1, _CONTAINERS) else node.t2
        # A tuple is a wrapped boolean (see _wrap_bools), not a step in the document.
        if not isinstance(container, set | frozenset | tuple):
            steps.append((isinstance(container, Mapping), relation.param))
        node = node.down
    return steps


def _render(steps: list[tuple[bool, Any]]) -> str:
    out: list[str] = []
    for is_key, param in steps:
        if not is_key:
            out.append(f"[{param}]")
            continue
        if isinstance(param, str):
            name = param if _PLAIN_KEY.fullmatch(param) else json.dumps(param, ensure_ascii=False)
        else:
            name = json.dumps(param, default=str)
        out.append(f".{name}" if out else name)
    return "".join(out) or ROOT


def _sort_key(steps: list[tuple[bool, Any]]) -> tuple[tuple[int, int, str], ...]:
    # Indices sort as numbers (workers[2] before workers[10]), keys as text.
    return tuple((1, 0, str(param)) if is_key else (0, int(param), "") for is_key, param in steps)


def _wrap_bools(doc: Any) -> Any:
    """`doc` with every boolean wrapped in a 1-tuple, so that it never equals a number.

    DeepDiff matches list items by hash and ==, and in Python True == 1: without
    this, ``[true]`` -> ``[1]`` would read as unchanged. Parsed documents hold
    no tuples of their own, so a tuple always means a wrapped boolean.
    """
    return _map_leaves(doc, lambda leaf: (leaf,) if isinstance(leaf, bool) else leaf)


def _unwrap_bools(doc: Any) -> Any:
    return _map_leaves(doc, lambda leaf: leaf[0] if isinstance(leaf, tuple) else leaf)


def _map_leaves(doc: Any, change: Callable[[Any], Any]) -> Any:
    """`doc` with `change` applied to every value that is not a mapping or a list."""
    if isinstance(doc, dict):
        return {key: _map_leaves(value, change) for key, value in doc.items()}
    if isinstance(doc, list):
        return [_map_leaves(value, change) for value in doc]
    return change(doc)


def _short(value: Any) -> str:
    text = json.dumps(_unwrap_bools(value), ensure_ascii=False, default=str)
    return truncated(text, VALUE_MAX)


__all__ = [
    "ContentDiff",
    "KeyChange",
    "KeyChangeKind",
    "Hunk",
    "STRUCTURED_FORMATS",
    "diff_content",
    "select_hunks",
    "unified_lines",
]
