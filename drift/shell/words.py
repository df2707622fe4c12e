"""Word expansion: a tree-sitter word node in, every value it may have out (`Alt`).

`Words` holds what every expansion needs (where a node was written, a
variable's bindings, a path made absolute) and expands the literal forms
itself: plain words, quotes and quote removal, ``$'...'``, concatenation.
The other forms are rooms of their own, reached through `WORD_FORMS`,
which the evaluator fills: parameter expansion (`drift.shell.expansion`)
and command substitution (`drift.shell.substitution`). `fields` then
splits the values into command-line words (`drift.shell.fields`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from drift.rooted import Files
from drift.shell.fields import merge_options, split_fields
from drift.shell.patterns import Hole, feasible
from drift.shell.state import State, unset_bindings
from drift.shell.syntax import Node, node_text, pieces_between
from drift.shell.values import (
    MAX_ALTERNATIVES,
    MAX_VARIANTS,
    Alt,
    Binding,
    Field,
    Origin,
    Seg,
    dedupe,
)

WordForm = Callable[[Any, Node, State, bool], list[Alt]]
"""How one kind of word node expands: (evaluator, node, path, quoted) -> its values."""


class Words:
    """Word expansion, mixed into the evaluator: a node in, the values it may have out.

    The evaluator sets the script's path, the file being walked and its
    lines, and the line offset of code given as a string (``bash -c``).
    """

    WORD_FORMS: ClassVar[Mapping[str, WordForm]]
    """Node type -> its expansion; any other type is one hole with its text."""

    top: str
    files: Files  # where the paths the script names are looked at
    file: str
    offset: int
    lines: dict[str, list[str]]
    origins: dict[tuple[str, int], Origin]
    keep_lines: bool
    touched: set[str]
    depth: int
    # the code being walked as a string run again, and where each of its byte ranges was written
    written_at: tuple[tuple[str, int, int], Sequence[tuple[int, int, Origin]]] | None = None
    needs_start: bool  # a path was read from the folder the script was started in, unknown

    def origin(self, node: Node) -> Origin:
        """Where `node` was written: its file, line and the line's text.

        A word of a string being run again (``eval "$CMD"``) was written
        where that piece of the string was (`written_at`).
        """
        written = self.written_at
        if written is not None and node.type in _WORD_NODES:
            walked, places = written
            if walked == (self.file, self.offset, self.depth):
                for start, end, origin in places:
                    if start <= node.start_byte < end:
                        return origin
        line = node.start_point[0] + 1 + self.offset
        key = (self.file, line)
        found = self.origins.get(key)
        if found is None:
            lines = self.lines.get(self.file) or []
            text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            found = self.origins[key] = Origin(self.file, line, text)
        return found

    def _lookup(self, st: State, name: str) -> tuple[Binding, ...]:
        """The bindings of `name` on this path; the caller's, if the script never set it."""
        return st.vars.get(name) or unset_bindings(st, name)

    def _resolve(self, text: str | None, st: State) -> str | None:
        """An absolute path for `text`, if the folder it is relative to is known; else None.

        bash reads a relative path from its working folder, which the script's
        own folder is not: under systemd it is ``/`` unless the unit says, by
        hand wherever the operator stood. While the folder the script was
        started in is unknown, a relative path has no absolute one here (see
        `_start_relative` and `drift.shell.start`).
        """
        if not text or text.startswith("~"):
            return None
        if os.path.isabs(text):
            return os.path.normpath(text)
        if st.cwd is None or not os.path.isabs(st.cwd):
            return None
        return os.path.normpath(os.path.join(st.cwd, text))

    def _start_relative(self, text: str | None, st: State) -> str | None:
        """`text` relative to the folder the script was started in, when that folder is unknown.

        None when `text` is absolute, the working folder is known, or nothing
        is known of it (a ``cd`` to a value drift does not know).
        """
        if not text or text.startswith("~") or os.path.isabs(text):
            return None
        if st.cwd is None or os.path.isabs(st.cwd):
            return None
        self.needs_start = True
        return os.path.normpath(os.path.join(st.cwd, text))

    def _literals(self, node: Node, st: State) -> set[str] | None:
        """Every text a word may have, if all are known; else None."""
        out: set[str] = set()
        for a in self.alts(node, st):
            p = a.pattern
            if not all(isinstance(x, str) for x in p):
                return None
            out.add("".join(p))  # type: ignore[arg-type]
        return out

    def _literal_word(self, node: Node, st: State) -> str | None:
        """The one text a word has, if it is known and single."""
        values = self._literals(node, st)
        if values is None or len(values) != 1:
            return None
        return values.pop()

    def fields(self, nodes: Sequence[Node], st: State) -> list[tuple[Field, ...]]:
        """The command lines a list of words may expand to (each a tuple of fields), capped.

        Words whose values come from both sides of one test never meet in a
        run: such command lines are left out before the cap, which they would
        otherwise fill with lines no run has, pushing out lines a run has. A
        list at the cap may have lost some (see `drift.collectors.script_facts`).
        """
        variants: list[tuple[Field, ...]] = [()]
        for node in nodes:
            word_origin = self.origin(node)
            options = [split_fields(a, word_origin) for a in self.alts(node, st)]
            options = merge_options(list(dict.fromkeys(options)) or [()])
            product = [v + o for v in variants for o in options]
            runs = [p for p in product if feasible(c for f in p for c in f.conds)]
            product = runs or product  # none a run can have: keep what was read
            if len(product) > MAX_VARIANTS:
                product = product[:MAX_VARIANTS]
            variants = product
        return variants

    def alts(self, node: Node, st: State) -> list[Alt]:
        """Every value a word node may have, unsplit; pieces keep where they were written."""
        out = self._alts(node, st, quoted=False)
        if len(out) > MAX_ALTERNATIVES:
            return [Alt((Seg(Hole(node_text(node)), self.origin(node), split=True),))]
        return out

    def _alts(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """The values of a word node; `quoted` inside double quotes (no splitting, no ``~``)."""
        form = self.WORD_FORMS.get(node.type)
        if form is None:
            return [Alt((Seg(Hole(node_text(node)), self.origin(node), split=not quoted),))]
        return form(self, node, st, quoted)

    # ------------------------------------------------------------ the literal forms

    def _plain(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """A word as written; unquoted, its backslashes go and a leading ``~`` is the caller's."""
        origin = self.origin(node)
        text = node_text(node)
        if node.type == "word" and not quoted:
            if text.startswith("~"):
                head, slash, tail = text.partition("/")
                return [
                    Alt((Seg(Hole(head, "caller"), origin), Seg(slash + unescape(tail), origin)))
                ]
            text = unescape(text)
        return [Alt((Seg(text, origin),))]

    def _raw_string(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """``'text'``: the text as it is."""
        return [Alt((Seg(node_text(node)[1:-1], self.origin(node)),))]

    def _ansi_c_string(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """``$'a\tb'``: the text with its C escapes read."""
        return [Alt((Seg(_ansi_c(node_text(node)[2:-1]), self.origin(node)),))]

    def _string(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """``"..."``: its parts one after another, none split."""
        return self._concat(node, st, quoted=True, skip_quotes=True)

    def _translated_string(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """``$"..."``: the string inside (drift does not translate)."""
        return self._alts(node.named_children[0], st, quoted)

    def _string_content(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """The literal text inside double quotes, its backslash escapes read."""
        return [Alt((Seg(dq_unescape(node_text(node), self.keep_lines), self.origin(node)),))]

    def _concatenation(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """``a"$B"c``: the parts of one word, one after another."""
        return self._concat(node, st, quoted=quoted, skip_quotes=False)

    def _computed(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """``$((...))``: a value computed when the script runs, one number: one word, unsplit."""
        return [Alt((Seg(Hole(node_text(node), "command"), self.origin(node)),))]

    def _generated(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """``<(cmd)``, ``{a,b}``: words the shell generates, never split again."""
        return [Alt((Seg(Hole(node_text(node), "command"), self.origin(node)),))]

    def _array_literal(self, node: Node, st: State, quoted: bool) -> list[Alt]:
        """``(a b)`` where one word is expected: one hole."""
        return [Alt((Seg(Hole(node_text(node)), self.origin(node)),))]

    def _concat(self, node: Node, st: State, quoted: bool, skip_quotes: bool) -> list[Alt]:
        """The pieces of a word one after another, with any source text between them."""
        children = list(node.children)
        start, end = node.start_byte, node.end_byte
        if skip_quotes and children and children[0].type == '"':
            start = children[0].end_byte
            children = children[1:]
        if skip_quotes and children and children[-1].type == '"':
            end = children[-1].start_byte
            children = children[:-1]
        origin = self.origin(node)
        results: list[Alt] = [Alt(())]
        for piece in pieces_between(node, children, start, end):
            if isinstance(piece, str):
                text = dq_unescape(piece, self.keep_lines) if quoted else unescape(piece)
                results = appended(results, Seg(text, origin, split=not quoted))
            elif not piece.is_named:
                text = node_text(piece)
                if text != '"':
                    results = appended(results, Seg(text, origin))
            else:
                results = combined(results, self._alts(piece, st, quoted), MAX_ALTERNATIVES + 1)
        if quoted:
            # "" is a word even when empty; "$@" or "${A[@]}" of nothing is none
            spread = any(_every_element(c) for c in children)
            results = [r if r.segs or spread else Alt((Seg("", origin),), r.conds) for r in results]
        return results


LITERAL_FORMS: dict[str, WordForm] = {
    **dict.fromkeys(
        (
            "word",
            "number",
            "extglob_pattern",
            "regex",
            "special_variable_name",
            "variable_name",
            "heredoc_body",
            "file_descriptor",
        ),
        Words._plain,
    ),
    "raw_string": Words._raw_string,
    "ansi_c_string": Words._ansi_c_string,
    "string": Words._string,
    "translated_string": Words._translated_string,
    "string_content": Words._string_content,
    "concatenation": Words._concatenation,
    "arithmetic_expansion": Words._computed,
    "process_substitution": Words._generated,
    "brace_expression": Words._generated,
    "array": Words._array_literal,
}
"""The word forms `Words` expands itself (the evaluator adds the others to WORD_FORMS)."""


def appended(results: list[Alt], seg: Seg) -> list[Alt]:
    """Each value in `results` with `seg` after it."""
    return [Alt(r.segs + (seg,), r.conds) for r in results]


def combined(results: list[Alt], options: list[Alt], limit: int) -> list[Alt]:
    """Each value in `results` followed by each of `options` (at most `limit` of them)."""
    return [Alt(r.segs + o.segs, dedupe(r.conds + o.conds)) for r in results for o in options][
        :limit
    ]


def written_value(node: Node | None) -> str | None:
    """An assignment's value as the line writes it, outer quotes removed."""
    if node is None:
        return ""
    text = node_text(node)
    if node.type == "string" and text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if node.type == "raw_string":
        return text[1:-1]
    return text


def unescape(text: str) -> str:
    """Quote removal of an unquoted word: a backslash keeps the next character, newline joins."""
    if "\\" not in text:
        return text
    return re.sub(r"\\(\n|.)", lambda m: "" if m.group(1) == "\n" else m.group(1), text, flags=re.S)


def dq_unescape(text: str, keep_lines: bool = False) -> str:
    """Inside double quotes a backslash escapes only $ ` " \\ and newline.

    With `keep_lines`, a backslash-newline stays: the text is code for
    ``bash -c`` whose lines must keep their numbers.
    """
    if "\\" not in text:
        return text
    return re.sub(
        r'\\([$`"\\\n])',
        lambda m: ("\\\n" if keep_lines else "") if m.group(1) == "\n" else m.group(1),
        text,
    )


_ANSI = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "e": "\x1b",
    "E": "\x1b",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


_DIGITS = {
    ord("0"): re.compile(rb"[0-7]{1,3}"),  # after the backslash: \0, \12, \101
    ord("x"): re.compile(rb"[0-9a-fA-F]{1,2}"),
    ord("u"): re.compile(rb"[0-9a-fA-F]{1,4}"),
    ord("U"): re.compile(rb"[0-9a-fA-F]{1,8}"),
}
_ANSI_BYTES = {ord(k): v.encode() for k, v in _ANSI.items()}
_BACKSLASH = ord("\\")


def _ansi_c(text: str) -> str:
    r"""The text of ``$'...'`` with its backslash escapes read as bash reads them.

    bash works on bytes: ``\xHH`` and octal ``\NNN`` are one byte each (a byte
    that is not UTF-8 comes back as its surrogate escape, as a value read from
    /proc/PID/environ does), ``\uHHHH``/``\UHHHHHHHH`` are the character in
    UTF-8 (a UTF-8 locale: in the C locale bash keeps ``\u00E9`` as text, so
    such a value is then not matched to the live one, never wrongly matched),
    ``\cX`` is the control character of the byte X, and a NUL ends the string.
    """
    if "\\" not in text:
        return text
    data = text.encode("utf-8", "surrogateescape")
    out = bytearray()
    i = 0
    while i < len(data):
        if data[i] != _BACKSLASH or i + 1 == len(data):
            out.append(data[i])
            i += 1
            continue
        decoded, i = _ansi_escape(data, i + 1)
        out += decoded
    return bytes(out).split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")


def _ansi_escape(data: bytes, at: int) -> tuple[bytes, int]:
    """The bytes of the escape whose letter is `data[at]`, and where the text goes on."""
    code = data[at]
    if code in _ANSI_BYTES:
        return _ANSI_BYTES[code], at + 1
    if ord("0") <= code <= ord("7"):
        digits = _DIGITS[ord("0")].match(data, at)
        assert digits is not None
        return bytes([int(digits[0], 8) & 0xFF]), digits.end()
    if code in _DIGITS:
        digits = _DIGITS[code].match(data, at + 1)
        if digits is None:
            return bytes([_BACKSLASH, code]), at + 1  # \x with no digit stays as typed
        number = int(digits[0], 16)
        return (bytes([number]) if code == ord("x") else _utf8(number)), digits.end()
    if code == ord("c") and at + 1 < len(data):
        control = data[at + 1]
        end = at + 2
        if control == _BACKSLASH and data[end : end + 1] == b"\\":
            end += 1  # \c\\ is control-backslash
        value = 0x7F if control == ord("?") else bytes([control]).upper()[0] & 0x1F
        return bytes([value]), end
    return bytes([_BACKSLASH, code]), at + 1


def _utf8(number: int) -> bytes:
    """`number` in UTF-8 as bash writes it: surrogates and values past U+10FFFF included."""
    if number < 0x80:
        return bytes([number])
    tail = []
    limit = 0x40  # the first byte's room shrinks by one bit per continuation byte
    while number >= limit:
        tail.append(0x80 | (number & 0x3F))
        number >>= 6
        limit >>= 1
    lead = (0xFF << (8 - len(tail) - 1)) & 0xFF
    return bytes([lead | number, *reversed(tail)])


_WORD_NODES = frozenset(
    "word number string raw_string ansi_c_string concatenation string_content".split()
)
"""Nodes that are words of a command (not the command, nor an assignment)."""

_EVERY_ELEMENT = re.compile(r"\$(?:@|\{@\}|\{[A-Za-z_][A-Za-z0-9_]*\[@\]\})")


def _every_element(node: Node) -> bool:
    """``$@``, ``${@}``, ``${A[@]}``: quoted, one word per element, and no word for none."""
    return node.type in ("simple_expansion", "expansion") and bool(
        _EVERY_ELEMENT.fullmatch(node_text(node))
    )
