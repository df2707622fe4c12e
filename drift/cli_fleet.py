"""The fleet's commands: `drift compare` (which host differs from its siblings).

Kept beside cli.py, which registers them: the analysis is in
`drift.analysis.compare`, the store side in `drift.store.fleet`.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from drift.cli_context import DriftContext
from drift.cli_options import (
    WHEN,
    WHEN_HELP,
    common_options,
    fleet_options,
    format_option,
    pass_drift,
)
from drift.timespec import When

compare_format_option = format_option(
    "text",
    "json",
    "md",
    "html",
    help_text="Output format: text for the terminal, json (a versioned envelope), md or html.",
)


@click.command(short_help="What a host has that its siblings do not.")
@fleet_options
@click.argument("hosts", nargs=-1, metavar="[HOST]...")
@click.option(
    "--fleet", is_flag=True, help="Compare every host that recorded in the hour before --at."
)
@click.option(
    "--at", "at", type=WHEN, help="Compare as they were then (default: latest). " + WHEN_HELP
)
@click.option("--role", metavar="NAME", help="Only the hosts of this role (drift.toml's `role`).")
@click.option("--service", metavar="NAME", help="Only this service's facts (process, script).")
@click.option(
    "--top",
    type=click.IntRange(min=1),
    metavar="N",
    help="Show the N most likely findings of each role (default: all).",
)
@compare_format_option
@pass_drift
def compare(
    obj: DriftContext,
    /,
    hosts: tuple[str, ...],
    fleet: bool,
    at: When | None,
    role: str | None,
    service: str | None,
    top: int | None,
    fmt: str,
) -> None:
    """Which host differs from its siblings, and where each difference comes from.

    Hosts of one role (`role = "decode"` in each host's drift.toml) should be
    alike: where most agree, a host with another value is a finding, ranked
    (a running process's setting first; changed since that host's last
    stable window above as it always was) with the script line or process it
    comes from. Values that always differ between hosts (pids, start times,
    host names, addresses, ranks, a load average) are listed as expected,
    never as findings; with no majority (two hosts, or a split) drift says
    it cannot tell which side is odd.

    \b
    Examples:
      drift compare decode-1 decode-2 decode-3 decode-4
      drift compare --fleet --role decode
      drift compare --fleet --at 12:00 --format html > fleet.html
    """
    from drift.analysis.compare import CompareOptions
    from drift.errors import DriftError

    if not hosts and not fleet:
        raise DriftError("name the hosts to compare, or give --fleet for every recent host")
    if hosts and fleet:
        raise DriftError("give either hosts or --fleet, not both")
    if len(hosts) == 1:
        raise DriftError(f"one host ({hosts[0]}) has nothing to compare with: name two or more")
    options = CompareOptions(hosts=hosts, fleet=fleet, at=at, role=role, service=service, top=top)
    text = render_comparison(obj, options, fmt)
    click.echo(text, nl=not text.endswith("\n"))


def render_comparison(obj: DriftContext, options: Any, fmt: str) -> str:
    """The comparison in `fmt`; its warnings on stderr too (and in a JSON envelope)."""
    from drift.analysis.compare import compare as run_compare
    from drift.store.fleet import Fleet

    with Fleet.open(obj.db_url()) as fleet:
        found = run_compare(fleet, options, int(time.time() * 1_000_000))
    return _render(obj, "compare", "compare", found, fmt)


def since_fleet(
    obj: DriftContext,
    stable: When | None,
    until: When | None,
    role: str | None,
    service: str | None,
    fmt: str,
) -> str:
    """`drift since --fleet`, rendered in `fmt`; its warnings on stderr too."""
    from drift.analysis.fleet_since import FleetOptions, fleet_since
    from drift.store.fleet import Fleet

    options = FleetOptions(stable=stable, until=until, role=role, service=service)
    with Fleet.open(obj.db_url()) as fleet:
        found = fleet_since(fleet, options, int(time.time() * 1_000_000))
    return _render(obj, "since --fleet", "since_fleet", found, fmt)


def _render(obj: DriftContext, command: str, template: str, found: Any, fmt: str) -> str:
    """A fleet context as JSON (the envelope of `command`) or through TEMPLATE.FMT.j2; its
    warnings on stderr too."""
    from drift.analysis.plain import plain
    from drift.cli import _warn, terminal_width
    from drift.render.envelope import render_json
    from drift.render.jinja import render_template

    context = plain(found)
    warnings = _warn(context["warnings"])
    if fmt == "json":
        return render_json(command, context, warnings)
    templates_dir = obj.config().templates_dir
    if fmt in ("md", "html"):
        return render_template(f"{template}.{fmt}.j2", context, templates_dir)
    color = sys.stdout.isatty()
    return render_template(
        f"{template}.txt.j2", context, templates_dir, color=color, width=terminal_width()
    )


@click.command(short_help="Ship the records kept while the database was out of reach.")
@common_options
@pass_drift
def push(obj: DriftContext) -> None:
    """Ship this host's spooled records to the central database now.

    \b
    While a central database (PostgreSQL) is out of reach, `drift record`
    keeps each snapshot in a local spool (`spool` in drift.toml, else one
    per config and host in drift's state folder); the next record that reaches the
    database ships them first, oldest first. `drift push` does it at once.
    It is safe to run again: snapshots the database already has are skipped.
    Exit 3 if a record of this host is running; exit 2 if the database is
    still out of reach (the spool stays as it is).
    """
    from dataclasses import replace

    from drift.display import plural
    from drift.errors import DriftError
    from drift.store.push import ship
    from drift.store.spool import check_spool_place, legacy_spool, spool_path
    from drift.store.writer import HistoryWriter

    config = obj.config()
    if obj.host:
        config = replace(config, host=obj.host)
    db = obj.db_url()
    spool = spool_path(db, config.spool, config.path, config.host)
    if spool is None:
        raise DriftError(f"{db.display()} is a local SQLite file: there is no spool to ship")
    check_spool_place(spool)
    with HistoryWriter.open(db, create=False) as writer, writer.record_lock(config.host):
        done = [ship(s, writer, config.host) for s in (legacy_spool(db, config.spool), spool) if s]
    for part in done:
        warning = part.warning(config.host, "shipped")
        if warning:
            click.echo(warning, err=True)
    shipped = sum(part.shipped for part in done)
    skipped = sum(part.skipped for part in done)
    if shipped == 0 and skipped == 0:
        click.echo(f"nothing to ship for host {config.host} ({spool} holds no record)")
        return
    click.echo(
        f"shipped {plural(shipped, 'snapshot')} of host {config.host} from {spool} to "
        f"{db.display()}" + (f"; {skipped:,} it already had" if skipped else "")
    )
