"""Where the database is: a --db value, $DRIFT_DB or the default path, resolved to a DbUrl.

A DbUrl also knows how to show itself without its password, so no error or
command drift prints gives one away.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from drift.errors import StoreError


def default_db_path() -> Path:
    """The SQLite file used when neither --db nor $DRIFT_DB is given (XDG state dir)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "drift" / "drift.db"


@dataclass(frozen=True)
class DbUrl:
    """A resolved database location: an SQLite file or a PostgreSQL URL."""

    url: str  # as SQLAlchemy wants it
    sqlite_path: Path | None  # None for PostgreSQL

    @property
    def is_sqlite(self) -> bool:
        return self.sqlite_path is not None

    def display(self) -> str:
        """The location with any password masked (`***`), fit to print."""
        return self._without_password("***")

    def public(self) -> str:
        """The location as a --db value with any password dropped, for a command to show.

        Whoever runs that command gives the password another way (PGPASSWORD, ~/.pgpass).
        """
        return self._without_password(None)

    def passwords(self) -> list[str]:
        """The password of this URL (user:PASSWORD@ or ?password=), as written and decoded.

        Read without a URL parser, so a URL too broken to parse still has its
        password known (and hidden from the error that says it is broken).
        """
        if self.sqlite_path is not None:
            return []
        from urllib.parse import unquote, unquote_plus

        rest = self.url.split("://", 1)[-1]
        head, _, query = rest.partition("?")
        written = []
        userinfo, at, _host = head.rpartition("@")
        if at and ":" in userinfo:
            written.append(userinfo.split(":", 1)[1])
        for pair in query.split("&"):
            name, eq, value = pair.partition("=")
            if eq and unquote(name).lower() == "password":
                written.append(value)
        spellings = {s for w in written if w for s in (w, unquote(w), unquote_plus(w))}
        return sorted(spellings, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        """`text` (an error message) with this URL's password, however written, as ``***``."""
        for password in self.passwords():
            text = text.replace(password, "***")
        return text

    def _without_password(self, mask: str | None) -> str:
        if self.sqlite_path is not None:
            return str(self.sqlite_path)
        from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

        plain = self.url.replace("postgresql+psycopg://", "postgresql://", 1)
        try:
            parts = urlsplit(plain)
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            return self.scrub(plain)  # too broken to take apart: hide what is known
        netloc = parts.netloc
        if parts.password is not None:
            userinfo, _, hostport = netloc.rpartition("@")
            user = userinfo.split(":", 1)[0]
            if mask is not None:
                user = f"{user}:{mask}"
            netloc = f"{user}@{hostport}" if user else hostport
        query = parts.query
        # libpq also takes the password as a query parameter: postgresql://h/db?password=...
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() == "password" for k, _v in pairs):
            kept = [(k, mask if k.lower() == "password" else v) for k, v in pairs]
            query = urlencode([(k, v) for k, v in kept if v is not None], safe="*")
        return urlunsplit(parts._replace(netloc=netloc, query=query))


def resolve_db_url(explicit: str | None = None) -> DbUrl:
    """--db, else $DRIFT_DB, else the default SQLite file. Plain paths mean SQLite files."""
    raw = explicit or os.environ.get("DRIFT_DB") or str(default_db_path())
    if raw.startswith("sqlite:///"):
        path = Path(raw[len("sqlite:///") :])
        if raw == "sqlite:///:memory:" or not str(path):
            raise StoreError("an in-memory database keeps no history: give a file path")
        path = path.resolve()
        return DbUrl(f"sqlite:///{path}", path)
    if raw.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        rest = raw.split("://", 1)[1]
        return DbUrl(f"postgresql+psycopg://{rest}", None)
    if "://" in raw:
        scheme = raw.split("://", 1)[0]
        raise StoreError(
            f"unsupported database URL scheme {scheme!r}: use a file path, "
            "sqlite:///PATH or postgresql://..."
        )
    path = Path(raw).expanduser().resolve()
    return DbUrl(f"sqlite:///{path}", path)
