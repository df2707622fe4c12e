"""Group changes linked by provenance into stories, and restarts into events.

A story is one suspect: a root cause (the line someone edited) and the
evidence that follows from it (the same value in the live process, the
script's diff). A restart is not a suspect: it is context attached to the
stories it explains, and an event on the timeline; several services
restarted within ten minutes of each other are one co-restart.

Each story has a status:

- ``live``: the new value is in a running process (checked against the
  process's own environment or command line; for script text and unit
  settings without a live counterpart, the process was started since, or
  at about the same time, which the label then says).
- ``pending``: changed at its source (serve script, systemd unit) but not in
  the running process yet: "not applied yet: takes effect on next restart".
- ``unsourced``: changed in a running process while no changed source in the
  window explains it; the label says where it could have come from. The
  variables nothing recorded sets that changed at one start (a restart from
  another shell) are one such story.
- ``on-disk``: a file or repository changed; drift cannot tell whether a
  running process has loaded it.
- ``changed``: anything else (command output, health, a service that
  stopped, volatile ids).

A start is called before or after a change only when their times say so
(see `drift.analysis.timing`); otherwise "at about the same time".

Everything here is pure: changes, the current state and the records' times
in, stories out.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from drift.analysis.diff import Change, State
from drift.analysis.origins import (
    Attribution,
    Spot,
    attribute,
    attribute_together,
    branches_from_env,
    possibilities,
)
from drift.analysis.timing import Order, Records, Span, start_span
from drift.display import truncated
from drift.secrets.markers import shown_secret
from drift.shell.patterns import feasible
from drift.store.query import SnapshotInfo, StoredVersion
from drift.timespec import clock, parse_stored_time, to_us

Status = Literal["live", "pending", "unsourced", "on-disk", "changed"]
STATUSES: tuple[Status, ...] = ("live", "pending", "unsourced", "on-disk", "changed")

NOT_APPLIED = "not applied yet: takes effect on next restart"
SOURCE_UNKNOWN = "source unknown"
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
_COMMAND_LINE_KEYS = ("exe", "argv", "cwd", "user")

# Order of kinds when scores tie, and for listing: config that shapes a
# process first, volatile ids last.
CATEGORY_ORDER = (
    "script export",
    "unit environment",
    "live env",
    "script exec",
    "live flag",
    "unit",
    "script content",
    "file",
    "repo",
    "repo working tree",
    "live command line",
    "service state",
    "command",
    "health",
    "process id",
)


def category(subject: str, key: str) -> str:
    """A human name for the kind of fact (a finer version of report.category)."""
    kind = subject.split(":", 1)[0]
    if kind == "script":
        if key.startswith("export:"):
            return "script export"
        if key in ("content", "symlink"):  # a script swapped for a link: its text went
            return "script content"
        return "script exec"
    if kind == "service":
        if key.startswith("env:"):
            return "live env"
        if key.startswith("flag:"):
            return "live flag"
        if key.startswith("unit:environment:"):
            return "unit environment"
        if key in ("unit:active_state", "unit:load_state", "running"):
            return "service state"
        if key.startswith("unit:"):
            return "unit"
        if key in _COMMAND_LINE_KEYS:
            return "live command line"
        return "process id"
    if kind == "repo":
        return "repo working tree" if key in ("diff", "dirty", "untracked") else "repo"
    return {"file": "file", "command": "command", "health": "health"}.get(kind, kind)


def category_rank(name: str) -> int:
    """Position of a category in CATEGORY_ORDER; unknown kinds come last."""
    return CATEGORY_ORDER.index(name) if name in CATEGORY_ORDER else len(CATEGORY_ORDER)


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


@dataclass(frozen=True)
class Story:
    """One suspect: the root change, the changes that follow from it, and what it means."""

    root: Change
    evidence: tuple[Change, ...]
    status: Status
    label: str
    title: str
    services: tuple[str, ...]
    restarts: tuple[Restart, ...]
    # When the root change happened, as far as the records tell (None: only
    # when it was first recorded is known).
    changed: Span | None = None

    @property
    def category(self) -> str:
        return category(self.root.subject, self.root.key)

    @property
    def changes(self) -> tuple[Change, ...]:
        """Root first, then the evidence."""
        return (self.root, *self.evidence)

    @property
    def effective_us(self) -> int:
        """When the change could first have mattered: for a live one, the restart that took it."""
        moment = self.root.changed_us
        if self.status in ("live", "unsourced") and self.restarts:
            moment = max(moment, max(r.at_us for r in self.restarts))
        return moment

    @property
    def effective_span(self) -> Span:
        """`effective_us` as an interval: the change's, or the restart's if that came later."""
        moment = self.changed or Span(self.root.changed_us, self.root.changed_us)
        if self.status in ("live", "unsourced") and self.restarts:
            latest = max(self.restarts, key=lambda r: r.at_us)
            start = latest.started or Span.start(latest.at_us)
            moment = Span(
                max(moment.earliest_us, start.earliest_us), max(moment.latest_us, start.latest_us)
            )
        return moment


def group_changes(
    changes: Sequence[Change], after: State, records: Iterable[SnapshotInfo] = ()
) -> tuple[list[Story], list[RestartEvent]]:
    """Stories (one per suspect) and restart events from the changes up to the state `after`.

    `records` are the snapshots from the baseline to `after`: they tell
    between which two records each change happened, so a start is called
    before or after a change only when it is. Every change lands in exactly
    one story (as root or evidence) or in one restart. The result does not
    depend on the order of `changes`.
    """
    return _Grouper(changes, after, Records(records)).run()


def service_name(subject: str) -> str | None:
    """NAME of a ``service:NAME`` subject."""
    kind, _, name = subject.partition(":")
    return name if kind == "service" and name else None


def parse_time_us(text: str | None) -> int | None:
    """An ISO 8601 time with a zone (``started_at``) as microseconds, else None."""
    moment = parse_stored_time(text)
    return None if moment is None else to_us(moment)


class _Grouper:
    """One grouping run: claims changes for stories in order of how much they explain."""

    def __init__(self, changes: Sequence[Change], after: State, records: Records) -> None:
        self.changes = sorted(changes, key=lambda c: (c.subject, c.key, c.kind))
        self.after = after
        self.records = records
        self.by_ident: dict[tuple[str, str], Change] = {}
        self.by_subject: dict[str, list[Change]] = {}
        for change in self.changes:
            self.by_ident.setdefault((change.subject, change.key), change)
            self.by_subject.setdefault(change.subject, []).append(change)
        # Changes are compared by identity: two equal changes are still two.
        self.claimed: set[int] = set()
        self.stories: list[Story] = []
        self.restarts: dict[str, Restart] = {}
        self.script_service = self._script_services()
        self.branches: dict[str, frozenset[str]] = {}
        # Services whose environment / command line could be read now.
        self.env_readable = {s for s, k in after if k.startswith("env:")}
        self.argv_readable = {s for s, k in after if k == "argv"}

    # ------------------------------------------------------------ bookkeeping

    def free(self, subject: str, key: str) -> Change | None:
        change = self.by_ident.get((subject, key))
        if change is None or id(change) in self.claimed:
            return None
        return change

    def unclaimed(self, subject: str | None = None, prefix: str = "") -> list[Change]:
        pool = self.changes if subject is None else self.by_subject.get(subject, [])
        return [c for c in pool if id(c) not in self.claimed and c.key.startswith(prefix)]

    def take(self, *changes: Change | None) -> tuple[Change, ...]:
        out = []
        for change in changes:
            if change is not None and id(change) not in self.claimed:
                self.claimed.add(id(change))
                out.append(change)
        return tuple(out)

    def add(
        self,
        root: Change,
        evidence: Iterable[Change | None],
        status: Status,
        label: str,
        title: str,
        services: Iterable[str] = (),
    ) -> Story:
        self.take(root)
        story = Story(
            root,
            self.take(*evidence),
            status,
            label,
            title,
            tuple(sorted(set(services))),
            (),
            self.records.span(root),
        )
        self.stories.append(story)
        return story

    def _script_services(self) -> dict[str, str]:
        """script subject -> the service it serves, from the provenance of any of its facts."""
        out: dict[str, str] = {}
        versions: list[StoredVersion] = [
            v for c in self.changes for v in (c.after, c.before) if v is not None
        ]
        versions += [
            self.after[i] for i in sorted(i for i in self.after if i[0].startswith("script:"))
        ]
        for v in versions:
            service = v.provenance.get("service")
            if v.subject.startswith("script:") and isinstance(service, str) and service:
                out.setdefault(v.subject, service)
        return out

    # ------------------------------------------------------------ the run

    def run(self) -> tuple[list[Story], list[RestartEvent]]:
        self.find_restarts()
        scripts = sorted({c.subject for c in self.changes if c.subject.startswith("script:")})
        # Files a script sources join its stories; only one sourced by nothing
        # recorded this time stands alone.
        for subject in sorted(scripts, key=lambda s: self.sourced_by(s) is not None):
            self.script_stories(subject)
        services = sorted({c.subject for c in self.changes if c.subject.startswith("service:")})
        for subject in services:
            self.unit_stories(subject)
        for subject in services:
            self.state_story(subject)
        for subject in services:
            self.live_stories(subject)
        self.subject_stories()
        for change in self.unclaimed():
            self.add(change, (), "changed", _describe(change), _generic_title(change))
        stories = [self.attach_restarts(s) for s in self.stories]
        stories.sort(
            key=lambda s: (category_rank(s.category), s.root.subject, s.root.key, s.root.kind)
        )
        return stories, co_restarts(self.restarts.values())

    # ------------------------------------------------------------ restarts

    def find_restarts(self) -> None:
        """A new process for a service: pid or started_at modified, or added (a start)."""
        for subject in sorted(
            {c.subject for c in self.changes if c.subject.startswith("service:")}
        ):
            pid = self.free(subject, "pid")
            started = self.free(subject, "started_at")
            moved = [c for c in (pid, started) if c is not None and c.kind != "removed"]
            if not moved:
                continue
            absorbed = [self.free(subject, k) for k in _RESTART_KEYS]
            absorbed += [self.free(subject, f"env:{name}") for name in sorted(PER_START_ENV)]
            taken = self.take(*(c for c in absorbed if c is not None and c.kind != "removed"))
            at_us = None
            span = start_span(started.after) if started is not None else None
            if started is not None and started.after is not None:
                at_us = parse_time_us(started.after.value)
            if at_us is None or span is None:
                # No start time: it started by the record that first saw it.
                first = min(moved, key=lambda c: c.changed_us)
                at_us, span = first.changed_us, self.records.span(first)
            name = service_name(subject) or subject
            self.restarts[name] = Restart(
                name,
                pid.before.value if pid is not None and pid.before is not None else None,
                _value(self.after.get((subject, "pid"))),
                at_us,
                taken,
                span,
            )

    def attach_restarts(self, story: Story) -> Story:
        """Restarts explain stories that are in a running process, not pending ones."""
        if story.status not in ("live", "unsourced") or story.restarts:
            return story
        found = tuple(self.restarts[s] for s in story.services if s in self.restarts)
        if not found:
            return story
        return replace(story, restarts=found)

    # ------------------------------------------------------------ serve scripts

    def script_stories(self, subject: str) -> None:
        """Each changed export or exec flag is a story; the exec line and text join the first."""
        service = self.script_service.get(subject)
        live = f"service:{service}" if service else None
        roots = self.unclaimed(subject, "export:") + self.unclaimed(subject, "flag:")
        roots.sort(key=lambda c: (_line(c), c.key))
        extra = [self.free(subject, "exec"), self.free(subject, "content")]
        extra += self.sourced_contents(subject)
        if not roots:
            root = extra[0] or extra[1]
            if root is None:
                return
            status, label = self.restarted_status(service, root)
            rest = [c for c in extra if c is not root]
            if live is not None and root.key == "exec" and status == "live":
                rest.append(self.free(live, "argv"))
            self.add(root, rest, status, label, _script_title(root), _listed(service))
            return
        for i, root in enumerate(roots):
            name = root.key.split(":", 1)[1]
            evidence: list[Change | None] = []
            if root.key.startswith("export:"):
                status, label, mirror = self.applied(service, root, f"env:{name}")
                evidence.append(mirror)
            else:
                status, label, mirror = self.applied(service, root, f"flag:{name}")
                evidence.append(mirror)
                if mirror is not None and live is not None:
                    evidence.append(self.free(live, "argv"))
            if i == 0:
                evidence += extra
            spot, shown_value = None, None
            if service is not None and root.after is not None:
                live_key = f"env:{name}" if root.key.startswith("export:") else f"flag:{name}"
                current = self.after.get((f"service:{service}", live_key))
                found = self.attribute(service, root.after, current)
                if found is not None and found.single is not None:
                    # The process singles out one of the script's values: name it.
                    spot, shown_value = found.single, current
            was = mirror.before if mirror is not None and shown_value is not None else None
            title = _script_title(root, spot, shown_value, was)
            self.add(root, evidence, status, label, title, _listed(service))

    def sourced_by(self, subject: str) -> str | None:
        """The script (``script:PATH``) that sources this file, if its facts say so."""
        for change in self.by_subject.get(subject, []):
            latest = change.after or change.before
            spot = latest.provenance.get("sourced_by") if latest is not None else None
            if isinstance(spot, str) and ":" in spot:
                return "script:" + spot.rsplit(":", 1)[0]
        return None

    def sourced_contents(self, subject: str) -> list[Change | None]:
        """Text changes of the files `subject` sources: evidence of its stories."""
        return [
            self.free(other, "content")
            for other in sorted(self.by_subject)
            if other != subject
            and other.startswith("script:")
            and self.sourced_by(other) == subject
        ]

    def applied(
        self, service: str | None, source: Change, live_key: str
    ) -> tuple[Status, str, Change | None]:
        """Is a source change (script or unit) in the live process? And the live change showing it.

        Values decide when the live fact is readable and the source value is
        literal; otherwise a start after the change counts as applied.
        """
        if service is None:
            return "on-disk", "no service recorded for this script", None
        subject = f"service:{service}"
        mirror = self.free(subject, live_key)
        if (subject, "running") not in self.after:
            return "on-disk", f"no process recorded for {service}", None
        not_running = self.not_running(service)
        if not_running is not None:
            return "pending", f"{NOT_APPLIED} ({not_running})", None
        readable = subject in (
            self.argv_readable if live_key.startswith("flag:") else self.env_readable
        )
        live = self.after.get((subject, live_key))
        if not readable or source.kind == "removed" and live is not None and _holes(source.before):
            # Without the live value (or with a removed value that had unknown
            # parts), whether the process started since decides.
            status, label = self.restarted_status(service, source)
            appeared = (mirror.after is None) == (source.after is None) if mirror else False
            return status, label, mirror if status == "live" and appeared else None
        now = self.attribute(service, source.after, live) if live is not None else None
        before = self.attribute(service, source.before, live) if live is not None else None
        if (
            mirror is not None
            and attribute(source.after, mirror.after) is None
            and not (source.after is None and mirror.after is None)
        ):
            mirror = None  # the live value moved elsewhere: not this source's doing
        if source.after is None:
            applied_now = live is None
        elif now is None:
            applied_now = False
        elif before is None or _exact(now) and not _exact(before):
            applied_now = True
        else:
            # Both the old and the new text can give the live value (unknown
            # parts): a start after the change decides.
            status, label = self.restarted_status(service, source)
            return status, label, mirror if status == "live" else None
        if applied_now:
            label = self.live_label(service, removed=source.after is None)
            if now is not None and now.single is not None and now.single.when:
                label += f" (branch taken: {now.single.when})"
            return "live", label, mirror
        order = self.start_order(service, source)
        if order == "before":
            return "pending", NOT_APPLIED, None
        pid = _value(self.after.get((subject, "pid")))
        where = f"{service} (pid {pid})" if pid else service
        if order == "after":
            return "on-disk", f"not in {where}, although it started after the change", None
        return "on-disk", f"not in {where}, which started {self.about(service, source)}", None

    def not_running(self, service: str) -> str | None:
        """Why a service has no process to check against, or None if it runs."""
        running = self.after.get((f"service:{service}", "running"))
        if running is None:
            return f"no process recorded for {service}"
        if running.value != "true":
            return f"{service} is not running"
        return None

    def start_order(self, service: str, source: Change) -> Order:
        """Whether the service's current process started after the change, before it, or unknown.

        Its start time against the interval the change happened in; without
        a start time, the record that first saw the process against the one
        that saw the change (the same record: unknown).
        """
        subject = f"service:{service}"
        started = self.after.get((subject, "started_at"))
        span = start_span(started)
        if span is not None:
            return span.order(self.records.span(source))
        seen = started or self.after.get((subject, "pid"))
        if seen is None or seen.first_taken_us == source.changed_us:
            return "unknown"
        return "after" if seen.first_taken_us > source.changed_us else "before"

    def about(self, service: str, source: Change) -> str:
        """A start in no known order with a change, in words, with the times that say so."""
        started = parse_time_us(_value(self.after.get((f"service:{service}", "started_at"))))
        return about_the_same_time([] if started is None else [started], self.records.span(source))

    def restarted_status(self, service: str | None, source: Change) -> tuple[Status, str]:
        """For a source without a comparable live value: started since the change, or not."""
        if service is None:
            return "on-disk", "no service recorded for this script"
        if (f"service:{service}", "running") not in self.after:
            return "on-disk", f"no process recorded for {service}"
        not_running = self.not_running(service)
        if not_running is not None:
            return "pending", f"{NOT_APPLIED} ({not_running})"
        order = self.start_order(service, source)
        if order == "before":
            return "pending", NOT_APPLIED
        label = self.live_label(service, removed=False)
        if order == "unknown":
            # Counted as live: an edit and a restart in the same minute usually go together.
            label += f", if it started after the change: it started {self.about(service, source)}"
        return "live", label

    def live_label(self, service: str, *, removed: bool) -> str:
        pid = _value(self.after.get((f"service:{service}", "pid")))
        where = f"{service} (pid {pid})" if pid else service
        text = f"gone from {where}" if removed else f"live in {where}"
        restart = self.restarts.get(service)
        if restart is not None:
            text += f" since restart {clock(restart.at_us)}"
        return text

    # ------------------------------------------------------------ systemd units

    def unit_stories(self, subject: str) -> None:
        """Environment= entries, ExecStart= and the unit's other settings of one service."""
        service = service_name(subject) or subject
        first: list[Story] = []
        for root in self.unclaimed(subject, "unit:environment:"):
            name = root.key.removeprefix("unit:environment:")
            status, label, mirror = self.applied(service, root, f"env:{name}")
            first.append(self.add(root, [mirror], status, label, _unit_title(root), [service]))
        exec_start = self.free(subject, "unit:exec_start")
        if exec_start is not None:
            words = " ".join(_value(v) or "" for v in (exec_start.before, exec_start.after))
            flags = [
                c
                for c in self.unclaimed(subject, "flag:")
                if c.key.removeprefix("flag:") in words.split()
            ]
            argv = self.free(subject, "argv")
            if self.not_running(service) is not None:
                flags, argv = [], None  # the process facts ending belong to the stop
            if flags or argv is not None:
                status, label = "live", self.live_label(service, removed=False)
            else:
                status, label = self.restarted_status(service, exec_start)
            first.append(
                self.add(
                    exec_start, [*flags, argv], status, label, _unit_title(exec_start), [service]
                )
            )
        reload = self.free(subject, "unit:need_daemon_reload")
        if reload is not None and _value(reload.after) == "yes":
            label = f"{NOT_APPLIED}, after systemctl daemon-reload (unit file changed on disk)"
            self.add(reload, [], "pending", label, _unit_title(reload), [service])
            reload = None
        others = [
            c
            for c in self.unclaimed(subject, "unit:")
            if c.key not in ("unit:active_state", "unit:load_state") and c is not reload
        ]
        others.sort(key=lambda c: (_UNIT_ROOTS.index(c.key) if c.key in _UNIT_ROOTS else 99, c.key))
        if first:
            # Settings that carry the change (a new drop-in) are evidence of it.
            story = first[0]
            at = next(i for i, s in enumerate(self.stories) if s is story)
            self.stories[at] = replace(
                story, evidence=(*story.evidence, *self.take(*others, reload))
            )
        elif others or reload is not None:
            root, *rest = [c for c in (*others, reload) if c is not None]
            status, label = self.restarted_status(service, root)
            self.add(root, rest, status, label, _unit_title(root), [service])

    # ------------------------------------------------------------ running or not

    def state_story(self, subject: str) -> None:
        """A service that stopped or started: its process facts ending or beginning are evidence."""
        running = self.free(subject, "running")
        service = service_name(subject) or subject
        if running is None:
            active = self.free(subject, "unit:active_state")
            if active is not None:
                self.add(
                    active,
                    [self.free(subject, "unit:load_state")],
                    "changed",
                    _describe(active),
                    _generic_title(active),
                    [service],
                )
            return
        rest = [c for c in self.unclaimed(subject) if c is not running]
        if _value(running.after) == "true":
            pid = _value(self.after.get((subject, "pid")))
            label = f"running (pid {pid})" if pid else "running"
            title = f"{service} started" + ("" if running.before else " (first seen)")
            self.add(running, rest, "live", label, title, [service])
        else:
            gone = "no longer recorded" if running.after is None else "not running now"
            self.add(running, rest, "changed", gone, f"{service} stopped", [service])

    # ------------------------------------------------------------ live process

    def live_stories(self, subject: str) -> None:
        """Live env and flags nothing above explains, then the command line itself."""
        service = service_name(subject) or subject
        not_running = self.not_running(service)
        if not_running is None and service in self.restarts:
            self.environment_stories(service)
        for root in self.unclaimed(subject, "env:"):
            label = self.env_source(service, root)
            status: Status = "unsourced" if not_running is None else "changed"
            self.add(root, [], status, label, _live_title(root, service), [service])
        for root in self.unclaimed(subject, "flag:"):
            label = self.flag_source(service, root)
            status = "unsourced" if not_running is None else "changed"
            self.add(
                root,
                [self.free(subject, "argv")],
                status,
                label,
                _live_title(root, service),
                [service],
            )
        line = [c for c in (self.free(subject, k) for k in _COMMAND_LINE_KEYS) if c is not None]
        if line:
            root, *rest = line
            if not_running is None:
                status, label = "live", self.live_label(service, removed=False)
            else:
                status, label = "changed", not_running
            self.add(root, rest, status, label, _live_title(root, service), [service])

    def environment_stories(self, service: str) -> None:
        """Live variables nothing recorded sets, changed at the same start: one story per start.

        A service restarted by hand from another shell brings that shell's
        HOME, PATH, SHLVL and the rest: one change (where it was started
        from), not a suspect per variable. Variables a script line or the
        unit gives stay stories of their own.
        """
        together: dict[int, list[Change]] = {}
        for change in self.unclaimed(f"service:{service}", "env:"):
            if self.inherited(service, change):
                together.setdefault(change.changed_us, []).append(change)
        for changes in together.values():
            if len(changes) < 2:
                continue  # one variable: its own story says more
            root, *rest = sorted(changes, key=_environment_order)
            label = (
                f"{len(changes)} variables inherited from what started {service} "
                "(no recorded script line or unit sets them)"
            )
            title = f"the environment {service} was started from changed: {_names(changes)}"
            self.add(root, rest, "unsourced", label, title, [service])

    def inherited(self, service: str, change: Change) -> bool:
        """True if no recorded script line or unit setting of the service gives this live variable.

        A line that only passes on the value the script was given
        (``${NAME:-default}`` taking the caller's) counts as inherited.
        """
        name = change.key.removeprefix("env:")
        if (f"service:{service}", f"unit:environment:{name}") in self.after:
            return False
        exported = any(
            (script, f"export:{name}") in self.after
            for script, owner in self.script_service.items()
            if owner == service
        )
        if not exported:
            return True
        if change.after is None:
            return False
        found = self.script_origin(service, f"export:{name}", change.after)
        return (
            found is not None
            and not found.unsure
            and (found.caller or bool(found.spots))
            and all(spot.given for spot in found.spots)
        )

    def env_source(self, service: str, change: Change) -> str:
        """Where a live variable could have come from, when no changed source explains it."""
        name = change.key.removeprefix("env:")
        if change.after is None:
            return f"removed; {SOURCE_UNKNOWN}"
        found = self.script_origin(service, f"export:{name}", change.after)
        if found is not None:
            return f"{found.words()} (unchanged since the baseline)"
        unit = self.after.get((f"service:{service}", f"unit:environment:{name}"))
        if unit is not None and _same(unit, change.after):
            where = unit.provenance.get("unit")
            return "from unit Environment=" + (f" ({where})" if where else "")
        return SOURCE_UNKNOWN

    def flag_source(self, service: str, change: Change) -> str:
        """Where a live flag could have come from: the script's exec line, the unit's ExecStart=."""
        name = change.key.removeprefix("flag:")
        if change.after is None:
            return f"removed; {SOURCE_UNKNOWN}"
        found = self.script_origin(service, change.key, change.after)
        if found is not None:
            return f"{found.words()} (unchanged since the baseline)"
        exec_start = _value(self.after.get((f"service:{service}", "unit:exec_start")))
        if exec_start and name in exec_start.split():
            return "from unit ExecStart="
        return SOURCE_UNKNOWN

    def script_origin(self, service: str, key: str, live: StoredVersion) -> Attribution | None:
        """The script lines of `service` that can give the live value of `key`, if any."""
        for script, owner in sorted(self.script_service.items()):
            if owner != service:
                continue
            found = self.attribute(service, self.after.get((script, key)), live)
            if found is not None:
                return found
        return None

    def attribute(
        self, service: str, script: StoredVersion | None, live: StoredVersion | None
    ) -> Attribution | None:
        """`attribute`, knowing which branches this service's own values show were taken."""
        return attribute(script, live, self.known_branches(service))

    def known_branches(self, service: str) -> frozenset[str]:
        """Branch conditions the service's live values single out (cached per service)."""
        cached = self.branches.get(service)
        if cached is not None:
            return cached
        pairs: dict[tuple[str, str], tuple[StoredVersion | None, StoredVersion | None]] = {}
        subject = f"service:{service}"
        env = {
            k.removeprefix("env:"): v.value
            for (s, k), v in self.after.items()
            if s == subject and k.startswith("env:") and v.value is not None and not v.secret
        }
        decided: set[str] = set()
        for script, owner in self.script_service.items():
            if owner == service:
                decided |= branches_from_env(self.after.get((script, "exec")), env)
        for (script, key), version in self.after.items():
            if self.script_service.get(script) != service:
                continue
            if key.startswith("export:"):
                live_key = "env:" + key.removeprefix("export:")
            elif key.startswith("flag:"):
                live_key = key
            else:
                continue
            pairs[(script, key)] = (version, self.after.get((subject, live_key)))
        argv = self.after.get((subject, "argv"))
        if argv is not None and argv.value is not None and not argv.secret:
            live_line = _joined_argv(argv)
            for script, owner in self.script_service.items():
                if owner == service and (script, "exec") in self.after:
                    pairs[(script, "exec")] = (self.after[(script, "exec")], live_line)
        found = attribute_together(pairs, decided if feasible(decided) else ())
        known: set[str] = set(decided) if feasible(decided) else set()
        for attribution in found.values():
            if attribution is not None and attribution.single is not None:
                known.update(attribution.held)
        result = frozenset(known) if feasible(known) else frozenset()
        self.branches[service] = result
        return result

    # ------------------------------------------------------------ files, repos, commands

    def subject_stories(self) -> None:
        """One story per changed file, command and health check; two per repository."""
        for subject in sorted({c.subject for c in self.unclaimed()}):
            kind = subject.split(":", 1)[0]
            if kind == "file":
                self.one_story(subject, _FILE_ROOTS, "on-disk")
            elif kind == "repo":
                self.one_story(subject, _REPO_ROOTS, "on-disk")
                self.one_story(subject, _WORKTREE_ROOTS, "on-disk")
            elif kind == "command":
                self.one_story(subject, ("exit", "stdout"), "changed")

    def one_story(self, subject: str, keys: Sequence[str], status: Status) -> None:
        found = [c for c in (self.free(subject, k) for k in keys) if c is not None]
        if found:
            root, *rest = found
            label = _describe(root)
            if status == "on-disk":
                status, label = self.disk_status(root, label)
            self.add(root, rest, status, label, _generic_title(root))

    def disk_status(self, change: Change, described: str) -> tuple[Status, str]:
        """A file or repo changed on disk: pending if every running service predates it.

        A process loads its code and config when it starts, so a change made
        after every running service started cannot be in any of them yet.
        """
        started: dict[str, Span] = {}
        for (subject, key), version in self.after.items():
            name = service_name(subject)
            if name is None or key != "started_at":
                continue
            if _value(self.after.get((subject, "running"))) == "false":
                continue
            moment = start_span(version)
            if moment is not None:
                started[name] = moment
        if not started:
            return "on-disk", described
        # The change happened somewhere between the record before the one
        # that saw it and that one: a service started in that interval is in
        # no known order with it, so it is not counted as predating it.
        span = self.records.span(change)
        order = {name: at.order(span) for name, at in started.items()}
        if all(o == "before" for o in order.values()):
            return "pending", f"{NOT_APPLIED} (every running service started before it)"
        later = sorted(name for name, o in order.items() if o == "after")
        unknown = sorted(name for name, o in order.items() if o == "unknown")
        it = "it" if change.before is not None else "it appeared"
        if later:
            described = f"{described}; {', '.join(later)} started after {it}"
        if unknown:
            shown_at = [
                parse_time_us(_value(self.after[f"service:{n}", "started_at"])) for n in unknown
            ]
            when = about_the_same_time([at for at in shown_at if at is not None], span)
            described = f"{described}; {', '.join(unknown)} started {when}"
        return "on-disk", described


_UNIT_ROOTS = (
    "unit:drop_ins",
    "unit:fragment_path",
    "unit:environment_files",
    "unit:need_daemon_reload",
)
_FILE_ROOTS = ("sha256", "symlink", "type", "mode", "size")
_REPO_ROOTS = ("head", "branch", "state", "shallow")
_WORKTREE_ROOTS = ("diff", "dirty", "untracked")


# ---------------------------------------------------------------- small helpers


def about_the_same_time(starts: Sequence[int], change: Span) -> str:
    """Starts in no known order with a change, in words, with the times that show it."""
    times = f"change between {clock(change.earliest_us)} and {clock(change.latest_us)}"
    if starts:
        noun = "start" if len(starts) == 1 else "starts"
        times = f"{noun} {', '.join(map(clock, starts))}; {times}"
    return f"at about the same time ({times}), order unknown"


# The order variables are named in an environment story: first the unusual
# ones (NCCL_ALGO exported in that shell is likelier to shape the server),
# then what any login shell carries, last what a shell or the service
# manager sets about itself (where and how it was started, not how it runs).
_LOGIN_SHELL = frozenset(
    {
        "HOME",
        "PATH",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "MAIL",
        "HOSTNAME",
        "TERM",
        "COLORTERM",
        "LS_COLORS",
        "DISPLAY",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "LESS",
        "MOTD_SHOWN",
    }
)
_LOGIN_SHELL_PREFIXES = ("LC_", "XDG_", "SSH_", "PYENV_", "HIST", "DBUS_")
_SHELL_BOOKKEEPING = frozenset({"_", "OLDPWD", "PWD", "SHLVL"}) | PER_START_ENV


def _environment_order(change: Change) -> tuple[int, str]:
    name = change.key.removeprefix("env:")
    if name in _SHELL_BOOKKEEPING:
        return 2, name
    if name in _LOGIN_SHELL or name.startswith(_LOGIN_SHELL_PREFIXES):
        return 1, name
    return 0, name


def _names(changes: Sequence[Change]) -> str:
    """Variable names for a title: all of three or fewer, else the first two and how many more."""
    names = [c.key.removeprefix("env:") for c in sorted(changes, key=_environment_order)]
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}, {names[1]}, +{len(names) - 2}"


def co_restarts(restarts: Iterable[Restart]) -> list[RestartEvent]:
    """Restarts in time order, those within CO_RESTART_US of an event's first joined to it."""
    events: list[list[Restart]] = []
    for restart in sorted(restarts, key=lambda r: (r.at_us, r.service)):
        if events and restart.at_us - events[-1][0].at_us <= CO_RESTART_US:
            events[-1].append(restart)
        else:
            events.append([restart])
    return [RestartEvent(tuple(group), group[0].at_us) for group in events]


def _value(version: StoredVersion | None) -> str | None:
    return None if version is None else version.value


def _same(a: StoredVersion | None, b: StoredVersion | None) -> bool:
    """The same value: both absent, or equal (digests for secrets, never the secret)."""
    if a is None or b is None:
        return a is None and b is None
    return (a.value, a.blob_sha256, a.secret) == (b.value, b.blob_sha256, b.secret)


def _joined_argv(argv: StoredVersion) -> StoredVersion | None:
    """The live command line as one string of words, to match against a script's launches."""
    try:
        words = json.loads(argv.value or "")
    except ValueError:
        return None
    if not isinstance(words, list):
        return None
    return replace(argv, value=" ".join(str(w) for w in words))


def _holes(version: StoredVersion | None) -> bool:
    """True for a script value with parts drift cannot know (``$(cmd)``, the caller's value)."""
    if version is None or version.secret:
        return False
    return any(
        not all(isinstance(part, str) for part in p.get("match") or [""])
        for p in possibilities(version)
    )


def _exact(found: Attribution | None) -> bool:
    """True if the attribution rests on a literal value, not on a pattern with holes."""
    return found is not None and found.exact


def _line(change: Change) -> int:
    latest = change.after or change.before
    line = latest.provenance.get("line") if latest is not None else None
    return line if isinstance(line, int) else 1 << 30


def _listed(service: str | None) -> list[str]:
    return [service] if service else []


def shown(version: StoredVersion | None, limit: int = 80) -> str:
    """A value for a title: secrets as [redacted:<8 hex>], long text shortened, blobs not shown."""
    if version is None:
        return ""
    if version.secret:
        return shown_secret(version.value)
    if version.value is None:
        return "[text]"
    text = version.value
    text = truncated(text, limit)
    if text == "" or any(c.isspace() for c in text):
        return shlex.quote(text)
    return text


def _where(change: Change) -> str:
    """FILE:LINE of a script fact; its candidate lines when several may give it."""
    latest = change.after or change.before
    assert latest is not None
    file = latest.provenance.get("file") or change.subject.split(":", 1)[1]
    line = latest.provenance.get("line")
    if line:
        return f"{file}:{line}"
    spots: dict[str, list[str]] = {}
    for p in possibilities(latest):
        if isinstance(p.get("file"), str) and isinstance(p.get("line"), int):
            lines = spots.setdefault(p["file"], [])
            if str(p["line"]) not in lines:
                lines.append(str(p["line"]))
    if spots:
        return " or ".join(f"{f}:{'|'.join(lines)}" for f, lines in spots.items())
    return str(file)


def _script_title(
    change: Change,
    spot: Spot | None = None,
    live: StoredVersion | None = None,
    was: StoredVersion | None = None,
) -> str:
    """``export K=V added to FILE:LINE``, ``flag --x V at FILE:LINE (was W)`` ...

    `spot` is the line the live process singles out when the script may give
    several values, `live` the value it has (shown instead of them all) and
    `was` the value it had before, if the process shows that too.
    """
    kind, _, name = change.key.partition(":")
    where = str(spot) if spot is not None else _where(change)
    if spot is not None and spot.value:
        where += f", value from {spot.value}"
    elif spot is None and change.after is not None:
        value_line = change.after.provenance.get("value_line")
        if isinstance(value_line, int):
            file = change.after.provenance.get("value_file") or change.after.provenance.get("file")
            where += f", value from {file}:{value_line}"
    after = live if live is not None else change.after
    if kind == "export":
        what = f"export {name}"
        new = f"{what}={shown(after)}"
    elif kind == "flag":
        what = f"flag {name}"
        value = shown(after)
        new = f"{what} {value}" if after is not None and after.value != "" else what
    elif kind == "exec":
        return f"exec line {'changed' if change.kind == 'modified' else change.kind} at {where}"
    else:
        return f"{change.subject.removeprefix('script:')} text {change.kind}"
    if change.kind == "added":
        return f"{new} added to {where}"
    if change.kind == "removed":
        return f"{what} removed from {where}"
    return f"{new} at {where} (was {shown(was if was is not None else change.before)})"


def _unit_title(change: Change) -> str:
    latest = change.after or change.before
    assert latest is not None
    unit = latest.provenance.get("unit") or change.subject.removeprefix("service:")
    if change.key.startswith("unit:environment:"):
        name = change.key.removeprefix("unit:environment:")
        if change.kind == "removed":
            return f"Environment={name} removed from unit {unit}"
        new = f"Environment={name}={shown(change.after)} in unit {unit}"
        return new if change.kind == "added" else f"{new} (was {shown(change.before)})"
    if change.key == "unit:need_daemon_reload":
        return f"unit {unit} changed on disk, not reloaded (NeedDaemonReload={_value(latest)})"
    setting = change.key.removeprefix("unit:")
    return f"unit {unit}: {setting} {change.kind}"


def _live_title(change: Change, service: str) -> str:
    kind, _, name = change.key.partition(":")
    if kind == "env":
        if change.kind == "removed":
            return f"{name} gone from the live environment of {service}"
        new = f"{name}={shown(change.after)} in the live environment of {service}"
        return new if change.kind == "added" else f"{new} (was {shown(change.before)})"
    if kind == "flag":
        if change.kind == "removed":
            return f"{name} gone from the live command line of {service}"
        value = shown(change.after)
        new = f"{name} {value}".rstrip() if change.after and change.after.value else name
        new += f" on the live command line of {service}"
        return new if change.kind == "added" else f"{new} (was {shown(change.before)})"
    return f"{service} runs a different command line ({change.key} {change.kind})"


def _generic_title(change: Change) -> str:
    kind, _, rest = change.subject.partition(":")
    if kind == "file":
        if change.key == "sha256" and change.kind == "modified":
            return f"{rest} content changed"
        if change.kind != "modified":
            whole = change.key in _FILE_ROOTS[:3]  # the file itself appeared or went
            return f"{rest} {change.kind}" if whole else f"{rest}: {change.key} {change.kind}"
        return f"{rest}: {change.key} {shown(change.after)} (was {shown(change.before)})"
    if kind == "repo" and change.key == "head" and change.kind == "modified":
        old, new = shown(change.before, 12), shown(change.after, 12)
        return f"repo {rest}: HEAD moved to {new} (was {old})"
    if kind == "command":
        if change.key == "exit":
            return f"command {rest}: exit {shown(change.after)} (was {shown(change.before)})"
        return f"command {rest}: output {change.kind}"
    if kind == "health":
        return f"health check {rest}: ok {shown(change.before)} -> {shown(change.after)}"
    if change.kind == "modified" and change.after is not None and change.after.value is not None:
        return f"{change.subject} {change.key}: {shown(change.after)} (was {shown(change.before)})"
    return f"{change.subject} {change.key} {change.kind}"


def _describe(change: Change) -> str:
    """A label for a story with no process to check against."""
    kind = change.subject.split(":", 1)[0]
    if kind in ("file", "repo"):
        return "on disk: whether a running process loaded it is not recorded"
    if kind == "health":
        return "a symptom, not a cause"
    return f"{change.kind} since the baseline"
