"""Restarts: a service's process replaced inside the window, how many times, and co-restarts.

A restart is not a suspect: it is context attached to the stories it
explains, and an event on the timeline. A service's restarts are counted over
the whole window, not told from its two ends alone: every start a record saw
(its ``started_at``, or systemd's ``unit:exec_main_start`` of a run that
failed before a record could see its process), and for a systemd unit the
automatic restarts systemd itself counted (NRestarts), which may have come
and gone between two records. Services that started within CO_RESTART_US of
each other restarted together: a co-restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from drift.analysis.diff import Change, State
from drift.analysis.kinds import UNIT_RUNTIME_KEYS, service_name
from drift.analysis.timing import Records, Span, parse_time_us, start_span
from drift.analysis.unit_history import ServiceRuns

CO_RESTART_US = 5 * 1_000_000
"""Starts of different services within this of the first one are one co-restart.

Services restarted together by one command (``systemctl restart a b``, a
deploy script) start within milliseconds of each other, or a few seconds when
a script restarts them one after another. Start times are exact to the
microsecond (systemd) or to the 10 ms clock tick, and those recorded by older
drift up to a second early. Five seconds covers all of that and stays far
below the minute between records, so services restarted in different minutes,
or one restarted ten times, are never tied together by chance.
"""

SAME_START_US = 1_000_000
"""Two start times read by one record closer than this are one start, read twice.

A record reads a unit's start twice (``started_at`` and systemd's
``unit:exec_main_start``), and older records read ``started_at`` up to a
second early (see `drift.collectors.process.SAME_PROCESS`).
"""

# What the service manager sets afresh at every start: they change with each
# restart, so they belong to the restart, never to a suspect of their own.
PER_START_ENV = frozenset(
    {
        "INVOCATION_ID",
        "JOURNAL_STREAM",
        "SYSTEMD_EXEC_PID",
        "MANAGERPID",
        "LISTEN_PID",
        "TRIGGER_TIMER_REALTIME_USEC",
        "TRIGGER_TIMER_MONOTONIC_USEC",
    }
)
_RESTART_KEYS = ("pid", "started_at", "ppid")

CountedBy = Literal["records", "systemd"]


@dataclass(frozen=True)
class Restart:
    """A service's process replaced (or started) inside the window.

    `at_us` is the newest process's start time when its ``started_at`` (or
    systemd's start of its last run) parses, else when it was first recorded.
    `changes` are the facts the restart accounts for: pid, started_at, ppid,
    per-start variables and systemd's view of the runs. `starts` are every
    start seen in the window, oldest first (empty when only `at_us` is
    known); `count` how many restarts the window holds at least, counted by
    the records or by systemd's own counter, whichever saw more.
    """

    service: str
    before_pid: str | None
    after_pid: str | None
    at_us: int
    changes: tuple[Change, ...]
    # When it started, as precisely as known (None: `at_us`, to a clock tick).
    started: Span | None = None
    starts: tuple[int, ...] = ()
    count: int = 1
    counted_by: CountedBy = "records"

    @property
    def times(self) -> tuple[int, ...]:
        """Every start of the window, oldest first."""
        return self.starts or (self.at_us,)


@dataclass(frozen=True)
class RestartEvent:
    """The services that started at one moment: one, or several together (a co-restart)."""

    restarts: tuple[Restart, ...]
    at_us: int

    @property
    def services(self) -> tuple[str, ...]:
        return tuple(r.service for r in self.restarts)


def restart_of(
    subject: str, changes: Mapping[str, Change], after: State, records: Records
) -> Restart | None:
    """The restart a ``service:NAME`` subject's changes show, or None if it is the same process.

    A new pid or start time, or a new systemd run (InvocationID), is a
    restart. `changes` are the subject's changes not yet claimed, by key; the
    restart's own `changes` are those of them it accounts for.
    """
    pid = changes.get("pid")
    started = changes.get("started_at")
    invocation = changes.get("unit:invocation_id")
    moved = [c for c in (pid, started) if c is not None and c.kind != "removed"]
    # A new run of the unit, whose process may have failed before any record saw it.
    if invocation is not None and invocation.kind == "modified":
        moved.append(invocation)
    if not moved:
        return None
    absorbed = [changes.get(k) for k in _RESTART_KEYS]
    absorbed += [changes.get(f"env:{name}") for name in sorted(PER_START_ENV)]
    taken = [c for c in absorbed if c is not None and c.kind != "removed"]
    # systemd's words on the runs are the restarts' own, whatever they did.
    taken += [changes[k] for k in sorted(UNIT_RUNTIME_KEYS) if k in changes]
    at_us, span = None, None
    for source in (started, changes.get("unit:exec_main_start")):
        if source is not None and source.after is not None:
            at_us, span = parse_time_us(source.after.value), start_span(source.after)
            if at_us is not None and span is not None:
                break
    if at_us is None or span is None:
        # No start time: it started by the record that first saw it.
        first = min(moved, key=lambda c: c.changed_us)
        at_us, span = first.changed_us, records.span(first)
    now = after.get((subject, "pid"))
    before_pid = pid.before.value if pid is not None and pid.before is not None else None
    if pid is None and now is not None:
        before_pid = now.value  # a new process under the same pid (a restarted container)
    return Restart(
        service=service_name(subject) or subject,
        before_pid=before_pid,
        after_pid=None if now is None else now.value,
        at_us=at_us,
        changes=tuple(taken),
        started=span,
    )


def counted(restart: Restart, runs: ServiceRuns | None, baseline_id: int) -> Restart:
    """`restart` with every start of its window and how many restarts it holds."""
    if runs is None:
        return restart
    starts = window_starts(runs, baseline_id)
    if restart.at_us not in starts and not any(
        abs(restart.at_us - s) < SAME_START_US for s in starts
    ):
        starts = sorted([*starts, restart.at_us])
    by_systemd = systemd_restarts(runs)
    count = max(len(starts), 1)
    counted_by: CountedBy = "records"
    if by_systemd is not None and by_systemd >= count:
        count, counted_by = by_systemd, "systemd"
    return Restart(
        service=restart.service,
        before_pid=restart.before_pid,
        after_pid=restart.after_pid,
        at_us=restart.at_us,
        changes=restart.changes,
        started=restart.started,
        starts=tuple(starts),
        count=count,
        counted_by=counted_by,
    )


def window_starts(runs: ServiceRuns, baseline_id: int) -> list[int]:
    """Every process start the records saw after the baseline, oldest first.

    Two readings of one start by one record (``started_at`` and systemd's
    start of the run) are one start; a start no later than the baseline's
    process is that process read again (a fact drift began to record later),
    unless the record that read it also saw a pid the baseline did not have.
    """
    before = [
        moment
        for key in ("started_at", "unit:exec_main_start")
        for v in runs.of(key)
        if v.first_snapshot_id <= baseline_id and (moment := parse_time_us(v.value)) is not None
    ]
    floor = max(before) + SAME_START_US if before else None
    # A record that saw a pid the baseline never had saw a new process, however soon
    # after the baseline's it started: the floor only guards readings of one process.
    baseline_pids = {v.value for v in runs.of("pid") if v.first_snapshot_id <= baseline_id}
    new_process = {
        v.first_snapshot_id for v in runs.inside("pid", baseline_id) if v.value not in baseline_pids
    }
    by_record: dict[int, list[int]] = {}
    for key in ("unit:exec_main_start", "started_at"):
        for v in runs.inside(key, baseline_id):
            moment = parse_time_us(v.value)
            if moment is None:
                continue
            if floor is not None and moment < floor and v.first_snapshot_id not in new_process:
                continue
            seen = by_record.setdefault(v.first_snapshot_id, [])
            if not any(abs(moment - other) < SAME_START_US for other in seen):
                seen.append(moment)
    return sorted({moment for moments in by_record.values() for moment in moments})


def systemd_restarts(runs: ServiceRuns) -> int | None:
    """The automatic restarts systemd counted over the window (NRestarts); None: not a unit.

    NRestarts grows by one at each automatic restart and starts again from 0
    when someone starts the unit by hand: a value lower than the one before is
    a new count, all of whose restarts are in the window.
    """
    values = [v.value for v in runs.of("unit:n_restarts")]
    numbers = [int(v) for v in values if v is not None and v.isdigit()]
    if not numbers:
        return None
    total = 0
    for before, now in zip(numbers, numbers[1:], strict=False):
        total += now - before if now >= before else now
    return total


def co_restarts(restarts: Iterable[Restart]) -> list[RestartEvent]:
    """Moments services started, in time order: starts within CO_RESTART_US of the first join it.

    A service restarted several times is in one event per start; an event
    names each service once.
    """
    starts = sorted(
        ((moment, r.service, r) for r in restarts for moment in r.times),
        key=lambda item: (item[0], item[1]),
    )
    events: list[tuple[int, list[Restart]]] = []
    for moment, _service, restart in starts:
        if events and moment - events[-1][0] <= CO_RESTART_US:
            if all(r is not restart for r in events[-1][1]):
                events[-1][1].append(restart)
        else:
            events.append((moment, [restart]))
    return [RestartEvent(tuple(group), at) for at, group in events]
