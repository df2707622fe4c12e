"""Declaration commands: ``export``, ``declare``/``typeset``, ``local``, ``readonly``, ``unset``.

Their options say what the names become (``-x`` exported, ``+x`` or
``export -n`` not, ``-g`` global; ``-f``/``-p`` touch no variable); a
name without a value keeps its value and changes attributes only.
``export $(grep -v '^#' .env | xargs)`` reads the KEY=VALUE lines of the
file it names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from drift.shell.patterns import Hole
from drift.shell.start import StartFolder
from drift.shell.state import State, assign_state, merge_paths
from drift.shell.syntax import WORD_NODES, Node, is_name, node_text, short_text, walk_nodes
from drift.shell.values import Alt, Binding, Origin, Seg
from drift.shell.walk import unreadable


@dataclass(frozen=True)
class _Attributes:
    """What a declaration's keyword and options make of the names it lists."""

    export: bool  # export, declare -x
    unexport: bool  # export -n, declare +x
    local: bool  # local, or declare without -g inside a function
    integer: bool = False  # declare -i: a value assigned is an arithmetic expression

    @property
    def exported(self) -> bool | None:
        """The export attribute an assignment here gets: set, removed, or kept (None)."""
        return True if self.export else (False if self.unexport else None)


def _attributes(keyword: str, options: list[str], in_function: bool) -> _Attributes | None:
    """The attributes ``export -n``, ``declare -gx``, ``local`` ... give; None for -f, -F, -p.

    Those name functions or print declarations: no variable changes.
    """
    export, unexport, is_global, integer = keyword == "export", False, False, False
    touches_no_variable = False
    for option in options:
        letters = option[1:]
        if any(c in letters for c in "fFp"):
            touches_no_variable = True
        if keyword == "export" and "n" in letters:
            export, unexport = False, True
        if keyword != "export" and "x" in letters:
            export, unexport = option[0] == "-", option[0] == "+"
        if "g" in letters:
            is_global = True
        if keyword != "export" and "i" in letters and option[0] == "-":
            integer = True
    if touches_no_variable:
        return None
    local = keyword == "local" or (
        keyword in ("declare", "typeset") and in_function and not is_global
    )
    return _Attributes(export, unexport, local, integer)


# words whose value names the variables (export $(cat .env | xargs), export "$KV")
_COMPUTED = frozenset(
    {"command_substitution", "simple_expansion", "expansion", "string", "concatenation"}
)


class Declarations(StartFolder):
    """Declaration commands, mixed into the evaluator (see the module docstring)."""

    def s_declaration(self, node: Node, st: State, how: str) -> None:
        """``export``, ``declare``, ``typeset``, ``local``, ``readonly`` and their names."""
        keyword = node_text(node.children[0]) if node.children else ""
        options = [
            node_text(c)
            for c in node.children[1:]
            if c.type == "word" and node_text(c).startswith(("-", "+"))
        ]
        attributes = _attributes(keyword, options, in_function=bool(st.frames))
        if attributes is None:
            return
        origin = self.origin(node)
        if attributes.integer:
            self.integers.update(
                name
                for child in node.children[1:]
                for name, *_rest in self._assignments([child])
                if child.type == "variable_assignment"
            )
            self.integers.update(
                node_text(c) for c in node.children[1:] if c.type in ("variable_name", "word")
            )
        for child in node.children[1:]:
            if child.type == "variable_assignment":
                self._declare_assignment(st, child, attributes)
            elif child.type in ("variable_name", "word") and not node_text(child).startswith(
                ("-", "+")
            ):
                self._declare_name(st, child, attributes, origin)
            elif child.type in _COMPUTED:
                self._export_dynamic(child, st, attributes.export)

    def _declare_assignment(self, st: State, node: Node, attributes: _Attributes) -> None:
        """``export X=v``, ``local X=v``: the assignment, with the declaration's attributes."""
        for name, append, value, where, index in list(self._assignments([node])):
            if attributes.local:
                self._make_local(st, name)
            self._assign_node(st, name, append, value, where, index, exported=attributes.exported)
            if attributes.export:
                self._mark_export(st, name, where)

    def _declare_name(self, st: State, node: Node, attributes: _Attributes, origin: Origin) -> None:
        """``export X``, ``local X``, ``export -n X``: X keeps its value, its attributes change."""
        name = node_text(node)
        if not is_name(name):
            return
        if attributes.local:
            self._make_local(st, name)
            if name not in st.vars or st.vars[name] is None:
                self.touched.add(name)
                st.vars[name] = (Binding(None, origin, False, st.conds),)
        if attributes.export:
            self._mark_export(st, name, self.origin(node))
        elif attributes.unexport:
            st.vars[name] = tuple(
                replace(b, exported=False, export_origin=None, given_export=False)
                for b in self._lookup(st, name)
            )

    def _mark_export(self, st: State, name: str, origin: Origin) -> None:
        """Export `name` from `origin` on (the line that exported it first is kept)."""
        st.vars[name] = tuple(
            replace(b, exported=True, export_origin=b.export_origin or origin)
            for b in self._lookup(st, name)
        )

    def _make_local(self, st: State, name: str) -> None:
        """Inside a function, save `name`'s value to restore when the function returns."""
        if not st.frames:
            return
        frame = st.frames[-1]
        if name not in frame.saved:
            frame.saved[name] = st.vars.get(name)

    def _export_dynamic(self, node: Node, st: State, export: bool) -> None:
        """``export $(grep -v '^#' .env | xargs)``: KEY=VALUE lines of a file, each exported."""
        origin = self.origin(node)
        path, relative = None, None
        if node.type == "command_substitution":
            path, relative = self._file_in_command(node, st)
        if path is None and relative is None:
            self._unknown_assignments(
                st, origin, f"{short_text(node_text(node))} sets variables drift cannot read"
            )
            return
        other = None
        if self._unknown_file_word(node, st):
            # `cat "${ENV_FILE:-.env}"`: the default's file, or one drift cannot know
            base, other = st.fork(), st.fork()
            why = f"{short_text(node_text(node))} may read a file drift cannot know"
            self._unknown_assignments(other, origin, why)
        if path is not None:
            self._read_assignments(path, st, origin, export)
        elif relative is not None:
            self._from_start(
                st,
                origin,
                relative,
                lambda path_st, guess: self._read_assignments(guess, path_st, origin, export),
            )
        if other is not None:
            assign_state(st, merge_paths([st, other], base))

    def _read_assignments(self, path: str, st: State, origin: Origin, export: bool) -> None:
        """The KEY=VALUE lines of the file at `path`, each assigned (and exported if `export`)."""
        data = self._read_source(path, origin)
        if data is None:
            self._unknown_assignments(st, origin, f"reads {path}, {unreadable(path, self.files)}")
            return
        self.lines.setdefault(path, data.decode("utf-8", "surrogateescape").split("\n"))
        for number, raw in enumerate(data.decode("utf-8", "surrogateescape").split("\n"), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            line = line.removeprefix("export ").strip()
            name, eq, value = line.partition("=")
            if not eq or not is_name(name):
                continue
            where = Origin(path, number, line)
            self._assign(
                st,
                name,
                (_split_value(value.strip(), where),),
                where,
                exported=True if export else None,
            )
            if export:
                self._mark_export(st, name, where)

    def _file_in_command(self, node: Node, st: State) -> tuple[str | None, str | None]:
        """The file a ``$(grep ... FILE | xargs)``-style command reads KEY=VALUE lines from.

        (its absolute path, None) where the working folder is known; (None, the
        path relative to the start folder) where it is not and the script's
        own folder has that file; (None, None) if drift finds none.
        """
        candidates: list[str] = []
        for sub in _file_words(node):
            # a word of one known text, or of one besides values drift does not know
            texts = {
                "".join(a.pattern)  # type: ignore[arg-type]
                for a in self.alts(sub, st)
                if all(isinstance(p, str) for p in a.pattern)
            }
            text = texts.pop() if len(texts) == 1 else None
            if text and not text.startswith("-"):
                candidates.append(text)
        for text in candidates:
            path = self._resolve(text, st)
            if path is not None and self.files.isfile(path):
                return path, None
            relative = self._start_relative(text, st) if path is None else None
            if relative is not None and self._is_file(self._guess(relative)):
                return None, relative
        return None, None

    def _unknown_file_word(self, node: Node, st: State) -> bool:
        """True if a word of the command may be a file drift cannot know (``$ENV_FILE``)."""
        for sub in _file_words(node):
            alts = self.alts(sub, st)
            if len({a.pattern for a in alts}) > 1:
                return True
            if any(not all(isinstance(p, str) for p in a.pattern) for a in alts):
                return True
        return False

    def s_unset(self, node: Node, st: State, how: str) -> None:
        """``unset X`` leaves X without a value; ``unset -f f`` forgets a function."""
        functions = False
        for child in node.children[1:]:
            text = node_text(child)
            if text.startswith("-"):
                functions = functions or "f" in text
                continue
            if functions:
                self.functions.pop(text, None)
                continue
            if is_name(text):
                self.touched.add(text)
                st.vars[text] = (Binding(None, self.origin(child), False, st.conds),)


def _file_words(node: Node) -> list[Node]:
    """The words of the commands in ``$(...)`` that may name a file: arguments, redirections."""
    out: list[Node] = []
    for sub in walk_nodes(node):
        parent = sub.parent
        if sub.type in WORD_NODES and parent is not None:
            if parent.type == "command" and parent.child_by_field_name("name") is not sub:
                out.append(sub)
            elif parent.type == "file_redirect":
                out.append(sub)
    return out


def _split_value(value: str, where: Origin) -> Alt:
    """A KEY=VALUE line's value as ``export $(...)`` gets it: the output split into words.

    ``K=v  # note`` gives v (the note is other words); ``K="v"`` gives v; a
    quoted value with blanks inside splits where drift would have to guess.
    """
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if not any(c.isspace() for c in inner):
            return Alt((Seg(inner, where),))
        return Alt((Seg(Hole(value), where),))
    words = value.split()
    return Alt((Seg(words[0] if words else "", where),))
