"""Evaluate a bash script without running it: what it may launch, with which environment.

The script is parsed with tree-sitter's bash grammar and walked in order
with an abstract environment. Each variable holds every value it may have
(`Binding`), each with the line that assigned it and the conditions it sits
under (``if [ "$MODE" = x ]``, ``case $1 in serve)``). Branches fork the
environment and merge it again; a branch that ``exec``s or ``exit``s ends.
Expansions are evaluated where the value is known (``${X:-d}``, ``${X:=d}``,
``${X:+w}``, ``$X``, arrays, ``$(dirname "$0")``, ``~``); anything else
(``$(cmd)``, a variable the script inherits, its arguments) stays a hole
with its text (see `drift.shell.patterns`). ``source`` and ``.`` are
followed into regular files, ``bash -c "..."`` and ``eval "..."`` strings are
parsed again, and functions run where they are called.

The launch is every ``exec`` that runs a program, and on each path that
does not exec, the last command that looks like the server (a Python
module, ``vllm``, ``sglang``, ... ranks above a helper; ``curl``, ``sleep``
and the like never count), in the foreground or with ``&``. Each launch
keeps the environment it receives at that point. Nothing here reads the
live process: the collector and the analysis match its values against the
possibilities.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from drift.shell.commands import (
    HOUSEKEEPING,
    MEANINGFUL,
    SHELLS,
    WRAPPER_VALUED,
    WRAPPERS,
    is_shell_script,
    program_name,
    server_score,
)
from drift.shell.patterns import ELSE as _ELSE
from drift.shell.patterns import Hole, Part, Pattern, pattern
from drift.shell.words import (
    _INHERITED_ENV,
    _WORDS,
    MAX_ALTERNATIVES,
    MAX_DEPTH,
    MAX_SOURCED_BYTES,
    MAX_UNROLL,
    Alt,
    Binding,
    Field,
    Launch,
    Node,
    Origin,
    Prefix,
    ScriptModel,
    Seg,
    SourcedFile,
    UnsafeToParse,
    Words,
    _dedupe,
    _field_alt,
    _Frame,
    _lit,
    _merge,
    _short,
    _shown_pattern,
    _simple_name,
    _State,
    _text,
    _walk,
    _written,
    parse,
)

# ---------------------------------------------------------------- programs

# ---------------------------------------------------------------- the evaluator


class _Evaluator(Words):
    """One evaluation of one script (and what it sources)."""

    def __init__(self, path: str, read: Callable[[str], bytes | None]) -> None:
        self.top = path
        self.read = read
        self.launches: list[Launch] = []
        self.sourced: list[SourcedFile] = []
        self.gaps: list[str] = []
        self.broken: list[str] = []
        # condition text -> a test on a variable the script was given (see caller_test)
        self.tests: dict[str, dict[str, Any]] = {}
        self.touched: set[str] = set()  # every name the script assigns or unsets somewhere
        self.opaque = False  # a line drift could not follow may have set anything
        self.functions: dict[str, tuple[Node, str, int]] = {}  # name -> body, file, offset
        self.depth = 0
        # file -> its lines, for the text shown beside a line number
        self.lines: dict[str, list[str]] = {}
        self.origins: dict[tuple[str, int], Origin] = {}
        # the word after `-c` of the command being run (bash -c STRING), if any
        self.c_string: Node | None = None
        self.keep_lines = False
        # the file and line offset of the tree being walked (bash -c strings start mid-file)
        self.file = path
        self.offset = 0

    # ------------------------------------------------------------ entry

    def run_file(self, data: bytes) -> ScriptModel:
        state = _State({}, cwd=None)
        self._walk_source(self.top, data, 0, state)
        final = state
        if final.stop is None:
            for _score, launch in final.last:
                self.launches.append(launch)
        exported = {name: bs for name, bs in final.vars.items() if any(b.exported for b in bs)}
        # Only a variable the script never sets still holds, live, what was tested.
        tests = {
            cond: test
            for cond, test in self.tests.items()
            if test["var"] not in self.touched and not self.opaque
        }
        return ScriptModel(self.launches, exported, self.sourced, self.gaps, self.broken, tests)

    def _walk_source(self, file: str, data: bytes, offset: int, st: _State) -> None:
        """Walk the code in `data`, which starts at line `offset` + 1 of `file`."""
        saved = self.file, self.offset
        self.file, self.offset = file, offset
        if file not in self.lines:
            self.lines[file] = data.decode("utf-8", "surrogateescape").split("\n")
        try:
            tree = self._parse(data)
            if tree is not None:
                self._note_errors(tree.root_node)
                self.block(tree.root_node.children, st)
        finally:
            self.file, self.offset = saved

    def _parse(self, data: bytes) -> Any:
        """The tree of `data` (lines from `self.offset` + 1), or None, noted as broken."""
        try:
            return parse(data)
        except UnsafeToParse as unsafe:
            line = unsafe.line + self.offset
            self.broken.append(
                f"{self.file}:{line}: drift cannot parse this line as bash: its parser "
                "crashes on a character past U+FFFF right after {"
            )
            return None

    def _note_errors(self, root: Node) -> None:
        """Record the first place the code is not bash (tree-sitter's or bash's own rules)."""
        problem = _syntax_problem(root)
        if problem is not None:
            row, what = problem
            line = row + 1 + self.offset
            self.broken.append(f"{self.file}:{line}: drift cannot parse this line as bash{what}")

    def _before_cr(self, node: Node) -> bool:
        row, column = node.end_point
        lines = self.lines.get(self.file) or []
        index = row + self.offset
        if not 0 <= index < len(lines):
            return False
        line = lines[index].encode("utf-8", "surrogateescape")
        return bool(line.endswith(b"\r") and column == len(line) - 1)

    # ------------------------------------------------------------ statements

    def block(self, nodes: Sequence[Node], st: _State) -> None:
        """A list of statements; a `&` after one runs it in the background."""
        count = len(nodes)
        for i, node in enumerate(nodes):
            if st.stop is not None:
                return
            if not node.is_named:
                continue
            background = i + 1 < count and nodes[i + 1].type == "&"
            if background:
                child = st.fork()
                self.statement(node, child, how="background")
                st.last = child.last
            else:
                self.statement(node, st)

    def statement(self, node: Node, st: _State, how: str = "foreground") -> None:
        kind = node.type
        handler = _STATEMENTS.get(kind)
        if handler is not None:
            handler(self, node, st, how)
        elif kind == "ERROR":
            pass  # noted once in gaps
        elif kind in ("comment", "heredoc_body", "heredoc_end", "heredoc_start"):
            pass
        else:
            # test_command, arithmetic and other expressions: look for := inside
            self._expressions(node, st)

    def _expressions(self, node: Node, st: _State) -> None:
        """Tests and arithmetic change nothing, except a ``${X:=d}`` inside them."""
        if b"=" not in bytes(node.text):
            return
        for child in node.children:
            if child.type == "expansion":
                if b"=" in bytes(child.text):
                    self.alts(child, st)
            elif child.named_child_count:
                self._expressions(child, st)

    def s_block(self, node: Node, st: _State, how: str) -> None:
        self.block(node.children, st)

    def s_subshell(self, node: Node, st: _State, how: str) -> None:
        child = st.fork()
        child.frames = ()
        self.block(node.children, child)
        if how != "background":
            st.last = child.last if child.stop is None else st.last
            if child.stop == "exec":
                st.last = st.last  # the subshell's exec is a launch, the script goes on

    def s_redirected(self, node: Node, st: _State, how: str) -> None:
        body = node.child_by_field_name("body")
        heredoc = next((c for c in node.children if c.type == "heredoc_redirect"), None)
        if body is not None and heredoc is not None and body.type == "command":
            words = [c for c in body.children if c.type == "command_name"]
            name = _text(words[0]).strip() if words else ""
            argc = sum(1 for c in body.children if c.is_named) - 1
            if program_name(name) in SHELLS and argc == 0:
                # `bash <<EOF ... EOF`: the heredoc is the script.
                content = next((c for c in heredoc.children if c.type == "heredoc_body"), None)
                if content is not None:
                    self._nested(content, st, how, child=True)
                    return
        if body is not None:
            self.statement(body, st, how)

    def s_pipeline(self, node: Node, st: _State, how: str) -> None:
        # Every part runs in a subshell; the server may be any part (`srv | tee log`).
        best: tuple[tuple[int, Launch], ...] = st.last
        for part in node.named_children:
            child = st.fork()
            child.last = ()
            self.statement(part, child, how)
            candidates: tuple[tuple[int, Launch], ...] = child.last
            for found in candidates:
                best = _better(best, found)
        st.last = best

    def s_negated(self, node: Node, st: _State, how: str) -> None:
        for child in node.named_children:
            self.statement(child, st, how)

    def s_function(self, node: Node, st: _State, how: str) -> None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name_node is not None and body is not None:
            self.functions[_text(name_node)] = (body, self.file, self.offset)

    def s_if(self, node: Node, st: _State, how: str) -> None:
        """if / elif / else: each branch that may run is a path; the paths merge after."""
        branches: list[tuple[list[Node], list[Node]]] = []  # (condition, body)
        cond: list[Node] = []
        body: list[Node] = []
        else_body: list[Node] | None = None
        for child in node.children:
            field_name = node.field_name_for_child(_index(node, child))
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
        st: _State,
        branches: list[tuple[list[Node], list[Node]]],
        else_body: list[Node] | None,
        how: str,
    ) -> None:
        paths: list[_State] = []
        rest = st
        for cond_nodes, body in branches:
            for c in cond_nodes:
                self.statement(c, rest)
            if rest.stop is not None:
                break
            text = "if " + " ".join(_text(c) for c in cond_nodes)
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
                    self.tests[_short(text)] = test
                taken = rest.fork(_short(text))
                skipped = rest.fork(_ELSE + _short(text))
                if len(cond_nodes) == 1:
                    self._keep_given(cond_nodes[0], False, taken, skipped)
                self.block(body, taken)
                paths.append(taken)
                rest = skipped
        if rest is not None:
            if else_body is not None:
                self.block(else_body, rest)
            paths.append(rest)
        merged = _merge(paths, st)
        _assign_state(st, merged)

    def s_case(self, node: Node, st: _State, how: str) -> None:
        value = node.child_by_field_name("value")
        subject = self.alts(value, st) if value is not None else []
        known = [a.pattern for a in subject]
        words = [
            "".join(p) if all(isinstance(x, str) for x in p) else None  # type: ignore[arg-type]
            for p in known
        ]
        paths: list[_State] = []
        matched_all = False
        head = "case " + (_text(value) if value is not None else "")
        items = [c for c in node.children if c.type == "case_item"]
        # Arms exclude each other: an arm's path says no other arm ran.
        labels = [
            _short(f"{head} in {'|'.join(_text(p) for p in _case_patterns(it))})") for it in items
        ]
        for item in items:
            patterns = [
                c for i, c in enumerate(item.children) if item.field_name_for_child(i) == "value"
            ]
            body = [
                c
                for i, c in enumerate(item.children)
                if c.is_named
                and item.field_name_for_child(i) not in ("value", "termination")
                and c.type not in ("comment",)
            ]
            texts = [self._literal_word(p, st) for p in patterns]
            label = _short(f"{head} in {'|'.join(_text(p) for p in patterns)})")
            verdict = _case_verdict(words, texts)
            if verdict is False:
                continue
            branch = st.fork(None if verdict is True else label)
            if verdict is None:
                branch.conds += tuple(_ELSE + other for other in labels if other != label)
            self.block(body, branch)
            paths.append(branch)
            if verdict is True:
                matched_all = True
                break
        if not matched_all:
            none = st.fork()
            none.conds += tuple(_ELSE + label for label in labels)
            paths.append(none)
        merged = _merge(paths, st)
        _assign_state(st, merged)

    def s_list(self, node: Node, st: _State, how: str) -> None:
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
        text = _short(_text(left) + (" &&" if op == "&&" else " ||"))
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
        skipped = st.fork(_ELSE + text)
        self._keep_given(left, op == "||", taken, skipped)
        merged = _merge([taken, skipped], st)
        _assign_state(st, merged)

    def _keep_given(self, cond: Node, negated: bool, taken: _State, skipped: _State) -> None:
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

    def s_loop(self, node: Node, st: _State, how: str) -> None:
        body = node.child_by_field_name("body")
        variable = node.child_by_field_name("variable")
        if node.type == "for_statement" and variable is not None:
            values = [
                c for i, c in enumerate(node.children) if node.field_name_for_child(i) == "value"
            ]
            variants = self.fields(values, st) if values else [st.args or ()]
            name = _text(variable)
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
        once = st.fork(_short(f"in loop at line {self.origin(node).line}"))
        self.block(body.children, once)
        if once.stop == "exec":
            once.stop = None  # a loop body that execs: the launch counts, and so does skipping
        merged = _merge([once, st.fork()], st)
        _assign_state(st, merged)

    # ------------------------------------------------------------ assignments

    def s_assignment(self, node: Node, st: _State, how: str) -> None:
        for name, append, value_node, origin, index in self._assignments([node]):
            self._assign_node(st, name, append, value_node, origin, index)

    def s_assignments(self, node: Node, st: _State, how: str) -> None:
        for name, append, value_node, origin, index in self._assignments(node.named_children):
            self._assign_node(st, name, append, value_node, origin, index)

    def _assignments(
        self, nodes: Iterable[Node]
    ) -> Iterator[tuple[str, bool, Node | None, Origin, Node | None]]:
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
                _text(name_node),
                append,
                node.child_by_field_name("value"),
                self.origin(node),
                index,
            )

    def _assign_node(
        self,
        st: _State,
        name: str,
        append: bool,
        value: Node | None,
        origin: Origin,
        index: Node | None = None,
        exported: bool | None = None,
    ) -> None:
        if value is not None and value.type == "array":
            elems = [
                e for c in value.named_children if c.type != "comment" for e in self._elem(c, st)
            ]
            if append:
                old = self._lookup(st, name)
                new: list[Binding] = []
                for b in old:
                    base: tuple[tuple[Alt, ...], ...] = ()
                    if b.elems is not None:
                        base = b.elems
                    elif b.alts and b.kind == "set":
                        base = (b.alts,)  # X=a; X+=(b) makes X the array (a b)
                    new.append(
                        Binding(
                            None,
                            origin,
                            b.exported,
                            _dedupe(b.conds + st.conds),
                            elems=base + tuple(elems),
                        )
                    )
                self._set(st, name, tuple(new), origin, exported)
                return
            binding = Binding(None, origin, False, st.conds, elems=tuple(elems))
            self._set(st, name, (binding,), origin, exported)
            return
        alts = self._value_alts(value, st, origin)
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
            alts = _dedupe(joined)[:MAX_ALTERNATIVES]
            self._assign(st, name, alts, origin, exported)
            return
        self._assign(st, name, alts, origin, exported, _written(value))

    def _elem(self, node: Node, st: _State) -> list[tuple[Alt, ...]]:
        """Array elements from one word of ``(...)``: unquoted expansions split into several.

        Where the word's values split into the same number of words, element i
        has each value's i-th word as an alternative; otherwise it is one
        element of unknown text.
        """
        variants = self.fields([node], st)
        sizes = {len(v) for v in variants}
        if len(sizes) != 1:
            if len(variants) == 1:
                return [(_field_alt(f),) for f in variants[0]]
            return [(Alt((Seg(Hole(_text(node)), self.origin(node), split=True),)),)]
        size = sizes.pop()
        return [_dedupe(_field_alt(v[i]) for v in variants) for i in range(size)]

    def _value_alts(self, value: Node | None, st: _State, origin: Origin) -> tuple[Alt, ...]:
        if value is None:
            return (Alt((Seg("", origin),)),)
        alts = self.alts(value, st)
        if self._before_cr(value):
            # CRLF line ends: bash keeps the carriage return in the value.
            alts = [Alt(a.segs + (Seg("\r", origin),), a.conds) for a in alts]
        # Each piece keeps the line that wrote its text (CMD="$CMD --x" keeps the
        # earlier words' lines); what no line wrote (the caller's value) is this one's.
        return _dedupe(
            Alt(
                tuple(Seg(s.part, s.origin or origin) for s in a.segs if not s.brk)
                or (Seg("", origin),),
                a.conds,
            )
            for a in alts
        )

    def _assign(
        self,
        st: _State,
        name: str,
        alts: tuple[Alt, ...],
        origin: Origin,
        exported: bool | None = None,
        written: str | None = None,
    ) -> None:
        binding = Binding(alts, origin, False, st.conds, written=written)
        self._set(st, name, (binding,), origin, exported)

    def _set(
        self,
        st: _State,
        name: str,
        bindings: tuple[Binding, ...],
        origin: Origin,
        exported: bool | None,
    ) -> None:
        """Give `name` new values, keeping (or setting) its export attribute."""
        self.touched.add(name)
        old = st.vars.get(name)
        if exported is None:
            if st.allexport:
                exported = True
            elif old is None:
                exported = name in _INHERITED_ENV
            else:
                exported = any(b.exported for b in old)
        export_origin = None
        if old is not None and exported:
            export_origin = next((b.export_origin for b in old if b.export_origin), None)
        if st.allexport or (old is None and exported):
            export_origin = export_origin or origin
        if not exported:
            export_origin = None
        st.vars[name] = tuple(
            b
            if b.exported == exported and b.export_origin == export_origin
            else Binding(
                b.alts, b.origin, exported, b.conds, b.kind, b.elems, export_origin, b.written
            )
            for b in bindings
        )

    # ------------------------------------------------------------ declarations

    def s_declaration(self, node: Node, st: _State, how: str) -> None:
        keyword = _text(node.children[0]) if node.children else ""
        in_function = bool(st.frames)
        export, unexport, is_global, array = keyword == "export", False, False, False
        skip = False
        for child in node.children[1:]:
            if child.type == "word" and _text(child).startswith(("-", "+")):
                flag = _text(child)
                letters = flag[1:]
                if any(c in letters for c in "fFp"):
                    skip = True
                if keyword == "export" and "n" in letters:
                    export, unexport = False, True
                if keyword != "export" and "x" in letters:
                    export, unexport = flag[0] == "-", flag[0] == "+"
                if "g" in letters:
                    is_global = True
                if "a" in letters or "A" in letters:
                    array = True
        if skip:
            return
        del array
        local = keyword == "local" or (
            keyword in ("declare", "typeset") and in_function and not is_global
        )
        origin = self.origin(node)
        for child in node.children[1:]:
            if child.type == "variable_assignment":
                items = list(self._assignments([child]))
                for name, append, value, where, index in items:
                    if local:
                        self._make_local(st, name)
                    self._assign_node(
                        st,
                        name,
                        append,
                        value,
                        where,
                        index,
                        exported=True if export else (False if unexport else None),
                    )
                    if export:
                        self._mark_export(st, name, where)
            elif child.type in ("variable_name", "word") and not _text(child).startswith(
                ("-", "+")
            ):
                name = _text(child)
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                    continue
                if local:
                    self._make_local(st, name)
                    if name not in st.vars or st.vars[name] is None:
                        self.touched.add(name)
                        st.vars[name] = (Binding(None, origin, False, st.conds),)
                if export:
                    self._mark_export(st, name, self.origin(child))
                elif unexport:
                    st.vars[name] = tuple(
                        replace(b, exported=False, export_origin=None)
                        for b in self._lookup(st, name)
                    )
            elif child.type in (
                "command_substitution",
                "simple_expansion",
                "expansion",
                "string",
                "concatenation",
            ):
                self._export_dynamic(child, st, export)

    def _mark_export(self, st: _State, name: str, origin: Origin) -> None:
        st.vars[name] = tuple(
            replace(b, exported=True, export_origin=b.export_origin or origin)
            for b in self._lookup(st, name)
        )

    def _make_local(self, st: _State, name: str) -> None:
        if not st.frames:
            return
        frame = st.frames[-1]
        if name not in frame.saved:
            frame.saved[name] = st.vars.get(name)

    def _export_dynamic(self, node: Node, st: _State, export: bool) -> None:
        """``export $(grep -v '^#' .env | xargs)``: KEY=VALUE lines of a file, each exported."""
        origin = self.origin(node)
        path = None
        if node.type == "command_substitution":
            path = self._file_in_command(node, st)
        if path is None:
            self._unknown_assignments(
                st, origin, f"{_short(_text(node))} sets variables drift cannot read"
            )
            return
        data = self._read_source(path, origin)
        if data is None:
            self._unknown_assignments(st, origin, f"reads {path}, {_unreadable(path)}")
            return
        self.lines.setdefault(path, data.decode("utf-8", "surrogateescape").split("\n"))
        for number, raw in enumerate(data.decode("utf-8", "surrogateescape").split("\n"), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            line = line.removeprefix("export ").strip()
            name, eq, value = line.partition("=")
            if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                continue
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            where = Origin(path, number, line)
            self._assign(
                st, name, (Alt((Seg(value, where),)),), where, exported=True if export else None
            )
            if export:
                self._mark_export(st, name, where)

    def _file_in_command(self, node: Node, st: _State) -> str | None:
        """The file a ``$(grep ... FILE | xargs)``-style command reads KEY=VALUE lines from."""
        candidates: list[str] = []
        for sub in _walk(node):
            parent = sub.parent
            if (
                sub.type in _WORDS
                and parent is not None
                and parent.type in ("command", "file_redirect")
            ):
                if sub.parent.type == "command" and sub.parent.child_by_field_name("name") is sub:
                    continue
                text = self._literal_word(sub, st)
                if text and not text.startswith("-"):
                    candidates.append(text)
        for text in candidates:
            path = self._resolve(text, st)
            if path is not None and os.path.isfile(path):
                return path
        return None

    def _unknown_assignments(self, st: _State, origin: Origin, why: str) -> None:
        """A line that may set any variable: every value known so far may have been replaced."""
        self.gaps.append(f"{origin.file}:{origin.line}: {why}")
        unknown = Binding(
            (Alt((Seg(Hole(origin.text or "?"), origin, split=True),)),),
            origin,
            True,
            st.conds,
            kind="unknown",
        )
        for name in list(st.vars):
            st.vars[name] = _dedupe((*st.vars[name], unknown))[-MAX_ALTERNATIVES:]
        st.vars["\0unknown"] = (unknown,)
        self.opaque = True  # any variable may have changed: no test can be read off the process

    def s_unset(self, node: Node, st: _State, how: str) -> None:
        functions = False
        for child in node.children[1:]:
            text = _text(child)
            if text.startswith("-"):
                functions = functions or "f" in text
                continue
            if functions:
                self.functions.pop(text, None)
                continue
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
                self.touched.add(text)
                st.vars[text] = (Binding(None, self.origin(child), False, st.conds),)

    # ------------------------------------------------------------ simple commands

    def s_command(self, node: Node, st: _State, how: str) -> None:
        prefix: list[Prefix] = []
        words: list[Node] = []
        for i, child in enumerate(node.children):
            if child.type == "variable_assignment" and not words:
                for name, _append, value, origin, _subscript in self._assignments([child]):
                    alts = self._value_alts(value, st, origin)
                    prefix.append((name, alts, origin, _written(value)))
            elif child.type == "command_name":
                words.extend(child.named_children or [child])
            elif child.is_named and child.type not in (
                "file_redirect",
                "heredoc_redirect",
                "herestring_redirect",
                "comment",
            ):
                if node.field_name_for_child(i) in ("argument", "name") or words:
                    words.append(child)
        if not words:
            for name, alts, origin, written in prefix:
                self._assign(st, name, alts, origin, written=written)
            return
        if not prefix and _inert(words, self.functions):
            return  # echo, mkdir, sleep ...: nothing they do reaches the service
        variants = self.fields(words, st)
        self.c_string = next(
            (words[i + 1] for i in range(len(words) - 1) if _text(words[i]) == "-c"), None
        )
        self.run_command(variants, prefix, node, st, how)

    def run_command(
        self,
        variants: list[tuple[Field, ...]],
        prefix: list[Prefix],
        node: Node,
        st: _State,
        how: str,
    ) -> None:
        first = variants[0]
        name = _lit(first[0]) if first else None
        args = first[1:]
        origin = self.origin(node)
        if name in ("exec",):
            self._exec(variants, prefix, node, st)
            return
        if name in ("source", "."):
            if args:
                self._source(args[0], st, origin, args[1:])
            return
        if name == "set":
            self._set_builtin(args, st)
            return
        if name == "eval":
            self._eval(node, variants, st, how)
            return
        if name in ("cd", "pushd"):
            target = _lit(args[0]) if args else None
            st.cwd = self._resolve(target, st) if target and target != "-" else None
            return
        if name in ("exit",):
            st.stop = "exit"
            return
        if name == "return":
            st.stop = "return" if st.frames else "exit"
            return
        if name in ("read", "mapfile", "readarray", "getopts", "printf"):
            self._read_builtin(name, args, st, origin)
            return
        if name == "shift":
            st.args = st.args[1:] if st.args else st.args
            return
        if name in self.functions and self.depth < MAX_DEPTH:
            self._call(name, args, st, how)
            return
        self._candidate(variants, prefix, origin, st, how, source=_command_text(node))

    def _candidate(
        self,
        variants: list[tuple[Field, ...]],
        prefix: list[Prefix],
        origin: Origin,
        st: _State,
        how: str,
        via_exec: bool = False,
        cleared: bool = False,
        source: str = "",
    ) -> None:
        """A command that may be the service: shells and scripts are followed, else a launch."""
        stripped: list[tuple[Field, ...]] = []
        changes: list[tuple[list[tuple[str, Field]], list[str], bool]] = []
        for v in variants:
            program, env_add, env_del, clear = _strip_wrappers(v)
            stripped.append(program)
            changes.append((env_add, env_del, clear))
        program = stripped[0]
        head = _lit(program[0]) if program else None
        score = server_score([_lit(f) if not f.spread else None for f in program])
        best = max((found for found, _launch in st.last), default=0)
        nested = (
            head is not None
            and self.depth < MAX_DEPTH
            and (program_name(head) in SHELLS or head.startswith(("/", "./", "../")))
        )
        if not via_exec and not nested and (score == 0 or score < best):
            return  # not the service on this path: skip building its environment
        env: dict[str, tuple[Binding, ...]] = {} if cleared else self._environment(st, prefix)
        for env_add, env_del, clear in changes:
            if clear and not cleared:
                cleared = True
                env = {}
            for key, f in env_add:
                env[key] = (
                    Binding(
                        (Alt(tuple(Seg(p, f.origin) for p in f.pattern)),),
                        f.origin,
                        True,
                        f.conds,
                        export_origin=f.origin,
                    ),
                )
            for key in env_del:
                env[key] = (Binding(None, origin, False),)
        if head is not None and program_name(head) in SHELLS and self.depth < MAX_DEPTH:
            if self._shell_program(program, env, st, how, via_exec, origin):
                return
        if head is not None and head.startswith(("/", "./", "../")) and self.depth < MAX_DEPTH:
            path = self._resolve(head, st)
            if path is not None and is_shell_script(path):
                if self._child_script(path, program[1:], env, st, how, via_exec, origin):
                    return
        if via_exec:
            launch = Launch(
                tuple(stripped), env, origin, st.conds, "exec", cleared, tuple(variants), source
            )
            self.launches.append(launch)
            st.stop = "exec"
            return
        if score == 0:
            return
        launch = Launch(
            tuple(stripped),
            env,
            origin,
            st.conds,
            "background" if how == "background" else "foreground",
            cleared,
            tuple(variants),
            source,
        )
        st.last = _better(st.last, (score, launch))

    def _environment(self, st: _State, prefix: Sequence[Prefix]) -> dict[str, tuple[Binding, ...]]:
        env = {
            name: tuple(b for b in bs if b.exported)
            for name, bs in st.vars.items()
            if not name.startswith("\0") and any(b.exported for b in bs)
        }
        unknown = st.vars.get("\0unknown")
        if unknown:
            env["\0unknown"] = unknown
        for name, alts, where, written in prefix:
            env[name] = (
                Binding(alts, where, True, st.conds, export_origin=where, written=written),
            )
        return env

    def _exec(
        self,
        variants: list[tuple[Field, ...]],
        prefix: list[Prefix],
        node: Node,
        st: _State,
    ) -> None:
        rest: list[tuple[Field, ...]] = []
        cleared = False
        for v in variants:
            k = 1
            while k < len(v):
                word = _lit(v[k])
                if word is None or not word.startswith("-") or word == "-":
                    break
                k += 1
                if word == "--":
                    break
                if "c" in word:
                    cleared = True
                if "a" in word:
                    k += 1
            rest.append(v[k:])
        if not any(rest):
            # `exec >log 2>&1` only redirects; prefix assignments then stay in the shell.
            for name, alts, origin, written in prefix:
                self._assign(st, name, alts, origin, written=written)
            return
        self._candidate(
            rest,
            prefix,
            self.origin(node),
            st,
            "foreground",
            via_exec=True,
            cleared=cleared,
            source=_command_text(node),
        )

    def _shell_program(
        self,
        program: tuple[Field, ...],
        env: dict[str, tuple[Binding, ...]],
        st: _State,
        how: str,
        via_exec: bool,
        origin: Origin,
    ) -> bool:
        """``bash -c "..."`` (parsed again) or ``bash FILE`` (followed): True if handled."""
        k = 1
        while k < len(program):
            word = _lit(program[k])
            if word is None:
                return False
            if word == "-c" or (word.startswith("-") and not word.startswith("--") and "c" in word):
                if k + 1 >= len(program):
                    return False
                scripts = self._inline_scripts(program[k + 1], st)
                if not scripts:
                    return self._simple_command_string(env, st, how, via_exec, origin)
                children: list[_State] = []
                for script in scripts:
                    child = self._child_state(st, env)
                    self._walk_string(script, origin, child, how)
                    children.append(child)
                for child in children:
                    self._after_child(child, st, via_exec)
                return True
            if word.startswith("-"):
                k += 1
                continue
            path = self._resolve(word, st)
            if path is None:
                return False
            return self._child_script(path, program[k + 1 :], env, st, how, via_exec, origin)
        return False

    def _inline_scripts(self, field: Field, st: _State) -> list[str]:
        """The code of ``bash -c STRING``: its texts if STRING is written here, else none.

        A string written inline keeps its lines: line N of the code is line N
        of the file, counting from ``bash -c``. Values the outer shell puts in
        (``'${MODEL}'``) give one text per value drift knows; a part it does
        not know stays as written. A string from a variable (``"$CMD"``) has
        no such lines, so drift does not read it as code.
        """
        node = self.c_string
        if node is None or not (
            node.type == "raw_string"
            or (node.type == "string" and any(c.type == "string_content" for c in node.children))
        ):
            return []
        del field  # its value joined continued lines; read the string again keeping them
        self.keep_lines = True
        try:
            options = [a.pattern for a in self.alts(node, st)]
        finally:
            self.keep_lines = False
        return list(dict.fromkeys(_shown_pattern(o) for o in options))[:8]

    def _simple_command_string(
        self,
        env: dict[str, tuple[Binding, ...]],
        st: _State,
        how: str,
        via_exec: bool,
        origin: Origin,
    ) -> bool:
        """``bash -c "$CMD"`` where every value of CMD is one plain command line.

        Such a string runs as its words, so it is split like an unquoted
        ``$CMD``: each word keeps the line that put it into CMD (a value drift
        does not know stays one unknown word). A value with quotes, operators
        or expansions of its own is code drift does not read (False).
        """
        node = self.c_string
        if node is None:
            return False
        alts = self.alts(node, st)
        plain = re.compile(r"[^;&|<>()$`'\"\\\n#*?\[]*")
        for alt in alts:
            for seg in alt.segs:
                if isinstance(seg.part, str) and not plain.fullmatch(seg.part):
                    return False
        variants = [
            self._split(node, Alt(tuple(replace(seg, split=True) for seg in a.segs), a.conds))
            for a in alts
        ]
        variants = [v for v in dict.fromkeys(variants) if v]
        if not variants:
            return False
        child = self._child_state(st, env)
        self._candidate(variants, [], origin, child, how, via_exec=via_exec)
        self._after_child(child, st, via_exec)
        return True

    def _child_state(self, st: _State, env: dict[str, tuple[Binding, ...]]) -> _State:
        child = _State({k: v for k, v in env.items()}, st.conds, False, st.cwd, None, (), None, ())
        return child

    def _after_child(self, child: _State, st: _State, via_exec: bool) -> None:
        if child.stop is None:
            for scored in child.last:
                if via_exec:
                    self.launches.append(scored[1])
                else:
                    st.last = _better(st.last, scored)
        if via_exec:
            st.stop = "exec"

    def _walk_string(self, script: str, origin: Origin, st: _State, how: str) -> None:
        """A script given as a string (``bash -c``, ``eval``): its lines count from `origin`."""
        self.depth += 1
        saved = self.file, self.offset
        try:
            data = script.encode("utf-8", "surrogateescape")
            self.offset = origin.line - 1
            tree = self._parse(data)
            if tree is not None:
                self._note_errors(tree.root_node)
                self.block(tree.root_node.children, st)
        finally:
            self.file, self.offset = saved
            self.depth -= 1

    def _child_script(
        self,
        path: str,
        args: Sequence[Field],
        env: dict[str, tuple[Binding, ...]],
        st: _State,
        how: str,
        via_exec: bool,
        origin: Origin,
    ) -> bool:
        data = self._read_source(path, origin)
        if data is None:
            return False
        child = self._child_state(st, env)
        child.args = tuple(args)
        self.depth += 1
        try:
            self._walk_source(path, data, 0, child)
        finally:
            self.depth -= 1
        self._after_child(child, st, via_exec)
        return True

    def _nested(self, content: Node, st: _State, how: str, child: bool) -> None:
        """A heredoc fed to a shell: its lines are code at their own place in this file."""
        text = _text(content)
        origin = self.origin(content)
        env = self._environment(st, [])
        inner = self._child_state(st, env) if child else st
        self._walk_string(text, replace(origin, line=origin.line), inner, how)
        self._after_child(inner, st, via_exec=False)

    def _call(self, name: str, args: Sequence[Field], st: _State, how: str) -> None:
        body, file, offset = self.functions[name]
        saved = self.file, self.offset
        frame = _Frame(tuple(args))
        outer_args = st.args
        st.frames = (*st.frames, frame)
        st.args = tuple(args)
        self.depth += 1
        self.file, self.offset = file, offset
        try:
            if how == "background":
                child = st.fork()
                self.block(body.children, child)
                st.last = child.last
            else:
                self.block(body.children, st)
        finally:
            self.depth -= 1
            self.file, self.offset = saved
        if st.stop == "return":
            st.stop = None
        st.frames = st.frames[:-1]
        st.args = outer_args
        for var, old in frame.saved.items():
            if old is None:
                st.vars.pop(var, None)
            else:
                st.vars[var] = old

    def _source(self, target: Field, st: _State, origin: Origin, args: Sequence[Field]) -> None:
        path_text = _lit(target)
        path = self._resolve(path_text, st, search=True) if path_text else None
        data = self._read_source(path, origin) if path else None
        if data is None or path is None:
            shown = path_text or "".join(
                p if isinstance(p, str) else p.text for p in target.pattern
            )
            self._unknown_assignments(st, origin, f"sources {shown}, {_unreadable(path)}")
            return
        if self.depth >= MAX_DEPTH:
            self._unknown_assignments(st, origin, f"sources {path} too deeply")
            return
        self.depth += 1
        outer_args = st.args
        if args:
            st.args = tuple(args)
        try:
            self._walk_source(path, data, 0, st)
        finally:
            self.depth -= 1
            st.args = outer_args
        if st.stop == "return":
            st.stop = None

    def _read_source(self, path: str | None, origin: Origin) -> bytes | None:
        if path is None:
            return None
        for known in self.sourced:
            if known.path == path:
                return known.data
        data = self.read(path)
        if data is None:
            return None
        self.sourced.append(SourcedFile(path, data, origin))
        return data

    def _set_builtin(self, args: Sequence[Field], st: _State) -> None:
        k = 0
        while k < len(args):
            word = _lit(args[k])
            k += 1
            if word is None:
                return
            if word == "--":
                st.args = tuple(args[k:])
                return
            if len(word) < 2 or word[0] not in "-+":
                st.args = tuple(args[k - 1 :])
                return
            on = word[0] == "-"
            if "a" in word[1:] and not word[1:].startswith("o"):
                st.allexport = on
            if word.endswith("o") and k < len(args):
                if _lit(args[k]) == "allexport":
                    st.allexport = on
                k += 1

    def _read_builtin(self, name: str, args: Sequence[Field], st: _State, origin: Origin) -> None:
        names: list[str] = []
        k = 0
        valued = {"read": "adnNptu", "mapfile": "dnOsuCc", "readarray": "dnOsuCc", "printf": "v"}
        while k < len(args):
            word = _lit(args[k])
            k += 1
            if word is None:
                continue
            if word.startswith("-") and len(word) > 1:
                if name == "printf" and word == "-v" and k < len(args):
                    target = _lit(args[k])
                    if target:
                        names.append(target.split("[")[0])
                    break
                if word[-1] in valued.get(name, ""):
                    k += 1
                continue
            if name == "printf":
                break
            if name == "getopts":
                if k < len(args):
                    target = _lit(args[k])
                    if target:
                        names.append(target)
                break
            names.append(word)
        for var in names:
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                self._assign(
                    st, var, (Alt((Seg(Hole(f"{name} {var}", "command"), origin),)),), origin
                )

    def _eval(self, node: Node, variants: list[tuple[Field, ...]], st: _State, how: str) -> None:
        text: list[str] = []
        args = variants[0][1:]
        for f in args:
            value = _lit(f)
            if value is None:
                origin = self.origin(node)
                self._unknown_assignments(st, origin, "eval of a value drift cannot know")
                if st.stop is None:
                    launch = Launch(
                        tuple(variants),
                        self._environment(st, []),
                        origin,
                        st.conds,
                        "foreground",
                        False,
                        tuple(variants),
                    )
                    st.last = _better(st.last, (1, launch))
                return
            text.append(value)
        if self.depth >= MAX_DEPTH:
            return
        self._walk_string(" ".join(text), self.origin(node), st, how)

    def s_test(self, node: Node, st: _State, how: str) -> None:
        self._expressions(node, st)

    # ------------------------------------------------------------ conditions

    def decide(self, nodes: Sequence[Node], st: _State) -> bool | None:
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
            if name is not None and _text(name) in ("true", ":"):
                return True
            if name is not None and _text(name) == "false":
                return False
        return None

    def caller_test(self, nodes: Sequence[Node], st: _State) -> dict[str, Any] | None:
        """A test on one variable the script was given and has not touched, for the live env.

        ``[ "$ROLE" = prefill ]``, ``[[ ${DP:-0} == 1 ]]``, ``[ -z "$X" ]``: the
        process inherits that variable unchanged, so its live environment tells
        which way the test went. None for anything else.
        """
        if len(nodes) != 1:
            return None
        node, negate = nodes[0], False
        if node.type == "negated_command" and node.named_child_count == 1:
            node, negate = node.named_children[0], True
        if node.type != "test_command" or node.named_child_count != 1:
            return None
        expr = node.named_children[0]
        glob = _text(node).startswith("[[")
        if expr.type == "unary_expression" and expr.children and expr.named_children:
            op = _text(expr.children[0])
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

    def _decide_expr(self, node: Node, st: _State) -> bool | None:
        if node.type == "unary_expression" and node.children and node.named_children:
            op = _text(node.children[0])
            if op in ("-f", "-e", "-r", "-s", "-d"):
                # A file the script tests for: if it is there now, it was there at start.
                path = self._literal_word(node.named_children[-1], st)
                resolved = self._resolve(path, st) if path else None
                if resolved is not None and os.path.exists(resolved):
                    return True
                return None
        if node.type in _WORDS:
            # [ "$X" ]: true if not empty
            values = self._literals(node, st)
            if values is None:
                return None
            results = {v != "" for v in values}
            return results.pop() if len(results) == 1 else None
        if node.type == "parenthesized_expression" and node.named_child_count == 1:
            return self._decide_expr(node.named_children[0], st)
        if node.type == "binary_expression":
            parts = _binary(node)
            if parts is None:
                return None
            left, op, right = parts
            if op in ("&&", "-a", "||", "-o"):
                a, b = self._decide_expr(left, st), self._decide_expr(right, st)
                if op in ("&&", "-a"):
                    if a is False or b is False:
                        return False
                    return True if a and b else None
                if a is True or b is True:
                    return True
                return False if a is False and b is False else None
            if op not in ("=", "==", "!="):
                return None
            lefts = self._literals(left, st)
            right_text = self._literal_word(right, st)
            if lefts is None or right_text is None:
                return None
            glob = right.type in ("extglob_pattern", "word", "regex") and any(
                c in right_text for c in "*?["
            )
            results = {
                (fnmatch.fnmatchcase(v, right_text) if glob else v == right_text) for v in lefts
            }
            if len(results) != 1:
                return None
            result = results.pop()
            return result if op != "!=" else not result
        if node.type == "unary_expression":
            op_node = node.children[0] if node.children else None
            operand = node.named_children[-1] if node.named_children else None
            if op_node is None or operand is None:
                return None
            op = _text(op_node)
            if op not in ("-z", "-n"):
                return None
            values = self._literals(operand, st)
            if values is None:
                return None
            results = {(v == "") == (op == "-z") for v in values}
            return results.pop() if len(results) == 1 else None
        return None

    # ------------------------------------------------------------ words


def _better(
    current: tuple[tuple[int, Launch], ...], new: tuple[int, Launch]
) -> tuple[tuple[int, Launch], ...]:
    """The server-looking commands of a path after `new` runs: the latest of the best kind."""
    best = max((score for score, _ in current), default=0)
    if new[0] >= best:
        return (new,)
    return current


def _strip_wrappers(
    argv: tuple[Field, ...],
) -> tuple[tuple[Field, ...], list[tuple[str, Field]], list[str], bool]:
    """The program a wrapper chain runs: ``env K=V numactl -N0 nohup srv`` -> ``srv``.

    Returns the program's fields, ``env``'s assignments and removals, and
    whether the environment was cleared (``env -i``).
    """
    k = 0
    added: list[tuple[str, Field]] = []
    removed: list[str] = []
    cleared = False
    while k < len(argv):
        word = _lit(argv[k])
        if word is None:
            break
        base = program_name(word)
        if base not in WRAPPERS:
            break
        if base == "command" and k + 1 < len(argv) and _lit(argv[k + 1]) in ("-v", "-V"):
            break
        if base in ("su",):
            break
        valued = WRAPPER_VALUED.get(base, frozenset())
        k += 1
        positional_skips = 1 if base in ("timeout",) else 0
        while k < len(argv):
            w = _lit(argv[k])
            if w is None:
                break
            if base == "env":
                match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", w, re.S)
                if w in ("-i", "--ignore-environment", "-"):
                    cleared = True
                    added.clear()
                    k += 1
                    continue
                if w in ("-u", "--unset") and k + 1 < len(argv):
                    name = _lit(argv[k + 1])
                    if name:
                        removed.append(name)
                    k += 2
                    continue
                if w.startswith("-u") and len(w) > 2:
                    removed.append(w[2:])
                    k += 1
                    continue
                if match is not None:
                    f = argv[k]
                    value = _pattern_after(f.pattern, len(match.group(1)) + 1)
                    added.append((match.group(1), replace(f, pattern=value)))
                    k += 1
                    continue
            if base == "taskset" and not w.startswith("-") and positional_skips == 0:
                # taskset MASK cmd (without -c)
                if re.fullmatch(r"(0x)?[0-9a-fA-F,-]+", w):
                    k += 1
                    break
            if w == "--":
                k += 1
                break
            if w.startswith("-") and len(w) > 1:
                k += 1
                if w in valued or (w[:2] in valued and len(w) == 2):
                    k += 1
                continue
            if positional_skips:
                positional_skips -= 1
                k += 1
                continue
            break
    return argv[k:], added, removed, cleared


def _pattern_after(p: Pattern, skip: int) -> Pattern:
    """The pattern without its first `skip` literal characters (``K=`` of ``K=V``)."""
    out: list[Part] = []
    for part in p:
        if skip and isinstance(part, str):
            cut = min(skip, len(part))
            part, skip = part[cut:], skip - cut
        out.append(part)
    return pattern(*out) or ("",)


def _case_patterns(item: Node) -> list[Node]:
    return [c for i, c in enumerate(item.children) if item.field_name_for_child(i) == "value"]


def _case_verdict(words: list[str | None], patterns: list[str | None]) -> bool | None:
    """Does a case item match? True/False when the word and patterns are all known."""
    if not words or any(w is None for w in words) or any(p is None for p in patterns):
        if any(p == "*" for p in patterns):
            return None if any(w is None for w in words) or not words else True
        return None
    results = {any(fnmatch.fnmatchcase(w or "", p or "") for p in patterns) for w in words}
    return results.pop() if len(results) == 1 else None


def _assign_state(target: _State, source: _State) -> None:
    target.vars = source.vars
    target.allexport = source.allexport
    target.cwd = source.cwd
    target.args = source.args
    target.stop = source.stop
    target.last = source.last
    target.frames = source.frames


def _binary(node: Node) -> tuple[Node, str, Node] | None:
    """(left, operator, right) of a test's binary expression, if all three are there."""
    left = node.child_by_field_name("left")
    right = node.child_by_field_name("right")
    op = node.child_by_field_name("operator")
    if left is None or right is None or op is None:
        return None
    return left, _text(op), right


def _variable_reference(node: Node) -> tuple[str, str | None] | None:
    """(NAME, default) for ``$NAME``, ``"${NAME}"``, ``${NAME:-d}`` with a literal d; else None."""
    if node.type == "string" and node.named_child_count == 1:
        node = node.named_children[0]
    if node.type == "simple_expansion":
        name = _simple_name(node)
        return (name, None) if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else None
    if node.type != "expansion":
        return None
    inner = [c for c in node.children if c.type not in ("${", "}")]
    if not inner or inner[0].type != "variable_name":
        return None
    name = _text(inner[0])
    if len(inner) == 1:
        return name, None
    if _text(inner[1]) != ":-":
        return None
    rest = inner[2:]
    if not rest:
        return name, ""
    if len(rest) == 1 and rest[0].type in ("word", "number", "raw_string"):
        text = _text(rest[0])
        return name, text[1:-1] if rest[0].type == "raw_string" else text
    return None


def _emptiness_test(node: Node) -> tuple[str, bool] | None:
    """(NAME, True) for ``[ -z "$NAME" ]``, (NAME, False) for ``[[ -n $NAME ]]``, else None.

    ``${NAME:-}`` counts as NAME; ``!`` before the test swaps the answer.
    """
    negate = False
    if node.type == "negated_command" and node.named_child_count == 1:
        node, negate = node.named_children[0], True
    if node.type != "test_command" or node.named_child_count != 1:
        return None
    expr = node.named_children[0]
    if expr.type != "unary_expression" or not expr.children:
        return None
    op = _text(expr.children[0])
    operand = expr.named_children[-1] if expr.named_children else None
    if op not in ("-z", "-n") or operand is None:
        return None
    if operand.type == "string" and operand.named_child_count == 1:
        operand = operand.named_children[0]
    if operand.type == "simple_expansion":
        name = _simple_name(operand)
    elif operand.type == "expansion":
        inner = [c for c in operand.children if c.type not in ("${", "}")]
        if not inner or inner[0].type != "variable_name":
            return None
        rest = [_text(c) for c in inner[1:]]
        if rest not in ([], [":-"], ["-"]):
            return None
        name = _text(inner[0])
    else:
        return None
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return None
    return name, (op == "-z") != negate


def _syntax_problem(root: Node) -> tuple[int, str] | None:
    """(row, why) of the first error tree-sitter recovered from, or None.

    Only the branches that hold an error are walked. What tree-sitter
    accepts and bash does not (a stray ``fi``, an empty ``then fi``) is
    left to ``bash -n`` (`bash_refuses`).
    """
    node = root
    while node.has_error:
        if node.type == "ERROR" or node.is_missing:
            return node.start_point[0], ""
        broken = next((c for c in node.children if c.has_error or c.is_missing), None)
        if broken is None:
            return node.start_point[0], ""
        node = broken
    return None


def _inert(words: Sequence[Node], functions: Mapping[str, Any]) -> bool:
    """True for a housekeeping command whose words cannot change anything (no ``${X:=d}``)."""
    head = words[0]
    if head.type != "word":
        return False
    name = _text(head)
    if name not in HOUSEKEEPING or name in MEANINGFUL or name in functions:
        return False
    return not any("=" in _text(w) and "${" in _text(w) for w in words[1:])


def _command_text(node: Node) -> str:
    """A command's source text on one line: continuations joined, blanks collapsed."""
    text = _text(node).replace("\\\n", " ")
    return " ".join(text.split())


def _index(parent: Node, child: Node) -> int:
    for i, c in enumerate(parent.children):
        if c.id == child.id:
            return i
    return -1


_STATEMENTS: dict[str, Callable[[_Evaluator, Node, _State, str], None]] = {
    "program": _Evaluator.s_block,
    "compound_statement": _Evaluator.s_block,
    "do_group": _Evaluator.s_block,
    "subshell": _Evaluator.s_subshell,
    "redirected_statement": _Evaluator.s_redirected,
    "pipeline": _Evaluator.s_pipeline,
    "negated_command": _Evaluator.s_negated,
    "function_definition": _Evaluator.s_function,
    "if_statement": _Evaluator.s_if,
    "case_statement": _Evaluator.s_case,
    "list": _Evaluator.s_list,
    "for_statement": _Evaluator.s_loop,
    "c_style_for_statement": _Evaluator.s_loop,
    "while_statement": _Evaluator.s_loop,
    "variable_assignment": _Evaluator.s_assignment,
    "variable_assignments": _Evaluator.s_assignments,
    "declaration_command": _Evaluator.s_declaration,
    "unset_command": _Evaluator.s_unset,
    "command": _Evaluator.s_command,
    "test_command": _Evaluator.s_test,
}


def read_regular(path: str, limit: int = MAX_SOURCED_BYTES) -> bytes | None:
    """A file's bytes if it is a regular file (never a FIFO, device or symlink), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return f.read(limit + 1)


def _unreadable(path: str | None) -> str:
    """Why read_regular gave nothing for `path`, as the end of a gap's sentence."""
    if path is not None and os.path.islink(path):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return f"a symlink to {target}, which drift does not follow"
    return "which drift cannot read"


def bash_refuses(data: bytes) -> str | None:
    """Bash's own syntax error for a script (``bash -n``: parsed, nothing run), else None.

    tree-sitter recovers from some errors bash does not; bash decides. None
    too when no bash is installed or it does not answer in time.
    """
    import shutil
    import subprocess

    bash = shutil.which("bash")
    if bash is None:
        return None
    try:
        result = subprocess.run(
            [bash, "-n"],
            input=data,
            capture_output=True,
            timeout=10,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},  # no BASH_ENV: nothing is read first
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode == 0:
        return None
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    if not lines:
        return "bash refuses the script"
    first = lines[0]
    return first.split(": ", 1)[1] if first.startswith(bash) and ": " in first else first


def evaluate(
    path: str, data: bytes, read: Callable[[str], bytes | None] = read_regular
) -> ScriptModel:
    """What the script at `path` (contents `data`) may launch, with which environment.

    `read` fetches files the script sources (None if it cannot be read).
    """
    return _Evaluator(os.path.abspath(path), read).run_file(data)
