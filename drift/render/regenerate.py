"""The lines a postmortem report adds about itself: when it was made, how to make it again.

The regenerate line names the exact snapshots (`--stable '#5' --until '#6'`), so it
gives the same report however much is recorded later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drift.analysis.investigation import Investigation


def report_extras(context: dict[str, Any], regenerate: str) -> dict[str, Any]:
    """What the HTML and Markdown reports add: how to regenerate them, when they were made,
    and the timeline drawn (`picture`, for HTML) and told one line per event (`glance`)."""
    from datetime import UTC, datetime

    from drift.render.glance import glance_lines
    from drift.render.timeline import picture

    return {
        "explain": True,
        "digests": False,
        **context,
        "regenerate": regenerate,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "picture": picture(context),
        "glance": glance_lines(context),
    }


def regenerate_command(
    command: str,
    investigation: Investigation,
    options: dict[str, Any],
    *,
    config_path: Any = None,
    db: str | None = None,
    output: str | None = None,
    fmt: str | None = None,
) -> str:
    """The command line that makes this report again, however much is recorded later.

    The exact snapshots (`--stable '#5' --until '#6'`), the host, the config
    and the database (`db`: its --db value, password dropped, or None when the
    config carries it), and whatever chose the suspects shown.
    """
    import shlex

    baseline = f"#{investigation.baseline.snapshot}"
    current = f"#{investigation.current.snapshot}"
    args = ["drift", command]
    if output is not None:
        args += ["-o", output]
    args += [baseline, current] if command == "diff" else ["--stable", baseline, "--until", current]
    if fmt is not None:
        args += ["--format", fmt]
    args += ["--host", investigation.host]
    if config_path is not None:
        args += ["--config", str(config_path)]
    if db is not None:
        args += ["--db", db]
    if options.get("show_all"):
        args.append("--all")
    elif options.get("top"):
        args += ["--top", str(options["top"])]
    if options.get("service"):
        args += ["--service", options["service"]]
    args += [f"--{flag}" for flag in ("explain", "digests") if options.get(flag)]
    return shlex.join(args)
