"""Builtins that change the shell itself: ``source``, ``set``, ``read``, ``eval``, function calls.

``source FILE`` and ``. FILE`` walk the file in this shell; ``set -a`` /
``set -o allexport`` export every later assignment and ``set --`` sets the
arguments; ``read``, ``mapfile``, ``getopts``, ``printf -v`` assign what a
command gives; ``eval`` of known words is code read again; a call runs the
function's body with its own arguments and locals.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from drift.shell.model import Launch
from drift.shell.patterns import Hole, shown
from drift.shell.start import StartFolder
from drift.shell.state import (
    Frame,
    State,
    assign_state,
    better_launches,
    environment,
    merge_paths,
    mixed_args,
)
from drift.shell.syntax import Node, is_name, node_text
from drift.shell.values import Alt, Binding, Field, Origin, Seg, dedupe, field_literal, pinned
from drift.shell.walk import MAX_DEPTH, unreadable

ACTIVATORS = frozenset({"conda", "mamba", "micromamba"})
"""Environment managers whose ``activate`` is a shell function their hook defines."""

MAX_CALLS = 8
"""Argument lists one function call is walked with, each a path (beyond: the first ones)."""

SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
"""The folders a PATH drift does not know stands for: systemd's default PATH, and a login's."""


class Builtins(StartFolder):
    """Builtins that change the shell, mixed into the evaluator (see the module docstring)."""

    def _call_each(
        self,
        name: str,
        variants: Sequence[Sequence[Field]],
        st: State,
        how: str,
        named: bool = False,
    ) -> None:
        """Run function `name` once for each command line that calls it, each a path of its own.

        ``start "${EXTRA[@]}"`` where EXTRA is empty on one path and the
        caller's words on another: the function runs with either argument
        list, and what it launches keeps each (under the conditions of its
        words). `named`: only the command lines whose first word is `name`.
        """
        calls = [v for v in variants if v and (not named or field_literal(v[0]) == name)]
        unique = list(dict.fromkeys(tuple(c[1:]) for c in calls))
        if len(unique) <= 1:
            self._call(name, unique[0] if unique else (), st, how)
            return
        paths: list[State] = []
        for args in unique[:MAX_CALLS]:
            path = st.fork()
            path.conds = dedupe(path.conds + tuple(c for f in args for c in f.conds))
            self._call(name, args, path, how)
            paths.append(path)
        assign_state(st, merge_paths(paths, st))

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
        """``source FILE ARGS``: the file's code in this shell (else: it may set anything).

        A FILE without a slash is looked for on PATH first, then in the
        working folder, as bash does; a relative FILE is read from the working
        folder, which is the folder the script was started in until a ``cd``.
        """
        path_text = field_literal(target)
        written = path_text or shown(target.pattern)
        if path_text and "/" not in path_text:
            on_path, certain = self._on_path(path_text, st)
            if on_path is not None and not certain:
                self._unknown_assignments(
                    st,
                    origin,
                    f"sources {written}, which bash looks for on PATH first: {on_path} may be "
                    "the file it reads (drift does not know all of PATH)",
                )
                return
            if on_path is not None:
                self._source_file(on_path, written, st, origin, args)
                return
        path = self._resolve(path_text, st)
        if path is not None:
            self._source_file(path, written, st, origin, args)
            return
        relative = self._start_relative(path_text, st)
        if relative is None:
            why = "from a folder drift does not know" if path_text else "which drift cannot know"
            self._unknown_assignments(st, origin, f"sources {written} {why}")
            return
        guess = self._guess(relative)
        if guess in self.written and self._missing(guess):
            self._unknown_assignments(
                st, origin, f"sources {written}, which the script writes as it runs"
            )
        elif self._missing(guess):
            why = f"{self._where_written(relative)}, where there is no such file"
            self._unknown_assignments(st, origin, f"sources {written} {why}")
        elif self._read_source(guess, origin) is None:
            self._unknown_assignments(
                st, origin, f"sources {written}, {unreadable(guess, self.files)}"
            )
        else:
            self._from_start(
                st,
                origin,
                relative,
                lambda path_st, guess: self._source_file(guess, written, path_st, origin, args),
            )

    def _note_written(self, node: Node, st: State) -> None:
        """``helper > FILE``, ``>> FILE``, ``&> FILE``: the script writes FILE while it runs."""
        for redirect in node.children:
            if redirect.type != "file_redirect":
                continue
            operators = {node_text(c) for c in redirect.children if not c.is_named}
            if not operators & {">", ">>", "&>", "&>>", ">|"}:
                continue
            for target in redirect.named_children:
                if target.type == "file_descriptor":
                    continue
                self._mark_written(self._literal_word(target, st), st)

    def _files_written(self, name: str, args: Sequence[Field], st: State) -> None:
        """``... | tee FILE``, ``cp SRC FILE``, ``mv SRC FILE``: FILE is written as it runs."""
        words = [field_literal(f) for f in args]
        targets = [w for w in words if w and not w.startswith("-")]
        if name != "tee":
            targets = targets[-1:]  # the destination (a folder: a file drift does not name)
        for text in targets:
            self._mark_written(text, st)

    def _mark_written(self, text: str | None, st: State) -> None:
        """Note the file `text` names (from the working or the start folder) as written."""
        relative = self._start_relative(text, st)
        path = self._resolve(text, st) or (self._guess(relative) if relative else None)
        if path is not None:
            self.written.add(path)

    def _source_file(
        self, path: str, written: str, st: State, origin: Origin, args: Sequence[Field]
    ) -> None:
        """Walk the file at `path` in this shell; one that is not there sets nothing.

        Unless the script writes it before (``helper > ./node.env``): then it
        is there when bash reads it, with what drift cannot know.
        """
        if path in self.written and self._missing(path):
            self._unknown_assignments(
                st, origin, f"sources {written}, which the script writes as it runs"
            )
            return
        if self._missing(path):
            # bash sources nothing (it says so, and a `set -e` script stops there).
            self.gaps.append(
                f"{origin.file}:{origin.line}: sources {written}: no such file"
                + self._in_folder(path, st)
            )
            return
        data = self._read_source(path, origin)
        if data is None:
            self.unread_sources.append(path)
            self._unknown_assignments(st, origin, f"sources {path}, {unreadable(path, self.files)}")
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

    def _in_folder(self, path: str, st: State) -> str:
        """`` in FOLDER`` for a gap, and how drift knows that folder when the caller said."""
        folder = os.path.dirname(path)
        if folder == self.start and st.cwd == self.start and self.start_label:
            return f" in {folder} ({self.start_label})"
        return f" in {folder}"

    def _on_path(self, name: str, st: State) -> tuple[str | None, bool]:
        """The file `name` bash finds on PATH, if drift sees one; and whether that is certain.

        Certain when the script sets PATH to one value with that folder
        ahead of anything drift does not know. Where PATH is the caller's
        (in part or whole), the system's folders stand for it: a file there
        may be the one bash reads.
        """
        for folder, sure in path_folders(st.vars.get("PATH")):
            candidate = os.path.join(folder, name)
            if self._is_file(candidate):
                return candidate, sure
        return None, False

    def _set_builtin(self, variants: Sequence[Sequence[Field]], st: State) -> None:
        """``set -a``, ``set -o allexport`` (and ``+``), ``set -- ARGS``.

        The new arguments are each command line's own (``set -- serve "$@"``
        after a branch: one value per path, under its conditions)."""
        args = variants[0][1:]
        k = 0
        while k < len(args):
            word = field_literal(args[k])
            k += 1
            if word is None:
                return
            if word == "--" or len(word) < 2 or word[0] not in "-+":
                start = 1 + (k if word == "--" else k - 1)
                if len(variants) == 1:
                    st.args = pinned(variants[0][start:])
                else:
                    st.args = mixed_args(
                        [
                            (pinned(v[start:]), dedupe(c for f in v for c in f.conds))
                            for v in variants
                        ]
                    )
                return
            on = word[0] == "-"
            if "a" in word[1:] and not word[1:].startswith("o"):
                st.allexport = on
            if word.endswith("o") and k < len(args):
                if field_literal(args[k]) == "allexport":
                    st.allexport = on
                k += 1

    def _read_builtin(
        self, name: str, args: Sequence[Field], st: State, origin: Origin, node: Node | None = None
    ) -> None:
        """``read X``, ``mapfile A``, ``getopts o X``, ``printf -v X``: X holds what they read.

        ``let X=1 Y++``: each name it assigns holds a number this line computed.
        """
        if name == "let":
            self._computed_here(" ".join(shown(f.pattern) for f in args), st, origin)
            return
        if name in ("tee", "cp", "mv"):
            self._files_written(name, args, st)
            return
        if node is not None and self._mapfile(name, node, args, st, origin):
            return
        self._read_names(name, args, st, origin)

    def _read_names(self, name: str, args: Sequence[Field], st: State, origin: Origin) -> None:
        """The names `read`, `mapfile`, `getopts` and `printf -v` assign, and their values."""
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

    def _mapfile(
        self, name: str, node: Node, args: Sequence[Field], st: State, origin: Origin
    ) -> bool:
        """``mapfile -t A < FILE`` (or ``< <(grep -v RE FILE)``, ``< <(cat FILE)``): its lines.

        Each element is one line of the file, placed at that line (a flag one
        word a line). False when the options, the input or the file are not
        ones drift reads: then A holds what it cannot know.
        """
        words = [field_literal(f) for f in args]
        if name not in ("mapfile", "readarray") or any(w is None for w in words):
            return False
        if "-t" not in words:
            return False
        names = [w for w in words if w and not w.startswith("-")]
        if any(w not in ("-t",) for w in words if w and w.startswith("-")) or len(names) > 1:
            return False
        source = self._lines_from(node, st)
        if source is None:
            return False
        path, keep = source
        data = self._read_source(path, origin)
        if data is None:
            return False
        text = data.decode("utf-8", "surrogateescape")
        elems = tuple(
            (Alt((Seg(line, Origin(path, number, line.strip())),)),)
            for number, line in enumerate(text.split("\n"), 1)
            if (number < text.count("\n") + 1 or line) and keep(line)
        )
        binding = Binding(None, origin, False, st.conds, elems=elems)
        self._set(st, names[0] if names else "MAPFILE", (binding,), origin, None)
        return True

    def _lines_from(self, node: Node, st: State) -> tuple[str, Callable[[str], bool]] | None:
        """The file a command reads its input from, and which of its lines come through."""
        holder = node.parent if node.parent is not None else node
        if holder.type != "redirected_statement":
            return None
        redirects = [c for c in holder.children if c.type == "file_redirect"]
        if len(redirects) != 1:
            return None
        parts = redirects[0].named_children
        if node_text(redirects[0]).lstrip()[:1] != "<" or len(parts) != 1:
            return None
        target = parts[0]
        if target.type != "process_substitution":
            path = self._resolve(self._literal_word(target, st), st)
            return (path, lambda line: True) if path else None
        inner = [c for c in target.named_children if c.type != "comment"]
        if len(inner) != 1 or inner[0].type != "command":
            return None
        words = [
            self._literal_word(c.named_children[0] if c.type == "command_name" else c, st)
            for c in inner[0].named_children
        ]
        if any(w is None for w in words) or not words:
            return None
        if words[0] == "cat" and len(words) == 2:
            path = self._resolve(words[1], st)
            return (path, lambda line: True) if path else None
        if words[0] == "grep" and len(words) == 4 and words[1] == "-v":
            pattern, path = words[2], self._resolve(words[3], st)
            if path is None or not re.fullmatch(r"[\^$#A-Za-z0-9_ -]*", pattern or ""):
                return None  # a pattern whose grep meaning drift does not read the same
            regex = re.compile(pattern or "")
            return path, lambda line: regex.search(line) is None
        return None

    def _activates(
        self, name: str | None, args: Sequence[Field], st: State, origin: Origin
    ) -> bool:
        """``conda activate ENV`` after a line drift did not follow: code it cannot read.

        ``conda`` (``mamba``, ``micromamba``) activates as a shell function
        its hook defines (``eval "$(conda shell.bash hook)"``, a profile
        script); after a line drift did not follow, that function may exist
        and export anything. Without one, bash runs the program, which
        cannot change this shell.
        """
        if name not in ACTIVATORS or not args or "\0unknown" not in st.vars:
            return False
        if field_literal(args[0]) not in ("activate", "deactivate"):
            return False
        self._unknown_assignments(
            st, origin, f"{name} {field_literal(args[0])}: code drift does not read"
        )
        return True

    def _eval(self, node: Node, variants: list[tuple[Field, ...]], st: State, how: str) -> None:
        """``eval`` of known words is code read again here; of anything else, a gap."""
        text: list[str] = []
        args = variants[0][1:]
        for f in args:
            value = field_literal(f)
            if value is None:
                self._eval_unknown(node, variants, st)
                return
            text.append(value)
        if self.depth >= MAX_DEPTH:
            return
        self._walk_string(" ".join(text), self.origin(node), st, how)

    def _eval_unknown(self, node: Node, variants: list[tuple[Field, ...]], st: State) -> None:
        """``eval`` of code drift cannot know: it may set anything, and may be the launch."""
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


def path_folders(bindings: Sequence[Binding] | None) -> list[tuple[str, bool]]:
    """The folders of PATH in order, each with whether bash surely looks there first.

    A part drift does not know (the caller's ``$PATH``, a ``$(cmd)``)
    stands for the system's folders; a relative folder (the working one)
    is left out. A folder is sure when the script sets PATH to one value
    and nothing drift does not know comes before it
    (``PATH=/opt/venv/bin:$PATH``).
    """
    if not bindings:
        return [(folder, False) for folder in SYSTEM_PATH]
    out: dict[str, bool] = {}
    single = len(bindings) == 1 and bindings[0].alts is not None and len(bindings[0].alts) == 1
    for binding in bindings:
        for alt in binding.alts or ():
            sure = single
            text = "".join(p if isinstance(p, str) else "\0" for p in alt.pattern)
            for folder in text.split(":"):
                if "\0" in folder or not os.path.isabs(folder):
                    sure = False
                    extra = SYSTEM_PATH if "\0" in folder else ()
                    out.update((f, out.get(f, False)) for f in extra)
                else:
                    folder = os.path.normpath(folder)
                    out[folder] = out.get(folder, sure) and sure
    return list(out.items())
