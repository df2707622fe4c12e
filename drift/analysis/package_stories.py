"""Stories of what a Python service runs: its interpreter and its distributions.

A room of the grouper (see `drift.analysis.group`). One story per
distribution per service ("flashinfer-python 0.2.5 -> 0.2.6 in the venv of
decode (/opt/venv)"), its source and its checkout's HEAD joining it, and the
shared libraries whose provenance names that distribution (``lib:PATH`` with
``{"package": NAME}``): a torch upgrade is one story, not fifty. Another
interpreter (the ``python`` fact changed: another venv) is one story, every
package and library change of the service its evidence; so is a service
whose Python is recorded for the first time. Whether the process has it is
told by its start (`Applied.restarted_status`): a process keeps the code it
loaded, so a change on disk is pending until it starts again.
"""

from __future__ import annotations

from drift.analysis.applied import Applied
from drift.analysis.claims import value_of
from drift.analysis.diff import Change
from drift.analysis.kinds import service_name
from drift.analysis.story import Status

_PACKAGE_KEYS = ("package:", "package_source:", "package_head:")
_LIBRARY = ("lib:", "lib_disk:")  # as mapped, and as on disk while it differs


class PackageStories(Applied):
    """The Python pass of the grouper: an interpreter, then each distribution, per service."""

    def package_stories(self, subject: str) -> None:
        """The stories of one service's interpreter and distributions."""
        service = service_name(subject) or subject
        python = self.free(subject, "python")
        if python is not None:
            self.interpreter_story(service, python)
            return
        names = sorted(
            {
                c.key.partition(":")[2]
                for prefix in _PACKAGE_KEYS
                for c in self.unclaimed(subject, prefix)
            }
        )
        for name in names:
            self.package_story(service, name)
        path = self.free(subject, "python:path")
        if path is not None:
            status, label = self.restarted_status(service, path)
            title = f"the Python path of {service} changed"
            self.add(path, [], status, label, title, [service])

    def interpreter_story(self, service: str, python: Change) -> None:
        """Another interpreter, or one first recorded: one story with every package change."""
        subject = f"service:{service}"
        evidence = [self.free(subject, "python:path")]
        for prefix in (*_PACKAGE_KEYS, *_LIBRARY):
            evidence += self.unclaimed(subject, prefix)
        packages = sum(1 for c in evidence if c is not None and c.key.startswith("package:"))
        status: Status
        if python.kind == "added" and service not in self.restarts:
            status, label = "changed", "first recorded by this drift, not a change on the box"
            title = f"{service} runs Python in {value_of(python.after)} ({packages} packages)"
        elif python.kind == "removed":
            status, label = "changed", f"{service} no longer runs a Python drift reads"
            title = f"{service} no longer runs Python from {value_of(python.before)}"
        else:
            status, label = self.restarted_status(service, python)
            was = f" (was {value_of(python.before)})" if python.before is not None else ""
            title = (
                f"{service} runs another Python: {value_of(python.after)}{was}, "
                f"{packages} packages changed"
            )
        self.add(python, evidence, status, label, title, [service])

    def package_story(self, service: str, name: str) -> None:
        """One distribution: its version, source and checkout, and the libraries it ships."""
        subject = f"service:{service}"
        found = [self.free(subject, f"{prefix}{name}") for prefix in _PACKAGE_KEYS]
        changes = [c for c in found if c is not None]
        if not changes:
            return
        root, *rest = changes
        libraries = [
            c for prefix in _LIBRARY for c in self.unclaimed(subject, prefix) if _ships(c, name)
        ]
        status, label = self.restarted_status(service, root)
        if status == "pending" and not libraries:
            # Python code is read at import, and no mapped file shows when: a module
            # imported for the first time after the change is the new one.
            label += f" (unless {service} first imports it after the change)"
        unsure = root.after.provenance.get("unsure") if root.after is not None else None
        if isinstance(unsure, str):
            label += f"; unsure: {unsure}"
        title = f"{_what(root, name)} in {self.where(service)}"
        self.add(root, [*rest, *libraries], status, label, title, [service])

    def where(self, service: str) -> str:
        """``the venv of decode (/opt/venv)``, or ``the Python of decode (/usr)``."""
        python = self.after.get((f"service:{service}", "python"))
        if python is None or python.value is None:
            return f"the Python of {service}"
        base = python.provenance.get("base_prefix")
        kind = "the Python" if base == python.value else "the venv"
        return f"{kind} of {service} ({python.value})"


def _ships(change: Change, name: str) -> bool:
    """Whether a library change's provenance (after or before) names this distribution."""
    return any(
        v is not None and v.provenance.get("package") == name for v in (change.after, change.before)
    )


def _what(root: Change, name: str) -> str:
    """What changed of a distribution, in words: ``torch 2.4.0 -> 2.5.1``."""
    old, new = value_of(root.before), value_of(root.after)
    if root.key.startswith("package_head:"):
        if old is None or new is None:
            return f"{name}'s checkout {'at ' + new[:12] if new else 'no longer read'}"
        return f"{name}'s checkout moved to {(new or '')[:12]} (was {(old or '')[:12]})"
    if root.key.startswith("package_source:"):
        return f"{name} now installed from {new} (was {old})"
    if old is None:
        return f"{name} {new} installed"
    if new is None:
        return f"{name} {old} removed"
    return f"{name} {old} -> {new}"
