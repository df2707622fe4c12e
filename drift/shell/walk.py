"""The walk of a script's statements: the evaluator's state, and reading code into it.

`Walker` holds what one evaluation gathers (launches, sourced files, gaps,
functions, lines) and walks a file or a string of code statement by
statement, each statement going to the handler `STATEMENTS` names for its
node type (the evaluator fills the table from its rooms).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from drift.rooted import HOST, Files
from drift.shell.model import Launch, ScriptModel, SourcedFile
from drift.shell.state import State
from drift.shell.syntax import Node, UnsafeToParse, parse, syntax_problem
from drift.shell.values import Origin
from drift.shell.words import Words

MAX_DEPTH = 8
"""Nesting of sourced files, functions and ``bash -c`` strings followed."""


MAX_SOURCED_BYTES = 4 << 20
"""The largest file drift reads as code or KEY=VALUE lines."""


STARTED_IN = "if started in "
"""The condition of a path on which the script was started in the folder that follows."""


Statement = Callable[[Any, Node, State, str], None]
"""How one kind of statement is walked: (evaluator, node, path, how it runs)."""


class Walker(Words):
    """One evaluation of one script (and what it sources): its state, and the walk itself."""

    STATEMENTS: ClassVar[Mapping[str, Statement]]
    """Node type -> its handler; any other statement is read for ``${X:=d}`` alone."""

    def __init__(
        self,
        path: str,
        read: Callable[[str], bytes | None],
        files: Files = HOST,
        start: str | None = None,
        start_label: str = "",
    ) -> None:
        self.top = path
        # the folder the script is started in, if the caller knows it, and how it knows
        self.start = os.path.normpath(start) if start else None
        self.start_label = start_label
        self.needs_start = False
        self.checked: dict[tuple[str, str], bool] = {}  # (kind, path) -> answer, see path_test
        self.read = read
        self.files = files
        self.launches: list[Launch] = []
        self.sourced: list[SourcedFile] = []
        self.unread_sources: list[str] = []  # files the script sources that are there, unread
        self.gaps: list[str] = []
        self.broken: list[str] = []
        # condition text -> a test on a variable the script was given (see caller_test)
        self.tests: dict[str, dict[str, Any]] = {}
        self.touched: set[str] = set()  # every name the script assigns or unsets somewhere
        self.integers: set[str] = set()  # names given the integer attribute (declare -i) anywhere
        self.written: set[str] = set()  # files the script writes (``helper > ./node.env``)
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

    def run_file(self, data: bytes) -> ScriptModel:
        """Walk the script (its contents `data`) and say what it may launch and export."""
        state = State({}, cwd=self.start or ".")
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
        if not pwd_shows_start(self.launches):
            tests = {cond: test for cond, test in tests.items() if not cond.startswith(STARTED_IN)}
        return ScriptModel(
            self.launches,
            exported,
            self.sourced,
            self.gaps,
            self.broken,
            tests,
            self.needs_start,
            [(kind, path, answer) for (kind, path), answer in self.checked.items()],
            self._all_touched(),
            list(dict.fromkeys(self.unread_sources)),
        )

    def _all_touched(self) -> list[str] | None:
        """The names the script may change, or None if it may change any (`ScriptModel`)."""
        if self.opaque or any(launch.cleared or launch.unknown for launch in self.launches):
            return None
        names = set(self.touched)
        for launch in self.launches:
            names.update(k for k, bs in launch.env.items() if any(b.kind != "caller" for b in bs))
        if any(name.startswith("\0") for name in names):
            return None
        return sorted(names)

    def _walk_source(self, file: str, data: bytes, offset: int, st: State) -> None:
        """Walk the code in `data`, which starts at line `offset` + 1 of `file`."""
        saved = self.file, self.offset
        self.file, self.offset = file, offset
        if file not in self.lines:
            self.lines[file] = data.decode("utf-8", "surrogateescape").split("\n")
        try:
            self._walk_code(data, st)
        finally:
            self.file, self.offset = saved

    def _walk_string(self, script: str, origin: Origin, st: State, how: str) -> None:
        """A script given as a string (``bash -c``, ``eval``): its lines count from `origin`."""
        self.depth += 1
        saved = self.file, self.offset
        try:
            data = script.encode("utf-8", "surrogateescape")
            self.offset = origin.line - 1
            self._walk_code(data, st)
        finally:
            self.file, self.offset = saved
            self.depth -= 1

    def _walk_code(self, data: bytes, st: State) -> None:
        """Parse `data` and walk its statements; a line that is not bash is noted as broken."""
        tree = self._parse(data)
        if tree is not None:
            self._note_errors(tree.root_node)
            self.block(tree.root_node.children, st)

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
        problem = syntax_problem(root)
        if problem is not None:
            row, what = problem
            line = row + 1 + self.offset
            self.broken.append(f"{self.file}:{line}: drift cannot parse this line as bash{what}")

    def _check(self, kind: str, path: str) -> bool:
        """`path_test` of `path`, remembered: the reading holds while the answer does."""
        answer = self.checked[(kind, path)] = path_test(kind, path, self.files)
        return answer

    def _is_file(self, path: str) -> bool:
        """True if `path` is a regular file (its symlinks followed)."""
        return self._check("file", path)

    def _missing(self, path: str) -> bool:
        """True if nothing is at `path` (not even a dangling link)."""
        return self._check("missing", path)

    def _read_source(self, path: str | None, origin: Origin) -> bytes | None:
        """The bytes of a file the script reads (once per evaluation), noted as sourced."""
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

    def block(self, nodes: Sequence[Node], st: State) -> None:
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

    def statement(self, node: Node, st: State, how: str = "foreground") -> None:
        """One statement, run `how`: "foreground", or "background" after a ``&``."""
        kind = node.type
        handler = self.STATEMENTS.get(kind)
        if handler is not None:
            handler(self, node, st, how)
        elif kind == "ERROR":
            pass  # noted once in gaps
        elif kind in ("comment", "heredoc_body", "heredoc_end", "heredoc_start"):
            pass
        else:
            # test_command, arithmetic and other expressions: look for := inside
            self._expressions(node, st)

    def _expressions(self, node: Node, st: State) -> None:
        """Tests and arithmetic change nothing, except a ``${X:=d}`` inside them."""
        if b"=" not in bytes(node.text):
            return
        for child in node.children:
            if child.type == "expansion":
                if b"=" in bytes(child.text):
                    self.alts(child, st)
            elif child.named_child_count:
                self._expressions(child, st)


def pwd_shows_start(launches: Sequence[Launch]) -> bool:
    """Whether the live PWD of what the script launches is the folder it was started in.

    bash exports its working folder as PWD. When every launch happens in
    the folder the script was started in (no ``cd`` before it), with PWD
    neither set by the script nor cleared, the launched process's PWD names
    that folder.
    """
    return bool(launches) and all(
        launch.cwd == "." and not launch.cleared and "PWD" not in launch.env for launch in launches
    )


def missing(path: str, files: Files = HOST) -> bool:
    """True if nothing is at `path` (not even a dangling link); False if it is there or unknown."""
    try:
        files.stat(path, follow_symlinks=False)
    except OSError as exc:
        return exc.errno in (errno.ENOENT, errno.ENOTDIR)
    except ValueError:
        return False
    return False


def path_test(kind: str, path: str, files: Files = HOST) -> bool:
    """What the reading asks of a path: "file" (a regular file), "dir", "exists", "missing"."""
    if kind == "file":
        return files.isfile(path)
    if kind == "dir":
        try:
            return stat.S_ISDIR(files.stat(path).st_mode)
        except (OSError, ValueError):
            return False
    if kind == "exists":
        return files.exists(path)
    return missing(path, files)


def unreadable(path: str | None, files: Files = HOST) -> str:
    """Why read_regular gave nothing for `path`, as the end of a gap's sentence."""
    if path is not None and files.islink(path):
        try:
            target = files.readlink(path)
        except OSError:
            target = "?"
        return f"a symlink to {target}, which drift does not follow"
    return "which drift cannot read"
