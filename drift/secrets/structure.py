"""Secrets a JSON document's structure names: by a key, a flag before it, a "name" beside it.

A leaf of a document (an endpoint's answer, leaf by leaf) is secret when the
structure around it names it, at any depth:

- a key on its path is a secret name (``/auth/hf_token``, ``/db.password``);
- it follows a secret flag in an array (``["--api-key", "X"]``), or lies
  under the item that does;
- a sibling ``name`` or ``key`` is a secret name, as in a Kubernetes-style
  env list (``{"name": "HF_HUB_TOKEN", "value": "X"}``): every other leaf
  under that object is;
- a string that is itself a JSON object or array (``"{\\"api_key\\": \\"X\\"}"``)
  is read as a document of its own, by the same rules, a few levels deep.

Each function is pure: names are judged by the `is_secret_name` it is given
(the `Redactor`'s, which knows ``[secrets] redact`` and ``allow``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from drift.json_pointer import leaves, parse

NAME_KEYS = frozenset({"name", "key"})
"""A sibling that names what the object holds (casefolded)."""

MAX_NESTED = 4
"""How many levels of JSON inside a JSON string are read."""

MAX_NESTED_TEXT = 1 << 20
"""The longest string read as a nested document (an endpoint's body is at most 1 MiB)."""

IsSecretName = Callable[[str], bool]


def secret_flag(word: str, is_secret_name: IsSecretName) -> bool:
    """True for a flag word (``--api-key``, ``-token``) whose value is the next word."""
    return word.startswith("-") and "=" not in word and len(word) > 1 and is_secret_name(word)


def named_by_structure(found: Mapping[str, Any], is_secret_name: IsSecretName) -> set[str]:
    """The pointers of `found` (pointer -> leaf) that a flag or a "name" sibling names secret.

    A key on the pointer itself is judged elsewhere (the pointer is the fact's name).
    """
    children: dict[str, dict[str, Any]] = {}
    for pointer, leaf in found.items():
        parent, _, token = pointer.rpartition("/")
        children.setdefault(parent, {})[token] = leaf
    named: dict[str, bool] = {}  # object pointer -> a sibling names it secret
    secret: set[str] = set()
    for pointer in found:
        ancestor = pointer
        while ancestor:
            if _named_here(ancestor, children, named, is_secret_name):
                secret.add(pointer)
                break
            ancestor = ancestor.rpartition("/")[0]
    return secret


def _named_here(
    pointer: str,
    children: Mapping[str, Mapping[str, Any]],
    named: dict[str, bool],
    is_secret_name: IsSecretName,
) -> bool:
    """Whether the item at `pointer` follows a secret flag or sits beside a secret name."""
    known = named.get(pointer)
    if known is not None:
        return known
    parent, _, token = pointer.rpartition("/")
    siblings = children.get(parent, {})
    answer = False
    if token.isdigit() and token != "0" and not token.startswith("0"):
        before = siblings.get(str(int(token) - 1))
        answer = isinstance(before, str) and secret_flag(before, is_secret_name)
    if not answer and token.casefold() not in NAME_KEYS:
        answer = any(
            isinstance(leaf, str) and name.casefold() in NAME_KEYS and is_secret_name(leaf)
            for name, leaf in siblings.items()
        )
    named[pointer] = answer
    return answer


def secret_pointers(found: Mapping[str, Any], is_secret_name: IsSecretName) -> set[str]:
    """Every pointer of `found` whose leaf is secret: by a key on its path, or by structure."""
    by_key = {p for p in found if p and is_secret_name(p)}
    return by_key | named_by_structure(found, is_secret_name)


def nested_document(text: str) -> Any:
    """`text` read as a JSON object or array, or None if it is not one."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")) or len(text) > MAX_NESTED_TEXT:
        return None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict | list) and document else None


def mask_nested(
    text: str, is_secret_name: IsSecretName, mask: Callable[[str], str], depth: int = 0
) -> str | None:
    """`text`, a JSON object or array in a string, with each secret leaf replaced by
    `mask(leaf)`; None if it is not such a document or holds no secret.

    Secrets in its own strings that are documents are masked too, `MAX_NESTED` deep.
    """
    if depth >= MAX_NESTED:
        return None
    document = nested_document(text)
    if document is None:
        return None
    found = dict(leaves(document))
    secret = secret_pointers(found, is_secret_name)
    changed: dict[str, Any] = {}
    for pointer, leaf in found.items():
        if pointer in secret and leaf is not None and not isinstance(leaf, bool | dict | list):
            changed[pointer] = mask(leaf if isinstance(leaf, str) else json.dumps(leaf))
        elif isinstance(leaf, str):
            inner = mask_nested(leaf, is_secret_name, mask, depth + 1)
            if inner is not None:
                changed[pointer] = inner
    if not changed:
        return None
    for pointer, value in changed.items():
        _set(document, parse(pointer), value)
    return json.dumps(document, ensure_ascii=False)


def secrets_of(found: Mapping[str, Any], pointers: Iterable[str]) -> list[str]:
    """The string forms of the leaves at `pointers` (what a secret is remembered as)."""
    out = []
    for pointer in pointers:
        leaf = found.get(pointer)
        if isinstance(leaf, str):
            out.append(leaf)
        elif leaf is not None and not isinstance(leaf, bool | dict | list):
            out.append(json.dumps(leaf))
    return out


def _set(document: Any, tokens: tuple[str, ...], value: Any) -> None:
    node = document
    for token in tokens[:-1]:
        node = node[int(token)] if isinstance(node, list) else node[token]
    last = tokens[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
