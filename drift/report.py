"""Build the report context (plain data) and render it as text or JSON.

Templates only ever see the context built here: dicts, lists, strings and
numbers, never a database row.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from drift.analysis.diff import (
    BlindSpot,
    Change,
    State,
    blind_spots,
    changes_between,
    failing_at,
    unchanged_between,
)
from drift.analysis.group import Restart, RestartEvent, category, group_changes
from drift.analysis.rank import ChurnInfo, RankedStory, rank_stories
from drift.analysis.scope import ConfigSwitch, ScopeSplit, split_scope
from drift.display import SHORT_VALUE
from drift.redact import shown_secret
from drift.store.query import History, SnapshotInfo, StoredVersion
from drift.timespec import When, from_us, local_time

DEFAULT_TOP = 10  # suspects shown unless --top N or --all
DIFF_LINES = 40


def where(provenance: dict[str, Any]) -> str:
    """Provenance in one short phrase: file:line, pid, command or glob."""
    if "file" in provenance and "line" in provenance:
        return f"{provenance['file']}:{provenance['line']}"
    if isinstance(provenance.get("possible"), list):
        # A script value several lines may give: name them all.
        spots = [
            f"{p['file']}:{p['line']}"
            for p in provenance["possible"]
            if isinstance(p, dict) and "file" in p and "line" in p
        ]
        if spots:
            return " or ".join(dict.fromkeys(spots))
    if "pid" in provenance:
        source = provenance.get("source") or provenance.get("found_by")
        return f"pid {provenance['pid']}" + (f" ({source})" if source else "")
    if "unit" in provenance:
        return f"unit {provenance['unit']}"
    if "run" in provenance:
        return f"$ {provenance['run']}"
    if "glob" in provenance:
        return f"matched {provenance['glob']}"
    if "file" in provenance:
        return str(provenance["file"])
    if "path" in provenance:
        return str(provenance["path"])
    return ""


_local = local_time


def _iso(us: int) -> str:
    return from_us(us).isoformat(timespec="microseconds")


class _Values:
    """Renders stored values for people: secrets as digests, long text shortened."""

    def __init__(self, history: History) -> None:
        self.history = history

    def show(self, version: StoredVersion | None) -> str | None:
        if version is None:
            return None
        if version.secret:
            return shown_secret(version.value)
        if version.blob_sha256 is not None:
            text = self.history.text(version)
            if "\n" not in text.rstrip("\n") and len(text) <= SHORT_VALUE:
                return text.rstrip("\n")  # one short line (a version, a count): show it
            lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
            noun = "line" if lines == 1 else "lines"
            return f"sha256:{version.blob_sha256[:12]} ({lines:,} {noun}, {len(text):,} chars)"
        return version.value or ""

    def diff(self, change: Change) -> dict[str, Any] | None:
        """For long text values (scripts, command output, config files): what changed inside.

        Config files with a format get the changed keys too.
        """
        versions = [v for v in (change.before, change.after) if v is not None]
        if not any(v.blob_sha256 for v in versions) or any(v.secret for v in versions):
            return None
        from drift.analysis.structured import diff_content

        old = self.history.text(change.before) if change.before else None
        new = self.history.text(change.after) if change.after else None
        latest = change.after or change.before
        fmt = str(latest.provenance.get("format", "text")) if latest else "text"
        result = diff_content(old, new, fmt, labels=("baseline", "current"))
        lines = list(result.unified)
        if len(lines) > DIFF_LINES:
            lines = lines[:DIFF_LINES] + [f"... {len(lines) - DIFF_LINES:,} more diff lines"]
        return {
            "format": result.format,
            "keys": [
                {"path": k.path, "kind": k.kind, "before": k.before, "after": k.after}
                for k in result.key_changes
            ],
            "parse_error": result.parse_error,
            "lines": lines,
        }


def _snapshot_ctx(snap: SnapshotInfo, asked: When | None, why: str) -> dict[str, Any]:
    return {
        "snapshot": snap.id,
        "time": _iso(snap.taken_us),
        "local": _local(snap.taken_us),
        "asked": asked.text if asked is not None else None,
        "why": why,
        "facts": snap.n_facts,
    }


def _change_ctx(change: Change, values: _Values) -> dict[str, Any]:
    latest = change.after or change.before
    assert latest is not None
    return {
        "subject": change.subject,
        "key": change.key,
        "kind": change.kind,
        "category": category(change.subject, change.key),
        "before": values.show(change.before),
        "after": values.show(change.after),
        "secret": latest.secret,
        "changed_at": _iso(change.changed_us),
        "changed_local": _local(change.changed_us),
        "where": where(latest.provenance),
        "provenance": latest.provenance,
        "diff": values.diff(change),
    }


def _blind_ctx(spot: BlindSpot) -> dict[str, Any]:
    return {
        "kind": spot.kind,
        "subject": spot.subject,
        "key": spot.key,
        "message": spot.message,
        "first_seen": _iso(spot.first_us),
        "last_seen": _iso(spot.last_us),
        "first_local": _local(spot.first_us),
        "last_local": _local(spot.last_us),
        "count": spot.count,
        "current": spot.current,
    }


def since_context(
    history: History,
    stable: When | None,
    until: When | None,
    *,
    command: str = "since",
    top: int | None = DEFAULT_TOP,
    service: str | None = None,
    labels: tuple[str, str] = ("--stable", "--until"),
) -> dict[str, Any]:
    """Everything `drift since` and `drift diff` show, from the baseline to `until` (or latest).

    Without `stable`, the baseline is the end of the most recent stable window.
    `top` keeps the first N suspects (None: all); `service` keeps the suspects
    that touch that service; `labels` name how `stable` and `until` were given.
    """
    from drift.analysis.windows import given_why, resolve_span

    span = resolve_span(history, stable, until, labels)
    chosen, baseline, current = span.chosen, span.baseline, span.current
    before = history.state_at(baseline.id)
    after = history.state_at(current.id)
    values = _Values(history)

    window = history.snapshots_between(baseline.id, current.id)
    scope = split_scope(
        [c for c in changes_between(before, after) if not c.subject.startswith("health:")],
        [baseline, *window],
        history.configs(),
    )
    changes = scope.changes
    stories, events = group_changes(changes, after, [baseline, *window])
    churn = ChurnInfo(
        history.version_counts(baseline.id), history.count_snapshots_upto(baseline.id)
    )
    inside = history.versions_started_between(baseline.id, current.id)
    flapped = flapping(before, after, inside)
    unhealthy = next((s for s in window if s.taken_us == chosen.unhealthy_us), None)
    ranked = rank_stories(
        stories,
        churn,
        unhealthy_at_us=chosen.unhealthy_us,
        unhealthy_until_us=(
            unhealthy.taken_us + unhealthy.duration_ms * 1000 if unhealthy is not None else None
        ),
        flapped=frozenset(flapped),
    )
    if service is not None:
        ranked = [r for r in ranked if _touches(r, service)]
    shown = ranked if top is None else ranked[:top]

    failing = failing_at(current, after)
    unchanged = unchanged_between(before, after, failing)
    per_kind = Counter(category(v.subject, v.key) for v in unchanged)
    # Subjects whose every fact is verified unchanged: "the kernel file is byte-identical".
    changed_subjects = {c.subject for c in changes} | {s for s, _k in failing}
    subjects = sorted({v.subject for v in unchanged} - changed_subjects)
    spots = blind_spots(baseline, window)

    suspects = [_suspect_ctx(r, values) for r in shown]
    by_subject: dict[str, list[dict[str, Any]]] = {}
    for suspect in suspects:
        for change in suspect["changes"]:
            by_subject.setdefault(change["subject"], []).append(
                {**change, "suspect_rank": suspect["rank"]}
            )
    return {
        "command": command,
        "host": history.host,
        "baseline": {
            **_snapshot_ctx(baseline, stable, chosen.why),
            "source": chosen.source,
            "unhealthy_at": _iso(chosen.unhealthy_us) if chosen.unhealthy_us else None,
        },
        "current": _snapshot_ctx(
            current,
            until,
            given_why(labels[1], until) if until is not None else "latest record",
        ),
        "trust": _trust(history, chosen.window, baseline, window, spots, scope.switches),
        "scope": _scope_ctx(scope),
        "window": {
            "snapshots": len(window),
            "with_errors": sum(1 for s in window if s.n_errors),
        },
        "total_suspects": len(ranked),
        "suspects": suspects,
        # Every change of the suspects shown, by subject: the report's appendix.
        "changes_by_subject": [
            {"subject": subject, "changes": changes}
            for subject, changes in sorted(by_subject.items())
        ],
        "timeline": _timeline(
            history, baseline, current, ranked, events, inside, flapped, scope.switches
        ),
        "unchanged": {
            "count": len(unchanged),
            "by_kind": dict(sorted(per_kind.items())),
            "subjects": subjects,
            # Files, repos and scripts whose every fact is unchanged, named one by one.
            "whole_subjects": [s for s in subjects if s.startswith(("file:", "repo:", "script:"))],
            "facts": [
                {
                    "subject": v.subject,
                    "key": v.key,
                    "value": values.show(v),
                    "since": _iso(v.first_taken_us),
                }
                for v in unchanged
            ],
        },
        "blind_spots": [_blind_ctx(s) for s in spots],
    }


def flapping(
    before: State, after: State, inside: list[StoredVersion]
) -> dict[tuple[str, str], int]:
    """Facts that changed inside the window and are back where they started: how many times."""
    started = Counter((v.subject, v.key) for v in inside)
    out = {}
    for ident, count in started.items():
        old, new = before.get(ident), after.get(ident)
        same = (old is None and new is None) or (
            old is not None and new is not None and old.identity == new.identity
        )
        if same:
            out[ident] = count
    return out


def _touches(ranked: RankedStory, service: str) -> bool:
    """Whether a suspect involves a service: its process, or a script or unit it runs."""
    story = ranked.story
    if service in story.services:
        return True
    for change in story.changes:
        if change.subject == f"service:{service}":
            return True
        latest = change.after or change.before
        if latest is not None and latest.provenance.get("service") == service:
            return True
    return False


def _restart_ctx(restart: Restart) -> dict[str, Any]:
    return {
        "service": restart.service,
        "before_pid": restart.before_pid,
        "after_pid": restart.after_pid,
        "at": _iso(restart.at_us),
        "at_local": _local(restart.at_us),
    }


def _suspect_ctx(ranked: RankedStory, values: _Values) -> dict[str, Any]:
    story = ranked.story
    return {
        "rank": ranked.rank,
        "score": round(ranked.score, 3),
        "title": story.title,
        "status": story.status,
        "label": story.label,
        "category": story.category,
        "services": list(story.services),
        "reasons": ranked.reasons,
        "signals": [
            {
                "name": s.name,
                "value": round(s.value, 3),
                "weight": round(s.weight, 3),
                "contribution": round(s.contribution, 3),
                "reason": s.reason,
            }
            for s in ranked.signals
        ],
        "changes": [
            {**_change_ctx(c, values), "role": "root" if c is story.root else "evidence"}
            for c in story.changes
        ],
        "restarts": [_restart_ctx(r) for r in story.restarts],
    }


def _scope_ctx(split: ScopeSplit) -> dict[str, Any]:
    """The config changes of the window, and the facts that only left or entered its scope."""

    def by_subject(changes: list[Change], version: str) -> list[dict[str, Any]]:
        subjects: dict[str, list[StoredVersion]] = {}
        for c in changes:
            v = c.before if version == "before" else c.after
            assert v is not None
            subjects.setdefault(c.subject, []).append(v)
        out = []
        for subject, versions in sorted(subjects.items()):
            at = min(
                (v.until_snapshot_id or 0, v.until_taken_us or 0)
                if version == "before"
                else (v.first_snapshot_id, v.first_taken_us)
                for v in versions
            )
            out.append(
                {
                    "subject": subject,
                    "facts": len(versions),
                    "since": at[0],
                    "since_local": _local(at[1]),
                }
            )
        return out

    return {
        "changes": [
            {
                "snapshot": s.snapshot_id,
                "at": _iso(s.taken_us),
                "local": _local(s.taken_us),
                "before_path": s.before_path,
                "after_path": s.after_path,
                "sections": list(s.sections),
                "text": s.text,
                "detail": s.detail,
            }
            for s in split.switches
        ],
        "untracked_facts": len(split.untracked),
        "tracked_facts": len(split.tracked),
        "untracked": by_subject(split.untracked, "before"),
        "tracked": by_subject(split.tracked, "after"),
    }


def _trust(
    history: History,
    stable_window: tuple[int, int] | None,
    baseline: SnapshotInfo,
    window: list[SnapshotInfo],
    spots: list[BlindSpot],
    switches: list[ConfigSwitch] | None = None,
) -> dict[str, Any]:
    """How far to trust the baseline: records in its stable window, gaps, collection errors,
    and whether the clock went back between the baseline and the current record."""
    from drift.analysis.windows import clock_steps

    in_window = None
    if stable_window is not None:
        in_window = history.count_snapshots_in(*stable_window)
    gaps = sum(1 for s in spots if s.kind == "gap")
    errors = sum(1 for s in spots if s.kind == "error")
    parts = []
    if in_window is not None:
        parts.append(f"{in_window:,} record{'' if in_window == 1 else 's'} in the stable window")
    parts.append(f"{len(window):,} after the baseline")
    parts.append(f"{gaps:,} gap{'' if gaps == 1 else 's'} in recording" if gaps else "no gaps")
    parts.append(
        f"{errors:,} kind{'' if errors == 1 else 's'} of collection error"
        if errors
        else "no collection errors"
    )
    if baseline.n_errors:
        noun = "error" if baseline.n_errors == 1 else "errors"
        parts.append(f"{baseline.n_errors:,} collection {noun} at the baseline itself")
    warnings = []
    steps = clock_steps([baseline, *window])
    if steps:
        parts.append(f"clock went back {len(steps)} time{'' if len(steps) == 1 else 's'}")
        for before, after in steps:
            back = round((before.taken_us - after.taken_us) / 1_000_000)
            warnings.append(
                f"the clock went back: snapshot #{after.id} was taken at {_local(after.taken_us)}, "
                f"{_duration(back)} before #{before.id} ({_local(before.taken_us)}); times in "
                "this window are out of order, so name snapshots by number (#N)"
            )
    if switches:
        parts.append("config changed at " + ", ".join(f"#{s.snapshot_id}" for s in switches))
    for spot in spots:
        # The key's problems weigh on every secret in the report, not on one fact.
        if spot.kind == "error" and spot.subject.startswith("secret-key:"):
            key_path = spot.subject.removeprefix("secret-key:")
            seen = _local(spot.first_us)
            if spot.count > 1:
                seen += f" to {_local(spot.last_us)}"
            warnings.append(f"secret key {key_path} {spot.message} (seen {seen})")
    return {
        "window_snapshots": in_window,
        "after_baseline": len(window),
        "gaps": gaps,
        "errors": errors,
        "baseline_errors": baseline.n_errors,
        "clock_steps": len(steps),
        "warnings": warnings,
        "summary": "; ".join(parts),
    }


def _duration(seconds: int) -> str:
    """`1h 05m`, `4m 10s`, `12s`: how far the clock went back."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _timeline(
    history: History,
    baseline: SnapshotInfo,
    current: SnapshotInfo,
    ranked: list[RankedStory],
    events: list[RestartEvent],
    inside: list[StoredVersion],
    flapped: dict[tuple[str, str], int],
    switches: list[ConfigSwitch] | None = None,
) -> list[dict[str, Any]]:
    """Restarts, changes, config switches, health transitions, flapping and marks, in time order."""
    entries: list[tuple[int, str, str]] = [(s.taken_us, "config", s.text) for s in switches or ()]
    for event in events:
        names = ", ".join(r.service for r in event.restarts)
        pids = ", ".join(f"{r.before_pid or '-'} -> {r.after_pid or '-'}" for r in event.restarts)
        kind = "co-restart" if len(event.restarts) > 1 else "restart"
        entries.append((event.at_us, "restart", f"{kind} of {names} (pids {pids})"))
    for r in ranked:
        entries.append((r.story.root.changed_us, "change", f"#{r.rank} {r.story.title}"))
    for v in inside:
        if v.subject.startswith("health:") and v.key == "ok":
            state = "passing" if v.value == "true" else "failing"
            entries.append((v.first_taken_us, "health", f"health check {v.subject[7:]} {state}"))
    for (subject, key), count in sorted(flapped.items()):
        if subject.startswith("health:"):
            continue
        entries.append(
            (
                current.taken_us,
                "flapping",
                f"{subject} {key} changed {count:,} time{'' if count == 1 else 's'} and is back "
                "to its baseline value",
            )
        )
    for mark in history.marks():
        if baseline.taken_us < mark.at_us <= current.taken_us:
            note = f": {mark.note}" if mark.note else ""
            entries.append((mark.at_us, "mark", f"marked {mark.kind}{note}"))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [
        {"at": _iso(at), "local": _local(at), "kind": kind, "text": text}
        for at, kind, text in entries
    ]


def show_context(history: History, at: When | None, pattern: str | None) -> dict[str, Any]:
    """The state at a snapshot, optionally only the facts matching PATTERN."""
    snap = history.snapshot_for(at) if at is not None else history.latest()
    state = history.state_at(snap.id)
    if pattern:
        keep = {(v.subject, v.key) for v in history.versions_of(pattern)}
        state = {i: v for i, v in state.items() if i in keep}
    values = _Values(history)
    subjects: dict[str, list[dict[str, Any]]] = {}
    for (subject, key), version in sorted(state.items()):
        subjects.setdefault(subject, []).append(
            {
                "key": key,
                "value": values.show(version),
                "secret": version.secret,
                "since": _iso(version.first_taken_us),
                "since_local": _local(version.first_taken_us),
                "where": where(version.provenance),
                "provenance": version.provenance,
            }
        )
    return {
        "host": history.host,
        "snapshot": _snapshot_ctx(
            snap, at, f"given with --at {at.text}" if at else "latest record"
        ),
        "pattern": pattern,
        "subjects": [{"subject": s, "facts": facts} for s, facts in subjects.items()],
        "errors": snap.errors,
    }


def _left_scope(history: History, versions: list[StoredVersion]) -> set[tuple[str, str, int]]:
    """(subject, key, first snapshot) of the versions that ended because their snapshot's
    config no longer asked for them."""
    ended = {(v.subject, v.key, v.until_snapshot_id) for v in versions if v.until_snapshot_id} - {
        (v.subject, v.key, v.first_snapshot_id) for v in versions
    }
    if not ended:
        return set()
    config_at = history.config_ids({s for _subject, _key, s in ended})
    configs = history.configs() if config_at else {}
    out = set()
    for v in versions:
        if (v.subject, v.key, v.until_snapshot_id) not in ended:
            continue
        config = configs.get(config_at.get(v.until_snapshot_id or 0, -1))
        if config is not None and not config.scope.covers(v.subject, v.provenance):
            out.add((v.subject, v.key, v.first_snapshot_id))
    return out


def history_context(history: History, pattern: str) -> dict[str, Any]:
    """Every version of every fact matching PATTERN, oldest first, with where it came from."""
    values = _Values(history)
    facts: dict[tuple[str, str], list[dict[str, Any]]] = {}
    versions = history.versions_of(pattern)
    untracked = _left_scope(history, versions)
    for v in versions:
        facts.setdefault((v.subject, v.key), []).append(
            {
                "value": values.show(v),
                "secret": v.secret,
                "from": _iso(v.first_taken_us),
                "from_local": _local(v.first_taken_us),
                "from_snapshot": v.first_snapshot_id,
                "until": _iso(v.until_taken_us) if v.until_taken_us else None,
                "until_local": _local(v.until_taken_us) if v.until_taken_us else None,
                "until_snapshot": v.until_snapshot_id,
                # Ended because the config stopped asking for it, not because it went away.
                "untracked": (v.subject, v.key, v.first_snapshot_id) in untracked,
                "where": where(v.provenance),
                "provenance": v.provenance,
            }
        )
    return {
        "host": history.host,
        "pattern": pattern,
        "facts": [{"subject": s, "key": k, "versions": vs} for (s, k), vs in facts.items()],
    }
