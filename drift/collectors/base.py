"""What a collector is: a base class to run one, naming the subject kinds it writes.

A collector reads one part of the live system for one entry of the config
and yields Facts, FactBlocks and CollectionErrors; it never sees the
database. The kinds it writes, and every key of each with its category and
secrecy, are declared in `drift.subjects` (the analysis and redaction read
them there). docs/collectors.md is the long form, and
`drift.collectors.registry` lists the collectors drift runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Generic, TypeVar

from drift.config import Config
from drift.declaration import SubjectKind
from drift.facts import CollectContext, CollectionError, Fact, FactBlock

Item = Fact | FactBlock | CollectionError
"""What a collector yields."""

Entry = TypeVar("Entry")


class Collector(Generic[Entry]):
    """One collector: the kinds it writes, which config entries it reads, and how to run it.

    A subclass sets `name`, `section` (the Config attribute holding its
    entries; several collectors may read one section), `subjects` (its
    kinds, declared in `drift.subjects`) and, for
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
