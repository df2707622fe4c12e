"""Which script line gave a live value: the script's possibilities matched against the process.

A script fact (``export:NAME``, ``flag:--x``) records every value the
script may give, each with its file, line and branch (see
`drift.collectors.scripts`). The live process is the truth that picks
between them: the lines whose value can equal the live one remain. An exact
literal beats a value with unknown parts (``$(cmd)``, the caller's value);
a line drift could not follow (an unreadable sourced file) that may have
set anything keeps the answer unsure. One line left is a claim ("from
decode.sh:12"); several are named as candidates; none is "source unknown".
One idea, kept whole past 500 lines: matching a live value to the script's
possibilities, for variables, flags and the exec line alike.
"""

from __future__ import annotations

import fnmatch
import os
import re
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


# `${NAME:-8}` (or `-`, `:=`, `=`): the caller's value, else the default written inside.
_DEFAULTED = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=](?P<default>[^{}]*)\}")


def with_default(version: StoredVersion) -> str | None:
    """`8 (default of ${TP:-8})` for a script value that is the caller's `${TP:-8}` or its
    default 8, stored as the choice `${TP:-8} | 8`; None for any other value.

    Read from the possibilities, not the text: a script may hold `'${TP:-8} | 8'` literally.
    """
    if version.value is None or version.secret:
        return None
    matches = [p.get("match") for p in possibilities(version)]
    if len(matches) != 2:
        return None
    holes = [str(m[0][0]) for m in matches if isinstance(m, list) and _one_hole(m)]
    words = [m[0] for m in matches if isinstance(m, list) and len(m) == 1 and isinstance(m[0], str)]
    if len(holes) != 1 or len(words) != 1 or version.value != f"{holes[0]} | {words[0]}":
        return None
    found = _DEFAULTED.fullmatch(holes[0])
    if found is None or found["default"] != words[0]:
        return None
    return f"{words[0]} (default of {holes[0]})"


def _one_hole(match: object) -> bool:
    """A pattern that is one unknown value (`[["${TP:-8}"]]`), nothing around it."""
    return (
        isinstance(match, list)
        and len(match) == 1
        and isinstance(match[0], list)
        and len(match[0]) == 1
        and isinstance(match[0][0], str)
    )


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
    # The command line that runs singles out its branch most surely (its words are the
    # script's own): the other values are read on that branch. A value no possibility
    # of that branch gives is not the script's there (a `conda run` activation, the
    # caller), never the line of another branch that could give it.
    for key, (script, live) in pairs.items():
        if _is_exec(key):
            launched = attribute(script, live, known)
            if launched is not None and launched.single is not None:
                if feasible(known | set(launched.held)):
                    known |= set(launched.held)
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


def _is_exec(key: object) -> bool:
    """Whether a pair's key is a script's exec fact (``"exec"`` or ``(script, "exec")``)."""
    return key == "exec" or (isinstance(key, tuple) and bool(key) and key[-1] == "exec")


def passed_flags(
    exec_fact: StoredVersion | None,
    argv: Sequence[str],
    known: Collection[str] = (),
    env: Mapping[str, str] | None = None,
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
    hold is left to its flag fact. With the live environment `env`, a
    value of the caller's is the one it shows (`_given_by_caller`).
    """
    listed = exec_fact.provenance.get("argv") if exec_fact is not None else None
    if not isinstance(listed, list) or exec_fact is None or exec_fact.secret:
        return {}
    occurrences: dict[str, list[int]] = {}
    for name, index, _value, _inline in flag_words(range(len(argv)), lambda i: argv[i]):
        occurrences.setdefault(name, []).append(index)
    held = _held_words(listed, argv, known, occurrences)
    touched = exec_fact.provenance.get("touched")
    # which flags a word the script does not write may be: read before the caller's values
    # are known (a flag written only where the flag fact says is that fact's)
    passing = {n for n, alts in held.items() if any("via" in a or "kind" in a for a, _ in alts)}
    if env is not None and isinstance(touched, list):
        given = _held_words(_given_by_caller(listed, env, set(touched)), argv, known, occurrences)
        # a flag no command line then holds is left as it was read (the flag fact may lack it)
        held = {n: given.get(n) or held[n] for n in passing}
    # A line drift did not follow (a file sourced from a path it cannot know) may have set
    # the variable or the arguments a word expands: then the caller is not sure to be the source.
    unread = tuple(
        Spot(u["file"], u["line"])
        for u in exec_fact.provenance.get("unread") or ()
        if isinstance(u, dict) and isinstance(u.get("file"), str) and isinstance(u.get("line"), int)
    )
    out: dict[str, Attribution] = {}
    for name, alts in held.items():
        if name not in passing:
            continue  # written where the flag fact says
        found = _held_by(alts)
        if unread and any("via" in a for a, _ in alts):
            found = replace(found, unsure=True, unread=unread)
        out[name] = found
    return out


def _held_words(
    listed: list[Any],
    argv: Sequence[str],
    known: Collection[str],
    occurrences: dict[str, list[int]],
) -> dict[str, list[tuple[dict[str, Any], str]]]:
    """For each live flag, the script words (and their files) some alignment gives it."""
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
    return held


_CALLER_REF = re.compile(r"\$(?:([A-Za-z_]\w*)|\{([A-Za-z_]\w*)(\}|:?[-=].*\}))", re.S)
"""``$X``, ``${X}``, ``${X:-d}``, ``${X-d}``, ``${X:=d}``: the caller's X, or its default."""


_BASH_SETS = frozenset(
    """PATH SHELL TERM PWD OLDPWD SHLVL IFS OPTIND OPTERR HOSTNAME HOSTTYPE OSTYPE MACHTYPE
    PS1 PS2 PS3 PS4 PPID UID EUID GROUPS SHELLOPTS _ COLUMNS LINES HISTFILE HISTSIZE
    HISTFILESIZE MAILCHECK RANDOM SECONDS LINENO EPOCHSECONDS EPOCHREALTIME SRANDOM""".split()
)
"""Variables bash sets itself (its environment or not): their value is not the caller's alone."""


def _given_by_caller(listed: list[Any], env: Mapping[str, str], touched: set[str]) -> list[Any]:
    """The command lines with the caller's values read off the live environment.

    A variable the script never changes holds, all along, what started the
    script gave it, and the process inherits it (inherited variables are
    exported): its live value is that value, and a variable the process
    lacks was not given. ``$X`` is then that text (unset: empty, an
    unquoted one no word at all); ``${X:-d}`` where X was not given is its
    default, a value of its own, so its "the caller's X" value goes.
    """
    out: list[Any] = []
    for command in listed:
        if isinstance(command, dict) and isinstance(command.get("words"), list):
            words = [_word_given(w, env, touched) for w in command["words"]]
            if any(isinstance(w, dict) and w.get("alts") == [] for w in words):
                continue  # a word with no value left: not this run's command line
            command = {**command, "words": [w for w in words if w is not None]}
        out.append(command)
    return out


def _word_given(word: Any, env: Mapping[str, str], touched: set[str]) -> Any:
    """One stored word with the caller's values known (None: an unquoted empty one, no word)."""
    if not isinstance(word, dict) or not isinstance(word.get("alts"), list):
        return word
    alts = [a for a in (_alt_given(a, env, touched) for a in word["alts"]) if a is not None]
    texts = [literal(from_json(a["match"])) for a in alts if isinstance(a, dict)]
    if word.get("spread") and alts and len(texts) == len(alts):
        if all(t == "" for t in texts):
            return None
        if all(t and not re.search(r"\s", t) for t in texts):
            word = {k: v for k, v in word.items() if k != "spread"}  # one word each
    return {**word, "alts": alts}


def _alt_given(alt: Any, env: Mapping[str, str], touched: set[str]) -> Any:
    """One value of a word with the caller's values known; None if it cannot be this run's."""
    if not isinstance(alt, dict) or "via" not in alt or not isinstance(alt.get("match"), list):
        return alt
    parts: list[str] = []
    for part in alt["match"]:
        if isinstance(part, str):
            parts.append(part)
            continue
        text = _caller_value(part[0], env, touched) if isinstance(part, list) and part else None
        if text is None:
            return alt
        if text == "\0":
            return None
        parts.append(text)
    return {**{k: v for k, v in alt.items() if k != "via"}, "match": ["".join(parts)]}


def _caller_value(text: Any, env: Mapping[str, str], touched: set[str]) -> str | None:
    """The caller's value the hole `text` stands for; "\0" if it has none; None if unknown."""
    m = _CALLER_REF.fullmatch(text.strip()) if isinstance(text, str) else None
    name = m and (m.group(1) or m.group(2))
    if not m or not name or name in touched or name in _BASH_SETS or name.startswith("BASH"):
        return None
    tail = m.group(3) or "}"
    given = env.get(name)
    if tail == "}":
        return given or ""
    if given is None or (given == "" and tail.startswith(":")):
        return "\0"  # the default, which another value of the word is
    return given


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
