"""The command line: parse options, call the library, render. Nothing is computed here.

One idea, kept whole past 500 lines: each command is its options, its help
text and the few lines that call the library and print, and reads best next
to the others. The fleet's commands (compare, push) are in cli_fleet.py. What
commands share lives apart: the options (cli_options.py),
their resolution into a config, database and host (cli_context.py), the
progress line (progress.py) and the report's regenerate line (render/).

Imports stay light (click and the config parser): `drift --help` and
`drift record` must not pay for SQLAlchemy, Alembic or Jinja unless they use them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import click

from drift import __version__
from drift.cli_context import DriftContext, format_from_extension
from drift.cli_options import (
    WHEN,
    WHEN_HELP,
    common_options,
    format_option,
    pass_drift,
    remember_format,
    remember_output,
    report_format_option,
    report_options,
)
from drift.display import plural
from drift.errors import DriftError

if TYPE_CHECKING:
    from drift.analysis.investigation import Investigation
    from drift.facts import CollectionError
    from drift.store.prune import PruneResult
    from drift.store.query import History
    from drift.store.writer import ConfigChange, SnapshotResult
    from drift.timespec import When


# Exit codes beyond a DriftError's own (2 bad input, 3 a record is running): decided here, once.
EXIT_COLLECTION_ERRORS = 4  # `drift record`: the snapshot was stored, with collection errors
EXIT_DATABASE_ERROR = 1  # a database damaged or changed under us
EXIT_CHANGES_FOUND = 1  # `since`/`diff --exit-code`: a suspect, as `git diff --exit-code`
CHANGES_FOUND_HELP = (
    "Exit 1 when there is a suspect, 0 when none (as git diff --exit-code); 2 on error."
)
QUIET_ERRORS_SHOWN = 20  # new collection errors `record --quiet` lists before "... and N more"


class DriftGroup(click.Group):
    """Turns library errors into one line on stderr and the exit code the error carries
    (with JSON output, into the envelope's `errors` on stdout as well)."""

    def invoke(self, ctx: click.Context) -> Any:
        obj = ctx.ensure_object(DriftContext)  # the one its command fills in, seen from here
        try:
            return super().invoke(ctx)
        except DriftError as exc:
            _fail(ctx, obj, _scrub(obj, str(exc)), exc.exit_code)
        except KeyboardInterrupt:
            click.echo("drift: interrupted", err=True)
            sys.exit(130)
        except Exception as exc:
            # A database that is damaged or changed under us: one line, not a traceback.
            if not type(exc).__module__.startswith(("sqlalchemy", "sqlite3", "psycopg")):
                raise
            detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            _fail(ctx, obj, f"database error: {_scrub(obj, detail)}", EXIT_DATABASE_ERROR)


def _fail(ctx: click.Context, obj: DriftContext, message: str, exit_code: int) -> NoReturn:
    """`drift: MESSAGE` on stderr, one line whatever a path or value in it holds; with JSON
    output, an envelope with the error (and no data) on stdout too. Then exit."""
    from drift.display import printable

    if obj.json_output() and ctx.invoked_subcommand:
        from drift.render.envelope import error_entry, render_json

        emit(render_json(ctx.invoked_subcommand, None, [error_entry(message, exit_code)]))
    click.echo(f"drift: {printable(message)}", err=True)
    sys.exit(exit_code)


def _scrub(obj: DriftContext, message: str) -> str:
    """`message` without the database's password, should a driver's message quote the URL."""
    try:
        return obj.db_url().scrub(message)
    except Exception:  # a config that cannot be read gives no URL to scrub  # noqa: BLE001
        return message


def _warn(warnings: list[str]) -> list[dict[str, Any]]:
    """Warnings of a JSON result: on stderr, and as the envelope's `errors` entries."""
    from drift.display import printable
    from drift.render.envelope import warning_entry

    for warning in warnings:
        click.echo(f"drift: warning: {printable(warning)}", err=True)
    return [warning_entry(w) for w in warnings]


def emit(text: str) -> None:
    click.echo(text, nl=not text.endswith("\n"))


def terminal_width() -> int | None:
    """Columns to wrap text to: the terminal's ($COLUMNS first), or None when stdout is piped.

    Piped text is not wrapped, so that every item stays one line for grep.
    """
    if not sys.stdout.isatty():
        return None
    import shutil

    return shutil.get_terminal_size().columns


def evidence_shown(width: int | None, show_all: bool) -> int | None:
    """How many of a story's changes the text shows: all when piped (for grep) or with
    --all, else the first EVIDENCE_SHOWN on a terminal."""
    from drift.render.terminal import EVIDENCE_SHOWN

    return None if width is None or show_all else EVIDENCE_SHOWN


@click.group(cls=DriftGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="drift")
def cli() -> None:
    """drift: what changed since it last worked, and where each change came from.

    \b
    Set up:              drift init, then name your services in drift.toml
    Every minute:        drift record --quiet      (cron or systemd timer)
    When it works:       drift mark stable         (or [[health]] checks)
    During an incident:  drift since --stable 12:00
    For the postmortem:  drift report -o postmortem.html
    A fleet:             drift compare --fleet     (which node differs from its siblings)
    See it first:        drift demo
    """


@cli.command(short_help="Create the database, secret key and a starter config.")
@common_options
@pass_drift
def init(obj: DriftContext) -> None:
    """Create or upgrade the database and the secret key; write a starter drift.toml if none.

    Safe to run again: an existing config is never overwritten.
    """
    from pathlib import Path

    from drift.config import find_config
    from drift.keyfile import load_key
    from drift.record import secret_key_path
    from drift.sample_config import starter_config
    from drift.store.files import sqlite_privacy
    from drift.store.schema import upgrade_database

    if find_config(obj.config_arg()) is None:
        path = Path(obj.config_path or "drift.toml")
        # --db or $DRIFT_DB, resolved before the config is: the starter names that database.
        given = obj.db_url().public() if obj.db else None
        path.write_text(starter_config(given), encoding="utf-8")
        click.echo(f"wrote a starter config to {path}: edit it to name your services and files")
    config = obj.config()
    db = obj.db_url()
    result = upgrade_database(db)
    key = load_key(secret_key_path(config, db))
    state = (
        "created"
        if result.before is None
        else (
            "already at" if result.before == result.after else f"upgraded from {result.before} to"
        )
    )
    privacy = f" ({sqlite_privacy(db.sqlite_path)})" if db.sqlite_path is not None else ""
    click.echo(f"database {db.display()}: {state} schema {result.after}{privacy}")
    click.echo(f"secret key {key.path} (mode {key.mode:04o}; keep it out of backups you share)")
    exposure = key.exposure()
    if exposure is not None:
        click.echo(f"drift: warning: secret key {key.path} {exposure}", err=True)
    click.echo(f"next: {obj.record_command()}   (then add it to cron; config {config.path})")


@cli.command(short_help="Collect and store one snapshot (run it every minute).")
@common_options
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="Print nothing on success (for cron); collection errors the previous record did "
    "not have still go to stderr, one line each.",
)
@pass_drift
def record(obj: DriftContext, quiet: bool) -> None:
    """Collect every configured fact and store what changed since the last record.

    \b
    One line on success: snapshot number, facts, changed, errors, seconds;
    then the collection errors on stderr. On a terminal, stderr shows how far
    listing and hashing have got while it runs (a first record of a large
    tree reads every byte), then that it is storing.
    Exit 0: stored, every fact collected. Exit 4: stored, but some facts could
    not be collected (they keep their last value; drift since lists them as
    blind spots), or the secret key needs attention (others can read it, or
    it was replaced). Exit 2 for a key drift cannot use. Exit 3 at once,
    writing nothing, if another record of the same history is running. Never
    migrates: on an older schema it asks for `drift db upgrade`.
    After a record that saw a live or pending change, each [[notify]] entry
    of the config is told (a webhook or a command; see docs/notify.md).
    """
    from dataclasses import replace

    from drift.errors import ConfigError
    from drift.progress import StatusLine
    from drift.record import record as do_record

    config = obj.config()
    if config.path is None:
        raise ConfigError(
            "no drift.toml found (looked at --config, $DRIFT_CONFIG, ./drift.toml, "
            "/etc/drift/drift.toml): run `drift init` to write a starter one"
        )
    if obj.host:
        config = replace(config, host=obj.host)
    status = None if quiet or not sys.stderr.isatty() else StatusLine(sys.stderr)
    try:
        result = do_record(config, obj.db_url(), progress=status)
    finally:
        if status is not None:
            status.clear()
    _say_spool(result, quiet)
    from drift.notify import notify

    for failed in notify(config, obj.db_url(), result):
        # A blind spot of this record (stored with it), never a failed record.
        click.echo(f"drift: {_error_text(failed)}", err=True)
    if quiet:
        # Cron mails what a job prints: a new problem once, not the same one every minute.
        shown = result.new_errors[:QUIET_ERRORS_SHOWN]
        for err in shown:
            click.echo(
                f"drift: new collection error in snapshot #{result.snapshot_id}: "
                f"{_error_text(err)}",
                err=True,
            )
        if len(result.new_errors) > len(shown):
            click.echo(
                f"drift: ... and {len(result.new_errors) - len(shown)} more new collection "
                f"errors in snapshot #{result.snapshot_id} (drift since lists them as blind spots)",
                err=True,
            )
    else:
        errors = len(result.errors)
        click.echo(
            f"snapshot #{result.snapshot_id}: {plural(result.facts, 'fact')}, "
            f"{result.changed:,} changed, {plural(errors, 'error')}, {result.seconds:.2f}s"
        )
        if result.facts == 0 and not errors:
            click.echo(
                f"  nothing to record yet: name services, files, repos or commands in "
                f"{config.path}",
                err=True,
            )
        for err in result.errors[:10]:
            click.echo(f"  ! {_error_text(err)}", err=True)
        if errors > 10:
            click.echo(
                f"  ! ... and {errors - 10:,} more (drift since lists them as blind spots)",
                err=True,
            )
    _say_config_change(result.config_change, quiet)
    if any(not err.lasting for err in result.errors):
        sys.exit(EXIT_COLLECTION_ERRORS)


def _say_spool(result: SnapshotResult, quiet: bool) -> None:
    """A record kept in the spool says so on stderr (with --quiet, only the first of an
    outage, so cron mails it once); a record that shipped the spool says how many went.
    A damaged spool set aside is said every time, --quiet or not."""
    for warning in result.spool_warnings:
        click.echo(warning, err=True)
    if result.spooled is not None:
        if not quiet or result.spool_began:
            click.echo(
                f"drift: database out of reach, snapshot kept for it: {result.spooled} "
                "(the next record that reaches it, or `drift push`, ships it)",
                err=True,
            )
    elif result.shipped and not quiet:
        click.echo(f"shipped {plural(result.shipped, 'spooled snapshot')} first", err=True)


def _error_text(err: CollectionError) -> str:
    """`service:decode unit: message` for a collection error, on one line (see `printable`)."""
    from drift.display import printable

    key = f" {err.key}" if err.key else ""
    return printable(f"{err.subject}{key}: {err.message}")


def _say_config_change(change: ConfigChange | None, quiet: bool) -> None:
    """A record taken with another config than the last says so; one that shares nothing warns.

    The warning goes to stderr even with --quiet: under cron, a config picked
    up from the wrong folder must not go unnoticed until the incident.
    """
    if change is None:
        return
    what = "; ".join(change.sections) or "settings only"
    moved = f"{plural(change.untracked, 'fact')} no longer tracked, {change.tracked:,} now tracked"
    if change.covers_none:
        before = change.before_path or "no config file"
        after = change.after_path or "no config file"
        click.echo(
            f"warning: {after} watches nothing the last record's config ({before}) watched; "
            f"{plural(change.untracked, 'fact')} {'is' if change.untracked == 1 else 'are'} "
            "no longer tracked (wrong --config?)",
            err=True,
        )
    elif not quiet:
        click.echo(f"  config changed since the last record ({what}): {moved}")


def _regenerate(
    obj: DriftContext,
    command: str,
    investigation: Investigation,
    options: dict[str, Any],
    *,
    output: str | None = None,
    fmt: str | None = None,
) -> str:
    """regenerate_command for this invocation: its config and database, as absolute paths."""
    from drift.render.regenerate import regenerate_command

    config = obj.config()
    _raw, origin = obj.db_choice()
    from_config = config.db is not None and origin == f"db in {config.path}"
    return regenerate_command(
        command,
        investigation,
        options,
        config_path=config.path.resolve() if config.path is not None else None,
        db=None if from_config else obj.db_url().public(),
        output=output,
        fmt=fmt,
    )


def _report_context(
    obj: DriftContext,
    command: str,
    stable: When | None,
    until: When | None,
    options: dict[str, Any],
    default_top: int | None,
) -> Investigation:
    from drift.analysis.investigate import InvestigateOptions, check_service, investigate

    top = None if options["show_all"] else (options["top"] or default_top)
    labels = ("the first WHEN", "the second WHEN") if command == "diff" else ("--stable", "--until")
    with obj.history() as history:
        check_service(history, options["service"], obj.configured_services(history.host))
        return investigate(
            history,
            stable,
            until,
            InvestigateOptions(command=command, top=top, service=options["service"], labels=labels),
        )


def _render(
    obj: DriftContext,
    command: str,
    investigation: Investigation,
    fmt: str,
    options: dict[str, Any],
    regenerate: str | None = None,
) -> str:
    from drift.analysis.plain import plain
    from drift.render.envelope import render_json
    from drift.render.jinja import render_report, render_template
    from drift.render.regenerate import report_extras

    context = plain(investigation)  # what JSON and every template read
    if fmt == "json":
        return render_json(command, context, _warn(context["trust"]["warnings"]))
    if fmt in ("md", "html"):
        extras = report_extras(
            context, regenerate or _regenerate(obj, command, investigation, options, fmt=fmt)
        )
        extras["explain"] = True if fmt == "html" else options["explain"]
        extras["digests"] = options["digests"]
        return render_report(extras, fmt, obj.config().templates_dir)
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    width = terminal_width()
    return render_template(
        "since.txt.j2",
        {
            **context,
            "explain": options["explain"],
            "digests": options["digests"],
            "evidence_shown": evidence_shown(width, options["show_all"]),
        },
        obj.config().templates_dir,
        color=color,
        width=width,
    )


def _show_report(
    obj: DriftContext,
    command: str,
    stable: When | None,
    until: When | None,
    fmt: str,
    options: dict[str, Any],
) -> None:
    from drift.analysis.investigate import DEFAULT_TOP

    exit_code = options.pop("exit_code", False)
    context = _report_context(obj, command, stable, until, options, DEFAULT_TOP)
    emit(_render(obj, command, context, fmt, options))
    if exit_code and context.total_suspects:
        sys.exit(EXIT_CHANGES_FOUND)


def _view(
    obj: DriftContext, command: str, build: Callable[[History], dict[str, Any]], fmt: str
) -> dict[str, Any]:
    """Open the history, build a context, print it as text (templates/COMMAND.txt.j2) or JSON;
    return the context."""
    from drift.render.envelope import render_json
    from drift.render.jinja import render_template

    with obj.history() as history:
        context = build(history)
    if fmt == "json":
        emit(render_json(command, context))
    else:
        templates_dir = obj.config().templates_dir
        emit(render_template(f"{command}.txt.j2", context, templates_dir, width=terminal_width()))
    return context


@cli.command(short_help="Ranked suspects since it last worked, with evidence.")
@common_options
@click.option(
    "--stable",
    type=WHEN,
    help="Baseline: when it last worked (default: the end of the last stable window, "
    "from [[health]] checks or `drift mark`). " + WHEN_HELP,
)
@click.option("--until", type=WHEN, help="Compare up to this time (default: latest record).")
@click.option(
    "--fleet",
    is_flag=True,
    help="Every host that recorded in the hour before, grouped by change: "
    "'3 of 4 decode hosts: ...' (each host from --stable, or its own stable window).",
)
@click.option("--role", metavar="NAME", help="With --fleet: only the hosts of this role.")
@report_options
@report_format_option
@click.option("--exit-code", is_flag=True, help=CHANGES_FOUND_HELP)
@pass_drift
def since(
    obj: DriftContext,
    /,
    stable: When | None,
    until: When | None,
    fleet: bool,
    role: str | None,
    fmt: str,
    **options: Any,
) -> None:
    """What changed since it last worked: ranked suspects, each with its reasons and evidence.

    \b
    Then a timeline (restarts, changes, health, marks), what was verified
    unchanged (files byte-identical, git HEAD the same) and the blind spots
    (collection errors, gaps in recording).
    Example: drift since --stable 12:00      drift since --fleet --role decode
    """
    if fleet or role is not None:
        from drift.cli_fleet import since_fleet

        if not fleet:
            raise DriftError("--role needs --fleet (drift since --fleet --role NAME)")
        if options["exit_code"]:
            raise DriftError("--exit-code is for one host: not with --fleet")
        emit(since_fleet(obj, stable, until, role, options["service"], fmt))
        return
    _show_report(obj, "since", stable, until, fmt, options)


@cli.command(short_help="The since report between any two times.")
@common_options
@click.argument("start", metavar="WHEN", type=WHEN)
@click.argument("end", metavar="WHEN", type=WHEN)
@report_options
@report_format_option
@click.option("--exit-code", is_flag=True, help=CHANGES_FOUND_HELP)
@pass_drift
def diff(obj: DriftContext, /, start: When, end: When, fmt: str, **options: Any) -> None:
    """The same report as since, between any two times or snapshots.

    \b
    WHEN is 12:00, noon, 'yesterday 12:00', '2h ago', an ISO 8601 time, or
    '#57' for snapshot 57; the second must not be before the first.
    Example: drift diff '#12' '#57'     drift diff 'yesterday 12:00' noon
    """
    _show_report(obj, "diff", start, end, fmt, options)


@cli.command(short_help="Write the report to an .html, .md or .json file.")
@common_options
@click.option(
    "--stable",
    type=WHEN,
    help="Baseline (default: the end of the last stable window). " + WHEN_HELP,
)
@click.option("--until", type=WHEN, help="Compare up to this time (default: latest record).")
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    required=True,
    is_eager=True,
    callback=remember_output,
    help="The file to write: .html, .md or .json.",
)
@report_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "md", "html"]),
    is_eager=True,
    callback=remember_format,
    help="Override the format the file's extension gives.",
)
@pass_drift
def report(
    obj: DriftContext,
    /,
    stable: When | None,
    until: When | None,
    output: str,
    fmt: str | None,
    **options: Any,
) -> None:
    """Write the since report to a file for the postmortem: HTML, Markdown or JSON.

    \b
    The HTML page is self-contained (no scripts, nothing loaded from
    anywhere) and ends with the exact command that regenerates it. Every
    suspect is included unless --top N.
    Example: drift report --stable 12:00 -o postmortem.html
    """
    from pathlib import Path

    from drift.atomic import write_atomically
    from drift.display import printable

    shown_fmt = fmt or format_from_extension(output)
    if shown_fmt is None:
        raise DriftError(
            f"{output}: cannot tell the format from the extension; use .html, .md or "
            ".json, or give --format"
        )
    context = _report_context(obj, "report", stable, until, options, None)
    regenerate = _regenerate(obj, "report", context, options, output=output, fmt=fmt)
    text = _render(obj, "report", context, shown_fmt, options, regenerate)
    try:
        write_atomically(output, text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise DriftError(f"{output}: cannot write: {exc.strerror}") from None
    shown = len(context.suspects)
    suspects = f"{shown:,} suspect{'' if shown == 1 else 's'}"
    click.echo(f"wrote {printable(Path(output))} ({shown_fmt}, {suspects})")


@cli.command(short_help="The recorded state at a time.")
@common_options
@click.option(
    "--at", "at", type=WHEN, help="Show the state at this time (default: latest). " + WHEN_HELP
)
@click.argument("pattern", required=False)
@click.option("--service", metavar="NAME", help="Only the subjects of this service.")
@format_option("text", "json", help_text="Output format; json is a versioned envelope.")
@pass_drift
def show(
    obj: DriftContext, at: When | None, pattern: str | None, service: str | None, fmt: str
) -> None:
    """The recorded state at a time: every fact, or those matching PATTERN.

    PATTERN is a glob on subject, key or "subject key" (a plain word matches
    as a substring), e.g.  drift show 'env:SGLANG_*'; --service NAME keeps the
    subjects of one service (its process, script, endpoints). Exit 2 when no fact
    recorded at any time matches it.
    """
    from drift.analysis.investigate import check_service
    from drift.analysis.plain import plain
    from drift.analysis.views import state_view

    def build(history: History) -> dict[str, Any]:
        check_service(history, service, obj.configured_services(history.host))
        context: dict[str, Any] = plain(state_view(history, at, pattern, service))
        return context

    _view(obj, "show", build, fmt)


@cli.command(short_help="Every value a fact has had, when and from where.")
@common_options
@click.argument("pattern")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="Show the newest N values of each fact (default: 20); the output says how many "
    "older ones it left out.",
)
@click.option("--all", "show_all", is_flag=True, help="Show every value of each fact.")
@click.option(
    "-p", "--patch", is_flag=True, help="Show each change as a unified diff (git log -p)."
)
@format_option("text", "json", help_text="Output format; json is a versioned envelope.")
@pass_drift
def history(
    obj: DriftContext, pattern: str, limit: int | None, show_all: bool, patch: bool, fmt: str
) -> None:
    """Every value a fact has had, newest first: when, and where it came from.

    PATTERN is a glob on subject, key or "subject key" (a plain word matches
    as a substring). Exit 2 when no recorded fact matches: a typo must not
    read as a fact that never changed.

    \b
    Examples:
      drift history SGLANG_SM120_MMA_TARGET_CTAS
      drift history 'command:loadavg' --limit 5
      drift history 'script:*decode.sh export:*' --all --format json
      drift history 'script:*decode.sh content' -p
    """
    from drift.analysis.plain import plain
    from drift.analysis.views import HISTORY_LIMIT, fact_history

    shown = None if show_all else (limit or HISTORY_LIMIT)
    _view(obj, "history", lambda h: plain(fact_history(h, pattern, shown, patch=patch)), fmt)


@cli.command(short_help="Mark a moment stable or unstable, or add a note.")
@common_options
@click.argument("kind", type=click.Choice(["stable", "unstable", "note"]), required=False)
@click.option("--at", "at", type=WHEN, help="When it was so (default: now). " + WHEN_HELP)
@click.option("--note", metavar="TEXT", help="Why: what you saw, what you checked.")
@click.option("--list", "listing", is_flag=True, help="List the marks, newest first, and stop.")
@format_option("text", "json", help_text="With --list: output format.")
@pass_drift
def mark(
    obj: DriftContext, kind: str | None, at: When | None, note: str | None, listing: bool, fmt: str
) -> None:
    """Mark a moment: stable (it works), unstable (it broke), or a note (asked for on a
    terminal when --note is not given).

    \b
    A stable mark opens a stable window that the next unstable mark closes;
    `drift since` with no --stable compares against the end of the last one.
    A mark before the first record or after the latest is kept, with a warning
    that names their times. `drift unmark N` takes one back.
    Example: drift mark stable --note "decode answers, p99 ok"     drift mark --list
    """
    if listing or kind is None:
        from drift.analysis.history_log import mark_list
        from drift.analysis.plain import plain
        from drift.cli_records import page

        if kind is not None or at is not None or note is not None:
            raise DriftError("--list takes no KIND, --at or --note")
        if not listing:
            raise DriftError("which mark? drift mark stable|unstable|note (or --list)")
        page(obj, "mark --list", "marks.txt.j2", lambda h: plain(mark_list(h)), fmt)
        return
    if kind == "note" and note is None:
        if not sys.stdin.isatty():
            raise DriftError('a note needs its text: drift mark note --note "..."')
        note = click.prompt("Note", err=True)
    from drift.analysis.windows import failing_at
    from drift.display import printable
    from drift.marks import mark_said, mark_time, mark_warnings
    from drift.record import redacted_note
    from drift.store.writer import add_mark

    # A mark belongs to a recorded history: never start a database (or a host) with one.
    with obj.history(hint="run `drift record` first (a mark needs a recorded history)") as history:
        moment = mark_time(history, at)
        contest = failing_at(history, moment) if kind == "stable" else None
        warnings = mark_warnings(history, moment, given=at is not None)
    if contest is not None:
        # The operator may know better: the mark is kept, and `since` says it is contested.
        warnings.append(
            f"{contest.words()} at #{contest.record.id}, the last record at "
            "or before this mark; it is recorded, but `drift since` takes the last passing "
            "check before that failure as the baseline (give --stable to take the mark)"
        )
    note = redacted_note(obj.config(), obj.db_url(), note)
    mark_id = add_mark(obj.db_url(), obj.host_name(), kind, moment, note)
    when_text = mark_said(at, moment)
    click.echo(f"mark #{mark_id}: {kind} at {when_text} for host {printable(obj.host_name())}")
    _warn(warnings)


DEMO_REPORT = "drift-demo-report.html"


@cli.command(short_help="Drop history older than a length of time, keeping the state there.")
@common_options
@click.option(
    "--keep",
    metavar="SPAN",
    help='How much history to keep: 90d, 12w, 36h, 6mo, 30min (else keep = "..." in '
    "drift.toml); a bare m is refused (minutes or months?).",
)
@click.option("--dry-run", is_flag=True, help="Only say what would be dropped.")
@click.option(
    "--yes",
    is_flag=True,
    help="Drop without asking, even more than a day of history or a stable mark (for cron).",
)
@pass_drift
def prune(obj: DriftContext, keep: str | None, dry_run: bool, yes: bool) -> None:
    """Drop every host's records (--host: only its) older than --keep, keeping each fact's
    value at that point.

    \b
    Per host, the last record at or before the horizon (now minus --keep)
    becomes the first of its history: every value it held is kept, as are
    all records after it, so the state at any kept time reads as before.
    Values that ended before it go, and so do the records before it, the
    marks (stable, unstable, note) taken before it, and the long texts and
    provenances no kept value uses. A WHEN before that record is refused
    with a message naming it, and `drift history` shows a value held there
    as from "where the history begins". A `drift record` running
    meanwhile waits for a moment and is never lost. An SQLite file is
    vacuumed afterwards when a quarter or more of it is free.

    \b
    A prune that drops more than a day of a host's history, or a stable
    mark, first shows what it would drop and asks (on a terminal); without
    one it drops nothing and exits 2 unless --yes (what cron should pass).
    Another host's history (--host OTHER) is pruned only with --yes as well,
    and the output says whose it was.
    """
    from drift.display import printable
    from drift.errors import ConfigError
    from drift.progress import StatusLine
    from drift.store.prune import prune_history, reasons_to_confirm, vacuum_sqlite
    from drift.store.writer import now_us
    from drift.timespec import local_time, parse_span

    config = obj.config()
    # Another host's history is another writer's: it is dropped only when named twice.
    other = obj.host if obj.host is not None and obj.host != config.host else None
    if keep is not None:
        span = parse_span(keep)
    elif config.keep is not None:
        span = config.keep
    else:
        raise ConfigError('how much to keep? give --keep 90d, or keep = "90d" in drift.toml')
    database = obj.db_url()
    horizon_us = now_us() - int(span.total_seconds() * 1_000_000)
    nothing = f"{database.display()}: nothing older than {local_time(horizon_us)}"
    if dry_run or not yes:
        # Planned first: what it would drop decides whether to ask.
        plan = prune_history(database, horizon_us, dry_run=True, host=obj.host)
        reasons = reasons_to_confirm(plan)
        if not plan.hosts:
            click.echo(nothing)
            return
        if dry_run or reasons:
            _say_pruned(plan)
        if dry_run:
            return
        if other is not None and not yes:
            raise DriftError(
                f"nothing dropped: {printable(other)} is not this host "
                f"({printable(config.host)}); to prune another host's history name it twice: "
                f"drift prune --host {printable(other)} --yes"
            )
        if reasons:
            what = " and ".join(reasons)
            if not sys.stdin.isatty():
                raise DriftError(
                    f"nothing dropped: this would drop {what}; pass --yes to drop it "
                    "(or --dry-run to only see what would go)"
                )
            click.confirm(f"Drop {what}?", abort=True, err=True)
    if other is not None:
        click.echo(
            f"pruning host {printable(other)}'s history, not this host's "
            f"({printable(config.host)}): named by --host and confirmed by --yes"
        )
    size = _size(database)
    status = None if not sys.stderr.isatty() else StatusLine(sys.stderr)
    try:
        result = prune_history(database, horizon_us, host=obj.host, progress=status)
        vacuumed = result.hosts and vacuum_sqlite(database)
    finally:
        if status is not None:
            status.clear()
    if not result.hosts:
        click.echo(nothing)
        return
    _say_pruned(result)
    if vacuumed and size is not None:
        click.echo(f"{database.display()}: {size:,} bytes before, {_size(database) or 0:,} after")


def _say_pruned(result: PruneResult) -> None:
    """Per host what a prune dropped (or, dry, would drop): records, values, marks."""
    from drift.timespec import local_time

    would = "would drop" if result.dry_run else "dropped"
    for host in result.hosts:
        stable = f" ({host.stable_marks:,} stable)" if host.stable_marks else ""
        held = "value held then now begins" if host.repointed == 1 else "values held then now begin"
        click.echo(
            f"{host.host}: history begins at #{host.keep_from} ({local_time(host.keep_from_us)}); "
            f"{would} {plural(host.snapshots, 'record')}, {plural(host.versions, 'value')}, "
            f"{plural(host.marks, 'mark')}{stable}; {host.repointed:,} {held} there"
        )
    if not result.dry_run:
        click.echo(
            f"{would} {plural(result.facts, 'fact')}, {plural(result.blobs, 'long text')} and "
            f"{plural(result.provenances, 'provenance')} no value uses any more"
        )


def _size(database: Any) -> int | None:
    """The size of an SQLite history's file (None for PostgreSQL, or a file not there: the
    prune that follows says so in its words)."""
    path = database.sqlite_path
    try:
        return None if path is None else int(path.stat().st_size)
    except OSError:
        return None


@cli.command(short_help="Replay the motivating incident in a sandbox.")
@click.option(
    "--keep",
    is_flag=True,
    help="Leave the sandbox and its services running, and print commands to try on it.",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Where to write the HTML report (default: drift-demo-report.html in the current "
    "folder, replaced by the next demo).",
)
def demo(keep: bool, output: str | None) -> None:
    """Replay the motivating incident in a sandbox and show what drift finds.

    \b
    Three serve scripts (prefill, decode, router) run as real processes; a
    morning is recorded and marked stable; one export line is added to
    decode.sh and the three are co-restarted; then `drift since` names the
    line, and the same report is written as a self-contained HTML page.
    Needs no network or root; takes a few seconds; cleans up after itself
    (Ctrl-C included) unless --keep.
    """
    import shutil
    import tempfile
    from pathlib import Path

    from drift.analysis.plain import plain
    from drift.demo import SERVICES, IncidentSandbox, run_demo
    from drift.render.jinja import render_report, render_template
    from drift.render.regenerate import regenerate_command, report_extras
    from drift.render.terminal import wrap_lines

    width = terminal_width()
    root = Path(tempfile.mkdtemp(prefix="drift-demo-"))
    box = IncidentSandbox(root)
    try:
        investigation = run_demo(root, lambda text: click.echo(wrap_lines(text, width)), keep=keep)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    context = plain(investigation)
    shown = {
        **context,
        "explain": False,
        "digests": False,
        "evidence_shown": evidence_shown(width, False),
    }
    emit(render_template("since.txt.j2", shown, width=width))
    # One fixed name where the user is, replaced each time: seen, and never piling up in /tmp.
    target = Path(output or DEMO_REPORT).absolute()
    cfg = f"--config {box.config_path} --db {box.db_path}"
    regenerate = (
        regenerate_command(
            "report",
            investigation,
            {},
            config_path=box.config_path,
            db=str(box.db_path),
            output=str(target),
        )
        if keep
        else "drift demo"
    )
    try:
        target.write_text(
            render_report(report_extras(context, regenerate), "html"), encoding="utf-8"
        )
    except OSError as exc:
        raise DriftError(
            f"{target}: cannot write the demo's HTML report: {exc.strerror}; give -o FILE"
        ) from None
    replaced = "" if output else " (the next `drift demo` replaces it)"
    click.echo("\n" + wrap_lines(f"HTML report for the postmortem: {target}{replaced}", width))
    if keep:
        click.echo(f"\nThe sandbox stays in {root} with its services running. Try:")
        for command in (
            "since --explain",
            "since --format json",
            "history SGLANG_SM120_MMA_TARGET_CTAS",
            "show decode",
            "record",
        ):
            click.echo(f"  drift {command} {cfg}")
        pids = " ".join(str(box.pid(name)) for name in SERVICES)
        click.echo(f"Stop the services with: kill {pids}")


@cli.group(short_help="Show or upgrade the database schema.")
def db() -> None:
    """Database schema: see the current revision, or upgrade to this drift's."""


@db.command("upgrade")
@common_options
@pass_drift
def db_upgrade(obj: DriftContext) -> None:
    """Migrate the database to this drift's schema (SQLite files are backed up first)."""
    from drift.store.schema import upgrade_database

    database = obj.db_url()
    result = upgrade_database(database)
    if result.before == result.after:
        click.echo(f"{database.display()}: already at schema {result.after}")
        return
    click.echo(
        f"{database.display()}: upgraded schema {result.before or '(empty)'} -> {result.after}"
    )
    if result.backup:
        click.echo(f"backup of the old database: {result.backup}")


@db.command("current")
@common_options
@pass_drift
def db_current(obj: DriftContext) -> None:
    """Print the database's schema revision and the one this drift needs."""
    from drift.errors import NoDatabaseError
    from drift.store.db import connect_dbapi
    from drift.store.schema import HEAD_REVISION, current_revision_dbapi, revision_status

    database = obj.db_url()
    try:
        conn = connect_dbapi(database)
    except NoDatabaseError as exc:
        raise NoDatabaseError(
            obj.no_database(exc.path, "run `drift init` or `drift db upgrade`"), exc.path
        ) from None
    try:
        revision = current_revision_dbapi(conn)
    finally:
        conn.close()
    status = revision_status(revision)
    click.echo(
        f"{database.display()}: schema {revision or '(none)'}; this drift needs "
        f"{HEAD_REVISION} ({status})"
    )


def _register_fleet_commands() -> None:
    from drift.cli_fleet import compare, push
    from drift.cli_records import cat, log, unmark

    for command in (compare, push, cat, log, unmark):
        cli.add_command(command)


_register_fleet_commands()


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="drift")
