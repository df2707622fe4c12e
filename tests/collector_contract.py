"""Checks of what a collector wrote against what it declares (drift.collectors.registry)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from drift.collectors.base import Collector, Item
from drift.facts import CollectContext, CollectionError, Fact, FactBlock


def run_collector(collector: Collector[Any], entry: Any, ctx: CollectContext) -> list[Item]:
    """Everything one collector yields for one config entry, as `drift record` runs it."""
    return list(collector.collect(entry, ctx))


def facts_of(items: Iterable[Item]) -> list[Fact]:
    """The facts among `items`, blocks expanded."""
    out: list[Fact] = []
    for item in items:
        if isinstance(item, FactBlock):
            out.extend(item)
        elif isinstance(item, Fact):
            out.append(item)
    return out


def undeclared(collector: Collector[Any], items: Iterable[Item]) -> list[str]:
    """What `collector` wrote that it does not declare, one line each (empty: all declared).

    A fact needs a declared subject kind and a key declared for that kind
    (exactly or by prefix); an error needs a declared subject kind and no
    key, a declared key or prefix, or one of the kind's notes.
    """
    problems: list[str] = []
    for item in items:
        facts = list(item) if isinstance(item, FactBlock) else [item]
        for one in facts:
            kind = collector.subject_kind(one.subject)
            if kind is None:
                problems.append(f"{collector.name}: undeclared subject kind: {one.subject}")
                continue
            if isinstance(one, Fact):
                if kind.key(one.key) is None:
                    problems.append(f"{collector.name}: undeclared key: {one.subject} {one.key}")
                continue
            if not _error_key_declared(kind, one):
                problems.append(f"{collector.name}: undeclared error key: {one.subject} {one.key}")
    return problems


def _error_key_declared(kind: Any, error: CollectionError) -> bool:
    if error.key is None or error.key in kind.notes:
        return True
    if error.key.endswith(":"):
        return any(key.placeholder and key.key == error.key for key in kind.keys)
    return kind.key(error.key) is not None
