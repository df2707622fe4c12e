"""Stories of systemd units: the variables their sources set, ExecStart=, settings, runs.

A room of the grouper (see `drift.analysis.group`). A variable that a unit's
Environment=, EnvironmentFile= (loaded or only on disk) or PassEnvironment=
sets is one story, named by file and line; so is each variable of the
systemd manager's environment, ExecStart=, and each launch setting (User=,
LimitNOFILE= ...). The unit's files join the first of them as evidence.
Whether the service runs (started, stopped, failing) and systemd's words on
its runs come last: context, never the first suspect.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import replace

from drift.analysis.applied import Applied
from drift.analysis.claims import value_of
from drift.analysis.diff import Change
from drift.analysis.kinds import UNIT_RUNTIME_KEYS, service_name, unit_setting
from drift.analysis.sources import MANAGER_SUBJECT
from drift.analysis.story import Status, Story
from drift.analysis.titles import (
    NOT_APPLIED,
    NOT_RELOADED,
    generic_title,
    manager_title,
    plain_label,
    unit_title,
)


class UnitStories(Applied):
    """The systemd passes of the grouper: units, the manager's environment, running or not."""

    def unit_stories(self, subject: str) -> None:
        """Each variable a systemd source of the unit sets, ExecStart=, then the unit's files."""
        service = service_name(subject) or subject
        not_loaded = value_of(self.after.get((subject, "unit:need_daemon_reload"))) == "yes"
        status: Status
        first = [
            self.variable_story(service, changes, not_loaded)
            for changes in self.unit_variables(subject)
        ]
        exec_start = self.free(subject, "unit:exec_start")
        if exec_start is not None:
            words = " ".join(value_of(v) or "" for v in (exec_start.before, exec_start.after))
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
                shown = argv if argv is not None else flags[0]
                status, label = "live", self.live_label(service, exec_start, live=shown)
            else:
                status, label = self.launched_status(service, exec_start)
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
        if reload is not None and value_of(reload.after) == "yes" and not on_disk:
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
        if live_key == "argv" and subject not in self.argv_readable:
            return None  # kept from before its title was rewritten: not this process's
        new = forms(change.after.value or "") if change.after is not None else None
        old = forms(change.before.value or "") if change.before is not None else None
        if new is not None and live.value in new:
            shown = self.by_ident.get((subject, live_key))
            return "live", self.live_label(service, change, live=shown)
        if new is not None and old is not None and live.value in old:
            pid = value_of(self.after.get((subject, "pid")))
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
        elif value_of(running.after) == "true":
            pid = value_of(self.after.get((subject, "pid")))
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


def _unit_root_order(change: Change) -> tuple[int, str]:
    """Which of a unit's other changed settings roots its story: a file's text first."""
    for i, prefix in enumerate(_UNIT_ROOTS):
        if change.key.startswith(prefix) if prefix.endswith(":") else change.key == prefix:
            return i, change.key
    return len(_UNIT_ROOTS), change.key


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
