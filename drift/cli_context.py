"""The options every command shares, resolved once: the config, the database, the host, and
whether the output is a JSON envelope (STYLE: state in ctx.obj, not module globals).

Kept light like cli.py: the config parser is imported when a command asks for
the config, the database driver only when it opens the history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from drift.errors import DriftError

if TYPE_CHECKING:
    from drift.config import Config
    from drift.store.query import History
    from drift.store.urls import DbUrl

# The file's extension gives `drift report -o FILE` its format unless --format says.
REPORT_EXTENSIONS = {".html": "html", ".htm": "html", ".md": "md", ".json": "json"}


def format_from_extension(output: str) -> str | None:
    """The report format FILE's extension names (`.html`, `.md`, `.json`), or None."""
    return REPORT_EXTENSIONS.get(Path(output).suffix.lower())


@dataclass
class DriftContext:
    """Resolved options shared by every command; tests inject one with `invoke(obj=...)`."""

    config_path: str | None = None
    db: str | None = None
    host: str | None = None
    # The options whose value came from their environment variable ($DRIFT_CONFIG, $DRIFT_DB).
    from_env: set[str] = field(default_factory=set)
    # --format and report's -o FILE, read before any other option: an error met while
    # reading the rest goes into a JSON envelope too when the output is one.
    output_format: str | None = None
    output_path: str | None = None
    _config: Config | None = field(default=None, repr=False)

    def json_output(self) -> bool:
        """Whether this command prints (or writes) a JSON envelope."""
        fmt = self.output_format
        if fmt is None and self.output_path is not None:
            fmt = format_from_extension(self.output_path)
        return fmt == "json"

    def config_arg(self) -> str | None:
        """--config as drift.config takes it: None for $DRIFT_CONFIG, which find_config
        reads itself, so that its messages name the variable."""
        return None if "config_path" in self.from_env else self.config_path

    def config(self) -> Config:
        """The parsed drift.toml (read once): --config, $DRIFT_CONFIG, ./drift.toml, /etc/drift."""
        if self._config is None:
            from drift.config import load_config

            self._config = load_config(self.config_arg())
        return self._config

    def db_choice(self) -> tuple[str | None, str]:
        """The database as given, and where from: --db, $DRIFT_DB, the config's db, the default.

        The config is read only when neither --db nor $DRIFT_DB says, so a
        broken drift.toml does not stand in the way of an explicit database.
        """
        if self.db:
            return self.db, "$DRIFT_DB" if "db" in self.from_env else "--db"
        config = self.config()
        if config.db:
            return config.db, f"db in {config.path}"
        if config.path is not None:
            return None, f"the default; {config.path} sets no db"
        return None, "the default; no drift.toml found, so no db setting"

    def db_url(self) -> DbUrl:
        """The database URL to use (see db_choice)."""
        from drift.store.urls import resolve_db_url

        return resolve_db_url(self.db_choice()[0])

    def record_command(self) -> str:
        """`drift record` with what it needs to reach this history: --config when one was
        given, --db when neither $DRIFT_DB nor the config's db would lead there."""
        import os
        import shlex

        from drift.store.urls import resolve_db_url

        args = ["drift", "record"]
        if self.config_arg() is not None:
            args += ["--config", str(self.config_arg())]
        db = self.db_url()
        if resolve_db_url(os.environ.get("DRIFT_DB") or self.config().db).url != db.url:
            args += ["--db", db.public()]
        return shlex.join(args)

    def host_name(self) -> str:
        """--host, else the config's host."""
        return self.host or self.config().host

    def configured_services(self, host: str) -> list[str]:
        """The services drift.toml names, when it is the config of `host` (else none)."""
        config = self.config()
        return [s.name for s in config.services] if config.host == host else []

    def history(self, *, hint: str = "run `drift record` or `drift init`") -> History:
        """Open the history, or say in one line why there is none: where drift looked, where a
        config says the history is, or that the first record is still running."""
        from drift.errors import (
            NoDatabaseError,
            NoHistoryError,
            RecordRunning,
            SchemaTooOld,
            UnknownNameError,
        )
        from drift.store.locks import record_running
        from drift.store.query import History

        db = self.db_url()
        try:
            return History.open(db, self.host_name(), asked=self.host is not None)
        except (NoDatabaseError, NoHistoryError, SchemaTooOld, UnknownNameError) as exc:
            if isinstance(exc, NoDatabaseError):
                raise NoDatabaseError(self.no_database(exc.path, hint), exc.path) from None
            try:
                running = record_running(db, self.host_name())
            except DriftError:
                running = False  # only a better message was at stake
            if running:
                raise RecordRunning(
                    f"no history for host {self.host_name()!r} in {db.display()} yet: its first "
                    "`drift record` is running now; try again when it has finished"
                ) from None
            raise

    def no_database(self, path: str, hint: str) -> str:
        """`PATH: no drift database here yet (from where)`, and where a config says it is."""
        from drift.store.urls import resolve_db_url

        _raw, origin = self.db_choice()
        given = origin in ("--db", "$DRIFT_DB")
        message = f"{path}: no drift database here yet ({'from ' if given else ''}{origin})"
        if given:
            try:
                config = self.config()
            except DriftError:
                config = None  # a broken config cannot say where else to look
            if config is not None and config.db:
                elsewhere = resolve_db_url(config.db)
                if elsewhere.display() != path:
                    return (
                        f"{message}; {config.path} keeps its history in "
                        f"{elsewhere.display()}: drop {origin} to use it"
                    )
        if origin.startswith("the default") and self.config().path is None:
            hint += ", or give --config with the drift.toml that `drift record` uses"
        return f"{message}: {hint}"
