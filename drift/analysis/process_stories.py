"""Stories of serve scripts and of the live process: exports, flags, what nothing explains.

A room of the grouper (see `drift.analysis.group`). Each edited line that
gives an export or exec flag is a story, applied or not in each process
that reads it (`drift.analysis.applied`): a line of a file several serve
scripts source is one story naming all their services. A file's text (and
a script's exec line) is evidence of an edit in that file. Then the live process's variables and
flags that nothing recorded explains (`drift.analysis.sources` says where
they may come from), and its command line.
"""

from __future__ import annotations

from dataclasses import dataclass

from drift.analysis.applied import Applied
from drift.analysis.diff import Change
from drift.analysis.kinds import COMMAND_LINE_KEYS, service_name
from drift.analysis.story import Status, combined, version_spots
from drift.analysis.titles import (
    environment_order,
    joined_names,
    live_title,
    script_title,
    variable_names,
)
from drift.store.query import StoredVersion


class ProcessStories(Applied):
    """The serve-script and live-process passes of the grouper."""

    # ------------------------------------------------------------ serve scripts

    def script_stories(self) -> None:
        """One story per edited line, whichever serve scripts read the file it is in.

        Each export or exec flag a script changed is a root; the same line of
        a file several scripts source (a common.env) is one edit, so their
        changes are one story naming every service that reads it, its status
        the strongest of theirs. A script's exec line and text, and the text
        of each file it sources, join the first story of a line in that file;
        a text no such story explains is a story of its own.
        """
        scripts = sorted({c.subject for c in self.changes if c.subject.startswith("script:")})
        serve = [s for s in scripts if self.sourced_by(s) is None]
        edits: dict[tuple[object, ...], list[Change]] = {}
        for subject in serve:
            for change in self.unclaimed(subject, "export:") + self.unclaimed(subject, "flag:"):
                edits.setdefault(_edit_of(change), []).append(change)
        drafts = sorted(
            (self.edit_draft(members) for members in edits.values()),
            key=lambda d: (_line(d.root), d.root.subject, d.root.key),
        )
        for subject in scripts:
            path = subject.removeprefix("script:")
            in_file = [d for d in drafts if path in d.files]
            # The exec line goes with a flag it gives, the text with the file's first edit.
            flags = [d for d in in_file if d.root.key.startswith("flag:")]
            alone: list[Change] = []
            for text, owners in (
                (self.free(subject, "exec"), flags or in_file),
                (self.free(subject, "content"), in_file),
            ):
                if text is not None and owners:
                    owners[0].evidence.append(text)
                elif text is not None:
                    alone.append(text)
            if alone:
                drafts.append(self.text_draft(subject, alone))
        for draft in drafts:
            status, label = combined(draft.outcomes)
            self.add(draft.root, draft.evidence, status, label, draft.title, draft.services)

    def edit_draft(self, members: list[Change]) -> _Draft:
        """The story of one edited line, read by each script in `members` (root first)."""
        # The script that reads the line directly is the root; one that passes it on follows.
        members.sort(
            key=lambda c: (
                _passed_on(c) is not None,
                self.script_service.get(c.subject) or "",
                c.subject,
            )
        )
        root = members[0]
        kind, _, name = root.key.partition(":")
        live_key = f"env:{name}" if kind == "export" else root.key
        evidence: list[Change | None] = list(members[1:])
        outcomes: list[tuple[str | None, Status, str]] = []
        for member in members:
            service = self.script_service.get(member.subject)
            status, label, mirror = self.applied(service, member, live_key)
            evidence.append(mirror)
            if kind == "flag" and mirror is not None and service is not None:
                evidence.append(self.free(f"service:{service}", "argv"))
            outcomes.append((service, status, label))
        service = self.script_service.get(root.subject)
        spot, shown_value, was = None, None, None
        # Only a process started from the edited script shows which of its values it took:
        # one still running from before (pending) holds the old line's value.
        runs_it = any(s == service and st in ("live", "launched") for s, st, _ in outcomes)
        if service is not None and root.after is not None and runs_it:
            current = self.after.get((f"service:{service}", live_key))
            found = self.sources.attribute(service, root.after, current)
            if found is not None and found.single is not None:
                # The process singles out one of the script's values: name it.
                spot, shown_value = found.single, current
                mirror = self.by_ident.get((f"service:{service}", live_key))
                was = mirror.before if mirror is not None else None
        title = script_title(root, spot, shown_value, was, self.value_steps(members, live_key))
        files = _files_of(root)
        services = sorted({s for s, _, _ in outcomes if s})
        if root.subject.removeprefix("script:") not in files and services:
            title += f", read by {joined_names(services)}"
        return _Draft(root, evidence, outcomes, title, services, files)

    def value_steps(self, members: list[Change], live_key: str) -> list[StoredVersion]:
        """The values the services' processes took for an edited line inside the window, in
        order, other than their baseline's: a knob set to 512 and then to 256 has two."""
        found: list[StoredVersion] = []
        for member in members:
            service = self.script_service.get(member.subject)
            ident = (f"service:{service}", live_key)
            change = self.by_ident.get(ident)
            if service is None or change is None:
                continue
            baseline = change.before.identity if change.before is not None else None
            found += [v for v in self.window_values.get(ident, []) if v.identity != baseline]
        steps: list[StoredVersion] = []
        for version in sorted(found, key=lambda v: v.first_taken_us):
            if not steps or steps[-1].identity != version.identity:
                steps.append(version)
        return steps

    def text_draft(self, subject: str, texts: list[Change]) -> _Draft:
        """A script's text (or exec line) no line story explains, for the services that read it."""
        root, *rest = texts
        services = sorted(self.readers(subject))
        listed: list[str | None] = [*services] or [None]
        outcomes = [(s, *self.launched_status(s, root)) for s in listed]
        title = script_title(root)
        if self.sourced_by(subject) is not None and services:
            title += f", read by {joined_names(services)}"
        evidence: list[Change | None] = list(rest)
        if root.key == "exec" and len(services) == 1 and outcomes[0][1] == "live":
            evidence.append(self.free(f"service:{services[0]}", "argv"))
        return _Draft(root, evidence, outcomes, title, services, (subject.removeprefix("script:"),))

    def sourced_by(self, subject: str) -> str | None:
        """The script (``script:PATH``) that sources this file, if its facts say so."""
        for change in self.by_subject.get(subject, []):
            latest = change.after or change.before
            spot = latest.provenance.get("sourced_by") if latest is not None else None
            if isinstance(spot, str) and ":" in spot:
                return "script:" + spot.rsplit(":", 1)[0]
        return None

    def readers(self, subject: str) -> set[str]:
        """The services that read this script or sourced file, as the recorded facts tell."""
        if self._readers is None:
            self._readers = {}
            for (script, key), version in self.after.items():
                service = self.script_service.get(script)
                if service and key.startswith(("export:", "flag:", "exec")):
                    for path in _files_of_version(version):
                        self._readers.setdefault(f"script:{path}", set()).add(service)
        found = set(self._readers.get(subject, set()))
        own = self.script_service.get(subject)
        return found | {own} if own else found

    # ------------------------------------------------------------ live process

    def live_stories(self, subject: str) -> None:
        """Live env and flags no earlier pass explains, then the command line itself."""
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
                status, label = "live", self.live_label(service, root, live=root)
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


@dataclass
class _Draft:
    """A story being put together: its root, evidence, and each service's status and label."""

    root: Change
    evidence: list[Change | None]
    outcomes: list[tuple[str | None, Status, str]]
    title: str
    services: list[str]
    files: tuple[str, ...]  # the files its line is in (several when it is not known which)


def _edit_of(change: Change) -> tuple[object, ...]:
    """What makes two script changes one edit: the same key on the same line of the same file.

    An export whose value another line wrote (``export X="${X:-256}"`` after a sourced
    common.env set X) is that line's edit: one story with the scripts that read the line
    directly, never one of its own at the line that only passes the value on.
    """
    latest = change.after or change.before
    assert latest is not None
    written = _passed_on(change)
    if written is not None:
        return ("line", (written,), change.key)
    spots = tuple(sorted(version_spots(latest)))
    return ("line", spots, change.key) if spots else ("fact", change.subject, change.key)


def _passed_on(change: Change) -> tuple[str, int] | None:
    """The (file, line) that wrote an export's value, when the export's own line only passes
    it on; None for any other change."""
    latest = change.after or change.before
    if latest is None or not change.key.startswith("export:"):
        return None
    line = latest.provenance.get("value_line")
    file = latest.provenance.get("value_file") or latest.provenance.get("file")
    return (file, line) if isinstance(line, int) and isinstance(file, str) else None


def _files_of(change: Change) -> tuple[str, ...]:
    latest = change.after or change.before
    assert latest is not None
    return tuple(sorted(_files_of_version(latest)))


def _files_of_version(version: StoredVersion) -> set[str]:
    """The files a script value is read from: its line's, its value line's, every candidate's."""
    files = {f for f, _ in version_spots(version)}
    value_file = version.provenance.get("value_file")
    if isinstance(value_file, str):
        files.add(value_file)
    return files


def _line(change: Change) -> int:
    latest = change.after or change.before
    line = latest.provenance.get("line") if latest is not None else None
    return line if isinstance(line, int) else 1 << 30
