"""The library's exceptions. The CLI turns each into a one-line message and an exit code."""

from __future__ import annotations


class DriftError(Exception):
    """Base class: a problem the user can fix; the message is shown as-is."""

    exit_code = 2


class ConfigError(DriftError):
    """drift.toml is missing, unreadable or invalid."""


class TemplateError(ConfigError):
    """A report template (one in templates_dir, or drift's own) cannot be read or rendered."""


class TimeSpecError(DriftError):
    """A WHEN argument could not be understood or points outside the history."""


class StoreError(DriftError):
    """The database cannot be used as it is (wrong schema version, unreachable)."""


class DatabaseUnreachable(StoreError):
    """A database server (PostgreSQL) could not be reached: refused, down, timed out."""


class NoDatabaseError(StoreError):
    """The SQLite file the history should be in does not exist (yet)."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class SchemaTooOld(StoreError):
    """The database predates this drift; `drift db upgrade` migrates it."""


class SchemaTooNew(StoreError):
    """The database was written by a newer drift."""


class RecordLocked(DriftError):
    """Another `drift record` for this history is running."""

    exit_code = 3


class RecordRunning(DriftError):
    """A read found no history yet because the first `drift record` is still running."""

    exit_code = 3


class NoBaselineError(DriftError):
    """`drift since` has no --stable and no stable window to take a baseline from."""


class NoHistoryError(DriftError):
    """The database has no snapshot (yet) for this host."""


class UnknownNameError(DriftError):
    """A service, host, role or pattern that names nothing on record: a typo, never a
    "no change" (see drift.names)."""
