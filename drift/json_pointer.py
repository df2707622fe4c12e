"""RFC 6901 JSON pointers: parse one, resolve it in a document, and name every leaf of a document.

An `[[endpoints]]` entry records each leaf of a JSON document as a fact
keyed by its pointer (``/served_model_names/0``, ``/a~1b`` for the key
``a/b``); the config checks its pointers with `parse`, the collector walks
the document with `leaves`. Base layer: the config and the collector both
need it, and it needs nothing of drift.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class PointerError(ValueError):
    """A pointer that is not RFC 6901 text, or that names nothing in a document."""


def parse(pointer: str) -> tuple[str, ...]:
    """The reference tokens of `pointer`, unescaped: ``"/a~1b/0"`` -> ``("a/b", "0")``.

    ``""`` is the whole document. A pointer is empty or starts with ``/``,
    and ``~`` is only ever followed by ``0`` or ``1``.
    """
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise PointerError(f"{pointer!r} does not start with '/'")
    tokens = pointer[1:].split("/")
    for token in tokens:
        rest = token.replace("~0", "").replace("~1", "")
        if "~" in rest:
            raise PointerError(f"{pointer!r}: '~' must be followed by 0 or 1")
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in tokens)


def escape(token: str) -> str:
    """One reference token as a pointer writes it: ``~`` as ``~0``, ``/`` as ``~1``."""
    return token.replace("~", "~0").replace("/", "~1")


def resolve(document: Any, tokens: tuple[str, ...]) -> Any:
    """The value `tokens` name in `document`; PointerError naming the first token that fails.

    An array index is digits without a leading zero (``-``, past the end, names nothing).
    """
    value = document
    for depth, token in enumerate(tokens):
        if isinstance(value, dict):
            if token not in value:
                raise PointerError(f"no key {token!r} at {_shown(tokens[:depth])}")
            value = value[token]
        elif isinstance(value, list):
            if not _is_index(token) or int(token) >= len(value):
                raise PointerError(
                    f"no item {token!r} at {_shown(tokens[:depth])} ({len(value)} items)"
                )
            value = value[int(token)]
        else:
            raise PointerError(f"{_shown(tokens[:depth])} is not an object or array")
    return value


def leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(pointer, value) for every leaf under `value`: scalars, and empty objects and arrays.

    Object keys in sorted order, array items in their order, so the same
    document gives the same leaves whatever order a server writes its keys in.
    An empty object or array is a leaf of its own: a list that empties is a change.
    """
    stack: list[tuple[str, Any]] = [(prefix, value)]
    while stack:
        pointer, node = stack.pop()
        if isinstance(node, dict) and node:
            stack.extend((f"{pointer}/{escape(k)}", node[k]) for k in sorted(node, reverse=True))
        elif isinstance(node, list) and node:
            stack.extend((f"{pointer}/{i}", node[i]) for i in range(len(node) - 1, -1, -1))
        else:
            yield pointer, node


def under(pointer: str, ancestor: str) -> bool:
    """Whether `pointer` is `ancestor` or names something inside it (whole tokens only)."""
    return pointer == ancestor or pointer.startswith(ancestor + "/")


def _is_index(token: str) -> bool:
    return token.isascii() and token.isdigit() and (token == "0" or not token.startswith("0"))


def _shown(tokens: tuple[str, ...]) -> str:
    return repr("".join("/" + escape(t) for t in tokens)) if tokens else "the top"
