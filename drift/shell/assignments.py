"""Assignments: ``X=v``, ``X+=v``, ``A=(...)``, ``A[i]=v``, and lines that may assign anything.

Each assignment gives the variable new bindings stamped with its line and
the path's conditions, keeping (or, under ``set -a``, setting) its export
attribute. A line drift cannot follow (an unreadable sourced file,
``eval $x``) may have set any variable: `_unknown_assignments`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace

from drift.shell.fields import field_alt
from drift.shell.patterns import Hole, Part
from drift.shell.state import State
from drift.shell.syntax import Node, node_text
from drift.shell.values import MAX_ALTERNATIVES, Alt, Binding, Origin, Seg, dedupe, folded
from drift.shell.walk import Walker
from drift.shell.words import written_value

_INHERITED_ENV = frozenset(
    "PATH HOME USER LOGNAME SHELL LANG LANGUAGE LC_ALL TERM TMPDIR TZ".split()
)
"""Variables every service inherits: a plain assignment to one still reaches the command."""


def integer_value(alt: Alt, origin: Origin, append: bool) -> Alt:
    """What an integer variable holds after ``X=expr``: a decimal number drift knows, else a hole.

    Only a plain decimal (not one with a leading 0: octal) or a sum, product
    ... of such numbers is computed; anything else (a name, ``$((...))``,
    ``X+=``) is a number this line gave that drift does not compute.
    """
    if not append and all(isinstance(p, str) for p in alt.pattern):
        number = _arithmetic("".join(alt.pattern))  # type: ignore[arg-type]
        if number is not None:
            return Alt((Seg(str(number), origin),), alt.conds)
    return Alt((Seg(Hole("$((...))", "command"), origin),), alt.conds)


def _arithmetic(text: str) -> int | None:
    """The value of an expression of decimal numbers and + - * / % ( ), as bash computes it."""
    import ast

    if not re.fullmatch(r"[0-9+\-*/%() \t]*", text) or re.search(r"(?<![0-9])0[0-9]", text):
        return None
    try:
        tree = ast.parse(text.strip() or "0", mode="eval")
    except SyntaxError:
        return None

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, (ast.Div, ast.Mod)) and right != 0:
                quotient = abs(left) // abs(right) * (1 if (left < 0) == (right < 0) else -1)
                return quotient if isinstance(node.op, ast.Div) else left - right * quotient
        raise ValueError(text)

    try:
        number = value(tree.body)
    except (ValueError, RecursionError):
        return None
    return number if -(2**63) <= number < 2**63 else None


_ARITHMETIC_ASSIGNED = re.compile(
    r"(?:\+\+|--)\s*([A-Za-z_]\w*)"
    r"|([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*(?:\+\+|--|(?:<<|>>|[-+*/%&|^])?=(?!=))"
)


ARITHMETIC_STATEMENTS = (
    "binary_expression",
    "unary_expression",
    "postfix_expression",
    "parenthesized_expression",
    "ternary_expression",
)
"""Expressions that stand as statements: inside ``(( ... ))`` only."""


def arithmetic_assigned(text: str) -> list[str]:
    """The names an arithmetic expression assigns: ``X = 1``, ``X += 2``, ``X++``, ``--X``."""
    return list(dict.fromkeys(a or b for a, b in _ARITHMETIC_ASSIGNED.findall(text)))


class Assignments(Walker):
    """Assignments, mixed into the evaluator (see the module docstring)."""

    def s_assignment(self, node: Node, st: State, how: str) -> None:
        """``X=v`` alone on its line."""
        for name, append, value_node, origin, index in self._assignments([node]):
            self._assign_node(st, name, append, value_node, origin, index)

    def s_arithmetic(self, node: Node, st: State, how: str) -> None:
        """``(( X++ ))``, ``(( X = Y * 2 ))``: what it assigns holds a number this line computed."""
        self._expressions(node, st)
        self._computed_here(node_text(node), st, self.origin(node))

    def _arithmetic_word(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """``$(( X += 1 ))``: a number computed as the script runs, and what it assigns."""
        self._computed_here(node_text(node), st, self.origin(node))
        return self._computed(node, st, quoted)

    def _computed_here(self, text: str, st: State, origin: Origin) -> None:
        """Each name `text` assigns in arithmetic: a number this line gave, drift does not know."""
        for name in arithmetic_assigned(text):
            hole = Alt((Seg(Hole(f"${name}", "command"), origin),))
            self._assign(st, name, (hole,), origin)

    def s_assignments(self, node: Node, st: State, how: str) -> None:
        """``X=1 Y=2`` with no command after them."""
        for name, append, value_node, origin, index in self._assignments(node.named_children):
            self._assign_node(st, name, append, value_node, origin, index)

    def _assignments(
        self, nodes: Iterable[Node]
    ) -> Iterator[tuple[str, bool, Node | None, Origin, Node | None]]:
        """(name, +=, value node, line, index node) of each assignment among `nodes`."""
        for node in nodes:
            if node.type != "variable_assignment":
                continue
            name_node = node.child_by_field_name("name")
            if name_node is None:
                continue
            index = None
            if name_node.type == "subscript":
                index = name_node.child_by_field_name("index")
                name_node = name_node.child_by_field_name("name")
                if name_node is None:
                    continue
            append = any(c.type == "+=" for c in node.children)
            yield (
                node_text(name_node),
                append,
                node.child_by_field_name("value"),
                self.origin(node),
                index,
            )

    def _assign_node(
        self,
        st: State,
        name: str,
        append: bool,
        value: Node | None,
        origin: Origin,
        index: Node | None = None,
        exported: bool | None = None,
    ) -> None:
        """Assign the value node `value` (None: empty) to `name`, or to one element of it."""
        if value is not None and value.type == "array":
            self._assign_array(st, name, append, value, origin, exported)
            return
        alts = self._value_alts(value, st, origin)
        if name in self.integers:
            # declare -i X: bash computes what is assigned (X=2*4 holds 8, X+=1 adds)
            alts = tuple(integer_value(a, origin, append) for a in alts)
            append = False
        if index is not None:
            # A[i]=v: the array changes in a way drift does not track element by element.
            alts = (Alt((Seg(Hole(f"${{{name}[@]}}"), origin, split=True),)),)
            self._set(
                st, name, (Binding(None, origin, False, st.conds, elems=(alts,)),), origin, exported
            )
            return
        if append:
            old = self._lookup(st, name)
            joined: list[Alt] = []
            for b in old:
                for a in b.alts or (Alt(()),):
                    for v in alts:
                        joined.append(Alt(a.segs + v.segs, a.conds + v.conds))
            alts = dedupe(joined)
            if len(alts) > MAX_ALTERNATIVES:
                # more values than drift tells apart: this line gave one it does not know
                alts = (Alt((Seg(Hole(f"${name}"), origin, split=True),)),)
            self._assign(st, name, alts, origin, exported)
            return
        self._assign(st, name, alts, origin, exported, written_value(value))

    def _assign_array(
        self,
        st: State,
        name: str,
        append: bool,
        value: Node,
        origin: Origin,
        exported: bool | None,
    ) -> None:
        """``A=(...)``, ``A+=(...)``: the elements, after the old ones when appending."""
        elems = [e for c in value.named_children if c.type != "comment" for e in self._elem(c, st)]
        if not append:
            binding = Binding(None, origin, False, st.conds, elems=tuple(elems))
            self._set(st, name, (binding,), origin, exported)
            return
        new: list[Binding] = []
        for b in self._lookup(st, name):
            base: tuple[tuple[Alt, ...], ...] = ()
            if b.elems is not None:
                base = b.elems
            elif b.alts and b.kind == "set":
                base = (b.alts,)  # X=a; X+=(b) makes X the array (a b)
            new.append(
                Binding(
                    None, origin, b.exported, dedupe(b.conds + st.conds), elems=base + tuple(elems)
                )
            )
        self._set(st, name, tuple(new), origin, exported)

    def _elem(self, node: Node, st: State) -> list[tuple[Alt, ...]]:
        """Array elements from one word of ``(...)``: unquoted expansions split into several.

        Where the word's values split into the same number of words, element i
        has each value's i-th word as an alternative; otherwise it is one
        element of unknown text.
        """
        variants = self.fields([node], st)
        sizes = {len(v) for v in variants}
        if len(sizes) != 1:
            if len(variants) == 1:
                return [(_stored(field_alt(f)),) for f in variants[0]]
            return [(Alt((Seg(Hole(node_text(node)), self.origin(node), split=True),)),)]
        size = sizes.pop()
        return [dedupe(_stored(field_alt(v[i])) for v in variants) for i in range(size)]

    def _value_alts(self, value: Node | None, st: State, origin: Origin) -> tuple[Alt, ...]:
        """The values an assignment's value node gives, each piece stamped with its line."""
        if value is None:
            return (Alt((Seg("", origin),)),)
        alts = self.alts(value, st)
        if self._before_cr(value):
            # CRLF line ends: bash keeps the carriage return in the value.
            alts = [Alt(a.segs + (Seg("\r", origin),), a.conds) for a in alts]
        # Each piece keeps the line that wrote its text (CMD="$CMD --x" keeps the
        # earlier words' lines); what no line wrote (the caller's value) is this one's.
        return dedupe(
            Alt(
                tuple(Seg(_kept(s.part), s.origin or origin) for s in a.segs if not s.brk)
                or (Seg("", origin),),
                a.conds,
            )
            for a in alts
        )

    def _before_cr(self, node: Node) -> bool:
        """True if `node` ends right before the carriage return of a CRLF line."""
        row, column = node.end_point
        lines = self.lines.get(self.file) or []
        index = row + self.offset
        if not 0 <= index < len(lines):
            return False
        line = lines[index].encode("utf-8", "surrogateescape")
        return bool(line.endswith(b"\r") and column == len(line) - 1)

    def _assign(
        self,
        st: State,
        name: str,
        alts: tuple[Alt, ...],
        origin: Origin,
        exported: bool | None = None,
        written: str | None = None,
    ) -> None:
        """Give `name` the values `alts`, assigned at `origin` (`written` as the line has it)."""
        binding = Binding(alts, origin, False, st.conds, written=written)
        self._set(st, name, (binding,), origin, exported)

    def _set(
        self,
        st: State,
        name: str,
        bindings: tuple[Binding, ...],
        origin: Origin,
        exported: bool | None,
    ) -> None:
        """Give `name` new values, keeping (or setting) its export attribute."""
        self.touched.add(name)
        old = st.vars.get(name)
        given = False  # exported only if the caller exported the name
        if exported is None:
            if st.allexport:
                exported = True
            elif old is None:
                exported = name in _INHERITED_ENV
                given = not exported
            else:
                exported = any(b.exported for b in old)
                given = not exported and any(b.given_export for b in old)
        export_origin = None
        if old is not None and exported:
            export_origin = next((b.export_origin for b in old if b.export_origin), None)
        if st.allexport or (old is None and exported):
            export_origin = export_origin or origin
        if not exported:
            export_origin = None
        st.vars[name] = tuple(
            b
            if (b.exported, b.export_origin, b.given_export) == (exported, export_origin, given)
            else Binding(
                b.alts,
                b.origin,
                exported,
                b.conds,
                b.kind,
                b.elems,
                export_origin,
                b.written,
                given,
            )
            for b in bindings
        )

    def _unknown_assignments(self, st: State, origin: Origin, why: str) -> None:
        """A line that may set any variable: every value known so far may have been replaced."""
        self.gaps.append(f"{origin.file}:{origin.line}: {why}")
        unknown = Binding(
            (Alt((Seg(Hole(origin.text or "?", "unread"), origin, split=True),)),),
            origin,
            True,
            st.conds,
            kind="unknown",
        )
        for name in list(st.vars):
            if not name.startswith("\0"):
                st.vars[name] = folded(dedupe((*st.vars[name], unknown)))
        # every such line is a place a variable no line sets may come from
        st.vars["\0unknown"] = dedupe((*st.vars.get("\0unknown", ()), unknown))
        self.opaque = True  # any variable may have changed: no test can be read off the process


def _kept(part: Part) -> Part:
    """A piece as a variable keeps it: the script's arguments stay where they were taken.

    ``EXTRA=("$@")`` then ``start "${EXTRA[@]}"``: inside ``start``, its
    ``"$@"`` expands words the assignment took, so they keep that line (a
    hole "args" is placed anew at each ``"$@"`` it passes through, see
    `drift.shell.expansion`; a stored one is the caller's value, kept).
    The output of ``getopt ... -- "$@"`` is the arguments still to parse
    (``eval set -- "$OPTS"``): they stay arguments.
    """
    if isinstance(part, Hole) and part.kind == "args" and not part.text.startswith("$("):
        return Hole(part.text, "caller")
    return part


def _stored(alt: Alt) -> Alt:
    """An array element as the array keeps it (`_kept`)."""
    return Alt(tuple(replace(s, part=_kept(s.part)) for s in alt.segs), alt.conds)
