"""The fleet's side of the read store: which hosts a database holds, and each one's history.

One connection serves every host: `Fleet.history(name)` hands out a
`History` on it, so comparing a hundred hosts opens one connection, not a
hundred (on PostgreSQL each costs a round trip and a backend).

The hosts' latest states are compared in SQL (`Fleet.agreement`): one
aggregate over their open versions says, fact by fact, how many hosts have
it and how many values they hold, so a hundred hosts of 6,000 facts each
come back as 6,000 rows, and only the facts they disagree on are read whole
(`Fleet.latest_versions`).
"""

from __future__ import annotations

from dataclasses import dataclass

from drift.names import check_known, natural_key
from drift.store.db import DbapiConnection, connect_dbapi
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
from drift.store.schema import check_revision, current_revision_dbapi
from drift.store.urls import DbUrl


@dataclass(frozen=True)
class HostInfo:
    """A recorded host: its name, the fingerprint of the key its secrets are hashed with,
    and when it last recorded (None before its first record)."""

    name: str
    host_id: int
    key_fingerprint: str | None
    last_us: int | None


class Fleet:
    """Every host of one database, read through one connection."""

    def __init__(self, conn: DbapiConnection, db: DbUrl) -> None:
        self.conn = conn
        self.db = db

    @classmethod
    def open(cls, db: DbUrl) -> Fleet:
        conn = connect_dbapi(db)
        try:
            check_revision(current_revision_dbapi(conn))
        except BaseException:
            conn.close()
            raise
        return cls(conn, db)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def hosts(self) -> list[HostInfo]:
        """Every host, by name; the last record of each is one seek in its index."""
        rows = self.conn.execute(
            "SELECT h.id, h.name, h.key_fingerprint, (SELECT max(s.taken_us) FROM snapshots s "
            "WHERE s.host_id = h.id) FROM hosts h"
        ).fetchall()
        out = [HostInfo(r[1], int(r[0]), r[2], None if r[3] is None else int(r[3])) for r in rows]
        return sorted(out, key=lambda h: natural_key(h.name))

    def latest_snapshots(self, host_ids: list[int]) -> dict[int, SnapshotInfo]:
        """host id -> its latest record, in one query (a seek in (host_id, id) each)."""
        out: dict[int, SnapshotInfo] = {}
        for start in range(0, len(host_ids), IDS_PER_QUERY):
            chunk = host_ids[start : start + IDS_PER_QUERY]
            rows = self.conn.execute(
                f"SELECT host_id, {SNAPSHOT_COLUMNS} FROM snapshots WHERE id IN "
                "(SELECT (SELECT max(s.id) FROM snapshots s WHERE s.host_id = h.id) "
                f"FROM hosts h WHERE h.id IN ({','.join('?' * len(chunk))}))",
                tuple(chunk),
            ).fetchall()
            out.update({int(r[0]): snapshot_row(r[1:]) for r in rows})
        return out

    def history(self, host: HostInfo | str) -> History:
        """The history of one host, on the fleet's connection (closed with the fleet)."""
        if isinstance(host, HostInfo):
            return History(self.conn, host.name, host.host_id)
        known = {h.name: h for h in self.hosts()}
        check_known("host", host, known, f"in {self.db.display()}")
        return History(self.conn, host, known[host].host_id)

    def service_names(self, host_ids: list[int]) -> set[str]:
        """The services these hosts' histories have facts of (`service:NAME`), at any time."""
        out: set[str] = set()
        for start in range(0, len(host_ids), IDS_PER_QUERY):
            chunk = host_ids[start : start + IDS_PER_QUERY]
            marks = ",".join("?" * len(chunk))
            rows = self.conn.execute(
                f"SELECT DISTINCT subject FROM facts WHERE host_id IN ({marks}) "
                "AND substr(subject, 1, 8) = ?",
                (*chunk, "service:"),
            ).fetchall()
            out.update(r[0].removeprefix("service:") for r in rows)
        return out

    def agreement(self, host_ids: list[int]) -> list[tuple[str, str, int, int]]:
        """Per fact of these hosts' latest states (their open versions): subject, key, how
        many of the hosts have it, and how many distinct values they hold."""
        marks = ",".join("?" * len(host_ids))
        token = "coalesce(v.blob_sha256, 'v:' || coalesce(v.value, ''))"
        if self.conn.dialect == "postgresql":
            # A hundred hosts' open versions are 600k rows: with the default 4 MB PostgreSQL
            # sorts them on disk (2.5 s); in memory it hashes them (0.9 s). This session only.
            self.conn.execute("SET work_mem = '256MB'")
            self.conn.execute("SET jit = off")
        rows = self.conn.execute(
            f"SELECT f.subject, f.key, count(*), count(DISTINCT {token}) FROM versions v "
            f"JOIN facts f ON f.id = v.fact_id WHERE v.until_snapshot_id IS NULL "
            f"AND f.host_id IN ({marks}) GROUP BY f.subject, f.key",
            tuple(host_ids),
        ).fetchall()
        return [(r[0], r[1], int(r[2]), int(r[3])) for r in rows]

    def latest_versions(
        self, host_ids: list[int], idents: list[tuple[str, str]], prefix: str | None = None
    ) -> dict[int, dict[tuple[str, str], StoredVersion]]:
        """host id -> the open version of each of these facts it has (its latest value); with
        `prefix`, of every fact whose subject starts with it instead."""
        wanted = set(idents)
        subjects = sorted({s for s, _k in wanted})
        hosts = ",".join("?" * len(host_ids))
        out: dict[int, dict[tuple[str, str], StoredVersion]] = {h: {} for h in host_ids}
        if prefix is not None:
            rows = self.conn.execute(
                f"SELECT f.host_id, {VERSION_COLUMNS} FROM facts f {self._newest()} "
                f"{VERSION_JOINS} WHERE v.until_snapshot_id IS NULL "
                f"AND f.host_id IN ({hosts}) AND substr(f.subject, 1, ?) = ?",
                (*host_ids, len(prefix), prefix),
            ).fetchall()
            for r in rows:
                out[int(r[0])][(r[1], r[2])] = version_row(r[1:])
            return out
        for start in range(0, len(subjects), IDS_PER_QUERY):
            chunk = subjects[start : start + IDS_PER_QUERY]
            rows = self.conn.execute(
                f"SELECT f.host_id, {VERSION_COLUMNS} FROM facts f {self._newest()} "
                f"{VERSION_JOINS} WHERE v.until_snapshot_id IS NULL "
                f"AND f.host_id IN ({hosts}) AND f.subject IN ({','.join('?' * len(chunk))})",
                (*host_ids, *chunk),
            ).fetchall()
            for r in rows:
                if (r[1], r[2]) in wanted:
                    out[int(r[0])][(r[1], r[2])] = version_row(r[1:])
        return out

    def _newest(self) -> str:
        """Join each fact `f` to its newest version `v`: one backward seek in
        ix_versions_fact_first per fact. Joined on `until_snapshot_id IS NULL` instead,
        PostgreSQL walks every open version of the fleet (600k for a hundred hosts)."""
        if self.conn.dialect == "sqlite":
            return (
                "JOIN versions v ON v.fact_id = f.id AND v.first_snapshot_id = "
                "(SELECT max(w.first_snapshot_id) FROM versions w WHERE w.fact_id = f.id)"
            )
        return (
            "CROSS JOIN LATERAL (SELECT w.id FROM versions w WHERE w.fact_id = f.id "
            "ORDER BY w.first_snapshot_id DESC LIMIT 1) newest JOIN versions v ON v.id = newest.id"
        )
