"""Ranking: each signal moves the score the right way, ties are deterministic, the incident's
export line comes first and a churning command sinks below every config change."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_group import BASE, MIN, NOW, States, histories

from drift.analysis.diff import Change
from drift.analysis.group import group_changes
from drift.analysis.kinds import CATEGORY_ORDER
from drift.analysis.rank import (
    SIGNALS,
    WEIGHTS,
    ChurnInfo,
    RankedStory,
    rank_stories,
    score_signals,
)
from drift.analysis.restarts import Restart
from drift.analysis.story import STATUSES, Status, Story
from drift.store.query import StoredVersion


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")


def make_story(
    subject: str = "script:/opt/serve/decode.sh",
    key: str = "export:K",
    *,
    status: Status = "live",
    changed_us: int = NOW,
    restarts: tuple[Restart, ...] = (),
) -> Story:
    """A one-change story whose root was first recorded at `changed_us`."""
    after = StoredVersion(subject, key, "1", None, False, 9, changed_us, None, None, {})
    root = Change(subject, key, "added", None, after)
    return Story(root, (), status, "a label", f"{subject} {key}", ("decode",), restarts)


@dataclass(frozen=True)
class Setup:
    """One side of a scoring case: the story and the history it is judged against."""

    story: dict[str, Any] = field(default_factory=dict)
    versions: int = 1  # values the root fact had up to the baseline
    snapshots: int = 100  # records up to the baseline
    unhealthy_at_us: int | None = None
    flapped: bool = False

    def rank(self) -> RankedStory:
        story = make_story(**self.story)
        ident = (story.root.subject, story.root.key)
        (ranked,) = rank_stories(
            [story],
            ChurnInfo({ident: self.versions}, self.snapshots),
            unhealthy_at_us=self.unhealthy_at_us,
            flapped=frozenset({ident}) if self.flapped else frozenset(),
        )
        return ranked


def signal(ranked: RankedStory, name: str) -> float:
    return next(s.value for s in ranked.signals if s.name == name)


ONE_HOUR = 60 * MIN

# (signal, better, worse): only that signal differs between the two sides.
CASES = [
    ("liveness", Setup({"status": "live"}), Setup({"status": "pending"})),
    ("liveness", Setup({"status": "unsourced"}), Setup({"status": "pending"})),
    ("liveness", Setup({"status": "live"}), Setup({"status": "unsourced"})),
    ("liveness", Setup({"status": "on-disk"}), Setup({"status": "pending"})),
    ("churn", Setup(versions=1), Setup(versions=30)),
    ("churn", Setup(versions=0), Setup(versions=100)),
    ("churn", Setup(versions=30), Setup(versions=100)),
    ("kind", Setup(), Setup({"subject": "command:loadavg", "key": "stdout"})),
    ("kind", Setup({"subject": "service:decode", "key": "env:K"}), Setup({"key": "content"})),
    ("kind", Setup({"key": "flag:--tp"}), Setup({"subject": "file:/k.py", "key": "sha256"})),
    ("kind", Setup({"subject": "file:/k.py", "key": "sha256"}), Setup({"subject": "command:c"})),
    ("kind", Setup({"subject": "repo:/r", "key": "head"}), Setup({"subject": "command:c"})),
    ("kind", Setup({"subject": "command:c"}), Setup({"subject": "service:d", "key": "pid"})),
    (
        "timing",
        Setup(unhealthy_at_us=NOW + 5 * MIN),
        Setup(unhealthy_at_us=NOW + 5 * ONE_HOUR),
    ),
    ("timing", Setup(unhealthy_at_us=NOW), Setup(unhealthy_at_us=NOW + 5 * MIN)),
    ("timing", Setup(unhealthy_at_us=NOW + 9 * ONE_HOUR), Setup(unhealthy_at_us=NOW - MIN)),
    ("flapping", Setup(), Setup(flapped=True)),
]


@pytest.mark.parametrize(
    ("name", "better", "worse"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_each_signal_moves_the_score_the_right_way(name: str, better: Setup, worse: Setup) -> None:
    good, bad = better.rank(), worse.rank()
    assert signal(good, name) > signal(bad, name)
    assert good.score > bad.score
    for other in SIGNALS:
        if other != name and any(s.name == other for s in good.signals):
            assert signal(good, other) == signal(bad, other), other


def test_weights_are_one_consistent_table() -> None:
    total = sum(getattr(WEIGHTS, name) for name in SIGNALS)
    assert math.isclose(total, 1.0)
    assert set(WEIGHTS.status_values) == set(STATUSES)
    assert set(WEIGHTS.kind_values) == set(CATEGORY_ORDER)
    values = [*WEIGHTS.status_values.values(), *WEIGHTS.kind_values.values()]
    assert all(0.0 <= v <= 1.0 for v in values)
    # The kinds, in the order the issue asks: config over code over volatile output.
    kinds = WEIGHTS.kind_values
    assert kinds["script export"] >= kinds["live flag"] >= kinds["script content"]
    assert kinds["script content"] >= kinds["file"] >= kinds["command"] > kinds["process id"]
    assert kinds["repo"] > kinds["command"]
    status = WEIGHTS.status_values
    assert status["live"] > status["unsourced"] > status["changed"] > status["pending"]


@pytest.mark.parametrize("unhealthy", [None, NOW])
def test_contributions_add_up_to_the_score_and_a_perfect_suspect_scores_one(
    unhealthy: int | None,
) -> None:
    ranked = Setup(versions=0, unhealthy_at_us=unhealthy).rank()
    assert ranked.score == 1.0
    assert math.isclose(sum(s.contribution for s in ranked.signals), ranked.score)
    # --explain prints value x weight per signal: that must add up to the score too
    assert math.isclose(sum(s.value * s.weight for s in ranked.signals), ranked.score)
    assert math.isclose(sum(s.weight for s in ranked.signals), 1.0)
    names = [s.name for s in ranked.signals]
    assert ("timing" in names) == (unhealthy is not None)
    assert all(s.reason for s in ranked.signals)


def test_reasons_say_why_in_words() -> None:
    churning = Setup({"subject": "command:loadavg", "key": "stdout"}, versions=100).rank()
    assert "changes at every record: 99 times in the 100 records before the baseline" in (
        churning.reasons
    )
    assert churning.reasons[-1].startswith("changes at every record")  # it adds nothing
    steady = Setup(versions=1).rank()
    assert "never changed in the 100 records before the baseline" in steady.reasons
    assert "new: not recorded before the baseline" in Setup(versions=0).rank().reasons
    late = Setup(unhealthy_at_us=NOW - MIN).rank()
    assert "after the first unhealthy record (17:31:00): cannot have caused it" in late.reasons
    early = Setup(unhealthy_at_us=NOW + 90 * MIN).rank()
    assert "90m before the first unhealthy record (19:02:00)" in early.reasons
    flapping = Setup(flapped=True).rank()
    assert "flapping: export:K changed and changed back inside the window" in flapping.reasons
    pending = Setup({"status": "pending"}).rank()
    assert "only on disk: a label" in pending.reasons
    unknown = Setup(snapshots=1).rank()
    assert signal(unknown, "churn") == WEIGHTS.unknown_churn


def test_timing_counts_from_the_restart_that_made_a_change_live() -> None:
    """Edited at 14:00 but picked up by the 17:31 restart: what matters is 17:31."""
    restart = Restart("decode", "1", "2", NOW - MIN, ())
    edited = NOW - 200 * MIN
    live = make_story(changed_us=edited, restarts=(restart,))
    pending = make_story(changed_us=edited, status="pending")
    churn = ChurnInfo({}, 100)
    near = {s.name: s for s in score_signals(live, churn, unhealthy_at_us=NOW)}["timing"]
    far = {s.name: s for s in score_signals(pending, churn, unhealthy_at_us=NOW)}["timing"]
    assert near.value > far.value
    assert near.reason == "60s before the first unhealthy record (17:32:00)"


def test_ties_break_by_kind_then_subject_and_key() -> None:
    stories = [
        make_story("service:decode", "env:K"),
        make_story("script:/b.sh", "export:K"),
        make_story("script:/a.sh", "export:Z"),
        make_story("script:/a.sh", "export:K"),
    ]
    for _ in range(5):
        random.shuffle(stories)
        ranked = rank_stories(stories, ChurnInfo({}, 10))
        assert len({r.score for r in ranked}) == 1
        assert [(r.story.root.subject, r.story.root.key) for r in ranked] == [
            ("script:/a.sh", "export:K"),
            ("script:/a.sh", "export:Z"),
            ("script:/b.sh", "export:K"),
            ("service:decode", "env:K"),
        ]
        assert [r.rank for r in ranked] == [1, 2, 3, 4]


def test_weights_can_be_swapped_for_experiments() -> None:
    kind_only = replace(WEIGHTS, liveness=0.0, churn=0.0, timing=0.0, flapping=0.0, kind=1.0)
    (ranked,) = rank_stories([make_story(status="pending")], ChurnInfo({}, 10), weights=kind_only)
    assert ranked.score == 1.0


# ---------------------------------------------------------------- the incident


def incident(*, records_before: int = 2) -> tuple[States, ChurnInfo]:
    """The morning and the evening of the incident, as the collectors record them.

    The decode script gains the export line, all three services are restarted
    within a second, a command's output changes at every record, a kernel
    file is touched without a byte changing (so its facts are the same), and
    git HEAD does not move.
    """
    s = States()
    line = 8
    for i, name in enumerate(("prefill", "decode", "router")):
        script = f"script:/opt/serve/{name}.sh"
        where = {"file": f"/opt/serve/{name}.sh", "service": name}
        s.same(script, "export:HF_TOKEN", "hmac-sha256:" + "ab" * 16, secret=True, line=6, **where)
        s.same(script, "flag:--tp-size", "4", line=line + 1, text="exec python ...", **where)
        s.same(script, "exec", "python -c ... --tp-size 4", line=line + 1, **where)
        if name != "decode":
            s.same(script, "content", None, blob=f"{i}" * 64, **where)
        s.restart(name, 300 + i, 318 + i, NOW - 12_000_000 + i * 10_000)
        proc = {"pid": 318 + i, "source": f"/proc/{318 + i}/environ"}
        s.same(f"service:{name}", "env:HF_TOKEN", "hmac-sha256:" + "ab" * 16, secret=True, **proc)
        s.same(f"service:{name}", "env:PATH", "/usr/bin", **proc)
        s.same(f"service:{name}", "flag:--tp-size", "4", pid=318 + i)
        s.same(f"service:{name}", "argv", '["python", "--tp-size", "4"]', pid=318 + i)
    s.script_text("decode", changed_at=NOW)
    s.new(
        "script:/opt/serve/decode.sh",
        "export:SGLANG_SM120_MMA_TARGET_CTAS",
        "512",
        file="/opt/serve/decode.sh",
        line=line,
        text="export SGLANG_SM120_MMA_TARGET_CTAS=512",
        service="decode",
    )
    s.new("service:decode", "env:SGLANG_SM120_MMA_TARGET_CTAS", "512", pid=319)
    kernel = "file:/opt/sglang/python/sglang/srt/layers/attention/flashmla_backend.py"
    for key, value in (("sha256", "c" * 64), ("size", "64"), ("mode", "0644")):
        s.same(kernel, key, value, glob="**/*.py", set="attention-kernels")
    s.same("repo:/opt/sglang", "head", "d" * 40, path="/opt/sglang")
    s.same("command:gpu-driver", "stdout", "575.57.08", run="echo 575.57.08")
    s.moved("command:loadavg", "stdout", None, None, blobs=("7" * 64, "8" * 64), run="cat x")
    s.same("command:loadavg", "exit", "0", run="cat /proc/loadavg")

    versions = {ident: 1 for ident in s.before}
    versions["command:loadavg", "stdout"] = records_before  # a new value at every record
    return s, ChurnInfo(versions, records_before)


CONFIG = ("script", "unit", "live env", "live flag", "file", "repo")


@pytest.mark.parametrize("records_before", [2, 60])
def test_incident_export_line_first_command_churn_below_config(records_before: int) -> None:
    s, churn = incident(records_before=records_before)
    stories, events = group_changes(s.changes(), s.after)
    ranked = rank_stories(stories, churn)

    top = ranked[0]
    assert top.story.root.key == "export:SGLANG_SM120_MMA_TARGET_CTAS"
    assert top.story.title == (
        "export SGLANG_SM120_MMA_TARGET_CTAS=512 added to /opt/serve/decode.sh:8"
    )
    assert top.story.label == "live in decode (pid 319) since restart 17:31:48"
    assert top.score == 1.0

    command = next(r for r in ranked if r.story.root.subject == "command:loadavg")
    config = [r for r in ranked if r.story.category.startswith(CONFIG)]
    assert config and all(r.rank < command.rank for r in config)
    assert any("changes at every record" in reason for reason in command.reasons)

    # The restarts: context of the story and one event on the timeline, never a suspect.
    everywhere = {(c.subject, c.key) for r in ranked for c in r.story.changes}
    assert not any(k in ("pid", "started_at") for _s, k in everywhere)
    assert [r.service for r in top.story.restarts] == ["decode"]
    (event,) = events
    assert event.services == ("prefill", "decode", "router")
    # The touched kernel file is not a change at all.
    assert not any(s.startswith("file:") for s, _k in everywhere)
    assert len(ranked) == 2


def test_a_pending_config_change_still_outranks_a_churning_command() -> None:
    s, churn = incident(records_before=60)
    where = {"file": "/opt/serve/prefill.sh", "service": "prefill", "line": 7}
    s.old("script:/opt/serve/prefill.sh", "export:NCCL_ALGO", "Ring", NOW + MIN, **where)
    s.new("script:/opt/serve/prefill.sh", "export:NCCL_ALGO", "Tree", NOW + MIN, **where)
    churned = dict(churn.versions_before)
    churned["script:/opt/serve/prefill.sh", "export:NCCL_ALGO"] = 40
    stories, _ = group_changes(s.changes(), s.after)
    ranked = rank_stories(stories, ChurnInfo(churned, 60), unhealthy_at_us=NOW + 2 * MIN)

    order = [r.story.root.subject + " " + r.story.root.key for r in ranked]
    assert order == [
        "script:/opt/serve/decode.sh export:SGLANG_SM120_MMA_TARGET_CTAS",
        "script:/opt/serve/prefill.sh export:NCCL_ALGO",
        "command:loadavg stdout",
    ]
    assert ranked[1].story.status == "pending"


# ---------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None)
@given(
    histories(),
    st.integers(0, 8),
    st.one_of(st.none(), st.integers(BASE, NOW + 30 * MIN)),
    st.randoms(use_true_random=False),
    st.data(),
)
def test_ranking_is_a_deterministic_permutation_with_scores_in_range(
    s: States,
    snapshots: int,
    unhealthy: int | None,
    rnd: random.Random,
    data: st.DataObject,
) -> None:
    stories, _ = group_changes(s.changes(), s.after)
    idents = sorted({(c.subject, c.key) for story in stories for c in story.changes})
    versions = {i: data.draw(st.integers(0, 9)) for i in idents}
    flapped = frozenset(i for i in idents if data.draw(st.booleans()))
    churn = ChurnInfo(versions, snapshots)

    ranked = rank_stories(stories, churn, unhealthy_at_us=unhealthy, flapped=flapped)

    assert sorted(map(id, (r.story for r in ranked))) == sorted(map(id, stories))
    assert [r.rank for r in ranked] == list(range(1, len(stories) + 1))
    assert all(0.0 <= r.score <= 1.0 for r in ranked)
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    for r in ranked:
        assert math.isclose(sum(x.contribution for x in r.signals), r.score, abs_tol=1e-5)
        assert all(0.0 <= x.value <= 1.0 and x.reason for x in r.signals)
    # What cannot have caused the failure ranks below everything that could have.
    ruled_out = [r.ruled_out is not None for r in ranked]
    assert ruled_out == sorted(ruled_out)
    assert all(
        any("cannot have caused it" in x.reason for x in r.signals) == (r.ruled_out is not None)
        for r in ranked
    )
    shuffled = list(stories)
    rnd.shuffle(shuffled)
    again = rank_stories(shuffled, churn, unhealthy_at_us=unhealthy, flapped=flapped)
    assert [(r.story, r.score) for r in again] == [(r.story, r.score) for r in ranked]
