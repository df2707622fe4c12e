"""The values the shell reader works with: what a word, a variable and a command line may hold.

A value is every text it may have (`Alt`, made of `Seg` pieces that keep
the line that wrote them), a variable every value it may hold (`Binding`),
a command line its possible words (`Field`). Everything here is immutable
and knows nothing of the syntax tree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from drift.shell.patterns import Hole, Part, Pattern, pattern

MAX_ALTERNATIVES = 24
"""Values one word may have before drift stops telling them apart (then: one hole)."""


MAX_VARIANTS = 48
"""Command lines one launch may have (the product of its words' values)."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a value was written: file, physical line (from 1) and that line's text."""

    file: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class Seg:
    """A piece of a word: its text (or hole), where it was written, and whether IFS splits it."""

    part: Part
    origin: Origin | None
    split: bool = False
    brk: bool = False  # a field boundary ("${ARR[@]}", "$@")


BREAK = Seg("", None, brk=True)
"""Where one field ends and the next begins inside a value ("${ARR[@]}" quoted)."""


@dataclass(frozen=True, slots=True)
class Alt:
    """One value a word or variable may have, and the conditions under which it has it."""

    segs: tuple[Seg, ...]
    conds: tuple[str, ...] = ()

    @property
    def pattern(self) -> Pattern:
        """The value as text with holes (field boundaries dropped)."""
        return pattern(*(s.part for s in self.segs if not s.brk))


@dataclass(frozen=True, slots=True)
class Binding:
    """One value a variable may hold: set at `origin`, inherited from the caller, or unset.

    `alts` is None for an unset variable; `elems` holds an indexed array's
    elements (each with its own alternatives and origins). `kind` is
    "caller" for a value the script was given and "unknown" for one a line
    drift could not follow (an unreadable sourced file, ``eval $x``) may
    have set. `exported` is the variable's export attribute.
    """

    alts: tuple[Alt, ...] | None
    origin: Origin | None
    exported: bool
    conds: tuple[str, ...] = ()
    kind: Literal["set", "caller", "unknown"] = "set"
    elems: tuple[tuple[Alt, ...], ...] | None = None
    export_origin: Origin | None = None
    written: str | None = None  # the value as the line writes it (``${TP:-8}``)
    # not exported by the script, but by its caller if the caller exported the name
    given_export: bool = False


@dataclass(frozen=True, slots=True)
class Field:
    """One word of a command line: its value, the line that produced it, its conditions."""

    pattern: Pattern
    origin: Origin | None
    conds: tuple[str, ...] = ()
    spread: bool = False  # an unknown number of words ("$@", an unquoted unknown value)
    # the pieces with their own lines, when several lines wrote the word ("${ARGS[*]}")
    pieces: tuple[Seg, ...] = ()


Prefix = tuple[str, tuple[Alt, ...], Origin, str | None]
"""A ``NAME=value`` before a command: name, values, line, the value as written."""


def dedupe(items: Iterable[Any]) -> tuple[Any, ...]:
    """`items` without repeats, in their first order."""
    listed = items if isinstance(items, tuple) else tuple(items)
    if len(listed) < 2:
        return listed
    return tuple(dict.fromkeys(listed))


def folded(bindings: tuple[Binding, ...]) -> tuple[Binding, ...]:
    """A variable's values past `MAX_ALTERNATIVES` bindings: those of one line as one binding.

    Nothing is cut (a value left out could make another line look like the
    only one that gives the live value): the bindings one line made
    (merged from many branches) become one, each value keeping its own
    conditions, the branch conditions they share on the binding.
    """
    if len(bindings) <= MAX_ALTERNATIVES:
        return bindings
    groups: dict[tuple[Any, ...], list[Binding]] = {}
    for b in bindings:
        plain = b.elems is None and b.alts is not None
        key = (b.origin, b.kind, b.exported, b.export_origin, b.given_export) if plain else (id(b),)
        groups.setdefault(key, []).append(b)
    out: list[Binding] = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        shared = tuple(c for c in group[0].conds if all(c in b.conds for b in group[1:]))
        alts = dedupe(
            Alt(a.segs, dedupe(tuple(c for c in b.conds if c not in shared) + a.conds))
            for b in group
            for a in b.alts or ()
        )
        written = {b.written for b in group}
        first = group[0]
        out.append(
            Binding(
                alts,
                first.origin,
                first.exported,
                shared,
                first.kind,
                None,
                first.export_origin,
                written.pop() if len(written) == 1 else None,
                first.given_export,
            )
        )
    return tuple(out)


def field_literal(f: Field) -> str | None:
    """The one text of a field, if it has no hole and stands for one word; else None."""
    if f.spread:
        return None
    if all(isinstance(p, str) for p in f.pattern):
        return "".join(f.pattern)  # type: ignore[arg-type]
    return None


PINNED = ("set --",)
"""A caller's-arguments hole `set --` took into the new arguments: placed at that line."""


def pinned(fields: Iterable[Field]) -> tuple[Field, ...]:
    """``set -- vllm serve "$@"``: the caller's words, taken into a command line of the
    script's own words at this line, stay there wherever the new arguments are expanded
    later (``exec "$@"``). Arguments of the caller's words alone (``set -- $OPTS`` of
    getopt's output) are still only the caller's: they are placed where they are used."""
    listed = tuple(fields)
    if all(any(isinstance(p, Hole) for p in f.pattern) for f in listed):
        return listed
    return tuple(
        replace(
            f,
            pattern=tuple(
                replace(p, options=PINNED)
                if isinstance(p, Hole) and p.kind == "args" and not p.options
                else p
                for p in f.pattern
            ),
        )
        if any(isinstance(p, Hole) and p.kind == "args" for p in f.pattern)
        else f
        for f in listed
    )
