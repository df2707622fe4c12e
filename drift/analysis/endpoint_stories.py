"""Stories of a server's own view of its config (`[[endpoints]]`): one per batch of leaves.

A room of the grouper (see `drift.analysis.group`). One engine upgrade
moves many defaults at once: the leaves of one endpoint that changed
between the same two records are one story, each leaf listed old -> new;
a leaf that changed alone is a story of its own. The document is read
from the running server, so when the entry names its service and that
service's process started between the same two records, the values came
with that start (live in it); a value that moved while the process kept
running, or on an endpoint tied to no service, is "changed": drift does
not guess what moved it.

A leaf that is the server's report of a knob a live variable or flag of
its service changed between the same records (`drift.analysis.knobs`:
the same name spelled alike, or a value few knobs share) is evidence of
that change's story, never a suspect of its own: the running server
answered it, and the story's label says so. A leaf two stories could
claim equally is left a story of its own: drift does not pick one.
"""

from __future__ import annotations

from dataclasses import replace

from drift.analysis.applied import Applied
from drift.analysis.claims import value_of
from drift.analysis.diff import Change
from drift.analysis.knobs import knob_match, live_knob
from drift.analysis.story import Status
from drift.analysis.timing import parse_time_us
from drift.analysis.titles import shown
from drift.timespec import clock

_PREFIX = "json:"


class EndpointStories(Applied):
    """The [[endpoints]] leaves, in batches by the record that saw them, mixed into the grouper."""

    def endpoint_stories(self) -> None:
        """One story per endpoint and record that saw its leaves change."""
        subjects = sorted(
            {c.subject for c in self.unclaimed() if c.subject.startswith("endpoint:")}
        )
        for subject in subjects:
            for change in self.unclaimed(subject, _PREFIX):
                self.join_knob_story(change)
            batches: dict[int, list[Change]] = {}
            for change in self.unclaimed(subject, _PREFIX):
                batches.setdefault(_seen_by(change), []).append(change)
            for seen in sorted(batches):
                root, *rest = batches[seen]
                service = _service_of(root)
                status, label = self.endpoint_status(service, root)
                title = endpoint_title(root, rest)
                self.add(root, rest, status, label, title, () if service is None else (service,))

    def join_knob_story(self, leaf: Change) -> None:
        """The leaf joins the story of the live change whose knob it reports, if exactly one
        story's change is the best match (`drift.analysis.knobs`)."""
        service = self.served_by(leaf)
        if service is None:
            return
        span = self.records.span(leaf)
        best, chosen = 0, set()
        for at, story in enumerate(self.stories):
            if story.status not in _IN_A_PROCESS:
                continue
            for change in story.changes:
                name = live_knob(change.key)
                if change.subject != f"service:{service}" or name is None:
                    continue
                if self.records.span(change).order(span) != "unknown":
                    continue  # not between the same records: not what the server reports
                latest, now = leaf.after or leaf.before, change.after or change.before
                secret = bool(latest and latest.secret or now and now.secret)
                score = knob_match(
                    pointer_of(leaf),
                    value_of(leaf.after),
                    name,
                    value_of(change.after),
                    secret=secret,
                )
                if score > best:
                    best, chosen = score, {at}
                elif score == best and score:
                    chosen.add(at)
        if len(chosen) != 1:
            return  # none, or two stories tie: the leaf stays a story of its own
        (at,) = chosen
        story = self.stories[at]
        self.stories[at] = replace(
            story,
            evidence=(*story.evidence, *self.take(leaf)),
            label=f"{story.label}; {answered(leaf)}",
        )

    def served_by(self, leaf: Change) -> str | None:
        """The service whose server answers the endpoint: its entry's, else the one running
        service whose live --port is the URL's port."""
        named = _service_of(leaf)
        if named is not None:
            return named
        latest = leaf.after or leaf.before
        port = _port(latest.provenance.get("url") if latest is not None else None)
        if port is None:
            return None
        serving = {
            subject.removeprefix("service:")
            for (subject, key), version in self.after.items()
            if key == "flag:--port" and version.value == port and subject.startswith("service:")
        }
        serving = {s for s in serving if self.not_running(s) is None}
        return serving.pop() if len(serving) == 1 else None

    def endpoint_status(self, service: str | None, change: Change) -> tuple[Status, str]:
        """Live when the service's process started between the records that saw the change."""
        if service is None:
            return "changed", (
                "the server's own view changed; the entry names no service, "
                "so whether a restart brought it is not known"
            )
        subject = f"service:{service}"
        not_running = self.not_running(service)
        if not_running is not None:
            return "changed", f"the server's own view changed; {not_running}"
        pid = value_of(self.after.get((subject, "pid")))
        where = f"{service} (pid {pid})" if pid else service
        started = self.after.get((subject, "started_at"))
        if started is None:
            return "changed", f"the server's own view changed; when {where} started is not recorded"
        at = parse_time_us(started.value)
        start = clock(at) if at is not None else str(started.value)
        order = self.start_order(service, change)
        if order == "unknown":
            # The process started between the record that read the old value and the
            # one that read the new: the server came up with it.
            label = self.live_label(service, change, live=change)
            return "live", f"{label}: came with its start {start}"
        if order == "after":
            return "live", (
                f"live in {where}; served already before its start {start}, "
                "so an earlier run brought it"
            )
        return "changed", (
            f"changed while {where} kept running (started {start}): not with a restart"
        )


def endpoint_title(root: Change, rest: list[Change]) -> str:
    """``endpoint E: /chunked_prefill_size 8192 (was 4096)``, or how many moved together."""
    name = root.subject.removeprefix("endpoint:")
    if rest:
        pointers = [pointer_of(c) for c in (root, *rest)]
        listed = ", ".join(pointers[:3]) + (f", +{len(pointers) - 3}" if len(pointers) > 3 else "")
        return f"endpoint {name}: {len(pointers)} values changed together ({listed})"
    pointer = pointer_of(root)
    if root.kind == "added":
        return f"endpoint {name}: {pointer} = {shown(root.after)} added"
    if root.kind == "removed":
        return f"endpoint {name}: {pointer} removed (was {shown(root.before)})"
    return f"endpoint {name}: {pointer} {shown(root.after)} (was {shown(root.before)})"


def answered(leaf: Change) -> str:
    """What the server answered of a knob, for the label of the story it confirms."""
    name = leaf.subject.removeprefix("endpoint:")
    if leaf.after is None:
        return f"{name} no longer answers {pointer_of(leaf)}"
    return f"{name} answers {shown(leaf.after)} at {pointer_of(leaf)}: the running server has it"


def pointer_of(change: Change) -> str:
    """The leaf's JSON pointer, ``(the document)`` for a document that is one value."""
    return change.key.removeprefix(_PREFIX) or "(the document)"


def _seen_by(change: Change) -> int:
    """The snapshot that first saw the change: leaves it saw moved between the same records."""
    if change.after is not None:
        return change.after.first_snapshot_id
    assert change.before is not None and change.before.until_snapshot_id is not None
    return change.before.until_snapshot_id


def _service_of(change: Change) -> str | None:
    """The [[services]] entry the endpoint's server is, as its entry said when last read."""
    latest = change.after or change.before
    service = None if latest is None else latest.provenance.get("service")
    return service if isinstance(service, str) and service else None


_IN_A_PROCESS: frozenset[Status] = frozenset({"live", "launched", "unsourced", "failing"})


def _port(url: object) -> str | None:
    """The port of an http(s) URL as text, the scheme's own when it names none."""
    if not isinstance(url, str):
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme)
    return None if port is None else str(port)
