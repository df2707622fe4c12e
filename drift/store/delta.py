"""What one record changes: the host's stored state compared with what was collected.

`delta(previous, items, errors)` decides which open versions close, which
versions open (fact by fact, or as fresh blocks stored column by column),
how many facts stayed as they were, and how many left or entered the
config's scope. It reads no database: the writer loads a PreviousState
first and applies the Delta in its transaction (drift.store.writer).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from drift.declaration import LINE_PLACE
from drift.facts import CollectionError, Fact, FactBlock
from drift.subjects import DECLARED

if TYPE_CHECKING:
    from drift.scope import Scope

INLINE_MAX = 512
"""Characters past which a value goes to the blob table, stored once and compressed.

A shorter value is stored inline whatever its key: a command's 26-byte output
line in a blob cost its 64-character SHA-256 three times (in the version, as
the blob's key and in the key's index) besides the blob row, about 300 bytes
a change where inline it takes 27."""

TEXT_KEYS = frozenset({"content", "stdout"})
"""Keys whose values are text, however short: a script's content, a command's output.

Read as before, when they always went to the blob table: by their SHA-256, their
text from History.text (drift.store.query). One holding a NUL still goes to the
blob table (PostgreSQL's text cannot hold one); other keys' values never had a NUL
stored but inline, so their rule is unchanged."""

FRESH_MIN = 200
"""New facts (or, in a block, new subjects) past which an established host's known ones
are read in one query, to tell which are fresh; fewer are looked up one by one."""

Ident = tuple[str, str]
"""A fact's identity: (subject, key)."""

_Entry = tuple[str, dict[str, Any], bool]
"""A collected fact as the delta compares it: value, provenance, secret.

A plain tuple: a changed record builds one per fact (36k on the bench tree),
and a NamedTuple costs a Python call each."""

OpenVersion = tuple[int, int, str | None, str | None, bool]
"""A fact's open version: (fact id, version id, inline value, blob digest, secret).

A plain tuple, not a NamedTuple: a changed record reads every open version
(36k for the bench tree), and building named ones cost 20-25 ms more CPU of
the writer's ~200 ms."""


class NewVersion(NamedTuple):
    """A version to insert, for a fact compared one by one."""

    ident: Ident
    provenance: dict[str, Any]
    secret: bool
    fact_id: int | None  # None: no open version, the writer finds or inserts the fact's id
    value: str | None
    blob_sha256: str | None
    blob: bytes | None


class ScopeMoves(NamedTuple):
    """Facts that left or entered the config's scope: not changes on the box.

    `covers_none`: the new config watches nothing the last one watched.
    """

    untracked: int
    tracked: int
    covers_none: bool


@dataclass
class PreviousState:
    """What the delta needs of a host's stored history, read by the writer beforehand.

    `known_subjects` (every subject the host ever had, open or not) and
    `script_provenance` (the stored provenance, as JSON, of every open script
    fact and fact that moves with its line) are costly, so the writer reads
    them only when needs_known_subjects and needs_script_provenance say so;
    None means not read.
    """

    open_versions: dict[Ident, OpenVersion]
    new_host: bool = False  # the host has no facts at all: nothing to look up
    known_subjects: set[str] | None = None
    script_provenance: dict[Ident, str | None] | None = None

    @cached_property
    def open_subjects(self) -> set[str]:
        """The subjects with an open version."""
        return {ident[0] for ident in self.open_versions}


@dataclass(frozen=True)
class Delta:
    """What a record changes, for the writer to apply in one transaction."""

    closing: list[int]  # ids of open versions to close: changed, removed or out of scope
    opening: list[NewVersion]  # versions to insert fact by fact
    fresh: list[FactBlock]  # blocks of subjects the host never had, stored column by column
    gone_files: set[str] = field(default_factory=set)  # paths for the stat cache to forget
    n_facts: int = 0  # distinct facts collected
    changed: int = 0  # a new value of a fact counts once; moves and scope moves not at all
    unchanged: int = 0  # facts compared and found as they were
    scope_moves: ScopeMoves | None = None

    @property
    def empty(self) -> bool:
        """True if applying this delta writes no version."""
        return not (self.closing or self.opening or self.fresh)


def delta(
    previous: PreviousState,
    items: Sequence[Fact | FactBlock],
    errors: Sequence[CollectionError] = (),
    *,
    scopes: tuple[Scope, Scope] | None = None,
    fresh_blocks: bool = True,
) -> Delta:
    """Compare what was collected with the stored state; read nothing, decide everything.

    A fact covered by a collection error is neither compared nor closed: it
    keeps its last version, so a read failure never looks like a removal.
    `scopes`, (before, after) when the config changed, makes facts that left
    or entered its scope closed or opened like any other but not counted as
    changes. `fresh_blocks`: blocks of subjects the host never had may be
    stored whole, column by column (SQLite only).
    """
    unique, fresh = _gather(previous, items, fresh_blocks)
    opening, closing, reopened, moved = _compare(previous, unique)
    gone = [
        (ident, vid)
        for ident, (_fid, vid, *_rest) in previous.open_versions.items()
        if ident not in unique and not any(err.covers(*ident) for err in errors)
    ]
    closing.extend(vid for _ident, vid in gone)
    gone_files = {ident[0][len("file:") :] for ident, _vid in gone if ident[0].startswith("file:")}
    n_fresh = sum(len(block.subjects) * len(block.keys) for block in fresh)
    changed = n_fresh + len(opening) + len(closing) - reopened - moved
    moves = None
    if scopes is not None:
        moves = _scope_moves(previous, scopes, gone, opening, fresh)
        changed -= moves.untracked + moves.tracked
    return Delta(
        closing,
        opening,
        fresh,
        gone_files,
        n_facts=len(unique) + n_fresh,
        changed=changed,
        unchanged=len(unique) - len(opening),
        scope_moves=moves,
    )


def stored_value(key: str, value: str) -> tuple[str | None, str | None, bytes | None]:
    """(inline value, blob digest, blob bytes): a long value is a blob, a short one inline.

    A plain tuple: a changed record asks for every fact it compares (36k for
    the bench tree), and a NamedTuple cost 12-30 ms more CPU of the writer's ~200 ms.
    migrations/versions/0006 applies the same rule to values stored before it.
    """
    if len(value) > INLINE_MAX or (key in TEXT_KEYS and "\0" in value):
        data = value.encode("utf-8", "surrogateescape")
        return None, hashlib.sha256(data).hexdigest(), data
    return value, None, None


PROVENANCE_SQL = "(SELECT p.content FROM provenances p WHERE p.id = v.provenance_id)"
"""A version's provenance JSON (stored once in provenances), as a column of a query on `v`."""


def _moving_sql() -> str:
    """SQL on a fact `f`: its key is declared to move with its line (`DECLARED.movers`)."""
    by_kind: dict[str, list[str]] = {}
    for kind, key in DECLARED.movers:
        if "'" in kind or "'" in key.key:  # pragma: no cover  (declared here, never so)
            raise ValueError(f"{kind} {key.key}: a quote in a declared key")
        test = (
            f"substr(f.key, 1, {len(key.key)}) = '{key.key}'"
            if key.placeholder
            else f"f.key = '{key.key}'"
        )
        by_kind.setdefault(kind, []).append(test)
    kinds = [
        f"(substr(f.subject, 1, {len(kind) + 1}) = '{kind}:' AND ({' OR '.join(tests)}))"
        for kind, tests in by_kind.items()
    ]
    return f"({' OR '.join(kinds) or 'FALSE'})"


MOVING_SQL = _moving_sql()
"""SQL: fact `f` may move with its line, its value staying (`drift.declaration.Moves`)."""


def provenance_json(provenance: dict[str, Any]) -> str | None:
    """A provenance as the store keeps it: sorted JSON, None when there is none."""
    return (
        json.dumps(provenance, ensure_ascii=False, sort_keys=True, default=str)
        if provenance
        else None
    )


def provenance_digest(text: str) -> bytes:
    """The 16-byte key of a provenance's JSON in the provenances table."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def needs_known_subjects(
    previous: PreviousState, items: Sequence[Fact | FactBlock], *, fresh_blocks: bool = True
) -> bool:
    """Whether the delta must know every subject the host ever had (PreviousState.known_subjects).

    Only to tell fresh subjects in a block of at least FRESH_MIN new ones on
    an established host: reading them all costs more than most records.
    """
    if previous.new_host or not fresh_blocks:
        return False
    return any(
        _fresh_candidates(item, previous, fresh_blocks) is not None
        for item in items
        if isinstance(item, FactBlock)
    )


def place_text(subject: str, key: str, provenance: dict[str, Any]) -> str | None:
    """Where a fact that moves with its line is written, as text; None if it does not move.

    What the state digest adds for such a fact: a record whose only change
    is a move is a change of state, to be stored.
    """
    moves = DECLARED.moves(subject, key)
    if not moves:
        return None
    if moves == "provenance":
        return provenance_json(provenance) or ""
    return json.dumps([provenance.get(k) for k in LINE_PLACE], ensure_ascii=False, default=str)


def _same_place(ident: Ident, stored: str | None, provenance: dict[str, Any]) -> bool:
    """Whether a fact whose value stayed is still where it was stored (`Moves`)."""
    if DECLARED.moves(*ident) == "provenance":
        return stored == provenance_json(provenance)
    old = json.loads(stored) if stored else {}
    return all(old.get(k) == provenance.get(k) for k in LINE_PLACE)


def needs_script_provenance(items: Sequence[Fact | FactBlock], config_changed: bool) -> bool:
    """Whether the delta needs the stored provenance of open script facts and of facts that
    move with their line.

    Such a fact's line is part of what it says (a move is stored), and a
    sourced file's provenance names the service whose scope covers it.
    """
    if config_changed:
        return True
    for item in items:
        if isinstance(item, Fact):
            if DECLARED.moves(item.subject, item.key):
                return True
        elif any(map(DECLARED.key_may_move, item.keys)) and any(
            map(DECLARED.may_move, item.subjects)
        ):
            return True
    return False


# ---------------------------------------------------------------- sorting what was collected


def _gather(
    previous: PreviousState, items: Sequence[Fact | FactBlock], fresh_blocks: bool
) -> tuple[dict[Ident, _Entry], list[FactBlock]]:
    """Sort what was collected into facts to compare one by one and fresh blocks.

    A fresh block holds only subjects this host has never recorded, so every
    fact in it is new and needs no comparison: the writer stores it column
    by column. That is every file of a first record. For an established
    host only past FRESH_MIN new subjects in one block, as finding them
    reads every subject the host has known. Two globs matching one file:
    the first wins, whichever way it is stored.
    """
    unique: dict[Ident, _Entry] = {}
    fresh: list[FactBlock] = []
    claimed: dict[str, tuple[str, ...]] = {}  # subject -> keys, of the fresh blocks
    known: set[str] | None = set() if previous.new_host else previous.known_subjects
    for item in items:
        if isinstance(item, Fact):
            keys = claimed.get(item.subject)
            if keys is None or item.key not in keys:
                entry = (item.value, item.provenance, item.secret)
                unique.setdefault((item.subject, item.key), entry)
            continue
        candidates = _fresh_candidates(item, previous, fresh_blocks)
        if candidates is None:
            _merge_block(unique, item, claimed)
            continue
        if known is None:
            raise ValueError("PreviousState.known_subjects is needed (needs_known_subjects)")
        candidates -= known
        candidates -= claimed.keys()
        candidates.difference_update(ident[0] for ident in unique)
        if len(candidates) == len(item.subjects):
            block, rest = item, None
        elif candidates:
            block, rest = _split_block(item, candidates)
        else:
            block, rest = None, item
        if block is not None:
            fresh.append(block)
            claimed.update(dict.fromkeys(block.subjects, block.keys))
        if rest is not None:
            _merge_block(unique, rest, claimed)
    return unique, fresh


def _fresh_candidates(
    block: FactBlock, previous: PreviousState, fresh_blocks: bool
) -> set[str] | None:
    """The subjects of `block` with no open version, if it may hold a fresh part; else None."""
    if not fresh_blocks:
        return None
    subjects = set(block.subjects)
    candidates = subjects - previous.open_subjects
    if (
        len(subjects) != len(block.subjects)  # a repeated subject: one by one
        or not candidates
        or (not previous.new_host and len(candidates) < FRESH_MIN)
        or not _columnar(block)
    ):
        return None
    return candidates


def _merge_block(
    unique: dict[Ident, _Entry],
    block: FactBlock,
    claimed: dict[str, tuple[str, ...]] | None = None,
) -> None:
    """Add a block's facts to `unique` in the block's order; facts already there stay.

    So do facts an earlier fresh block `claimed` (subject -> its keys): the
    first set to match a file wins, whichever way its facts are stored.
    Built column-wise by comprehensions: a first record's blocks hold every
    file's three facts, and building 36k Facts one by one, here and in the
    collector, cost about 0.1 s of a first record of the bench tree.
    """
    keys = block.keys
    entries: dict[Ident, _Entry] = dict(
        zip(
            [(subject, key) for subject in block.subjects for key in keys],
            [
                (column[j], provenance, False)
                for j, provenance in enumerate(block.provenances)
                for column in block.columns
            ],
            strict=True,
        )
    )
    taken = entries.keys() & unique.keys()
    if claimed:
        taken |= entries.keys() & {
            (subject, key)
            for subject in block.subjects
            if subject in claimed
            for key in claimed[subject]
        }
    for ident in taken:
        del entries[ident]
    unique.update(entries)


def _columnar(block: FactBlock) -> bool:
    """True if every value of `block` is stored inline and survives a trip through JSON.

    SQLite's json_each ends a text at NUL, and a value past INLINE_MAX (or
    of a text key, which may hold one) belongs in the blob table.
    """
    if TEXT_KEYS.intersection(block.keys):
        return False
    for column in (block.subjects, list(block.keys), *block.columns):
        if max(map(len, column), default=0) > INLINE_MAX or "\0" in "".join(column):
            return False
    return True


def _split_block(block: FactBlock, fresh: set[str]) -> tuple[FactBlock, FactBlock]:
    """(the part of `block` whose subjects are in `fresh`, the rest), both in block order."""
    inside = [j for j, subject in enumerate(block.subjects) if subject in fresh]
    outside = [j for j, subject in enumerate(block.subjects) if subject not in fresh]

    def part(indexes: list[int]) -> FactBlock:
        return FactBlock(
            block.keys,
            [block.subjects[j] for j in indexes],
            [[column[j] for j in indexes] for column in block.columns],
            [block.provenances[j] for j in indexes],
        )

    return part(inside), part(outside)


# ---------------------------------------------------------------- comparing


def _compare(
    previous: PreviousState, unique: dict[Ident, _Entry]
) -> tuple[list[NewVersion], list[int], int, int]:
    """(versions to open, versions to close, reopened, moved) for the facts compared one by one.

    A new value of a fact with an open version closes it and opens another:
    one change (`reopened` counts them). A fact whose value stayed while its
    line moved (declared to move, `drift.declaration.Moves`) gets a new
    version too, so the current line is known, but it is no change (`moved`).
    """
    open_versions = previous.open_versions
    placed = previous.script_provenance
    opening: list[NewVersion] = []
    closing: list[int] = []
    reopened = moved = 0
    for ident, (text, provenance, secret) in unique.items():
        value, blob_digest, data = stored_value(ident[1], text)
        current = open_versions.get(ident) if open_versions else None
        if current is None:
            opening.append(NewVersion(ident, provenance, secret, None, value, blob_digest, data))
            continue
        fact_id, vid, old_value, old_digest, old_secret = current
        if (old_value, old_digest, old_secret) == (value, blob_digest, secret):
            # A line added above an export moves it without changing its value;
            # the new line is stored, or drift would keep naming the old one.
            # A script's content has no line.
            if not DECLARED.moves(*ident):
                continue
            if placed is None:
                raise ValueError(
                    "PreviousState.script_provenance is needed (needs_script_provenance)"
                )
            if ident not in placed or _same_place(ident, placed[ident], provenance):
                continue
            moved += 1  # a new line for the same value: stored, not a change
        closing.append(vid)
        reopened += 1
        opening.append(NewVersion(ident, provenance, secret, fact_id, value, blob_digest, data))
    return opening, closing, reopened, moved


def _scope_moves(
    previous: PreviousState,
    scopes: tuple[Scope, Scope],
    gone: list[tuple[Ident, int]],
    opening: list[NewVersion],
    fresh: list[FactBlock],
) -> ScopeMoves:
    """Count the facts that left or entered the config's scope, and whether any stayed."""
    before, after = scopes
    provenance = _gone_script_provenance(previous, gone)
    untracked = sum(
        1
        for ident, _vid in gone
        if not after.covers(ident[0], provenance.get(ident))
        and before.covers(ident[0], provenance.get(ident))
    )
    tracked = sum(
        1
        for new in opening
        if new.fact_id is None
        and after.covers(new.ident[0], new.provenance)
        and not before.covers(new.ident[0], new.provenance)
    ) + sum(
        len(block.keys)
        for block in fresh
        for subject in block.subjects
        if not before.covers(subject)
    )
    covers_none = False
    if not before.empty and previous.open_versions:
        covers_none = not any(after.covers(s) for s in previous.open_subjects)
    return ScopeMoves(untracked, tracked, covers_none)


def _gone_script_provenance(
    previous: PreviousState, gone: list[tuple[Ident, int]]
) -> dict[Ident, dict[str, Any]]:
    """The stored provenance of the removed script facts (a sourced file names its service)."""
    scripts = [ident for ident, _vid in gone if ident[0].startswith("script:")]
    if not scripts:
        return {}
    stored = previous.script_provenance
    if stored is None:
        raise ValueError("PreviousState.script_provenance is needed (needs_script_provenance)")
    return {ident: json.loads(text) if (text := stored.get(ident)) else {} for ident in scripts}
