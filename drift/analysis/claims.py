"""One grouping run's shared state: the changes, what has been claimed, the stories so far.

`drift.analysis.group` claims every change for exactly one story (or one
restart) in passes, one room each (`drift.analysis.applied`,
`drift.analysis.unit_stories`, `drift.analysis.process_stories`); this is
the base they all stand on. `Claims` holds the changes, the state `after`,
the records' times, the restarts and stories found so far, and the
bookkeeping that keeps a change from being claimed twice: `free`,
`unclaimed`, `take` and `add` (a story, with its root and evidence claimed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from drift.analysis.diff import Change, State
from drift.analysis.failures import Failure
from drift.analysis.kinds import service_name
from drift.analysis.restarts import Restart
from drift.analysis.sources import ServiceSources
from drift.analysis.story import LiveStart, Status, Story
from drift.analysis.timing import Records, Span, start_span
from drift.analysis.unit_history import ServiceRuns
from drift.store.query import StoredVersion


class Claims:
    """The state of one grouping run and its bookkeeping, shared by every room of the grouper."""

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
        self._running_starts: dict[str, Span] | None = None
        self._readers: dict[str, set[str]] | None = None
        self.script_service = self._script_services()
        self.sources = ServiceSources(after, self.script_service)
        # Services whose environment / command line could be read now: not one that
        # rewrote its title, whose last values are kept from before, unread.
        self.retitled = {s for s, k in after if k == "title"}
        self.env_readable = {s for s, k in after if k.startswith("env:")} - self.retitled
        self.argv_readable = {s for s, k in after if k == "argv"} - self.retitled
        self.runs: dict[str, ServiceRuns] = {}
        self.failures: dict[str, Failure] = {}
        # Reads a stored text in full (a blob); set by the caller that has the store.
        self.text: Callable[[StoredVersion], str] = lambda v: v.value or ""
        # The start each live label named, by the id of its story's root: a story's
        # timing then goes by the start its words give (`Applied.live_start`).
        self.live_starts: dict[int, LiveStart | None] = {}
        # Every value a service's live fact took inside the window, oldest first (set by
        # the caller that has them): a knob set twice tells both values.
        self.window_values: dict[tuple[str, str], list[StoredVersion]] = {}

    # ------------------------------------------------------------ bookkeeping

    def free(self, subject: str, key: str) -> Change | None:
        """The change of this fact, if there is one and nothing claimed it yet."""
        change = self.by_ident.get((subject, key))
        if change is None or id(change) in self.claimed:
            return None
        return change

    def unclaimed(self, subject: str | None = None, prefix: str = "") -> list[Change]:
        """The changes nothing claimed yet, of one subject and under a key prefix if given."""
        pool = self.changes if subject is None else self.by_subject.get(subject, [])
        return [c for c in pool if id(c) not in self.claimed and c.key.startswith(prefix)]

    def take(self, *changes: Change | None) -> tuple[Change, ...]:
        """Claim the changes not claimed yet (None is skipped); those claimed by this call."""
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
        """A story rooted at `root`: claims it and its evidence, and keeps it among the stories."""
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

    def running_starts(self) -> dict[str, Span]:
        """When each service running now started, by name: what it loaded is from then.

        Read from the state once per run (every changed file asks, and a state
        holds thousands of facts); callers get their own copy."""
        if self._running_starts is None:
            self._running_starts = self._read_running_starts()
        return dict(self._running_starts)

    def _read_running_starts(self) -> dict[str, Span]:
        started: dict[str, Span] = {}
        for (subject, key), version in self.after.items():
            name = service_name(subject)
            if name is None or key != "started_at":
                continue
            if value_of(self.after.get((subject, "running"))) == "false":
                continue
            moment = start_span(version)
            if moment is not None:
                started[name] = moment
        return started

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


def value_of(version: StoredVersion | None) -> str | None:
    """A version's value, None when there is no version."""
    return None if version is None else version.value
