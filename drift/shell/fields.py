"""From values to command-line words: word splitting, and several values kept as one word.

An unquoted expansion splits at blanks into fields (`split_fields`); a word
whose values are one word each becomes one field holding a choice
(`merge_options`, `as_choice`), so a command line of ten such words stays
one shape instead of 2**10.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from drift.shell.patterns import Hole, Pattern, pattern, shown
from drift.shell.values import Alt, Field, Origin, Seg


def split_fields(alt: Alt, word_origin: Origin) -> tuple[Field, ...]:
    """Word splitting of one value: unquoted expansion output splits at blanks.

    `word_origin` is the word's line, for a field whose pieces came from several.
    """
    fields: list[Field] = []
    current: list[Seg] = []
    started = False  # a field exists even if empty ("" or "$EMPTY" quoted)

    def flush() -> None:
        nonlocal current, started
        if current or started:
            fields.append(_field(current, word_origin, alt.conds))
        current, started = [], False

    for seg in alt.segs:
        if seg.brk:
            flush()
            continue
        if isinstance(seg.part, Hole):
            if seg.split and not current and not started and not _whole(seg.part):
                current.append(seg)
                # an unquoted unknown alone: any number of words
                fields.append(Field((seg.part,), seg.origin or word_origin, alt.conds, spread=True))
                current = []
                continue
            current.append(seg)
            continue
        if not seg.split:
            current.append(seg)
            started = True
            continue
        pieces = re.split(r"[ \t\n]+", seg.part)
        for i, piece in enumerate(pieces):
            if i > 0:
                flush()
            if piece:
                current.append(Seg(piece, seg.origin))
    flush()
    return tuple(fields)


def _whole(hole: Hole) -> bool:
    """A hole that splitting leaves whole: a choice of words, a number (``$((...))``)."""
    return hole.kind == "choice" or hole.text.startswith("$((")


def merge_options(options: list[tuple[Field, ...]]) -> list[tuple[Field, ...]]:
    """A word's values as few command-line shapes as possible.

    Values that are one word each, and none a flag, become one word whose
    value is a choice: a command line of ten such words stays one shape
    instead of 2**10.
    """
    if len(options) < 2:
        return options
    if any(len(o) != 1 or o[0].spread or _looks_like_flag(o[0].pattern) for o in options):
        return options
    fields = [o[0] for o in options]
    choice = Hole(
        " | ".join(dict.fromkeys(shown(f.pattern) for f in fields)),
        "choice",
        tuple(dict.fromkeys((f.pattern, f.origin, f.conds) for f in fields)),
    )
    origins = {f.origin for f in fields}
    origin = origins.pop() if len(origins) == 1 else fields[0].origin
    return [(Field((choice,), origin, ()),)]


def _field(segs: list[Seg], word_origin: Origin, conds: tuple[str, ...]) -> Field:
    """One field: its pattern, and the line that produced it (one origin for all its pieces)."""
    origins = {
        s.origin for s in segs if s.origin is not None and (not isinstance(s.part, str) or s.part)
    }
    pieces = tuple(segs) if len(origins) > 1 else ()
    origin = origins.pop() if len(origins) == 1 else _first_written(segs) or word_origin
    return Field(pattern(*(s.part for s in segs)) or ("",), origin, conds, pieces=pieces)


def _first_written(segs: list[Seg]) -> Origin | None:
    """The line that wrote a word's first text (``--max-model-len=`` of ``--max-model-len=$LEN``).

    A word whose pieces several lines wrote is the line of its start: a flag's
    name, where a line gave the value after it.
    """
    first = next((s for s in segs if not isinstance(s.part, str) or s.part), None)
    return first.origin if first is not None and isinstance(first.part, str) else None


def as_choice(elem: tuple[Alt, ...]) -> tuple[Alt, ...]:
    """An array element with several values as one word whose value is a choice.

    Its values are single words already (elements are split when assigned),
    so the command line keeps one shape whatever the element holds.
    """
    if len(elem) < 2 or any(len(a.segs) != 1 and not _one_word(a) for a in elem):
        return elem
    if any(_looks_like_flag(a.pattern) for a in elem):
        return elem  # a flag name that differs by branch: keep the command lines apart
    return (choice_alt(elem),)


def _one_word(alt: Alt) -> bool:
    """True if the value cannot split into several words."""
    return not any(s.brk or (s.split and isinstance(s.part, Hole)) for s in alt.segs)


def _looks_like_flag(p: Pattern) -> bool:
    """True if the word starts with "-" (then values that differ are kept apart)."""
    head = p[0] if p else ""
    return isinstance(head, str) and head.startswith("-")


def choice_alt(alts: Sequence[Alt]) -> Alt:
    """One value that is a choice among `alts`, each kept with its line and conditions."""
    options = tuple(
        dict.fromkeys(
            (a.pattern, next((s.origin for s in a.segs if s.origin is not None), None), a.conds)
            for a in alts
        )
    )
    text = " | ".join(dict.fromkeys(shown(o[0]) for o in options))
    origin = options[0][1] if len({o[1] for o in options}) == 1 else None
    return Alt((Seg(Hole(text, "choice", options), origin),))


def field_alt(f: Field) -> Alt:
    """A field as a value again (an array element), keeping its origin and conditions."""
    if f.spread:
        return Alt((Seg(f.pattern[0] if f.pattern else "", f.origin, split=True),), f.conds)
    return Alt(tuple(Seg(p, f.origin) for p in f.pattern) or (Seg("", f.origin),), f.conds)
