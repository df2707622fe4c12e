"""Serve scripts: their text, the variables they export, and the command they exec.

Facts are ``script:<path>`` with keys ``content`` (the whole text), one
``export:<NAME>`` per variable the script hands to the process it starts,
``exec`` (that command, shell-joined) and one ``flag:<name>`` per flag of it,
each with the file, line and line text it comes from.

The script is read, never run: values are the shell words after quote
removal, with ``$VAR``, ``${VAR}`` and ``$(cmd)`` kept as written. Bytes that
are not UTF-8 appear as ``\\xNN`` escapes, so the text is valid for any store
and a change to such a byte still changes the value.

What counts as exported to the command: ``export K=V`` (several per line),
``export K`` (with the value of an earlier ``K=V``, else "" marked
``inherited``: it passes on whatever the script itself was given),
``declare -x``/``typeset -x``, assignments while ``set -a`` is on, a later
``K=V`` to an exported name, ``K=V exec cmd`` / ``K=V cmd`` on the command
line itself, and ``exec env K=V cmd`` (``env -u K`` and ``env -i`` remove).
``unset K`` and ``export -n K`` remove. The command is the last ``exec`` that
runs a program (``exec >log 2>&1`` only redirects); without one, the last
command that is not a shell builtin or housekeeping (cd, echo, mkdir ...);
exports after an exec cannot reach it and are ignored, while without exec
every export counts, since the command is only a guess. Sourced files
are not followed, and conditionals and functions are read as straight-line
code: an export inside ``if`` counts as if it ran.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from drift.collectors.services import parse_flags
from drift.facts import CollectContext, CollectionError, Fact, printable

MAX_SCRIPT_BYTES = 8 << 20
"""A "script" larger than this is a misconfiguration (a log, a binary), not read each minute."""

MAX_LOGICAL_LINES = 500
"""A quote left open for this many lines is a broken line, not a long string."""


@dataclass(frozen=True, slots=True)
class Export:
    """One variable the command receives, and the line that gave it its value.

    `inherited` means the script exports a name it never assigns (value "");
    `export_line` is where it was exported when that differs from `line`.
    """

    name: str
    value: str
    line: int
    text: str
    inherited: bool = False
    export_line: int | None = None


@dataclass(frozen=True, slots=True)
class Command:
    """The command the script runs: `argv` as written after ``exec``, `program` after ``env``."""

    argv: tuple[str, ...]
    program: tuple[str, ...]
    line: int
    text: str
    via_exec: bool


@dataclass(frozen=True, slots=True)
class ParsedScript:
    """What a script hands to its command: the exported variables and the command itself."""

    exports: dict[str, Export]
    command: Command | None


def collect_script(
    service_name: str, script_path: str, ctx: CollectContext
) -> Iterator[Fact | CollectionError]:
    """Facts about a service's serve script; an unreadable or missing script is a blind spot."""
    subject = f"script:{script_path}"
    if os.path.abspath(script_path) in ctx.exclude:
        yield CollectionError(subject, None, f"{script_path} is one of drift's own files")
        return
    try:
        data = _read_regular_file(script_path)
    except FileNotFoundError:
        # A serve script that vanished is suspicious, but it must not read as
        # "every export removed": its facts keep their last value.
        yield CollectionError(subject, None, f"script not found: {script_path}")
        return
    except PermissionError:
        yield CollectionError(subject, None, f"permission denied reading {script_path}")
        return
    except OSError as exc:
        yield CollectionError(subject, None, f"cannot read {script_path}: {exc.strerror or exc}")
        return

    where = {"file": script_path, "service": service_name}
    yield Fact(subject, "content", data.decode("utf-8", "backslashreplace"), dict(where))

    # Parse the real bytes (a backslash escape would be read as shell
    # quoting); make each value printable afterwards.
    parsed = parse_script(data.decode("utf-8", "surrogateescape"))
    for name, export in parsed.exports.items():
        provenance: dict[str, Any] = {**where, "line": export.line, "text": printable(export.text)}
        if export.inherited:
            provenance["inherited"] = True
        if export.export_line is not None:
            provenance["exported_at"] = export.export_line
        yield Fact(subject, f"export:{name}", printable(export.value), provenance)

    command = parsed.command
    if command is not None:
        provenance = {**where, "line": command.line, "text": printable(command.text)}
        if not command.via_exec:
            provenance["via"] = "last command (no exec)"
        yield Fact(subject, "exec", printable(shlex.join(command.argv)), dict(provenance))
        for name, value in parse_flags(command.program).items():
            yield Fact(subject, f"flag:{printable(name)}", printable(value), dict(provenance))


def _read_regular_file(path: str) -> bytes:
    """The file's bytes; a FIFO or device is refused instead of blocking the record."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if info.st_size > MAX_SCRIPT_BYTES:
            raise OSError(errno.EFBIG, f"{info.st_size} bytes is too large for a serve script")
        return f.read(MAX_SCRIPT_BYTES + 1)


def parse_script(text: str) -> ParsedScript:
    """Read a shell script without running it: what it exports to the command it runs."""
    reader = _Reader()
    for line, shown, statements in _logical_lines(text):
        for words in statements:
            reader.statement(words, line, shown)
    return reader.result()


# --- words -------------------------------------------------------------------


class _Incomplete(Exception):
    """The text ends inside a quote or substitution: the line goes on below.

    `closer` is the character that must come for the outermost open
    construct to end, so lines without it are taken in without re-reading.
    """

    def __init__(self, closer: str = "") -> None:
        super().__init__(closer)
        self.closer = closer


@dataclass(frozen=True, slots=True)
class _Word:
    """A shell word after quote removal; `plain` counts its leading unquoted characters.

    ``K=v`` is an assignment only if ``K=`` is written bare (``"K=v"`` is not).
    """

    text: str
    plain: int


@dataclass(frozen=True, slots=True)
class _Op:
    text: str


@dataclass(frozen=True, slots=True)
class _Redirect:
    text: str


_Token = _Word | _Op | _Redirect

_META = frozenset(" \t\n;&|()<>")
_OPERATORS = ("&&", "||", ";;", "|&", ";", "&", "|", "(", ")")
_REDIRECTIONS = ("&>>", "&>", "<<<", "<<-", "<<", ">>", ">&", "<&", "<>", ">|", ">", "<")
_PLAIN_RUN = re.compile(r"[^ \t\n;&|()<>\\'\"$`]+|\$")
_DOUBLE_QUOTED_SPECIAL = re.compile(r'["\\$`]')
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CLOSERS = {"(": ")", "{": "}"}
_ANSI_ESCAPES = {
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


def _tokenize(s: str) -> list[_Token]:
    """Split one logical line into words, operators and redirections; raises _Incomplete."""
    tokens: list[_Token] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c in " \t":
            i += 1
        elif c == "\n":
            tokens.append(_Op(";"))
            i += 1
        elif c == "#":
            # A comment starts only where a word could.
            end = s.find("\n", i)
            i = n if end < 0 else end
        elif c in "<>" and s.startswith("(", i + 1):
            # Process substitution, as in `exec > >(tee -a log) 2>&1`: one word.
            try:
                end = _skip_balanced(s, i + 1)
            except _Incomplete:
                raise _Incomplete(")") from None
            tokens.append(_Word(s[i:end], 0))
            i = end
        elif c in "&;|()<>":
            redirect = next((r for r in _REDIRECTIONS if s.startswith(r, i)), None)
            if redirect is not None:
                tokens.append(_Redirect(redirect))
                i += len(redirect)
            else:
                op = next(o for o in _OPERATORS if s.startswith(o, i))
                tokens.append(_Op(op))
                i += len(op)
        else:
            word, i = _read_word(s, i)
            if word.plain == len(word.text) and word.text.isdigit() and i < n and s[i] in "<>":
                continue  # the file descriptor of `2>&1`, not an argument
            tokens.append(word)
    return tokens


def _read_word(s: str, i: int) -> tuple[_Word, int]:
    """One word starting at s[i], quotes removed, expansions kept as written."""
    parts: list[str] = []
    length = 0
    plain = -1  # -1 while nothing quoted or expanded has been seen
    n = len(s)
    construct = i
    try:
        while i < n:
            construct = i
            c = s[i]
            if c in _META:
                if c == "(" and plain < 0 and _ASSIGNMENT.fullmatch("".join(parts)):
                    # An array assignment `K=(a b)`: one word, kept as written.
                    end = _skip_balanced(s, i)
                    piece, i = s[i:end], end
                else:
                    break
            elif c == "\\":
                piece = s[i + 1 : i + 2]
                i += 2
            elif c == "'":
                end = s.find("'", i + 1)
                if end < 0:
                    raise _Incomplete
                piece, i = s[i + 1 : end], end + 1
            elif c == '"':
                piece, i = _read_double_quoted(s, i + 1)
            elif s.startswith("$'", i):
                piece, i = _read_ansi_c(s, i + 2)
            elif s.startswith('$"', i):
                piece, i = _read_double_quoted(s, i + 2)
            elif s.startswith("$(", i) or s.startswith("${", i):
                end = _skip_balanced(s, i + 1)
                piece, i = s[i:end], end
            elif c == "`":
                end = _skip_backticks(s, i)
                piece, i = s[i:end], end
            else:
                match = _PLAIN_RUN.match(s, i)
                assert match is not None  # every other character starts a plain run
                parts.append(match.group())
                length += match.end() - i
                i = match.end()
                continue
            if plain < 0:
                plain = length
            parts.append(piece)
            length += len(piece)
    except _Incomplete:
        opener = s[construct + 1] if s[construct] == "$" else s[construct]
        raise _Incomplete(_CLOSERS.get(opener, opener)) from None
    text = "".join(parts)
    return _Word(text, len(text) if plain < 0 else plain), i


def _read_double_quoted(s: str, i: int) -> tuple[str, int]:
    """The inside of "..." from s[i]; returns it and the index after the closing quote."""
    parts: list[str] = []
    n = len(s)
    while True:
        match = _DOUBLE_QUOTED_SPECIAL.search(s, i)
        if match is None:
            raise _Incomplete
        j = match.start()
        parts.append(s[i:j])
        c = s[j]
        if c == '"':
            return "".join(parts), j + 1
        if c == "\\":
            if j + 1 >= n:
                raise _Incomplete
            escaped = s[j + 1]
            # Inside double quotes a backslash only escapes these; elsewhere it stays.
            if escaped in '$`"\\':
                parts.append(escaped)
            elif escaped != "\n":
                parts.append("\\" + escaped)
            i = j + 2
        elif c == "$":
            if s.startswith("$(", j) or s.startswith("${", j):
                end = _skip_balanced(s, j + 1)
                parts.append(s[j:end])
                i = end
            else:
                parts.append("$")
                i = j + 1
        else:
            end = _skip_backticks(s, j)
            parts.append(s[j:end])
            i = end


def _read_ansi_c(s: str, i: int) -> tuple[str, int]:
    """The inside of $'...' from s[i], with its backslash escapes decoded."""
    parts: list[str] = []
    n = len(s)
    while i < n:
        c = s[i]
        if c == "'":
            return "".join(parts), i + 1
        if c == "\\" and i + 1 < n:
            escaped = s[i + 1]
            parts.append(_ANSI_ESCAPES.get(escaped, "\\" + escaped))
            i += 2
            continue
        parts.append(c)
        i += 1
    raise _Incomplete


def _skip_balanced(s: str, i: int) -> int:
    """Index after the bracket closing the "(" or "{" at s[i], skipping quoted text."""
    opening = s[i]
    closing = ")" if opening == "(" else "}"
    depth = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = s.find("'", i + 1)
            if end < 0:
                raise _Incomplete
            i = end + 1
            continue
        if c == '"':
            _, i = _read_double_quoted(s, i + 1)
            continue
        if c == "`":
            i = _skip_backticks(s, i)
            continue
        if c == "#" and opening == "(" and s[i - 1] in " \t\n":
            # A comment inside $( ... ) spanning lines may hold an apostrophe.
            end = s.find("\n", i)
            i = n if end < 0 else end
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise _Incomplete


def _skip_backticks(s: str, i: int) -> int:
    """Index after the backtick closing the one at s[i]."""
    j, n = i + 1, len(s)
    while j < n:
        if s[j] == "\\":
            j += 2
        elif s[j] == "`":
            return j + 1
        else:
            j += 1
    raise _Incomplete


# --- lines and statements ----------------------------------------------------


def _logical_lines(text: str) -> Iterator[tuple[int, str, list[list[_Word]]]]:
    """(first line number, line text, simple commands) per logical line; heredoc bodies skipped.

    Backslash-newline joins lines; a quote or $( ) left open takes in the
    next lines until it closes. A line whose quote never closes is skipped.
    """
    lines = text.split("\n")
    n = len(lines)
    i = 0
    while i < n:
        start = i
        buffer = lines[i]
        shown = [lines[i].strip()]
        i += 1
        tokens: list[_Token] | None = None
        while True:
            while _continues(buffer) and i < n:
                buffer = buffer[:-1] + lines[i]
                shown.append(lines[i].strip())
                i += 1
            try:
                tokens = _tokenize(buffer)
                break
            except _Incomplete as open_construct:
                closer = open_construct.closer
            if i >= n or i - start >= MAX_LOGICAL_LINES:
                break
            # Take in the next line, and with it every line that lacks the
            # closing character: those cannot end the construct, so they need
            # no new tokenizing (which keeps a long string linear, not quadratic).
            while True:
                buffer += "\n" + lines[i]
                shown.append(lines[i].strip())
                i += 1
                if not closer or closer in lines[i - 1] or i >= n or i - start >= MAX_LOGICAL_LINES:
                    break
        if tokens is None:
            i = start + 1
            continue
        statements, heredocs = _split(tokens)
        for delimiter, strip_tabs in heredocs:
            while i < n:
                body = lines[i]
                i += 1
                if (body.lstrip("\t") if strip_tabs else body) == delimiter:
                    break
        if statements:
            joined = " ".join(part.removesuffix("\\").strip() for part in shown)
            yield start + 1, joined.strip(), statements


def _continues(buffer: str) -> bool:
    """True if the line ends in an unescaped backslash (and is not a comment)."""
    trailing = len(buffer) - len(buffer.rstrip("\\"))
    return trailing % 2 == 1 and not buffer.lstrip().startswith("#")


def _split(tokens: list[_Token]) -> tuple[list[list[_Word]], list[tuple[str, bool]]]:
    """Simple commands (redirections removed) and the heredocs the line opens."""
    statements: list[list[_Word]] = []
    heredocs: list[tuple[str, bool]] = []
    current: list[_Word] = []
    depth = 0
    k = 0
    while k < len(tokens):
        token = tokens[k]
        k += 1
        if isinstance(token, _Word):
            current.append(token)
            continue
        if isinstance(token, _Redirect):
            target = tokens[k] if k < len(tokens) else None
            if isinstance(target, _Word):
                k += 1
                if token.text in ("<<", "<<-"):
                    heredocs.append((target.text, token.text == "<<-"))
            continue
        if token.text == "(":
            if len(current) == 1 and k < len(tokens) and tokens[k] == _Op(")"):
                # `name() {` defines a function; the name is not a command.
                current = []
                k += 1
                continue
            depth += 1
        elif token.text == ")":
            if depth == 0:
                current = []  # `pattern)` of a case branch
                continue
            depth -= 1
        if current:
            statements.append(current)
            current = []
    if current:
        statements.append(current)
    return statements, heredocs


# --- what the shell would do --------------------------------------------------

# Words that open or continue a compound command; the command follows them.
_LEADING_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time"}
)
# Statements that start with these run no command of their own.
_NOT_COMMANDS = frozenset({"fi", "done", "esac", "}", "for", "case", "select", "function", "in"})
# Commands that prepare the ground; the service is something else.
_HOUSEKEEPING = frozenset(
    {
        ".",
        ":",
        "[",
        "[[",
        "alias",
        "break",
        "cat",
        "cd",
        "chmod",
        "chown",
        "continue",
        "cp",
        "date",
        "declare",
        "echo",
        "exit",
        "export",
        "false",
        "hash",
        "kill",
        "let",
        "ln",
        "local",
        "logger",
        "mkdir",
        "mv",
        "popd",
        "printf",
        "pushd",
        "read",
        "readonly",
        "return",
        "rm",
        "set",
        "shift",
        "shopt",
        "sleep",
        "source",
        "tee",
        "test",
        "touch",
        "trap",
        "true",
        "typeset",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "wait",
    }
)


@dataclass(frozen=True, slots=True)
class _Value:
    value: str
    line: int
    text: str


class _Reader:
    """Follows a script's variables statement by statement, as straight-line code."""

    def __init__(self) -> None:
        self.variables: dict[str, _Value] = {}
        # name -> (line, text) of the statement that exported it
        self.exported: dict[str, tuple[int, str]] = {}
        self.allexport = False
        # The last exec'd command and the environment it gets.
        self.command: Command | None = None
        self.command_env: dict[str, Export] = {}
        # Without exec: the last command that looks like the service.
        self.last_command: tuple[list[str], list[tuple[str, str]], int, str] | None = None

    def result(self) -> ParsedScript:
        """What the script hands to its command; without exec, everything it exports."""
        if self.command is not None:
            return ParsedScript(self.command_env, self.command)
        env = self.exports()
        if self.last_command is None:
            return ParsedScript(env, None)
        # Which command is the service is a guess without exec, so every
        # export of the script counts: a wrong guess must not hide one.
        argv, prefix, line, text = self.last_command
        for name, value in prefix:
            env[name] = Export(name, value, line, text)
        program, env = _strip_env(argv, env, line, text)
        return ParsedScript(env, Command(tuple(argv), tuple(program), line, text, via_exec=False))

    def exports(self) -> dict[str, Export]:
        """The variables exported right now, as the next command would receive them."""
        out: dict[str, Export] = {}
        for name, (line, text) in self.exported.items():
            var = self.variables.get(name)
            if var is None:
                out[name] = Export(name, "", line, text, inherited=True)
            else:
                out[name] = Export(
                    name,
                    var.value,
                    var.line,
                    var.text,
                    export_line=line if line != var.line else None,
                )
        return out

    def statement(self, words: list[_Word], line: int, text: str) -> None:
        while words and words[0].text in _LEADING_KEYWORDS and words[0].plain == len(words[0].text):
            words = words[1:]
        if not words or words[0].text in _NOT_COMMANDS:
            return
        prefix: list[tuple[str, str]] = []
        while words and (assignment := _assignment(words[0])) is not None:
            prefix.append(self._resolve(*assignment))
            words = words[1:]
        if not words:
            for name, value in prefix:
                self.assign(name, value, line, text)
            return
        name, args = words[0].text, [w.text for w in words[1:]]
        if name == "export":
            self.export(args, line, text)
        elif name in ("declare", "typeset", "local", "readonly"):
            self.declare(args, line, text)
        elif name == "unset":
            self.unset(args)
        elif name == "set":
            self.set_options(args)
        elif name == "exec":
            self.exec(prefix, args, line, text)
        elif name not in _HOUSEKEEPING and self.command is None:
            self.last_command = ([name, *args], prefix, line, text)

    def _resolve(self, name: str, append: bool, value: str) -> tuple[str, str]:
        """(name, value) of an assignment, with ``K+=v`` appended to K's current value."""
        if append and name in self.variables:
            value = self.variables[name].value + value
        return name, value

    def assign(self, name: str, value: str, line: int, text: str) -> None:
        self.variables[name] = _Value(value, line, text)
        if self.allexport and name not in self.exported:
            self.exported[name] = (line, text)

    def export(self, args: Sequence[str], line: int, text: str) -> None:
        self._declare(args, line, text, is_export=True)

    def declare(self, args: Sequence[str], line: int, text: str) -> None:
        self._declare(args, line, text, is_export=False)

    def _declare(self, args: Sequence[str], line: int, text: str, *, is_export: bool) -> None:
        """`export` (is_export) or `declare`/`typeset`/`local`/`readonly` with their options."""
        exporting, unexport = is_export, False
        for arg in args:
            if arg[:1] in "-+" and len(arg) > 1 and _ASSIGNMENT.match(arg) is None:
                letters = arg[1:]
                if arg == "--":
                    continue
                if any(c in letters for c in "fFp"):
                    return  # functions or printing: no variable changes
                if is_export and "n" in letters:
                    exporting, unexport = False, True
                if not is_export and "x" in letters:
                    exporting, unexport = arg[0] == "-", arg[0] == "+"
                continue
            match = _ASSIGNMENT.match(arg)
            if match is not None:
                name = match.group(1)
                value = arg[match.end() :]
                self.assign(*self._resolve(name, bool(match.group(2)), value), line, text)
            elif _NAME.fullmatch(arg):
                name = arg
            else:
                continue
            if unexport:
                self.exported.pop(name, None)
            elif exporting:
                self.exported[name] = (line, text)

    def unset(self, args: Sequence[str]) -> None:
        for arg in args:
            if arg.startswith("-"):
                if "f" in arg:
                    return
                continue
            self.variables.pop(arg, None)
            self.exported.pop(arg, None)

    def set_options(self, args: Sequence[str]) -> None:
        k = 0
        while k < len(args):
            arg = args[k]
            k += 1
            if len(arg) < 2 or arg[0] not in "-+" or arg == "--":
                break  # positional parameters follow
            on = arg[0] == "-"
            if "a" in arg[1:]:
                self.allexport = on
            if arg.endswith("o") and k < len(args):
                # -o NAME (also combined, as in `set -euo pipefail`)
                if args[k] == "allexport":
                    self.allexport = on
                k += 1

    def exec(
        self, prefix: list[tuple[str, str]], args: Sequence[str], line: int, text: str
    ) -> None:
        k = 0
        clear = False
        while k < len(args) and args[k].startswith("-") and len(args[k]) > 1:
            option = args[k]
            k += 1
            if option == "--":
                break
            clear = clear or "c" in option
            if "a" in option:
                k += 1  # -a NAME sets argv[0]
        argv = list(args[k:])
        if not argv:
            # `exec >log 2>&1` only redirects the shell's own output; it goes on.
            for name, value in prefix:
                self.assign(name, value, line, text)
            return
        env: dict[str, Export] = {}
        if not clear:  # exec -c runs the command with an empty environment
            env = self.exports()
            for name, value in prefix:
                env[name] = Export(name, value, line, text)
        program, env = _strip_env(argv, env, line, text)
        self.command = Command(tuple(argv), tuple(program), line, text, via_exec=True)
        self.command_env = env


def _assignment(word: _Word) -> tuple[str, bool, str] | None:
    """(name, append, value) if the word is a bare ``NAME=value`` or ``NAME+=value``."""
    match = _ASSIGNMENT.match(word.text)
    if match is None or match.end() > word.plain:
        return None
    return match.group(1), bool(match.group(2)), word.text[match.end() :]


def _strip_env(
    argv: list[str], env: dict[str, Export], line: int, text: str
) -> tuple[list[str], dict[str, Export]]:
    """For ``env [-i] [-u K] [K=V ...] cmd``: the program it runs and the environment it gets."""
    if not argv or os.path.basename(argv[0]) != "env":
        return argv, env
    env = dict(env)
    k = 1
    while k < len(argv):
        arg = argv[k]
        if arg in ("-i", "--ignore-environment", "-"):
            env = {}
        elif arg in ("-u", "--unset"):
            k += 1
            if k < len(argv):
                env.pop(argv[k], None)
        elif arg.startswith("--unset="):
            env.pop(arg.removeprefix("--unset="), None)
        elif arg.startswith("-u"):
            env.pop(arg[2:], None)
        elif arg in ("-C", "--chdir", "-S", "--split-string"):
            k += 1
        elif arg.startswith("-"):
            pass  # -0, -v, --chdir=DIR ...: nothing about the environment
        else:
            match = _ASSIGNMENT.match(arg)
            if match is None or match.group(2):
                break
            name = match.group(1)
            env[name] = Export(name, arg[match.end() :], line, text)
        k += 1
    return argv[k:], env
