"""The one Jinja environment every template is rendered with, and where templates come from.

Terminal text, Markdown and HTML share one factory (`make_environment`): the
same autoescape rule (by the name's ending: .html, .htm, .html.j2, .htm.j2),
the same filters, StrictUndefined, and a finalize that shows every printed
value as `printable`, so no template needs `|printable` on what it prints.
A user's templates_dir comes before drift's own templates/; `default:NAME`
always names drift's own, so a user's report.html.j2 can extend
"default:report.html.j2" and override one block. A broken user template is a
one-line TemplateError naming its file and line.

Imported only to render: `drift --help` and `drift record` never load Jinja.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import click
import jinja2
from markupsafe import Markup

from drift.display import SHORT_VALUE, printable, short, short_against
from drift.errors import TemplateError
from drift.private_dirs import make_private_dirs
from drift.render.markdown import md_code, md_fence, md_text
from drift.render.terminal import number, wrap_lines
from drift.resources import resource_dir
from drift.timespec import iso_shown

# Names ending so are HTML and autoescaped, whichever path renders them.
AUTOESCAPE_ENDINGS = ("html", "htm", "html.j2", "htm.j2")
DEFAULT_PREFIX = "default"  # {% extends "default:report.html.j2" %}: drift's own template
REPORT_TEMPLATES = {"html": "report.html.j2", "md": "report.md.j2"}

_STYLES: dict[str, dict[str, Any]] = {
    "title": {"bold": True},
    "live": {"fg": "red", "bold": True},
    "failing": {"fg": "red", "bold": True},
    "unsourced": {"fg": "red"},
    "launched": {"fg": "red"},
    "pending": {"fg": "yellow", "bold": True},
    "on-disk": {"fg": "yellow"},
    "changed": {},
    "dim": {"dim": True},
    "good": {"fg": "green"},
    "warn": {"fg": "yellow"},
    "heading": {"bold": True, "underline": True},
}


# Said once under terminal text where a value was cut: the whole of it is a pipe away.
CUT_NOTE = "(… marks text cut to fit the screen: piped or with --format json, it is whole)\n"


class Cuts:
    """The `short` filters of one text render: on a terminal they cut long text and count
    the cuts (so the page can say where the whole text is); piped, they cut nothing, so
    that grep finds every item whole."""

    def __init__(self, cut: bool) -> None:
        self.cut = cut
        self.count = 0

    def _counted(self, text: str | None, shown: str | None) -> str | None:
        if shown != text:
            self.count += 1
        return shown

    def short(self, text: str | None, limit: int = SHORT_VALUE) -> str | None:
        return self._counted(text, short(text, limit)) if self.cut else text

    def short_against(
        self, text: str | None, other: str | None, limit: int = SHORT_VALUE
    ) -> str | None:
        return self._counted(text, short_against(text, other, limit)) if self.cut else text


def make_environment(
    templates_dir: str | None = None, *, color: bool = False, cuts: Cuts | None = None
) -> jinja2.Environment:
    """The Jinja environment for drift's templates and those in `templates_dir`.

    With `color`, the `paint` filter wraps a value in the ANSI style it names;
    without, it only shows the value.
    """
    env = jinja2.Environment(
        loader=template_loader(templates_dir),
        # Jinja folds a filter called on constants (`"Suspects" | paint("heading")`) into the
        # compiled code: code compiled with colour, or with cutting, is kept apart from code
        # compiled without, or a piped render would be served a terminal's compiled text.
        bytecode_cache=_bytecode_cache(
            f"{'color' if color else 'plain'}-{'cut' if cuts is None or cuts.cut else 'whole'}"
        ),
        autoescape=jinja2.select_autoescape(AUTOESCAPE_ENDINGS),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    env.filters.update(
        printable=printable,
        short=short if cuts is None else cuts.short,
        short_against=short_against if cuts is None else cuts.short_against,
        num=number,
        md=md_text,
        code=md_code,
        fence=md_fence,
        paint=_painter(color),
        when=iso_shown,
    )
    return env


class _QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """Jinja's own cache of compiled templates, where a failed write only costs the next run.

    Compiling since.txt.j2 took 130 ms of every `drift since`; the cache keys
    each template by its name and a checksum of its source, so an edited
    template (a user's in templates_dir too) is compiled again.
    """

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass  # a full or read-only cache folder: compile again next time


def template_cache_dir() -> Path:
    """Where compiled templates are kept: $XDG_CACHE_HOME/drift/templates (~/.cache/...)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "drift" / "templates"


def _bytecode_cache(flavour: str) -> jinja2.BytecodeCache | None:
    """The cache of compiled templates in the user's own 0700 cache folder, one file per
    template and `flavour` (the filters' settings); None, so every template is compiled,
    when it cannot be made or is not the user's alone (compiled code loaded from a folder
    another user can write would run as this one)."""
    folder = template_cache_dir()
    try:
        make_private_dirs(folder)
        st = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return _QuietBytecodeCache(str(folder), f"__jinja2_%s.{flavour}.cache")


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
    about widths. Without one (piped), the `short` filters cut nothing; with one,
    a page where they cut something ends with CUT_NOTE.
    """
    cuts = Cuts(cut=width is not None)
    text = render(make_environment(templates_dir, color=color, cuts=cuts), name, context)
    if cuts.count:
        text += ("" if text.endswith("\n") else "\n") + CUT_NOTE
    return wrap_lines(text, width)


def render_report(context: dict[str, Any], fmt: str, templates_dir: str | None = None) -> str:
    """Render the postmortem report, "html" (report.html.j2) or "md" (report.md.j2).

    A template of the same name in `templates_dir` wins over drift's own. The
    context is the investigation (`plain`) plus `regenerate`, `generated_at`, `explain`
    and `digests`; a missing key is an error (StrictUndefined). Every value
    printed is `printable` first (then HTML-escaped in HTML); a Markdown
    macro's lines are kept with `|safe`.
    """
    if fmt not in REPORT_TEMPLATES:
        raise ValueError(f"report format must be html or md, not {fmt!r}")
    return render(make_environment(templates_dir), REPORT_TEMPLATES[fmt], context)


def _finalize(value: Any) -> Any:
    """What a template prints: every value `printable`, so none can start a line of its own.

    Markup is text drift built from values already shown: a painted value, a
    macro's lines (HTML, or Markdown marked `|safe`). It is kept as it is.
    """
    return value if isinstance(value, Markup) else printable(value)


def _painter(color: bool) -> Any:
    """The `paint` filter: `text` shown (as `printable`), in a style when colour is on."""

    def paint(text: str, style: str) -> Markup:
        if not color:
            return Markup(printable(text))
        return Markup(click.style(printable(text), **_STYLES.get(style, {})))

    return paint


class _UserLoader(jinja2.FileSystemLoader):
    """A FileSystemLoader for templates_dir whose unreadable file is a TemplateError naming it."""

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        try:
            return super().get_source(environment, template)
        except jinja2.TemplateNotFound:
            raise  # then drift's own
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


def template_loader(templates_dir: str | None) -> jinja2.BaseLoader:
    """`default:NAME` for drift's own template, else the user's templates_dir, then drift's own.

    The prefix comes first so that a user's template can extend drift's of
    the same name without extending itself.
    """
    own = jinja2.FileSystemLoader(str(resource_dir("templates")))
    loaders: list[jinja2.BaseLoader] = [jinja2.PrefixLoader({DEFAULT_PREFIX: own}, delimiter=":")]
    if templates_dir:
        loaders.append(_UserLoader(templates_dir))
    loaders.append(own)
    return jinja2.ChoiceLoader(loaders)


def render(env: jinja2.Environment, name: str, context: dict[str, Any]) -> str:
    """Render template `name`; a broken one of the user's (templates_dir) is a TemplateError
    naming its file and line. One of drift's own is drift's bug and keeps its traceback."""
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


def _template_frame(tb: TracebackType | None) -> tuple[str, int] | None:
    """The innermost frame of a traceback that is a template's (file, line), if any."""
    found = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.endswith(".py") and os.path.isfile(filename):
            found = (filename, tb.tb_lineno)
        tb = tb.tb_next
    return found
