"""The one answer to a name that names nothing on record: a service, host or role given
with --service, --host or --role, or a PATTERN no recorded fact matches.

Filtering by such a name would leave nothing, and nothing reads as "no change":
a false all-clear during an incident. So it is refused, in one line that names
what is on record (and the closest of them, for a typo).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from drift.errors import UnknownNameError

# Names listed in the message before "... and N more": one line, even for a large fleet.
KNOWN_SHOWN = 12


def unknown_name(kind: str, name: str, known: Iterable[str], where: str) -> UnknownNameError:
    """`no service "decoder" on record for host gpu-node-7 (did you mean "decode"?); known:
    decode, prefill, router`, as the error to raise."""
    names = sorted(set(known))
    shown = ", ".join(names[:KNOWN_SHOWN]) or "none"
    if len(names) > KNOWN_SHOWN:
        shown += f" ... and {len(names) - KNOWN_SHOWN:,} more"
    return UnknownNameError(
        f'no {kind} "{name}" on record {where}{did_you_mean(name, names)}; known: {shown}'
    )


def check_known(kind: str, name: str | None, known: Iterable[str], where: str) -> None:
    """Raise unknown_name(...) unless `name` (if given) is one of `known`."""
    names = set(known)
    if name is not None and name not in names:
        raise unknown_name(kind, name, names, where)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean "decode"?)` when one of `known` is close to `name` (case aside),
    else empty."""
    by_folded = {k.casefold(): k for k in sorted(known, reverse=True)}
    close = difflib.get_close_matches(name.casefold(), list(by_folded), n=1)
    return f' (did you mean "{by_folded[close[0]]}"?)' if close else ""


def no_fact_matches(pattern: str, host: str, idents: Iterable[tuple[str, str]]) -> UnknownNameError:
    """`no recorded fact of host H matches "PATTERN"`, with the closest subject or key of
    `idents` for a typo, and how to list what there is."""
    names = {name for ident in idents for name in ident}
    return UnknownNameError(
        f'no recorded fact of host {host} matches "{pattern}"{did_you_mean(pattern, names)}: '
        "`drift show` lists every fact (a plain word matches as a substring, * and ? as a glob)"
    )


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that reads numbers in names as numbers: gpu-node-7 before gpu-node-10."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(name) if part
    )


def natural(names: Iterable[str]) -> list[str]:
    """Names in natural order (numbers as numbers), as host lists are shown."""
    return sorted(names, key=natural_key)
