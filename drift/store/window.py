"""A window of the history, aggregated in SQL: the records and the values analysis reads.

A window of six months holds 260k records and, with a command whose output
changes every minute, 260k versions. Analysis reads few of them: the
records where something it looks at changes (an error, a config, a gap, a
clock step, the snapshots that first saw a change, and the one before
each), counts of the rest, and every value of the facts whose each value
tells (a service's runs, the health checks). Everything else is counted in
SQL, not built as rows.
"""

from __future__ import annotations

import operator
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from drift.store.query import (
    IDS_PER_QUERY,
    SNAPSHOT_COLUMNS,
    VERSION_COLUMNS,
    VERSION_JOINS,
    History,
    SnapshotInfo,
    StoredVersion,
    snapshot_row,
    version_row,
)


@dataclass(frozen=True)
class WindowRecords:
    """The records after a baseline up to a current one, as analysis needs them.

    `snapshots` (oldest first, the current one last) are those where an
    error, the config, the clock or a recording gap changes, those of the
    given ids and times, and the record before each of them; between two of
    them nothing analysis reads changes. `count` and `with_errors` count
    every record of the window; `usual_us` is the median interval between
    records (None with fewer than two intervals) and `gaps` the neighbours
    more than three times that apart.
    """

    snapshots: list[SnapshotInfo]
    count: int
    with_errors: int
    usual_us: float | None
    gaps: list[tuple[SnapshotInfo, SnapshotInfo]]


@dataclass(frozen=True)
class WindowVersions:
    """The versions that began inside a window (moves of a script line aside).

    `versions`: every one of the facts whose subject starts with one of the
    prefixes asked for; `counts`: how many began, per fact, for every fact.
    """

    versions: list[StoredVersion]
    counts: dict[tuple[str, str], int]


def window_versions(
    history: History, after_id: int, upto_id: int, whole: tuple[str, ...]
) -> WindowVersions:
    """The versions begun in (after_id, upto_id]: counted per fact, and in full for the facts
    whose subject starts with one of `whole`."""
    window = (
        "WHERE f.host_id = ? AND v.first_snapshot_id > ? AND v.first_snapshot_id <= ? "
        f"AND {history.not_a_move()}"
    )
    params = (history.host_id, after_id, upto_id)
    versions: list[StoredVersion] = []
    if whole:
        prefixes = " OR ".join(f"substr(f.subject, 1, {len(p)}) = ?" for p in whole)
        rows = history.rows(
            f"SELECT {VERSION_COLUMNS} FROM facts f JOIN versions v ON v.fact_id = f.id "
            f"{VERSION_JOINS} {window} AND ({prefixes})",
            (*params, *whole),
        )
        versions = [version_row(r) for r in rows]
    return WindowVersions(versions, history.counts_between(after_id, upto_id))


def state_after(
    history: History,
    before: dict[tuple[str, str], StoredVersion],
    after_id: int,
    upto_id: int,
) -> dict[tuple[str, str], StoredVersion]:
    """The state at `upto_id` from the state `before` at `after_id`: what stayed open, and the
    versions begun in between that are still open (History.state_at, building only those)."""
    state = {
        ident: v
        for ident, v in before.items()
        if v.until_snapshot_id is None or v.until_snapshot_id > upto_id
    }
    rows = history.rows(*history.state_sql(upto_id, began_after=after_id))
    state.update({(r[0], r[1]): version_row(r) for r in rows})
    return state


def window_records(
    history: History,
    baseline: SnapshotInfo,
    current: SnapshotInfo,
    ids: Iterable[int] = (),
    times: Iterable[int] = (),
) -> WindowRecords:
    """The records of (baseline, current] analysis reads, with the counts of all of them.

    `ids` and `times` name more records to keep (those that saw a change, a
    value's first and last records), each with the record before it.

    The window's ids and times are read as two integers a record (SQLite's
    window functions sort the window again and take ten times as long); the
    full rows only of the records kept.
    """
    window = (history.host_id, baseline.id, current.id)
    # `+host_id`: SQLite walks the table by id (rowid) instead of the index and a lookup
    # a row. Not on PostgreSQL: there a fleet's hosts share the table and interleave, and
    # its planner must keep ix_snapshots_host_id_id (one row in a hundred is this host's).
    host = "+host_id" if history.conn.dialect == "sqlite" else "host_id"
    span = f"FROM snapshots WHERE {host} = ? AND id >= ? AND id <= ?"
    id_of, at = _ids_and_times(history, span, window)
    if len(id_of) < 2:
        return WindowRecords([], 0, 0, None, [])
    count = len(id_of) - 1
    steps = array("q", map(operator.sub, at[1:], at[:-1]))
    usual = median(steps) if count >= 2 else None
    limit = 3 * usual if usual is not None and usual > 0 else None
    # Where the clock went back or a gap opened: the records on both sides.
    odd = [i for i, step in enumerate(steps, 1) if step < 0 or (limit is not None and step > limit)]
    keep = {id_of[-1], *(id_of[i] for i in odd), *(id_of[i - 1] for i in odd)}
    gap_at = [i for i in odd if steps[i - 1] > 0]
    errors = history.rows(f"SELECT id {span} AND n_errors > 0", window)
    named = {i for i in ids if baseline.id < i <= current.id}
    named |= {int(r[0]) for r in errors}
    if times:
        wanted = set(times)
        named |= {id_of[i] for i in range(1, len(at)) if at[i] in wanted}
    named |= _config_switches(history, span, window, len(id_of))
    for snap_id in named:
        where = bisect_left(id_of, snap_id)
        if where < len(id_of) and id_of[where] == snap_id:
            keep |= {id_of[max(where - 1, 0)], snap_id}
    found = {s.id: s for s in _snapshots(history, keep | {baseline.id})}
    kept = [found[i] for i in sorted(found) if i > baseline.id]
    gaps = [(found[id_of[i - 1]], found[id_of[i]]) for i in gap_at]
    with_errors = sum(1 for r in errors if int(r[0]) != baseline.id)
    return WindowRecords(kept, count, with_errors, usual, gaps)


def median(values: Sequence[int]) -> float:
    """The median, as statistics.median gives it (the mean of the middle two of an even
    count), without importing statistics (with fractions and decimal) for it."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _ids_and_times(
    history: History, span: str, window: tuple[int, int, int]
) -> tuple[array[int], array[int]]:
    """The window's record ids and times, in id order, as two arrays of 64-bit integers
    (a list of 260k row tuples would hold three times the memory)."""
    ids, times = array("q"), array("q")
    cursor = history.conn.execute(f"SELECT id, taken_us {span} ORDER BY id", window)
    while rows := cursor.fetchmany(10_000):
        chunk_ids, chunk_times = zip(*rows, strict=True)
        ids.extend(chunk_ids)
        times.extend(chunk_times)
    return ids, times


def _config_switches(
    history: History, span: str, window: tuple[int, int, int], records: int
) -> set[int]:
    """The records whose config differs from the one before (most windows have one config:
    one aggregate says so)."""
    low, high, known = history.rows(
        f"SELECT min(config_id), max(config_id), count(config_id) {span}", window
    )[0]
    if low == high and int(known) in (0, records):
        return set()
    rows = history.rows(f"SELECT id, config_id {span} ORDER BY id", window)
    return {int(b[0]) for a, b in zip(rows, rows[1:], strict=False) if a[1] != b[1]}


def _snapshots(history: History, ids: set[int]) -> list[SnapshotInfo]:
    out = []
    todo = sorted(ids)
    for start in range(0, len(todo), IDS_PER_QUERY):
        chunk = todo[start : start + IDS_PER_QUERY]
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT {SNAPSHOT_COLUMNS} FROM snapshots WHERE id IN ({marks})"
        out += [snapshot_row(r) for r in history.rows(sql, chunk)]
    return out


def versions_between(
    history: History, idents: Iterable[tuple[str, str]], after_id: int, upto_id: int
) -> dict[tuple[str, str], list[StoredVersion]]:
    """Each fact's versions open at `after_id` or begun in (after_id, upto_id], oldest first:
    what a fact that left its value and came back inside a window held on the way."""
    wanted = set(idents)
    if not wanted:
        return {}
    rows = history.rows("SELECT id, subject, key FROM facts WHERE host_id = ?", (history.host_id,))
    ids = sorted(int(r[0]) for r in rows if (r[1], r[2]) in wanted)
    out: dict[tuple[str, str], list[StoredVersion]] = {}
    for v in history.versions_after(ids, after_id):
        if v.first_snapshot_id <= upto_id:
            out.setdefault((v.subject, v.key), []).append(v)
    return out
