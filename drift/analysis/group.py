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

from collections.abc import Callable, Iterable, Mapping, Sequence
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
from drift.analysis.timing import Records, Span, parse_time_us
from drift.analysis.titles import (
    NOT_APPLIED,
    about_the_same_time,
    content_title,
    generic_title,
    joined_names,
    plain_label,
)
from drift.analysis.unit_history import ServiceRuns
from drift.analysis.unit_stories import UnitStories
from drift.store.query import SnapshotInfo, StoredVersion


def group_changes(
    changes: Sequence[Change],
    after: State,
    records: Iterable[SnapshotInfo] = (),
    *,
    runs: Mapping[str, ServiceRuns] | None = None,
    failures: Mapping[str, Failure] | None = None,
    text: Callable[[StoredVersion], str] | None = None,
    values: Iterable[StoredVersion] = (),
) -> tuple[list[Story], list[RestartEvent]]:
    """Stories (one per suspect) and restart events from the changes up to the state `after`.

    `records` are the snapshots from the baseline to `after`: they tell
    between which two records each change happened, so a start is called
    before or after a change only when it is. `runs` are the services' runs
    inside the window (`drift.analysis.unit_history`), to count restarts,
    and `failures` the services seen failing (`drift.analysis.failures`).
    `text` reads a stored text (a kept file's content), to title a config
    file's story by the keys that changed. `values` are the versions begun inside the
    window (of the services' facts at least), so a knob set twice tells both values.
    Every change lands in exactly one story (as root or evidence) or in one
    restart. The result does not depend on the order of `changes`.
    """
    grouper = _Grouper(changes, after, Records(records, after))
    grouper.runs = dict(runs or {})
    grouper.failures = dict(failures or {})
    if text is not None:
        grouper.text = text
    for version in sorted(values, key=lambda v: v.first_taken_us):
        grouper.window_values.setdefault((version.subject, version.key), []).append(version)
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
        self.script_stories()
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
        stories = distinct_titles(stories)
        self.check_partition(stories)
        return stories, co_restarts(self.restarts.values())

    def check_partition(self, stories: Sequence[Story]) -> None:
        """Every change is in exactly one story or restart: a change told twice is two answers."""
        placed = [id(c) for s in stories for c in s.changes]
        placed += [id(c) for r in self.restarts.values() for c in r.changes]
        assert sorted(placed) == sorted(map(id, self.changes)), "a change in no or two stories"

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
        a live one's value ran from the first start that took it (`Applied.live_start`).

        Only a restart that could have taken the change up is evidence of it: one whose
        latest start came after the change or at about the same time, never one known
        to be before it (a service of a shared file that has not started since the edit).
        """
        if story.status not in ("live", "launched", "unsourced", "failing") or story.restarts:
            return story
        changed = self.records.span(story.root)
        found = tuple(
            self.restarts[s]
            for s in story.services
            if s in self.restarts
            and (self.restarts[s].started or Span.start(self.restarts[s].at_us)).order(changed)
            != "before"
        )
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
                self.file_story(subject)
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

    def file_story(self, subject: str) -> None:
        """A watched file's change is one story: the file appeared or went, or what changed in it.

        A kept text (``content = true``) roots it, titled by the keys that
        moved for a config file; the digest, size and mode are its evidence.
        Services whose command line names the file are the ones it concerns.
        """
        whole = [c for c in (self.free(subject, k) for k in FILE_IDENTITY_KEYS) if c]
        content = self.free(subject, "content")
        rest = [c for c in (self.free(subject, k) for k in ("mode", "size")) if c]
        if whole and whole[0].kind != "modified" or content is None:
            found = [*whole, *rest, *([content] if content else [])]
        else:
            found = [content, *whole, *rest]
        if not found:
            return
        root, *evidence = found
        path = subject.removeprefix("file:")
        readers = self.named_on_command_line(path)
        status, label = self.disk_status(root, plain_label(root), readers)
        title = generic_title(root)
        if root is content and content.before is not None and content.after is not None:
            title = content_title(path, content, self.text)
        if readers:
            title += f", named on the command line of {joined_names(readers)}"
        self.add(root, evidence, status, label, title, readers)

    def named_on_command_line(self, path: str) -> list[str]:
        """The running services whose live command line has `path` as a word, or in one."""
        found = []
        for name in sorted(self.running_starts()):
            argv = value_of(self.after.get((f"service:{name}", "argv")))
            if argv and path in argv:
                found.append(name)
        return found

    def disk_status(
        self, change: Change, described: str, readers: Sequence[str] = ()
    ) -> tuple[Status, str]:
        """A file or repo changed on disk: pending if every running service predates it.

        A process loads its code and config when it starts, so a change made
        after every running service started cannot be in any of them yet.
        """
        started = self.running_starts()
        if readers:
            started = {name: at for name, at in started.items() if name in readers}
        if not started:
            return "on-disk", described
        # The change happened somewhere between the record before the one
        # that saw it and that one: a service started in that interval is in
        # no known order with it, so it is not counted as predating it.
        span = self.records.span(change)
        order = {name: at.order(span) for name, at in started.items()}
        if all(o == "before" for o in order.values()):
            who = joined_names(sorted(order)) if readers else "every running service"
            return "pending", f"{NOT_APPLIED} ({who} started before it)"
        later = sorted(name for name, o in order.items() if o == "after")
        unknown = sorted(name for name, o in order.items() if o == "unknown")
        it = "it" if change.before is not None else "it appeared"
        if later:
            described = f"{described}; {', '.join(later)} started after {it}{span.by}"
        if unknown:
            shown_at = [
                parse_time_us(value_of(self.after[f"service:{n}", "started_at"])) for n in unknown
            ]
            when = about_the_same_time([at for at in shown_at if at is not None], span)
            described = f"{described}; {', '.join(unknown)} started {when}"
        return "on-disk", described


def distinct_titles(stories: Sequence[Story]) -> list[Story]:
    """The stories with no two titles alike: a shared title gets what tells them apart.

    Two stories are two suspects; titled alike they would read as one told
    twice. The services each concerns tell them apart, else the fact.
    """
    out = list(stories)
    groups: dict[str, list[int]] = {}
    for i, story in enumerate(out):
        groups.setdefault(story.title, []).append(i)
    taken = set(groups)
    for title, same in groups.items():
        if len(same) < 2:
            continue
        for tell in (_by_services, _by_fact, _by_number):
            titles = [f"{title} ({tell(out[i], n)})" for n, i in enumerate(same, 1)]
            if len(set(titles)) == len(titles) and not taken & set(titles):
                break
        taken.update(titles)
        for i, new in zip(same, titles, strict=True):
            out[i] = replace(out[i], title=new)
    return out


def _by_services(story: Story, _: int) -> str:
    return f"in {joined_names(story.services)}" if story.services else "no service"


def _by_fact(story: Story, _: int) -> str:
    return f"{story.root.subject} {story.root.key}"


def _by_number(_: Story, n: int) -> str:
    return f"#{n}"


def _shown_in(story: Story, service: str) -> Change | None:
    """The service's own fact among a story's changes (a variable, a flag, its command line
    or a mapped library): what shows the change in its process, if any."""
    subject = f"service:{service}"
    return next((c for c in story.changes if c.subject == subject and c.key not in _RUN_KEYS), None)


_RUN_KEYS = frozenset({"running", "pid", "ppid", "started_at"})
_FILE_ROOTS = (*FILE_IDENTITY_KEYS, "mode", "size")
_REPO_ROOTS = ("head", "branch", "state", "shallow")
