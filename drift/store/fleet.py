"""The fleet's side of the read store: which hosts a database holds, and each one's history.

One connection serves every host: `Fleet.history(name)` hands out a
`History` on it, so comparing a hundred hosts opens one connection, not a
hundred (on PostgreSQL each costs a round trip and a backend).
"""

from __future__ import annotations

from dataclasses import dataclass

from drift.errors import NoHistoryError
from drift.store.db import DbapiConnection, connect_dbapi
from drift.store.query import History
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
        return sorted(out, key=lambda h: h.name)

    def history(self, host: HostInfo | str) -> History:
        """The history of one host, on the fleet's connection (closed with the fleet)."""
        if isinstance(host, HostInfo):
            return History(self.conn, host.name, host.host_id)
        known = {h.name: h for h in self.hosts()}
        if host not in known:
            names = ", ".join(known) or "none"
            raise NoHistoryError(
                f"no history for host {host!r} in {self.db.display()} (recorded hosts: {names})"
            )
        return History(self.conn, host, known[host].host_id)
