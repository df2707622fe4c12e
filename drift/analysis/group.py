"""Group changes linked by provenance into stories, and restarts into events.

Every change lands in exactly one story (see `drift.analysis.story`), as its
root or as evidence, or in one restart (see `drift.analysis.restarts`): the
grouper claims changes in order of how much a story explains, serve scripts
first, then units, a service's running state, its live process, and last
files, repositories and commands. The words of titles and labels are in
`drift.analysis.titles`; where a live value could come from is asked of
`drift.analysis.sources`.

The grouper is one object made of rooms, a mixin each, over a base that
holds what has been claimed so far (`drift.analysis.claims`):
`drift.analysis.applied` tells whether a change is in the live process,
`drift.analysis.unit_stories` tells systemd's units and the manager's
environment, `drift.analysis.process_stories` the serve scripts and the
live process, `drift.analysis.package_stories` a Python service's
interpreter and distributions, `drift.analysis.library_stories` the
files its process maps, `drift.analysis.gpu_stories` the GPUs and
their driver, `drift.analysis.endpoint_stories` a server's own view of its
config ([[endpoints]]), `drift.analysis.cache_stories` a JIT cache. This
module puts them together and runs the passes in order; restarts, files,
repositories and commands are told here.

A start is called before or after a change only when their times say so
(see `drift.analysis.timing`); otherwise "at about the same time".

Everything here is pure: changes, the current state and the records' times
in, stories out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from drift.analysis.cache_stories import CacheStories
from drift.analysis.claims import value_of
from drift.analysis.diff import Change, State
from drift.analysis.endpoint_stories import EndpointStories
from drift.analysis.failures import Failure
from drift.analysis.gpu_stories import GpuStories
from drift.analysis.kinds import FILE_IDENTITY_KEYS, WORKTREE_KEYS, category_rank
from drift.analysis.library_stories import LibraryStories
from drift.analysis.package_stories import PackageStories
from drift.analysis.process_stories import ProcessStories
from drift.analysis.restarts import RestartEvent, co_restarts, counted, restart_of
from drift.analysis.story import Status, Story
from drift.analysis.timing import Records, parse_time_us
from drift.analysis.titles import NOT_APPLIED, about_the_same_time, generic_title, plain_label
from drift.analysis.unit_history import ServiceRuns
from drift.analysis.unit_stories import UnitStories
from drift.store.query import SnapshotInfo


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


class _Grouper(
    UnitStories,
    ProcessStories,
    PackageStories,
    LibraryStories,
    GpuStories,
    EndpointStories,
    CacheStories,
):
    """One grouping run: claims changes for stories in order of how much they explain."""

    # ------------------------------------------------------------ the run

    def run(self) -> tuple[list[Story], list[RestartEvent]]:
        """The passes in order, each claiming what it explains; then the stories, sorted."""
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
        for subject in services:
            self.package_stories(subject)
        for subject in services:  # mapped libraries no package story took (library_stories)
            self.library_stories(subject)
        self.subject_stories()
        self.gpu_stories()
        self.endpoint_stories()
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
        """Restarts explain stories that are in a running process (or failing), not pending ones;
        a live one's value ran from the first start that took it (`Applied.live_start`)."""
        if story.status not in ("live", "unsourced", "failing") or story.restarts:
            return story
        found = tuple(self.restarts[s] for s in story.services if s in self.restarts)
        if not found:
            return story
        starts = [
            self.live_starts[id(story.root)]
            if len(found) == 1 and id(story.root) in self.live_starts
            else self.live_start(r.service, story.root, _shown_in(story, r.service))
            for r in found
        ]
        known = [s for s in starts if s is not None]
        first = max(known, key=lambda s: s.at_us) if len(known) == len(starts) else None
        return replace(story, restarts=found, live_from=first)

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
            elif kind == "cache":
                self.cache_story(subject)

    def one_story(self, subject: str, keys: Sequence[str], status: Status) -> None:
        """The free changes of these keys as one story, rooted at the first key's."""
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
        started = self.running_starts()
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
                parse_time_us(value_of(self.after[f"service:{n}", "started_at"])) for n in unknown
            ]
            when = about_the_same_time([at for at in shown_at if at is not None], span)
            described = f"{described}; {', '.join(unknown)} started {when}"
        return "on-disk", described


def _shown_in(story: Story, service: str) -> Change | None:
    """The service's own fact among a story's changes (a variable, a flag, its command line
    or a mapped library): what shows the change in its process, if any."""
    subject = f"service:{service}"
    return next((c for c in story.changes if c.subject == subject and c.key not in _RUN_KEYS), None)


_RUN_KEYS = frozenset({"running", "pid", "ppid", "started_at"})
_FILE_ROOTS = (*FILE_IDENTITY_KEYS, "mode", "size")
_REPO_ROOTS = ("head", "branch", "state", "shallow")
