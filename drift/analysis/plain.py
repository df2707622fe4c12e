"""A typed context as the plain data JSON output and templates read: dicts, lists and values.

`plain` is `dataclasses.asdict` without its deep copy of every value: on a
box of 50,000 facts, asdict alone would add seconds to `drift since`. A field
named after a Python keyword carries a trailing underscore (`from_`), which
its key drops (`"from"`).
"""

from __future__ import annotations

import keyword
from dataclasses import fields, is_dataclass
from typing import Any

_KEYS: dict[type, tuple[tuple[str, str], ...]] = {}
# Values kept as they are, without a call each: most of a context is strings and numbers.
_ATOMS = frozenset({str, int, float, bool, type(None)})


def field_key(name: str) -> str:
    """The key a dataclass field has in plain data: `from_` is `from`, others keep their name."""
    return name[:-1] if name.endswith("_") and keyword.iskeyword(name[:-1]) else name


def plain(value: Any) -> Any:
    """`value` with every dataclass as a dict of its fields (in order), lists and dicts copied."""
    cls = type(value)
    if cls in _ATOMS:
        return value
    keys = _KEYS.get(cls)
    if keys is None and is_dataclass(cls):
        keys = _KEYS[cls] = tuple((f.name, field_key(f.name)) for f in fields(cls))
    if keys is not None:
        out = {}
        for name, key in keys:
            item = getattr(value, name)
            out[key] = item if type(item) in _ATOMS else plain(item)
        return out
    if cls is list or cls is tuple:
        return [item if type(item) in _ATOMS else plain(item) for item in value]
    if cls is dict:
        return {k: item if type(item) in _ATOMS else plain(item) for k, item in value.items()}
    return value
