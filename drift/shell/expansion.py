"""Parameter expansion: ``$X``, ``${X}``, ``${X[i]}``, ``"$@"``, ``$1``, ``${X:-d}`` and its kin.

A variable expands to the values of its bindings; the positional and
special parameters to what the path knows of them. ``${X:-d}``, ``${X=d}``,
``${X:+w}``, ``${X:?}`` give, for each value X may have, that value or the
word (and ``${X:=d}`` assigns it); ``${X#p}`` and its kin trim known
values. Any other form is one hole with its text.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from drift.shell.fields import as_choice
from drift.shell.patterns import Hole, Part
from drift.shell.state import ArgsVariant, State, args_variants
from drift.shell.syntax import Node, node_text, pieces_between, simple_name
from drift.shell.values import BREAK, MAX_ALTERNATIVES, Alt, Binding, Field, Origin, Seg, dedupe
from drift.shell.words import Words, appended, combined


class ParameterExpansion(Words):
    """Parameter expansion, mixed into the evaluator (see the module docstring)."""

    def _expand_name(
        self, node: Node, name: str, index: str | None, st: State, quoted: bool
    ) -> list[Alt]:
        """$NAME, ${NAME}, ${NAME[i]}: the alternatives of its bindings."""
        origin = self.origin(node)
        special = self._special(node, name, st, quoted)
        if special is not None:
            return special
        out: list[Alt] = []
        for b in self._lookup(st, name):
            out.extend(self._binding_alts(b, index, quoted, node))
        return out or [Alt((Seg("", origin),))]

    def _binding_alts(self, b: Binding, index: str | None, quoted: bool, node: Node) -> list[Alt]:
        """The values one binding gives ``$X``, ``${X[i]}`` or ``${X[@]}``."""
        origin = self.origin(node)
        split = not quoted
        if b.kind == "caller":
            return [Alt((Seg(Hole(node_text(node), "caller"), None, split=split),), b.conds)]
        if b.elems is not None:
            elems = b.elems
            if index in ("@", "*"):
                out: list[Alt] = [Alt((), b.conds)]
                for i, elem in enumerate(elems):
                    elem = as_choice(elem)
                    joiner = (
                        (BREAK,)
                        if (index == "@" and quoted)
                        else ((Seg(" ", None, split=split),) if i else ())
                    )
                    if index == "@" and quoted and i == 0:
                        joiner = ()
                    out = [
                        Alt(
                            o.segs + joiner + tuple(_element_segs(e, split)),
                            dedupe(o.conds + e.conds),
                        )
                        for o in out
                        for e in elem
                    ][: MAX_ALTERNATIVES + 1]  # one more: `alts` then says unknown
                return out
            position = 0
            if index is not None:
                try:
                    position = int(index)
                except ValueError:
                    return [Alt((Seg(Hole(node_text(node)), origin, split=split),), b.conds)]
            if position >= len(elems):
                return [Alt((Seg("", origin),), b.conds)]
            return [
                Alt(tuple(replace(s, split=split) for s in e.segs), dedupe(b.conds + e.conds))
                for e in elems[position]
            ]
        if b.alts is None:
            return [Alt((Seg("", b.origin, split=split),), b.conds)]
        if index not in (None, "0", "@", "*"):
            return [Alt((Seg("", origin),), b.conds)]
        return [
            Alt(tuple(replace(s, split=split) for s in a.segs), dedupe(b.conds + a.conds))
            for a in b.alts
        ]

    def _special(self, node: Node, name: str, st: State, quoted: bool) -> list[Alt] | None:
        """The positional and special parameters, and bash's own variables; None for others."""
        origin = self.origin(node)
        if name in ("@", "*"):
            return self._all_arguments(name, st, quoted, origin)
        if name.isdigit():
            return self._argument(name, st, quoted, origin)
        if name in _DYNAMIC and name not in st.vars:
            return [Alt((Seg(Hole("$" + name, "command"), origin, split=not quoted),))]
        if name == "BASH_SOURCE" and name not in st.vars:
            return [Alt((Seg(self.file, origin),))]
        if name == "LINENO":
            return [Alt((Seg(str(origin.line), origin),))]
        if name == "PWD" and name not in st.vars and st.cwd is not None and os.path.isabs(st.cwd):
            return [Alt((Seg(st.cwd, origin),))]
        return None

    def _all_arguments(self, name: str, st: State, quoted: bool, origin: Origin) -> list[Alt]:
        """``$@`` and ``$*``: the arguments, one field each in ``"$@"``, joined by a blank else."""
        variants = args_variants(st.args)
        if variants is not None:
            return self._each_path(
                variants, st, lambda one: self._all_arguments(name, one, quoted, origin)
            )
        if st.args is None:
            return [Alt((Seg(Hole('"$@"' if name == "@" else "$*", "args"), origin, split=True),))]
        fields = name == "@" and quoted
        segs: list[Seg] = []
        for i, f in enumerate(st.args):
            if i:
                segs.append(BREAK if fields else Seg(" ", None, split=not quoted))
            if f.spread:
                part = f.pattern[0] if f.pattern else ""
                segs.append(Seg(part, _passed(part, f.origin, origin), split=True))
            else:
                segs.extend(
                    Seg(s.part, _passed(s.part, s.origin, origin), split=not quoted)
                    for s in _pieces(f)
                )
        if not segs:
            return [Alt((Seg("", origin),))] if not fields else [Alt(())]
        return [Alt(tuple(segs))]

    def _each_path(
        self,
        variants: tuple[ArgsVariant, ...],
        st: State,
        expand: Callable[[State], list[Alt]],
    ) -> list[Alt]:
        """The arguments of each path that set them its own way, under that path's conditions."""
        out: list[Alt] = []
        for args, conds in variants:
            one = st.fork()
            one.args = args
            out.extend(replace(a, conds=dedupe(conds + a.conds)) for a in expand(one))
        return list(dedupe(out))[-MAX_ALTERNATIVES:]

    def _argument(self, name: str, st: State, quoted: bool, origin: Origin) -> list[Alt]:
        """``$0`` (the script's path), ``$1`` ...: the argument, if the path knows it."""
        position = int(name)
        if position == 0:
            return [Alt((Seg(self.top, origin, split=not quoted),))]
        variants = args_variants(st.args)
        if variants is not None:
            return self._each_path(
                variants, st, lambda one: self._argument(name, one, quoted, origin)
            )
        if st.args is None or any(f.spread for f in st.args[:position]):
            return [Alt((Seg(Hole("$" + name, "args"), origin, split=not quoted),))]
        if position > len(st.args):
            return [Alt((Seg("", origin),))]
        f = st.args[position - 1]
        segs = tuple(
            Seg(s.part, _passed(s.part, s.origin, origin), split=not quoted) for s in _pieces(f)
        )
        return [Alt(segs, f.conds)]

    def _simple_expansion(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """``$NAME``, ``$1``, ``$@``."""
        return self._expand_name(node, simple_name(node), None, st, quoted)

    def _expansion(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """${...}: the forms whose value follows from known values; anything else is a hole."""
        inner = [c for c in node.children if c.type not in ("${", "}")]
        target = _expanded_name(inner)
        if target is None:
            return _hole(node, self.origin(node), quoted)
        name, index = target
        rest = inner[1:]
        if not rest:
            return self._expand_name(node, name, index, st, quoted)
        op = rest[0].type
        if op in _DEFAULT_OPERATORS:
            return self._with_word(node, name, index, rest, st, quoted)
        if op in _TRIM_OPERATORS:
            values = self._literals_of(node, name, index, st)
            pat = self._literal_operand(rest[1:], st)
            if values is None or pat is None:
                return _hole(node, self.origin(node), quoted)
            origin = self.origin(node)
            return [Alt((Seg(_trim(v, op, pat), origin, split=not quoted),)) for v in values]
        return _hole(node, self.origin(node), quoted)

    def _with_word(
        self,
        node: Node,
        name: str,
        index: str | None,
        rest: Sequence[Node],
        st: State,
        quoted: bool,
    ) -> list[Alt]:
        """``${X:-w}``, ``${X=w}``, ``${X:+w}``, ``${X:?w}``: each value of X, or the word.

        ``${X:=w}`` and ``${X=w}`` also assign the word where X had no value.
        """
        origin = self.origin(node)
        op = rest[0].type
        colon = op.startswith(":")
        # Operand text, read the same way as a word (quotes removed, expansions known).
        word = self._operand(node, rest[0], st, quoted) if rest[1:] else [Alt((Seg("", origin),))]
        bindings = self._lookup(st, name) if not name.isdigit() and name not in "@*#" else None
        current = self._expand_name(node, name, index, st, quoted) if bindings is None else None
        cases = self._set_cases(bindings, current, colon)
        out: list[Alt] = []
        assign = False
        for alt, state in cases(node, index, quoted):
            if op in (":+", "+"):
                out.extend(_alternate(alt, state, word, origin, quoted))
                continue
            values, defaulted = _default(op, alt, state, word, node, quoted)
            out.extend(values)
            assign = assign or (defaulted and op in (":=", "="))
        if assign and bindings is not None:
            self._assign_default(st, name, bindings, word, origin, colon)
        return list(dedupe(out)) or [Alt((Seg("", origin),))]

    def _operand(self, node: Node, op_node: Node, st: State, quoted: bool) -> list[Alt]:
        """The word after an operator in ${X:-word}, read from the source text."""
        start = op_node.end_byte
        end = node.children[-1].start_byte if node.children[-1].type == "}" else node.end_byte
        children = [c for c in node.children if c.start_byte >= start and c.end_byte <= end]
        origin = self.origin(node)
        results: list[Alt] = [Alt(())]
        for piece in pieces_between(node, children, start, end):
            if isinstance(piece, str):
                results = appended(results, Seg(piece, origin, split=not quoted))
            elif not piece.is_named:
                results = appended(results, Seg(node_text(piece), origin))
            else:
                options = self._alts(piece, st, quoted)
                if piece.type == "word" and not quoted:
                    options = [
                        Alt(tuple(replace(s, split=True) for s in o.segs), o.conds) for o in options
                    ]
                results = combined(results, options, MAX_ALTERNATIVES + 1)
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
        st: State,
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
        st.vars[name] = dedupe((*kept, new))

    def _literals_of(self, node: Node, name: str, index: str | None, st: State) -> list[str] | None:
        """Every text the variable may have, if all are known; else None."""
        out: list[str] = []
        for alt in self._expand_name(node, name, index, st, quoted=True):
            p = alt.pattern
            if not all(isinstance(x, str) for x in p):
                return None
            out.append("".join(p))  # type: ignore[arg-type]
        return out

    def _literal_operand(self, nodes: Sequence[Node], st: State) -> str | None:
        """The pattern of ``${X#pattern}`` as one known text, else None."""
        text = ""
        for n in nodes:
            if n.type in ("regex", "word", "extglob_pattern"):
                text += node_text(n)
            else:
                value = self._literal_word(n, st)
                if value is None:
                    return None
                text += value
        return text


# bash's own variables, whose values come from the running shell
_DYNAMIC = frozenset(
    "# $ ! ? - _ RANDOM SECONDS BASHPID PPID EPOCHSECONDS EPOCHREALTIME HOSTNAME UID EUID".split()
)
_DEFAULT_OPERATORS = frozenset({":-", "-", ":=", "=", ":+", "+", ":?", "?"})
_TRIM_OPERATORS = frozenset({"#", "##", "%", "%%"})


def _hole(node: Node, origin: Origin, quoted: bool) -> list[Alt]:
    """An expansion drift does not evaluate: one unknown value, written as the script does."""
    return [Alt((Seg(Hole(node_text(node)), origin, split=not quoted),))]


def _expanded_name(inner: Sequence[Node]) -> tuple[str, str | None] | None:
    """(NAME, index) of ``${NAME...}`` or ``${NAME[i]...}``; None for ``${#X}``, ``${!X}``."""
    if not inner:
        return None
    first = inner[0]
    if first.type == "subscript":
        name_node = first.child_by_field_name("name")
        index_node = first.child_by_field_name("index")
        if name_node is None:
            return None
        return node_text(name_node), node_text(index_node) if index_node is not None else None
    if first.type in ("variable_name", "special_variable_name"):
        return node_text(first), None
    return None  # ${#X} (a length), ${!X} (indirection)


def _default(
    op: str, alt: Alt, state: str, word: list[Alt], node: Node, quoted: bool
) -> tuple[list[Alt], bool]:
    """What one value of X gives ``${X:-w}``, ``${X=w}``, ``${X:?w}``; True if the word was used."""
    if state == "set":
        return [alt], False
    fails = op in (":?", "?")  # no value: the shell stops, nothing is expanded
    if state == "unset":
        return ([], False) if fails else (_under(word, alt), True)
    # unknown: the value the caller gave, or the word; a line drift could not read stays that
    part = alt.segs[0].part if len(alt.segs) == 1 else None
    caller = isinstance(part, Hole) and part.kind != "unread"
    kept = Alt((Seg(Hole(node_text(node), "caller"), None, split=not quoted),), alt.conds)
    values = [kept if caller else alt]
    return (values, False) if fails else (values + _under(word, alt), True)


def _alternate(alt: Alt, state: str, word: list[Alt], origin: Origin, quoted: bool) -> list[Alt]:
    """What one value of X gives ``${X:+w}``: the word where X is set, else empty."""
    out: list[Alt] = []
    if state in ("set", "unknown"):
        out.extend(_under(word, alt))
    if state in ("unset", "unknown"):
        out.append(Alt((Seg("", origin, split=not quoted),), alt.conds))
    return out


def _under(word: list[Alt], alt: Alt) -> list[Alt]:
    """The word's values, each under the conditions of the value of X it replaces."""
    return [Alt(w.segs, dedupe(alt.conds + w.conds)) for w in word]


def _written_alts(alts: Sequence[Alt]) -> str | None:
    """The values as the script writes them, if they read the same; else None."""
    shown = {
        "".join(s.part if isinstance(s.part, str) else s.part.text for s in a.segs) for a in alts
    }
    return shown.pop() if len(shown) == 1 else None


def _state_of(alt: Alt, colon: bool) -> str:
    """Is the value "set", "unset" (empty, with ':') or "unknown" (a hole alone)?"""
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
    """``${X#p}``, ``${X##p}``, ``${X%p}``, ``${X%%p}`` of a known value."""
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


def _passed(part: Part, given: Origin | None, here: Origin) -> Origin | None:
    """Where an argument's piece is placed: the script's own arguments where they are expanded.

    A function's ``"$@"`` holding the script's arguments (``start "$@"``) puts
    them in its command at its own line, as ``exec ... "$@"`` in the script would.
    """
    return here if isinstance(part, Hole) and part.kind == "args" and not part.options else given


def _pieces(f: Field) -> tuple[Seg, ...]:
    """An argument's pieces, each with the line that wrote it."""
    if f.pieces:
        return tuple(Seg(s.part, s.origin or f.origin) for s in f.pieces)
    return tuple(Seg(p, f.origin) for p in f.pattern)


def _element_segs(elem: Alt, split: bool) -> Iterator[Seg]:
    """An array element's pieces in ``${A[@]}``, split as the expansion splits.

    An element of any number of words (``A+=("$@")``, ``A=($UNKNOWN)``)
    stays any number of words, quoted or not.
    """
    spread = len(elem.segs) == 1 and elem.segs[0].split and isinstance(elem.segs[0].part, Hole)
    for s in elem.segs:
        yield replace(s, split=split or spread)
