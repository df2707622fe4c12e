"""Builtins that change the shell itself: ``source``, ``set``, ``read``, ``eval``, function calls.

``source FILE`` and ``. FILE`` walk the file in this shell; ``set -a`` /
``set -o allexport`` export every later assignment and ``set --`` sets the
arguments; ``read``, ``mapfile``, ``getopts``, ``printf -v`` assign what a
command gives; ``eval`` of known words is code read again; a call runs the
function's body with its own arguments and locals.
"""

from __future__ import annotations

from collections.abc import Sequence

from drift.shell.assignments import Assignments
from drift.shell.model import Launch
from drift.shell.patterns import Hole, shown
from drift.shell.state import Frame, State, better_launches, environment
from drift.shell.syntax import Node, is_name
from drift.shell.values import Alt, Field, Origin, Seg, field_literal
from drift.shell.walk import MAX_DEPTH, unreadable


class Builtins(Assignments):
    """Builtins that change the shell, mixed into the evaluator (see the module docstring)."""

    def _call(self, name: str, args: Sequence[Field], st: State, how: str) -> None:
        """Run function `name` with `args`: its locals are restored when it returns."""
        body, file, offset = self.functions[name]
        saved = self.file, self.offset
        frame = Frame(tuple(args))
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

    def _source(self, target: Field, st: State, origin: Origin, args: Sequence[Field]) -> None:
        """``source FILE ARGS``: the file's code in this shell (else: it may set anything)."""
        path_text = field_literal(target)
        path = self._resolve(path_text, st, search=True) if path_text else None
        data = self._read_source(path, origin) if path else None
        if data is None or path is None:
            written = path_text or shown(target.pattern)
            self._unknown_assignments(
                st, origin, f"sources {written}, {unreadable(path, self.files)}"
            )
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

    def _set_builtin(self, args: Sequence[Field], st: State) -> None:
        """``set -a``, ``set -o allexport`` (and ``+``), ``set -- ARGS``."""
        k = 0
        while k < len(args):
            word = field_literal(args[k])
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
                if field_literal(args[k]) == "allexport":
                    st.allexport = on
                k += 1

    def _read_builtin(self, name: str, args: Sequence[Field], st: State, origin: Origin) -> None:
        """``read X``, ``mapfile A``, ``getopts o X``, ``printf -v X``: X holds what they read."""
        names: list[str] = []
        k = 0
        valued = {"read": "adnNptu", "mapfile": "dnOsuCc", "readarray": "dnOsuCc", "printf": "v"}
        while k < len(args):
            word = field_literal(args[k])
            k += 1
            if word is None:
                continue
            if word.startswith("-") and len(word) > 1:
                if name == "printf" and word == "-v" and k < len(args):
                    target = field_literal(args[k])
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
                    target = field_literal(args[k])
                    if target:
                        names.append(target)
                break
            names.append(word)
        for var in names:
            if is_name(var):
                self._assign(
                    st, var, (Alt((Seg(Hole(f"{name} {var}", "command"), origin),)),), origin
                )

    def _eval(self, node: Node, variants: list[tuple[Field, ...]], st: State, how: str) -> None:
        """``eval`` of known words is code read again here; of anything else, a gap."""
        text: list[str] = []
        args = variants[0][1:]
        for f in args:
            value = field_literal(f)
            if value is None:
                origin = self.origin(node)
                self._unknown_assignments(st, origin, "eval of a value drift cannot know")
                if st.stop is None:
                    launch = Launch(
                        tuple(variants),
                        environment(st, []),
                        origin,
                        st.conds,
                        "foreground",
                        False,
                        tuple(variants),
                    )
                    st.last = better_launches(st.last, (1, launch))
                return
            text.append(value)
        if self.depth >= MAX_DEPTH:
            return
        self._walk_string(" ".join(text), self.origin(node), st, how)
