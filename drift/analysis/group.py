"""Group changes linked by provenance into stories, and restarts into events.

Every change lands in exactly one story (see `drift.analysis.story`), as its
root or as evidence, or in one restart (see `drift.analysis.restarts`): the
grouper claims changes in order of how much a story explains, serve scripts
first, then units, a service's running state, its live process, and last
files, repositories and commands. It stays one module because its passes
share what has been claimed so far. The words of titles and labels are in
`drift.analysis.titles`; where a live value could come from is asked of
`drift.analysis.sources`.

A start is called before or after a change only when their times say so
(see `drift.analysis.timing`); otherwise "at about the same time".

Everything here is pure: changes, the current state and the records' times
in, stories out.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from drift.analysis.diff import Change, State
from drift.analysis.failures import Failure, failing_status
from drift.analysis.kinds import (
    COMMAND_LINE_KEYS,
    FILE_IDENTITY_KEYS,
    UNIT_RUNTIME_KEYS,
    WORKTREE_KEYS,
    category_rank,
    service_name,
    unit_setting,
)
from drift.analysis.origins import Attribution, attribute, possibilities
from drift.analysis.restarts import Restart, RestartEvent, co_restarts, counted, restart_of
from drift.analysis.sources import MANAGER_SUBJECT, ServiceSources
from drift.analysis.story import Status, Story
from drift.analysis.timing import Order, Records, Span, parse_time_us, start_span
from drift.analysis.titles import (
    NOT_APPLIED,
    NOT_RELOADED,
    about_the_same_time,
    environment_order,
    generic_title,
    live_title,
    manager_title,
    plain_label,
    script_title,
    unit_title,
    variable_names,
)
from drift.analysis.unit_history import ServiceRuns
from drift.store.query import SnapshotInfo, StoredVersion
from drift.timespec import clock


def group_changes(
    changes: Sequence[Change],
    after: State,
    records: Iterable[SnapshotInfo] = (),
    *,
    runs: Mapping[str, ServiceRuns] | None = None,
    failures: Mapping[str, Failure] | None = None,
) -> tuple[list[Story], list[RestartEvent]]:
    """Stories (one per suspect) and restart events from the changes up to the state `after`.

    `records` are the snapshots from the baseline to `after`: they tell
    between which two records each change happened, so a start is called
    before or after a change only when it is. `runs` are the services' runs
    inside the window (`drift.analysis.unit_history`), to count restarts,
    and `failures` the services seen failing (`drift.analysis.failures`).
    Every change lands in exactly one story (as root or evidence) or in one
    restart. The result does not depend on the order of `changes`.
    """
    grouper = _Grouper(changes, after, Records(records))
    grouper.runs = dict(runs or {})
    grouper.failures = dict(failures or {})
    return grouper.run()


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
        self.sources = ServiceSources(after, self.script_service)
        # Services whose environment / command line could be read now.
        self.env_readable = {s for s, k in after if k.startswith("env:")}
        self.argv_readable = {s for s, k in after if k == "argv"}
        self.runs: dict[str, ServiceRuns] = {}
        self.failures: dict[str, Failure] = {}

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
        listed = tuple(sorted(set(services)))
        story = Story(
            root=root,
            evidence=self.take(*evidence),
            status=status,
            label=label,
            title=title,
            services=listed,
            restarts=(),
            changed=self.records.span(root),
            failure=next((self.failures[s] for s in listed if s in self.failures), None),
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
        self.manager_stories()
        for subject in services:
            self.state_story(subject)
        for subject in services:
            self.live_stories(subject)
        self.subject_stories()
        for subject in services:
            self.runtime_story(subject)
        for change in self.unclaimed():
            self.add(change, (), "changed", plain_label(change), generic_title(change))
        stories = [self.attach_restarts(s) for s in self.stories]
        stories.sort(
            key=lambda s: (category_rank(s.category), s.root.subject, s.root.key, s.root.kind)
        )
        return stories, co_restarts(self.restarts.values())

    # ------------------------------------------------------------ restarts

    def find_restarts(self) -> None:
        """A new process for a service: its restart claims the pid, start time and the like."""
        for subject in sorted(
            {c.subject for c in self.changes if c.subject.startswith("service:")}
        ):
            free = {c.key: c for c in self.by_subject[subject] if self.free(subject, c.key) is c}
            restart = restart_of(subject, free, self.after, self.records)
            if restart is not None:
                self.take(*restart.changes)
                baseline = self.records.snapshots[0].id if self.records.snapshots else 0
                restart = counted(restart, self.runs.get(restart.service), baseline)
                self.restarts[restart.service] = restart

    def attach_restarts(self, story: Story) -> Story:
        """Restarts explain stories that are in a running process (or failing), not pending ones."""
        if story.status not in ("live", "unsourced", "failing") or story.restarts:
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
            self.add(root, rest, status, label, script_title(root), _listed(service))
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
                found = self.sources.attribute(service, root.after, current)
                if found is not None and found.single is not None:
                    # The process singles out one of the script's values: name it.
                    spot, shown_value = found.single, current
            was = mirror.before if mirror is not None and shown_value is not None else None
            title = script_title(root, spot, shown_value, was)
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
        failed = self.failing(service, source)
        if failed is not None:
            return *failed, None
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
        now = self.sources.attribute(service, source.after, live) if live is not None else None
        before = self.sources.attribute(service, source.before, live) if live is not None else None
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
            failure = self.failures.get(service)
            if failure is not None and failure.ongoing:
                return f"{service} {failure.summary()}"
            return f"{service} is not running"
        return None

    def failing(self, service: str, source: Change) -> tuple[Status, str] | None:
        """For a change to what a failing service starts with: applied at its failing starts?"""
        failure = self.failures.get(service)
        if failure is None:
            return None
        return failing_status(failure, self.records.span(source))

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
        failed = self.failing(service, source)
        if failed is not None:
            return failed
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
        failure = self.failures.get(service)
        if failure is not None and not failure.ongoing:
            text += f"; {service} {failure.summary()}"
        return text

    # ------------------------------------------------------------ systemd units

    def unit_stories(self, subject: str) -> None:
        """Each variable a systemd source of the unit sets, ExecStart=, then the unit's files."""
        service = service_name(subject) or subject
        not_loaded = _value(self.after.get((subject, "unit:need_daemon_reload"))) == "yes"
        status: Status
        first = [
            self.variable_story(service, changes, not_loaded)
            for changes in self.unit_variables(subject)
        ]
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
            compared = self.compared(service, exec_start, "argv", _argv_lines)
            if compared is not None:
                status, label = compared
                if status == "pending":
                    flags, argv = [], None  # the process still runs the old command line
            elif flags or argv is not None:
                status, label = "live", self.live_label(service, removed=False)
            else:
                status, label = self.restarted_status(service, exec_start)
            first.append(
                self.add(
                    exec_start, [*flags, argv], status, label, unit_title(exec_start), [service]
                )
            )
        count = len(self.stories)
        self.setting_stories(subject)
        first += self.stories[count:]  # a drop-in that sets LimitNOFILE= is evidence of it
        reload = self.free(subject, "unit:need_daemon_reload")
        on_disk = [s for s in first if s.root.key.startswith(_ON_DISK)]
        if reload is not None and _value(reload.after) == "yes" and not on_disk:
            if not self.unclaimed(subject, "unit:file:"):
                # Only systemd's word that something changed: what, drift cannot say.
                label = f"{NOT_APPLIED}, after systemctl daemon-reload (unit file changed on disk)"
                self.add(reload, [], "pending", label, unit_title(reload), [service])
                reload = None
        others = [
            c
            for c in self.unclaimed(subject, "unit:")
            if c.key not in ("unit:active_state", "unit:load_state")
            and c is not reload
            and c.key not in UNIT_RUNTIME_KEYS
            and not unit_setting(c.key)
        ]
        others.sort(key=_unit_root_order)
        if first:
            # Settings that carry the change (a new drop-in) are evidence of it.
            story = (on_disk or first)[0]
            at = next(i for i, s in enumerate(self.stories) if s is story)
            self.stories[at] = replace(
                story, evidence=(*story.evidence, *self.take(*others, reload))
            )
        elif others or reload is not None:
            root, *rest = [c for c in (*others, reload) if c is not None]
            if root.key.startswith("unit:file:") and not_loaded:
                status, label = "pending", NOT_RELOADED
            elif root.key == "unit:envfile_ignored":
                status, label = "changed", "systemd skips such a line: no process gets it"
            elif root.key.startswith("unit:envfile_sha256:"):
                status, label = "changed", "no variable it gives changed"
            else:
                status, label = self.restarted_status(service, root)
            rest += self.watched(root)
            title = unit_title(root, not_loaded=not_loaded and root.key.startswith("unit:file:"))
            self.add(root, rest, status, label, title, [service])

    def unit_variables(self, subject: str) -> list[list[Change]]:
        """The changes of each variable, across systemd's sources, the one to root first.

        The source the next start takes it from comes first: an
        EnvironmentFile= over Environment= (as loaded), then the files on
        disk (not loaded yet), then PassEnvironment=.
        """
        by_name: dict[str, dict[str, Change]] = {}
        for prefix in _VARIABLE_ROOTS:
            for change in self.unclaimed(subject, prefix):
                by_name.setdefault(change.key.removeprefix(prefix), {})[prefix] = change
        return [
            [found[p] for p in _VARIABLE_ROOTS if p in found]
            for _n, found in sorted(by_name.items())
        ]

    def variable_story(self, service: str, changes: list[Change], not_loaded: bool) -> Story:
        """A variable of a unit changed in one or more systemd sources: one story, file and line."""
        root, *rest = changes
        prefix = next(p for p in _VARIABLE_ROOTS if root.key.startswith(p))
        name = root.key.removeprefix(prefix)
        mirror: Change | None = None
        if prefix == "unit:disk_environment:":
            # Only the files changed: systemd holds what it loaded before.
            if not_loaded:
                status: Status = "pending"
                label = NOT_RELOADED
            else:
                status, label = "changed", "in the unit's files, while systemd's loaded value stays"
        else:
            status, label, mirror = self.applied(service, root, f"env:{name}")
            stronger = self.sources.overridden(service, name, prefix)
            if stronger is not None and status != "live":
                label = f"{label}; {stronger}"
        evidence = [mirror, *rest]
        for change in (root, *rest):
            evidence += self.watched(change)
        title = unit_title(root, not_loaded=prefix == "unit:disk_environment:" and not_loaded)
        return self.add(root, evidence, status, label, title, [service])

    def watched(self, change: Change) -> list[Change]:
        """The changes of the file a unit fact names: its text or digest, its [[files]] entry.

        The file is the one of the fact's provenance; a [[files]] entry
        watching it from the host (through a container's /proc/PID/root) is
        the same file.
        """
        latest = change.after or change.before
        file = latest.provenance.get("file") if latest is not None else None
        if not isinstance(file, str) or not file.startswith("/"):
            return []
        found = [
            self.free(change.subject, f"unit:file:{file}"),
            self.free(change.subject, f"unit:envfile_sha256:{file}"),
        ]
        root = latest.provenance.get("root") if latest is not None else None
        subjects = {f"file:{file}"}
        if isinstance(root, str) and root not in ("", "/"):
            subjects.add(f"file:{root.rstrip('/')}{file}")
        for subject in sorted(subjects):
            found += self.unclaimed(subject)
        return [c for c in found if c is not None]

    def manager_stories(self) -> None:
        """A variable of the systemd manager's environment: the services started since pick it up.

        Only services found by unit are started by the manager; one whose
        unit or serve script sets the name itself is not affected.
        """
        units = sorted(
            service_name(s) or s
            for s, k in self.after
            if k == "unit:load_state" and s.startswith("service:")
        )
        for root in self.unclaimed(MANAGER_SUBJECT, "environment:"):
            name = root.key.removeprefix("environment:")
            verdicts: dict[Status, list[tuple[str, str, Change | None]]] = {}
            for service in units:
                if self.sources.overridden(service, name, "manager") is not None:
                    continue
                status, label, mirror = self.applied(service, root, f"env:{name}")
                verdicts.setdefault(status, []).append((service, label, mirror))
            for status in ("live", "pending", "on-disk"):
                if status in verdicts:
                    found = verdicts[status]
                    break
            else:
                label = "no service recorded that systemd starts picks it up"
                self.add(root, [], "changed", label, manager_title(root))
                continue
            services = [service for service, _l, _m in found]
            mirrors = [mirror for _s, _l, mirror in found]
            labels = list(dict.fromkeys(label for _s, label, _m in found))
            if labels == [NOT_APPLIED]:
                label = f"{NOT_APPLIED} of {', '.join(services)}"
            else:
                label = "; ".join(labels)
            self.add(root, mirrors, status, label, manager_title(root), services)

    def setting_stories(self, subject: str) -> None:
        """Each changed launch setting (User=, LimitNOFILE= ...) is a story of its own.

        Compared with the live process where it shows (User= with its user,
        WorkingDirectory= with its folder); else a start after the change
        decides, like any unit setting. Restart= is systemd's own, in effect
        once loaded. Settings only first recorded by this drift are left for
        `runtime_story`.
        """
        service = service_name(subject) or subject
        live_keys = {"unit:user": ("user", _same), "unit:working_directory": ("cwd", _folder)}
        for change in self.unclaimed(subject, "unit:"):
            if not unit_setting(change.key) or self.first_recorded(change):
                continue
            compared = None
            if change.key in live_keys:
                compared = self.compared(service, change, *live_keys[change.key])
            if compared is not None:
                status, label = compared
            elif change.key == "unit:restart":
                # systemd reports what it has loaded: in effect at the process's next exit.
                status = "live"
                label = f"in effect: systemd acts on it when {service}'s process next exits"
            else:
                status, label = self.restarted_status(service, change)
            self.add(change, [], status, label, unit_title(change), [service])

    def compared(
        self,
        service: str,
        change: Change,
        live_key: str,
        forms: Callable[[str], list[str] | None],
    ) -> tuple[Status, str] | None:
        """A unit setting against the live fact it shows in: live, pending, or None (unknown).

        `forms` gives the live values a setting's value may appear as (None:
        it cannot be told). Live when the process has the new value; pending
        when it still has the old one, and not the new.
        """
        subject = f"service:{service}"
        live = self.after.get((subject, live_key))
        if live is None or live.value is None or self.not_running(service) is not None:
            return None
        new = forms(change.after.value or "") if change.after is not None else None
        old = forms(change.before.value or "") if change.before is not None else None
        if new is not None and live.value in new:
            return "live", self.live_label(service, removed=False)
        if new is not None and old is not None and live.value in old:
            pid = _value(self.after.get((subject, "pid")))
            where = f"{service} (pid {pid})" if pid else service
            return "pending", f"{NOT_APPLIED}; {where} still runs with the old value"
        return None

    # ------------------------------------------------------------ running or not

    def state_story(self, subject: str) -> None:
        """A service that stopped or started: its process facts ending or beginning are evidence.

        A service failing now is told as what it is ("crash-looping since ..."):
        a symptom, whose cause is what changed before it.
        """
        running = self.free(subject, "running")
        service = service_name(subject) or subject
        failure = self.failures.get(service)
        symptom = f"a symptom, not a cause: look at what changed before {service} began to fail"
        if running is None:
            active = self.free(subject, "unit:active_state")
            if active is not None:
                failed = failure is not None and failure.ongoing
                self.add(
                    active,
                    [self.free(subject, "unit:load_state")],
                    "changed",
                    symptom if failed else plain_label(active),
                    f"{service} {failure.summary()}"
                    if failure and failed
                    else generic_title(active),
                    [service],
                )
            return
        rest = [c for c in self.unclaimed(subject) if c is not running]
        if failure is not None and failure.ongoing:
            title = f"{service} {failure.summary()}"
            self.add(running, rest, "changed", symptom, title, [service])
        elif _value(running.after) == "true":
            pid = _value(self.after.get((subject, "pid")))
            label = f"running (pid {pid})" if pid else "running"
            title = f"{service} started" + ("" if running.before else " (first seen)")
            self.add(running, rest, "live", label, title, [service])
        else:
            gone = "no longer recorded" if running.after is None else "not running now"
            self.add(running, rest, "changed", gone, f"{service} stopped", [service])

    def first_recorded(self, change: Change) -> bool:
        """A unit fact this drift records and the one at the baseline did not (not an edit).

        systemd's SubState is recorded for every unit: when it first appears
        in the window for a unit recorded before, drift began recording
        systemd's runs and settings then, and what appeared with it was there
        all along.
        """
        if change.kind != "added" or change.after is None:
            return False
        sub = self.by_ident.get((change.subject, "unit:sub_state"))
        load = self.by_ident.get((change.subject, "unit:load_state"))
        return (
            sub is not None
            and sub.kind == "added"
            and sub.after is not None
            and sub.after.first_snapshot_id == change.after.first_snapshot_id
            and (load is None or load.kind != "added")
            and (change.subject, "unit:load_state") in self.after
        )

    def runtime_story(self, subject: str) -> None:
        """systemd's words on the runs that nothing above claimed: context, never a suspect.

        They join a story of the service when it has one; else they are one
        story of their own, the least likely: the settings drift only began
        to record, or a run's outcome that changed with nothing else.
        """
        left = [
            c
            for c in self.unclaimed(subject, "unit:")
            if c.key in UNIT_RUNTIME_KEYS or (unit_setting(c.key) and self.first_recorded(c))
        ]
        if not left:
            return
        for at, story in enumerate(self.stories):
            if story.root.subject == subject:
                self.stories[at] = replace(story, evidence=(*story.evidence, *self.take(*left)))
                return
        service = service_name(subject) or subject
        root, *rest = sorted(left, key=lambda c: (c.key != "unit:sub_state", c.key))
        if all(self.first_recorded(c) for c in left):
            assert root.after is not None
            snapshot = root.after.first_snapshot_id
            title = f"{service}: systemd's view of its runs and settings recorded since #{snapshot}"
            label = "first recorded by this drift, not a change on the box"
        else:
            title = f"{service}: systemd's view of its runs changed"
            label = "how its runs went: context, not a cause"
        self.add(root, rest, "changed", label, title, [service])

    # ------------------------------------------------------------ live process

    def live_stories(self, subject: str) -> None:
        """Live env and flags nothing above explains, then the command line itself."""
        service = service_name(subject) or subject
        not_running = self.not_running(service)
        if not_running is None and service in self.restarts:
            self.environment_stories(service)
        for root in self.unclaimed(subject, "env:"):
            label = self.sources.env_source(service, root)
            status: Status = "unsourced" if not_running is None else "changed"
            self.add(root, [], status, label, live_title(root, service), [service])
        for root in self.unclaimed(subject, "flag:"):
            label = self.sources.flag_source(service, root)
            status = "unsourced" if not_running is None else "changed"
            self.add(
                root,
                [self.free(subject, "argv")],
                status,
                label,
                live_title(root, service),
                [service],
            )
        line = [c for c in (self.free(subject, k) for k in COMMAND_LINE_KEYS) if c is not None]
        if line:
            root, *rest = line
            if not_running is None:
                status, label = "live", self.live_label(service, removed=False)
            else:
                status, label = "changed", not_running
            self.add(root, rest, status, label, live_title(root, service), [service])

    def environment_stories(self, service: str) -> None:
        """Live variables nothing recorded sets, changed at the same start: one story per start.

        A service restarted by hand from another shell brings that shell's
        HOME, PATH, SHLVL and the rest: one change (where it was started
        from), not a suspect per variable. Variables a script line or the
        unit gives stay stories of their own.
        """
        together: dict[int, list[Change]] = {}
        for change in self.unclaimed(f"service:{service}", "env:"):
            if self.sources.inherited(service, change):
                together.setdefault(change.changed_us, []).append(change)
        for changes in together.values():
            if len(changes) < 2:
                continue  # one variable: its own story says more
            root, *rest = sorted(changes, key=environment_order)
            label = (
                f"{len(changes)} variables inherited from what started {service} "
                "(no recorded script line or unit sets them)"
            )
            title = f"the environment {service} was started from changed: {variable_names(changes)}"
            self.add(root, rest, "unsourced", label, title, [service])

    # ------------------------------------------------------------ files, repos, commands

    def subject_stories(self) -> None:
        """One story per changed file, command and health check; two per repository."""
        for subject in sorted({c.subject for c in self.unclaimed()}):
            kind = subject.split(":", 1)[0]
            if kind == "file":
                self.one_story(subject, _FILE_ROOTS, "on-disk")
            elif kind == "repo":
                self.one_story(subject, _REPO_ROOTS, "on-disk")
                self.one_story(subject, WORKTREE_KEYS, "on-disk")
            elif kind == "command":
                self.one_story(subject, ("exit", "stdout"), "changed")

    def one_story(self, subject: str, keys: Sequence[str], status: Status) -> None:
        found = [c for c in (self.free(subject, k) for k in keys) if c is not None]
        if found:
            root, *rest = found
            label = plain_label(root)
            if status == "on-disk":
                status, label = self.disk_status(root, label)
            self.add(root, rest, status, label, generic_title(root))

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
    "unit:file:",
    "unit:drop_ins",
    "unit:fragment_path",
    "unit:environment_files",
    "unit:need_daemon_reload",
)
# A variable of a unit, by the source its story is rooted at, first choice first.
_VARIABLE_ROOTS = (
    "unit:envfile:",
    "unit:environment:",
    "unit:disk_environment:",
    "unit:pass_environment:",
)
# What tells of the unit's files on disk, loaded or not.
_ON_DISK = ("unit:disk_environment:", "unit:file:")
_FILE_ROOTS = (*FILE_IDENTITY_KEYS, "mode", "size")
_REPO_ROOTS = ("head", "branch", "state", "shallow")


# ---------------------------------------------------------------- small helpers


def _unit_root_order(change: Change) -> tuple[int, str]:
    """Which of a unit's other changed settings roots its story: a file's text first."""
    for i, prefix in enumerate(_UNIT_ROOTS):
        if change.key.startswith(prefix) if prefix.endswith(":") else change.key == prefix:
            return i, change.key
    return len(_UNIT_ROOTS), change.key


def _value(version: StoredVersion | None) -> str | None:
    return None if version is None else version.value


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


def _same(value: str) -> list[str] | None:
    """A setting the live fact shows as it is (User= and the process's user)."""
    return [value] if value else None


def _folder(value: str) -> list[str] | None:
    """WorkingDirectory= as the process's folder: without its `-`/`!` marks; `~` is unknown."""
    folder = value.lstrip("-!")
    return [folder] if folder.startswith("/") else None


def _argv_lines(value: str) -> list[str] | None:
    """ExecStart= lines as the live ``argv`` fact shows a command line (a JSON list)."""
    try:
        return [json.dumps(shlex.split(line)) for line in value.splitlines() if line]
    except ValueError:
        return None


def _line(change: Change) -> int:
    latest = change.after or change.before
    line = latest.provenance.get("line") if latest is not None else None
    return line if isinstance(line, int) else 1 << 30


def _listed(service: str | None) -> list[str]:
    return [service] if service else []
