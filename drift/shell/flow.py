"""Control flow: blocks, subshells, pipelines, ``if``, ``case``, ``&&``/``||``, loops, functions.

A branch whose condition `decide`s is walked alone; otherwise each branch
is a path under its condition and the paths merge after it. A ``for`` over
a few known words is unrolled; any other loop body is a path that may or
may not run. A function definition is remembered, and runs where called.
"""

from __future__ import annotations

from drift.shell.assignments import Assignments
from drift.shell.conditions import Conditions, case_verdict
from drift.shell.model import Launch
from drift.shell.patterns import ELSE, Hole
from drift.shell.state import (
    State,
    assign_state,
    better_launches,
    forget_iterations,
    merge_paths,
)
from drift.shell.syntax import Node, child_index, node_text, short_text
from drift.shell.values import Alt, Seg

MAX_UNROLL = 16
"""Iterations of a ``for`` loop over known words evaluated one by one."""


class ControlFlow(Conditions, Assignments):
    """Control flow, mixed into the evaluator (see the module docstring)."""

    def s_block(self, node: Node, st: State, how: str) -> None:
        """``{ ...; }``, a loop's ``do ... done``, the whole program: its statements in order."""
        self.block(node.children, st)

    def s_subshell(self, node: Node, st: State, how: str) -> None:
        """``( ... )``: its variables stay inside; what it launches counts."""
        child = st.fork()
        child.frames = ()
        self.block(node.children, child)
        if how != "background":
            st.last = child.last if child.stop is None else st.last
            if child.stop == "exec":
                st.last = st.last  # the subshell's exec is a launch, the script goes on

    def s_pipeline(self, node: Node, st: State, how: str) -> None:
        """``a | b``: each part in a subshell."""
        # Every part runs in a subshell; the server may be any part (`srv | tee log`).
        best: tuple[tuple[int, Launch], ...] = st.last
        for part in node.named_children:
            child = st.fork()
            child.last = ()
            self.statement(part, child, how)
            candidates: tuple[tuple[int, Launch], ...] = child.last
            for found in candidates:
                best = better_launches(best, found)
        st.last = best

    def s_negated(self, node: Node, st: State, how: str) -> None:
        """``! cmd``: the command runs all the same."""
        for child in node.named_children:
            self.statement(child, st, how)

    def s_function(self, node: Node, st: State, how: str) -> None:
        """``f() { ...; }``: remembered with its file, to run where it is called."""
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name_node is not None and body is not None:
            self.functions[node_text(name_node)] = (body, self.file, self.offset)

    def s_if(self, node: Node, st: State, how: str) -> None:
        """if / elif / else: each branch that may run is a path; the paths merge after."""
        branches: list[tuple[list[Node], list[Node]]] = []  # (condition, body)
        cond: list[Node] = []
        body: list[Node] = []
        else_body: list[Node] | None = None
        for child in node.children:
            field_name = node.field_name_for_child(child_index(node, child))
            if child.type == "elif_clause":
                branches.append((cond, body))
                cond, body = [], []
                seen_then = False
                for c in child.children:
                    if c.type == "then":
                        seen_then = True
                    elif c.is_named and not seen_then:
                        cond.append(c)
                    elif c.is_named:
                        body.append(c)
            elif child.type == "else_clause":
                else_body = [c for c in child.children if c.is_named]
            elif field_name == "condition":
                if child.is_named:
                    cond.append(child)
            elif child.is_named:
                body.append(child)
        branches.append((cond, body))
        self._branches(st, branches, else_body, how)

    def _branches(
        self,
        st: State,
        branches: list[tuple[list[Node], list[Node]]],
        else_body: list[Node] | None,
        how: str,
    ) -> None:
        """Walk the branches of an ``if``: (conditions, body) in order, then the ``else``."""
        paths: list[State] = []
        rest = st
        for cond_nodes, body in branches:
            for c in cond_nodes:
                self.statement(c, rest)
            if rest.stop is not None:
                break
            text = "if " + " ".join(node_text(c) for c in cond_nodes)
            decided = self.decide(cond_nodes, rest)
            if decided is True:
                taken = rest.fork()
                self.block(body, taken)
                paths.append(taken)
                rest = None  # type: ignore[assignment]
                break
            if decided is None:
                test = self.caller_test(cond_nodes, rest)
                if test is not None:
                    self.tests[short_text(text)] = test
                taken = rest.fork(short_text(text))
                skipped = rest.fork(ELSE + short_text(text))
                if len(cond_nodes) == 1:
                    self._keep_given(cond_nodes[0], False, taken, skipped)
                self.block(body, taken)
                paths.append(taken)
                rest = skipped
        if rest is not None:
            if else_body is not None:
                self.block(else_body, rest)
            paths.append(rest)
        merged = merge_paths(paths, st)
        assign_state(st, merged)

    def s_case(self, node: Node, st: State, how: str) -> None:
        """``case WORD in ...``: each arm that may match is a path, apart from the others."""
        value = node.child_by_field_name("value")
        subject = self.alts(value, st) if value is not None else []
        known = [a.pattern for a in subject]
        words = [
            "".join(p) if all(isinstance(x, str) for x in p) else None  # type: ignore[arg-type]
            for p in known
        ]
        paths: list[State] = []
        matched_all = False
        head = "case " + (node_text(value) if value is not None else "")
        items = [c for c in node.children if c.type == "case_item"]
        # Arms exclude each other: an arm's path says no other arm ran.
        labels = [
            short_text(f"{head} in {'|'.join(node_text(p) for p in _case_patterns(it))})")
            for it in items
        ]
        for item in items:
            patterns = _case_patterns(item)
            body = [
                c
                for i, c in enumerate(item.children)
                if c.is_named
                and item.field_name_for_child(i) not in ("value", "termination")
                and c.type not in ("comment",)
            ]
            texts = [self._literal_word(p, st) for p in patterns]
            label = short_text(f"{head} in {'|'.join(node_text(p) for p in patterns)})")
            verdict = case_verdict(words, texts)
            if verdict is False:
                continue
            branch = st.fork(None if verdict is True else label)
            if verdict is None:
                branch.conds += tuple(ELSE + other for other in labels if other != label)
            self.block(body, branch)
            paths.append(branch)
            if verdict is True:
                matched_all = True
                break
        if not matched_all:
            none = st.fork()
            none.conds += tuple(ELSE + label for label in labels)
            paths.append(none)
        merged = merge_paths(paths, st)
        assign_state(st, merged)

    def s_list(self, node: Node, st: State, how: str) -> None:
        """``a && b``, ``a || b``: `b` may or may not run."""
        parts = node.children
        left = parts[0]
        op = parts[1].type if len(parts) > 2 else "&&"
        right = parts[-1]
        self.statement(left, st)
        if st.stop is not None:
            return
        decided = self.decide([left], st)
        if (decided is True and op == "||") or (decided is False and op == "&&"):
            return
        text = short_text(node_text(left) + (" &&" if op == "&&" else " ||"))
        if decided is not None:
            self.statement(right, st, how)
            return
        test = self.caller_test([left], st)
        if test is not None:
            if op == "||":
                test = {**test, "negate": not test.get("negate", False)}
            self.tests[text] = test
        taken = st.fork(text)
        self.statement(right, taken, how)
        skipped = st.fork(ELSE + text)
        self._keep_given(left, op == "||", taken, skipped)
        merged = merge_paths([taken, skipped], st)
        assign_state(st, merged)

    def s_loop(self, node: Node, st: State, how: str) -> None:
        """``for``, ``while``: unrolled over a few known words; else the body runs once or not."""
        body = node.child_by_field_name("body")
        variable = node.child_by_field_name("variable")
        if node.type == "for_statement" and variable is not None:
            values = [
                c for i, c in enumerate(node.children) if node.field_name_for_child(i) == "value"
            ]
            variants = self.fields(values, st) if values else [st.args or ()]
            name = node_text(variable)
            origin = self.origin(variable)
            if (
                len(variants) == 1
                and len(variants[0]) <= MAX_UNROLL
                and not any(f.spread for f in variants[0])
            ):
                for f in variants[0]:
                    if st.stop is not None:
                        break
                    alt = Alt(tuple(Seg(p, origin) for p in f.pattern) or (Seg("", origin),))
                    self._assign(st, name, (alt,), origin)
                    if body is not None:
                        self.block(body.children, st)
                return
            self._assign(st, name, (Alt((Seg(Hole("$" + name), origin),)),), origin)
        else:
            for i, c in enumerate(node.children):
                if node.field_name_for_child(i) in ("condition", "initializer") and c.is_named:
                    self.statement(c, st)
        if body is None:
            return
        once = st.fork(short_text(f"in loop at line {self.origin(node).line}"))
        self.block(body.children, once)
        if once.stop == "exec":
            once.stop = None  # a loop body that execs: the launch counts, and so does skipping
        forget_iterations(once, st)
        merged = merge_paths([once, st.fork()], st)
        assign_state(st, merged)

    def s_test(self, node: Node, st: State, how: str) -> None:
        """``[ ... ]`` alone: it changes nothing but a ``${X:=d}`` inside."""
        self._expressions(node, st)


def _case_patterns(item: Node) -> list[Node]:
    """The patterns of one ``case`` arm (``a|b)``)."""
    return [c for i, c in enumerate(item.children) if item.field_name_for_child(i) == "value"]
