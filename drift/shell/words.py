"""Values in a shell script: what a word or a variable may hold, and how words expand.

A value is every text it may have (`Alt`, made of `Seg` pieces that keep
the line that wrote them), a variable every value it may hold (`Binding`),
a command line its possible words (`Field`). `Words` expands a tree-sitter
word node into those values the way bash would: quotes, ``${X:-d}`` and
its kin, arrays, ``"$@"``, ``$(dirname ...)``, word splitting.
`drift.shell.evaluate` walks the statements with it.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal

from drift.display import truncated
from drift.shell.patterns import Hole, Part, Pattern, pattern

MAX_ALTERNATIVES = 24
"""Values one word may have before drift stops telling them apart (then: one hole)."""
MAX_VARIANTS = 48
"""Command lines one launch may have (the product of its words' values)."""
MAX_DEPTH = 8
"""Nesting of sourced files, functions and ``bash -c`` strings followed."""
MAX_UNROLL = 16
"""Iterations of a ``for`` loop over known words evaluated one by one."""
MAX_SOURCED_BYTES = 4 << 20

Node = Any  # tree_sitter.Node: typed loosely so this module imports without it for mypy


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a value was written: file, physical line (from 1) and that line's text."""

    file: str
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class Seg:
    """A piece of a word: its text (or hole), where it was written, and whether IFS splits it."""

    part: Part
    origin: Origin | None
    split: bool = False
    brk: bool = False  # a field boundary ("${ARR[@]}", "$@")


_BREAK = Seg("", None, brk=True)


@dataclass(frozen=True, slots=True)
class Alt:
    """One value a word or variable may have, and the conditions under which it has it."""

    segs: tuple[Seg, ...]
    conds: tuple[str, ...] = ()

    @property
    def pattern(self) -> Pattern:
        return pattern(*(s.part for s in self.segs if not s.brk))


@dataclass(frozen=True, slots=True)
class Binding:
    """One value a variable may hold: set at `origin`, inherited from the caller, or unset.

    `alts` is None for an unset variable; `elems` holds an indexed array's
    elements (each with its own alternatives and origins). `kind` is
    "caller" for a value the script was given and "unknown" for one a line
    drift could not follow (an unreadable sourced file, ``eval $x``) may
    have set. `exported` is the variable's export attribute.
    """

    alts: tuple[Alt, ...] | None
    origin: Origin | None
    exported: bool
    conds: tuple[str, ...] = ()
    kind: Literal["set", "caller", "unknown"] = "set"
    elems: tuple[tuple[Alt, ...], ...] | None = None
    export_origin: Origin | None = None
    written: str | None = None  # the value as the line writes it (``${TP:-8}``)


@dataclass(frozen=True, slots=True)
class Field:
    """One word of a command line: its value, the line that produced it, its conditions."""

    pattern: Pattern
    origin: Origin | None
    conds: tuple[str, ...] = ()
    spread: bool = False  # an unknown number of words ("$@", an unquoted unknown value)


@dataclass(frozen=True, slots=True)
class Launch:
    """A command the script may start as the service, and the environment it receives.

    `variants` are the program's possible command lines, wrappers such as
    ``env K=V``, ``numactl ...`` or ``nohup`` removed (`written` keeps them).
    `env` maps each variable the script touched to its possible bindings;
    `cleared` means the command gets nothing else (``env -i``, ``exec -c``).
    """

    variants: tuple[tuple[Field, ...], ...]
    env: dict[str, tuple[Binding, ...]]
    origin: Origin
    conds: tuple[str, ...]
    how: Literal["exec", "background", "foreground"]
    cleared: bool = False
    written: tuple[tuple[Field, ...], ...] = ()  # the command lines with their wrappers
    source: str = ""  # the command as the script writes it, continuation lines joined


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
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)  # see _Evaluator.caller_test


# ---------------------------------------------------------------- the grammar


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


# tree-sitter-bash 0.25's scanner hands the character after "{" (or after "{1..") to C's
# isdigit(), which indexes a 384-entry table with it: a code point past U+FFFF reads far
# outside it and can kill the process (tree-sitter/tree-sitter-bash#337). A serve script
# must not be able to stop every record, so such a text is never handed to it.
_ISDIGIT_CRASH = re.compile(rb"\{[0-9]*(?:\.\.[0-9]*)?[\xf0-\xf7]")


class UnsafeToParse(Exception):
    """Text tree-sitter-bash would crash on; `line` (from 1) is where."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def parse(data: bytes) -> Any:
    """The tree-sitter tree of a bash script; UnsafeToParse if the parser would crash on it."""
    crash = _ISDIGIT_CRASH.search(data)
    if crash is not None:
        raise UnsafeToParse(data.count(b"\n", 0, crash.start()) + 1)
    return _parser().parse(data)


def _text(node: Node) -> str:
    return bytes(node.text).decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------- the state


@dataclass
class _Frame:
    """A function call: its arguments and the variables it made local (with their saved values)."""

    args: tuple[Field, ...] | None
    saved: dict[str, tuple[Binding, ...] | None] = field(default_factory=dict)


@dataclass
class _State:
    """One path through the script (after merges: several paths that agree)."""

    vars: dict[str, tuple[Binding, ...]]
    conds: tuple[str, ...] = ()
    allexport: bool = False
    cwd: str | None = None
    args: tuple[Field, ...] | None = None  # the positional parameters; None: unknown
    frames: tuple[_Frame, ...] = ()
    stop: Literal["exit", "exec", "return"] | None = None
    last: tuple[tuple[int, Launch], ...] = ()  # best server-looking commands on this path

    def fork(self, cond: str | None = None) -> _State:
        return _State(
            dict(self.vars),
            self.conds + ((cond,) if cond else ()),
            self.allexport,
            self.cwd,
            self.args,
            self.frames,
            self.stop,
            self.last,
        )


def _caller(name: str) -> tuple[Binding, ...]:
    """A variable the script never set: whatever its caller gave it, if anything."""
    hole = Seg(Hole("$" + name, "caller"), None, split=True)
    return (Binding((Alt((hole,)),), None, exported=True, kind="caller"),)


def _dedupe(items: Iterable[Any]) -> tuple[Any, ...]:
    listed = items if isinstance(items, tuple) else tuple(items)
    if len(listed) < 2:
        return listed
    return tuple(dict.fromkeys(listed))


def _same_launches(
    items: Iterable[tuple[int, Launch]],
) -> tuple[tuple[int, Launch], ...]:
    """Launch candidates without repeats (the same object reached by two paths)."""
    return tuple({id(launch): (score, launch) for score, launch in items}.values())


def _merge(states: Sequence[_State], base: _State) -> _State:
    """Join paths after a branch: every value any live path may hold."""
    live = [s for s in states if s.stop is None]
    out = base.fork()
    if not live:
        out.stop = "exit"
        out.last = _same_launches(x for s in states for x in s.last)
        return out
    if len(live) == 1:
        only = live[0]
        out.vars, out.allexport, out.cwd, out.args = only.vars, only.allexport, only.cwd, only.args
        out.last = only.last
        out.frames = only.frames
        return out
    # Only names some branch changed need joining; the rest are shared as they are.
    first_vars = live[0].vars
    changed: set[str] = set()
    for s in live[1:]:
        for name, value in s.vars.items():
            if first_vars.get(name) is not value:
                changed.add(name)
        changed.update(name for name in first_vars if name not in s.vars)
    merged = dict(first_vars)
    for name in changed:
        bindings: list[Binding] = []
        before = base.vars.get(name)
        for s in live:
            values = s.vars.get(name)
            if values is None or values is before:
                # Kept through this branch: the value now also says the branch was taken.
                extra = tuple(c for c in s.conds if c not in base.conds)
                values = tuple(
                    replace(b, conds=_dedupe(b.conds + extra)) if extra else b
                    for b in values or _caller(name)
                )
            bindings.extend(values)
        merged[name] = _dedupe(bindings)[-MAX_ALTERNATIVES:]
    out.vars = merged
    out.allexport = any(s.allexport for s in live)
    cwds = {s.cwd for s in live}
    out.cwd = cwds.pop() if len(cwds) == 1 else None
    argses = {s.args for s in live}
    out.args = argses.pop() if len(argses) == 1 else None
    out.last = _same_launches(x for s in live for x in s.last)
    out.frames = live[0].frames
    return out


class Words:
    """Word expansion, mixed into the evaluator: a node in, the values it may have out.

    The evaluator sets the script's path, the file being walked and its
    lines, and the line offset of code given as a string (``bash -c``).
    """

    top: str
    file: str
    offset: int
    lines: dict[str, list[str]]
    origins: dict[tuple[str, int], Origin]
    keep_lines: bool
    touched: set[str]

    def origin(self, node: Node) -> Origin:
        line = node.start_point[0] + 1 + self.offset
        key = (self.file, line)
        found = self.origins.get(key)
        if found is None:
            lines = self.lines.get(self.file) or []
            text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            found = self.origins[key] = Origin(self.file, line, text)
        return found

    def _lookup(self, st: _State, name: str) -> tuple[Binding, ...]:
        return st.vars.get(name) or _caller(name)

    def _resolve(self, text: str | None, st: _State, search: bool = False) -> str | None:
        """An absolute path for `text`, relative to the known working directory.

        Without one (the script's directory is unknown at run time), a relative
        path is taken relative to the script's own folder: services are usually
        started there or cd there first.
        """
        if not text:
            return None
        if text.startswith("~"):
            return None
        if os.path.isabs(text):
            return os.path.normpath(text)
        base = st.cwd or os.path.dirname(os.path.abspath(self.top))
        return os.path.normpath(os.path.join(base, text))

    def _literals(self, node: Node, st: _State) -> set[str] | None:
        """Every text a word may have, if all are known; else None."""
        out: set[str] = set()
        for a in self.alts(node, st):
            p = a.pattern
            if not all(isinstance(x, str) for x in p):
                return None
            out.add("".join(p))  # type: ignore[arg-type]
        return out

    def _literal_word(self, node: Node, st: _State) -> str | None:
        """The one text a word has, if it is known and single."""
        values = self._literals(node, st)
        if values is None or len(values) != 1:
            return None
        return values.pop()

    def fields(self, nodes: Sequence[Node], st: _State) -> list[tuple[Field, ...]]:
        """The command lines a list of words may expand to (each a tuple of fields), capped."""
        variants: list[tuple[Field, ...]] = [()]
        for node in nodes:
            options = [self._split(node, a) for a in self.alts(node, st)]
            options = _merge_options(list(dict.fromkeys(options)) or [()])
            product = [v + o for v in variants for o in options]
            if len(product) > MAX_VARIANTS:
                product = product[:MAX_VARIANTS]
            variants = product
        return variants

    def _split(self, node: Node, alt: Alt) -> tuple[Field, ...]:
        """Word splitting of one alternative: unquoted expansion output splits at blanks."""
        word_origin = self.origin(node)
        fields: list[Field] = []
        current: list[Seg] = []
        started = False  # a field exists even if empty ("" or "$EMPTY" quoted)

        def flush() -> None:
            nonlocal current, started
            if current or started:
                fields.append(_field(current, word_origin, alt.conds))
            current, started = [], False

        for seg in alt.segs:
            if seg.brk:
                flush()
                continue
            if isinstance(seg.part, Hole):
                if seg.split and not current and not started and seg.part.kind != "choice":
                    current.append(seg)
                    # an unquoted unknown alone: any number of words
                    fields.append(
                        Field((seg.part,), seg.origin or word_origin, alt.conds, spread=True)
                    )
                    current = []
                    continue
                current.append(seg)
                continue
            if not seg.split:
                current.append(seg)
                started = True
                continue
            pieces = re.split(r"[ \t\n]+", seg.part)
            for i, piece in enumerate(pieces):
                if i > 0:
                    flush()
                if piece:
                    current.append(Seg(piece, seg.origin))
        flush()
        return tuple(fields)

    def alts(self, node: Node, st: _State) -> list[Alt]:
        """Every value a word node may have, unsplit; pieces keep where they were written."""
        out = self._alts(node, st, quoted=False)
        if len(out) > MAX_ALTERNATIVES:
            return [Alt((Seg(Hole(_text(node)), self.origin(node), split=True),))]
        return out

    def _alts(self, node: Node, st: _State, quoted: bool) -> list[Alt]:
        kind = node.type
        origin = self.origin(node)
        if kind in (
            "word",
            "number",
            "extglob_pattern",
            "regex",
            "special_variable_name",
            "variable_name",
            "heredoc_body",
            "file_descriptor",
        ):
            text = _text(node)
            if kind == "word" and not quoted:
                if text.startswith("~"):
                    head, slash, tail = text.partition("/")
                    return [
                        Alt(
                            (
                                Seg(Hole(head, "caller"), origin),
                                Seg(slash + _unescape(tail), origin),
                            )
                        )
                    ]
                text = _unescape(text)
            return [Alt((Seg(text, origin),))]
        if kind == "raw_string":
            return [Alt((Seg(_text(node)[1:-1], origin),))]
        if kind == "ansi_c_string":
            return [Alt((Seg(_ansi_c(_text(node)[2:-1]), origin),))]
        if kind in ("string", "translated_string"):
            inner = node.named_children[0] if kind == "translated_string" else node
            if kind == "translated_string":
                return self._alts(inner, st, quoted)
            return self._concat(node, st, quoted=True, skip_quotes=True)
        if kind == "string_content":
            return [Alt((Seg(_dq_unescape(_text(node), self.keep_lines), origin),))]
        if kind == "concatenation":
            return self._concat(node, st, quoted=quoted, skip_quotes=False)
        if kind == "simple_expansion":
            return self._expand_name(node, _simple_name(node), None, st, quoted)
        if kind == "expansion":
            return self._expansion(node, st, quoted)
        if kind == "command_substitution":
            return self._substitution(node, st, quoted)
        if kind == "arithmetic_expansion":
            return [Alt((Seg(Hole(_text(node), "command"), origin, split=not quoted),))]
        if kind in ("process_substitution", "brace_expression"):
            return [Alt((Seg(Hole(_text(node), "command"), origin),))]
        if kind == "array":
            return [Alt((Seg(Hole(_text(node)), origin),))]
        return [Alt((Seg(Hole(_text(node)), origin, split=not quoted),))]

    def _concat(self, node: Node, st: _State, quoted: bool, skip_quotes: bool) -> list[Alt]:
        """The pieces of a word one after another, with any source text between them."""
        results: list[Alt] = [Alt(())]
        data = bytes(node.text)
        start = node.start_byte
        cursor = start
        children = list(node.children)
        if skip_quotes and children and children[0].type == '"':
            cursor = children[0].end_byte
            children = children[1:]
        if skip_quotes and children and children[-1].type == '"':
            end = children[-1].start_byte
            children = children[:-1]
        else:
            end = node.end_byte
        origin = self.origin(node)
        for child in children:
            if child.start_byte > cursor:
                gap = data[cursor - start : child.start_byte - start].decode(
                    "utf-8", "surrogateescape"
                )
                gap = _dq_unescape(gap, self.keep_lines) if quoted else _unescape(gap)
                results = [
                    Alt(r.segs + (Seg(gap, origin, split=not quoted),), r.conds) for r in results
                ]
            cursor = child.end_byte
            if not child.is_named:
                text = _text(child)
                if text in ('"', "$"):
                    if text == "$":
                        results = [Alt(r.segs + (Seg("$", origin),), r.conds) for r in results]
                    continue
                results = [Alt(r.segs + (Seg(text, origin),), r.conds) for r in results]
                continue
            options = self._alts(child, st, quoted)
            results = [
                Alt(r.segs + o.segs, _dedupe(r.conds + o.conds)) for r in results for o in options
            ][: MAX_ALTERNATIVES + 1]
        if end > cursor:
            gap = data[cursor - start : end - start].decode("utf-8", "surrogateescape")
            gap = _dq_unescape(gap, self.keep_lines) if quoted else _unescape(gap)
            results = [
                Alt(r.segs + (Seg(gap, origin, split=not quoted),), r.conds) for r in results
            ]
        if quoted:
            # "" is a word even when empty
            results = [r if r.segs else Alt((Seg("", origin),), r.conds) for r in results]
        return results

    def _expand_name(
        self, node: Node, name: str, index: str | None, st: _State, quoted: bool
    ) -> list[Alt]:
        """$NAME, ${NAME}, ${NAME[i]}: the alternatives of its bindings."""
        origin = self.origin(node)
        special = self._special(node, name, index, st, quoted)
        if special is not None:
            return special
        out: list[Alt] = []
        for b in self._lookup(st, name):
            out.extend(self._binding_alts(b, index, quoted, node))
        return out or [Alt((Seg("", origin),))]

    def _binding_alts(self, b: Binding, index: str | None, quoted: bool, node: Node) -> list[Alt]:
        origin = self.origin(node)
        split = not quoted
        if b.kind == "caller":
            return [Alt((Seg(Hole(_text(node), "caller"), None, split=split),), b.conds)]
        if b.elems is not None:
            elems = b.elems
            if index in ("@", "*"):
                out: list[Alt] = [Alt((), b.conds)]
                for i, elem in enumerate(elems):
                    elem = _as_choice(elem)
                    joiner = (
                        (_BREAK,)
                        if (index == "@" and quoted)
                        else ((Seg(" ", None, split=split),) if i else ())
                    )
                    if index == "@" and quoted and i == 0:
                        joiner = ()
                    out = [
                        Alt(
                            o.segs + joiner + tuple(replace(s, split=split) for s in e.segs),
                            _dedupe(o.conds + e.conds),
                        )
                        for o in out
                        for e in elem
                    ][:MAX_ALTERNATIVES]
                return out
            position = 0
            if index is not None:
                try:
                    position = int(index)
                except ValueError:
                    return [Alt((Seg(Hole(_text(node)), origin, split=split),), b.conds)]
            if position >= len(elems):
                return [Alt((Seg("", origin),), b.conds)]
            return [
                Alt(tuple(replace(s, split=split) for s in e.segs), _dedupe(b.conds + e.conds))
                for e in elems[position]
            ]
        if b.alts is None:
            return [Alt((Seg("", b.origin, split=split),), b.conds)]
        if index not in (None, "0", "@", "*"):
            return [Alt((Seg("", origin),), b.conds)]
        return [
            Alt(tuple(replace(s, split=split) for s in a.segs), _dedupe(b.conds + a.conds))
            for a in b.alts
        ]

    def _special(
        self, node: Node, name: str, index: str | None, st: _State, quoted: bool
    ) -> list[Alt] | None:
        origin = self.origin(node)
        if name in ("@", "*"):
            if st.args is None:
                return [
                    Alt((Seg(Hole('"$@"' if name == "@" else "$*", "args"), origin, split=True),))
                ]
            segs: list[Seg] = []
            for i, f in enumerate(st.args):
                if i:
                    segs.append(
                        _BREAK if (name == "@" and quoted) else Seg(" ", None, split=not quoted)
                    )
                if f.spread:
                    segs.append(Seg(f.pattern[0] if f.pattern else "", f.origin, split=True))
                else:
                    segs.extend(Seg(p, f.origin, split=not quoted) for p in f.pattern)
            if not segs:
                return [Alt((Seg("", origin),))] if not (name == "@" and quoted) else [Alt(())]
            return [Alt(tuple(segs))]
        if name.isdigit():
            position = int(name)
            if position == 0:
                return [Alt((Seg(self.top, origin, split=not quoted),))]
            if st.args is None or any(f.spread for f in st.args[:position]):
                return [Alt((Seg(Hole("$" + name, "args"), origin, split=not quoted),))]
            if position > len(st.args):
                return [Alt((Seg("", origin),))]
            f = st.args[position - 1]
            return [Alt(tuple(Seg(p, f.origin, split=not quoted) for p in f.pattern), f.conds)]
        if name in (
            "#",
            "$",
            "!",
            "?",
            "-",
            "_",
            "RANDOM",
            "SECONDS",
            "BASHPID",
            "PPID",
            "EPOCHSECONDS",
            "EPOCHREALTIME",
            "HOSTNAME",
            "UID",
            "EUID",
        ):
            if name not in st.vars:
                return [Alt((Seg(Hole("$" + name, "command"), origin, split=not quoted),))]
        if name == "BASH_SOURCE" and name not in st.vars:
            return [Alt((Seg(self.file, origin),))]
        if name == "LINENO":
            return [Alt((Seg(str(origin.line), origin),))]
        if name == "PWD" and name not in st.vars and st.cwd is not None:
            return [Alt((Seg(st.cwd, origin),))]
        return None

    def _expansion(self, node: Node, st: _State, quoted: bool) -> list[Alt]:
        """${...}: the forms whose value follows from known values; anything else is a hole."""
        origin = self.origin(node)
        children = node.children
        inner = [c for c in children if c.type not in ("${", "}")]
        hole = [Alt((Seg(Hole(_text(node)), origin, split=not quoted),))]
        if not inner:
            return hole
        first = inner[0]
        if first.type in ("#", "!"):
            # ${#X} (a length) and ${!X} (indirection)
            return hole
        index: str | None = None
        if first.type == "subscript":
            name_node = first.child_by_field_name("name")
            index_node = first.child_by_field_name("index")
            if name_node is None:
                return hole
            name = _text(name_node)
            index = _text(index_node) if index_node is not None else None
        elif first.type in ("variable_name", "special_variable_name"):
            name = _text(first)
        else:
            return hole
        rest = inner[1:]
        if not rest:
            return self._expand_name(node, name, index, st, quoted)
        op = rest[0].type
        operand = rest[1:]
        # Operand text, read the same way as a word (quotes removed, expansions known).
        if op in (":-", "-", ":=", "=", ":+", "+", ":?", "?"):
            word_alts = (
                self._operand(node, rest[0], st, quoted) if operand else [Alt((Seg("", origin),))]
            )
            out: list[Alt] = []
            bindings = self._lookup(st, name) if not name.isdigit() and name not in "@*#" else None
            current = self._expand_name(node, name, index, st, quoted) if bindings is None else None
            cases = self._set_cases(bindings, current, op.startswith(":"))
            assign_default = False
            for alt, state in cases(node, index, quoted):
                if op in (":-", "-", ":=", "=", ":?", "?"):
                    if state == "set":
                        out.append(alt)
                    elif state == "unset":
                        if op in (":?", "?"):
                            continue
                        out.extend(Alt(w.segs, _dedupe(alt.conds + w.conds)) for w in word_alts)
                        assign_default = op in (":=", "=")
                    else:  # unknown: either
                        if alt.segs and isinstance(alt.segs[0].part, Hole) and len(alt.segs) == 1:
                            out.append(
                                Alt(
                                    (Seg(Hole(_text(node), "caller"), None, split=not quoted),),
                                    alt.conds,
                                )
                            )
                        else:
                            out.append(alt)
                        if op not in (":?", "?"):
                            out.extend(Alt(w.segs, _dedupe(alt.conds + w.conds)) for w in word_alts)
                            assign_default = assign_default or op in (":=", "=")
                else:  # :+ and +
                    if state in ("set", "unknown"):
                        out.extend(Alt(w.segs, _dedupe(alt.conds + w.conds)) for w in word_alts)
                    if state in ("unset", "unknown"):
                        out.append(Alt((Seg("", origin, split=not quoted),), alt.conds))
            if assign_default and bindings is not None:
                self._assign_default(st, name, bindings, word_alts, origin, op.startswith(":"))
            return list(_dedupe(out)) or [Alt((Seg("", origin),))]
        if op in ("#", "##", "%", "%%"):
            values = self._literals_of(node, name, index, st)
            pat = self._literal_operand(rest[1:], st)
            if values is None or pat is None:
                return hole
            return [Alt((Seg(_trim(v, op, pat), origin, split=not quoted),)) for v in values]
        return hole

    def _operand(self, node: Node, op_node: Node, st: _State, quoted: bool) -> list[Alt]:
        """The word after an operator in ${X:-word}, read from the source text."""
        start = op_node.end_byte
        end = node.children[-1].start_byte if node.children[-1].type == "}" else node.end_byte
        pieces = [c for c in node.children if c.start_byte >= start and c.end_byte <= end]
        results: list[Alt] = [Alt(())]
        cursor = start
        data = bytes(node.text)
        base = node.start_byte
        origin = self.origin(node)
        for child in pieces:
            if child.start_byte > cursor:
                gap = data[cursor - base : child.start_byte - base].decode(
                    "utf-8", "surrogateescape"
                )
                results = [
                    Alt(r.segs + (Seg(gap, origin, split=not quoted),), r.conds) for r in results
                ]
            cursor = child.end_byte
            if not child.is_named:
                results = [Alt(r.segs + (Seg(_text(child), origin),), r.conds) for r in results]
                continue
            options = self._alts(child, st, quoted)
            if child.type == "word" and not quoted:
                options = [
                    Alt(tuple(replace(s, split=True) for s in o.segs), o.conds) for o in options
                ]
            results = [
                Alt(r.segs + o.segs, _dedupe(r.conds + o.conds)) for r in results for o in options
            ][:MAX_ALTERNATIVES]
        if end > cursor:
            gap = data[cursor - base : end - base].decode("utf-8", "surrogateescape")
            results = [
                Alt(r.segs + (Seg(gap, origin, split=not quoted),), r.conds) for r in results
            ]
        return [r if r.segs else Alt((Seg("", origin),), r.conds) for r in results]

    def _set_cases(
        self, bindings: tuple[Binding, ...] | None, current: list[Alt] | None, colon: bool
    ) -> Callable[[Node, str | None, bool], Iterator[tuple[Alt, str]]]:
        """For each value the variable may have: is it set (non-empty with ':'), unset, unknown?"""

        def cases(node: Node, index: str | None, quoted: bool) -> Iterator[tuple[Alt, str]]:
            if bindings is None:
                for alt in current or []:
                    yield alt, _state_of(alt, colon)
                return
            for b in bindings:
                if b.alts is None and b.elems is None:
                    yield Alt((), b.conds), "unset"
                    continue
                for alt in self._binding_alts(b, index, quoted, node):
                    if b.kind == "caller":
                        yield alt, "unknown"
                    else:
                        yield alt, _state_of(alt, colon)

        return cases

    def _assign_default(
        self,
        st: _State,
        name: str,
        bindings: tuple[Binding, ...],
        word: list[Alt],
        origin: Origin,
        colon: bool,
    ) -> None:
        """${X:=d}: where X was unset (or empty), it now holds d, assigned at this line."""
        self.touched.add(name)
        kept: list[Binding] = []
        for b in bindings:
            if b.alts is None and b.elems is None:
                continue
            if b.kind == "caller" and b.origin is None:
                # The caller's value, if it had one, is kept by this line.
                kept.append(replace(b, origin=origin, conds=st.conds))
                continue
            if b.kind in ("caller", "unknown"):
                kept.append(b)
                continue
            states = {_state_of(a, colon) for a in b.alts or ()}
            if states != {"unset"}:
                kept.append(b)
        restamped = tuple(
            Alt(
                tuple(Seg(s.part, origin) for s in w.segs if not s.brk) or (Seg("", origin),),
                w.conds,
            )
            for w in word
        )
        exported = any(b.exported for b in bindings) or st.allexport
        new = Binding(
            restamped,
            origin,
            exported,
            st.conds,
            export_origin=origin if st.allexport else None,
            written=_written_alts(word),
        )
        st.vars[name] = _dedupe((*kept, new))

    def _literals_of(
        self, node: Node, name: str, index: str | None, st: _State
    ) -> list[str] | None:
        out: list[str] = []
        for alt in self._expand_name(node, name, index, st, quoted=True):
            p = alt.pattern
            if not all(isinstance(x, str) for x in p):
                return None
            out.append("".join(p))  # type: ignore[arg-type]
        return out

    def _literal_operand(self, nodes: Sequence[Node], st: _State) -> str | None:
        text = ""
        for n in nodes:
            if n.type in ("regex", "word", "extglob_pattern"):
                text += _text(n)
            else:
                value = self._literal_word(n, st)
                if value is None:
                    return None
                text += value
        return text

    def _substitution(self, node: Node, st: _State, quoted: bool) -> list[Alt]:
        """$(...): a few commands whose output follows from known values; else a hole."""
        origin = self.origin(node)
        hole = [Alt((Seg(Hole(_text(node), "command"), origin, split=not quoted),))]
        body = [c for c in node.named_children if c.type != "comment"]
        if len(body) != 1:
            return hole
        value = self._known_output(body[0], st)
        if value is None:
            return hole
        return [Alt((Seg(value, origin, split=not quoted),))]

    def _known_output(self, node: Node, st: _State) -> str | None:
        if node.type == "list":
            # cd DIR && pwd
            parts = node.named_children
            if len(parts) == 2 and parts[0].type == "command" and parts[1].type == "command":
                words = self._command_words(parts[0], st)
                last = self._command_words(parts[1], st)
                if words and words[0] == "cd" and last == ["pwd"] and len(words) >= 2:
                    target = next((w for w in words[1:] if not w.startswith("-")), None)
                    return self._resolve(target, st) if target else None
            return None
        if node.type != "command":
            return None
        words = self._command_words(node, st)
        if not words:
            return None
        name, args = words[0], [w for w in words[1:] if not w.startswith("-") or w == "-"]
        if name == "pwd" and st.cwd is not None:
            return st.cwd
        if name == "dirname" and len(args) == 1:
            return os.path.dirname(args[0].rstrip("/")) or "."
        if name == "basename" and args:
            base = os.path.basename(args[0].rstrip("/"))
            return base.removesuffix(args[1]) if len(args) > 1 else base
        if (
            name in ("realpath", "readlink")
            and len(args) == 1
            and (name == "realpath" or any(w.startswith("-") and "f" in w for w in words[1:]))
        ):
            path = self._resolve(args[0], st)
            return os.path.realpath(path) if path else None
        if name == "echo" and all(not w.startswith("-") for w in words[1:]):
            return " ".join(words[1:])
        return None

    def _command_words(self, node: Node, st: _State) -> list[str] | None:
        words: list[Node] = []
        for child in node.children:
            if child.type == "command_name":
                words.extend(child.named_children or [child])
            elif child.is_named and child.type not in ("file_redirect", "comment"):
                words.append(child)
            elif child.type == "variable_assignment":
                return None
        variants = self.fields(words, st)
        if len(variants) != 1:
            return None
        out: list[str] = []
        for f in variants[0]:
            text = _lit(f)
            if text is None:
                return None
            out.append(text)
        return out


Prefix = tuple[str, tuple[Alt, ...], Origin, str | None]
"""A ``NAME=value`` before a command: name, values, line, the value as written."""


def _written(node: Node | None) -> str | None:
    """An assignment's value as the line writes it, outer quotes removed."""
    if node is None:
        return ""
    text = _text(node)
    if node.type == "string" and text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if node.type == "raw_string":
        return text[1:-1]
    return text


def _written_alts(alts: Sequence[Alt]) -> str | None:
    shown = {
        "".join(s.part if isinstance(s.part, str) else s.part.text for s in a.segs) for a in alts
    }
    return shown.pop() if len(shown) == 1 else None


_INHERITED_ENV = frozenset(
    "PATH HOME USER LOGNAME SHELL LANG LANGUAGE LC_ALL TERM TMPDIR TZ".split()
)
"""Variables every service inherits: a plain assignment to one still reaches the command."""


def _state_of(alt: Alt, colon: bool) -> str:
    p = alt.pattern
    if all(isinstance(x, str) for x in p):
        text = "".join(p)  # type: ignore[arg-type]
        if colon and text == "":
            return "unset"
        return "set"
    if any(isinstance(x, str) and x for x in p):
        return "set"  # literal text around a hole: not empty
    return "unknown"


def _trim(value: str, op: str, pat: str) -> str:
    longest = op in ("##", "%%")
    if op.startswith("#"):
        ends = range(len(value), -1, -1) if longest else range(0, len(value) + 1)
        for end in ends:
            if fnmatch.fnmatchcase(value[:end], pat):
                return value[end:]
        return value
    starts = range(0, len(value) + 1) if longest else range(len(value), -1, -1)
    for start in starts:
        if fnmatch.fnmatchcase(value[start:], pat):
            return value[:start]
    return value


def _field(segs: list[Seg], word_origin: Origin, conds: tuple[str, ...]) -> Field:
    """One field: its pattern, and the line that produced it (one origin for all its pieces)."""
    origins = {
        s.origin for s in segs if s.origin is not None and (not isinstance(s.part, str) or s.part)
    }
    origin = origins.pop() if len(origins) == 1 else word_origin
    return Field(pattern(*(s.part for s in segs)) or ("",), origin, conds)


def _as_choice(elem: tuple[Alt, ...]) -> tuple[Alt, ...]:
    """An array element with several values as one word whose value is a choice.

    Its values are single words already (elements are split when assigned),
    so the command line keeps one shape whatever the element holds.
    """
    if len(elem) < 2 or any(len(a.segs) != 1 and not _one_word(a) for a in elem):
        return elem
    if any(_looks_like_flag(a.pattern) for a in elem):
        return elem  # a flag name that differs by branch: keep the command lines apart
    return (_choice_alt(elem),)


def _one_word(alt: Alt) -> bool:
    return not any(s.brk or (s.split and isinstance(s.part, Hole)) for s in alt.segs)


def _looks_like_flag(p: Pattern) -> bool:
    head = p[0] if p else ""
    return isinstance(head, str) and head.startswith("-")


def _choice_alt(alts: Sequence[Alt]) -> Alt:
    options = tuple(
        dict.fromkeys(
            (a.pattern, next((s.origin for s in a.segs if s.origin is not None), None), a.conds)
            for a in alts
        )
    )
    text = " | ".join(dict.fromkeys(_shown_pattern(o[0]) for o in options))
    origin = options[0][1] if len({o[1] for o in options}) == 1 else None
    return Alt((Seg(Hole(text, "choice", options), origin),))


def _shown_pattern(p: Pattern) -> str:
    return "".join(x if isinstance(x, str) else x.text for x in p)


def _merge_options(options: list[tuple[Field, ...]]) -> list[tuple[Field, ...]]:
    """A word's values as few command-line shapes as possible.

    Values that are one word each, and none a flag, become one word whose
    value is a choice: a command line of ten such words stays one shape
    instead of 2**10.
    """
    if len(options) < 2:
        return options
    if any(len(o) != 1 or o[0].spread or _looks_like_flag(o[0].pattern) for o in options):
        return options
    fields = [o[0] for o in options]
    choice = Hole(
        " | ".join(dict.fromkeys(_shown_pattern(f.pattern) for f in fields)),
        "choice",
        tuple(dict.fromkeys((f.pattern, f.origin, f.conds) for f in fields)),
    )
    origins = {f.origin for f in fields}
    origin = origins.pop() if len(origins) == 1 else fields[0].origin
    return [(Field((choice,), origin, ()),)]


def _field_alt(f: Field) -> Alt:
    """A field as a value again (an array element), keeping its origin and conditions."""
    if f.spread:
        return Alt((Seg(f.pattern[0] if f.pattern else "", f.origin, split=True),), f.conds)
    return Alt(tuple(Seg(p, f.origin) for p in f.pattern) or (Seg("", f.origin),), f.conds)


def _lit(f: Field) -> str | None:
    if f.spread:
        return None
    if all(isinstance(p, str) for p in f.pattern):
        return "".join(f.pattern)  # type: ignore[arg-type]
    return None


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _simple_name(node: Node) -> str:
    for c in node.named_children:
        return _text(c)
    return _text(node).lstrip("$")


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return truncated(text, limit)


def _unescape(text: str) -> str:
    """Quote removal of an unquoted word: a backslash keeps the next character, newline joins."""
    if "\\" not in text:
        return text
    return re.sub(r"\\(\n|.)", lambda m: "" if m.group(1) == "\n" else m.group(1), text, flags=re.S)


def _dq_unescape(text: str, keep_lines: bool = False) -> str:
    """Inside double quotes a backslash escapes only $ ` " \\ and newline.

    With `keep_lines`, a backslash-newline stays: the text is code for
    ``bash -c`` whose lines must keep their numbers.
    """
    if "\\" not in text:
        return text
    return re.sub(
        r'\\([$`"\\\n])',
        lambda m: ("\\\n" if keep_lines else "") if m.group(1) == "\n" else m.group(1),
        text,
    )


_ANSI = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "e": "\x1b",
    "E": "\x1b",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _ansi_c(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ANSI.get(m.group(1), "\\" + m.group(1)), text, flags=re.S)


_WORDS = frozenset(
    {"word", "string", "raw_string", "simple_expansion", "expansion", "concatenation", "number"}
)
