"""The one investigation pipeline: from two snapshots to ranked suspects with their evidence.

`investigate` is what `drift since`, `drift diff`, `drift report` and
`drift demo` run: resolve the baseline and current snapshots, diff their
states, split off what only left or entered the config's scope, group the
changes into stories, rank them, and gather the timeline, what was verified
unchanged and the blind spots. It returns an `Investigation`
(drift/analysis/investigation.py); rendering it is the caller's business.
One idea, kept whole past 500 lines: the pipeline's steps read in the
order they run, each a call into the module that owns it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from drift.analysis.diff import (
    BlindSpot,
    Change,
    State,
    blind_spots,
    changes_between,
    failing_at,
    unchanged_between,
)
from drift.analysis.failures import Failure, find_failures
from drift.analysis.group import group_changes
from drift.analysis.investigation import (
    BaselineRef,
    BlindSpotEntry,
    Investigation,
    ScopeSubject,
    ScopeSwitch,
    ServiceFailure,
    ServiceRestart,
    SnapshotRef,
    SubjectChange,
    SubjectChanges,
    Suspect,
    SuspectChange,
    Trust,
    Unchanged,
    UnchangedFact,
    Window,
    snapshot_ref,
)
from drift.analysis.investigation import Scope as ScopeView
from drift.analysis.kinds import category
from drift.analysis.overview import overview
from drift.analysis.rank import ChurnInfo, RankedStory, Signal, rank_stories
from drift.analysis.restarts import Restart
from drift.analysis.scope import ConfigSwitch, ScopeSplit, split_scope
from drift.analysis.service_scope import another_services, owned_by, owners
from drift.analysis.story import Story
from drift.analysis.text_owners import TextOwners
from drift.analysis.timeline import timeline_entries
from drift.analysis.unit_history import service_runs
from drift.analysis.values import ValueDiff, Values, service_pids, where_read
from drift.analysis.window_stories import (
    flapping,
    round_trip_stories,
    trip_moments,
    window_round_trips,
    with_departures,
)
from drift.analysis.windows import (
    Baseline,
    Span,
    clock_steps,
    failing_at_record,
    given_why,
    resolve_span,
)
from drift.names import check_known
from drift.store.query import History, SnapshotInfo, StoredVersion
from drift.store.window import (
    WindowRecords,
    state_after,
    window_records,
    window_versions,
)
from drift.subjects import DECLARED
from drift.timespec import When, iso, local_time

Pids = Mapping[str, str]

DEFAULT_TOP = 10  # suspects shown unless --top N or --all
# How far back before the baseline a fact's churn is counted: a month says how
# often it changes, and the count costs the same at a year of history.
CHURN_DAYS = 30
DAY_US = 86_400_000_000
# The facts whose every value inside a window analysis reads (a service's runs, the
# health checks); of the others it needs only how many values they took.
WHOLE_VALUES = ("service:", "health:")


@dataclass(frozen=True, kw_only=True)
class InvestigateOptions:
    """What to investigate and show, besides the two snapshots.

    `top` keeps the first N suspects (None: all); `service` keeps the suspects
    that touch that service; `labels` name how the baseline and current WHENs
    were given (`--stable`/`--until`, or diff's two arguments); `command` is
    the command that asked.
    """

    command: str = "since"
    top: int | None = DEFAULT_TOP
    service: str | None = None
    labels: tuple[str, str] = ("--stable", "--until")


def investigate(
    history: History,
    baseline: When | None,
    current: When | None,
    options: InvestigateOptions,
) -> Investigation:
    """Everything `drift since` and `drift diff` show, from `baseline` to `current` (or latest).

    Without `baseline`, it is the end of the most recent stable window.
    """
    span = resolve_span(history, baseline, current, options.labels)
    chosen, first, last = span.chosen, span.baseline, span.current
    before = history.state_at(first.id)
    after = state_after(history, before, first.id, last.id)
    values = Values(history)

    inside = window_versions(history, first.id, last.id, WHOLE_VALUES)
    diffs = changes_between(before, after)
    flapped = flapping(before, after, inside.counts)
    trips = window_round_trips(history, before, flapped, first, last)
    records = window_records(
        history,
        first,
        last,
        _moments(before, after, inside.versions) | trip_moments(trips),
        [chosen.unhealthy_us] if chosen.unhealthy_us is not None else [],
    )
    window = records.snapshots
    scope = split_scope(
        [c for c in diffs if not c.subject.startswith("health:")],
        [first, *window],
        history.configs(),
    )
    runs = service_runs(before, inside.versions)
    failures = find_failures(runs, [first, *window], history.text)
    stories, events = group_changes(
        scope.changes,
        after,
        [first, *window],
        runs=runs,
        failures=failures,
        text=history.text,
        values=inside.versions,
    )
    stories = with_departures(stories, inside.versions)
    stories += round_trip_stories(
        history,
        before,
        trips,
        [first, *window],
        chosen.unhealthy_us,
        (inside.versions, failures),
    )
    every = _ranked(history, span, window, stories, flapped, failures)
    service = options.service
    ranked = every if service is None else [r for r in every if _touches(r, service)]
    shown = ranked if options.top is None else ranked[: options.top]
    spots = blind_spots(first, window, (records.usual_us or 0, records.gaps))
    known = owners([*before.values(), *after.values()])
    if options.service is not None:
        # Another service's holes say nothing of this one; the host's (gaps, commands) may.
        spots = [s for s in spots if not another_services(s.subject, options.service, known)]
    texts = TextOwners([r.story for r in ranked])
    # The processes the two ends' values are in: a value kept across a restart names both.
    pids = (service_pids(before), service_pids(after))
    suspects = [_suspect(r, values, texts, pids) for r in shown]
    marks = history.marks()
    # An unstable mark shows as a mark, not as a failing check.
    unhealthy_us = chosen.unhealthy_us if not chosen.unhealthy_by_mark else None
    failing = failing_at_record(history, first)
    return Investigation(
        command=options.command,
        host=history.host,
        baseline=BaselineRef(
            **_fields(snapshot_ref(first, baseline, chosen.why)),
            source=chosen.source,
            # An unstable mark shows as a mark, not as a failing check.
            unhealthy_at=iso(unhealthy_us) if unhealthy_us else None,
            unhealthy_local=local_time(unhealthy_us) if unhealthy_us else None,
            failing_at_baseline=failing.words() if failing is not None else None,
        ),
        current=snapshot_ref(
            last,
            current,
            given_why(options.labels[1], current) if current is not None else "latest record",
        ),
        trust=_trust(history, chosen, first, records, spots, scope.switches),
        scope=_scope(scope),
        window=Window(snapshots=records.count, with_errors=records.with_errors),
        total_suspects=len(ranked),
        suspects=suspects,
        changes_by_subject=changes_by_subject(suspects),
        timeline=timeline_entries(
            marks,
            first,
            last,
            ranked,
            events,
            inside.versions,
            flapped,
            scope.switches,
            failures,
            trips,
            up_to_now=current is None,
        ),
        unchanged=_unchanged(
            before, after, last, scope.changes, values, _owned(options.service, known)
        ),
        blind_spots=[_blind_spot(s) for s in spots],
        overview=overview(
            [*(v for v in before.values() if v.subject.startswith("health:")), *inside.versions],
            runs,
            failures,
            marks,
            (first.id, first.taken_us),
            last.taken_us,
        ),
        service=service,
        elsewhere=len(every) - len(ranked),
    )


def _ranked(
    history: History,
    span: Span,
    window: list[SnapshotInfo],
    stories: list[Story],
    flapped: dict[tuple[str, str], int],
    failures: Mapping[str, Failure],
) -> list[RankedStory]:
    """The stories ranked, most likely first."""
    chosen = span.chosen
    churn = _churn(history, span.baseline, [(s.root.subject, s.root.key) for s in stories])
    unhealthy = next((s for s in window if s.taken_us == chosen.unhealthy_us), None)
    ranked = rank_stories(
        stories,
        churn,
        unhealthy_at_us=chosen.unhealthy_us,
        unhealthy_by_mark=chosen.unhealthy_by_mark,
        unhealthy_until_us=(
            unhealthy.taken_us + unhealthy.duration_ms * 1000 if unhealthy is not None else None
        ),
        flapped=frozenset(flapped),
        failures=list(failures.values()),
    )
    return ranked


def _moments(before: State, after: State, versions: list[StoredVersion]) -> set[int]:
    """The snapshots where a value analysis reads began or ended: the records it must see."""
    out = {v.until_snapshot_id for v in before.values() if v.until_snapshot_id is not None}
    out |= {v.first_snapshot_id for v in after.values()}
    for v in versions:
        out.add(v.first_snapshot_id)
        if v.until_snapshot_id is not None:
            out.add(v.until_snapshot_id)
    return out


def check_service(history: History, service: str | None, configured: Iterable[str] = ()) -> None:
    """Refuse a --service that no record of this host has (nor `configured`, the services
    its drift.toml names): kept as a filter, it would leave nothing, and read as no change."""
    if service is not None:
        known = history.service_names() | set(configured)
        check_known("service", service, known, f"for host {history.host}")


def _touches(ranked: RankedStory, service: str) -> bool:
    """Whether a suspect involves a service: its process, or a script or unit it runs."""
    story = ranked.story
    if service in story.services:
        return True
    for change in story.changes:
        if change.subject == f"service:{service}":
            return True
        latest = change.after or change.before
        if latest is not None and latest.provenance.get("service") == service:
            return True
    return False


def _suspect(
    ranked: RankedStory, values: Values, texts: TextOwners, pids: tuple[Pids, Pids]
) -> Suspect:
    story = ranked.story
    # An undone change's value was in the process of its time, not in the current one.
    held = pids if story.round_trip is None else (pids[0], {})
    return Suspect(
        rank=ranked.rank,
        score=round(ranked.score, 3),
        title=story.title,
        status=story.status,
        label=story.label,
        category=story.category,
        services=list(story.services),
        reasons=ranked.reasons,
        signals=[
            Signal(
                name=s.name,
                value=round(s.value, 3),
                weight=round(s.weight, 3),
                contribution=round(s.contribution, 3),
                reason=s.reason,
            )
            for s in ranked.signals
        ],
        changes=[
            SuspectChange(
                **_change_fields(
                    c,
                    values,
                    held,
                    texts.diff(story, c, values),
                    # the root's change began with the first new value a process held
                    story.began_us if c is story.root else None,
                ),
                role="root" if c is story.root else "evidence",
            )
            for c in story.changes
        ],
        restarts=[_restart(r) for r in story.restarts],
        failure=service_failure(story.failure) if story.failure is not None else None,
        undone_at=iso(story.round_trip.back_us) if story.round_trip is not None else None,
        undone_local=local_time(story.round_trip.back_us) if story.round_trip is not None else None,
    )


def _change_fields(
    change: Change,
    values: Values,
    pids: tuple[Pids, Pids],
    diff: ValueDiff | None = None,
    began_us: int | None = None,
) -> dict[str, Any]:
    """A change as reports show it; `pids` are the services' processes at the baseline and
    the current record, where its before and after values are; `diff` its diff when it is
    not the change's whole diff; `began_us` when it began, if not when it was recorded."""
    latest = change.after or change.before
    assert latest is not None
    at = change.changed_us if began_us is None else began_us
    return {
        "subject": change.subject,
        "key": change.key,
        "kind": change.kind,
        "category": category(change.subject, change.key),
        "before": values.show(change.before),
        "after": values.show(change.after),
        "secret": latest.secret,
        "changed_at": iso(at),
        "changed_local": local_time(at),
        "where": where_read(latest, pids[1] if change.after is not None else pids[0]),
        "provenance": latest.provenance,
        "diff": diff if diff is not None else values.diff(change),
    }


def _restart(restart: Restart) -> ServiceRestart:
    return ServiceRestart(
        service=restart.service,
        before_pid=restart.before_pid,
        after_pid=restart.after_pid,
        at=iso(restart.at_us),
        at_local=local_time(restart.at_us),
        count=restart.count,
        counted_by=restart.counted_by,
        first=iso(restart.times[0]),
        first_local=local_time(restart.times[0]),
    )


def service_failure(failure: Failure) -> ServiceFailure:
    """A failing service as reports show it."""
    return ServiceFailure(
        service=failure.service,
        summary=failure.summary(),
        state=failure.state,
        since=iso(failure.since_us),
        since_local=local_time(failure.since_us),
        restarts=failure.restarts,
        exit=failure.exit,
        result=failure.result,
        journal=list(failure.journal),
    )


def changes_by_subject(suspects: list[Suspect]) -> list[SubjectChanges]:
    """Every change of `suspects`, by subject (sorted), each with its suspect's rank."""
    by_subject: dict[str, list[SubjectChange]] = {}
    for suspect in suspects:
        for change in suspect.changes:
            by_subject.setdefault(change.subject, []).append(
                SubjectChange(**_fields(change), suspect_rank=suspect.rank)
            )
    return [
        SubjectChanges(subject=subject, changes=changes)
        for subject, changes in sorted(by_subject.items())
    ]


def _churn(history: History, baseline: SnapshotInfo, idents: list[tuple[str, str]]) -> ChurnInfo:
    """How often the stories' facts changed before the baseline: over the records of the
    CHURN_DAYS before it when the history reaches further back, else over all of them."""
    start = history.first_taken_from(baseline.taken_us - CHURN_DAYS * DAY_US)
    if start is None or start.id > baseline.id or start.id == history.first().id:
        return ChurnInfo(
            history.version_counts(baseline.id, idents), history.count_snapshots_upto(baseline.id)
        )
    return ChurnInfo(
        history.version_counts(baseline.id, idents, start.id),
        history.count_snapshots_upto(baseline.id, start.id),
        CHURN_DAYS,
    )


def _fields(part: SnapshotRef | SuspectChange) -> dict[str, Any]:
    """A part's fields, one level deep, to build the larger part that extends it."""
    return {f.name: getattr(part, f.name) for f in fields(part)}


def _owned(service: str | None, known: dict[str, str]) -> Callable[[str], bool]:
    """Whether a subject is in the report's scope: every one, or only `service`'s."""
    if service is None:
        return lambda _subject: True
    return lambda subject: owned_by(subject, service, known)


def _unchanged(
    before: State,
    after: State,
    current: SnapshotInfo,
    changes: list[Change],
    values: Values,
    shown: Callable[[str], bool],
) -> Unchanged:
    """The facts verified unchanged (of the subjects `shown` keeps), and the subjects whose
    every fact is."""
    failing = failing_at(current, after)
    unchanged = [v for v in unchanged_between(before, after, failing) if shown(v.subject)]
    per_kind = Counter(category(v.subject, v.key) for v in unchanged)
    # Subjects whose every fact is verified unchanged: "the kernel file is byte-identical".
    changed_subjects = {c.subject for c in changes} | {s for s, _k in failing}
    subjects = sorted({v.subject for v in unchanged} - changed_subjects)
    return Unchanged(
        count=len(unchanged),
        by_kind=dict(sorted(per_kind.items())),
        subjects=subjects,
        whole_subjects=[s for s in subjects if s.startswith(("file:", "repo:", "script:"))],
        facts=[
            UnchangedFact(
                subject=v.subject, key=v.key, value=values.show(v), since=iso(v.first_taken_us)
            )
            for v in unchanged
        ],
    )


def _blind_spot(spot: BlindSpot) -> BlindSpotEntry:
    return BlindSpotEntry(
        kind=spot.kind,
        subject=spot.subject,
        key=spot.key,
        message=spot.message,
        first_seen=iso(spot.first_us),
        last_seen=iso(spot.last_us),
        first_local=local_time(spot.first_us),
        last_local=local_time(spot.last_us),
        count=spot.count,
        current=spot.current,
        keeps_value=DECLARED.holds_values(spot.subject),
    )


def _scope(split: ScopeSplit) -> ScopeView:
    """The config changes of the window, and the facts that only left or entered its scope."""
    return ScopeView(
        changes=[
            ScopeSwitch(
                snapshot=s.snapshot_id,
                at=iso(s.taken_us),
                local=local_time(s.taken_us),
                before_path=s.before_path,
                after_path=s.after_path,
                sections=list(s.sections),
                text=s.text,
                detail=s.detail,
            )
            for s in split.switches
        ],
        untracked_facts=len(split.untracked),
        tracked_facts=len(split.tracked),
        untracked=_scope_subjects(split.untracked, "before"),
        tracked=_scope_subjects(split.tracked, "after"),
    )


def _scope_subjects(changes: list[Change], version: str) -> list[ScopeSubject]:
    """The subjects of `changes`, each with its fact count and the first snapshot it left
    (`version` "before") or entered ("after") the scope."""
    subjects: dict[str, list[StoredVersion]] = {}
    for c in changes:
        v = c.before if version == "before" else c.after
        assert v is not None
        subjects.setdefault(c.subject, []).append(v)
    out = []
    for subject, versions in sorted(subjects.items()):
        at = min(
            (v.until_snapshot_id or 0, v.until_taken_us or 0)
            if version == "before"
            else (v.first_snapshot_id, v.first_taken_us)
            for v in versions
        )
        out.append(
            ScopeSubject(
                subject=subject, facts=len(versions), since=at[0], since_local=local_time(at[1])
            )
        )
    return out


def _trust(
    history: History,
    chosen: Baseline,
    baseline: SnapshotInfo,
    records: WindowRecords,
    spots: list[BlindSpot],
    switches: list[ConfigSwitch] | None = None,
) -> Trust:
    """How far to trust the baseline: records in its stable window, gaps, collection errors,
    and whether the clock went back between the baseline and the current record."""
    in_window = None
    if chosen.window is not None:
        in_window = history.count_snapshots_in(*chosen.window)
    gaps = sum(1 for s in spots if s.kind == "gap")
    errors = sum(1 for s in spots if s.kind == "error")
    parts = []
    if in_window is not None:
        parts.append(f"{in_window:,} record{'' if in_window == 1 else 's'} in the stable window")
    parts.append(f"{records.count:,} after the baseline")
    parts.append(f"{gaps:,} gap{'' if gaps == 1 else 's'} in recording" if gaps else "no gaps")
    parts.append(
        f"{errors:,} kind{'' if errors == 1 else 's'} of collection error"
        if errors
        else "no collection errors"
    )
    if baseline.n_errors:
        noun = "error" if baseline.n_errors == 1 else "errors"
        parts.append(f"{baseline.n_errors:,} collection {noun} at the baseline itself")
    warnings = [chosen.caveat] if chosen.caveat else []
    steps = clock_steps([baseline, *records.snapshots])
    if steps:
        parts.append(f"clock went back {len(steps)} time{'' if len(steps) == 1 else 's'}")
        for before, after in steps:
            back = round((before.taken_us - after.taken_us) / 1_000_000)
            warnings.append(
                f"the clock went back: snapshot #{after.id} was taken at "
                f"{local_time(after.taken_us)}, {_duration(back)} before #{before.id} "
                f"({local_time(before.taken_us)}); times in this window are out of order, so "
                "name snapshots by number (#N)"
            )
    if switches:
        parts.append("config changed at " + ", ".join(f"#{s.snapshot_id}" for s in switches))
    for spot in spots:
        # The key's problems weigh on every secret in the report, not on one fact.
        if spot.kind == "error" and spot.subject.startswith("secret-key:"):
            key_path = spot.subject.removeprefix("secret-key:")
            seen = local_time(spot.first_us)
            if spot.count > 1:
                seen += f" to {local_time(spot.last_us)}"
            warnings.append(f"secret key {key_path} {spot.message} (seen {seen})")
    return Trust(
        window_snapshots=in_window,
        after_baseline=records.count,
        gaps=gaps,
        errors=errors,
        baseline_errors=baseline.n_errors,
        clock_steps=len(steps),
        warnings=warnings,
        summary="; ".join(parts),
    )


def _duration(seconds: int) -> str:
    """`1h 05m`, `4m 10s`, `12s`: how far the clock went back."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"
