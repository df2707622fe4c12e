"""Read the history: snapshots by time, the state at a snapshot, a fact's past values.

Everything here returns plain dataclasses, never ORM objects, so analysis
and templates stay independent of the database.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, func, not_, or_, select
from sqlalchemy.orm import aliased

from drift.errors import NoHistoryError, TimeSpecError
from drift.store.db import open_engine
from drift.store.delta import TEXT_KEYS
from drift.store.models import Blob, ConfigRecord, Host, Mark, Provenance, Snapshot, Version
from drift.store.models import Fact as FactRow
from drift.store.schema import require_schema
from drift.store.urls import DbUrl
from drift.timespec import When, describe_when, from_us, quote_when, to_us

if TYPE_CHECKING:
    from drift.scope import ConfigInfo


@dataclass(frozen=True)
class SnapshotInfo:
    """One recorded snapshot."""

    id: int
    taken_us: int
    duration_ms: int
    n_facts: int
    n_changed: int
    n_errors: int
    errors: list[dict[str, Any]] = field(default_factory=list)
    # The config the snapshot was taken with (History.configs); None before drift kept it.
    config_id: int | None = None

    @property
    def taken_at(self) -> datetime:
        return from_us(self.taken_us)


@dataclass(frozen=True)
class MarkInfo:
    """A stable, unstable or note mark someone recorded."""

    id: int
    at_us: int
    kind: str
    note: str | None


@dataclass(frozen=True)
class StoredVersion:
    """One value a fact held, from its first snapshot until (excluding) `until_snapshot_id`."""

    subject: str
    key: str
    value: str | None
    blob_sha256: str | None
    secret: bool
    first_snapshot_id: int
    first_taken_us: int
    until_snapshot_id: int | None
    until_taken_us: int | None
    provenance: dict[str, Any]
    # A short text stored inline (see _version); History.text gives it.
    inline_text: str | None = field(default=None, compare=False, repr=False)

    @property
    def identity(self) -> tuple[str | None, str | None, bool]:
        """What makes two versions the same value."""
        return (self.value, self.blob_sha256, self.secret)


def _snapshot(row: Any) -> SnapshotInfo:
    return SnapshotInfo(
        row.id,
        row.taken_us,
        row.duration_ms,
        row.n_facts,
        row.n_changed,
        row.n_errors,
        json.loads(row.errors) if row.errors else [],
        row.config_id,
    )


class History:
    """The read side of one host's history."""

    def __init__(self, engine: Engine, host: str, host_id: int) -> None:
        self.engine = engine
        self.host = host
        self.host_id = host_id
        self._blobs: dict[str, str] = {}

    @classmethod
    def open(cls, db: DbUrl, host: str) -> History:
        """Open a host's history; NoHistoryError if it has never been recorded."""
        require_schema(db)
        engine = open_engine(db)
        with engine.connect() as conn:
            host_id = conn.execute(select(Host.id).where(Host.name == host)).scalar()
            if host_id is None:
                hosts = conn.execute(select(Host.name).order_by(Host.name)).scalars().all()
        if host_id is None:
            engine.dispose()
            known = f" (recorded hosts: {', '.join(hosts)}; pick one with --host)" if hosts else ""
            raise NoHistoryError(
                f"no history for host {host!r} in {db.display()}{known}: run `drift record` first"
            )
        return cls(engine, host, host_id)

    def close(self) -> None:
        """Dispose of the engine and its connections (what leaving a `with` block does)."""
        self.engine.dispose()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- snapshots

    def _snapshot_query(self) -> Any:
        return select(Snapshot).where(Snapshot.host_id == self.host_id)

    def latest(self) -> SnapshotInfo:
        with self.engine.connect() as conn:
            row = conn.execute(self._snapshot_query().order_by(Snapshot.id.desc()).limit(1)).first()
        if row is None:
            raise NoHistoryError(f"no snapshot recorded for host {self.host!r} yet")
        return _snapshot(row)

    def first(self) -> SnapshotInfo:
        with self.engine.connect() as conn:
            row = conn.execute(self._snapshot_query().order_by(Snapshot.id).limit(1)).first()
        if row is None:
            raise NoHistoryError(f"no snapshot recorded for host {self.host!r} yet")
        return _snapshot(row)

    def snapshot_for(self, when: When, label: str = "") -> SnapshotInfo:
        """The snapshot a WHEN names: `#N`, or the last one taken at or before the moment.

        `label` (`--stable`) names the WHEN in the error when there is no such snapshot.
        """
        named = f"{label} " if label else ""
        with self.engine.connect() as conn:
            if when.snapshot is not None:
                row = conn.execute(
                    self._snapshot_query().where(Snapshot.id == when.snapshot)
                ).first()
                if row is None:
                    raise TimeSpecError(
                        f"{named}{when.text or f'#{when.snapshot}'}: no snapshot "
                        f"#{when.snapshot} for host {self.host!r}"
                    )
                return _snapshot(row)
            assert when.at is not None
            row = conn.execute(
                self._snapshot_query()
                .where(Snapshot.taken_us <= to_us(when.at))
                .order_by(Snapshot.taken_us.desc(), Snapshot.id.desc())
                .limit(1)
            ).first()
        if row is None:
            first = self.first()
            raise TimeSpecError(
                f"{named}{quote_when(when)} is before the first record "
                f"({describe_when(When(at=first.taken_at))}, snapshot #{first.id})"
            )
        return _snapshot(row)

    def recent_snapshots(self, limit: int) -> list[SnapshotInfo]:
        """The last `limit` snapshots, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                self._snapshot_query().order_by(Snapshot.id.desc()).limit(limit)
            ).all()
        return [_snapshot(r) for r in reversed(rows)]

    def count_snapshots_in(self, start_us: int, end_us: int) -> int:
        """Records taken in [start_us, end_us]."""
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(Snapshot)
                    .where(
                        Snapshot.host_id == self.host_id,
                        Snapshot.taken_us >= start_us,
                        Snapshot.taken_us <= end_us,
                    )
                ).scalar()
                or 0
            )

    def configs(self) -> dict[int, ConfigInfo]:
        """Every config snapshots were taken with, by id (a handful, shared by a fleet's hosts)."""
        from drift.scope import ConfigInfo, Scope

        with self.engine.connect() as conn:
            rows = conn.execute(
                select(ConfigRecord.id, ConfigRecord.path, ConfigRecord.digest, ConfigRecord.scope)
            ).all()
        return {r.id: ConfigInfo(r.path or None, r.digest, Scope.from_json(r.scope)) for r in rows}

    def config_ids(self, snapshot_ids: set[int]) -> dict[int, int]:
        """The config each of these snapshots was taken with (snapshots without one left out)."""
        out: dict[int, int] = {}
        ids = sorted(snapshot_ids)
        with self.engine.connect() as conn:
            for i in range(0, len(ids), 500):
                rows = conn.execute(
                    select(Snapshot.id, Snapshot.config_id).where(
                        Snapshot.id.in_(ids[i : i + 500]), Snapshot.config_id.is_not(None)
                    )
                )
                out.update({r.id: r.config_id for r in rows})
        return out

    def snapshots_between(self, after_id: int, upto_id: int) -> list[SnapshotInfo]:
        """Snapshots with after_id < id <= upto_id, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                self._snapshot_query()
                .where(Snapshot.id > after_id, Snapshot.id <= upto_id)
                .order_by(Snapshot.id)
            ).all()
        return [_snapshot(r) for r in rows]

    def _versions_query(self) -> Any:
        first = aliased(Snapshot)
        until = aliased(Snapshot)
        return (
            select(
                FactRow.subject,
                FactRow.key,
                Version.value,
                Version.blob_sha256,
                Version.secret,
                Version.first_snapshot_id,
                first.taken_us,
                Version.until_snapshot_id,
                until.taken_us,
                # Stored once in provenances, shared by every version that has it.
                select(Provenance.content)
                .where(Provenance.id == Version.provenance_id)
                .scalar_subquery(),
            )
            .join(Version, Version.fact_id == FactRow.id)
            .join(first, first.id == Version.first_snapshot_id)
            .outerjoin(until, until.id == Version.until_snapshot_id)
            .where(FactRow.host_id == self.host_id)
        )

    def state_query(self, snapshot_id: int) -> Any:
        """The select for the versions open at a snapshot (first <= S < until).

        Per fact, the newest version that started at or before S comes from the
        covering index ix_versions_fact_first; it is in the state unless closed by S.
        """
        v2 = aliased(Version)
        newest = (
            select(func.max(v2.first_snapshot_id))
            .where(v2.fact_id == FactRow.id, v2.first_snapshot_id <= snapshot_id)
            .scalar_subquery()
        )
        return self._versions_query().where(
            Version.first_snapshot_id == newest,
            or_(Version.until_snapshot_id.is_(None), Version.until_snapshot_id > snapshot_id),
        )

    def state_at(self, snapshot_id: int) -> dict[tuple[str, str], StoredVersion]:
        """Every fact's value as of a snapshot."""
        with self.engine.connect() as conn:
            rows = conn.execute(self.state_query(snapshot_id)).all()
        return {(r[0], r[1]): _version(r) for r in rows}

    def versions_of(self, pattern: str) -> list[StoredVersion]:
        """Every version of every fact matching PATTERN, by subject, key, then time.

        PATTERN is a glob matched against the subject, the key, or "subject key";
        without glob characters it matches as a substring.
        """
        glob = pattern if any(c in pattern for c in "*?[") else f"*{pattern}*"
        with self.engine.connect() as conn:
            idents = conn.execute(
                select(FactRow.id, FactRow.subject, FactRow.key).where(
                    FactRow.host_id == self.host_id
                )
            ).all()
            ids = [
                i
                for i, s, k in idents
                if fnmatchcase(s, glob) or fnmatchcase(k, glob) or fnmatchcase(f"{s} {k}", glob)
            ]
            out: list[StoredVersion] = []
            for start in range(0, len(ids), 500):
                rows = conn.execute(
                    self._versions_query().where(FactRow.id.in_(ids[start : start + 500]))
                ).all()
                out.extend(_version(r) for r in rows)
        out.sort(key=lambda v: (v.subject, v.key, v.first_snapshot_id))
        return out

    def versions_started_between(self, after_id: int, upto_id: int) -> list[StoredVersion]:
        """Versions that began in (after_id, upto_id]: every value seen inside a window.

        A version that only moved (a script line now lower down, same value) is
        not a value of its own and is left out.
        """
        with self.engine.connect() as conn:
            rows = conn.execute(
                self._versions_query().where(
                    Version.first_snapshot_id > after_id,
                    Version.first_snapshot_id <= upto_id,
                    _not_a_move(),
                )
            ).all()
        return [_version(r) for r in rows]

    def version_counts(self, upto_id: int) -> dict[tuple[str, str], int]:
        """How many values each fact had in snapshots up to `upto_id`: its churn (moves aside)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(FactRow.subject, FactRow.key, func.count(Version.id))
                .join(Version, Version.fact_id == FactRow.id)
                .where(
                    FactRow.host_id == self.host_id,
                    Version.first_snapshot_id <= upto_id,
                    _not_a_move(),
                )
                .group_by(FactRow.id, FactRow.subject, FactRow.key)
            ).all()
        return {(r[0], r[1]): int(r[2]) for r in rows}

    def count_snapshots_upto(self, upto_id: int) -> int:
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(Snapshot)
                    .where(Snapshot.host_id == self.host_id, Snapshot.id <= upto_id)
                ).scalar()
                or 0
            )

    def marks(self) -> list[MarkInfo]:
        """Every mark of this host, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(Mark.id, Mark.at_us, Mark.kind, Mark.note)
                .where(Mark.host_id == self.host_id)
                .order_by(Mark.at_us, Mark.id)
            ).all()
        return [MarkInfo(r[0], r[1], r[2], r[3]) for r in rows]

    def text(self, version: StoredVersion) -> str:
        """The full value of a version, reading its blob if it has one."""
        if version.inline_text is not None:
            return version.inline_text
        if version.blob_sha256 is None:
            return version.value or ""
        sha = version.blob_sha256
        if sha not in self._blobs:
            with self.engine.connect() as conn:
                data = conn.execute(select(Blob.content).where(Blob.sha256 == sha)).scalar_one()
            self._blobs[sha] = zlib.decompress(data).decode("utf-8", "surrogateescape")
        return self._blobs[sha]


def _not_a_move() -> Any:
    """SQL: the version is not a script fact whose value stayed while its line moved.

    The writer stores such a move as a new version with the same value (so
    the current line is known); it is no change of value.
    """
    previous = aliased(Version)
    same_value = (
        select(previous.id)
        .where(
            previous.fact_id == Version.fact_id,
            previous.until_snapshot_id == Version.first_snapshot_id,
            previous.value.is_not_distinct_from(Version.value),
            previous.blob_sha256.is_not_distinct_from(Version.blob_sha256),
            previous.secret == Version.secret,
        )
        .exists()
    )
    return or_(not_(FactRow.subject.startswith("script:")), not_(same_value))


def _version(r: Any) -> StoredVersion:
    value, blob_sha256, inline_text = r[2], r[3], None
    if value is not None and r[1] in TEXT_KEYS:
        # A script or command output is stored inline when short, and reads as it
        # did when it was always a blob: by its SHA-256, its text from History.text.
        inline_text, value = value, None
        blob_sha256 = hashlib.sha256(inline_text.encode("utf-8", "surrogateescape")).hexdigest()
    return StoredVersion(
        subject=r[0],
        key=r[1],
        value=value,
        blob_sha256=blob_sha256,
        secret=bool(r[4]),
        first_snapshot_id=r[5],
        first_taken_us=r[6],
        until_snapshot_id=r[7],
        until_taken_us=r[8],
        provenance=json.loads(r[9]) if r[9] else {},
        inline_text=inline_text,
    )
