"""What reading a script gives: the commands it may launch, the files it read, its gaps.

`drift.shell.evaluate.evaluate` returns a `ScriptModel`; the collector
turns it into facts and the analysis matches live values against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from drift.shell.values import Binding, Field, Origin


@dataclass(frozen=True, slots=True)
class Launch:
    """A command the script may start as the service, and the environment it receives.

    `variants` are the program's possible command lines, wrappers such as
    ``env K=V``, ``numactl ...`` or ``nohup`` removed (`written` keeps them).
    `env` maps each variable the script touched to its possible bindings;
    `cleared` means the command gets nothing else (``env -i``, ``exec -c``).
    `cwd` is the working folder it starts in (as `State.cwd`); `unknown`
    marks a command drift cannot read (a script in a folder it does not
    know) that may launch anything with any environment.
    """

    variants: tuple[tuple[Field, ...], ...]
    env: dict[str, tuple[Binding, ...]]
    origin: Origin
    conds: tuple[str, ...]
    how: Literal["exec", "background", "foreground"]
    cleared: bool = False
    written: tuple[tuple[Field, ...], ...] = ()  # the command lines with their wrappers
    source: str = ""  # the command as the script writes it, continuation lines joined
    cwd: str | None = None
    unknown: bool = False


@dataclass(frozen=True, slots=True)
class SourcedFile:
    """A file the script reads as shell code (``source``, ``.``) or as KEY=VALUE lines."""

    path: str
    data: bytes
    origin: Origin


@dataclass
class ScriptModel:
    """What a script may launch and hand over, and where drift's reading of it has gaps."""

    launches: list[Launch]
    exported: dict[str, tuple[Binding, ...]]  # at the end of the script, when nothing launched
    sourced: list[SourcedFile]
    gaps: list[str]  # lines drift could not follow, in words
    broken: list[str]  # lines that do not parse: then nothing derived from the script holds
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)  # see Conditions.caller_test
    # a relative path was read from the folder the script was started in, which the caller
    # did not give: given it, the reading may say more (`drift.shell.start`)
    needs_start: bool = False
    # what the reading asked of paths, (kind, path, answer): a new answer changes the reading
    checked: list[tuple[str, str, bool]] = field(default_factory=list)
    # every name the script assigns, unsets or takes out of a launch's environment; None when
    # a line drift could not follow (or env -i) may have changed any. A name not here that the
    # live process lacks is one the caller did not set.
    touched: list[str] | None = None
    # files the script sources that are there but drift did not read (a FIFO, a link, no
    # permission): what was recorded of them keeps its last value, never read as removed
    unread_sources: list[str] = field(default_factory=list)
