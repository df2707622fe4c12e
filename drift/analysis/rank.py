"""Rank stories: a score in [0, 1] per suspect, made of signals each explained in words.

The score is the weighted mean of a few signals, each a value in [0, 1]:

- liveness: in a running process beats only on disk (not applied yet);
- churn: a fact that never changed before the baseline beats one that
  changes at every record (a pid, a load average);
- kind: an exported variable or a flag shapes a process; command output
  and volatile ids rarely do;
- timing (only when health is known): changed just before the first
  unhealthy record beats hours before; after it, it cannot be the cause,
  said only when it certainly came after the failing check ran;
- flapping: a value that went back and forth inside the window is less
  likely the one-time change that broke things (a change that came once and
  went, undone since, is not);
- failure (only when a systemd service failed inside the window, see
  `drift.analysis.failures`): a change applied at the failing starts, made
  before the failures began, beats a change elsewhere; one made after they
  began cannot have caused them, and the failure itself is a symptom.

A story the timing or failure signal rules out ("cannot have caused it": it
came after the failure) stays listed, but ranks below every story that could
have caused it: its score is capped below the lowest of theirs (and at
`Weights.ruled_out_cap`), its signals' weights scaled down alike, and its
reasons say so first.

Every weight and value lives in `Weights` below, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from drift.analysis.diff import duration_text
from drift.analysis.failures import Failure
from drift.analysis.kinds import UNIT_RUNTIME_KEYS, category_rank
from drift.analysis.story import Story
from drift.analysis.timing import Span
from drift.timespec import clock


def _frozen(values: dict[str, float]) -> Mapping[str, float]:
    return MappingProxyType(values)


@dataclass(frozen=True)
class Weights:
    """Every number ranking uses. The signal weights sum to 1.

    Scores are normalised over the signals that apply, so the failure
    signal's share leaves the others' balance (0.30 : 0.25 : 0.25 : 0.15 :
    0.05) as it is, and a window without a failure scores as before.
    """

    liveness: float = 0.21
    churn: float = 0.175
    kind: float = 0.175
    timing: float = 0.105
    flapping: float = 0.035
    failure: float = 0.30

    # liveness value per story status
    status_values: Mapping[str, float] = field(
        default_factory=lambda: _frozen(
            {
                "live": 1.0,
                "failing": 1.0,
                # started after the change, but the process hides what it runs with
                "launched": 0.9,
                "unsourced": 0.9,
                "changed": 0.5,
                "on-disk": 0.4,
                "pending": 0.2,
            }
        )
    )
    # kind value per category of the story's root (see kinds.category)
    kind_values: Mapping[str, float] = field(
        default_factory=lambda: _frozen(
            {
                "script export": 1.0,
                "unit environment": 1.0,
                "live env": 1.0,
                "script exec": 0.95,
                "live flag": 0.95,
                # what the running server says it runs with: as telling as a live flag when a
                # default moved, but a document also holds versions, paths and counters
                # nobody listed in `ignore`, so a little below
                "engine config": 0.9,
                "unit": 0.85,
                # a GPU or driver setting: every kernel of the server runs under it, and
                # operators change it rarely (a power cap, a clock lock, an upgrade)
                "gpu": 0.85,
                "script content": 0.85,
                # the code a process runs, as likely a cause as its script's text
                "python package": 0.85,
                "file": 0.8,
                # code a process runs, as a file is; but most change with a package
                # upgrade whose own story says more, so not above scripts and units
                "library": 0.8,
                "repo": 0.8,
                "repo working tree": 0.75,
                # a cache's old files went (wiped, evicted, replaced): the next start
                # compiles its kernels anew, with whatever compiler is installed now
                "cache turnover": 0.6,
                "live command line": 0.7,
                "service state": 0.5,
                "command": 0.3,
                # a cache that only grew: a running server fills it as it compiles, all day
                "cache": 0.25,
                "health": 0.1,
                # the name a host goes by among its siblings, not a setting of the box
                "host role": 0.1,
                "unit runtime": 0.05,
                "process id": 0.05,
            }
        )
    )
    other_kind: float = 0.4
    # churn value when there are too few records before the baseline to judge
    unknown_churn: float = 0.5
    # timing: halves for every hour before the first unhealthy record, never
    # below the floor (before the trouble always beats after it)
    timing_half_life_us: int = 3600 * 1_000_000
    timing_floor: float = 0.25
    timing_after: float = 0.0
    # in no known order with the failing check (it may have come just before)
    timing_same_time: float = 1.0
    # failure: applied at the failing starts and made before they began; in no
    # known order with them; a file or checkout they may have loaded; anything
    # else; the failure itself; made after the failures began
    failure_cause: float = 1.0
    failure_same_time: float = 0.8
    failure_loaded: float = 0.5
    failure_elsewhere: float = 0.2
    failure_symptom: float = 0.1
    failure_after: float = 0.0
    # a story that cannot have caused the failure scores at most this, and at least
    # `ruled_out_margin` below every story that could have
    ruled_out_cap: float = 0.1
    ruled_out_margin: float = 0.01


WEIGHTS = Weights()

SIGNALS = ("liveness", "churn", "kind", "timing", "flapping", "failure")


@dataclass(frozen=True)
class ChurnInfo:
    """How often facts changed before the baseline.

    `versions_before`: per (subject, key), the number of values it had in the
    records counted (History.version_counts); `snapshots_before`: the number
    of those records, up to the baseline; `days`: when set, they are the
    records of only that many days before the baseline, the history going
    further back (a rate needs no more, and the count stays as fast at a
    year of history as at a week).
    """

    versions_before: Mapping[tuple[str, str], int]
    snapshots_before: int
    days: int | None = None

    def records(self) -> str:
        """The records counted, in words: `the 1,201 records before the baseline`."""
        within = f" of the {self.days} days" if self.days is not None else ""
        return f"the {self.snapshots_before:,} records{within} before the baseline"


@dataclass(frozen=True)
class Signal:
    """One reason in the score: its value in [0, 1], weight, share of the score, and words."""

    name: str
    value: float
    weight: float
    contribution: float
    reason: str


@dataclass(frozen=True)
class RankedStory:
    """A story with its place, its score and the signals that make the score."""

    rank: int
    score: float
    story: Story
    signals: tuple[Signal, ...]
    # Why it ranks below every possible cause, when a signal rules it out.
    ruled_out: str | None = None

    @property
    def reasons(self) -> list[str]:
        """The signals in words, strongest contribution first; a ruling-out before them."""
        ordered = sorted(self.signals, key=lambda s: (-s.contribution, SIGNALS.index(s.name)))
        first = [self.ruled_out] if self.ruled_out else []
        return first + [s.reason for s in ordered]


def rank_stories(
    stories: Iterable[Story],
    churn: ChurnInfo,
    *,
    unhealthy_at_us: int | None = None,
    unhealthy_until_us: int | None = None,
    unhealthy_by_mark: bool = False,
    flapped: frozenset[tuple[str, str]] = frozenset(),
    failures: Sequence[Failure] = (),
    weights: Weights = WEIGHTS,
) -> list[RankedStory]:
    """Score every story and order them best suspect first; ties go by kind, subject, key.

    `unhealthy_at_us` is when the first unhealthy record was taken,
    `unhealthy_until_us` when it ended (its health checks ran in between);
    `unhealthy_by_mark` when it is an unstable mark instead ("bad by then");
    `failures` the services seen failing in the window.
    """
    health = (unhealthy_at_us, unhealthy_until_us, unhealthy_by_mark)
    scored = []
    for story in stories:
        signals, ruled_out = _signals(story, churn, health, flapped, failures, weights)
        scored.append((_score(signals), story, signals, ruled_out))
    possible = [score for score, _story, _signals, ruled_out in scored if not ruled_out]
    cap = min(weights.ruled_out_cap, min(possible, default=1.0) - weights.ruled_out_margin)
    cap = round(max(0.0, cap), 6)
    capped = [
        _capped(score, story, signals, cap) if ruled_out else (score, story, signals, None)
        for score, story, signals, ruled_out in scored
    ]
    capped.sort(
        key=lambda item: (
            item[3] is not None,
            -item[0],
            category_rank(item[1].category),
            item[1].root.subject,
            item[1].root.key,
            item[1].root.kind,
        )
    )
    return [
        RankedStory(i, score, story, signals, why)
        for i, (score, story, signals, why) in enumerate(capped, 1)
    ]


def _score(signals: Sequence[Signal]) -> float:
    return min(1.0, max(0.0, round(sum(s.contribution for s in signals), 6)))


def _capped(
    score: float, story: Story, signals: tuple[Signal, ...], cap: float
) -> tuple[float, Story, tuple[Signal, ...], str]:
    """A story that cannot have caused the failure, its score at most `cap`: each signal's
    weight scaled alike, so value x weight summed over the signals is still the score."""
    why = (
        f"cannot have caused the failure: ranks below every change that could have "
        f"(score capped at {cap:.2f})"
    )
    if score <= cap:
        return score, story, signals, why
    factor = cap / score
    scaled = tuple(
        replace(s, weight=s.weight * factor, contribution=s.contribution * factor) for s in signals
    )
    return _score(scaled), story, scaled, why


def score_signals(
    story: Story,
    churn: ChurnInfo,
    *,
    unhealthy_at_us: int | None = None,
    unhealthy_until_us: int | None = None,
    unhealthy_by_mark: bool = False,
    flapped: frozenset[tuple[str, str]] = frozenset(),
    failures: Sequence[Failure] = (),
    weights: Weights = WEIGHTS,
) -> tuple[Signal, ...]:
    """The signals of one story; contributions are normalised over the signals that apply."""
    health = (unhealthy_at_us, unhealthy_until_us, unhealthy_by_mark)
    return _signals(story, churn, health, flapped, failures, weights)[0]


def _signals(
    story: Story,
    churn: ChurnInfo,
    health: tuple[int | None, int | None, bool],
    flapped: frozenset[tuple[str, str]],
    failures: Sequence[Failure],
    weights: Weights,
) -> tuple[tuple[Signal, ...], bool]:
    """`score_signals`, and whether a signal rules the story out as the failure's cause.

    `health`: when the first unhealthy record began and ended, and whether it is a mark.
    """
    unhealthy_at_us, unhealthy_until_us, unhealthy_by_mark = health
    ruled_out = False
    raw = [
        ("liveness", weights.liveness, *_liveness(story, weights)),
        ("churn", weights.churn, *_churn(story, churn, weights)),
        ("kind", weights.kind, *_kind(story, weights)),
    ]
    if unhealthy_at_us is not None and unhealthy_by_mark:
        marked = _after_mark(story, unhealthy_at_us, weights)
        if marked is not None:
            raw.append(("timing", weights.timing, *marked[:2]))
            ruled_out = marked[2]
    elif unhealthy_at_us is not None:
        until = unhealthy_at_us if unhealthy_until_us is None else unhealthy_until_us
        value, reason, after = _timing(story, unhealthy_at_us, until, weights)
        raw.append(("timing", weights.timing, value, reason))
        ruled_out = after
    raw.append(("flapping", weights.flapping, *_flapping(story, flapped)))
    if failures:
        value, reason, after = _failure(story, failures, weights)
        raw.append(("failure", weights.failure, value, reason))
        ruled_out = ruled_out or after
    total = sum(weight for _name, weight, _value, _reason in raw)
    # Each signal carries its effective weight (rescaled when a signal does not
    # apply), so value x weight summed over the signals is the score.
    signals = tuple(
        Signal(
            name=name,
            value=value,
            weight=weight / total if total else 0.0,
            contribution=weight * value / total if total else 0.0,
            reason=reason,
        )
        for name, weight, value, reason in raw
    )
    return signals, ruled_out


def _liveness(story: Story, weights: Weights) -> tuple[float, str]:
    value = weights.status_values.get(story.status, weights.status_values["changed"])
    return value, _LIVENESS_WORDS.get(story.status, "{}").format(story.label)


_LIVENESS_WORDS = {
    "live": "in a running process: {}",
    "failing": "in the runs that failed: {}",
    "launched": "launched with it, not verified in the process: {}",
    "unsourced": "in a running process, no changed source: {}",
    "pending": "only on disk: {}",
    "on-disk": "changed on disk; whether a process loaded it is not recorded",
    "changed": "not tied to a running process ({})",
}


def _churn(story: Story, churn: ChurnInfo, weights: Weights) -> tuple[float, str]:
    ident = (story.root.subject, story.root.key)
    intervals = churn.snapshots_before - 1
    if intervals < 1:
        return (
            weights.unknown_churn,
            "too few records before the baseline to tell how often it changes",
        )
    versions = churn.versions_before.get(ident, 0)
    if versions == 0:
        within = f" in the {churn.days} days" if churn.days is not None else ""
        return 1.0, f"new: not recorded{within} before the baseline"
    changes = versions - 1
    if changes == 0:
        return 1.0, f"never changed in {churn.records()}"
    rate = min(1.0, changes / intervals)
    times = "once" if changes == 1 else f"{changes:,} times"
    seen = f"{times} in {churn.records()}"
    if rate >= 1.0:
        return 0.0, f"changes at every record: {seen}"
    return 1.0 - rate, f"changed {seen}"


_KIND_WORDS = {
    "script export": "a variable the serve script exports",
    "unit environment": "a variable the systemd unit sets",
    "live env": "a variable of the live process",
    "script exec": "the serve script's command line",
    "live flag": "a flag of the live process",
    "engine config": "the running server's own view of its config",
    "unit": "a systemd unit setting",
    "gpu": "a GPU or driver setting the server runs under",
    "script content": "the serve script's text",
    "python package": "a Python distribution the service runs",
    "file": "a watched file",
    "repo": "a git checkout's HEAD",
    "repo working tree": "uncommitted changes in a git checkout",
    "cache turnover": "a JIT cache whose old files went: later starts compile anew",
    "live command line": "the live process's command line",
    "service state": "whether the service runs",
    "host role": "the role drift.toml gives the host",
    "command": "a command's output, often noise",
    "cache": "a JIT cache's files: a running server writes them as it compiles",
    "health": "a health check: a symptom, not a cause",
    "unit runtime": "what systemd says about a run, volatile",
    "process id": "a process id or time, volatile",
}


def _kind(story: Story, weights: Weights) -> tuple[float, str]:
    kind = story.category
    value = weights.kind_values.get(kind, weights.other_kind)
    return value, f"kind: {_KIND_WORDS.get(kind, kind)}"


def _timing(
    story: Story, unhealthy_at_us: int, unhealthy_until_us: int, weights: Weights
) -> tuple[float, str, bool]:
    """The timing signal: its value, its reason, and whether it rules the story out."""
    at = story.effective_us
    first = story.departed_us
    if first is not None and first < at and first <= unhealthy_at_us:
        # Live with an earlier value before the failure: the knob changed then.
        before = unhealthy_at_us - first
        value = max(weights.timing_floor, 0.5 ** (before / weights.timing_half_life_us))
        when = (
            f"{duration_text(before)} before the first unhealthy record"
            if before
            else "at the first unhealthy record"
        )
        return (
            value,
            f"first live with a new value {when} ({clock(unhealthy_at_us)}); "
            "its value changed again since",
            False,
        )
    if at > unhealthy_at_us:
        if story.effective_span.earliest_us > unhealthy_until_us:
            return (
                weights.timing_after,
                f"after the first unhealthy record ({clock(unhealthy_at_us)}): "
                "cannot have caused it",
                True,
            )
        # It may have happened while that record ran, before its failing check.
        return (
            weights.timing_same_time,
            f"at about the same time as the first unhealthy record ({clock(unhealthy_at_us)}), "
            "order unknown",
            False,
        )
    before = unhealthy_at_us - at
    value = max(weights.timing_floor, 0.5 ** (before / weights.timing_half_life_us))
    if before == 0:
        return (
            value,
            f"first seen at the first unhealthy record ({clock(unhealthy_at_us)})",
            False,
        )
    return (
        value,
        f"{duration_text(before)} before the first unhealthy record ({clock(unhealthy_at_us)})",
        False,
    )


def _after_mark(story: Story, marked_us: int, weights: Weights) -> tuple[float, str, bool] | None:
    """Against an unstable mark ("bad by then"): only what came after it is told apart.

    The mark says when someone noticed, not when it broke, so a change before
    it is not ranked by how long before.
    """
    span = story.effective_span
    first = story.departed_us
    if first is not None and first <= marked_us:
        return None  # live with an earlier value by the mark: the knob changed before it
    if span.earliest_us > marked_us:
        return (
            weights.timing_after,
            f"recorded after the unstable mark ({clock(marked_us)}, bad by then): "
            "cannot have caused it",
            True,
        )
    if span.latest_us > marked_us:
        return (
            weights.timing_same_time,
            f"at about the same time as the unstable mark ({clock(marked_us)}), order unknown",
            False,
        )
    return None


def _failure(
    story: Story, failures: Sequence[Failure], weights: Weights
) -> tuple[float, str, bool]:
    """Was the story applied at a failing service's starts, before the failures began?
    And whether that rules it out (made after they began)."""
    failure = story.failure or min(failures, key=lambda f: f.since_us)
    name, began = failure.service, clock(failure.since_us)
    changed = story.changed or Span(story.root.changed_us, story.root.changed_us)
    order = changed.order(Span(failure.since_us, failure.since_us))
    if story.failure is not None and story.root.key in _SYMPTOM_KEYS:
        return (
            weights.failure_symptom,
            f"the failure of {name} itself: a symptom, not a cause",
            False,
        )
    if order == "after":
        return (
            weights.failure_after,
            f"changed after {name} began to fail ({began}): cannot have caused it",
            True,
        )
    return (*_failure_signal(story, failure, order, weights), False)


def _failure_signal(
    story: Story, failure: Failure, order: str, weights: Weights
) -> tuple[float, str]:
    """The failure signal of a change not made after the failures began."""
    name, began = failure.service, clock(failure.since_us)
    if story.failure is not None and story.status in ("failing", "live", "launched", "unsourced"):
        if order == "before":
            return (
                weights.failure_cause,
                f"applied at the failing starts of {name}, changed before they began ({began})",
            )
        return (
            weights.failure_same_time,
            f"applied at the failing starts of {name}, at about the time they began ({began})",
        )
    if story.failure is not None:
        return weights.failure_elsewhere, f"not applied at the failing starts of {name}"
    if story.category in ("file", "repo", "repo working tree", "gpu", "cache", "cache turnover"):
        return (
            weights.failure_loaded,
            f"changed before {name} began to fail: its starts may load it",
        )
    return weights.failure_elsewhere, f"does not reach {name}, which began to fail at {began}"


# The facts whose change is the failure itself (the process gone, systemd's state).
_SYMPTOM_KEYS = frozenset({"running", "unit:active_state"}) | UNIT_RUNTIME_KEYS


def _flapping(story: Story, flapped: frozenset[tuple[str, str]]) -> tuple[float, str]:
    trip = story.round_trip
    if trip is not None and trip.times == 1:
        # Came once and went: the one-time change that broke it, undone since, not a flap.
        return 1.0, f"came and went once inside the window (undone at {clock(trip.back_us)})"
    if trip is not None:
        return 0.0, f"flapping: went and came back {trip.times} times inside the window"
    idents = {(c.subject, c.key) for c in story.changes}
    hits = sorted(idents & flapped)
    if hits:
        names = ", ".join(k for _s, k in hits)
        return 0.0, f"flapping: {names} changed and changed back inside the window"
    return 1.0, "no back and forth inside the window"
