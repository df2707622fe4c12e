"""The state digest: 16 bytes that tell whether a record collected exactly what the last one did.

Equal to the last snapshot's, nothing changed, and the record writes one
snapshot row without reading or comparing a single stored fact. The place of
a value that moves with its line (`drift.declaration.Moves`) is part of the
state: a line added above it is a move the store keeps.
"""

from __future__ import annotations

import hashlib
from array import array
from typing import Any

from drift.facts import Fact, FactBlock
from drift.store.delta import place_text
from drift.subjects import DECLARED


def state_digest(items: list[Fact | FactBlock]) -> bytes:
    """A 16-byte digest of a sequence of facts and fact blocks.

    Equal digests mean the same facts in the same order; collectors emit a
    stable order, and a different order only costs the full comparison.
    Each run of loose facts and each run of blocks is hashed column by column
    (subjects, keys, values), every column NUL-joined and followed by the
    length of every field, and each part by a tag and its size, so no two
    different sequences encode alike (a value may itself contain NUL).
    Column by column is 40% faster than fact by fact; a block, already in
    columns, costs a few joins whatever its size.

    Consecutive blocks with the same keys are one part, its rows in subject
    order: how a collector splits what it found into blocks is no change.
    The files collector puts the files it read in one block and those the
    stat cache vouched for in another, so a file read because it changed is
    in the first block at that record and in the second at the next one;
    digested as two blocks, the record after every file change missed the
    shortcut and compared every stored value. A single block in subject
    order (every unchanged record's) is hashed as it comes, as before.
    """
    h = hashlib.blake2b(digest_size=16)
    digest_items(h, items)
    return h.digest()


def digest_items(h: Any, items: list[Fact | FactBlock]) -> None:
    """Feed `items` to the hash `h` as state_digest does (its parts flushed at the end)."""
    facts: list[Fact] = []
    blocks: list[FactBlock] = []
    for item in items:
        if isinstance(item, Fact):
            _digest_blocks(h, blocks)
            blocks = []
            facts.append(item)
            continue
        _digest_facts(h, facts)
        facts = []
        if blocks and blocks[0].keys != item.keys:
            _digest_blocks(h, blocks)
            blocks = []
        blocks.append(item)
    _digest_blocks(h, blocks)
    _digest_facts(h, facts)


def _digest_facts(h: Any, facts: list[Fact]) -> None:
    if not facts:
        return
    h.update(b"F%d\0" % len(facts))
    _digest_columns(
        h, [[f.subject for f in facts], [f.key for f in facts], [f.value for f in facts]]
    )
    h.update(bytes([f.secret for f in facts]))
    _digest_places(h, [place_text(f.subject, f.key, f.provenance) for f in facts])


def _digest_places(h: Any, places: list[str | None]) -> None:
    """The places of the facts that move with their line, if any does (None: it does not)."""
    if any(place is not None for place in places):
        h.update(b"P")
        _digest_columns(h, [[place or "" for place in places]])


def _digest_blocks(h: Any, blocks: list[FactBlock]) -> None:
    """Blocks with the same keys as one block, its rows stably sorted by subject."""
    if not blocks:
        return
    first = blocks[0]
    order: list[int] | None = None
    if len(blocks) == 1 and _in_order(first.subjects):
        subjects, columns = first.subjects, first.columns
    else:
        subjects = [s for block in blocks for s in block.subjects]
        merged = [
            [value for block in blocks for value in block.columns[j]]
            for j in range(len(first.columns))
        ]
        # Stable: a subject in two blocks keeps the first one first, as the store does.
        order = sorted(range(len(subjects)), key=subjects.__getitem__)
        subjects = [subjects[i] for i in order]
        columns = [[column[i] for i in order] for column in merged]
    h.update(b"B%d\0" % len(subjects))
    _digest_columns(h, [subjects, list(first.keys), *columns])
    if any(map(DECLARED.key_may_move, first.keys)):  # never for a block of file hashes
        provenances = [p for block in blocks for p in block.provenances]
        if order is not None:
            provenances = [provenances[i] for i in order]
        places = [
            place_text(subject, key, provenance)
            for subject, provenance in zip(subjects, provenances, strict=True)
            for key in first.keys
        ]
        _digest_places(h, places)


def _in_order(subjects: list[str]) -> bool:
    # Sorting a sorted list is one C pass, and the equality compares the same
    # objects: 3x faster than comparing neighbours in Python (1.7 ms for 36k).
    return subjects == sorted(subjects)


_CHUNK = 4096
# Fields joined at a time: the same bytes as one join of the whole column, but
# a 150k-file block's subjects no longer make a 13 MB string and its bytes at once.


def _digest_columns(h: Any, columns: list[list[str]]) -> None:
    for column in columns:
        for start in range(0, len(column), _CHUNK):
            if start:
                h.update(b"\0")
            h.update("\0".join(column[start : start + _CHUNK]).encode("utf-8", "surrogateescape"))
        h.update(array("Q", map(len, column)).tobytes())
