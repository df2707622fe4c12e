"""What a collector is: a base class to run one, and the declaration of what it may write.

A collector reads one part of the live system for one entry of the config
and yields Facts, FactBlocks and CollectionErrors; it never sees the
database. Each collector declares the subject kinds it writes, and for each
kind every key it may write (exact keys, and prefixes such as ``env:``), the
category the analysis shows it under and how redaction treats its values.
docs/collectors.md is the long form, and `drift.collectors.registry` lists
the collectors drift runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Generic, Literal, TypeVar

from drift.config import Config
from drift.facts import CollectContext, CollectionError, Fact, FactBlock

Item = Fact | FactBlock | CollectionError
"""What a collector yields."""

Secrecy = Literal["never", "name", "value"]
"""How redaction (`drift.secrets.redactor`) treats a key's values.

``never``: not looked at (hashes, sizes, modes, pids: `drift.secrets.redactor.SKIP_KEYS`).
``name``: a secret when the name the key carries says so (``env:HF_TOKEN``),
or when the value does. ``value``: a secret only when the value looks like one
(a token's shape, a password in a URL); a secret inside a longer text is masked.
"""


@dataclass(frozen=True)
class FactKey:
    """One key a collector may write, or, with a `placeholder`, every key with that prefix.

    ``FactKey("env:", ..., placeholder="NAME")`` declares ``env:PATH``,
    ``env:HF_TOKEN`` and the rest. `category` is where the analysis files a
    change of it (`drift.analysis.group.category`); `secret` how redaction
    treats its values.
    """

    key: str
    meaning: str
    category: str
    secret: Secrecy
    placeholder: str = ""

    @property
    def shown(self) -> str:
        """The key as the documentation writes it: ``sha256``, ``env:NAME``."""
        return self.key + self.placeholder

    def matches(self, key: str) -> bool:
        """True if `key` is this key, or has this prefix."""
        return key.startswith(self.key) if self.placeholder else key == self.key


@dataclass(frozen=True)
class SubjectKind:
    """One kind of subject (``file`` of ``file:/etc/app.conf``) and every key its facts may have.

    `name` says what follows the kind in a subject (``PATH``). `notes` are
    keys that only collection errors use, to say what could not be followed
    without covering any fact (the scripts collector's ``reading``). A kind
    with no keys is a subject of errors alone (``files:SET``).
    """

    kind: str
    name: str
    meaning: str
    keys: tuple[FactKey, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        """The subject as the documentation writes it: ``file:PATH``."""
        return f"{self.kind}:{self.name}"

    def key(self, key: str) -> FactKey | None:
        """The declaration `key` falls under: itself, else the longest prefix it has; or None."""
        prefixed: FactKey | None = None
        for declared in self.keys:
            if not declared.placeholder:
                if declared.key == key:
                    return declared
            elif key.startswith(declared.key) and (
                prefixed is None or len(declared.key) > len(prefixed.key)
            ):
                prefixed = declared
        return prefixed


Entry = TypeVar("Entry")


class Collector(Generic[Entry]):
    """One collector: what it declares, which config entries it reads, and how to run it.

    A subclass sets `name`, `section` (the Config attribute holding its
    entries; several collectors may read one section), `subjects` and, for
    one that never reads the box, `in_container` False, and
    implements `scope` and `collect`. `collect` imports the collector's own
    module, so a config that does not use a collector never loads it.
    """

    name: ClassVar[str]
    section: ClassVar[str]
    subjects: ClassVar[tuple[SubjectKind, ...]]
    in_container: ClassVar[bool] = True
    """Whether it reads the box, which `[container]` moves into a container (commands
    and health checks run on the host as written)."""

    def scope(self, entry: Entry) -> str | None:
        """The subject a crash of `collect(entry)` leaves unknown, or None: nothing to collect."""
        raise NotImplementedError

    def collect(self, entry: Entry, ctx: CollectContext) -> Iterable[Item]:
        """Read the live system for one config entry."""
        raise NotImplementedError

    def entries(self, config: Config) -> tuple[Entry, ...]:
        """This collector's entries of a Config."""
        entries: tuple[Entry, ...] = getattr(config, self.section)
        return entries

    def subject_kind(self, subject: str) -> SubjectKind | None:
        """The declared kind of `subject` (``service`` of ``service:decode``), or None."""
        kind = subject.partition(":")[0]
        for declared in self.subjects:
            if declared.kind == kind:
                return declared
        return None
