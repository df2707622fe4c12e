"""Restarts: a service's process replaced between the baseline and now, and co-restarts.

A restart is not a suspect: it is context attached to the stories it
explains, and an event on the timeline. Several services restarted within
ten minutes of each other are one co-restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from drift.analysis.diff import Change, State
from drift.analysis.kinds import service_name
from drift.analysis.timing import Records, Span, parse_time_us, start_span

CO_RESTART_US = 10 * 60 * 1_000_000
"""Restarts whose start times lie within this of the first one are one co-restart."""

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


@dataclass(frozen=True)
class Restart:
    """A service's process replaced (or started) between the baseline and now.

    `at_us` is the new process's start time when its ``started_at`` parses,
    else when the new pid was first recorded. `changes` are the facts the
    restart accounts for: pid, started_at, ppid and per-start variables.
    """

    service: str
    before_pid: str | None
    after_pid: str | None
    at_us: int
    changes: tuple[Change, ...]
    # When it started, as precisely as known (None: `at_us`, to a clock tick).
    started: Span | None = None


@dataclass(frozen=True)
class RestartEvent:
    """One restart, or several services restarted together (a co-restart)."""

    restarts: tuple[Restart, ...]
    at_us: int

    @property
    def services(self) -> tuple[str, ...]:
        return tuple(r.service for r in self.restarts)


def restart_of(
    subject: str, changes: Mapping[str, Change], after: State, records: Records
) -> Restart | None:
    """The restart a ``service:NAME`` subject's changes show: pid or started_at modified, or added.

    `changes` are the subject's changes not yet claimed, by key; the restart's
    own `changes` are those of them it accounts for. None if the process is
    the same one (or has gone).
    """
    pid = changes.get("pid")
    started = changes.get("started_at")
    moved = [c for c in (pid, started) if c is not None and c.kind != "removed"]
    if not moved:
        return None
    absorbed = [changes.get(k) for k in _RESTART_KEYS]
    absorbed += [changes.get(f"env:{name}") for name in sorted(PER_START_ENV)]
    taken = tuple(c for c in absorbed if c is not None and c.kind != "removed")
    at_us = None
    span = start_span(started.after) if started is not None else None
    if started is not None and started.after is not None:
        at_us = parse_time_us(started.after.value)
    if at_us is None or span is None:
        # No start time: it started by the record that first saw it.
        first = min(moved, key=lambda c: c.changed_us)
        at_us, span = first.changed_us, records.span(first)
    now = after.get((subject, "pid"))
    return Restart(
        service=service_name(subject) or subject,
        before_pid=pid.before.value if pid is not None and pid.before is not None else None,
        after_pid=None if now is None else now.value,
        at_us=at_us,
        changes=taken,
        started=span,
    )


def co_restarts(restarts: Iterable[Restart]) -> list[RestartEvent]:
    """Restarts in time order, those within CO_RESTART_US of an event's first joined to it."""
    events: list[list[Restart]] = []
    for restart in sorted(restarts, key=lambda r: (r.at_us, r.service)):
        if events and restart.at_us - events[-1][0].at_us <= CO_RESTART_US:
            events[-1].append(restart)
        else:
            events.append([restart])
    return [RestartEvent(tuple(group), group[0].at_us) for group in events]
