"""The options commands share, as decorator factories, and the context they fill in.

STYLE: shared option groups as decorators (`@common_options`), state in
ctx.obj (`pass_drift`). A WHEN is a click type: every command reads it the
same way, and a bad one is refused before the command runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from drift.cli_context import DriftContext

if TYPE_CHECKING:
    from drift.timespec import When

    _WhenParam = click.ParamType[When]  # generic from click 8.2; drift runs on 8.1 too
else:
    _WhenParam = click.ParamType

F = TypeVar("F", bound=Callable[..., Any])

WHEN_HELP = (
    "WHEN is 12:00, 12:00:30, noon, midnight, 'yesterday 12:00', '2h ago', "
    "'90m ago', an ISO 8601 time, or '#57' for snapshot 57 (a time of day later "
    "than now is yesterday's)."
)

pass_drift = click.make_pass_decorator(DriftContext, ensure=True)


class WhenType(_WhenParam):
    """A WHEN option or argument, read as a `When` (drift.timespec.parse_when).

    One it cannot read is the library's TimeSpecError, which DriftGroup shows
    as every refused input: one line, `drift: cannot understand time ...`, exit 2.
    """

    name = "WHEN"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> When:
        from drift.timespec import When, parse_when

        return value if isinstance(value, When) else parse_when(value)


WHEN = WhenType()


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A callback keeping an option's value in the DriftContext, and whether it was read
    from the option's environment variable (for messages that say where it came from)."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None:
            obj = ctx.ensure_object(DriftContext)
            setattr(obj, name, value)
            if param.name and ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT:
                obj.from_env.add(name)
        return value

    return callback


def common_options(func: F) -> F:
    """--config, --db and --host, accepted by every command that reads config or history."""
    return _config_db_host(func, host=True)


def fleet_options(func: F) -> F:
    """--config and --db: a command that reads every host of a database names its hosts
    itself, so it has no --host."""
    return _config_db_host(func, host=False)


def _config_db_host(func: F, *, host: bool) -> F:
    for option in reversed(
        [
            click.option(
                "--config",
                "config_path",
                metavar="PATH",
                envvar="DRIFT_CONFIG",
                show_envvar=True,
                expose_value=False,
                callback=_remember("config_path"),
                help="drift.toml to use (else ./drift.toml, then /etc/drift/drift.toml).",
            ),
            click.option(
                "--db",
                metavar="URL",
                envvar="DRIFT_DB",
                show_envvar=True,
                expose_value=False,
                callback=_remember("db"),
                help="Database: a file path, sqlite:///PATH or postgresql://... "
                "(else db in drift.toml, else ~/.local/state/drift/drift.db).",
            ),
            click.option(
                "--host",
                metavar="NAME",
                expose_value=False,
                callback=_remember("host"),
                help="Host whose history to use (default: the config's host).",
            ),
        ][: 3 if host else 2]
    ):
        func = option(func)
    return func


def remember_format(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    """The callback of an eager --format: known before any other option is read, so that
    an error in one goes into a JSON envelope too when the output is one."""
    if value is not None:
        ctx.ensure_object(DriftContext).output_format = value
    return value


def format_option(*formats: str, help_text: str) -> Callable[[F], F]:
    """--format, text by default; json is the versioned envelope, errors included."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(formats)),
        default="text",
        show_default=True,
        is_eager=True,
        callback=remember_format,
        help=help_text,
    )


report_format_option = format_option(
    "text",
    "json",
    "md",
    "html",
    help_text="Output format: text for the terminal, json (a versioned envelope), md or html.",
)


def report_options(func: F) -> F:
    """--top, --all, --service, --explain, --digests: what of the report to show."""
    for option in reversed(
        [
            click.option(
                "--top",
                type=click.IntRange(min=1),
                metavar="N",
                help="Show the N most likely suspects (default: 10).",
            ),
            click.option("--all", "show_all", is_flag=True, help="Show every suspect."),
            click.option(
                "--service",
                metavar="NAME",
                help="Only suspects that touch this service (its process, script or unit); a name "
                "no record of the host has is refused, naming the known ones.",
            ),
            click.option(
                "--explain",
                is_flag=True,
                help="Show how each score is made: every signal, its value and its weight.",
            ),
            click.option(
                "--digests",
                is_flag=True,
                help="List the sha256 of every file (and HEAD of every repo) verified unchanged.",
            ),
        ]
    ):
        func = option(func)
    return func


def remember_output(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    """The callback of report's eager -o FILE, as remember_format: its extension may say
    the output is JSON."""
    if value is not None:
        ctx.ensure_object(DriftContext).output_path = value
    return value
