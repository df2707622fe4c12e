"""Simple commands, and which of them may be the service.

A builtin with a meaning goes to its room; any other command is a launch
candidate: its wrappers removed (`drift.shell.wrappers`), it is kept as the
launch if it is an ``exec`` or the best server-looking command of its path,
with the environment it receives there. A shell it starts (``bash -c
"..."``, ``bash FILE``, ``bash <<EOF``) or a shell script it runs is
followed instead, and what that child launches counts.

One idea, kept whole past 500 lines: every way a command can become the
server (exec, a wrapper, a shell it starts, an eval'd string, a function
called by a built name, a launch in the background) ends in the same
choice of launch candidates, and reads best beside it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from drift.shell.builtins import Builtins
from drift.shell.commands import (
    HOUSEKEEPING,
    MEANINGFUL,
    SHELLS,
    is_shell_script,
    program_name,
    server_score,
)
from drift.shell.fields import split_fields
from drift.shell.model import Launch
from drift.shell.patterns import ELSE, Hole, Pattern, literal, matches, shown
from drift.shell.start import unknown_binding
from drift.shell.state import (
    State,
    assign_state,
    better_launches,
    caller_bindings,
    environment,
    merge_paths,
    shifted,
)
from drift.shell.syntax import Node, command_text, node_text, short_text
from drift.shell.values import (
    MAX_ALTERNATIVES,
    Alt,
    Binding,
    Field,
    Origin,
    Prefix,
    Seg,
    dedupe,
    field_literal,
)
from drift.shell.walk import MAX_DEPTH
from drift.shell.words import written_value
from drift.shell.wrappers import EnvChanges, after_exec_options, strip_wrappers


class Launches(Builtins):
    """Simple commands and launches, mixed into the evaluator (see the module docstring)."""

    # ``echo`` and ``printf`` while output is captured (`drift.shell.substitution`)
    _print: Callable[[list[Node], Node, State], bool]

    def s_command(self, node: Node, st: State, how: str) -> None:
        """A simple command: ``X=v`` prefixes, words, then what the command means."""
        prefix: list[Prefix] = []
        words: list[Node] = []
        for i, child in enumerate(node.children):
            if child.type == "variable_assignment" and not words:
                for name, _append, value, origin, _subscript in self._assignments([child]):
                    alts = self._value_alts(value, st, origin)
                    prefix.append((name, alts, origin, written_value(value)))
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
        if st.out is not None and node_text(words[0]) in ("echo", "printf"):
            if self._print(words, node, st):
                return  # its output is the value of a ``$(...)``
        if not prefix and _inert(words, self.functions):
            return  # echo, mkdir, sleep ...: nothing they do reaches the service
        variants = self.fields(words, st)
        self.c_string = next(
            (words[i + 1] for i in range(len(words) - 1) if node_text(words[i]) == "-c"), None
        )
        self.run_command(variants, prefix, node, st, how)

    def run_command(
        self,
        variants: list[tuple[Field, ...]],
        prefix: list[Prefix],
        node: Node,
        st: State,
        how: str,
    ) -> None:
        """A command by its name: a builtin with a meaning, a function, or a launch candidate."""
        first = variants[0]
        name = field_literal(first[0]) if first else None
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
            self._set_builtin(variants, st)
            return
        if name == "eval":
            if not self._eval_placed(node, variants, st, how):
                self._eval(node, variants, st, how)
            return
        if name in ("cd", "pushd", "popd"):
            self._change_folder(name, args, st)
            return
        if name in ("exit",):
            st.stop = "exit"
            return
        if name == "return":
            st.stop = "return" if st.frames else "exit"
            return
        if name in ("read", "mapfile", "readarray", "getopts", "printf", "let", "tee", "cp", "mv"):
            self._read_builtin(name, args, st, origin, node)
            return
        if name == "shift":
            st.args = shifted(st.args, args)
            return
        if self.depth < MAX_DEPTH and self._built_name_call(node, variants, prefix, st, how):
            return
        if name in self.functions and self.depth < MAX_DEPTH:
            self._call_each(name, variants, st, how, named=True)
            return
        if self._activates(name, args, st, origin):
            return
        self._candidate(variants, prefix, origin, st, how, source=command_text(node))

    def _eval_placed(
        self, node: Node, variants: list[tuple[Field, ...]], st: State, how: str
    ) -> bool:
        """``eval "$CMD"``: its code run here for each value drift knows, each word where written.

        bash joins eval's words with blanks and runs the text as code: what
        it assigns and launches happens at the eval line, while a word of
        the command (a flag) keeps the line of the string that wrote it
        (``CMD+=" --port 8000"``). Each value of the words (a branch that
        built CMD its own way) is a path under that branch's conditions. A
        part drift does not know (``$(nproc)``, the caller's value) stays
        one unknown value, split into words as bash splits it; where it is
        code (``eval "$CMD"`` of the caller's CMD) that path is a gap: it
        may set anything. False if the values are too many (then `_eval`
        notes a gap).
        """
        if self.depth >= MAX_DEPTH:
            return False
        texts: list[tuple[str, list[tuple[int, int, Origin]], dict[str, Seg], tuple[str, ...]]]
        texts = [("", [], {}, ())]
        unknown: list[
            tuple[str, ...]
        ] = []  # the conditions of values that are code drift cannot know
        for word in _argument_nodes(node):
            alts = self.alts(word, st)
            if (len(texts) + len(unknown)) * len(alts) > MAX_EVAL_TEXTS:
                return False
            joined: list[tuple[str, list[tuple[int, int, Origin]], dict[str, Seg], tuple[str, ...]]]
            joined = []
            for text, places, holes, conds in texts:
                for alt in alts:
                    one = _eval_text(text, places, holes, conds, alt)
                    if one is None:
                        unknown.append(dedupe(conds + alt.conds))
                    else:
                        joined.append(one)
            texts = joined
        if not unknown and all(not text.strip() for text, *_rest in texts):
            return True  # eval of nothing does nothing
        origin = self.origin(node)
        key = (self.file, origin.line - 1, self.depth + 1)
        paths: list[State] = []
        saved = self.written_at
        try:
            for text, places, holes, conds in texts:
                path = st.fork()
                path.conds = dedupe(path.conds + conds)
                for name, seg in holes.items():
                    path.vars[name] = (Binding((Alt((seg,)),), seg.origin, False),)
                self.written_at = (key, places)
                self._walk_string(text, origin, path, how)
                for name in holes:
                    path.vars.pop(name, None)
                paths.append(path)
        finally:
            self.written_at = saved
        for conds in dict.fromkeys(unknown):
            path = st.fork()
            path.conds = dedupe(path.conds + conds)
            self._eval_unknown(node, variants, path)
            paths.append(path)
        assign_state(st, merge_paths(paths, st))
        return True

    def _built_name_call(
        self,
        node: Node,
        variants: list[tuple[Field, ...]],
        prefix: list[Prefix],
        st: State,
        how: str,
    ) -> bool:
        """``"start_$ROLE" "$@"``: a command whose name is built, run as each function it may name.

        Each function the name may spell is a path of its own (the live
        command line and environment tell which ran). A name with a written
        part (``start_``) is built to reach those functions; a name that is
        all unknown (``"$1" "$@"``), or a value naming no function, may as
        well run a program, on one more path. False if the command has one
        written name, or its name can spell no function.
        """
        heads = [v[0] for v in variants if v]
        if len(heads) != len(variants) or any(h.spread for h in heads):
            return False
        if len({field_literal(h) for h in heads} - {None}) == 1 and all(
            field_literal(h) is not None for h in heads
        ):
            return False  # one written name: a call or a program, as usual
        reached = {f: [v for v in variants if matches(v[0].pattern, f)] for f in self.functions}
        reached = {f: vs for f, vs in reached.items() if vs}
        if not reached:
            return False
        others = [v for v in variants if _may_name_program(v[0].pattern, reached)]
        spelled = " | ".join(dict.fromkeys(shown(h.pattern) for h in heads))
        labels = {f: short_text(f"if {spelled} names function {f}") for f in reached}
        paths: list[State] = []
        for function, label in labels.items():
            # one name, one function: each path says the others did not run
            branch = st.fork(label)
            branch.conds += tuple(ELSE + other for other in labels.values() if other != label)
            self._call_each(function, reached[function], branch, how)
            paths.append(branch)
        if others:
            other = st.fork(short_text(f"if {spelled} names no function"))
            other.conds += tuple(ELSE + label for label in labels.values())
            origin = self.origin(node)
            self._candidate(others, prefix, origin, other, how, source=command_text(node))
            paths.append(other)
        assign_state(st, merge_paths(paths, st))
        return True

    def _last_line(self, origin: Origin) -> int:
        """The last line of the command starting at `origin`, its backslash-newlines followed."""
        lines = self.lines.get(origin.file) or []
        last = origin.line
        while 0 < last <= len(lines) and lines[last - 1].rstrip("\r").endswith("\\"):
            last += 1
        return last

    def _change_folder(self, name: str, args: Sequence[Field], st: State) -> None:
        """``cd DIR``, ``pushd DIR``: the new working folder (relative while the start is unknown).

        ``cd -``, ``popd``, ``cd`` alone ($HOME) or a folder drift does not
        know leave it unknown.
        """
        words = [field_literal(f) for f in args]
        while words and words[0] in ("-L", "-P", "-e", "-@", "--"):
            words = words[1:]
        target = words[0] if words else None
        if name == "popd" or not target or target == "-":
            st.cwd = None
        elif os.path.isabs(target) or st.cwd is None or os.path.isabs(st.cwd):
            folder = self._resolve(target, st)
            # a cd to a folder that is not there fails: then where it stays is not followed
            st.cwd = folder if folder is not None and self._check("dir", folder) else None
        else:
            relative = os.path.normpath(os.path.join(st.cwd, target))
            st.cwd = relative if self._check("dir", self._guess(relative)) else None

    def _candidate(
        self,
        variants: list[tuple[Field, ...]],
        prefix: list[Prefix],
        origin: Origin,
        st: State,
        how: str,
        via_exec: bool = False,
        cleared: bool = False,
        source: str = "",
    ) -> None:
        """A command that may be the service: shells and scripts are followed, else a launch."""
        stripped: list[tuple[Field, ...]] = []
        changes: list[EnvChanges] = []
        for v in variants:
            program, change = strip_wrappers(v)
            stripped.append(program)
            changes.append(change)
        program = stripped[0]
        head = field_literal(program[0]) if program else None
        score = server_score([field_literal(f) if not f.spread else None for f in program])
        best = max((found for found, _launch in st.last), default=0)
        nested = (
            head is not None
            and self.depth < MAX_DEPTH
            and (program_name(head) in SHELLS or head.startswith(("/", "./", "../")))
        )
        if not via_exec and not nested and (score == 0 or score < best):
            return  # not the service on this path: skip building its environment
        env, cleared = _with_changes(
            {} if cleared else environment(st, prefix),
            changes,
            cleared,
            origin,
            self._last_line(origin),
        )
        if any(change.opaque for change in changes):
            env = _opaque(env, origin, st.conds)
            self.gaps.append(
                f"{origin.file}:{origin.line}: runs it in an environment drift does not read"
            )
        if head is not None and program_name(head) in SHELLS and self.depth < MAX_DEPTH:
            if self._shell_program(program, env, st, how, via_exec, origin):
                return
        if head is not None and head.startswith(("/", "./", "../")) and self.depth < MAX_DEPTH:
            if self._script_program(head, program[1:], env, st, how, via_exec, origin):
                return
        if via_exec:
            launch = Launch(
                tuple(stripped),
                env,
                origin,
                st.conds,
                "exec",
                cleared,
                tuple(variants),
                source,
                st.cwd,
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
            st.cwd,
        )
        st.last = better_launches(st.last, (score, launch))

    def _exec(
        self,
        variants: list[tuple[Field, ...]],
        prefix: list[Prefix],
        node: Node,
        st: State,
    ) -> None:
        """``exec PROGRAM``: the launch, and the end of this path; ``exec >log`` redirects only."""
        rest: list[tuple[Field, ...]] = []
        cleared = False
        for v in variants:
            program, clears = after_exec_options(v)
            rest.append(program)
            cleared = cleared or clears
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
            source=command_text(node),
        )

    def _shell_program(
        self,
        program: tuple[Field, ...],
        env: dict[str, tuple[Binding, ...]],
        st: State,
        how: str,
        via_exec: bool,
        origin: Origin,
    ) -> bool:
        """``bash -c "..."`` (parsed again) or ``bash FILE`` (followed): True if handled."""
        k = 1
        while k < len(program):
            word = field_literal(program[k])
            if word is None:
                return False
            if word == "-c" or (word.startswith("-") and not word.startswith("--") and "c" in word):
                if k + 1 >= len(program):
                    return False
                scripts = self._inline_scripts(program[k + 1], st)
                if not scripts:
                    return self._simple_command_string(env, st, how, via_exec, origin)
                children: list[State] = []
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
            return self._script_program(word, program[k + 1 :], env, st, how, via_exec, origin)
        return False

    def _script_program(
        self,
        written: str,
        args: Sequence[Field],
        env: dict[str, tuple[Binding, ...]],
        st: State,
        how: str,
        via_exec: bool,
        origin: Origin,
    ) -> bool:
        """``./child.sh``, ``bash child.sh``: the child script followed; True if handled.

        ``./name`` that is not there starts nothing; ``bash name`` not there
        is looked for on PATH, so it runs a script drift cannot read, as
        does one in a folder drift does not know (an absolute path that is
        not there is left a launch as written). A relative one is in the
        folder the script was started in: while that is unknown, it is read
        on the path started in the script's own folder, and on the other it
        is a program drift cannot read.
        """

        def unknown(path_st: State) -> None:
            self._unknown_launch(path_st, origin, "exec" if via_exec else how)
            if via_exec:
                path_st.stop = "exec"

        def run(path_st: State, path: str) -> None:
            if self._shell_script(path):
                if not self._child_script(path, args, env, path_st, how, via_exec, origin):
                    unknown(path_st)
            elif "/" in written:
                _cannot_run(path_st, via_exec)
            else:
                unknown(path_st)

        path = self._resolve(written, st)
        relative = self._start_relative(written, st) if path is None else None
        if path is None and relative is None:
            unknown(st)  # in a folder drift does not know (after `cd "$DIR"`)
            return True
        target = path or self._guess(relative or "")
        if not self._shell_script(target) and (os.path.isabs(written) or not self._missing(target)):
            return False  # a program, not a script (`./server`): a launch like any other
        if path is not None:
            run(st, path)
        else:
            assert relative is not None
            self._from_start(st, origin, relative, run, unknown)
        return True

    def _shell_script(self, path: str) -> bool:
        """Whether `path` is a shell script to follow (one not there: remembered as checked)."""
        if is_shell_script(path, self.files):
            return True
        self._missing(path)
        return False

    def _inline_scripts(self, field: Field, st: State) -> list[str]:
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
        return list(dict.fromkeys(shown(o) for o in options))[:8]

    def _simple_command_string(
        self,
        env: dict[str, tuple[Binding, ...]],
        st: State,
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
        word_origin = self.origin(node)
        variants = [
            split_fields(
                Alt(tuple(replace(seg, split=True) for seg in a.segs), a.conds), word_origin
            )
            for a in alts
        ]
        variants = [v for v in dict.fromkeys(variants) if v]
        if not variants:
            return False
        child = self._child_state(st, env)
        self._candidate(variants, [], origin, child, how, via_exec=via_exec)
        self._after_child(child, st, via_exec)
        return True

    def _child_state(self, st: State, env: dict[str, tuple[Binding, ...]]) -> State:
        """The first state of a child shell: `env` as its variables, no arguments yet."""
        child = State({k: v for k, v in env.items()}, st.conds, False, st.cwd, None, (), None, ())
        return child

    def _after_child(self, child: State, st: State, via_exec: bool) -> None:
        """What a child shell launched counts for the parent (as launches, if it was exec'd)."""
        if child.stop is None:
            for scored in child.last:
                if via_exec:
                    self.launches.append(scored[1])
                else:
                    st.last = better_launches(st.last, scored)
        if via_exec:
            st.stop = "exec"

    def _child_script(
        self,
        path: str,
        args: Sequence[Field],
        env: dict[str, tuple[Binding, ...]],
        st: State,
        how: str,
        via_exec: bool,
        origin: Origin,
    ) -> bool:
        """A shell script the command runs, followed as a child shell: True if it was read."""
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

    def _nested(self, content: Node, st: State, how: str, child: bool) -> None:
        """A heredoc fed to a shell: its lines are code at their own place in this file."""
        text = node_text(content)
        origin = self.origin(content)
        env = environment(st, [])
        inner = self._child_state(st, env) if child else st
        self._walk_string(text, replace(origin, line=origin.line), inner, how)
        self._after_child(inner, st, via_exec=False)

    def s_redirected(self, node: Node, st: State, how: str) -> None:
        """A statement with redirections; ``bash <<EOF`` runs the heredoc as a script."""
        body = node.child_by_field_name("body")
        self._note_written(node, st)
        heredoc = next((c for c in node.children if c.type == "heredoc_redirect"), None)
        if body is not None and heredoc is not None and body.type == "command":
            words = [c for c in body.children if c.type == "command_name"]
            name = node_text(words[0]).strip() if words else ""
            argc = sum(1 for c in body.children if c.is_named) - 1
            if program_name(name) in SHELLS and argc == 0:
                # `bash <<EOF ... EOF`: the heredoc is the script.
                content = next((c for c in heredoc.children if c.type == "heredoc_body"), None)
                if content is not None:
                    self._nested(content, st, how, child=True)
                    return
        if body is not None and st.out is not None and _stdout_elsewhere(node):
            saved, st.out = st.out, None  # ``echo ... >&2`` while output is captured
            try:
                self.statement(body, st, how)
            finally:
                st.out = saved
            return
        if body is not None:
            self.statement(body, st, how)


def _stdout_elsewhere(node: Node) -> bool:
    """Whether a redirected statement sends its standard output elsewhere (``>&2``, ``> f``)."""
    for child in node.children:
        if child.type != "file_redirect":
            continue
        m = re.match(r"\s*(\d*)(&>>?|>>?|>&|>\|)", node_text(child))
        if m and (m.group(2).startswith("&") or m.group(1) in ("", "1")):
            return True
    return False


MAX_EVAL_TEXTS = MAX_ALTERNATIVES
"""Values of an eval'd string run one by one (as many as a word may have); more: a gap."""


def _eval_text(
    text: str,
    places: list[tuple[int, int, Origin]],
    holes: dict[str, Seg],
    conds: tuple[str, ...],
    alt: Alt,
) -> tuple[str, list[tuple[int, int, Origin]], dict[str, Seg], tuple[str, ...]] | None:
    """One more word of an eval: the text so far with `alt` after a blank, and where each part is.

    A part drift does not know becomes ``$__drift_eval_N``, a variable
    holding it (`holes`), so that the code run again splits it as bash
    splits an unquoted expansion.
    """
    pieces = [text, " "] if text else [""]
    size = len(text.encode("utf-8", "surrogateescape")) + (1 if text else 0)
    places = list(places)
    holes = dict(holes)
    for seg in alt.segs:
        if isinstance(seg.part, Hole):
            # an unknown value read before this one is a word, not a ``}`` closing a group
            before = _PLACED.sub("x", "".join(pieces))
            if _in_single_quotes(before) or _code_starts(before):
                return None  # bash reads the value there as code: it may do anything
            name = f"__drift_eval_{len(holes)}"
            holes[name] = replace(seg, split=True)
            piece = "${" + name + "}"
        else:
            piece = " " if seg.brk else seg.part
            if seg.split:
                piece = re.sub(r"[ \t\n]+", " ", piece)
        data = piece.encode("utf-8", "surrogateescape")
        if seg.origin is not None and not isinstance(seg.part, Hole):
            places.append((size, size + len(data), seg.origin))
        pieces.append(piece)
        size += len(data)
    return "".join(pieces), places, holes, dedupe(conds + alt.conds)


_PLACED = re.compile(r"\$\{__drift_eval_\d+\}")
"""Where `_eval_text` put an unknown value in the code."""

_CODE_STARTS = re.compile(r"(?:^|[;&|(){}\n`]|(?:^|\s)(?:then|do|else|elif|if|while|until|!))\s*$")


def _code_starts(code: str) -> bool:
    """Whether a command starts at the end of `code` (not an argument of one)."""
    return bool(_CODE_STARTS.search(code))


def _in_single_quotes(code: str) -> bool:
    """Whether the end of `code` is inside single quotes (as bash reads quotes and escapes)."""
    single = double = escaped = False
    for char in code:
        if escaped:
            escaped = False
        elif single:
            single = char != "'"
        elif char == "\\":
            escaped = True
        elif char == '"':
            double = not double
        elif char == "'" and not double:
            single = True
    return single


def _argument_nodes(node: Node) -> list[Node]:
    """The words after a command's name (not its redirections)."""
    return [
        child
        for i, child in enumerate(node.children)
        if node.field_name_for_child(i) == "argument" and child.is_named
    ]


def _may_name_program(name: Pattern, functions: Collection[str]) -> bool:
    """Whether a built command name may run a program rather than one of `functions`.

    A written name that is no function does; so does a name that is all
    unknown (``"$1"``); a name with a written part (``start_$ROLE``) was
    built to reach the functions it can spell. A choice is each of its values.
    """
    if len(name) == 1 and isinstance(name[0], Hole) and name[0].kind == "choice":
        return any(_may_name_program(option[0], functions) for option in name[0].options)
    text = literal(name)
    if text is not None:
        return text not in functions
    return all(isinstance(part, Hole) for part in name)


def _cannot_run(st: State, via_exec: bool) -> None:
    """A program that is not there: nothing starts, and an ``exec`` of it ends the script."""
    if via_exec:
        st.stop = "exit"


def _with_changes(
    env: dict[str, tuple[Binding, ...]],
    changes: Sequence[EnvChanges],
    cleared: bool,
    origin: Origin,
    last: int,
) -> tuple[dict[str, tuple[Binding, ...]], bool]:
    """The environment after ``env``'s changes in each command line; True if one emptied it.

    A name one command line sets (``env K=V``) and another leaves holds
    either value. ``K=V`` written in the command (lines `origin` to `last`)
    is placed on its own line; one that came from a string expanded there
    (``exec $CMD``) on the command's first line, where bash ran it.
    """
    if any(change.cleared for change in changes) and not cleared:
        cleared, env = True, {}
    out = dict(env)
    names = dict.fromkeys(
        key for change in changes for key in (*(k for k, _ in change.added), *change.removed)
    )
    for key in names:
        bindings: list[Binding] = []
        for change in changes:
            added = [f for k, f in change.added if k == key]
            if key in change.removed:
                bindings.append(Binding(None, origin, False))
            elif added:
                f = added[-1]
                where = origin
                if (
                    f.origin
                    and f.origin.file == origin.file
                    and origin.line <= f.origin.line <= last
                ):
                    where = f.origin
                alts = (Alt(tuple(Seg(p, f.origin) for p in f.pattern)),)
                bindings.append(Binding(alts, where, True, f.conds, export_origin=where))
            elif key in env:
                bindings.extend(env[key])
            else:
                bindings.extend(() if cleared else caller_bindings(key))
        out[key] = dedupe(bindings)
    return out, cleared


def _opaque(
    env: dict[str, tuple[Binding, ...]], origin: Origin, conds: tuple[str, ...]
) -> dict[str, tuple[Binding, ...]]:
    """The environment after ``conda run`` at `origin`: any variable may have been set there.

    Its activation scripts export what drift does not read: every value
    may have been replaced, and a variable no line sets may come from it.
    """
    unknown = unknown_binding(origin, conds)
    out = {name: dedupe((*bs, unknown)) for name, bs in env.items() if name != "\0unknown"}
    out["\0unknown"] = dedupe((*env.get("\0unknown", ()), unknown))
    return out


def _inert(words: Sequence[Node], functions: Mapping[str, Any]) -> bool:
    """True for a housekeeping command whose words cannot change anything (no ``${X:=d}``)."""
    head = words[0]
    if head.type != "word":
        return False
    name = node_text(head)
    if name not in HOUSEKEEPING or name in MEANINGFUL or name in functions:
        return False
    return not any("=" in node_text(w) and "${" in node_text(w) for w in words[1:])
