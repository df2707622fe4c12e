"""How what a collector writes is declared, and the lookups drift reads from the declarations.

A `SubjectKind` (``service``) lists every key its facts may have, as
`FactKey`s: an exact key (``pid``) or a prefix with a placeholder
(``env:NAME``), each with the category the analysis files it under and how
redaction treats its values. A kind files its keys (`SubjectKind.category`);
`Declarations` turns a set of kinds into the lookups the analysis
(`category`) and redaction (`skips`, `name_in_key`) run per fact, built once,
so that a new collector's declaration is all they need. `drift.subjects`
holds the declarations themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

Moves = Literal["", "line", "provenance"]
"""Whether a key's value has a place a line move changes, and what that place is.

A value written on a line (a script's export, a unit's ``Environment=``)
moves when a line is added above it: the value is the same, its line is
not. The store keeps the move as a new version with the same value, so
drift names the line where the value is now, and the queries count it as
no change of value (neither a change nor churn). ``""``: the key has no
such place. ``"line"``: the place is the ``file``, ``line`` and ``text`` of
its provenance (the rest, a unit's drop-in list, changes with unrelated
edits). ``"provenance"``: the place is its whole provenance (a script
value's line, the lines of every value it may take, where it is exported).
"""

LINE_PLACE = ("file", "line", "text")
"""The provenance fields that are the place of a key that moves by ``"line"``."""

Secrecy = Literal["never", "name", "value"]
"""How redaction (`drift.secrets.redactor`) treats a key's values.

``never``: not looked at (hashes, sizes, modes, pids). ``name``: a secret
when the name the key carries says so (``env:HF_TOKEN``), or when the value
does. ``value``: a secret only when the value looks like one (a token's
shape, a password in a URL); a secret inside a longer text is masked.
"""


@dataclass(frozen=True)
class FactKey:
    """One key a collector may write, or, with a `placeholder`, every key with that prefix.

    ``FactKey("env:", ..., placeholder="NAME")`` declares ``env:PATH``,
    ``env:HF_TOKEN`` and the rest. `category` is where the analysis files a
    change of it (`SubjectKind.category`); `secret` how redaction treats
    its values; `moves` whether a line moved under its value is a move
    (`Moves`), stored and never counted as a change; `json_text` that its
    values are JSON text (``"fa3"``), so a secret one is digested decoded.
    """

    key: str
    meaning: str
    category: str
    secret: Secrecy
    placeholder: str = ""
    moves: Moves = ""
    json_text: bool = False

    @property
    def shown(self) -> str:
        """The key as the documentation writes it: ``sha256``, ``env:NAME``."""
        return self.key + self.placeholder

    def matches(self, key: str) -> bool:
        """True if `key` is this key, or has this prefix."""
        return key.startswith(self.key) if self.placeholder else key == self.key


class _Index:
    """A subject kind's keys ready to look up (a plain class: defined at every record's import)."""

    __slots__ = ("exact", "categories", "prefixes", "fallbacks")

    def __init__(self, keys: tuple[FactKey, ...], undeclared: tuple[tuple[str, str], ...]) -> None:
        self.exact = {k.key: k for k in keys if not k.placeholder}
        # the exact keys' categories: the common case, in one lookup
        self.categories = {k.key: k.category for k in keys if not k.placeholder}
        self.prefixes = tuple(sorted((k for k in keys if k.placeholder), key=lambda k: -len(k.key)))
        self.fallbacks = tuple(sorted(undeclared, key=lambda p: -len(p[0])))


@dataclass(frozen=True)
class SubjectKind:
    """One kind of subject (``file`` of ``file:/etc/app.conf``) and every key its facts may have.

    `name` says what follows the kind in a subject (``PATH``). `notes` are
    keys that only collection errors use, to say what could not be followed
    without covering any fact (the scripts collector's ``reading``). A kind
    with no keys is a subject of errors alone (``files:SET``). `undeclared`
    files a key it does not declare (one no collector writes today), by
    prefix, longest first, ``""`` matching any key; without a match, under
    the kind's own name.
    """

    kind: str
    name: str
    meaning: str
    keys: tuple[FactKey, ...] = ()
    notes: tuple[str, ...] = ()
    undeclared: tuple[tuple[str, str], ...] = ()

    @property
    def shown(self) -> str:
        """The subject as the documentation writes it: ``file:PATH``."""
        return f"{self.kind}:{self.name}"

    def __post_init__(self) -> None:
        """Refuse keys the lookups could not honour, naming the kind and the key."""
        seen: set[tuple[str, bool]] = set()
        for declared in self.keys:
            if declared.placeholder and not declared.key.endswith(":"):
                # an error on ``env:`` covers every ``env:NAME``, and redaction finds a
                # prefix by the text before the first colon
                raise ValueError(f"{self.shown} {declared.shown}: a prefix ends with a colon")
            if declared.secret == "name" and not declared.placeholder:
                raise ValueError(
                    f"{self.shown} {declared.shown}: a key judged by name needs a placeholder, "
                    "the name being what follows its prefix"
                )
            ident = (declared.key, bool(declared.placeholder))
            if ident in seen:
                raise ValueError(f"{self.shown}: {declared.shown} is declared twice")
            seen.add(ident)

    @cached_property
    def _index(self) -> _Index:
        """Its keys ready to look up, built on first use."""
        return _Index(self.keys, self.undeclared)

    def key(self, key: str) -> FactKey | None:
        """The declaration `key` falls under: itself, else the longest prefix it has; or None."""
        index = self._index
        found = index.exact.get(key)
        if found is None:
            for declared in index.prefixes:
                if key.startswith(declared.key):
                    return declared
        return found

    def category(self, key: str) -> str:
        """Where the analysis files `key`: its declared category, else its `undeclared` one."""
        found = self._index.categories.get(key)
        if found is not None:
            return found
        declared = self.key(key)
        if declared is not None:
            return declared.category
        for prefix, category in self._index.fallbacks:
            if key.startswith(prefix):
                return category
        return self.kind

    def keys_in(self, category: str) -> tuple[str, ...]:
        """Its exact keys filed under `category`, in the order declared."""
        return tuple(k.key for k in self.keys if k.category == category and not k.placeholder)


class Declarations:
    """The lookups a set of subject kinds gives, built once: each key's category, secrecy and
    whether its line moves.

    Redaction reads the key alone (it runs on every fact of every record),
    so a key must mean the same to redaction in every kind that declares it;
    building the lookups refuses declarations that disagree, naming them.
    """

    def __init__(self, kinds: Iterable[SubjectKind]) -> None:
        self.kinds = tuple(kinds)
        self._by_kind: dict[str, SubjectKind] = {}
        for kind in self.kinds:
            if kind.kind in self._by_kind:
                raise ValueError(f"subject kind {kind.kind!r} is declared twice")
            self._by_kind[kind.kind] = kind
        declared = [key for kind in self.kinds for key in kind.keys]
        never = [k for k in declared if k.secret == "never"]
        self.skips: Callable[[str], bool] = _skipper(
            frozenset(k.key for k in never if not k.placeholder),
            tuple(k.key for k in never if k.placeholder),
        )
        """Whether redaction leaves the values of a key unread (declared ``never``)."""
        self.name_in_key: Callable[[str], str | None] = _namer(
            k.key for k in declared if k.secret == "name" and k.placeholder
        )
        """The name redaction judges the values of a key by (``HF_TOKEN`` of ``env:HF_TOKEN``),
        or None: only a key under a prefix declared ``name`` has one, any other is judged by
        its value alone."""
        self.json_text: Callable[[str], bool] = _skipper(
            frozenset(k.key for k in declared if k.json_text and not k.placeholder),
            tuple(k.key for k in declared if k.json_text and k.placeholder),
        )
        """Whether a key's values are JSON text (redaction digests a secret one decoded)."""
        for kind in self.kinds:
            for key in kind.keys:
                self._check_secrecy(kind, key)
        self.movers: tuple[tuple[str, FactKey], ...] = tuple(
            (kind.kind, key) for kind in self.kinds for key in kind.keys if key.moves
        )
        """(subject kind, key) of every key declared to move with its line: what the store
        reads to tell a move from a change (in SQL too)."""
        self._moving_kinds = {kind for kind, _key in self.movers}
        self._moving_heads = tuple(f"{kind}:" for kind in sorted(self._moving_kinds))
        for kind_name, key in self.movers:
            self._check_mover(self._by_kind[kind_name], key)

    def moves(self, subject: str, key: str) -> Moves:
        """Whether the fact (`subject`, `key`) has a place a line move changes (`Moves`)."""
        if not subject.startswith(self._moving_heads):  # a file's 40k facts: one test each
            return ""
        declared = self._by_kind[subject.partition(":")[0]].key(key)
        return "" if declared is None else declared.moves

    def key_may_move(self, key: str) -> bool:
        """Whether `key` moves with its line in any kind (a block of file hashes: never)."""
        return any(declared.matches(key) for _kind, declared in self.movers)

    def may_move(self, subject: str) -> bool:
        """Whether any fact of `subject` may move with its line (cheap: its kind alone)."""
        return subject.startswith(self._moving_heads)

    def _check_mover(self, kind: SubjectKind, key: FactKey) -> None:
        """Refuse a moving prefix a longer prefix that does not move would hide in part.

        The store tells moves from changes in SQL by the moving keys alone.
        """
        for other in kind.keys:
            if other is not key and other.moves != key.moves:
                if key.placeholder and other.key.startswith(key.key):
                    raise ValueError(
                        f"{kind.shown} {key.shown} moves with its line, but "
                        f"{other.shown} under it is declared otherwise"
                    )

    def holds_values(self, subject: str) -> bool:
        """Whether `subject` has facts (an error on it keeps their last values), or is a
        subject of errors alone (``files:SET``, ``notify:NAME``)."""
        declared = self._by_kind.get(subject.partition(":")[0])
        return declared is None or bool(declared.keys)

    def category(self, subject: str, key: str) -> str:
        """The category of a fact: its kind's for its key (`SubjectKind.category`).

        A subject of a kind nothing declares is filed under its kind (the
        text before the first colon).
        """
        kind = subject.partition(":")[0]
        declared = self._by_kind.get(kind)
        return kind if declared is None else declared.category(key)

    def secrecy(self, key: str) -> Secrecy:
        """How redaction treats values of `key`, whatever its subject."""
        if self.skips(key):
            return "never"
        return "name" if self.name_in_key(key) is not None else "value"

    def _check_secrecy(self, kind: SubjectKind, key: FactKey) -> None:
        """Refuse a key whose declared secrecy is not what redaction, by key alone, would do."""
        does = self.secrecy(key.shown)
        if does != key.secret:
            others = [
                f"{other.shown} {k.shown} ({k.secret})"
                for other in self.kinds
                for k in other.keys
                if k is not key and k.secret == does and k.matches(key.shown)
            ]
            raise ValueError(
                f"{kind.shown} {key.shown} is declared {key.secret!r}, but redaction reads "
                f"keys alone and treats it as {does!r}, as declared by {', '.join(others)}"
            )


def _skipper(exact: frozenset[str], prefixes: tuple[str, ...]) -> Callable[[str], bool]:
    """A test of a key against exact keys and prefixes (`Declarations.skips`, `json_text`):
    as fast as a set lookup while no prefix is declared."""
    if not prefixes:
        return exact.__contains__

    def skips(key: str) -> bool:
        return key in exact or key.startswith(prefixes)

    return skips


def _namer(prefixes: Iterable[str]) -> Callable[[str], str | None]:
    """`Declarations.name_in_key` for these prefixes.

    Every prefix ends with a colon, so a key has one only if the text before
    its first colon is the prefix's: one dict lookup turns away most keys,
    and leaves what follows the colon to test against the rest of each
    prefix, longest first (``environment:`` of ``unit:environment:``).
    """
    by_head: dict[str, list[str]] = {}
    for prefix in sorted(set(prefixes), key=len, reverse=True):
        head, _, rest = prefix.partition(":")
        by_head.setdefault(head, []).append(rest)
    heads = {head: tuple(rests) for head, rests in by_head.items()}

    def name_in_key(key: str) -> str | None:
        head, colon, rest = key.partition(":")
        rests = heads.get(head)
        if rests is not None and colon:
            for more in rests:
                if not more:
                    return rest
                if rest.startswith(more):
                    return rest[len(more) :]
        return None

    return name_in_key
