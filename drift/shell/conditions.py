"""Conditions: when a test's outcome is certain, and which tests the live process can answer.

`decide` says True or False where known values settle a condition
(``[ "$X" = a ]`` with X known, ``[ -f FILE ]`` of a file that is there,
``true``), and `case_verdict` whether a ``case`` arm matches; `caller_test`
describes a test on a variable the script was given, so the live
environment can tell which way it went. `_keep_given` follows the caller's
value through ``[ -z "$X" ] && X=d``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from drift.shell.state import State
from drift.shell.syntax import WORD_NODES, Node, is_name, node_text, simple_name
from drift.shell.walk import Walker


class Conditions(Walker):
    """Decisions on conditions, mixed into the evaluator (see the module docstring)."""

    def decide(self, nodes: Sequence[Node], st: State) -> bool | None:
        """True or False if the condition's outcome is certain from known values, else None."""
        if len(nodes) != 1:
            return None
        node = nodes[0]
        if node.type == "negated_command":
            inner = [c for c in node.named_children]
            result = self.decide(inner, st)
            return None if result is None else not result
        if node.type == "test_command":
            exprs = node.named_children
            if len(exprs) != 1:
                return None
            return self._decide_expr(exprs[0], st)
        if node.type == "command":
            name = node.child_by_field_name("name")
            if name is not None and node_text(name) in ("true", ":"):
                return True
            if name is not None and node_text(name) == "false":
                return False
        return None

    def caller_test(self, nodes: Sequence[Node], st: State) -> dict[str, Any] | None:
        """A test on one variable the script was given and has not touched, for the live env.

        ``[ "$ROLE" = prefill ]``, ``[[ ${DP:-0} == 1 ]]``, ``[ -z "$X" ]``: the
        process inherits that variable unchanged, so its live environment tells
        which way the test went. None for anything else.
        """
        found = _test_expression(nodes[0]) if len(nodes) == 1 else None
        if found is None:
            return None
        node, expr, negate = found
        glob = node_text(node).startswith("[[")
        if expr.type == "unary_expression" and expr.children and expr.named_children:
            op = node_text(expr.children[0])
            if op not in ("-z", "-n"):
                return None
            ref = _variable_reference(expr.named_children[-1])
            if ref is None:
                return None
            name, default = ref
            test: dict[str, Any] = {"var": name, "op": op}
        elif expr.type == "binary_expression":
            parts = _binary(expr)
            if parts is None:
                return None
            left, op, right = parts
            if op not in ("=", "==", "!="):
                return None
            ref = _variable_reference(left)
            value = self._literal_word(right, st)
            if ref is None or value is None:
                return None
            name, default = ref
            is_glob = glob and right.type != "string" and any(c in value for c in "*?[")
            test = {"var": name, "op": "!=" if op == "!=" else "==", "value": value}
            if is_glob:
                test["glob"] = True
        else:
            return None
        bindings = st.vars.get(name)
        if bindings is not None and any(b.kind != "caller" or b.origin for b in bindings):
            return None  # the script set it: the live value is not what was tested
        if default is not None:
            test["default"] = default
        if negate:
            test["negate"] = True
        return test

    def _decide_expr(self, node: Node, st: State) -> bool | None:
        """The outcome of a test's expression, if known values settle it; else None."""
        kind = node.type
        if kind == "unary_expression":
            return self._decide_unary(node, st)
        if kind in WORD_NODES:
            # [ "$X" ]: true if not empty
            values = self._literals(node, st)
            return None if values is None else _same({v != "" for v in values})
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self._decide_expr(node.named_children[0], st)
        if kind == "binary_expression":
            return self._decide_binary(node, st)
        return None

    def _decide_unary(self, node: Node, st: State) -> bool | None:
        """``-f FILE`` and its kin (true if the file is there now), ``-z`` and ``-n``."""
        if not node.children or not node.named_children:
            return None
        op = node_text(node.children[0])
        operand = node.named_children[-1]
        if op in _FILE_TESTS:
            # A file the script tests for: if it is there now, it was there at start. One
            # relative to a start folder drift does not know may be there or not.
            path = self._literal_word(operand, st)
            resolved = self._resolve(path, st)
            if resolved is None:
                self._start_relative(path, st)  # given the start folder, it would decide
                return None
            return True if self._check("exists", resolved) else None
        if op not in ("-z", "-n"):
            return None
        values = self._literals(operand, st)
        return None if values is None else _same({(v == "") == (op == "-z") for v in values})

    def _decide_binary(self, node: Node, st: State) -> bool | None:
        """``A && B``, ``A -o B`` from their sides; ``X = Y``, ``X != Y`` from known values."""
        parts = _binary(node)
        if parts is None:
            return None
        left, op, right = parts
        if op in _LOGICAL:
            # both sides are read: a ${X:=d} in either assigns
            return _logical(op, self._decide_expr(left, st), self._decide_expr(right, st))
        if op not in ("=", "==", "!="):
            return None
        lefts = self._literals(left, st)
        right_text = self._literal_word(right, st)
        if lefts is None or right_text is None:
            return None
        glob = right.type in ("extglob_pattern", "word", "regex") and any(
            c in right_text for c in "*?["
        )
        result = _same(
            {(fnmatch.fnmatchcase(v, right_text) if glob else v == right_text) for v in lefts}
        )
        return result if result is None or op != "!=" else not result

    def _keep_given(self, cond: Node, negated: bool, taken: State, skipped: State) -> None:
        """``[ -z "$X" ] && X=d``: where the test said X was set, the caller's X is kept here.

        The value X was started with then passes this line unchanged, so the
        line that sets X's default is where it comes from on both paths (the
        answer says "the value the service was started with").
        """
        test = _emptiness_test(cond)
        if test is None:
            return
        name, true_when_empty = test
        holds_given = skipped if true_when_empty != negated else taken
        origin = self.origin(cond)
        holds_given.vars[name] = tuple(
            replace(b, origin=origin) if b.kind == "caller" and b.origin is None else b
            for b in self._lookup(holds_given, name)
        )


_FILE_TESTS = frozenset({"-f", "-e", "-r", "-s", "-d"})
_LOGICAL = frozenset({"&&", "-a", "||", "-o"})


def _same(results: set[bool]) -> bool | None:
    """The one outcome every known value gives, or None if they differ."""
    return results.pop() if len(results) == 1 else None


def _logical(op: str, left: bool | None, right: bool | None) -> bool | None:
    """``&&``/``-a`` and ``||``/``-o`` of two outcomes, None standing for unknown."""
    if op in ("&&", "-a"):
        if left is False or right is False:
            return False
        return True if left and right else None
    if left is True or right is True:
        return True
    return False if left is False and right is False else None


def _test_expression(node: Node) -> tuple[Node, Node, bool] | None:
    """(the test, its one expression, negated) of ``[ ... ]`` or ``! [ ... ]``; else None."""
    negate = False
    if node.type == "negated_command" and node.named_child_count == 1:
        node, negate = node.named_children[0], True
    if node.type != "test_command" or node.named_child_count != 1:
        return None
    return node, node.named_children[0], negate


def _binary(node: Node) -> tuple[Node, str, Node] | None:
    """(left, operator, right) of a test's binary expression, if all three are there."""
    left = node.child_by_field_name("left")
    right = node.child_by_field_name("right")
    op = node.child_by_field_name("operator")
    if left is None or right is None or op is None:
        return None
    return left, node_text(op), right


def _variable_reference(node: Node) -> tuple[str, str | None] | None:
    """(NAME, default) for ``$NAME``, ``"${NAME}"``, ``${NAME:-d}`` with a literal d; else None."""
    if node.type == "string" and node.named_child_count == 1:
        node = node.named_children[0]
    if node.type == "simple_expansion":
        name = simple_name(node)
        return (name, None) if is_name(name) else None
    if node.type != "expansion":
        return None
    inner = [c for c in node.children if c.type not in ("${", "}")]
    if not inner or inner[0].type != "variable_name":
        return None
    name = node_text(inner[0])
    if len(inner) == 1:
        return name, None
    if node_text(inner[1]) != ":-":
        return None
    rest = inner[2:]
    if not rest:
        return name, ""
    if len(rest) == 1 and rest[0].type in ("word", "number", "raw_string"):
        text = node_text(rest[0])
        return name, text[1:-1] if rest[0].type == "raw_string" else text
    return None


def _emptiness_test(node: Node) -> tuple[str, bool] | None:
    """(NAME, True) for ``[ -z "$NAME" ]``, (NAME, False) for ``[[ -n $NAME ]]``, else None.

    ``${NAME:-}`` counts as NAME; ``!`` before the test swaps the answer.
    """
    found = _test_expression(node)
    if found is None:
        return None
    _test, expr, negate = found
    if expr.type != "unary_expression" or not expr.children:
        return None
    op = node_text(expr.children[0])
    operand = expr.named_children[-1] if expr.named_children else None
    if op not in ("-z", "-n") or operand is None:
        return None
    if operand.type == "string" and operand.named_child_count == 1:
        operand = operand.named_children[0]
    if operand.type == "simple_expansion":
        name = simple_name(operand)
    elif operand.type == "expansion":
        inner = [c for c in operand.children if c.type not in ("${", "}")]
        if not inner or inner[0].type != "variable_name":
            return None
        rest = [node_text(c) for c in inner[1:]]
        if rest not in ([], [":-"], ["-"]):
            return None
        name = node_text(inner[0])
    else:
        return None
    if not is_name(name):
        return None
    return name, (op == "-z") != negate


def case_verdict(words: list[str | None], patterns: list[str | None]) -> bool | None:
    """Does a case item match? True/False when the word and patterns are all known."""
    if not words or any(w is None for w in words) or any(p is None for p in patterns):
        if any(p == "*" for p in patterns):
            return None if any(w is None for w in words) or not words else True
        return None
    results = {any(fnmatch.fnmatchcase(w or "", p or "") for p in patterns) for w in words}
    return results.pop() if len(results) == 1 else None
