"""Crash loops: a systemd service whose runs fail, told from what systemd said at each record.

systemd says a run failed only between runs: in ``auto-restart`` (about to
start it again) or ``failed`` (it gave up), its Result is not ``success``
and ``unit:exec_main_status`` says how the main process ended; the next
start resets them. So a record that catches the unit between runs is the
evidence, and ``unit:n_restarts`` (NRestarts) counts the restarts the
records did not catch. A service seen failing after the baseline is a
`Failure`: since when (the start of the first failing run seen), how many
restarts, how it ended (``exit 1``, ``killed by SIGSEGV``), whether it is
still failing, and the unit's journal lines of the failing runs.
Pure: versions and records in; the caller reads blobs (`text`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from drift.analysis.timing import Span, parse_time_us
from drift.analysis.titles import NOT_APPLIED
from drift.analysis.unit_history import ServiceRuns
from drift.store.query import SnapshotInfo, StoredVersion
from drift.timespec import clock, clock_span

JOURNAL_RUNS = 3  # failing runs whose lines are kept: the first seen and the latest
JOURNAL_LINES = 24  # lines kept in all

State = Literal["failing", "gave up", "running again", "restarted", "stopped"]


@dataclass(frozen=True)
class Failure:
    """A service whose runs failed inside the window, as systemd told it record by record.

    `since_us` is the start of the first failing run seen (or the record that
    saw it, when systemd gave no start); `failing_starts` the starts of the
    failing runs seen; `restarts` the automatic restarts systemd counted
    while it failed (None: it gave no count); `exit` how the main process
    ended the last time (``exit 1``, ``killed by SIGSEGV``, "" unknown);
    `state` what it does now, `running_since_us` / `running_pid` the process
    that runs again, if any; `journal` the unit's lines of failing runs.
    """

    service: str
    since_us: int
    last_us: int
    failing_starts: tuple[int, ...]
    restarts: int | None
    exit: str
    result: str
    state: State
    running_since_us: int | None
    running_pid: str | None
    journal: tuple[str, ...]
    before_baseline: bool = False

    @property
    def loop(self) -> bool:
        """Restarted after failing (a crash loop), not one failed start."""
        return bool(self.restarts) or len(self.failing_starts) > 1

    @property
    def ongoing(self) -> bool:
        """Still failing at the current record."""
        return self.state in ("failing", "gave up")

    def details(self) -> str:
        """``4 restarts, exit 1``: what the count and the exit say, in words."""
        parts = []
        if self.restarts:
            parts.append(f"{self.restarts} restart{'' if self.restarts == 1 else 's'}")
        elif len(self.failing_starts) > 1:
            parts.append(f"{len(self.failing_starts)} failed runs seen")
        parts.append(self.exit or f"result {self.result}")
        return ", ".join(parts)

    def summary(self) -> str:
        """``crash-looping since 12:01:05 (4 restarts, exit 1)``, and what it does now."""
        since = "before the baseline" if self.before_baseline else clock(self.since_us)
        if not self.loop:
            at = since if self.before_baseline else f"at {since}"
            head = f"failed {at} ({self.details()})"
        elif self.state == "failing":
            head = f"crash-looping since {since} ({self.details()})"
        else:
            since, last = (since, clock(self.last_us))
            if not self.before_baseline:
                since, last = clock_span(self.since_us, self.last_us)
            head = f"crash-looped from {since} to {last} ({self.details()})"
        return f"{head}{self._now()}"

    def _now(self) -> str:
        if self.state == "gave up":
            # SubState failed: after a loop, systemd stopped restarting it (its start limit).
            return "; systemd stopped restarting it" if self.loop else "; not restarted"
        pid = f" (pid {self.running_pid})" if self.running_pid else ""
        since = clock(self.running_since_us) if self.running_since_us is not None else ""
        if self.state == "running again":
            return f"; running again since {since}{pid}"
        if self.state == "restarted":
            return (
                f"; restarted at {since}{pid}, first seen by the latest record: it may fail again"
            )
        if self.state == "stopped":
            return "; not running now"
        return ""


def find_failures(
    runs: Mapping[str, ServiceRuns],
    records: Sequence[SnapshotInfo],
    text: Callable[[StoredVersion], str] = lambda v: v.value or "",
) -> dict[str, Failure]:
    """The services seen failing in the window; `records` are the baseline, then the window."""
    if not records:
        return {}
    out = {}
    for name, service in sorted(runs.items()):
        failure = _failure(service, list(records), text)
        if failure is not None:
            out[name] = failure
    return out


def _failing(runs: ServiceRuns, snapshot_id: int) -> bool:
    result = runs.at("unit:result", snapshot_id)
    return result is not None and result.value not in (None, "", "success")


def _failure(
    runs: ServiceRuns, records: list[SnapshotInfo], text: Callable[[StoredVersion], str]
) -> Failure | None:
    baseline = records[0]
    # A unit already failing at the baseline failed before it: the baseline's
    # run is the first failing one, and no change of the window came before it.
    failing = [r for r in records if _failing(runs, r.id)]
    if not failing or failing[-1].id == baseline.id:
        return None
    starts = sorted(
        {
            moment
            for r in failing
            if (v := runs.at("unit:exec_main_start", r.id)) is not None
            and (moment := parse_time_us(v.value)) is not None
        }
    )
    first, last = failing[0], failing[-1]
    since = starts[0] if starts else first.taken_us
    before = records[max(records.index(first) - 1, 0)]
    status = runs.at("unit:exec_main_status", last.id)
    result = runs.at("unit:result", last.id)
    state, running_since, pid = _state_now(runs, records, last)
    return Failure(
        service=runs.service,
        since_us=since,
        last_us=starts[-1] if starts else last.taken_us,
        failing_starts=tuple(starts),
        restarts=_restarts(runs, before.id, last.id),
        exit=exit_words(status.value if status is not None else None),
        result=(result.value or "") if result is not None else "",
        state=state,
        running_since_us=running_since,
        running_pid=pid,
        journal=journal_lines(runs, baseline.id, before.taken_us, text),
        before_baseline=first.id == baseline.id,
    )


def _restarts(runs: ServiceRuns, from_id: int, to_id: int) -> int | None:
    """The automatic restarts systemd counted between two records (a reset starts a new count)."""
    values = []
    for version in runs.of("unit:n_restarts"):
        until = version.until_snapshot_id
        if version.first_snapshot_id <= to_id and (until is None or until > from_id):
            if version.value is not None and version.value.isdigit():
                values.append(int(version.value))
    if not values:
        return None
    return sum(now - b if now >= b else now for b, now in zip(values, values[1:], strict=False))


def _state_now(
    runs: ServiceRuns, records: list[SnapshotInfo], last_failing: SnapshotInfo
) -> tuple[State, int | None, str | None]:
    """What the service does at the current record, and its process if it runs again."""
    current = records[-1]
    if current.id == last_failing.id:
        sub = runs.at("unit:sub_state", current.id)
        return ("gave up" if sub is not None and sub.value == "failed" else "failing"), None, None
    running = runs.at("running", current.id)
    if running is None or running.value != "true":
        return "stopped", None, None
    started = runs.at("started_at", current.id)
    pid = runs.at("pid", current.id)
    since = parse_time_us(started.value) if started is not None else None
    # A process that outlived a record interval runs again; one only the latest saw may not.
    survived = started is not None and started.first_snapshot_id < current.id
    return (
        "running again" if survived else "restarted",
        since,
        pid.value if pid is not None else None,
    )


def exit_words(stored: str | None) -> str:
    """``exited 1`` -> ``exit 1``; ``killed SIGSEGV`` -> ``killed by SIGSEGV`` ..."""
    if not stored:
        return ""
    how, _, what = stored.partition(" ")
    if how == "exited":
        return f"exit {what}"
    if how == "killed":
        return f"killed by {what}"
    if how == "dumped":
        return f"killed by {what}, core dumped"
    return stored


def journal_lines(
    runs: ServiceRuns,
    baseline_id: int,
    after_us: int,
    text: Callable[[StoredVersion], str],
) -> tuple[str, ...]:
    """The unit's journal lines of its failing runs: the first one and the latest.

    Each record kept the lines of the unit's last few runs; together they
    hold each line once. Lines from before `after_us` (the last record that
    saw no failure) belong to runs before the failing began. The first
    failing run shows how it began, the latest how it goes now.
    """
    lines: dict[str, str] = {}  # line -> its run (the second word)
    versions = runs.inside("unit:journal", baseline_id)
    # The first and the latest runs are in the first and the latest records' lines.
    for version in versions if len(versions) <= 4 else versions[:2] + versions[-2:]:
        for line in text(version).splitlines():
            words = line.split(" ", 2)
            at = parse_time_us(words[0])
            if len(words) == 3 and at is not None and at >= after_us:
                lines.setdefault(line, words[1])
    # Each line starts with its time; a record's lines of one moment keep their order.
    ordered = sorted(lines, key=lambda line: line.split(" ", 1)[0])
    run_order = list(dict.fromkeys(lines[line] for line in ordered))
    kept_runs = set(run_order[:1] + run_order[1:][-(JOURNAL_RUNS - 1) :])
    kept = [line for line in ordered if lines[line] in kept_runs]
    return tuple(kept[-JOURNAL_LINES:])


def failing_status(
    failure: Failure, change: Span
) -> tuple[Literal["failing", "pending"], str] | None:
    """A change to what a failing service starts with: applied at its failing starts, or not yet.

    None once the service runs again (the usual rules then decide). A failing
    run that started after the change ran with it; when every failing run
    seen started before it, the change waits for the next start.
    """
    if not failure.ongoing:
        return None
    name = failure.service
    told = f"{name} {failure.summary()}"
    order = [Span(s, s).order(change) for s in failure.failing_starts]
    after = [s for s, o in zip(failure.failing_starts, order, strict=True) if o == "after"]
    if after:
        first = clock(min(after))
        if not failure.loop:
            return "failing", f"applied at the start of {name} at {first}: {told}"
        if len(after) == len(order):
            return "failing", f"applied at every start of {name} since {first}: {told}"
        # The first failing starts came about when the change did: in no known order.
        return (
            "failing",
            f"applied at the failing starts of {name} (every one since {first}): {told}",
        )
    if order and all(o == "before" for o in order):
        return "pending", f"{NOT_APPLIED} ({told}, its failing runs started before this change)"
    return (
        "failing",
        f"applied at the failing starts of {name} if they came after the change: {told}",
    )
