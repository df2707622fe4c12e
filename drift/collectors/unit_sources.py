"""Every systemd source of a unit's environment, as facts of its service, with file and line.

What `systemctl show` says of the unit (`drift.collectors.systemd`), then
what systemd will read at the unit's next start, or next daemon-reload,
read by drift itself:

- ``unit:file:PATH``: the text of the unit file and each drop-in, on disk
  now (with `NeedDaemonReload=yes`, a drop-in created since the last reload
  too);
- ``unit:disk_environment:NAME``: the `Environment=` those files set now,
  with the line (`drift.collectors.unit_files`): what the next
  daemon-reload loads;
- ``unit:envfile:NAME``: what the unit's `EnvironmentFile=` files set now,
  with the line (`drift.collectors.env_file`): systemd reads them at each
  start and never says they changed (`NeedDaemonReload` stays "no");
- ``unit:envfile_sha256:PATH``: each of those files' SHA-256 (an edit that
  changes no value, a line moved);
- ``unit:envfile_ignored``: the lines of those files systemd drops (``export
  NAME=1``, ``NAME-1=x``: not variable names), one ``FILE:LINE: NAME=…`` a line
  (the value, which no process gets, is not kept);
- ``unit:pass_environment:NAME``: what `PassEnvironment=` hands on from the
  manager's own environment (PID 1's, which only a reboot changes).

A file drift cannot read is a blind spot on the keys it gives, never a
removal. A required EnvironmentFile that is missing or does not load is one
too, and says that systemd will not start the unit.
"""

from __future__ import annotations

import os
from typing import Any

from drift.collectors.env_file import Assignment, EnvFiles, load_env_files
from drift.collectors.process import Result
from drift.collectors.systemd import UnitState, show_manager, unit_facts
from drift.collectors.unit_files import (
    NO_SUCH_FILE,
    UnitFile,
    disk_environment,
    drop_ins_on_disk,
    loaded_origins,
    read_unit_files,
    unit_files_view,
)
from drift.errors import DriftError
from drift.facts import CollectContext, CollectionError, Fact
from drift.rooted import Files

# The systemd version from which a comment ending in a backslash no longer
# swallows the next line of an EnvironmentFile.
COMMENT_ENDS_AT_NEWLINE = 254


def unit_source_facts(subject: str, state: UnitState, ctx: CollectContext) -> list[Result]:
    """The `unit:*` facts of a service's unit, its files' and its EnvironmentFiles' included."""
    view = unit_files_view(ctx)
    if view is None or state.load_state in ("not-found", "masked"):
        return [*unit_facts(subject, state), *_pass_environment(subject, state, ctx.proc_root)]
    files, root = view
    loaded = [p for p in (state.fragment_path, *state.drop_in_paths) if p]
    on_disk = loaded
    if state.need_daemon_reload:
        fragment = [state.fragment_path] if state.fragment_path else []
        on_disk = fragment + drop_ins_on_disk(state.unit, state.drop_in_paths, files)
    read = {f.path: f for f in read_unit_files(list(dict.fromkeys(loaded + on_disk)), files)}
    origins = loaded_origins(disk_environment([read[p] for p in loaded]), state.environment)
    out: list[Result] = list(unit_facts(subject, state, origins))
    out += _unit_files(subject, state, [read[p] for p in on_disk])
    out += _envfiles(subject, state, files, ctx.systemctl)
    out += _pass_environment(subject, state, ctx.proc_root)
    if root is None:
        return out
    # Where the files are, seen from drift: a [[files]] entry watching one
    # through a container's /proc/PID/root is the same file.
    return [
        Fact(i.subject, i.key, i.value, {**i.provenance, "root": root})
        if isinstance(i, Fact) and "file" in i.provenance
        else i
        for i in out
    ]


def _unit_files(subject: str, state: UnitState, files: list[UnitFile]) -> list[Result]:
    """Each file's text, and the Environment= they set now, each variable with its line."""
    out: list[Result] = []
    readable = [f for f in files if f.text is not None]
    # A file gone since the last daemon-reload is a state (the reload drops it);
    # anything else unreadable, drift cannot see through.
    blind = [
        f
        for f in files
        if f.text is None and not (state.need_daemon_reload and f.error == NO_SUCH_FILE)
    ]
    for unit_file in readable:
        where = {"file": unit_file.path}
        out.append(Fact(subject, f"unit:file:{unit_file.path}", unit_file.text or "", where))
    for unit_file in blind:
        message = f"cannot read {unit_file.path}: {unit_file.error}"
        out.append(CollectionError(subject, f"unit:file:{unit_file.path}", message))
    disk = disk_environment(readable)
    if disk is None or blind:
        message = (
            f"cannot read every file of {state.unit}: what its Environment= lines say is unknown"
        )
        out.append(CollectionError(subject, "unit:disk_environment:", message))
        return out
    for name, (value, origin) in disk.items():
        line = {"unit": state.unit, "file": origin.file, "line": origin.line, "text": origin.text}
        out.append(Fact(subject, f"unit:disk_environment:{name}", value, line))
    return out


def _envfiles(
    subject: str, state: UnitState, files: Files, systemctl: tuple[str, ...]
) -> list[Result]:
    """What the unit's EnvironmentFile= files set now, as systemd will read them at its start."""
    if not state.environment_files:
        return []
    found = load_env_files(state.environment_files, files, comment_continues=None)
    if _unsure(found):
        # Only a comment ending in a backslash makes the version matter: ask it then.
        continues = _comment_continues(systemctl)
        if continues is not None:
            found = load_env_files(state.environment_files, files, comment_continues=continues)
    out: list[Result] = []
    for path, digest in found.read.items():
        # Its lines moved, or only its comments changed: the values alone would not say.
        where = {"file": path, **found.times.get(path, {})}
        out.append(Fact(subject, f"unit:envfile_sha256:{path}", digest, where))
    for name, assignment in found.values.items():
        # The file's times ride along: a variable's place is only its file, line and
        # text (drift.store.delta.LINE_KEYS), so a touch moves nothing.
        where = {**_where(state, assignment), **found.times.get(assignment.file, {})}
        out.append(Fact(subject, f"unit:envfile:{name}", assignment.value, where))
    if found.dropped:
        # `export NAME=1` and the like: systemd drops the line, which is worth saying.
        out.append(
            Fact(
                subject, "unit:envfile_ignored", ignored_lines(found.dropped), {"unit": state.unit}
            )
        )
    if found.problems:
        message = "; ".join(found.problems)
        out.append(CollectionError(subject, "unit:envfile:", f"{state.unit}: {message}"))
    return out


def ignored_lines(dropped: tuple[Assignment, ...]) -> str:
    """The lines systemd drops, ``FILE:LINE: NAME=…`` each: the name, never the value.

    No process gets the value; and a line systemd does not read as an
    assignment (``DB-PASSWORD=X``, a quoted value over several lines) is one
    the redaction may not read as one either, so its text is not kept.
    """
    return "\n".join(f"{a.file}:{a.line}: {a.name}={'…' if a.value else ''}" for a in dropped)


def _where(state: UnitState, assignment: Assignment) -> dict[str, Any]:
    where: dict[str, Any] = {
        "unit": state.unit,
        "file": assignment.file,
        "line": assignment.line,
        "text": assignment.text,
    }
    if assignment.unsure:
        where["unsure"] = assignment.unsure
    return where


def _unsure(found: EnvFiles) -> bool:
    return any(a.unsure for a in (*found.values.values(), *found.dropped))


def _comment_continues(systemctl: tuple[str, ...]) -> bool | None:
    """Whether this systemd reads a backslash at a comment's end as continuing it (before 254)."""
    try:
        version = show_manager(("Version",), systemctl).get("Version", [""])[0]
    except DriftError:
        return None
    digits = version.split(".", 1)[0].split("~", 1)[0]
    return int(digits) < COMMENT_ENDS_AT_NEWLINE if digits.isdigit() else None


def _pass_environment(subject: str, state: UnitState, proc_root: str) -> list[Result]:
    """The values PassEnvironment= hands on: PID 1's own environment, where it has the name."""
    if not state.pass_environment:
        return []
    path = os.path.join(proc_root, "1", "environ")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        message = f"cannot read {path} for PassEnvironment=: {exc.strerror or exc}"
        return [CollectionError(subject, "unit:pass_environment:", message)]
    environ: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.decode("utf-8", "backslashreplace").partition("=")
        if sep:
            environ.setdefault(name, value)
    where = {"unit": state.unit, "pid": 1, "source": path}
    return [
        Fact(subject, f"unit:pass_environment:{name}", environ[name], where)
        for name in state.pass_environment
        if name in environ
    ]
