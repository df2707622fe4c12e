"""`drift cat PATH [--at WHEN]`: a recorded file as it was, like `git show REV:path`.

A serve script, a content-tracked file or a unit file is stored whole (its
secrets already masked by the record), and prints as it was. An env file is
not: what drift keeps of it are the assignments read from it, each with its
line, so that is what prints, and the note says it is not the file. A path
never recorded is refused, naming the recorded paths closest to it.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

from drift.errors import TimeSpecError, UnknownNameError
from drift.secrets.markers import shown_secret
from drift.store.query import History, StoredVersion
from drift.timespec import When, local_time, refuse_future

# The subjects whose `content` is a file's text, in the order one is preferred.
TEXT_SUBJECTS = ("script:", "file:")
UNIT_FILE_KEY = "unit:file:"


@dataclass(frozen=True, kw_only=True)
class RecordedText:
    """What `drift cat` prints (`text`) and says of it on stderr (`note`)."""

    path: str
    snapshot: int
    text: str
    note: str


def _text_facts(idents: list[tuple[str, str]], paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """The (subject, key) whose value is the whole text of one of `paths`."""
    found = []
    for prefix in TEXT_SUBJECTS:
        found += [(prefix + p, "content") for p in paths if (prefix + p, "content") in idents]
    found += [(s, k) for s, k in idents if k.startswith(UNIT_FILE_KEY) and k[10:] in paths]
    return found


def recorded_text(history: History, path: str, at: When | None) -> RecordedText:
    """PATH's recorded text at the snapshot for `at` (default: the latest record)."""
    refuse_future(at, "--at")
    snap = history.snapshot_for(at, "--at") if at is not None else history.latest()
    paths = tuple(dict.fromkeys([path, os.path.abspath(path)]))
    idents = history.fact_idents()
    known = set(idents)
    when = f"#{snap.id} ({local_time(snap.taken_us)})"
    spans: list[StoredVersion] = []
    for subject, key in _text_facts(sorted(known), paths):
        versions = history.fact_versions(subject, key)
        spans += versions
        held = [v for v in versions if _holds(v, snap.id)]
        if held:
            return _whole(history, subject.partition(":")[2] or key[10:], held[0], snap.id, when)
    assignments = _assignments(history, paths, snap.id)
    if assignments:
        name = paths[-1]
        return RecordedText(
            path=name,
            snapshot=snap.id,
            text="".join(f"{line}\n" for line in assignments),
            note=f"{name} at {when}: drift keeps no text of it, only what was read from it: "
            f"these {len(assignments)} assignments, by line (comments and other lines "
            "are not kept)",
        )
    if spans:
        first, last = spans[0], spans[-1]
        until = f"#{last.until_snapshot_id}" if last.until_snapshot_id else "now"
        raise TimeSpecError(
            f"{paths[-1]} was not recorded at {when}: it was from #{first.first_snapshot_id} "
            f"({local_time(first.first_taken_us)}) to {until}"
        )
    if history.read_from(paths):
        raise TimeSpecError(
            f"{paths[-1]}: nothing read from it is recorded at {when}, though values were "
            "read from it at other times (give another --at)"
        )
    raise _never_recorded(history, paths[-1], idents)


def _holds(v: StoredVersion, snapshot_id: int) -> bool:
    return v.first_snapshot_id <= snapshot_id and (
        v.until_snapshot_id is None or v.until_snapshot_id > snapshot_id
    )


def _whole(
    history: History, path: str, version: StoredVersion, snapshot_id: int, when: str
) -> RecordedText:
    first = version.first_snapshot_id
    since = f" (unchanged since #{first})" if first != snapshot_id else ""
    if version.secret:
        text = shown_secret(version.value) + "\n"
        note = f"{path} at {when}{since}: the whole text is a secret; drift keeps its digest"
    else:
        text = history.text(version)
        note = f"{path} at {when}{since}, secrets masked"
    return RecordedText(path=path, snapshot=snapshot_id, text=text, note=note)


def _assignments(history: History, paths: tuple[str, ...], snapshot_id: int) -> list[str]:
    """`NAME=value` of every fact read from a line of one of `paths` at the snapshot, by line."""
    rows: set[tuple[int, str, str]] = set()
    for (_subject, key), v in history.state_at(snapshot_id).items():
        where = v.provenance
        if where.get("file") in paths and isinstance(where.get("line"), int):
            value = shown_secret(v.value) if v.secret else history.text(v)
            rows.add((where["line"], key.rsplit(":", 1)[-1], value))
    return [f"{name}={value}" for _line, name, value in sorted(rows)]


def _never_recorded(history: History, path: str, idents: list[tuple[str, str]]) -> UnknownNameError:
    recorded = {
        s.partition(":")[2] for s, k in idents if k == "content" and s.startswith(TEXT_SUBJECTS)
    }
    recorded |= {k[10:] for _s, k in idents if k.startswith(UNIT_FILE_KEY)}
    close = difflib.get_close_matches(path, sorted(recorded), n=3, cutoff=0.4)
    hint = (
        f"closest recorded: {', '.join(close)}"
        if close
        else "`drift show content` lists the recorded scripts and files"
    )
    return UnknownNameError(f"{path}: never recorded for host {history.host} ({hint})")
