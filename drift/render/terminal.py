"""Terminal text: wrapping lines to the terminal's width, and counts as people read them.

Applied after rendering, so templates need not know about widths; a line
breaks only at spaces, its continuation hanging under the text after its
marker.
"""

from __future__ import annotations

import re

MIN_WIDTH = 40  # narrower terminals get 40-column lines: a hanging indent needs room
# A story's evidence shown on a terminal before "... and N more" (--all, piped, JSON,
# Markdown and HTML list every one): a package story can hold a hundred.
EVIDENCE_SHOWN = 10
_SGR = re.compile(r"\x1b\[[0-9;]*m")  # drift's own colours: values are `printable` already
_PIECES = re.compile(r" +|[^ ]+")
# What starts a line and is not its text: a continuation goes under the text after it.
# A word too long to follow a marker stays on its line; one too long to follow a
# label goes to a line of its own ("key =", then the long value under it).
_LEAD = re.compile(
    r"""(?P<indent>\ *)(?:
      (?P<marker>
        \d+\.\ +(?:\[[\d.]+\]\ +)?                          # a ranked suspect: " 1. [0.96] "
      | [*=!~-]\ +                                         # a bullet: * root, - evidence, = ! ~
      | (?:at|from)\ +                                     # where a change came from
      )
    | (?P<label>
        \d{4}-\d\d-\d\d\ [\d:]+\ \S+\ {2,}\S+\ +             # a timeline entry: time and kind
      | [A-Za-z0-9][\w.-]*\ {2,}                           # a column: "baseline  ", a host's name
      | [A-Za-z][\w\ ]{0,30}?:\ +                           # a label: "why: ", "Blind spots: "
      | \S+\ =\ +                                          # a value: "score = ", "env:PATH = "
      )
    )?""",
    re.VERBOSE,
)


def wrap_lines(text: str, width: int | None) -> str:
    """Wrap terminal text to `width` columns, each continuation indented under its line's text.

    Lines break only at spaces, so a path or digest longer than the line stays
    whole on a line of its own. A continuation starts past its line's marker
    (`` 1. [0.96] ``, ``* ``, ``why: ``, a timeline entry's time and kind), or
    four columns in, never at column 0 where it would read as a new item.
    `width` None leaves the text as it is: one line per item, for grep.
    """
    if width is None:
        return text
    width = max(width, MIN_WIDTH)
    return "\n".join(_wrap_line(line, width) for line in text.split("\n"))


def _visible(text: str) -> int:
    return len(_SGR.sub("", text))


def _wrap_line(line: str, width: int) -> str:
    if "\t" in line:
        line = _expand_tabs(line)  # a tab's width depends on its column: make it spaces first
    if _visible(line) <= width:
        return line
    match = _LEAD.match(_SGR.sub("", line))
    assert match is not None  # every part of the pattern is optional
    indent, lead, label = len(match.group("indent")), match.end(), match.group("label")
    # Under the text, unless there is no marker or it leaves too little room.
    hang = lead if (label or match.group("marker")) and lead <= width // 2 else indent + 4
    hang = min(hang, width // 2)
    lines: list[str] = []
    current, used = "", 0  # the line being built, and its visible width
    started = False  # whether `current` holds a word of the text yet, not only its lead
    styles: list[str] = []  # colours open at the end of `current`, reopened after a break
    spaces = ""  # the spaces since the last word: kept inside a line, dropped at a break
    for piece in _PIECES.findall(line):
        size = _visible(piece)
        if used < lead:  # the indent and marker are never broken
            current, used = current + piece, used + size
        elif piece.startswith(" "):
            spaces += piece
        elif size == 0:  # only colour codes: they take no room, so they never break a line
            current += piece
        else:
            if used + len(spaces) + size > width and (started or label):
                lines.append(current.rstrip(" ") + ("\x1b[0m" if styles else ""))
                if not started:  # it did not fit under the label either: give it more room
                    hang = min(hang, indent + 4)
                current, used = " " * hang + "".join(styles), hang
            else:
                current, used = current + spaces, used + len(spaces)
            current, used = current + piece, used + size
            started, spaces = True, ""
        _track(piece, styles)
    return "\n".join([*lines, current + spaces])


def _expand_tabs(line: str, size: int = 8) -> str:
    """`line` with its tabs as spaces to the next tab stop, counting only visible columns
    (str.expandtabs would count drift's colour codes as columns too)."""
    out: list[str] = []
    column = 0
    for piece in re.split(r"(\x1b\[[0-9;]*m|\t)", line):
        if piece == "\t":
            spaces = size - column % size
            out.append(" " * spaces)
            column += spaces
        else:
            out.append(piece)
            column += _visible(piece)
    return "".join(out)


def _track(piece: str, styles: list[str]) -> None:
    """Follow the colour codes in `piece`: a reset closes every open style."""
    for code in _SGR.findall(piece):
        if code in ("\x1b[0m", "\x1b[m"):
            styles.clear()
        else:
            styles.append(code)


def number(count: int) -> str:
    """A count as people read it: thousands separated, `47,024` (JSON keeps the plain int)."""
    return f"{count:,}"
