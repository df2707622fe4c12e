"""Investigations built by hand, for the tests of what renders them.

Every part is the real dataclass, so a field the templates need cannot be
forgotten here; what a test does not care about gets a dull default.
"""

from __future__ import annotations

from typing import Any

from drift.analysis.investigate import changes_by_subject
from drift.analysis.investigation import (
    BaselineRef,
    Investigation,
    Overview,
    Scope,
    SnapshotRef,
    Suspect,
    SuspectChange,
    Trust,
    Unchanged,
    Window,
)

TIME = "2026-12-02T12:55:31.571913+00:00"
LOCAL = "2026-12-02 12:55:31 UTC"


def snapshot(number: int, **fields: Any) -> SnapshotRef:
    """A snapshot compared; by default the latest record."""
    base = {"time": TIME, "local": LOCAL, "asked": None, "why": "latest record", "facts": 1}
    return SnapshotRef(**{"snapshot": number, **base, **fields})


def baseline(number: int, **fields: Any) -> BaselineRef:
    """The baseline snapshot, given with --stable #N unless said otherwise."""
    given = {"asked": f"#{number}", "why": f"given with --stable #{number}", "source": "given"}
    return BaselineRef(
        **{
            **vars(snapshot(number)),
            **given,
            "unhealthy_at": None,
            "unhealthy_local": None,
            "failing_at_baseline": None,
            **fields,
        }
    )


def change(
    subject: str, key: str, kind: str, before: str | None, after: str | None, **fields: Any
) -> SuspectChange:
    """A suspect's change; evidence, with no diff and no provenance, unless said otherwise."""
    base = {
        "category": "script export",
        "secret": False,
        "changed_at": "2026-12-02T12:55:31.661557+00:00",
        "changed_local": LOCAL,
        "where": "",
        "provenance": {},
        "diff": None,
        "role": "evidence",
    }
    return SuspectChange(
        subject=subject, key=key, kind=kind, before=before, after=after, **{**base, **fields}
    )


def suspect(rank: int, title: str, **fields: Any) -> Suspect:
    """A ranked suspect, live in decode, with no signal, change, restart or failure unless given."""
    base = {
        "score": 0.9,
        "status": "live",
        "label": "live in decode (pid 7)",
        "category": "script export",
        "services": ["decode"],
        "reasons": ["in a running process"],
        "signals": [],
        "changes": [],
        "restarts": [],
        "failure": None,
    }
    return Suspect(rank=rank, title=title, **{**base, **fields})


def trust(
    summary: str = "1 after the baseline; no gaps; no collection errors", **fields: Any
) -> Trust:
    """The trust line: one record after the baseline, nothing wrong."""
    base = {
        "window_snapshots": None,
        "after_baseline": 1,
        "gaps": 0,
        "errors": 0,
        "baseline_errors": 0,
        "clock_steps": 0,
        "warnings": [],
    }
    return Trust(summary=summary, **{**base, **fields})


def overview(**fields: Any) -> Overview:
    """The drawn timeline's own parts: a little before and after TIME, nothing in it."""
    base = {
        "start": "2026-12-02T12:55:21.571913+00:00",
        "end": "2026-12-02T12:55:36.571913+00:00",
        "health": [],
        "services": [],
        "marks": [],
    }
    return Overview(**{**base, **fields})


def investigation(suspects: list[Suspect], **fields: Any) -> Investigation:
    """Snapshots #1 to #2 on gpu-node-7 and `suspects`; no scope change, timeline or blind spot."""
    base = {
        "command": "since",
        "host": "gpu-node-7",
        "baseline": baseline(1),
        "current": snapshot(2),
        "trust": trust(),
        "scope": Scope(changes=[], untracked_facts=0, tracked_facts=0, untracked=[], tracked=[]),
        "window": Window(snapshots=1, with_errors=0),
        "total_suspects": len(suspects),
        "changes_by_subject": changes_by_subject(suspects),
        "timeline": [],
        "unchanged": Unchanged(count=0, by_kind={}, subjects=[], whole_subjects=[], facts=[]),
        "blind_spots": [],
        "overview": overview(),
    }
    return Investigation(suspects=suspects, **{**base, **fields})
