"""Reading the history as git's habits read a repository: `drift cat` (git show REV:path),
`drift log` (git log) and `drift unmark` (a mark taken back, kept as such).

Kept beside cli.py, which registers them: the analysis is in
`drift.analysis.recorded_text` and `drift.analysis.history_log`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from drift.cli_context import DriftContext
from drift.cli_options import WHEN, WHEN_HELP, common_options, format_option, pass_drift
from drift.timespec import When

if TYPE_CHECKING:
    from drift.store.query import History


@click.command("cat", short_help="A recorded script, unit or file as it was (git show REV:path).")
@common_options
@click.argument("path")
@click.option(
    "--at", "at", type=WHEN, help="As it was at this time (default: latest record). " + WHEN_HELP
)
@pass_drift
def cat(obj: DriftContext, path: str, at: When | None) -> None:
    """Print PATH as recorded: a serve script, a unit file or a content-tracked file, its
    secrets masked; of an env file, the assignments read from it, by line.

    \b
    stdout is the text alone (for diff or grep); stderr says which record it
    is from. A path never recorded is refused (exit 2), naming the recorded
    paths closest to it.
    Example: drift cat /opt/serve/decode.sh --at 'yesterday 12:00'
    """
    from drift.analysis.recorded_text import recorded_text
    from drift.display import printable

    with obj.history() as history:
        result = recorded_text(history, path, at)
    click.echo(f"drift: {printable(result.note)}", err=True)
    click.echo(result.text, nl=False)


@click.command("log", short_help="The records and marks, newest first (git log).")
@common_options
@click.option("--since", "since", type=WHEN, help="Only what is newer than this. " + WHEN_HELP)
@click.option("--marks", "with_marks", is_flag=True, help="List the marks among the records.")
@format_option("text", "json", help_text="Output format; json is a versioned envelope.")
@pass_drift
def log(obj: DriftContext, since: When | None, with_marks: bool, fmt: str) -> None:
    """Each record, newest first: its time, number, facts changed, collection errors and a
    gap in recording before it; with --marks, each mark (kind, note, number) too.

    \b
    Paged on a terminal ($PAGER, as git log); plain when piped.
    Example: drift log --since '2h ago' --marks
    """
    from drift.analysis.history_log import history_log
    from drift.analysis.plain import plain

    page(obj, "log", "log.txt.j2", lambda h: plain(history_log(h, since, with_marks)), fmt)


def page(
    obj: DriftContext,
    command: str,
    template: str,
    build: Callable[[History], dict[str, Any]],
    fmt: str,
) -> None:
    """A listing in JSON or text, through the pager on a terminal."""
    from drift.render.envelope import render_json
    from drift.render.jinja import render_template

    with obj.history() as history:
        context = build(history)
    if fmt == "json":
        click.echo(render_json(command, context))
        return
    tty = sys.stdout.isatty()
    text = render_template(template, context, obj.config().templates_dir, width=None)
    if tty:
        click.echo_via_pager(text)
    else:
        click.echo(text, nl=not text.endswith("\n"))


@click.command("unmark", short_help="Take a mark back (kept in the history as undone).")
@common_options
@click.argument("number", metavar="N", type=click.IntRange(min=1))
@pass_drift
def unmark(obj: DriftContext, number: int) -> None:
    """Take back mark #N (see `drift mark --list`): it stays in the history, said undone,
    and `drift since` no longer takes it as a stable window or a break.

    Example: drift unmark 3
    """
    from drift.display import printable
    from drift.store.writer import undo_mark
    from drift.timespec import local_time

    # Opened only to say in one line why there is no history (and no mark) to undo.
    with obj.history(hint="run `drift record` first (a mark needs a recorded history)"):
        pass
    at_us, kind, note = undo_mark(obj.db_url(), obj.host_name(), number)
    said = f": {printable(note)}" if note else ""
    click.echo(
        f"mark #{number} ({kind} at {local_time(at_us)}{said}) undone for host "
        f"{printable(obj.host_name())}; `drift mark --list` still shows it"
    )
