"""A failing unit's last words: its journal lines of its last few runs, by InvocationID, bounded.

Read only when systemd says the unit is between failed runs or gave up
(`drift.collectors.systemd.UnitRuntime.failing`), so a healthy unit's record
never runs journalctl. journalctl is the configured systemctl's neighbour
(the command prefix's last word replaced), so a container's journal is read
through the same `nsenter` as its systemd. Everything is bounded: the newest
entries only, a few runs, a few lines of each, each line cut short, and a
timeout. The lines are one fact, ``unit:journal``, redacted like any value.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from drift.collectors.commands import run_bounded
from drift.facts import storable
from drift.secrets.shapes import cut

ENTRIES = 200  # newest journal entries of the unit read, at most
RUNS = 3  # invocations kept, newest last
LINES_PER_RUN = 6  # the last lines of each
LINE_CHARS = 300  # a longer message is cut
TIMEOUT = 3.0  # seconds journalctl may take
MAX_OUTPUT = 512 * 1024
_FIELDS = "MESSAGE,_SYSTEMD_INVOCATION_ID,INVOCATION_ID,_PID,SYSLOG_IDENTIFIER"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class JournalLines:
    """What journalctl said: the lines kept (one a line of `text`) and the runs they come from."""

    text: str
    invocations: tuple[str, ...]
    command: str
    skipped: int = 0  # entries of a run that could not be read (a stamp out of range, ...)


class JournalError(Exception):
    """journalctl could not be run or did not answer."""


def journalctl_command(systemctl: Sequence[str]) -> list[str]:
    """journalctl beside the configured systemctl: the prefix's last word, renamed."""
    *prefix, last = systemctl
    folder, slash, _name = last.rpartition("/")
    return [*prefix, f"{folder}{slash}journalctl"]


def unit_journal(unit: str, systemctl: Sequence[str], timeout: float = TIMEOUT) -> JournalLines:
    """The unit's journal lines of its last RUNS invocations; JournalError if journalctl fails."""
    argv = [
        *journalctl_command(systemctl),
        "--unit",
        unit,
        "--lines",
        str(ENTRIES),
        "--reverse",  # newest first: a cut output keeps the newest
        "--output=json",
        f"--output-fields={_FIELDS}",
        "--no-pager",
        "--quiet",
    ]
    command = shlex.join(argv[: len(systemctl)] + ["--unit", unit])
    run = run_bounded(argv, timeout, max_output=MAX_OUTPUT)
    if run.error is not None:
        raise JournalError(f"cannot run {command}: {run.error}")
    if run.timed_out:
        raise JournalError(f"{command} did not answer within {timeout:g} s")
    if run.exit_code != 0:
        reason = run.stderr_last_line or "no output"
        raise JournalError(f"{command} failed (exit {run.exit_code}): {reason}")
    entries, skipped = read_entries(run.stdout)
    lines = select_runs(list(reversed(entries)), command)
    return replace(lines, skipped=skipped) if skipped else lines


def read_entries(output: bytes) -> tuple[list[JournalEntry], int]:
    """The entries of runs in journalctl's JSON output, in its order, and how many were
    broken (skipped, never guessed)."""
    entries: list[JournalEntry] = []
    skipped = 0
    for raw in output.split(b"\n"):  # journalctl ends each entry with \n; \r is data
        if not raw.strip():
            continue
        try:
            entry = _entry(raw)
        except UnreadableEntry:
            skipped += 1
            continue
        if entry is not None:
            entries.append(entry)
    return entries, skipped


def select_runs(entries: list[JournalEntry], command: str) -> JournalLines:
    """From the entries (oldest first), the last lines of the last runs, in time order.

    Of each run: its own last LINES_PER_RUN lines, and systemd's words on how
    it ended ("Main process exited, code=exited, status=1/FAILURE"); systemd's
    other lines ("Stopped", "Scheduled restart job") say nothing NRestarts does not.
    """
    runs: dict[str, list[JournalEntry]] = {}
    for entry in entries:
        if not entry.own and not _ENDING.search(entry.line):
            continue
        run = runs.pop(entry.invocation, [])
        run.append(entry)
        runs[entry.invocation] = run  # a run's place is that of its newest line
    kept = list(runs)[-RUNS:]
    lines = []
    for invocation in kept:
        run = runs[invocation]
        own = {id(e) for e in [e for e in run if e.own][-LINES_PER_RUN:]}
        ending = {id(e) for e in [e for e in run if not e.own][-2:]}
        lines += [e.line for e in run if id(e) in own or id(e) in ending]
    return JournalLines("\n".join(lines), tuple(kept), command)


# systemd's own lines about how a run ended.
_ENDING = re.compile(
    r"Main process exited|Failed with result|Failed to start|Start request repeated|"
    r"Watchdog timeout|Killing process|code=(?:exited|killed|dumped)"
)


@dataclass(frozen=True)
class JournalEntry:
    """One journal line of a run: the unit's own output, or systemd's about it."""

    invocation: str
    own: bool  # written by the unit's processes (else by systemd about the unit)
    line: str


_STAMP = re.compile(r"[0-9]{1,20}")  # microseconds since 1970, as journalctl writes them


class UnreadableEntry(Exception):
    """An entry of a run that cannot be read as one: it is skipped and counted, never guessed."""


def _entry(raw: bytes) -> JournalEntry | None:
    """One JSON entry as a line; None for one of no run; UnreadableEntry for a broken one."""
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):
        raise UnreadableEntry from None
    if not isinstance(entry, dict):
        raise UnreadableEntry
    own = entry.get("_SYSTEMD_INVOCATION_ID")
    invocation = own or entry.get("INVOCATION_ID")
    if not isinstance(invocation, str) or not invocation:
        return None  # systemd's lines between runs
    stamp = entry.get("__REALTIME_TIMESTAMP")
    if not isinstance(stamp, str) or not _STAMP.fullmatch(stamp):
        raise UnreadableEntry
    try:
        # A stamp past year 9999 (a damaged journal file) is no time a datetime can hold.
        moment = _EPOCH + timedelta(microseconds=int(stamp))
    except OverflowError:
        raise UnreadableEntry from None
    who = entry.get("SYSLOG_IDENTIFIER")
    pid = entry.get("_PID")
    speaker = f"{who}[{pid}]" if isinstance(who, str) and isinstance(pid, str) else "?"
    message = _message(entry.get("MESSAGE"))
    message = cut(message, LINE_CHARS)  # never inside a secret: redacted whole, then cut
    at = moment.isoformat(timespec="microseconds").replace("+00:00", "Z")
    return JournalEntry(invocation, bool(own), f"{at} {invocation[:8]} {speaker}: {message}")


def _message(value: object) -> str:
    """A MESSAGE as one line of text: journald gives bytes as a list of numbers."""
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        text = storable(bytes(value).decode("utf-8", "surrogateescape"))
    elif isinstance(value, str):
        text = storable(value)
    else:
        text = ""
    return text.replace("\r", "\\r").replace("\n", "\\n")
