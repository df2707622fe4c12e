"""Provenances stored once, short values inline whatever their key, an index of open versions.

A minute whose only change was one 26-byte command output line cost about
400 bytes: the output went to a blob (its 64-character SHA-256 in the
version, as the blob's key and in that key's index, plus the blob row), the
version carried its provenance's JSON, and the index on until_snapshot_id
kept an entry for every version ever closed. Now:

- `provenances` holds each distinct provenance once, keyed by a 16-byte
  digest of its JSON; a version holds its id (`provenance_id`).
- A script's content or a command's output of at most INLINE_MAX characters
  is stored inline, as every other short value always was (one holding a
  NUL stays a blob: PostgreSQL's text cannot hold one). Existing blobs of
  that kind move inline and their rows go, so equal values are stored
  alike whatever drift wrote them.
- `ix_versions_until` becomes `ix_versions_open`, partial: the open versions only,
  one entry per fact whatever the depth of the history.
- `ix_versions_first` goes: every read of a window seeks fact by fact in
  ix_versions_fact_first (whose key starts with the same first_snapshot_id
  after the fact), and the index cost 12 bytes of every changed minute.

Nothing is lost: every version reads back with the same value, text and
provenance (tests/test_store_schema.py compares `drift show`, `history` and
`since` before and after), and the downgrade puts everything back.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-07
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Must match drift.store.delta (INLINE_MAX, TEXT_KEYS, provenance_digest); a migration
# keeps its own copy so later changes to drift cannot change what this one did.
INLINE_MAX = 512
TEXT_KEYS = ("content", "stdout")
OPEN = "until_snapshot_id IS NULL"
BATCH = 1000


def provenance_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _inline(data: bytes) -> str | None:
    """The value a blob holds, if the writer now stores it inline; else None."""
    text = data.decode("utf-8", "surrogateescape")
    if len(text) > INLINE_MAX or "\0" in text:
        return None
    try:
        text.encode("utf-8")  # a byte that is not UTF-8 cannot be bound as text
    except UnicodeEncodeError:
        return None
    return text


def _chunks(rows: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(rows), BATCH):
        yield rows[start : start + BATCH]


def upgrade() -> None:
    conn = op.get_bind()
    provenances = op.create_table(
        "provenances",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.LargeBinary(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_provenances")),
        sa.UniqueConstraint("digest", name=op.f("uq_provenances_digest")),
    )
    texts = [
        r[0]
        for r in conn.execute(
            sa.text("SELECT DISTINCT provenance FROM versions WHERE provenance IS NOT NULL")
        )
    ]
    for chunk in _chunks(texts):
        op.bulk_insert(provenances, [{"digest": provenance_digest(t), "content": t} for t in chunk])
    op.add_column("versions", sa.Column("provenance_id", sa.Integer(), nullable=True))
    _point_at_provenances(conn)
    _inline_short_texts(conn)
    with op.batch_alter_table("versions") as batch:
        batch.drop_index("ix_versions_until")
        batch.drop_index("ix_versions_first")
        batch.drop_column("provenance")
        batch.create_foreign_key(
            op.f("fk_versions_provenance_id_provenances"), "provenances", ["provenance_id"], ["id"]
        )
    op.create_index(
        "ix_versions_open",
        "versions",
        ["until_snapshot_id"],
        sqlite_where=sa.text(OPEN),
        postgresql_where=sa.text(OPEN),
    )


def _point_at_provenances(conn: sa.Connection) -> None:
    """versions.provenance_id from versions.provenance, in one statement."""
    if conn.dialect.name == "postgresql":  # a hash join, whatever the JSON's length
        conn.execute(
            sa.text(
                "UPDATE versions SET provenance_id = p.id FROM provenances p "
                "WHERE p.content = versions.provenance"
            )
        )
        return
    # SQLite before 3.33 has no UPDATE ... FROM: a correlated lookup through a
    # temporary index.
    conn.execute(sa.text("CREATE INDEX tmp_provenances_content ON provenances (content)"))
    conn.execute(
        sa.text(
            "UPDATE versions SET provenance_id = "
            "(SELECT p.id FROM provenances p WHERE p.content = versions.provenance) "
            "WHERE provenance IS NOT NULL"
        )
    )
    conn.execute(sa.text("DROP INDEX tmp_provenances_content"))


def _inline_short_texts(conn: sa.Connection) -> None:
    """Move the blobs of short scripts and command outputs inline, and drop their rows.

    A year of a command whose output changes every minute is 525k blobs: they
    are read in batches, from the versions' side (blob_sha256 has no index).
    """
    conn.execute(
        sa.text("CREATE TEMPORARY TABLE tmp_inline (sha256 VARCHAR(64) PRIMARY KEY, value TEXT)")
    )
    moving = sa.table("tmp_inline", sa.column("sha256"), sa.column("value"))
    candidates = conn.execute(
        sa.text(
            "SELECT DISTINCT b.sha256, b.content FROM versions v "
            "JOIN facts f ON f.id = v.fact_id JOIN blobs b ON b.sha256 = v.blob_sha256 "
            "WHERE f.key IN :keys AND b.size <= :most"
        ).bindparams(sa.bindparam("keys", expanding=True)),
        # A character is at most 4 bytes of UTF-8 (surrogate escapes: 1).
        {"most": 4 * INLINE_MAX, "keys": list(TEXT_KEYS)},
        # For this statement only (Connection.execution_options would set it for all).
        execution_options={"yield_per": BATCH},
    )
    moved = 0
    for rows in candidates.partitions():
        chunk = [
            {"sha256": sha, "value": text}
            for sha, content in rows
            if (text := _inline(zlib.decompress(content))) is not None
        ]
        if chunk:
            conn.execute(sa.insert(moving), chunk)
            moved += len(chunk)
    if moved:
        if conn.dialect.name == "postgresql":
            conn.execute(
                sa.text(
                    "UPDATE versions SET value = t.value, blob_sha256 = NULL FROM tmp_inline t "
                    "WHERE t.sha256 = versions.blob_sha256"
                )
            )
        else:
            conn.execute(
                sa.text(
                    "UPDATE versions SET value = "
                    "(SELECT t.value FROM tmp_inline t WHERE t.sha256 = versions.blob_sha256), "
                    "blob_sha256 = NULL WHERE blob_sha256 IN (SELECT sha256 FROM tmp_inline)"
                )
            )
        # A value this short is inline under any key now, so no version uses these blobs.
        # Deleting a blob looks for versions that still use it (the foreign key): without
        # an index on blob_sha256 that is a scan of every version for every blob.
        conn.execute(sa.text("CREATE INDEX tmp_versions_blob ON versions (blob_sha256)"))
        conn.execute(sa.text("DELETE FROM blobs WHERE sha256 IN (SELECT sha256 FROM tmp_inline)"))
        conn.execute(sa.text("DROP INDEX tmp_versions_blob"))
    conn.execute(sa.text("DROP TABLE tmp_inline"))


def downgrade() -> None:
    conn = op.get_bind()
    op.drop_index("ix_versions_open", table_name="versions")
    with op.batch_alter_table("versions") as batch:
        batch.add_column(sa.Column("provenance", sa.Text(), nullable=True))
    conn.execute(
        sa.text(
            "UPDATE versions SET provenance = "
            "(SELECT p.content FROM provenances p WHERE p.id = versions.provenance_id) "
            "WHERE provenance_id IS NOT NULL"
        )
    )
    _text_keys_to_blobs(conn)
    with op.batch_alter_table("versions") as batch:
        batch.drop_constraint(op.f("fk_versions_provenance_id_provenances"), type_="foreignkey")
        batch.drop_column("provenance_id")
        batch.create_index("ix_versions_until", ["until_snapshot_id"])
        batch.create_index("ix_versions_first", ["first_snapshot_id"])
    op.drop_table("provenances")


def _text_keys_to_blobs(conn: sa.Connection) -> None:
    """Scripts and command outputs go back to the blob table, as 0005's writer stores them."""
    rows = conn.execute(
        sa.text(
            "SELECT DISTINCT v.value FROM versions v JOIN facts f ON f.id = v.fact_id "
            "WHERE v.value IS NOT NULL AND f.key IN :keys"
        ).bindparams(sa.bindparam("keys", expanding=True)),
        {"keys": list(TEXT_KEYS)},
    ).all()
    if not rows:
        return
    blobs = {}
    for (text,) in rows:
        data = text.encode("utf-8", "surrogateescape")
        blobs[text] = (hashlib.sha256(data).hexdigest(), data)
    known = {
        r[0]
        for chunk in _chunks([sha for sha, _data in blobs.values()])
        for r in conn.execute(
            sa.text("SELECT sha256 FROM blobs WHERE sha256 IN :shas").bindparams(
                sa.bindparam("shas", expanding=True)
            ),
            {"shas": chunk},
        )
    }
    new = [
        {"sha256": sha, "size": len(data), "content": zlib.compress(data, 6)}
        for sha, data in blobs.values()
        if sha not in known
    ]
    table = sa.table("blobs", sa.column("sha256"), sa.column("size"), sa.column("content"))
    for chunk in _chunks(new):
        conn.execute(sa.insert(table), chunk)
    moving = sa.table("tmp_blobbed", sa.column("value"), sa.column("sha256"))
    conn.execute(sa.text("CREATE TEMPORARY TABLE tmp_blobbed (value TEXT, sha256 VARCHAR(64))"))
    for chunk in _chunks([{"value": t, "sha256": sha} for t, (sha, _d) in blobs.items()]):
        conn.execute(sa.insert(moving), chunk)
    conn.execute(sa.text("CREATE INDEX tmp_blobbed_value ON tmp_blobbed (value)"))
    conn.execute(
        sa.text(
            "UPDATE versions SET "
            "blob_sha256 = (SELECT t.sha256 FROM tmp_blobbed t WHERE t.value = versions.value), "
            "value = NULL WHERE value IS NOT NULL AND fact_id IN "
            "(SELECT id FROM facts WHERE key IN :keys)"
        ).bindparams(sa.bindparam("keys", expanding=True)),
        {"keys": list(TEXT_KEYS)},
    )
    conn.execute(sa.text("DROP TABLE tmp_blobbed"))
