"""Stories of the files a service's process maps: libraries replaced under it, and taken up.

A room of the grouper (see `drift.analysis.group`), after the package room:
the ``lib:PATH`` and ``lib_disk:PATH`` changes (`drift.collectors.libraries`)
no package story claimed. A library replaced (or deleted) on disk while the
process still maps the old one is pending; a mapped library whose bytes
changed is live, since the restart that mapped the new one, or at once when
it was rewritten in place under the running process. Libraries of one package
(or, without one, of one folder) that changed between the same two records
are one story, not one each. A library that appears or goes with a restart
(another code path loaded) is context of that restart, not a suspect; one
loaded or dropped while the process ran is one story per service and record.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from drift.analysis.applied import Applied
from drift.analysis.claims import value_of
from drift.analysis.diff import Change
from drift.analysis.story import Status
from drift.analysis.titles import NOT_APPLIED

LIB = "lib:"
LIB_DISK = "lib_disk:"
DELETED = "deleted"  # drift.collectors.libraries.DELETED, as stored


class LibraryStories(Applied):
    """The mapped-library pass of the grouper."""

    def library_stories(self, subject: str) -> None:
        """Replaced-on-disk, changed-in-the-process and loaded-at-runtime libraries of a service."""
        service = subject.partition(":")[2]
        if self.not_running(service) is not None:
            return  # its state story holds what ended with the process
        self._replaced_on_disk(subject, service)
        self._mapped_changed(subject, service)
        self._loaded(subject, service)

    def _replaced_on_disk(self, subject: str, service: str) -> None:
        """lib_disk appeared or moved: the path holds other bytes than the process runs."""
        found = [c for c in self.unclaimed(subject, LIB_DISK) if c.after is not None]
        for group in _batches(found):
            pid = value_of(self.after.get((subject, "pid")))
            where = f"{service} (pid {pid})" if pid else service
            deleted = [c for c in group if value_of(c.after) == DELETED]
            verb = "deleted" if len(deleted) == len(group) else "replaced"
            old = "the deleted file" if verb == "deleted" else "the old one"
            if len(group) > 1:
                old = "the deleted files" if verb == "deleted" else "the old ones"
            title = f"{_names(group)} {verb} on disk; {where} still maps {old}"
            label = f"{NOT_APPLIED} ({where} still maps {old})"
            evidence = [self.free(subject, LIB + c.key[len(LIB_DISK) :]) for c in group]
            self.add(group[0], [*group[1:], *evidence], "pending", label, title, [service])

    def _mapped_changed(self, subject: str, service: str) -> None:
        """lib changed its bytes: mapped anew at a restart, or rewritten under the process."""
        found = [c for c in self.unclaimed(subject, LIB) if c.kind == "modified"]
        for group in _batches(found):
            gone = [self.free(subject, LIB_DISK + c.key[len(LIB) :]) for c in group]
            status: Status = "live"
            if self._at_restart(service, group[0]):
                label = self.live_label(service, group[0], live=group[0])
                title = f"{_names(group)} changed: {label}"
            else:
                pid = value_of(self.after.get((subject, "pid")))
                label = (
                    f"rewritten in place while {service} (pid {pid}) had it mapped: "
                    "the running process reads the new bytes (and may crash on them)"
                )
                title = f"{_names(group)} rewritten in place under {service}"
            self.add(group[0], [*group[1:], *gone], status, label, title, [service])

    def _loaded(self, subject: str, service: str) -> None:
        """Libraries that appeared or went: context of a restart, else loaded while running."""
        found = self.unclaimed(subject, LIB) + self.unclaimed(subject, LIB_DISK)
        at_restart = [c for c in found if self._at_restart(service, c)]
        restart = self.restarts.get(service)
        if restart is not None and at_restart:
            # Another code path loaded by the new process: the restart accounts for it.
            self.restarts[service] = replace(
                restart, changes=(*restart.changes, *self.take(*at_restart))
            )
        taken = {id(c) for c in at_restart}
        rest = [c for c in found if id(c) not in taken]
        by_record: dict[int, list[Change]] = {}
        for change in rest:
            by_record.setdefault(change.changed_us, []).append(change)
        for _at, group in sorted(by_record.items()):
            added = [c for c in group if c.kind == "added" and c.key.startswith(LIB)]
            removed = [c for c in group if c.kind == "removed" and c.key.startswith(LIB)]
            words = []
            if added:
                words.append(f"{_names(added)} loaded")
            if removed:
                words.append(f"{_names(removed)} unloaded")
            title = f"{'; '.join(words) or _names(group) + ' changed'} by {service} while it ran"
            label = f"{service} mapped or dropped these without a restart (dlopen, a plugin)"
            told = {id(c) for c in (*added, *removed)}
            root, *others = [*added, *removed, *(c for c in group if id(c) not in told)]
            self.add(root, others, "changed", label, title, [service])

    def _at_restart(self, service: str, change: Change) -> bool:
        """Whether the change was first recorded with the service's new process."""
        restart = self.restarts.get(service)
        if restart is None:
            return False
        seen = [c.changed_us for c in restart.changes if c.key in ("pid", "started_at")]
        return bool(seen) and change.changed_us == max(seen)


def _batches(changes: Sequence[Change]) -> list[list[Change]]:
    """Changes of one package (or folder) first recorded by the same record, in path order."""
    out: dict[tuple[int, str], list[Change]] = {}
    for change in changes:
        out.setdefault((change.changed_us, _owner(change)), []).append(change)
    return [out[k] for k in sorted(out)]


def _owner(change: Change) -> str:
    """The package that installed the library, else its folder: what one story gathers."""
    latest = change.after or change.before
    package = latest.provenance.get("package") if latest is not None else None
    if isinstance(package, str) and package:
        return "package " + package
    return os.path.dirname(change.key.partition(":")[2])


def _names(changes: Sequence[Change]) -> str:
    """The libraries' file names: all of three or fewer, else two, how many more and where."""
    names = [os.path.basename(c.key.partition(":")[2]) for c in changes]
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}, {names[1]} and {len(names) - 2} more of {_owner(changes[0])}"
