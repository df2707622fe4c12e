"""Build the report context (plain data) and render it as text or JSON.

Templates only ever see the context built here: dicts, lists, strings and
numbers, never a database row.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from markupsafe import Markup

from drift.analysis.values import SHORT_VALUE
from drift.display import hidden, printable, truncated
from drift.errors import TemplateError

RESULT_VERSION = 1


def envelope(command: str, data: Any, errors: list[str] | None = None) -> dict[str, Any]:
    """The versioned JSON envelope every --format json output uses."""
    return {
        "drift_result_version": RESULT_VERSION,
        "command": command,
        "data": data,
        "errors": errors or [],
    }


def render_json(command: str, data: Any) -> str:
    """The envelope as indented JSON; non-ASCII text stays readable.

    JSON itself escapes only C0 controls: every other character `printable`
    would escape (a bidi override, U+2028, NEL, a lone surrogate) is written
    as a `\\uXXXX` escape too, so the same text comes back out of the JSON but
    cannot break or reorder the lines of the JSON where it is shown.
    """
    text = json.dumps(envelope(command, data), indent=2, ensure_ascii=False)
    if text.isprintable():
        return text
    return "\n".join(
        line if line.isprintable() else "".join(_json_escaped(c) if hidden(c) else c for c in line)
        for line in text.split("\n")
    )


def _json_escaped(char: str) -> str:
    """`char` as a JSON string escape: a character past U+FFFF as its UTF-16 surrogate pair."""
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _finalize(value: Any) -> Any:
    """What a template prints: every value `printable`, so none can start a line of its own.

    Markup is text drift built from values already shown: a painted value, a
    macro's lines (HTML, or Markdown marked `|safe`). It is kept as it is.
    """
    return value if isinstance(value, Markup) else printable(value)


_STYLES: dict[str, dict[str, Any]] = {
    "title": {"bold": True},
    "live": {"fg": "red", "bold": True},
    "unsourced": {"fg": "red"},
    "pending": {"fg": "yellow", "bold": True},
    "on-disk": {"fg": "yellow"},
    "changed": {},
    "dim": {"dim": True},
    "good": {"fg": "green"},
    "warn": {"fg": "yellow"},
    "heading": {"bold": True, "underline": True},
}


def render_template(
    name: str,
    context: dict[str, Any],
    templates_dir: str | None = None,
    *,
    color: bool = False,
    width: int | None = None,
) -> str:
    """Render a template from templates/ (or the user's override folder).

    Every value a template prints goes through `printable` (the environment's
    finalize), so it is one line, with no control or bidi character of its
    own. With `color`, the `paint` filter adds ANSI styles around a value it
    shows the same way. With `width` (a terminal's columns), every line is
    wrapped to it by `wrap_lines`, after rendering: templates need not know
    about widths.
    """
    from jinja2 import Environment, StrictUndefined, select_autoescape

    env = Environment(
        loader=_template_loader(templates_dir),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    env.filters["printable"] = printable
    env.filters["short"] = _short
    env.filters["short_against"] = _short_against
    env.filters["num"] = number

    def paint(text: str, style: str) -> Markup:
        """`text` shown (as `printable`), in a style when colour is on: drift's own escapes."""
        if not color:
            return Markup(printable(text))
        import click

        return Markup(click.style(printable(text), **_STYLES.get(style, {})))

    env.filters["paint"] = paint
    return wrap_lines(_render(env, name, context), width)


def _template_loader(templates_dir: str | None) -> Any:
    """The user's templates_dir first, then drift's own templates/ (a ChoiceLoader)."""
    from jinja2 import ChoiceLoader, FileSystemLoader, TemplateNotFound

    from drift.resources import resource_dir

    class Loader(FileSystemLoader):
        """A FileSystemLoader whose unreadable file is a TemplateError naming it."""

        def get_source(self, environment: Any, template: str) -> Any:
            try:
                return super().get_source(environment, template)
            except TemplateNotFound:
                raise  # the next folder's, then drift's own
            except (UnicodeDecodeError, OSError) as exc:
                path = next(
                    (
                        os.path.join(folder, template)
                        for folder in self.searchpath
                        if os.path.isfile(os.path.join(folder, template))
                    ),
                    template,
                )
                if isinstance(exc, UnicodeDecodeError):
                    why = f"not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
                else:
                    why = f"cannot read: {exc.strerror or exc}"
                raise TemplateError(f"{path}: template {why}") from None

    loaders: list[FileSystemLoader] = [Loader(templates_dir)] if templates_dir else []
    loaders.append(FileSystemLoader(str(resource_dir("templates"))))
    return ChoiceLoader(loaders)


def _render(env: Any, name: str, context: dict[str, Any]) -> str:
    """Render template `name`; a broken one of the user's (templates_dir) is a TemplateError
    naming its file and line. One of drift's own is drift's bug and keeps its traceback."""
    import jinja2

    from drift.resources import resource_dir

    own = str(resource_dir("templates")) + os.sep
    try:
        return str(env.get_template(name).render(**context))
    except TemplateError:
        raise
    except jinja2.TemplateSyntaxError as exc:
        if exc.filename is None or exc.filename.startswith(own):
            raise
        raise TemplateError(
            f"{exc.filename}:{exc.lineno}: template syntax error: {exc.message}"
        ) from None
    except Exception as exc:
        # Jinja runs a template as code whose frames carry the template's file and line.
        spot = _template_frame(exc.__traceback__)
        if spot is None or spot[0].startswith(own):
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if not isinstance(exc, jinja2.TemplateError):
            message = f"{type(exc).__name__}: {message}"
        raise TemplateError(f"{spot[0]}:{spot[1]}: template error: {message}") from None


def _template_frame(tb: Any) -> tuple[str, int] | None:
    """The innermost frame of a traceback that is a template's (file, line), if any."""
    found = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.endswith(".py") and os.path.isfile(filename):
            found = (filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


# Wrapping terminal text -----------------------------------------------------

MIN_WIDTH = 40  # narrower terminals get 40-column lines: a hanging indent needs room
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
      | [a-z]+\ {2,}                                       # a header column: "baseline  "
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


def _short(text: str | None, limit: int = SHORT_VALUE) -> str | None:
    return None if text is None else truncated(text, limit)


def _short_against(text: str | None, other: str | None, limit: int = SHORT_VALUE) -> str | None:
    """`text` shortened so that where it differs from `other` stays in view.

    Two long paths that differ only after the cut would read as the same
    value on both sides of the arrow: start a little before the difference.
    """
    if text is None or other is None or len(text) <= limit:
        return _short(text, limit)
    common = len(os.path.commonprefix([text, other]))
    if common < limit - 1:
        return _short(text, limit)
    return _short("…" + text[common - limit // 4 :], limit)


# `_` between two letters or digits cannot start or end emphasis: left as is, for readability.
# `#` before a digit would link an issue when pasted into a GitHub issue or pull request.
_MD_SPECIAL = re.compile(r"[\\`*\[\]<&|~]|(?<![^\W_])_|_(?![^\W_])|#(?=\d)")
_MD_BLOCK_START = re.compile(r"^([#>+=-])|^(\d+)([.)])")
_MD_SCHEME = re.compile(r"(?<=[A-Za-z]):(?=//)")
_MD_WWW = re.compile(r"(?i)\b(www)\.")
_BACKTICKS = re.compile(r"`+")


def _md_text(text: Any) -> str:
    """Untrusted text as one line of Markdown prose that renders as exactly that text.

    Backslash escapes stop emphasis, links, images, raw HTML, entities and
    table cells; `://`, `www.` and `@` are escaped too so GitHub cannot
    autolink a URL, address or issue number; a leading `#`, `>`, `-`, `1.`
    cannot start a block.
    """
    flat = " ".join(printable(str(text)).split())
    out = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), flat)
    out = _MD_WWW.sub(r"\1\\.", _MD_SCHEME.sub(r"\\:", out)).replace("@", "\\@")
    return _MD_BLOCK_START.sub(
        lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3), out
    )


def _md_code(text: Any, cell: bool = False) -> str:
    """Untrusted text as a Markdown code span: nothing inside is Markdown or HTML.

    The backtick fence is longer than any run inside. In a table `cell`, `|`
    must still be escaped (GFM splits cells before it sees code spans).
    """
    flat = " ".join(printable(str(text)).splitlines()).replace("\t", " ")
    if flat == "":
        return "*(empty)*"
    if cell:
        flat = flat.replace("|", "\\|")
    fence = "`" * (max((len(r) for r in _BACKTICKS.findall(flat)), default=0) + 1)
    # CommonMark strips one space from each side when both are there: pad so edges survive.
    if flat[0] in "` " or flat[-1] in "` ":
        flat = f" {flat} "
    return f"{fence}{flat}{fence}"


def _md_fence(lines: list[str]) -> str:
    """A backtick fence for a code block: longer than any backtick run in `lines`."""
    longest = max((len(r) for line in lines for r in _BACKTICKS.findall(line)), default=0)
    return "`" * max(3, longest + 1)


def render_report(context: dict[str, Any], fmt: str, templates_dir: str | None = None) -> str:
    """Render the postmortem report, "html" (report.html.j2) or "md" (report.md.j2).

    A template of the same name in `templates_dir` wins over drift's own. The
    context is since_context's plus `regenerate`, `generated_at`, `explain`
    and `digests`; a missing key is an error (StrictUndefined). Every value
    printed is `printable` first (then HTML-escaped in HTML); a Markdown
    macro's lines are kept with `|safe`.
    """
    from jinja2 import Environment, StrictUndefined, select_autoescape

    names = {"html": "report.html.j2", "md": "report.md.j2"}
    if fmt not in names:
        raise ValueError(f"report format must be html or md, not {fmt!r}")
    env = Environment(
        loader=_template_loader(templates_dir),
        # select_autoescape matches the name's ending: "html" alone misses "report.html.j2".
        autoescape=select_autoescape(["html", "html.j2", "htm"]),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    env.filters["printable"] = printable
    env.filters["short"] = _short
    env.filters["num"] = number
    env.filters["md"] = _md_text
    env.filters["code"] = _md_code
    env.filters["fence"] = _md_fence
    return _render(env, names[fmt], context)
