"""A serve script's facts from its evaluation: each value with every possibility and its line.

`drift.shell.evaluate` walks a script with every value each variable may
have; this module says what that means as facts: one ``export:<NAME>`` per
variable the launched command may receive, ``exec`` (that command) and one
``flag:<name>`` per flag of it. A fact's value shows the possibilities
(``8`` or ``prefill | decode``; what drift cannot know, such as ``$(cmd)``,
as written) and its provenance says where each comes from: ``file`` and
``line`` when one line gives them all, else ``possible``, a list of
``{file, line, text, when, match}`` where ``match`` is the value as a
pattern (`drift.shell.patterns`) and ``when`` the branch it sits under.
Bytes that are not UTF-8 appear as ``\\xNN`` escapes.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from drift.collectors.flags import flag_words
from drift.facts import Fact, storable
from drift.shell.patterns import to_json

if TYPE_CHECKING:
    from drift.shell.values import Field


@dataclass(frozen=True, slots=True)
class Possibility:
    """One value a fact may have and where it comes from."""

    pattern: Any  # drift.shell.patterns.Pattern
    origin: Any  # drift.shell.evaluate.Origin | None
    conds: tuple[str, ...]
    kind: str  # "set", "caller" (the script's caller's value) or "unknown"
    written: str | None = field(default=None, compare=False)  # how the line writes it
    value_origin: Any = None  # a flag's value, when another line wrote it (``--tp "$TP"``)

    def as_json(self) -> dict[str, Any]:
        from drift.shell.patterns import to_json

        out: dict[str, Any] = {"match": to_json(self.pattern)}
        if self.origin is not None:
            out.update(file=self.origin.file, line=self.origin.line, text=self.origin.text)
        if self.conds:
            out["when"] = " and ".join(self.conds)
            out["conds"] = list(self.conds)
        if self.kind != "set":
            out["kind"] = self.kind
        if self.value_origin is not None:
            out.update(_value_spot(self.value_origin, self.origin))
        return out


def script_facts(subject: str, model: Any, where: dict[str, Any]) -> Iterator[Fact]:
    """The export, exec and flag facts of an evaluated script."""
    for name, (possible, exported_at, inherited) in _exports(model).items():
        yield _fact(subject, f"export:{name}", possible, where, exported_at, inherited)
    if model.launches:
        yield _exec_fact(subject, model, where)
        for name, possible in _flags(model).items():
            yield _fact(subject, f"flag:{storable(name)}", possible, where)


def _exports(model: Any) -> dict[str, tuple[list[Possibility], Any, bool]]:
    """name -> (its possibilities, the line that exported it, whether it is only inherited)."""
    from drift.shell.patterns import feasible, is_literal

    envs: list[tuple[dict[str, Any], tuple[str, ...]]] = []
    if model.launches:
        envs = [(launch.env, launch.conds) for launch in model.launches if not launch.cleared]
        envs += [(launch.env, launch.conds) for launch in model.launches if launch.cleared]
    else:
        envs = [(model.exported, ())]
    out: dict[str, tuple[list[Possibility], Any, bool]] = {}
    for env, _conds in envs:
        for name, bindings in env.items():
            if name.startswith("\0"):
                continue
            possible, exported_at, inherited = out.get(name, ([], None, True))
            for b in bindings:
                if not b.exported or b.alts is None:
                    if b.elems is None:
                        continue
                if b.kind == "caller":
                    # The value the script was given: at the line that kept it
                    # (`: "${X:=d}"`), else from no line of the script.
                    possible.append(Possibility(b.alts[0].pattern, b.origin, b.conds, "caller"))
                    exported_at = exported_at or b.export_origin
                    continue
                exported_at = exported_at or b.export_origin
                inherited = False
                alts = b.alts if b.alts is not None else _first_elements(b)
                # One value: shown as evaluated; several from one line (`${TP:-8}`): as written.
                literal = len(alts) == 1 or all(is_literal(a.pattern) for a in alts)
                for alt in alts:
                    conds = tuple(dict.fromkeys(b.conds + alt.conds))
                    if not feasible(conds):
                        continue
                    written = None if literal else b.written
                    value_origin = _written_at(alt, b.origin)
                    possible.append(
                        Possibility(alt.pattern, b.origin, conds, b.kind, written, value_origin)
                    )
            out[name] = (possible, exported_at, inherited)
    _unread_elsewhere(envs, out)
    result: dict[str, tuple[list[Possibility], Any, bool]] = {}
    for name, (possible, exported_at, inherited) in out.items():
        if exported_at is None:
            # Exported only if whoever started the script had exported it: the
            # script itself never says so (`_OLD_VIRTUAL_PATH` of a venv).
            continue
        result[name] = (_unique(possible), exported_at, inherited)
    return result


def _written_at(alt: Any, origin: Any) -> Any:
    """The one other line an exported value's text was written at, if it has one.

    ``export X="${X:-256}"`` after a sourced ``common.env`` set ``X=128``: the line
    exports it, common.env:5 wrote it. None when the value is the line's own (its
    default, a literal) or pieces of it come from several lines.
    """
    origins = {s.origin for s in alt.segs if not s.brk and s.part != ""}
    if len(origins) != 1:
        return None
    only = origins.pop()
    return only if only is not None and only != origin else None


def _unread_elsewhere(
    envs: list[tuple[dict[str, Any], tuple[str, ...]]],
    out: dict[str, tuple[list[Possibility], Any, bool]],
) -> None:
    """A launch whose environment lacks a name another launch has: a line drift did not follow
    on its path (a file the script writes, then sources) may have exported it there."""
    for env, _conds in envs:
        for name, (possible, at, _inherited) in out.items():
            unread = [
                Possibility(b.alts[0].pattern, b.origin, b.conds, "unknown")
                for b in env.get("\0unknown", ())
                if b.alts and name not in env
            ]
            if unread:
                # not only the value the script was given: that line may have set it
                out[name] = (possible + unread, at, False)


def _first_elements(b: Any) -> tuple[Any, ...]:
    """An exported array hands over its first element only."""
    return b.elems[0] if b.elems else ()


def _unique(possible: list[Possibility]) -> list[Possibility]:
    return list(dict.fromkeys(possible))


def _exec_fact(subject: str, model: Any, where: dict[str, Any]) -> Fact:
    from drift.shell.patterns import shown, to_json

    renderings: list[str] = []
    for launch in model.launches:
        variants = launch.written or launch.variants
        if len(variants) == 1 or not launch.source:
            # One command line: its words after quote removal, values known.
            renderings += [shlex.join(shown(f.pattern) for f in v) for v in variants]
        else:
            # Several: as written; the flags tell them apart.
            renderings.append(re.sub(r"^exec(\s+-[acl]+(\s+-a\s+\S+)?)?\s+", "", launch.source))
    value = " | ".join(dict.fromkeys(renderings))
    provenance: dict[str, Any] = dict(where)
    origins = list(dict.fromkeys(launch.origin for launch in model.launches))
    if len(origins) == 1 and not any(launch.unknown for launch in model.launches):
        origin = origins[0]
        provenance.update(file=origin.file, line=origin.line, text=storable(origin.text))
    else:
        # Several launches: each command line as a pattern of the live argv joined by
        # spaces, after the program (a console script runs as `python3 /usr/bin/vllm`).
        provenance["possible"] = [
            _printable_json(
                {
                    "file": launch.origin.file,
                    "line": launch.origin.line,
                    "text": launch.origin.text,
                    "match": to_json(match),
                    **(
                        {"when": " and ".join(launch.conds), "conds": list(launch.conds)}
                        if launch.conds
                        else {}
                    ),
                    # a command drift cannot read: it may be what launched anything
                    **({"kind": "unknown"} if launch.unknown else {}),
                }
            )
            for launch in model.launches
            for variant in launch.variants
            for match in _argv_patterns(variant)
        ]
    argv = _argv_words(model)
    if argv:
        # Words the script does not write ("$@", $EXTRA) that a live flag may be: the
        # analysis places such a flag by aligning the live argv with these command lines.
        provenance["argv"] = argv
    if argv and model.touched is not None:
        # the names the script may change: any other the process lacks, the caller did not set
        provenance["touched"] = model.touched
    unread = _unread_lines(model)
    if unread:
        # Lines drift did not follow (a conda hook, a file not there yet) that may have
        # exported anything: a live variable no line sets may come from them.
        provenance["unread"] = unread
    if model.tests:
        # Tests on variables the service inherits: its live environment says which way they went.
        provenance["tests"] = {storable(c): t for c, t in model.tests.items()}
    hows = {launch.how for launch in model.launches}
    if "exec" not in hows:
        provenance["via"] = "last command (no exec)"
    if "background" in hows:
        provenance["background"] = True
    conds = {launch.conds for launch in model.launches}
    if len(conds) == 1 and (only := conds.pop()):
        provenance["when"] = " and ".join(only)
    return Fact(subject, "exec", storable(value), provenance)


def _argv_words(model: Any) -> list[dict[str, Any]]:
    """Every command line the launches may run, word by word, if one word may be a flag unwritten.

    Each word lists its values (``alts``: a pattern, its line and, for a
    value the script was given or drift cannot know, ``via`` or ``kind``)
    and whether it may be any number of words (``spread``). Empty when every
    flag is written at a line (the flag facts say it all), when a launch
    cannot be read, or when its command lines were too many to keep: a
    command line left out could be the one that ran.
    """
    from drift.shell.patterns import feasible
    from drift.shell.values import MAX_VARIANTS

    launches = model.launches
    if any(launch.unknown or len(launch.variants) >= MAX_VARIANTS for launch in launches):
        return []
    if not any(_open_word(f) for launch in launches for v in launch.variants for f in v):
        return []
    out: list[dict[str, Any]] = []
    for launch in launches:
        for variant in launch.variants:
            conds = tuple(dict.fromkeys([*launch.conds, *(c for f in variant for c in f.conds)]))
            if not feasible(conds):
                continue
            entry: dict[str, Any] = {
                "file": launch.origin.file,
                "line": launch.origin.line,
                "words": [_word_json(f, launch.origin.file) for f in variant],
            }
            if conds:
                entry["conds"] = list(conds)
            out.append(_printable_json(entry))
    return out


def _open_word(f: Field) -> bool:
    """True if a word may be a flag that no line writes as such (``"$@"``, ``$EXTRA``)."""
    return f.spread or _may_be_unwritten_flag(f.pattern)


def _may_be_unwritten_flag(p: Any) -> bool:
    from drift.shell.patterns import Hole

    head = p[0] if p else ""
    if isinstance(head, str):
        # A written word is a flag only as written (a flag fact has it), unless a hole
        # finishes its name (`-$OPT`).
        return head.startswith("-") and "=" not in head and len(p) > 1
    if isinstance(head, Hole) and head.kind == "choice":
        return any(_may_be_unwritten_flag(option[0]) for option in head.options)
    return True


def _word_json(f: Field, file: str) -> dict[str, Any]:
    """One word of a command line for the alignment with a live argv (see _argv_words)."""
    from drift.shell.patterns import Hole

    options: list[tuple[Any, Any, tuple[str, ...]]] = [(f.pattern, f.origin, ())]
    if _is_choice(f.pattern):
        options = [(o[0], o[1] or f.origin, o[2]) for o in f.pattern[0].options]  # type: ignore[union-attr]
    alts: list[dict[str, Any]] = []
    for p, origin, conds in options:
        alt: dict[str, Any] = {"match": to_json(p)}
        if origin is not None:
            alt["line"] = origin.line
            if origin.file != file:
                alt["file"] = origin.file
        if conds:
            alt["conds"] = list(conds)
        holes = [part for part in p if isinstance(part, Hole)]
        head = p[0] if p else ""
        written = isinstance(head, str) and head.startswith("-") and (len(p) == 1 or "=" in head)
        if holes and not written:
            if all(h.kind in ("args", "caller") for h in holes):
                alt["via"] = " ".join(dict.fromkeys(h.text for h in holes))
            else:
                alt["kind"] = "unknown"
        alts.append(alt)
    out: dict[str, Any] = {"alts": alts}
    if f.spread:
        out["spread"] = True
    return out


def _unread_lines(model: Any) -> list[dict[str, Any]]:
    """The lines drift did not follow that may have exported anything the launch receives."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for launch in model.launches:
        for b in launch.env.get("\0unknown", ()):
            if b.origin is not None:
                out.setdefault(
                    (b.origin.file, b.origin.line),
                    {"file": b.origin.file, "line": b.origin.line, "text": storable(b.origin.text)},
                )
    return list(out.values())


def _flags(model: Any) -> dict[str, list[Possibility]]:
    """flag name -> its possibilities, over every launch and command line the script may run."""
    from drift.shell.patterns import Hole, feasible, unread
    from drift.shell.values import MAX_VARIANTS

    out: dict[str, list[Possibility]] = {}
    for launch in model.launches:
        for variant in launch.variants:
            if not feasible([*launch.conds, *(c for f in variant for c in f.conds)]):
                continue  # its words come from both sides of one test: no run has them all
            for name, occurrences in _variant_flags(launch, variant).items():
                for value_pattern, origin, value_origin, conds in occurrences:
                    out.setdefault(name, []).append(
                        Possibility(
                            value_pattern,
                            origin,
                            conds,
                            # a value a line drift could not read may have set
                            "unknown" if unread(value_pattern) else "set",
                            value_origin=value_origin if value_origin != origin else None,
                        )
                    )
    for launch in model.launches:
        if launch.unknown or len(launch.variants) >= MAX_VARIANTS:
            # A command drift cannot read, or one with more command lines than drift keeps
            # (a line left out may be the one that ran), may pass any flag: none is sure
            # to come from a line.
            for possible in out.values():
                possible.append(Possibility((Hole("?"),), launch.origin, launch.conds, "unknown"))
    return {name: _unique(possible) for name, possible in out.items()}


_Occurrence = tuple[Any, Any, Any, tuple[str, ...]]
"""One value a flag may have: (value pattern, where the flag is written, where its value is,
the conditions it sits under)."""


def _variant_flags(launch: Any, variant: Any) -> dict[str, list[_Occurrence]]:
    """The flags of one command line a launch may run, each with the values it may have.

    A repeated flag has one value: its values joined, as parse_flags gives the live ones.
    """
    words = flag_words(variant, _field_text)
    counts: dict[str, int] = {}
    for flag_name, *_rest in words:
        counts[flag_name] = counts.get(flag_name, 0) + 1
    seen: dict[str, list[_Occurrence]] = {}
    for name, word, value, inline in words:
        occurrences = _occurrences(launch.conds + word.conds, word, value, inline)
        if occurrences:
            seen.setdefault(name, []).extend(occurrences)
    return {
        name: _joined(occurrences) if counts[name] > 1 else occurrences
        for name, occurrences in seen.items()
    }


def _field_text(f: Field) -> str | None:
    """A word's text for flag_words: None where it is not known, so it never names a flag."""
    if f.spread or not all(isinstance(p, str) for p in f.pattern):
        # An unknown word never names a flag; `--x=$V` still does.
        head = f.pattern[0] if f.pattern and not f.spread else None
        if isinstance(head, str) and head.startswith("-") and "=" in head:
            return head
        return None
    return "".join(f.pattern)  # type: ignore[arg-type]


def _occurrences(
    conds: tuple[str, ...], word: Field, value: Field | None, inline: str | None
) -> list[_Occurrence]:
    """The values of one flag as written (`conds`: those of its launch and its word).

    A flag is where its name was written (the exec line, the array element,
    the $ARGS assignment); its value may come from elsewhere. One value word
    with several values gives each as a possibility of its own.
    """
    from drift.shell.patterns import Hole, feasible, pattern

    if inline is not None:
        head = word.pattern[0]
        value_pattern = pattern(head.partition("=")[2], *word.pattern[1:])  # type: ignore[union-attr]
        return [(value_pattern, word.origin, word.origin, tuple(dict.fromkeys(conds)))]
    if value is None:
        return [(("",), word.origin, word.origin, tuple(dict.fromkeys(conds)))]
    if _is_choice(value.pattern):
        out: list[_Occurrence] = []
        for option, origin, option_conds in value.pattern[0].options:  # type: ignore[union-attr]
            both = tuple(dict.fromkeys(conds + value.conds + option_conds))
            if feasible(both):
                # the caller's value (`${MAX_REQ:-1024}` given MAX_REQ) was written at no line
                given = origin or (None if _given(option) else value.origin)
                out.append((option, word.origin, given, both))
        return out
    value_pattern = (
        value.pattern
        if not value.spread
        else (Hole(value.pattern[0].text if value.pattern else "?"),)  # type: ignore[union-attr]
    )
    value_origin = None if _given(value.pattern) else value.origin
    return [(value_pattern, word.origin, value_origin, tuple(dict.fromkeys(conds + value.conds)))]


def _given(value: Any) -> bool:
    """A value that is only what the caller gave (its variables, its arguments): no line of
    the script wrote it, so none is named as where the value came from."""
    from drift.shell.patterns import Hole

    return bool(value) and all(
        isinstance(part, Hole) and part.kind in ("caller", "args") for part in value
    )


def _joined(occurrences: list[_Occurrence]) -> list[_Occurrence]:
    """A repeated flag's values as one: joined with newlines, under all their conditions."""
    from drift.shell.patterns import pattern

    parts: list[Any] = []
    for k, occurrence in enumerate(occurrences):
        if k:
            parts.append("\n")
        parts.extend(occurrence[0])
    last = occurrences[-1]
    conds = tuple(dict.fromkeys(c for o in occurrences for c in o[3]))
    return [(pattern(*parts) or ("",), last[1], last[2], conds)]


def _is_choice(p: Any) -> bool:
    from drift.shell.patterns import Hole

    return len(p) == 1 and isinstance(p[0], Hole) and p[0].kind == "choice"


def _fact(
    subject: str,
    key: str,
    possible: list[Possibility],
    where: dict[str, Any],
    exported_at: Any = None,
    inherited: bool = False,
) -> Fact:
    """One fact from its possibilities: the value shows them, the provenance says where."""
    from drift.shell.patterns import is_literal, shown

    provenance: dict[str, Any] = dict(where)
    if inherited:
        # `export NAME` of a variable the script never sets: whatever it was given.
        value = ""
        provenance["inherited"] = True
        if exported_at is not None:
            provenance.update(
                file=exported_at.file, line=exported_at.line, text=storable(exported_at.text)
            )
            # Any live value is the one the service was started with, exported here.
            name = key.removeprefix("export:")
            provenance["possible"] = [
                {
                    "file": exported_at.file,
                    "line": exported_at.line,
                    "text": storable(exported_at.text),
                    "match": [[f"${name}"]],
                    "kind": "caller",
                }
            ]
        return Fact(subject, key, value, provenance)
    own = [p for p in possible if p.kind == "set"]
    value = " | ".join(
        dict.fromkeys(
            storable(p.written if p.written is not None else shown(p.pattern))
            for p in own or possible
        )
    )
    origins = list(dict.fromkeys(p.origin for p in possible if p.kind != "caller"))
    if len(origins) == 1 and origins[0] is not None:
        origin = origins[0]
        provenance.update(file=origin.file, line=origin.line, text=storable(origin.text))
        values = {p.value_origin for p in possible if p.kind != "caller"}
        if len(values) == 1 and (value_origin := values.pop()) is not None:
            provenance.update(_value_spot(value_origin, origin))
        whens = {p.conds for p in possible if p.kind != "caller"}
        if len(whens) == 1 and (only := whens.pop()):
            provenance["when"] = storable(" and ".join(only))
            provenance["conds"] = [storable(c) for c in only]
    if len(possible) > 1 or not all(is_literal(p.pattern) for p in possible):
        provenance["possible"] = [_printable_json(p.as_json()) for p in possible]
    if exported_at is not None and exported_at != (origins[0] if len(origins) == 1 else None):
        provenance["exported_at"] = exported_at.line
    return Fact(subject, key, value, provenance)


def _argv_patterns(variant: Any) -> list[Any]:
    """A command line as patterns of its live argv joined by spaces, the program a hole.

    A word of any number of words (``"$@"``) may give none, and then no blank
    either: one pattern for each of them given or not (for up to three such
    words; beyond, only the line with every one given, which then cannot
    match a live argv where one gave none, leaving the launch unpicked).
    """
    from drift.shell.patterns import Hole, pattern

    rest = variant[1:]
    spread = [i for i, f in enumerate(rest) if f.spread]
    choices = [()] if len(spread) > 3 else _subsets(spread)
    out: list[Any] = []
    for empty in choices:
        parts: list[Any] = [Hole("program")]
        for i, field_ in enumerate(rest):
            if i in empty:
                continue
            parts.append(" ")
            parts.extend(field_.pattern if not field_.spread else (Hole("words"),))
        out.append(pattern(*parts))
    return list(dict.fromkeys(out))


def _subsets(items: list[int]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for item in items:
        out += [(*subset, item) for subset in out]
    return out


def _value_spot(value_origin: Any, origin: Any) -> dict[str, Any]:
    """Where a flag's value was written, beside where the flag was: ``value_line`` (and file)."""
    out: dict[str, Any] = {"value_line": value_origin.line}
    if origin is None or value_origin.file != origin.file:
        out["value_file"] = value_origin.file
    return out


def _printable_json(data: Any) -> Any:
    if isinstance(data, str):
        return storable(data)
    if isinstance(data, list):
        return [_printable_json(x) for x in data]
    if isinstance(data, dict):
        return {k: _printable_json(v) for k, v in data.items()}
    return data
