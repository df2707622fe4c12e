"""SQLAlchemy models: the schema of DESIGN.md's store.

Times are integer microseconds since the epoch, UTC: compact (an unchanged
record must add under 200 bytes), exact, and the same on SQLite and
PostgreSQL. A version is open while `until_snapshot_id` is NULL; the state
at snapshot S is every version with first <= S < until.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Host(Base):
    __tablename__ = "hosts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    # drift.keyfile.SecretKey.fingerprint of the key the last record used: a new one
    # means every secret digest changed with it.
    key_fingerprint: Mapped[str | None] = mapped_column(String(16))


class ConfigRecord(Base):
    """A config some snapshot was taken with: its path, a digest of what it says, its scope.

    Shared by every snapshot taken with the same config, so an unchanged
    record stores one integer for it. `scope` is drift.scope.Scope as JSON.
    """

    __tablename__ = "configs"
    __table_args__ = (UniqueConstraint("path", "digest"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The config file's absolute path; "" for a record taken with no config file.
    path: Mapped[str] = mapped_column(Text)
    digest: Mapped[str] = mapped_column(String(64))
    scope: Mapped[str] = mapped_column(Text)


class Snapshot(Base):
    __tablename__ = "snapshots"
    __table_args__ = (
        Index("ix_snapshots_host_id_taken_us", "host_id", "taken_us"),
        # A host's last (or first) snapshot by id, without sorting all of them.
        Index("ix_snapshots_host_id_id", "host_id", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id"))
    taken_us: Mapped[int] = mapped_column(BigInteger)
    duration_ms: Mapped[int] = mapped_column(Integer)
    n_facts: Mapped[int] = mapped_column(Integer)
    n_changed: Mapped[int] = mapped_column(Integer)
    n_errors: Mapped[int] = mapped_column(Integer)
    # JSON list of {"subject", "key", "message"}; NULL when the record was complete.
    errors: Mapped[str | None] = mapped_column(Text)
    # 16-byte digest of every fact collected: equal to the last snapshot's means
    # nothing changed, so the record writes this row and nothing else.
    state_digest: Mapped[bytes | None] = mapped_column(LargeBinary(16))
    # The config this snapshot was taken with; NULL for snapshots recorded
    # before drift kept it (their scope is unknown, so nothing is read as
    # having left or entered it).
    config_id: Mapped[int | None] = mapped_column(ForeignKey("configs.id"))


class Fact(Base):
    __tablename__ = "facts"
    __table_args__ = (UniqueConstraint("host_id", "subject", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id"))
    subject: Mapped[str] = mapped_column(Text)
    key: Mapped[str] = mapped_column(Text)


class Blob(Base):
    __tablename__ = "blobs"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    # zlib-compressed content
    content: Mapped[bytes] = mapped_column(LargeBinary)


class Provenance(Base):
    """A provenance (file/line/text, pid, source, command ...), stored once and shared.

    Most facts share theirs: every variable of a process names the same
    environ, every file of a glob the same glob, a command's output and exit
    the same command line. A version holds the id of its provenance, not a
    copy of the JSON: one or two bytes where the copy took 30 to 100, in
    every version of a fact that changes every minute.
    """

    __tablename__ = "provenances"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # drift.store.delta.provenance_digest of `content`: finds the row of a provenance.
    digest: Mapped[bytes] = mapped_column(LargeBinary(16), unique=True)
    # JSON object, keys sorted (drift.store.delta.provenance_json).
    content: Mapped[str] = mapped_column(Text)


# The state at a snapshot reads the open versions; so does every changed record.
OPEN = "until_snapshot_id IS NULL"


class Version(Base):
    __tablename__ = "versions"
    __table_args__ = (
        # Covering index for "state at snapshot S": per fact, the version with the
        # greatest first_snapshot_id <= S, and whether it was closed before S.
        Index("ix_versions_fact_first", "fact_id", "first_snapshot_id", "until_snapshot_id"),
        # The open versions (the current state): partial, so it holds one entry per
        # fact whatever the depth of the history, and a version leaves it when it
        # closes instead of staying in it forever. On until_snapshot_id, not fact_id:
        # a changed record then reads the open versions in one range, not a seek per
        # fact (36k open versions: 193 ms against 247 ms).
        Index(
            "ix_versions_open",
            "until_snapshot_id",
            sqlite_where=text(OPEN),
            postgresql_where=text(OPEN),
        ),
        # No index on first_snapshot_id alone: a window is read fact by fact through
        # ix_versions_fact_first, and such an index cost 12 bytes of every changed minute.
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fact_id: Mapped[int] = mapped_column(ForeignKey("facts.id"))
    # Values up to drift.store.delta.INLINE_MAX characters inline, whatever their
    # key; longer ones (and a script or command output holding a NUL) in blobs.
    value: Mapped[str | None] = mapped_column(Text)
    blob_sha256: Mapped[str | None] = mapped_column(ForeignKey("blobs.sha256"))
    # True when value is a keyed digest of a secret, never the secret.
    secret: Mapped[bool] = mapped_column(Boolean, default=False)
    first_snapshot_id: Mapped[int] = mapped_column(ForeignKey("snapshots.id"))
    until_snapshot_id: Mapped[int | None] = mapped_column(ForeignKey("snapshots.id"))
    # NULL when the fact has no provenance.
    provenance_id: Mapped[int | None] = mapped_column(ForeignKey("provenances.id"))


class Mark(Base):
    __tablename__ = "marks"
    __table_args__ = (Index("ix_marks_host_id_at_us", "host_id", "at_us"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id"))
    at_us: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(16))
    note: Mapped[str | None] = mapped_column(Text)
    # When `drift unmark` took it back (kept, not erased); NULL while it stands.
    undone_us: Mapped[int | None] = mapped_column(BigInteger)


class StatCache(Base):
    """The stat cache: path -> (size, mtime_ns, ctime_ns, inode, sha256), so unchanged
    files are not re-read.

    One row per host and shard (a crc32 of the path modulo statcache.STAT_SHARDS),
    holding a marshal-encoded dict. Loading 12k files' entries is then 64 rows and one
    C call each instead of 12k rows (3-4x faster, every minute), and a changed
    file rewrites one shard, not the whole cache.
    """

    __tablename__ = "stat_cache"

    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id"), primary_key=True)
    shard: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    entries: Mapped[bytes] = mapped_column(LargeBinary)
