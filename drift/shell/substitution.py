"""Command substitution: ``$(...)`` whose output follows from values drift knows.

``$(dirname "$0")``, ``$(basename ...)``, ``$(realpath ...)``, ``$(pwd)``,
``$(cd DIR && pwd)`` and ``$(echo ...)`` of known words are computed;
``$(getopt ... -- "$@")`` is the caller's arguments again; the output of any
other command is a hole.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from drift.shell.fields import choice_alt
from drift.shell.patterns import Hole, Part
from drift.shell.state import UNKNOWN_OUTPUT, State
from drift.shell.syntax import Node, node_text
from drift.shell.values import BREAK, MAX_ALTERNATIVES, Alt, Seg, dedupe, field_literal
from drift.shell.walk import MAX_DEPTH
from drift.shell.words import Words


class CommandSubstitution(Words):
    """Command substitution, mixed into the evaluator (see the module docstring)."""

    functions: dict[str, tuple[Node, str, int]]
    block: Callable[[Sequence[Node], State], None]

    def _substitution(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """$(...): a few commands whose output follows from known values; else a hole."""
        origin = self.origin(node)
        hole = [Alt((Seg(Hole(node_text(node), "command"), origin, split=not quoted),))]
        body = [c for c in node.named_children if c.type != "comment"]
        if len(body) != 1:
            return self._captured(body, st, quoted) or hole
        if st.args is None and _getopt_of_arguments(body[0]):
            # the caller's arguments, options first (`eval set -- "$OPTS"` puts them back)
            return [Alt((Seg(Hole(node_text(node), "args"), origin, split=not quoted),))]
        value = self._known_output(body[0], st)
        if value is None:
            return self._captured(body, st, quoted) or hole
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

    # ------------------------------------------------------------ output of code drift reads

    def _captured(self, body: list[Node], st: State, quoted: bool) -> list[Alt] | None:
        """What code that only prints (``echo``, ``printf``, functions of them) writes; else None.

        ``CMD=$(build_cmd "$TP")`` where ``build_cmd`` echoes the command
        piece by piece, some pieces under ``if``: the code runs here, in a
        copy of the path (a subshell changes nothing outside), and each
        value it may print keeps the lines that wrote its words. Code that
        runs anything else (a program may print too) is not read.
        """
        if self.depth >= MAX_DEPTH or not all(self._prints_only(n, frozenset()) for n in body):
            return None
        sub = st.fork()
        sub.out, sub.stop, sub.last = (Alt(()),), None, ()
        self.depth += 1
        try:
            self.block(body, sub)
        finally:
            self.depth -= 1
        if sub.out is None or UNKNOWN_OUTPUT in sub.out:
            return None
        return [
            Alt(tuple(replace(s, split=not quoted) for s in _without_newlines(a.segs)), a.conds)
            for a in sub.out
        ]

    def _prints_only(self, node: Node, seen: frozenset[str]) -> bool:
        """Whether `node` is code that prints and assigns, and runs nothing that may print."""
        kind = node.type
        if kind in _QUIET_NODES or not node.is_named:
            return True
        if kind == "command":
            name = node.child_by_field_name("name")
            text = node_text(name) if name is not None else ""
            if text in _PRINTERS or text in _QUIET_COMMANDS:
                return True
            found = self.functions.get(text)
            if found is None or text in seen:
                return False
            return self._prints_only(found[0], seen | {text})
        if kind == "redirected_statement":
            if any(c.type in ("heredoc_redirect", "herestring_redirect") for c in node.children):
                return False
            inner = node.child_by_field_name("body")
            return inner is not None and self._prints_only(inner, seen)
        if kind in _PRINTING_BLOCKS:
            return all(self._prints_only(c, seen) for c in node.named_children)
        return False

    def _print(self, words: list[Node], node: Node, st: State) -> bool:
        """``echo`` or ``printf`` while the path's output is captured: what it adds to it.

        Each word's values keep the lines that wrote their pieces. False for
        ``printf -v X`` (it assigns; the caller handles it).
        """
        name = node_text(words[0])
        if name == "printf" and len(words) > 1 and self._literal_word(words[1], st) == "-v":
            return False
        printed: list[Alt] = [Alt(())]
        for values in (_one_choice(self.alts(w, st)) for w in words[1:]):
            printed = [
                Alt(a.segs + (BREAK,) + b.segs, dedupe(a.conds + b.conds))
                for a in printed
                for b in values
            ]
            if len(printed) > MAX_ALTERNATIVES:
                printed = [UNKNOWN_OUTPUT]
                break
        said = [
            (_echoed if name == "echo" else _printf)(_printed_words(a))
            if a is not UNKNOWN_OUTPUT
            else None
            for a in printed
        ]
        added = [
            UNKNOWN_OUTPUT if text is None else Alt(tuple(text), a.conds)
            for a, text in zip(printed, said, strict=True)
        ]
        joined = [
            Alt(a.segs + b.segs, dedupe(a.conds + b.conds)) for a in st.out or () for b in added
        ]
        joined = list(dedupe(joined))
        if len(joined) > MAX_ALTERNATIVES or UNKNOWN_OUTPUT in added:
            joined = [UNKNOWN_OUTPUT]
        st.out = tuple(joined)
        return True


def _getopt_of_arguments(node: Node) -> bool:
    """``getopt ... -- "$@"``: it prints the script's own arguments, rearranged and quoted."""
    if node.type != "command":
        return False
    name = node.child_by_field_name("name")
    words = [node_text(c) for c in node.children if c.is_named and c is not name]
    return (
        name is not None
        and node_text(name) == "getopt"
        and words[-2:] == ["--", '"$@"']
        and not any(c.type == "variable_assignment" for c in node.children)
    )


_PRINTERS = frozenset({"echo", "printf"})
_QUIET_COMMANDS = frozenset(
    ": true false local declare typeset readonly export shift return set [ [[ test".split()
)
"""Builtins that print nothing on success (their errors go to stderr)."""

_QUIET_NODES = frozenset(
    """comment word string raw_string ansi_c_string concatenation simple_expansion expansion
    command_substitution number test_command variable_assignment variable_assignments
    declaration_command unset_command""".split()
)
"""Nodes that print nothing themselves (a word's ``$(...)`` prints into the word)."""

_PRINTING_BLOCKS = frozenset(
    """program compound_statement if_statement elif_clause else_clause case_statement
    case_item list negated_command command_name""".split()
)
"""Statements made of others: they print what those do."""


def _without_newlines(segs: tuple[Seg, ...]) -> tuple[Seg, ...]:
    """``$(...)`` drops the trailing newlines of what it captured."""
    out = list(segs)
    while out and isinstance(out[-1].part, str):
        text = out[-1].part.rstrip("\n")
        if text:
            out[-1] = replace(out[-1], part=text)
            break
        out.pop()
    return tuple(out)


Printed = list[tuple[Seg, ...] | None]
"""The words of an ``echo`` or ``printf``, each its pieces; None for a word that may be several."""


def _printed_words(alt: Alt) -> Printed:
    """The words of a command's value (words apart at each break), as the shell splits them.

    A word with an unquoted unknown piece or blank may be several words:
    None. An unquoted empty word is no word.
    """
    words: Printed = []
    current: list[Seg] = []
    for seg in alt.segs + (BREAK,):
        if not seg.brk:
            current.append(seg)
            continue
        if any(s.split and _may_split(s.part) for s in current):
            words.append(None)
        elif current and not (all(s.split for s in current) and _text(tuple(current)) == ""):
            words.append(tuple(current))
        current = []
    return words


def _one_choice(alts: list[Alt]) -> list[Alt]:
    """A printed word's values as one choice, where each is one piece of one word.

    ``printf ' %q' --port "${PORT:-8000}"`` prints one text whose word is
    either value, not two texts (the texts of several such words multiply).
    """
    if len(alts) < 2 or any(len(a.segs) != 1 or a.segs[0].brk for a in alts):
        return alts
    if any(a.segs[0].split and _may_split(a.segs[0].part) for a in alts):
        return alts
    if any(isinstance(a.segs[0].part, str) and a.segs[0].part.startswith("-") for a in alts):
        return alts  # a flag name that differs by branch: the texts stay apart
    return [choice_alt(alts)]


def _may_split(part: Part) -> bool:
    if isinstance(part, Hole):
        return part.kind != "choice"
    return bool(re.search(r"[ \t\n]", part))


def _text(word: tuple[Seg, ...]) -> str | None:
    """The one text of a word's pieces, if none is unknown."""
    if any(isinstance(s.part, Hole) for s in word):
        return None
    return "".join(s.part for s in word if isinstance(s.part, str))


def _echoed(words: Printed) -> list[Seg] | None:
    """What ``echo`` prints for these words (``-n``, ``-e``, ``-E`` read); None if unsure."""
    k, newline, escapes = 0, True, False
    while k < len(words):
        word = words[k]
        text = _text(word) if word is not None else None
        if text is None or not re.fullmatch(r"-[neE]+", text):
            break
        newline = newline and "n" not in text
        escapes = escapes or "e" in text
        k += 1
    out: list[Seg] = []
    for i, word in enumerate(words[k:]):
        if i:
            out.append(Seg(" ", None))
        if word is None:
            out.append(Seg(Hole("?"), None, split=True))  # any words, joined by blanks
            continue
        if escapes and any(isinstance(s.part, str) and "\\" in s.part for s in word):
            return None
        out.extend(word)
    return out + ([Seg("\n", None)] if newline else [])


_CONVERSION = re.compile(r"%([sqd%])|\\(.)|(%)")


def _printf(words: Printed) -> list[Seg] | None:
    """What ``printf FORMAT ARGS`` prints (``%s``, ``%q``, ``%d``, ``\\n``); None if unsure.

    The format is used again while arguments remain, as bash does.
    """
    head = words[0] if words else None
    fmt = _text(head) if head is not None else None
    args = list(words[1:])
    if head is None or fmt is None or fmt.startswith("-") or any(a is None for a in args):
        return None
    origin = next((s.origin for s in head if s.origin is not None), None)
    out: list[Seg] = []
    while True:
        used = False
        last = 0
        for m in _CONVERSION.finditer(fmt):
            out.append(Seg(fmt[last : m.start()], origin))
            last = m.end()
            if m.group(3):
                return None  # a conversion drift does not read (%5s, %x ...)
            if m.group(2) is not None:
                escaped = _ESCAPES.get(m.group(2))
                if escaped is None:
                    return None
                out.append(Seg(escaped, origin))
                continue
            letter = m.group(1)
            if letter == "%":
                out.append(Seg("%", origin))
                continue
            used = True
            arg = args.pop(0) if args else None
            if arg is None:
                out.append(Seg("0" if letter == "d" else "", origin))
            elif letter == "q":
                quoted = _quoted(arg)
                if quoted is None:
                    return None
                out.extend(quoted)
            else:
                out.extend(arg)
        out.append(Seg(fmt[last:], origin))
        if not used or not args:
            return [s for s in out if s.part != ""]


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}
_SAFE = re.compile(r"[A-Za-z0-9_./:@%+=-]*")


def _quoted(word: tuple[Seg, ...] | None) -> list[Seg] | None:
    """``printf %q``: the word quoted so that code reading it again gets that one word.

    A known word is escaped as bash escapes it; an unknown one is written in
    double quotes around its hole (read again, it is one word, unsplit).
    """
    if word is None:
        return None
    pieces = [s for s in word if s.part != ""]
    text = _text(word)
    if text is None:
        if len(pieces) == 1:
            return [Seg('"', None), replace(pieces[0], split=False), Seg('"', None)]
        return None
    origin = next((s.origin for s in pieces if s.origin is not None), None)
    if text == "":
        return [Seg("''", origin)]
    if not text.isascii() or not text.isprintable():
        return None
    escaped = "".join(
        c if _SAFE.fullmatch(c) or (c in "~#" and i) else "\\" + c for i, c in enumerate(text)
    )
    return [Seg(escaped, origin)]
