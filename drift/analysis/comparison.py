"""What `drift compare` shows: the typed context every format renders (text, Markdown,
HTML, the JSON envelope and its schema), built by `drift.analysis.compare`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from drift.names import natural


@dataclass(frozen=True)
class HostRef:
    """One host compared: the record read, its role, and its last stable window."""

    host: str
    snapshot: int
    taken_at: str
    taken_local: str
    role: str
    baseline: str | None  # the end of its last stable window, as words; None when unknown


@dataclass(frozen=True)
class HostValue:
    """A value some hosts share, as shown, and where it came from on the first of them."""

    hosts: list[str]
    value: str | None  # None: the fact is absent there
    where: str


@dataclass(frozen=True)
class OddFact:
    """One fact where the odd host differs: its value and the majority's."""

    subject: str
    key: str
    kind: str
    value: str | None  # on the odd host; None: absent there
    where: str
    majority: HostValue
    among: int  # the hosts compared on it (those whose drift.toml asks for it)
    changed_since_stable: bool | None  # None: the host has no stable window to tell


@dataclass(frozen=True)
class Finding:
    """What one host has that its siblings do not, ranked: a title, reasons, the facts."""

    rank: int
    score: float
    host: str
    role: str
    title: str
    reasons: list[str]
    facts: list[OddFact]


@dataclass(frozen=True)
class Split:
    """A fact the hosts disagree on with no majority: which side is odd is not known."""

    subject: str
    key: str
    values: list[HostValue]


@dataclass(frozen=True)
class Expected:
    """A fact whose values differ between hosts as they should, and why that is expected."""

    subject: str
    key: str
    why: str
    values: int


@dataclass(frozen=True)
class RoleGroup:
    """The hosts of one role, compared with one another."""

    role: str
    hosts: list[HostRef]
    findings: list[Finding]
    total_findings: int
    splits: list[Split]
    expected: list[Expected]
    same: int
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Comparison:
    """Everything `drift compare` shows."""

    command: str
    at: str | None
    groups: list[RoleGroup]
    warnings: list[str]


def host_names(hosts: Iterable[str]) -> str:
    """Host names as a finding says them: every one up to six, else five and a count."""
    listed = natural(hosts)
    if len(listed) > 6:
        return f"{', '.join(listed[:5])} and {len(listed) - 5} more"
    return ", ".join(listed)
