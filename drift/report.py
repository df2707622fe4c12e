"""Build the report context (plain data) and render it as text or JSON.

Templates only ever see the context built here: dicts, lists, strings and
numbers, never a database row.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from typing import Any

from drift.analysis.diff import (
    BlindSpot,
    Change,
    blind_spots,
    changes_between,
    failing_at,
    unchanged_between,
)
from drift.store.query import History, SnapshotInfo, StoredVersion, from_us
from drift.timespec import When, local_zone

RESULT_VERSION = 1
SHORT_VALUE = 160
DIFF_LINES = 40

# Order of suspects until ranking lands: config that shapes a process first,
# volatile ids last.
CATEGORY_ORDER = [
    "script export",
    "script exec",
    "live env",
    "live flag",
    "live command line",
    "unit",
    "script content",
    "file",
    "repo",
    "command",
    "service state",
    "process id",
]


def category(subject: str, key: str) -> str:
    """A human name for the kind of fact, used for ordering and counting."""
    kind = subject.split(":", 1)[0]
    if kind == "script":
        if key.startswith("export:"):
            return "script export"
        if key == "content":
            return "script content"
        return "script exec"
    if kind == "service":
        if key.startswith("env:"):
            return "live env"
        if key.startswith("flag:"):
            return "live flag"
        if key.startswith("unit:"):
            return "unit"
        if key in ("argv", "exe", "cwd", "user"):
            return "live command line"
        if key == "running":
            return "service state"
        return "process id"
    return {"file": "file", "repo": "repo", "command": "command"}.get(kind, kind)


def where(provenance: dict[str, Any]) -> str:
    """Provenance in one short phrase: file:line, pid, command or glob."""
    if "file" in provenance and "line" in provenance:
        return f"{provenance['file']}:{provenance['line']}"
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


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]|\x1b\[[0-9;?]*[A-Za-z]")


def printable(text: str) -> str:
    """Strip terminal control sequences from untrusted text (values come from the box)."""
    return _CONTROL.sub(lambda m: "" if m.group(0).startswith("\x1b") else "?", text)


def _local(us: int) -> str:
    return from_us(us).astimezone(local_zone()).strftime("%Y-%m-%d %H:%M:%S %Z")


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
            return f"[redacted {version.value.split(':')[-1][:8] if version.value else ''}]"
        if version.blob_sha256 is not None:
            text = self.history.text(version)
            lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
            noun = "line" if lines == 1 else "lines"
            return f"sha256:{version.blob_sha256[:12]} ({lines} {noun}, {len(text)} chars)"
        return version.value or ""

    def diff(self, change: Change) -> list[str]:
        """A unified diff for long text values (scripts, command output)."""
        versions = [v for v in (change.before, change.after) if v is not None]
        if not any(v.blob_sha256 for v in versions) or any(v.secret for v in versions):
            return []
        old = self.history.text(change.before).splitlines() if change.before else []
        new = self.history.text(change.after).splitlines() if change.after else []
        lines = list(difflib.unified_diff(old, new, "baseline", "current", lineterm="", n=1))
        if len(lines) > DIFF_LINES:
            lines = lines[:DIFF_LINES] + [f"... {len(lines) - DIFF_LINES} more diff lines"]
        return lines


def _snapshot_ctx(snap: SnapshotInfo, asked: When | None, why: str) -> dict[str, Any]:
    return {
        "snapshot": snap.id,
        "time": _iso(snap.taken_us),
        "local": _local(snap.taken_us),
        "asked": asked.text if asked is not None else None,
        "why": why,
        "facts": snap.n_facts,
    }


def _change_ctx(rank: int, change: Change, values: _Values) -> dict[str, Any]:
    latest = change.after or change.before
    assert latest is not None
    return {
        "rank": rank,
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


def since_context(history: History, stable: When | None, until: When | None) -> dict[str, Any]:
    """Everything `drift since` shows: changes from the baseline to --until (default latest).

    Without `stable`, the baseline is the end of the most recent stable window.
    """
    from drift.analysis.windows import choose_baseline

    chosen = choose_baseline(history, stable)
    baseline = history.snapshot_for(chosen.when)
    current = history.snapshot_for(until) if until is not None else history.latest()
    if current.id < baseline.id:
        from drift.errors import TimeSpecError

        raise TimeSpecError(
            f"--until {until.text if until else ''} (snapshot #{current.id}) is "
            f"before the baseline (snapshot #{baseline.id})"
        )
    before = history.state_at(baseline.id)
    after = history.state_at(current.id)
    values = _Values(history)

    changes = changes_between(before, after)
    changes.sort(
        key=lambda c: (
            CATEGORY_ORDER.index(category(c.subject, c.key))
            if category(c.subject, c.key) in CATEGORY_ORDER
            else len(CATEGORY_ORDER),
            c.changed_us,
            c.subject,
            c.key,
        )
    )
    window = history.snapshots_between(baseline.id, current.id)
    failing = failing_at(current, after)
    unchanged = unchanged_between(before, after, failing)
    per_kind = Counter(category(v.subject, v.key) for v in unchanged)
    # Subjects whose every fact is verified unchanged: "the kernel file is byte-identical".
    changed_subjects = {c.subject for c in changes} | {s for s, _k in failing}
    subjects = sorted({v.subject for v in unchanged} - changed_subjects)

    return {
        "host": history.host,
        "baseline": _snapshot_ctx(baseline, stable, chosen.why),
        "current": _snapshot_ctx(
            current,
            until,
            f"given with --until {until.text}" if until is not None else "latest record",
        ),
        "window": {
            "snapshots": len(window),
            "with_errors": sum(1 for s in window if s.n_errors),
        },
        "suspects": [_change_ctx(i, c, values) for i, c in enumerate(changes, 1)],
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
        "blind_spots": [_blind_ctx(s) for s in blind_spots(baseline, window)],
    }


def envelope(command: str, data: Any, errors: list[str] | None = None) -> dict[str, Any]:
    """The versioned JSON envelope every --format json output uses."""
    return {
        "drift_result_version": RESULT_VERSION,
        "command": command,
        "data": data,
        "errors": errors or [],
    }


def render_json(command: str, data: Any) -> str:
    return json.dumps(envelope(command, data), indent=2, ensure_ascii=False)


def render_template(name: str, context: dict[str, Any], templates_dir: str | None = None) -> str:
    """Render a template from templates/ (or the user's override folder)."""
    from jinja2 import (
        ChoiceLoader,
        Environment,
        FileSystemLoader,
        StrictUndefined,
        select_autoescape,
    )

    from drift.resources import resource_dir

    loaders = [FileSystemLoader(templates_dir)] if templates_dir else []
    loaders.append(FileSystemLoader(str(resource_dir("templates"))))
    env = Environment(
        loader=ChoiceLoader(loaders),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["printable"] = printable
    env.filters["short"] = lambda s, n=SHORT_VALUE: (
        s if s is None or len(s) <= n else s[: n - 1] + "…"
    )
    return env.get_template(name).render(**context)


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


def history_context(history: History, pattern: str) -> dict[str, Any]:
    """Every version of every fact matching PATTERN, oldest first, with where it came from."""
    values = _Values(history)
    facts: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for v in history.versions_of(pattern):
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
                "where": where(v.provenance),
                "provenance": v.provenance,
            }
        )
    return {
        "host": history.host,
        "pattern": pattern,
        "facts": [{"subject": s, "key": k, "versions": vs} for (s, k), vs in facts.items()],
    }
