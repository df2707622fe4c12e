"""Stories of serve scripts and of the live process: exports, flags, what nothing explains.

A room of the grouper (see `drift.analysis.group`). Each export or exec
flag a serve script changed is a story, applied or not in its service's
process (`drift.analysis.applied`); the script's exec line, its text and
the files it sources are evidence. Then the live process's variables and
flags that nothing recorded explains (`drift.analysis.sources` says where
they may come from), and its command line.
"""

from __future__ import annotations

from drift.analysis.applied import Applied
from drift.analysis.diff import Change
from drift.analysis.kinds import COMMAND_LINE_KEYS, service_name
from drift.analysis.story import Status
from drift.analysis.titles import environment_order, live_title, script_title, variable_names


class ProcessStories(Applied):
    """The serve-script and live-process passes of the grouper."""

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


def _line(change: Change) -> int:
    latest = change.after or change.before
    line = latest.provenance.get("line") if latest is not None else None
    return line if isinstance(line, int) else 1 << 30


def _listed(service: str | None) -> list[str]:
    return [service] if service else []
