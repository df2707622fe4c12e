"""Which script line gave a live value: the script's possibilities matched against the process.

A script fact (``export:NAME``, ``flag:--x``) records every value the
script may give, each with its file, line and branch (see
`drift.collectors.scripts`). The live process is the truth that picks
between them: the lines whose value can equal the live one remain. An exact
literal beats a value with unknown parts (``$(cmd)``, the caller's value);
a line drift could not follow (an unreadable sourced file) that may have
set anything keeps the answer unsure. One line left is a claim ("from
decode.sh:12"); several are named as candidates; none is "source unknown".
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from drift.shell.patterns import ELSE, feasible, from_json, is_literal, matches
from drift.store.query import StoredVersion

K = TypeVar("K")


@dataclass(frozen=True)
class Spot:
    """One line a value may come from, and the branch it sits under."""

    file: str
    line: int
    when: str | None = None
    value: str | None = None  # FILE:LINE of a flag's value when another line wrote it
    given: bool = False  # the value the script was given, kept by this line (`${X:=d}`)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Attribution:
    """The lines a live value can have come from, most specific first.

    `caller`: the value may also be the one the script was given (it
    inherits it); `unsure`: a line drift could not follow may have set it.
    """

    spots: tuple[Spot, ...]
    caller: bool = False
    unsure: bool = False
    exact: bool = False  # the value is written literally at those lines
    held: tuple[str, ...] = ()  # branch conditions under which every remaining line runs
    unread: tuple[Spot, ...] = ()  # the lines drift could not follow that may have set it

    @property
    def single(self) -> Spot | None:
        """The one line the evidence singles out, if it does."""
        if len(self.spots) == 1 and not self.caller and not self.unsure:
            return self.spots[0]
        return None

    def words(self) -> str:
        """The attribution as the report says it."""
        spot = self.single
        if spot is not None:
            taken = f" (branch taken: {spot.when})" if spot.when else ""
            given = " (the value the service was started with)" if spot.given else ""
            return f"from {spot}{given}{taken}"
        names = [str(s) for s in self.spots]
        if self.caller:
            names.append("the value the script was given")
        if self.unsure:
            if self.unread:
                names += [f"set by {s} (not followed)" for s in self.unread]
            else:
                names.append("a line drift could not follow")
        if not self.spots and self.unsure and not self.caller:
            return "unsure: perhaps " + ("" if self.unread else "from ") + ", ".join(names)
        if not self.spots and self.caller:
            return "inherited: not set by the script (from the unit or the shell that started it)"
        if not self.spots:
            return "the same value"
        return "one of " + ", ".join(names)


def possibilities(version: StoredVersion) -> list[dict[str, Any]]:
    """The values a script fact may have, each with its file and line."""
    listed = version.provenance.get("possible")
    if isinstance(listed, list):
        return [p for p in listed if isinstance(p, dict)]
    if version.value is None:
        return []
    line = version.provenance.get("line")
    file = version.provenance.get("file")
    if not isinstance(line, int) or not isinstance(file, str):
        return [{"match": [version.value]}]  # a value without a line (a unit setting)
    single: dict[str, Any] = {"file": file, "line": line, "match": [version.value]}
    for key in ("conds", "when", "value_line", "value_file"):
        if key in version.provenance:
            single[key] = version.provenance[key]
    return [single]


def attribute(
    script: StoredVersion | None,
    live: StoredVersion | None,
    known: Collection[str] = (),
) -> Attribution | None:
    """Where in the script the live value came from; None if no possibility can equal it.

    `known` are branch conditions that held in this run (learnt from other
    values of the same process): possibilities on the other side of them
    are left out.
    """
    if script is None or live is None or live.value is None:
        return None
    if script.secret or live.secret:
        return _attribute_secret(script, live, known)
    found: list[tuple[dict[str, Any], bool]] = []
    for possible in possibilities(script):
        match = possible.get("match")
        if not isinstance(match, list) or not _possible_with(possible, known):
            continue
        pattern = from_json(match)
        if matches(pattern, live.value):
            found.append((possible, is_literal(pattern)))
    if not found:
        return None
    unsure = any(p.get("kind") == "unknown" for p, _ in found)
    # The caller's value at no line of the script can be anything, so it can
    # be the live value too: the answer then stays unsure, literal or not.
    caller = any(p.get("kind") == "caller" and "line" not in p for p, _ in found)
    exact = [p for p, literal in found if literal and p.get("kind") != "caller"]
    chosen = [p for p, _ in found] if unsure or caller or not exact else exact
    spots: dict[tuple[str, int], Spot] = {}
    unread: dict[tuple[str, int], Spot] = {}
    held: set[str] | None = None
    for p in chosen:
        kind = p.get("kind")
        if kind == "unknown" and isinstance(p.get("file"), str) and isinstance(p.get("line"), int):
            unread.setdefault((p["file"], p["line"]), Spot(p["file"], p["line"]))
        if kind == "unknown" or (kind == "caller" and "line" not in p):
            continue
        file, line = p.get("file"), p.get("line")
        if isinstance(file, str) and isinstance(line, int):
            when = p.get("when") if isinstance(p.get("when"), str) else None
            value = _value_spot(p, file)
            spot = spots.get((file, line))
            if spot is not None and spot.when != when:
                when = None  # two branches on one line give this value
            if spot is not None and spot.value != value:
                value = None
            given = kind == "caller" and (spot is None or spot.given)
            spots[(file, line)] = Spot(file, line, when, value, given)
            conds = set(_conds(p))
            held = conds if held is None else held & conds
    ordered = sorted(spots.values(), key=lambda s: (s.file, -s.line))
    return Attribution(
        tuple(ordered),
        caller=caller,
        unsure=unsure,
        exact=bool(exact) and not unsure,
        held=tuple(sorted(held or ())),
        unread=tuple(unread.values()),
    )


def branches_from_env(exec_fact: StoredVersion | None, env: Mapping[str, str]) -> set[str]:
    """The branch conditions the live environment decides.

    The exec fact lists tests on variables the script was given and never
    sets (``[ "$ROLE" = prefill ]``); the process inherited them, so its
    environment says how each went: the condition, or its ``else of``.
    """
    tests = exec_fact.provenance.get("tests") if exec_fact is not None else None
    if not isinstance(tests, dict) or exec_fact is None or exec_fact.secret:
        return set()
    out: set[str] = set()
    for cond, test in tests.items():
        if not isinstance(test, dict) or not isinstance(test.get("var"), str):
            continue
        result = _run_test(test, env.get(test["var"]))
        if result is not None:
            out.add(cond if result else ELSE + cond)
    return out


def _run_test(test: Mapping[str, Any], value: str | None) -> bool | None:
    default = test.get("default")
    if isinstance(default, str) and not value:
        value = default
    text = value or ""
    op = test.get("op")
    if op == "-z":
        result = text == ""
    elif op == "-n":
        result = text != ""
    elif op in ("==", "!=") and isinstance(test.get("value"), str):
        wanted = test["value"]
        same = fnmatch.fnmatchcase(text, wanted) if test.get("glob") else text == wanted
        result = same if op == "==" else not same
    else:
        return None
    return not result if test.get("negate") else result


def attribute_together(
    pairs: Mapping[K, tuple[StoredVersion | None, StoredVersion | None]],
    known: Collection[str] = (),
) -> dict[K, Attribution | None]:
    """Attribute a process's values together: a value that singles out a branch decides it.

    When ``CUDA_VISIBLE_DEVICES=4,5,6,7`` can only come from the else branch
    of ``if [ "$ROLE" = prefill ]``, a value both branches give
    (``NCCL_IB_DISABLE=0``) came from the else branch too. Conditions learnt
    this way are applied until nothing more is learnt.
    """
    known = set(known)
    out: dict[K, Attribution | None] = {}
    for _round in range(4):
        out = {key: attribute(script, live, known) for key, (script, live) in pairs.items()}
        learnt = set(known)
        for found in out.values():
            if found is not None and found.single is not None:
                learnt.update(found.held)
        if learnt == known or not feasible(learnt):
            break
        known = learnt
    return out


def _value_spot(possible: Mapping[str, Any], file: str) -> str | None:
    line = possible.get("value_line")
    if not isinstance(line, int):
        return None
    value_file = possible.get("value_file")
    return f"{value_file if isinstance(value_file, str) else file}:{line}"


def _conds(possible: Mapping[str, Any]) -> list[str]:
    conds = possible.get("conds")
    if isinstance(conds, list):
        return [c for c in conds if isinstance(c, str)]
    return []


def _possible_with(possible: Mapping[str, Any], known: Collection[str]) -> bool:
    return not known or feasible([*_conds(possible), *known])


def _attribute_secret(
    script: StoredVersion, live: StoredVersion, known: Collection[str] = ()
) -> Attribution | None:
    """Secrets are stored as keyed digests: a value compares only where it is written literally."""
    if not (script.secret and live.secret):
        return None
    listed = script.provenance.get("possible")
    spots: dict[tuple[str, int], Spot] = {}
    if isinstance(listed, list):
        for p in listed:
            if not isinstance(p, dict) or p.get("digest") != live.value:
                continue
            if not _possible_with(p, known):
                continue
            file, line = p.get("file"), p.get("line")
            if isinstance(file, str) and isinstance(line, int):
                spots[(file, line)] = Spot(file, line, p.get("when"))
        unsure = any(isinstance(p, dict) and p.get("kind") == "unknown" for p in listed)
        if not spots:
            return None
        return Attribution(tuple(spots.values()), unsure=unsure, exact=not unsure)
    if script.value != live.value:
        return None
    line, file = script.provenance.get("line"), script.provenance.get("file")
    if isinstance(line, int) and isinstance(file, str):
        return Attribution((Spot(file, line, script.provenance.get("when")),), exact=True)
    return Attribution((), exact=True)
