"""Command substitution: ``$(...)`` whose output follows from values drift knows.

``$(dirname "$0")``, ``$(basename ...)``, ``$(realpath ...)``, ``$(pwd)``,
``$(cd DIR && pwd)`` and ``$(echo ...)`` of known words are computed;
``$(getopt ... -- "$@")`` is the caller's arguments again; the output of any
other command is a hole.
"""

from __future__ import annotations

import os

from drift.shell.patterns import Hole
from drift.shell.state import State
from drift.shell.syntax import Node, node_text
from drift.shell.values import Alt, Seg, field_literal
from drift.shell.words import Words


class CommandSubstitution(Words):
    """Command substitution, mixed into the evaluator (see the module docstring)."""

    def _substitution(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """$(...): a few commands whose output follows from known values; else a hole."""
        origin = self.origin(node)
        hole = [Alt((Seg(Hole(node_text(node), "command"), origin, split=not quoted),))]
        body = [c for c in node.named_children if c.type != "comment"]
        if len(body) != 1:
            return hole
        if st.args is None and _getopt_of_arguments(body[0]):
            # getopt prints the caller's arguments again, reordered and quoted: still the
            # caller's words, placed where they are taken into a command as "$@" is.
            return [Alt((Seg(Hole(node_text(node), "args"), origin, split=not quoted),))]
        value = self._known_output(body[0], st)
        if value is None:
            return hole
        return [Alt((Seg(value, origin, split=not quoted),))]

    def _known_output(self, node: Node, st: State) -> str | None:
        """What the one command inside ``$(...)`` prints, if known values settle it; else None."""
        if node.type == "list":
            # cd DIR && pwd
            parts = node.named_children
            if len(parts) == 2 and parts[0].type == "command" and parts[1].type == "command":
                words = self._command_words(parts[0], st)
                last = self._command_words(parts[1], st)
                if words and words[0] == "cd" and last == ["pwd"] and len(words) >= 2:
                    target = next((w for w in words[1:] if not w.startswith("-")), None)
                    return self._resolve(target, st) if target else None
            return None
        if node.type != "command":
            return None
        words = self._command_words(node, st)
        if not words:
            return None
        name, args = words[0], [w for w in words[1:] if not w.startswith("-") or w == "-"]
        if name == "pwd" and st.cwd is not None and os.path.isabs(st.cwd):
            return st.cwd
        if name == "dirname" and len(args) == 1:
            return os.path.dirname(args[0].rstrip("/")) or "."
        if name == "basename" and args:
            base = os.path.basename(args[0].rstrip("/"))
            return base.removesuffix(args[1]) if len(args) > 1 else base
        if (
            name in ("realpath", "readlink")
            and len(args) == 1
            and (name == "realpath" or any(w.startswith("-") and "f" in w for w in words[1:]))
        ):
            path = self._resolve(args[0], st)
            return self.files.realpath(path) if path else None
        if name == "echo" and all(not w.startswith("-") for w in words[1:]):
            return " ".join(words[1:])
        return None

    def _command_words(self, node: Node, st: State) -> list[str] | None:
        """A simple command's words, if each is one known text; else None."""
        words: list[Node] = []
        for child in node.children:
            if child.type == "command_name":
                words.extend(child.named_children or [child])
            elif child.is_named and child.type not in ("file_redirect", "comment"):
                words.append(child)
            elif child.type == "variable_assignment":
                return None
        variants = self.fields(words, st)
        if len(variants) != 1:
            return None
        out: list[str] = []
        for f in variants[0]:
            text = field_literal(f)
            if text is None:
                return None
            out.append(text)
        return out


def _getopt_of_arguments(node: Node) -> bool:
    """``getopt ... -- "$@"``: util-linux getopt run on the script's own arguments."""
    if node.type != "command":
        return False
    name = node.child_by_field_name("name")
    if name is None or node_text(name) not in ("getopt", "/usr/bin/getopt"):
        return False
    return any(node_text(child) in ('"$@"', '"${@}"') for child in node.named_children)
