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
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from drift.collectors.flags import PYTHON, flag_words
from drift.shell.patterns import ELSE, feasible, from_json, is_literal, literal, matches
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
    through: str | None = None  # a live flag the caller passed, through this word (`"$@"`)

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
            if spot.through:
                return f"passed by the caller through {spot.through} at {spot}{taken}"
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
            # a flag's value from a line drift did not follow: that line, not the flag's
            where = (p["file"], p["line"])
            if isinstance(p.get("value_line"), int):
                where = (str(p.get("value_file") or p["file"]), p["value_line"])
            unread.setdefault(where, Spot(*where))
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


def passed_flags(
    exec_fact: StoredVersion | None, argv: Sequence[str], known: Collection[str] = ()
) -> dict[str, Attribution]:
    """Live flags a word the script does not write may be (``"$@"``, ``$EXTRA``), by name.

    The exec fact keeps, word by word, each command line the script may run
    when one of its words may be such a flag (``argv``, see
    `drift.collectors.script_facts`). Each command line that can be the
    live argv is aligned with it in every way it can: a written word is one
    live word equal to it, a choice one word equal to one of its values, a
    spread word any number of words. A live flag's word is then held by the
    script words some alignment gives it; the lines of those words are where
    it can come from, one line a claim. A flag that only written words can
    hold is left to its flag fact.
    """
    listed = exec_fact.provenance.get("argv") if exec_fact is not None else None
    if not isinstance(listed, list) or exec_fact is None or exec_fact.secret:
        return {}
    occurrences: dict[str, list[int]] = {}
    for name, index, _value, _inline in flag_words(range(len(argv)), lambda i: argv[i]):
        occurrences.setdefault(name, []).append(index)
    held: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for command in listed:
        if not isinstance(command, dict) or not isinstance(command.get("file"), str):
            continue
        if not _possible_with(command, known):
            continue
        cover = _alignment(command.get("words"), argv, known)
        if cover is None:
            continue
        for name, indexes in occurrences.items():
            for index in indexes:
                held.setdefault(name, []).extend((alt, command["file"]) for alt in cover[index])
    # A line drift did not follow (a file sourced from a path it cannot know) may have set
    # the variable or the arguments a word expands: then the caller is not sure to be the source.
    unread = tuple(
        Spot(u["file"], u["line"])
        for u in exec_fact.provenance.get("unread") or ()
        if isinstance(u, dict) and isinstance(u.get("file"), str) and isinstance(u.get("line"), int)
    )
    out: dict[str, Attribution] = {}
    for name, alts in held.items():
        if all("via" not in a and "kind" not in a for a, _ in alts):
            continue  # written where the flag fact says
        found = _held_by(alts)
        if unread and any("via" in a for a, _ in alts):
            found = replace(found, unsure=True, unread=unread)
        out[name] = found
    return out


def _held_by(alts: list[tuple[dict[str, Any], str]]) -> Attribution:
    """Where a live flag comes from, given every script word that can hold it."""
    vias: dict[tuple[str, int], set[str | None]] = {}
    unsure = False
    for alt, file in alts:
        unsure = unsure or alt.get("kind") == "unknown" or not isinstance(alt.get("line"), int)
        if isinstance(alt.get("line"), int):
            where = (alt["file"] if isinstance(alt.get("file"), str) else file, alt["line"])
            via = alt.get("via") if isinstance(alt.get("via"), str) else None
            vias.setdefault(where, set()).add(via)
    # "passed by the caller through ..." only where that one word of the line can hold it
    spots = {
        where: Spot(*where, through=next(iter(v)) if len(v) == 1 else None)
        for where, v in vias.items()
    }
    ordered = sorted(spots.values(), key=lambda s: (s.file, -s.line))
    return Attribution(tuple(ordered), unsure=unsure)


_Word = tuple[list[dict[str, Any]], bool]
"""A stored script word: its values and whether it may be any number of words."""


def _alignment(
    words: Any, argv: Sequence[str], known: Collection[str]
) -> list[list[dict[str, Any]]] | None:
    """For each live word, the script words' values that can give it; None if none aligns.

    The first script word is the program: the live argv may name it by its
    path, or run it as a script of a Python interpreter (a console script).
    """
    if not isinstance(words, list) or not words or not argv:
        return None
    parsed = [_word_alts(w, known) for w in words]
    fields = [w for w in parsed if w is not None]
    if len(fields) != len(parsed):
        return None
    n, m = len(fields), len(argv)
    ends = _program_ends(fields[0], argv)
    first = 0 if ends is None else 1
    forward = _forward(fields, argv, first, ends or set())
    if not forward[n][m]:
        return None
    backward = _backward(fields, argv, first)
    cover: list[list[dict[str, Any]]] = [[] for _ in range(m)]
    for i in range(first, n):
        alts, spread = fields[i]
        for j in range(m):
            if not forward[i][j]:
                continue
            if not spread:
                if backward[i + 1][j + 1]:
                    cover[j].extend(a for a in alts if matches(from_json(a["match"]), argv[j]))
                continue
            # a spread word from j holds every word up to the last end the rest can follow
            last = max((k for k in range(j, m + 1) if backward[i + 1][k]), default=j)
            for k in range(j, last):
                cover[k].extend(a for a in alts if a not in cover[k])
    return cover


def _forward(
    fields: list[_Word], argv: Sequence[str], first: int, ends: set[int]
) -> list[list[bool]]:
    """[i][j]: the first i script words can give the first j live words."""
    m = len(argv)
    forward = [[False] * (m + 1) for _ in fields] + [[False] * (m + 1)]
    forward[0][0] = first == 0
    for end in ends:
        forward[1][end] = True
    for i in range(first, len(fields)):
        alts, spread = fields[i]
        for j in range(m + 1):
            if not forward[i][j]:
                continue
            if spread:
                forward[i + 1][j:] = [True] * (m + 1 - j)
                break
            if j < m and _fits(alts, argv[j]):
                forward[i + 1][j + 1] = True
    return forward


def _backward(fields: list[_Word], argv: Sequence[str], first: int) -> list[list[bool]]:
    """[i][j]: the script words from i can give the live words from j."""
    m = len(argv)
    backward = [[False] * (m + 1) for _ in fields] + [[False] * m + [True]]
    for i in range(len(fields) - 1, first - 1, -1):
        alts, spread = fields[i]
        later = False
        for j in range(m, -1, -1):
            later = later or backward[i + 1][j]
            if spread:
                backward[i][j] = later
            else:
                backward[i][j] = j < m and backward[i + 1][j + 1] and _fits(alts, argv[j])
    return backward


def _fits(alts: list[dict[str, Any]], text: str) -> bool:
    return any(matches(from_json(a["match"]), text) for a in alts)


def _word_alts(word: Any, known: Collection[str]) -> _Word | None:
    """A stored script word: its values (those the known branches allow) and whether it spreads."""
    if not isinstance(word, dict) or not isinstance(word.get("alts"), list):
        return None
    alts = [
        a
        for a in word["alts"]
        if isinstance(a, dict) and isinstance(a.get("match"), list) and _possible_with(a, known)
    ]
    return alts, bool(word.get("spread"))


def _program_ends(
    program: tuple[list[dict[str, Any]], bool], argv: Sequence[str]
) -> set[int] | None:
    """Where the program's live words end, when the script writes it; None when it does not.

    ``python3`` is ``/usr/bin/python3`` live; ``vllm`` may run as
    ``python3 /usr/local/bin/vllm``.
    """
    alts, spread = program
    names = {literal(from_json(a["match"])) for a in alts}
    if spread or None in names:
        return None
    bases = {os.path.basename(n) for n in names if n}
    ends: set[int] = set()
    if os.path.basename(argv[0]) in bases:
        ends.add(1)
    if len(argv) > 1 and PYTHON.fullmatch(os.path.basename(argv[0])):
        if os.path.basename(argv[1]) in bases:
            ends.add(2)
    return ends


def either(found: Attribution | None, passed: Attribution | None) -> Attribution | None:
    """A flag fact's answer beside where the live argv places the flag's word.

    Both name the same one line: the flag fact's answer (it knows the
    value's line too). Otherwise every line either names.
    """
    if passed is None:
        return found
    if found is None:
        return passed
    one, other = found.single, passed.single
    if one is not None and other is not None and (one.file, one.line) == (other.file, other.line):
        return found
    spots = {(s.file, s.line): s for s in (*passed.spots, *found.spots)}
    return Attribution(
        tuple(sorted(spots.values(), key=lambda s: (s.file, -s.line))),
        caller=found.caller,
        unsure=found.unsure or passed.unsure,
        unread=found.unread,
    )


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
