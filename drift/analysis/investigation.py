"""What an investigation finds: the typed context `drift since`, `diff`, `report` and `demo` show.

`Investigation` and its parts are plain dataclasses of strings, numbers,
lists and small dicts. Their field names are the JSON output's keys and what
the templates read (`plain(investigation)` is the `data` of
`drift since --format json`), so renaming a field changes a published format:
tests/test_contract.py and docs/schema/since.schema.json pin them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from drift.analysis.diff import ChangeKind
from drift.analysis.rank import Signal
from drift.analysis.story import Status
from drift.analysis.values import ValueDiff
from drift.timespec import iso, local_time

if TYPE_CHECKING:
    from drift.store.query import SnapshotInfo
    from drift.timespec import When

Role = Literal["root", "evidence"]
TimelineKind = Literal["config", "restart", "failure", "change", "health", "flapping", "mark"]


@dataclass(frozen=True, kw_only=True)
class SnapshotRef:
    """One of the snapshots compared: which, when, what was asked for and why this one."""

    snapshot: int
    time: str
    local: str
    asked: str | None  # the WHEN as given, None when drift chose
    why: str
    facts: int


@dataclass(frozen=True, kw_only=True)
class BaselineRef(SnapshotRef):
    """The baseline snapshot, where it came from, and the first failing health check after it."""

    source: str  # "given", "marks" or "health"
    unhealthy_at: str | None
    unhealthy_local: str | None
    # The baseline record itself failed a check (`health check x was failing (since 12:00:05)`):
    # then no later record is the first failure, and `unhealthy_at` is only the next failing one.
    failing_at_baseline: str | None


@dataclass(frozen=True, kw_only=True)
class Trust:
    """How far to trust the baseline: records, gaps, collection errors, clock steps."""

    window_snapshots: int | None  # records in the stable window, None without one
    after_baseline: int
    gaps: int
    errors: int
    baseline_errors: int
    clock_steps: int
    warnings: list[str]
    summary: str


@dataclass(frozen=True, kw_only=True)
class ScopeSwitch:
    """A record taken with another config than the one before it."""

    snapshot: int
    at: str
    local: str
    before_path: str | None
    after_path: str | None
    sections: list[str]
    text: str
    detail: str


@dataclass(frozen=True, kw_only=True)
class ScopeSubject:
    """A subject whose facts left (or entered) the config's scope, and since which snapshot."""

    subject: str
    facts: int
    since: int
    since_local: str


@dataclass(frozen=True, kw_only=True)
class Scope:
    """The config changes of the window, and the facts that only left or entered its scope."""

    changes: list[ScopeSwitch]
    untracked_facts: int
    tracked_facts: int
    untracked: list[ScopeSubject]
    tracked: list[ScopeSubject]


@dataclass(frozen=True, kw_only=True)
class Window:
    """The records after the baseline up to the current one."""

    snapshots: int
    with_errors: int


@dataclass(frozen=True, kw_only=True)
class FactChange:
    """One fact's change, shown: values for people, when, and where it came from."""

    subject: str
    key: str
    kind: ChangeKind
    category: str
    before: str | None
    after: str | None
    secret: bool
    changed_at: str
    changed_local: str
    where: str
    provenance: dict[str, Any]
    diff: ValueDiff | None


@dataclass(frozen=True, kw_only=True)
class SuspectChange(FactChange):
    """A change as part of a suspect: its root, or evidence for it."""

    role: Role


@dataclass(frozen=True, kw_only=True)
class SubjectChange(SuspectChange):
    """A suspect's change listed under its subject (the report's appendix)."""

    suspect_rank: int


@dataclass(frozen=True, kw_only=True)
class ServiceRestart:
    """A service that came back with another pid inside the window, and how many times.

    `at` is its latest start, `first` its first in the window; `count` the
    restarts the window holds at least, `counted_by` who counted them:
    ``systemd`` (its NRestarts) or ``records`` (the starts drift's records saw).
    """

    service: str
    before_pid: str | None
    after_pid: str | None
    at: str
    at_local: str
    count: int
    counted_by: str
    first: str
    first_local: str


@dataclass(frozen=True, kw_only=True)
class ServiceFailure:
    """A systemd service seen failing in the window: a crash loop, or a failed start.

    `summary` says it in words ("crash-looping since 12:01:05 (4 restarts,
    exit 1)"); `state` what it does now (failing, gave up, running again,
    restarted, stopped); `journal` the unit's lines of its failing runs, each
    ``TIME RUN WHO: MESSAGE`` (RUN: the first 8 characters of its InvocationID).
    """

    service: str
    summary: str
    state: str
    since: str
    since_local: str
    restarts: int | None
    exit: str
    result: str
    journal: list[str]


@dataclass(frozen=True, kw_only=True)
class Suspect:
    """A ranked story: its score and why, its changes (root first) and the restarts it caused."""

    rank: int
    score: float
    title: str
    status: Status
    label: str
    category: str
    services: list[str]
    reasons: list[str]
    signals: list[Signal]
    changes: list[SuspectChange]
    restarts: list[ServiceRestart]
    failure: ServiceFailure | None  # the failing service the change reached
    # A change that came and went inside the window: when its fact was back at the baseline.
    undone_at: str | None = None
    undone_local: str | None = None


@dataclass(frozen=True, kw_only=True)
class SubjectChanges:
    """Every change of the suspects shown on one subject."""

    subject: str
    changes: list[SubjectChange]


@dataclass(frozen=True, kw_only=True)
class TimelineEntry:
    """One event of the window, in time order."""

    at: str
    local: str
    kind: TimelineKind
    text: str


# Not frozen: there is one per unchanged fact of the box (tens of thousands), and a
# frozen dataclass takes twice as long to build.
@dataclass(slots=True, kw_only=True)
class UnchangedFact:
    """A fact verified unchanged, with its value and since when it has had it."""

    subject: str
    key: str
    value: str | None
    since: str


@dataclass(frozen=True, kw_only=True)
class Unchanged:
    """What was verified unchanged: counts per kind, whole subjects, and every fact."""

    count: int
    by_kind: dict[str, int]
    subjects: list[str]
    whole_subjects: list[str]  # files, repos and scripts whose every fact is unchanged
    facts: list[UnchangedFact]


@dataclass(frozen=True, kw_only=True)
class BlindSpotEntry:
    """What drift could not see in the window: a collection error or a gap in recording."""

    kind: Literal["error", "gap"]
    subject: str
    key: str | None
    message: str
    first_seen: str
    last_seen: str
    first_local: str
    last_local: str
    count: int
    current: bool  # still failing at the current snapshot
    # Its facts keep their last known value; False for a subject of errors alone (a
    # notifier that could not send), which has no value to keep.
    keeps_value: bool = True


@dataclass(frozen=True, kw_only=True)
class Stretch:
    """A stretch of time in one state: a health check's or a service's, for the drawn timeline.

    Health: ``passing``, ``failing`` or ``unknown`` (no check ran); a service:
    ``running``, ``stopped``, ``crash-loop`` or ``failed``. `text` says it in words.
    """

    start: str
    end: str
    start_local: str
    end_local: str
    state: str
    text: str


@dataclass(frozen=True, kw_only=True)
class ServiceLane:
    """One service over the drawn window: its stretches, and every start the records saw."""

    service: str
    starts: list[str]
    starts_local: list[str]
    stretches: list[Stretch]


@dataclass(frozen=True, kw_only=True)
class MarkPoint:
    """A stable, unstable or note mark inside the drawn window."""

    at: str
    local: str
    kind: str
    note: str | None


@dataclass(frozen=True, kw_only=True)
class Overview:
    """What the report's drawn timeline needs beyond the rest: from `start` (a little before
    the baseline) to `end` (a little after the current record), the health checks and each
    service's runs as stretches, and the marks."""

    start: str
    end: str
    health: list[Stretch]
    services: list[ServiceLane]
    marks: list[MarkPoint]


@dataclass(frozen=True, kw_only=True)
class Investigation:
    """Everything `drift since` and `drift diff` show, from the baseline to the current record."""

    command: str
    host: str
    baseline: BaselineRef
    current: SnapshotRef
    trust: Trust
    scope: Scope
    window: Window
    total_suspects: int
    suspects: list[Suspect]
    changes_by_subject: list[SubjectChanges]  # the suspects' changes by subject: the appendix
    timeline: list[TimelineEntry]
    unchanged: Unchanged
    blind_spots: list[BlindSpotEntry]
    overview: Overview
    # --service NAME: only what touches it; `elsewhere` counts the suspects it left out.
    service: str | None = None
    elsewhere: int = 0


def snapshot_ref(snap: SnapshotInfo, asked: When | None, why: str) -> SnapshotRef:
    """A snapshot as a report names it: number, time, the WHEN asked for and why this one."""
    return SnapshotRef(
        snapshot=snap.id,
        time=iso(snap.taken_us),
        local=local_time(snap.taken_us),
        asked=asked.text if asked is not None else None,
        why=why,
        facts=snap.n_facts,
    )
