"""The bash grammar: parsing a script with tree-sitter-bash and reading its nodes.

`parse` guards the parser against the one input known to crash it;
`syntax_problem` finds where tree-sitter recovered from an error and
`bash_refuses` asks bash itself (``bash -n``). The rest are small readings
of a node the evaluator needs everywhere: its text, its children with the
source text between them (`pieces_between`), a command on one line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

from drift.display import truncated

Node = Any  # tree_sitter.Node: typed loosely so this module imports without it for mypy


@lru_cache(maxsize=1)
def _parser() -> Any:
    """tree-sitter's parser for bash, made once (imported late: ``drift --help`` stays fast)."""
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


# tree-sitter-bash 0.25's scanner hands the character after "{" (or after "{1..") to C's
# isdigit(), which indexes a 384-entry table with it: a code point past U+FFFF reads far
# outside it and can kill the process (tree-sitter/tree-sitter-bash#337). A serve script
# must not be able to stop every record, so such a text is never handed to it.
_ISDIGIT_CRASH = re.compile(rb"\{[0-9]*(?:\.\.[0-9]*)?[\xf0-\xf7]")


class UnsafeToParse(Exception):
    """Text tree-sitter-bash would crash on; `line` (from 1) is where."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def parse(data: bytes) -> Any:
    """The tree-sitter tree of a bash script; UnsafeToParse if the parser would crash on it."""
    crash = _ISDIGIT_CRASH.search(data)
    if crash is not None:
        raise UnsafeToParse(data.count(b"\n", 0, crash.start()) + 1)
    return _parser().parse(data)


def node_text(node: Node) -> str:
    """The source text of a node (bytes that are not UTF-8 kept as surrogates)."""
    return bytes(node.text).decode("utf-8", "surrogateescape")


def walk_nodes(node: Node) -> Iterator[Node]:
    """`node` and every node below it, in source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def simple_name(node: Node) -> str:
    """The name in ``$NAME`` (a simple_expansion node)."""
    for c in node.named_children:
        return node_text(c)
    return node_text(node).lstrip("$")


def child_index(parent: Node, child: Node) -> int:
    """Where `child` stands among `parent`'s children (-1 if it is not one)."""
    for i, c in enumerate(parent.children):
        if c.id == child.id:
            return i
    return -1


def command_text(node: Node) -> str:
    """A command's source text on one line: continuations joined, blanks collapsed."""
    text = node_text(node).replace("\\\n", " ")
    return " ".join(text.split())


def short_text(text: str, limit: int = 80) -> str:
    """Code as a condition or a gap names it: on one line, blanks collapsed, cut at `limit`."""
    text = " ".join(text.split())
    return truncated(text, limit)


WORD_NODES = frozenset(
    {"word", "string", "raw_string", "simple_expansion", "expansion", "concatenation", "number"}
)
"""Node types that are a word (an argument, a test's operand)."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_name(text: str) -> bool:
    """True if `text` is a shell variable name (``A_1``, not ``1A`` or ``A-B``)."""
    return _NAME.fullmatch(text) is not None


def pieces_between(
    node: Node, children: Sequence[Node], start: int, end: int
) -> Iterator[Node | str]:
    """`children` of `node` in order, each gap between them as its source text.

    The gaps are what tree-sitter left to no child from byte `start` to byte
    `end` (blanks and characters inside a word, between its parts); the
    caller decides how quotes apply to them.
    """
    data = bytes(node.text)
    base = node.start_byte
    cursor = start
    for child in children:
        # tree-sitter-bash puts the blanks before a ``$`` inside a double-quoted string
        # into the expansion's first token (``"$A $B"``: `` $B``): they are the gap's
        begins = child.start_byte
        if child.children and child.children[0].start_byte == begins:
            lead = data[begins - base : child.children[0].end_byte - base]
            begins += len(lead) - len(lead.lstrip(b" \t\n"))
        if begins > cursor:
            yield data[cursor - base : begins - base].decode("utf-8", "surrogateescape")
        cursor = child.end_byte
        yield child
    if end > cursor:
        yield data[cursor - base : end - base].decode("utf-8", "surrogateescape")


def syntax_problem(root: Node) -> tuple[int, str] | None:
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
