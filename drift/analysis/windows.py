"""Stable windows: where the baseline comes from when the user does not give one.

A `stable` mark says the service worked at that moment; an `unstable` mark
says it was broken by then, not that it worked until then. `drift since`
without --stable uses the end of the most recent window: its last evidence of
health (the last passing health check before the first failing one, else the
last stable mark), so every change recorded after it is a suspect, whatever
marks come later.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from drift.errors import DriftError, NoBaselineError, TimeSpecError
from drift.store.query import History, MarkInfo, SnapshotInfo, StoredVersion
from drift.timespec import (
    When,
    clock,
    clock_span,
    describe_when,
    from_us,
    local_zone,
    quote_when,
    to_us,
    typed_shown,
)


@dataclass(frozen=True)
class StableWindow:
    """From a stable mark to the unstable mark that ended it (None while still open)."""

    start: MarkInfo
    last_stable: MarkInfo
    end: MarkInfo | None


def stable_windows(marks: list[MarkInfo]) -> list[StableWindow]:
    """Windows from marks in time order; a stable mark inside an open window extends it."""
    windows: list[StableWindow] = []
    start: MarkInfo | None = None
    last: MarkInfo | None = None
    for mark in sorted(marks, key=lambda m: (m.at_us, m.id)):
        if mark.kind == "stable":
            start = start or mark
            last = mark
        elif mark.kind == "unstable" and start is not None and last is not None:
            windows.append(StableWindow(start, last, mark))
            start = last = None
    if start is not None and last is not None:
        windows.append(StableWindow(start, last, None))
    return windows


@dataclass(frozen=True)
class Baseline:
    """Where `drift since` starts, why, and what the health checks say after it."""

    when: When
    why: str
    source: str  # "given", "marks" or "health"
    window: tuple[int, int] | None  # the stable window it ends (µs), if it spans time
    unhealthy_us: int | None  # the first failing health check after the baseline
    # True when no check failed and `unhealthy_us` is an unstable mark: "bad by then", which
    # says nothing of how long before it broke.
    unhealthy_by_mark: bool = False
    caveat: str | None = None  # what the baseline cannot tell, in words


Health = list[tuple[SnapshotInfo, bool]]


def health_series(snapshots: list[SnapshotInfo], checks: list[StoredVersion]) -> Health:
    """Each snapshot that some health check covers, with True when every check passed.

    `checks` are the versions of the `health:NAME ok` facts: one per pass/fail
    transition. One pass over the snapshots (in id order), each check's
    versions followed with a cursor: a check that flapped every minute for
    the week looked at costs its versions once, not once per snapshot.
    """
    per_check: dict[tuple[str, str], list[StoredVersion]] = {}
    for v in sorted(checks, key=lambda v: v.first_snapshot_id):
        per_check.setdefault((v.subject, v.key), []).append(v)
    cursors = {ident: 0 for ident in per_check}
    series: Health = []
    for snap in sorted(snapshots, key=lambda s: s.id):
        covering = []
        for ident, versions in per_check.items():
            i = cursors[ident]
            while i < len(versions) and _ended(versions[i], snap.id):
                i += 1
            cursors[ident] = i
            if i < len(versions) and versions[i].first_snapshot_id <= snap.id:
                covering.append(versions[i].value)
        if covering:
            series.append((snap, all(value == "true" for value in covering)))
    return series


def _ended(version: StoredVersion, snapshot_id: int) -> bool:
    return version.until_snapshot_id is not None and version.until_snapshot_id <= snapshot_id


def health_windows(
    series: Health,
) -> list[tuple[SnapshotInfo, SnapshotInfo, SnapshotInfo | None]]:
    """Runs of consecutive healthy snapshots: (first, last, the unhealthy one that ended it)."""
    runs: list[tuple[SnapshotInfo, SnapshotInfo, SnapshotInfo | None]] = []
    first: SnapshotInfo | None = None
    last: SnapshotInfo | None = None
    for snap, healthy in series:
        if healthy:
            first = first or snap
            last = snap
        elif first is not None and last is not None:
            runs.append((first, last, snap))
            first = last = None
    if first is not None and last is not None:
        runs.append((first, last, None))
    return runs


def first_failure_after(
    history: History, check_ids: list[int], snapshot_id: int | None
) -> int | None:
    """When the first failing health check after a snapshot was recorded, if any.

    Read from the checks' versions open at the snapshot or begun after it
    (a failing version is failing at every record it covers), so a baseline
    months back finds its first failure without reading every record since.
    """
    if not check_ids or snapshot_id is None:
        return None
    failing = [v for v in history.versions_after(check_ids, snapshot_id) if v.value != "true"]
    if not failing:
        return None
    following = history.snapshot_after(snapshot_id)
    if following is None:
        return None
    # Each failing version's first record after the snapshot, if it covers one.
    covered = [
        max(v.first_snapshot_id, following.id)
        for v in failing
        if v.first_snapshot_id > snapshot_id
        or v.until_snapshot_id is None
        or v.until_snapshot_id > following.id
    ]
    if not covered:
        return None
    first = min(covered)
    return following.taken_us if first == following.id else history.snapshot(first).taken_us


def given_why(label: str, when: When) -> str:
    """How a typed WHEN shows in a header: `given with --stable 12:00, read as yesterday 12:00`.

    `label` is the option (`--stable`) or, for a positional argument, its name
    (`the first WHEN`), so the header says truthfully how the time was given.
    """
    text = typed_shown(when)
    how = f"given with {label} {text}" if label.startswith("-") else f"given as {label}: {text}"
    return f"{how}, {when.reading}" if when.reading else how


def choose_baseline(history: History, stable: When | None, label: str = "--stable") -> Baseline:
    """The baseline for `drift since`: --stable, else the end of the latest stable window.

    Windows come from marks and from health checks (consecutive passing
    records); the later end wins. A stable mark says "good at T" and an
    unstable mark "bad by T2", never "good until T2": a window from marks ends
    at its last evidence of health, the last passing check after the stable
    mark and before the first failing one, else the stable mark itself.
    `label` names how `stable` was given, for the header.
    """
    check_ids = history.fact_ids_with("health:", "ok")
    recent = history.recent_snapshots(HEALTH_LOOKBACK) if check_ids else []
    checks = history.versions_after(check_ids, recent[0].id) if recent else []
    series = health_series(recent, checks)
    if stable is not None:
        why = given_why(label, stable)
        start = history.snapshot_for(stable, label)
        return Baseline(
            stable, why, "given", None, first_failure_after(history, check_ids, start.id)
        )

    candidates: list[Baseline] = []
    closed = [run for run in health_windows(series) if run[2] is not None]
    if closed:
        first, last, failed = closed[-1]
        assert failed is not None
        began, ended = clock_span(first.taken_us, last.taken_us)
        why = (
            f"end of stable window {began}-{ended}, "
            f"from {checks_named(checks, first.id, failed.id)}"
        )
        candidates.append(
            Baseline(
                When(at=from_us(last.taken_us), text=f"#{last.id}"),
                why,
                "health",
                (first.taken_us, last.taken_us),
                failed.taken_us,
            )
        )
    windows = stable_windows(history.marks())
    if windows:
        candidates.append(_from_marks(history, windows[-1], series, check_ids, checks))
    if not candidates:
        raise NoBaselineError(no_baseline_text(series, checks))
    # The later end wins; at the same record, the one that says what it cannot tell (a
    # stable mark the checks contest, whose baseline is that same last passing check).
    return max(candidates, key=lambda b: (b.when.at or from_us(0), b.caveat is not None))


def no_baseline_text(series: Health, checks: list[StoredVersion]) -> str:
    """Why no stable window was found and what to do, by what the health checks said: advice
    to add [[health]] checks only to a history that has none."""
    give = "give --stable WHEN (e.g. --stable 12:00)"
    if not checks or not series:  # none, or none that ran in the records looked at
        return (
            f"no baseline: {give}, record a known-good moment with `drift mark stable`, "
            "or add [[health]] checks to drift.toml"
        )
    named = checks_named(checks, series[0][0].id, series[-1][0].id)
    every = "the one record" if len(series) == 1 else f"all {len(series):,} records"
    if not any(healthy for _snap, healthy in series):
        said = f"{named} failed at {every} they ran in"
        then = "so none of them shows when it last worked"
    elif all(healthy for _snap, healthy in series):
        said = f"{named} passed at {every} they ran in"
        then = "so no failure ended a stable window: if it is broken, they do not see it"
    else:
        are, have = ("are", "have") if named.startswith("health checks") else ("is", "has")
        said = f"{named} {are} passing again and {have} not failed since"
        then = "so no stable window has ended"
    return (
        f"no baseline: {said}, {then}; {give} for when it last worked, or record a "
        "known-good moment with `drift mark stable`"
    )


def checks_named(checks: list[StoredVersion], first_id: int, last_id: int) -> str:
    """`health checks a, b`: the checks that covered a record from `first_id` to `last_id`.

    A check added after the window, or removed from drift.toml before it,
    vouched for none of its records and is not named.
    """
    names = sorted(
        {
            v.subject.split(":", 1)[1]
            for v in checks
            if v.first_snapshot_id <= last_id
            and (v.until_snapshot_id is None or v.until_snapshot_id > first_id)
        }
    )
    return f"health check{'s' if len(names) > 1 else ''} {', '.join(names)}"


@dataclass(frozen=True)
class FailingAt:
    """The health checks failing at the last record at or before a moment, each since when."""

    record: SnapshotInfo
    checks: list[tuple[str, int]]  # (name, failing since µs), by name

    def words(self) -> str:
        """`health check decode was failing (since 22:18:52)`."""
        if len(self.checks) == 1:
            name, since = self.checks[0]
            return f"health check {name} was failing (since {clock(since)})"
        each = ", ".join(f"{name} (since {clock(since)})" for name, since in self.checks)
        return f"health checks {each} were failing"


def failing_at(
    history: History, at_us: int, check_ids: list[int] | None = None
) -> FailingAt | None:
    """What the health checks said at `at_us` when some failed: by the last record at or
    before it (None when none failed there, or nothing was recorded before it).

    A failing version is failing at every record it covers, so its start is
    when that check began failing.
    """
    try:
        record = history.snapshot_for(When(at=from_us(at_us)))
    except DriftError:
        return None
    return failing_at_record(history, record, check_ids)


def failing_at_record(
    history: History, record: SnapshotInfo, check_ids: list[int] | None = None
) -> FailingAt | None:
    """The health checks failing at one record, each since when; None when none failed."""
    if check_ids is None:
        check_ids = history.fact_ids_with("health:", "ok")
    if not check_ids:
        return None
    failing = sorted(
        (v.subject.split(":", 1)[1], v.first_taken_us)
        for v in history.versions_after(check_ids, record.id)
        if v.value != "true" and v.first_snapshot_id <= record.id and not _ended(v, record.id)
    )
    return FailingAt(record, failing) if failing else None


def _from_marks(
    history: History,
    window: StableWindow,
    series: Health,
    check_ids: list[int],
    checks: list[StoredVersion],
) -> Baseline:
    """The baseline of a window from marks: its last evidence of health.

    That is the last passing record after the last stable mark, when a
    failing one follows it before the unstable mark (if any); else the
    stable mark itself. A passing record that no failure follows, or one
    after the unstable mark, says nothing about when it broke: the health
    check did not see what the operator saw.

    A stable mark made at a time the checks say failing is contested: the
    mark alone is no evidence of health against them, so the baseline is
    the last passing record before that failure, and the caveat says how
    to take the mark instead.
    """
    good = window.last_stable
    began, good_at = clock_span(window.start.at_us, good.at_us)
    said = (
        f"stable mark at {clock(good.at_us)}"
        if window.start.id == good.id
        else f"last stable mark at {good_at} (window open since {began})"
    )
    bad_by = window.end.at_us if window.end is not None else None
    passed, failed = _last_pass_before_failure(series, good.at_us, bad_by)
    at = When(at=from_us(good.at_us), text="")
    caveat = None
    contest = failing_at(history, good.at_us, check_ids) if passed is None else None
    if contest is not None:
        return _contested(history, window, said, contest, series, check_ids, checks)
    if failed is not None:
        if passed is not None:
            at = When(at=from_us(passed.taken_us), text=f"#{passed.id}")
            why = (
                f"{said}, healthy until {clock(passed.taken_us)} by "
                f"{checks_named(checks, passed.id, failed.id)}, "
                f"failing from {clock(failed.taken_us)}"
            )
        else:
            failing = [v for v in checks if v.value != "true"]
            why = (
                f"{said}; {checks_named(failing, failed.id, failed.id)} "
                f"failing from {clock(failed.taken_us)}"
            )
    elif bad_by is not None:
        why = f"{said}; unstable mark at {clock(bad_by)} (bad by then)"
        caveat = (
            f"when it broke is not known: between the stable mark at {clock(good.at_us)} and "
            f"the unstable mark at {clock(bad_by)}"
            + (" no health check failed" if check_ids else " nothing recorded its health")
            + ", so every change recorded in between is a suspect; if you know when it last "
            "worked, say so with `drift mark stable --at WHEN` or `drift since --stable WHEN`"
        )
    else:
        why = f"{said}, no unstable mark since"
    start_id = _snapshot_id_at(history, at)
    unhealthy = first_failure_after(history, check_ids, start_id)
    by_mark = False
    if unhealthy is None and bad_by is not None:
        unhealthy, by_mark = bad_by, True
    span = (window.start.at_us, to_us(at.at)) if at.at is not None else None
    return Baseline(at, why, "marks", span, unhealthy, unhealthy_by_mark=by_mark, caveat=caveat)


def _contested(
    history: History,
    window: StableWindow,
    said: str,
    contest: FailingAt,
    series: Health,
    check_ids: list[int],
    checks: list[StoredVersion],
) -> Baseline:
    """The baseline when the last stable mark was made while a health check was failing:
    the last passing record before that failure, else (none passed) the mark, and why."""
    good = window.last_stable
    exact = "seconds" if good.at_us % 1_000_000 == 0 else "microseconds"
    mark_at = from_us(good.at_us).astimezone(local_zone()).isoformat(timespec=exact)
    made = f"the stable mark at {clock(good.at_us)} was made while {contest.words()}"
    before = [
        r for r in health_windows(series) if r[2] is not None and r[2].id <= contest.record.id
    ]
    if not before:
        at = When(at=from_us(good.at_us), text="")
        caveat = (
            f"{made}, and no health check passed before it: the mark is the baseline, "
            "against what the checks say"
        )
        unhealthy = first_failure_after(history, check_ids, _snapshot_id_at(history, at))
        span = (window.start.at_us, good.at_us)
        why = f"{said}, made while {contest.words()}"
        return Baseline(at, why, "marks", span, unhealthy, caveat=caveat)
    first, last, failed = before[-1]
    assert failed is not None
    why = (
        f"{said}, contested by the health checks; healthy until {clock(last.taken_us)} by "
        f"{checks_named(checks, first.id, failed.id)}, failing from {clock(failed.taken_us)}"
    )
    caveat = (
        f"{made}; the baseline is the last passing check; "
        f"`drift since --stable {mark_at}` takes the mark instead"
    )
    return Baseline(
        When(at=from_us(last.taken_us), text=f"#{last.id}"),
        why,
        "marks",
        (first.taken_us, last.taken_us),
        failed.taken_us,
        caveat=caveat,
    )


def _last_pass_before_failure(
    series: Health, good_us: int, bad_by_us: int | None
) -> tuple[SnapshotInfo | None, SnapshotInfo | None]:
    """After a stable mark: the last passing record before the first failing one, and that one.

    (None, None) when no record fails after the mark, or none before the
    unstable mark at `bad_by_us`.
    """
    passed: SnapshotInfo | None = None
    for snap, healthy in series:
        if snap.taken_us < good_us:
            continue
        if bad_by_us is not None and snap.taken_us > bad_by_us:
            break
        if not healthy:
            return passed, snap
        passed = snap
    return None, None


HEALTH_LOOKBACK = 7 * 24 * 60  # a week of records at one a minute


@dataclass(frozen=True)
class Span:
    """The two snapshots a report compares, and where the baseline came from."""

    chosen: Baseline
    baseline: SnapshotInfo
    current: SnapshotInfo


def resolve_span(
    history: History,
    stable: When | None,
    until: When | None,
    labels: tuple[str, str] = ("--stable", "--until"),
) -> Span:
    """The baseline and current snapshots for `stable` .. `until` (default: the latest record).

    Refuses, with a TimeSpecError that says why, a span that would compare a
    snapshot with nothing after it: `until` before `stable`, or a baseline
    later than every record up to `until` (a time in the future, or after
    recording stopped), which would otherwise read as "no change", a false
    all-clear. `labels` name the two WHENs as the user gave them.
    """
    if stable is not None and until is not None and stable.at and until.at:
        if until.at < stable.at:
            raise TimeSpecError(
                f"{labels[1]} {quote_when(until)} is before {labels[0]} {quote_when(stable)}"
            )
    chosen = choose_baseline(history, stable, labels[0])
    baseline = history.snapshot_for(chosen.when)
    current = history.snapshot_for(until, labels[1]) if until is not None else history.latest()
    asked = f"{labels[0]} {quote_when(stable)}" if stable else f"the baseline ({chosen.why})"
    if current.id < baseline.id:
        assert until is not None  # the latest record is never before a recorded baseline
        raise TimeSpecError(
            f"{labels[1]} {quote_when(until)} is snapshot #{current.id}, before {asked}, "
            f"snapshot #{baseline.id}"
        )
    at = chosen.when.at
    if baseline.id == current.id and at is not None and to_us(at) > current.taken_us:
        last = f"snapshot #{current.id}, {describe_when(When(at=current.taken_at))}"
        if at > datetime.now(UTC):
            raise TimeSpecError(f"{asked} is in the future; the latest record is {last}")
        if until is not None:
            raise TimeSpecError(
                f"nothing was recorded between {asked} and {labels[1]} {quote_when(until)}: "
                f"the last record before both is {last}"
            )
        raise TimeSpecError(
            f"{asked} is after the latest record ({last}): nothing was recorded after it "
            "to compare with"
        )
    if chosen.unhealthy_us is not None and chosen.unhealthy_us > current.taken_us:
        # A failure after the window is not this window's evidence; leaving it out keeps a
        # report of #5..#6 the same whenever it is made (its Regenerate command).
        chosen = replace(chosen, unhealthy_us=None)
    return Span(chosen, baseline, current)


def clock_steps(snapshots: list[SnapshotInfo]) -> list[tuple[SnapshotInfo, SnapshotInfo]]:
    """Consecutive snapshots (in id order) where the later was taken at an earlier time.

    Snapshot ids only grow; taken times go back when the clock is stepped
    (NTP, a VM restored from a snapshot), and then a time in this stretch can
    name the wrong snapshot.
    """
    pairs = zip(snapshots, snapshots[1:], strict=False)
    return [(a, b) for a, b in pairs if b.taken_us < a.taken_us]


def _snapshot_id_at(history: History, at: When) -> int | None:
    try:
        return history.snapshot_for(at).id
    except DriftError:
        return None
