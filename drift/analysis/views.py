"""The recorded state at a snapshot (`drift show`) and every version of a fact (`drift history`).

Typed contexts, as `Investigation` is for `drift since`: their field names
are the keys of the JSON output and what the templates read (see `plain`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drift.analysis.investigation import SnapshotRef, snapshot_ref
from drift.analysis.service_scope import another_services, owned_by, owners
from drift.analysis.values import Values, where_read
from drift.names import no_fact_matches
from drift.store.query import History, StoredVersion
from drift.timespec import When, iso, local_time, refuse_future, typed_shown

# Values shown per fact by `drift history` unless --limit N or --all: the newest ones.
HISTORY_LIMIT = 20


# Not frozen: there is one per fact of the box, and a frozen dataclass is twice as slow to build.
@dataclass(slots=True, kw_only=True)
class StateFact:
    """One fact of the state: its value, since when, and where it came from."""

    key: str
    value: str | None
    secret: bool
    since: str
    since_local: str
    where: str
    provenance: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class SubjectState:
    """The facts of one subject, by key."""

    subject: str
    facts: list[StateFact]


@dataclass(frozen=True, kw_only=True)
class StateView:
    """The recorded state at a snapshot, optionally only the facts matching a pattern."""

    host: str
    snapshot: SnapshotRef
    pattern: str | None
    service: str | None = None  # --service: only its subjects, no other service's errors
    subjects: list[SubjectState]
    errors: list[dict[str, Any]]  # the snapshot's collection errors, as stored


def state_view(
    history: History, at: When | None, pattern: str | None, service: str | None = None
) -> StateView:
    """The state at the snapshot for `at` (default: the latest), only facts matching `pattern`
    and, with `service`, only that service's subjects."""
    refuse_future(at, "--at")
    snap = history.snapshot_for(at) if at is not None else history.latest()
    state = history.state_of(snap.id, pattern) if pattern else history.state_at(snap.id)
    if pattern and not state and not history.matching_facts(pattern):
        # No fact at any time: a typo, not a state without it.
        raise no_fact_matches(pattern, history.host, history.fact_idents())
    errors = snap.errors
    if service is not None:
        known = owners(history.state_at(snap.id).values() if pattern else state.values())
        state = {k: v for k, v in state.items() if owned_by(k[0], service, known)}
        errors = [e for e in errors if not another_services(e["subject"], service, known)]
    values = Values(history)
    pids = history.pids_at(snap.id)
    subjects: dict[str, list[StateFact]] = {}
    for (subject, key), version in sorted(state.items()):
        subjects.setdefault(subject, []).append(
            StateFact(
                key=key,
                value=values.show(version),
                secret=version.secret,
                since=iso(version.first_taken_us),
                since_local=local_time(version.first_taken_us),
                where=where_read(version, pids),
                provenance=version.provenance,
            )
        )
    return StateView(
        host=history.host,
        snapshot=snapshot_ref(
            snap, at, f"given with --at {typed_shown(at)}" if at else "latest record"
        ),
        pattern=pattern,
        service=service,
        subjects=[SubjectState(subject=s, facts=facts) for s, facts in subjects.items()],
        errors=errors,
    )


@dataclass(slots=True, kw_only=True)
class FactVersion:
    """One value a fact had: from when, until when, and where it came from.

    `from_` is the key `from` in plain data (a Python keyword cannot name a field).
    """

    value: str | None
    secret: bool
    from_: str
    from_local: str
    from_snapshot: int
    until: str | None
    until_local: str | None
    until_snapshot: int | None
    untracked: bool  # ended because the config stopped asking for it, not because it went away
    where: str
    provenance: dict[str, Any]
    # With `history -p`: the change that made this value, as a unified diff of the text
    # (from nothing for the first value recorded); None without -p.
    patch: list[str] | None = None


@dataclass(frozen=True, kw_only=True)
class FactVersions:
    """The newest versions of one fact, newest first, and how many older ones were left out."""

    subject: str
    key: str
    versions: list[FactVersion]
    older: int


@dataclass(frozen=True, kw_only=True)
class FactHistory:
    """The versions of every fact matching a pattern: per fact, the newest `limit` (None: all)."""

    host: str
    pattern: str
    limit: int | None
    facts: list[FactVersions]
    # The host's first record: a value shown from it may be older (`drift prune` drops
    # the records before, and a value's start with them), so it is named as such.
    begins_snapshot: int


def fact_history(
    history: History, pattern: str, limit: int | None = HISTORY_LIMIT, *, patch: bool = False
) -> FactHistory:
    """The versions of every fact matching `pattern`, newest first, with where each came from:
    per fact the newest `limit` (None: every one), and how many older ones there are; with
    `patch`, each with the unified diff from the value before it."""
    values = Values(history)
    # A patch needs the value before the oldest one shown: one more is read, then dropped.
    pages = history.newest_versions_of(pattern, limit + 1 if patch and limit else limit)
    if not pages:
        raise no_fact_matches(pattern, history.host, history.fact_idents())
    versions = [v for page in pages for v in page.versions]
    history.load_texts(versions)
    untracked = _left_scope(history, versions)
    pids = _pids_at_ends(history, versions)
    facts = []
    for page in pages:
        shown = page.versions[:limit] if limit else page.versions
        made = [
            _fact_version(v, values, untracked, pids.get(v.until_snapshot_id, {})) for v in shown
        ]
        if patch:
            before = [*page.versions[1:], None]
            for entry, v, old in zip(made, shown, before, strict=False):
                entry.patch = _patch(history, values, old, v)
        older = page.older + len(page.versions) - len(shown)
        facts.append(FactVersions(subject=page.subject, key=page.key, versions=made, older=older))
    return FactHistory(
        host=history.host,
        pattern=pattern,
        limit=limit,
        facts=facts,
        begins_snapshot=history.first().id,
    )


def _patch(
    history: History, values: Values, old: StoredVersion | None, new: StoredVersion
) -> list[str]:
    """The unified diff from `old` (None: nothing) to `new`, as `git log -p` shows a change:
    three lines of context, nothing cut; a secret reads as its marker, never in clear."""
    import difflib

    def lines(v: StoredVersion | None) -> list[str]:
        if v is None:
            return []
        if v.blob_sha256 is not None and not v.secret:
            return history.text(v).splitlines()
        return [values.show(v) or ""]

    label = f"#{old.first_snapshot_id}" if old is not None else "/dev/null"
    diff = difflib.unified_diff(
        lines(old), lines(new), label, f"#{new.first_snapshot_id}", lineterm="", n=3
    )
    return list(diff)


def _pids_at_ends(
    history: History, versions: list[StoredVersion]
) -> dict[int | None, dict[str, str]]:
    """The services' pids at the last record of each service version, by its end (None:
    still open): the process the value was in when it was last seen."""
    ends = {v.until_snapshot_id for v in versions if v.subject.startswith("service:")}
    latest = history.latest().id if None in ends else 0
    # A version ending at snapshot U was last read by this host's record before U, and
    # no record of this host lies between that one and U: the state at U - 1 is its.
    return {end: history.pids_at(latest if end is None else end - 1) for end in ends}


def _fact_version(
    v: StoredVersion, values: Values, untracked: set[tuple[str, str, int]], pids: Mapping[str, str]
) -> FactVersion:
    return FactVersion(
        value=values.show(v),
        secret=v.secret,
        from_=iso(v.first_taken_us),
        from_local=local_time(v.first_taken_us),
        from_snapshot=v.first_snapshot_id,
        until=iso(v.until_taken_us) if v.until_taken_us else None,
        until_local=local_time(v.until_taken_us) if v.until_taken_us else None,
        until_snapshot=v.until_snapshot_id,
        untracked=(v.subject, v.key, v.first_snapshot_id) in untracked,
        where=where_read(v, pids),
        provenance=v.provenance,
    )


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
