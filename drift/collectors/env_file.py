"""EnvironmentFile=: the variables a unit's environment files give it, each with its file and line.

systemd reads these files itself, each time it starts the unit, with its own
syntax (`parse_env_file_internal` in systemd's src/basic/env-file.c), which
is not the shell's: ``#`` or ``;`` start a comment only at the start of a
line; a value runs to the end of its line, trailing blanks dropped, ``#``
included; ``'...'`` is literal (newlines too); inside ``"..."`` a backslash
escapes only ``" \\ ` $`` and a newline, and is kept before anything else;
outside quotes a backslash escapes any character, and before a newline
joins the lines; ``KEY`` without ``=`` is nothing. What a line assigns then
passes systemd's check: a name of letters, digits and ``_`` not starting
with a digit (so ``export NAME=1`` and ``NAME-1=x`` are dropped). A file
that is not UTF-8 or holds a NUL byte does not load at all. The last
assignment of a name wins, in a file and across files, and the files
override ``Environment=``. tests/test_unit_sources.py holds all of this
against a real systemd, on tricky and on generated files.

One difference between systemd versions: before 254 a comment ending in a
backslash swallows the next line too; from 254 it does not. The parser is
told which; a caller that cannot tell marks what that line sets as unsure.

A path may be a glob (all matches, sorted) and may start with ``-``: then a
missing file is skipped, as systemd skips it (one that drift may not read,
systemd may: that is a blind spot). A required file that is missing or does
not load stops the unit from starting: that is said (`EnvFiles.problems`),
never read as its variables being removed.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from drift.collectors.unit_files import NO_SUCH_FILE, read_file_stat
from drift.facts import file_times
from drift.rooted import Files

MAX_ENV_FILE = 1 << 20
# systemd reads files of up to 4 MiB; an environment file past 1 MiB is not
# configuration drift can say anything useful about, and is not read.

_NO_START = ": systemd will not start the unit"
_COMMENTS = "#;"
_WHITESPACE = " \t\n\r"
_NEWLINE = "\n\r"
_SHELL_NEED_ESCAPE = '"\\`$'
Step = Callable[[str], Any]
"""A state of the parser: takes the next character, returns the next state."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # ASCII only, as systemd's


class Assignment(NamedTuple):
    """One ``NAME=value`` systemd reads from a file: where it starts, and the text of that line."""

    name: str
    value: str
    file: str
    line: int
    text: str
    unsure: str | None = None  # why systemd may read it otherwise (a version difference)


class Parsed(NamedTuple):
    """What one file gives: its valid assignments in order, what systemd drops, or why it fails."""

    assignments: tuple[Assignment, ...]
    dropped: tuple[Assignment, ...] = ()  # names systemd refuses (``export X``, ``A-B``)
    failure: str | None = None  # the file does not load at all (invalid UTF-8)


def valid_name(name: str) -> bool:
    """systemd's env_name_is_valid: letters, digits and ``_``, not starting with a digit."""
    return _NAME.fullmatch(name) is not None


def parse_env_file(data: bytes, file: str, *, comment_continues: bool | None = False) -> Parsed:
    """Read `data` as systemd reads an EnvironmentFile; `file` names it in the assignments.

    `comment_continues` is True for systemd before 254 (a comment ending in a
    backslash goes on to the next line), False from 254, None when unknown:
    then what such a line sets is read as 254 does and marked unsure.
    """
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        return Parsed((), (), f"{file}:{line}: a NUL byte, so systemd does not load the file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return Parsed((), (), f"{file}:{line}: invalid UTF-8, so systemd does not load the file")
    if _PLAIN.isdisjoint(text):
        read = _plain_lines(text, file)
    else:
        read = _machine(text, file, comment_continues)
    kept = tuple(a for a in read if valid_name(a.name))
    dropped = tuple(a for a in read if not valid_name(a.name))
    return Parsed(kept, dropped)


# Without quotes, backslashes or carriage returns, systemd's machine reads a file
# line by line; most environment files are that, and a line's split is 20 times
# faster than the machine's step per character, every record.
_PLAIN = frozenset("'\"\\\r")


def _plain_lines(text: str, file: str) -> list[Assignment]:
    """What systemd's machine gives for a text holding none of `_PLAIN`, a line at a time."""
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        body = line.lstrip(" \t")
        if not body or body[0] in _COMMENTS:
            continue
        # The first character is the key's whatever it is (an "=" too), as in the machine.
        key, sep, value = body[1:].partition("=")
        if sep:
            out.append(
                Assignment(body[0] + key.rstrip(" \t"), value.strip(" \t"), file, number, line)
            )
    return out


def _machine(text: str, file: str, comment_continues: bool | None) -> list[Assignment]:
    """What systemd's state machine gives for `text`, a character at a time."""
    parser = _Parser(text, text.split("\n"), file, comment_continues)
    parser.run()
    return parser.out


class _Parser:
    """systemd's state machine over the text, a character at a time, keeping line numbers.

    One method per state of systemd's machine, each taking a character and
    returning the next state's method.
    """

    def __init__(
        self, text: str, lines: list[str], file: str, comment_continues: bool | None
    ) -> None:
        self.text = text
        self.lines = lines
        self.file = file
        self.comment_continues = comment_continues
        self.out: list[Assignment] = []
        self.key: list[str] = []
        self.value: list[str] | None = None
        self.key_space: int | None = None  # where trailing blanks of the key start
        self.value_space: int | None = None  # where trailing blanks of the value start
        self.line = 1  # the line being read
        self.key_line = 1  # the line the current key started on
        self.after_comment_escape = False  # at the start of a line that follows "# ...\\"
        self.unsure: str | None = None

    def run(self) -> None:
        step: Callable[[str], Any] = self.pre_key
        for char in self.text:
            step = step(char)
            if char == "\n":
                self.line += 1
        if step in (self.pre_value, self.value_char, self.value_escape) or step in (
            self.single,
            self.double,
            self.double_escape,
        ):
            self.push(chomp=step == self.value_char)

    def push(self, chomp: bool) -> None:
        key = "".join(self.key if self.key_space is None else self.key[: self.key_space])
        value = self.value or []
        if chomp and self.value_space is not None:
            value = value[: self.value_space]
        text = self.lines[self.key_line - 1].rstrip("\r")
        self.out.append(
            Assignment(key, "".join(value), self.file, self.key_line, text, self.unsure)
        )
        self.key, self.value, self.key_space, self.unsure = [], None, None, None

    def append(self, char: str) -> None:
        if self.value is None:
            self.value = []
        self.value.append(char)

    def pre_key(self, char: str) -> Step:
        follows_comment, self.after_comment_escape = self.after_comment_escape, False
        if char in _COMMENTS:
            return self.comment
        if char in _WHITESPACE:
            self.after_comment_escape = follows_comment and char in " \t"
            return self.pre_key
        self.key_line = self.line
        self.key_space = None
        self.key.append(char)
        if follows_comment:
            self.unsure = (
                f"line {self.line - 1} is a comment ending in a backslash: "
                "systemd before 254 reads this line as part of that comment"
            )
        return self.key_char

    def key_char(self, char: str) -> Step:
        if char in _NEWLINE:
            self.key = []
            return self.pre_key
        if char == "=":
            self.value_space = None
            return self.pre_value
        if char not in _WHITESPACE:
            self.key_space = None
        elif self.key_space is None:
            self.key_space = len(self.key)
        self.key.append(char)
        return self.key_char

    def pre_value(self, char: str) -> Step:
        if char in _NEWLINE:
            self.push(chomp=False)
            return self.pre_key
        if char == "'":
            return self.single
        if char == '"':
            return self.double
        if char == "\\":
            return self.value_escape
        if char in _WHITESPACE:
            return self.pre_value
        self.append(char)
        return self.value_char

    def value_char(self, char: str) -> Step:
        if char in _NEWLINE:
            self.push(chomp=True)
            return self.pre_key
        if char == "\\":
            self.value_space = None
            return self.value_escape
        if char not in _WHITESPACE:
            self.value_space = None
        elif self.value_space is None:
            self.value_space = len(self.value or [])
        self.append(char)
        return self.value_char

    def value_escape(self, char: str) -> Step:
        if char not in _NEWLINE:  # an escaped newline joins the lines
            self.append(char)
        return self.value_char

    def single(self, char: str) -> Step:
        if char == "'":
            return self.pre_value
        self.append(char)
        return self.single

    def double(self, char: str) -> Step:
        if char == '"':
            return self.pre_value
        if char == "\\":
            return self.double_escape
        self.append(char)
        return self.double

    def double_escape(self, char: str) -> Step:
        if char in _SHELL_NEED_ESCAPE:
            self.append(char)
        elif char != "\n":  # kept with its backslash, as the shell keeps it
            self.append("\\")
            self.append(char)
        return self.double

    def comment(self, char: str) -> Step:
        if char == "\\":
            return self.comment_escape
        if char in _NEWLINE:
            return self.pre_key
        return self.comment

    def comment_escape(self, char: str) -> Step:
        if self.comment_continues:
            return self.comment  # before 254: whatever follows is still the comment
        if char in _NEWLINE:
            self.after_comment_escape = self.comment_continues is None and char == "\n"
            return self.pre_key
        return self.comment


class EnvFiles(NamedTuple):
    """What a unit's EnvironmentFile= entries give at its next start.

    `values` holds the assignment that wins for each name (later files and
    lines override earlier ones); `read` the SHA-256 of each file read, in
    systemd's order (a file whose lines moved, or only its comments changed);
    `problems` what stops the unit from starting (a required file missing or
    not loading) or what drift could not read, each naming the file; `times`
    each file's times as read (`drift.facts.file_times`), by path.
    """

    values: dict[str, Assignment]
    read: dict[str, str]
    problems: tuple[str, ...]
    dropped: tuple[Assignment, ...]
    times: dict[str, dict[str, str]]


def load_env_files(
    entries: tuple[tuple[str, bool], ...],
    files: Files,
    *,
    comment_continues: bool | None = False,
) -> EnvFiles:
    """Read each (path or glob, optional) entry as systemd does at a start.

    `files` is where the unit's / is (the host's, or a container's root:
    `drift.rooted`); paths are systemd's, as it names them.
    """
    values: dict[str, Assignment] = {}
    read: dict[str, str] = {}
    times: dict[str, dict[str, str]] = {}
    problems: list[str] = []
    dropped: list[Assignment] = []
    for pattern, optional in entries:
        if not pattern.startswith("/"):
            if not optional:
                problems.append(f"EnvironmentFile={pattern} is not an absolute path{_NO_START}")
            continue
        paths = _expand(pattern, files)
        if not paths:
            if not optional:
                problems.append(f"EnvironmentFile={pattern} does not exist{_NO_START}")
            continue
        for path in paths:
            data, error, st = read_file_stat(files, path, MAX_ENV_FILE)
            if data is None or st is None:
                # systemd skips an optional file it cannot read; one drift cannot read
                # may still be readable to systemd, so only its absence is certain.
                if not optional or error != NO_SUCH_FILE:
                    problems.append(f"cannot read EnvironmentFile={path}: {error}")
                continue
            parsed = parse_env_file(data, path, comment_continues=comment_continues)
            if parsed.failure is not None:
                if not optional:
                    problems.append(f"{parsed.failure}{_NO_START}")
                continue
            read[path] = hashlib.sha256(data).hexdigest()
            times[path] = file_times(st)
            dropped.extend(parsed.dropped)
            for assignment in parsed.assignments:
                values[assignment.name] = assignment
    return EnvFiles(values, read, tuple(problems), tuple(dropped), times)


def _expand(pattern: str, files: Files) -> list[str]:
    """The paths a pattern names, sorted as glob(3) sorts them; [] if none exist.

    Like glob(3), a pattern without wildcards names its path if there is
    anything there, even a dangling symlink (whose reading then fails).
    """
    if not any(c in "*?[" for c in pattern):
        return [pattern] if files.islink(pattern) or files.exists(pattern) else []
    import glob  # only for a pattern: most EnvironmentFile= name one file

    names = pattern.split("/")
    fixed = next(i for i, name in enumerate(names) if any(c in "*?[" for c in name))
    folder = "/".join(names[:fixed]) or "/"
    try:
        where = files.host_path(folder)
    except (OSError, ValueError):
        return []
    found = glob.glob("/".join(names[fixed:]), root_dir=where)
    return sorted(os.path.join(folder, name) for name in found)
