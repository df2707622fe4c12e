"""Stored values and times as people read them: secrets as digests, long text shortened.

What every view of the history shows for a value (`drift since`, `show`,
`history`), where it came from in one phrase, and what changed inside a long
text value. This is analysis for people, not rendering: templates and JSON
receive the strings made here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from drift.analysis.diff import Change
from drift.analysis.origins import with_default
from drift.analysis.structured import Hunk, KeyChange, diff_content, select_hunks
from drift.display import SHORT_VALUE
from drift.secrets.markers import shown_secret
from drift.store.query import History, StoredVersion
from drift.timespec import clock

DIFF_LINES = 40  # unified diff lines kept for one change


def where(provenance: dict[str, Any]) -> str:
    """Provenance in one short phrase: file:line, pid, command or glob, and the container
    it was read in, if any (``/opt/serve/decode.sh:3 in container sglang``).
    """
    spot = _spot(provenance)
    container = provenance.get("container")
    if spot and isinstance(container, str):
        return f"{spot} in container {container}"
    return spot


def where_read(version: StoredVersion, pids: Mapping[str, str]) -> str:
    """`where` for a version shown at a record whose service's process is `pids` there:
    a value of a process that carried over unchanged into a later one is
    ``read from pid A at T, unchanged in pid B (/proc/A/environ)``.

    A store keeps a value unchanged across a restart as the version the old
    process gave, with its provenance; that pid is gone, and the one the
    value lives in now is the service's pid at the record shown.
    """
    provenance = version.provenance
    now = pids.get(version.subject)
    read = provenance.get("pid")
    if now is None or read is None or str(read) == now or version.key.startswith("unit:"):
        return where(provenance)
    source = provenance.get("source") or provenance.get("found_by")
    text = f"read from pid {read} at {clock(version.first_taken_us)}, unchanged in pid {now}"
    text += f" ({source})" if source else ""
    container = provenance.get("container")
    return f"{text} in container {container}" if isinstance(container, str) else text


def service_pids(state: Mapping[tuple[str, str], StoredVersion]) -> dict[str, str]:
    """Each service's pid in a state, by subject (see `where_read`)."""
    return {
        subject: v.value
        for (subject, key), v in state.items()
        if key == "pid" and subject.startswith("service:") and v.value is not None
    }


def _spot(provenance: dict[str, Any]) -> str:
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
    if "url" in provenance:
        return f"GET {provenance['url']}"
    if "file" in provenance:
        return str(provenance["file"])
    if "path" in provenance:
        return str(provenance["path"])
    if isinstance(provenance.get("paths"), list):  # a [[caches]] entry's folders
        return ", ".join(map(str, provenance["paths"]))
    return ""


@dataclass(frozen=True, kw_only=True)
class ValueDiff:
    """What changed inside a long text value: changed keys of a config file, and diff lines."""

    format: str
    keys: list[KeyChange]
    parse_error: str | None
    lines: list[str]


class Values:
    """Shows stored values for people: secrets as digests, long text shortened."""

    def __init__(self, history: History) -> None:
        self.history = history

    def show(self, version: StoredVersion | None) -> str | None:
        """The value as shown: a secret's digest, a long text's digest and size, else itself."""
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
        return with_default(version) or version.value or ""

    def diff(self, change: Change, keep: Callable[[Hunk], bool] | None = None) -> ValueDiff | None:
        """For long text values (scripts, command output, config files): what changed inside.

        Config files with a format get the changed keys too. With `keep`, only
        the hunks it says yes to (another story shows the rest); None if none.
        """
        versions = [v for v in (change.before, change.after) if v is not None]
        if not any(v.blob_sha256 for v in versions) or any(v.secret for v in versions):
            return None
        old = self.history.text(change.before) if change.before else None
        new = self.history.text(change.after) if change.after else None
        latest = change.after or change.before
        fmt = str(latest.provenance.get("format", "text")) if latest else "text"
        result = diff_content(old, new, fmt, labels=("baseline", "current"))
        lines = list(result.unified if keep is None else select_hunks(result.unified, keep))
        if keep is not None and not lines:
            return None
        if len(lines) > DIFF_LINES:
            lines = lines[:DIFF_LINES] + [f"... {len(lines) - DIFF_LINES:,} more diff lines"]
        return ValueDiff(
            format=result.format,
            keys=list(result.key_changes),
            parse_error=result.parse_error,
            lines=lines,
        )
