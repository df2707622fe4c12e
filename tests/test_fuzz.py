"""Fuzzing the parts that read what the user or the box hands drift, and every renderer.

A WHEN argument, a config file and a serve script are read from text drift does
not control: each must fail with drift's own error (or not at all), never a
traceback, and never hang. A report is built from values drift does not control:
rendered as text, Markdown, HTML or JSON it must never raise, never let a value
start a line of its own (every line starts as the template starts it) and never
let a value become HTML.
"""

from __future__ import annotations

import json
import re
import tempfile
import tomllib
import unicodedata
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_collect_scripts import SHELL_PIECES
from test_report_templates import fenced_blocks, parse, report_context

from drift.config import ConfigError, load_config, parse_config
from drift.display import printable
from drift.errors import TimeSpecError
from drift.facts import CollectContext, CollectionError, Fact
from drift.render.envelope import render_json
from drift.render.jinja import render_report, render_template
from drift.render.terminal import wrap_lines
from drift.timespec import parse_when

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HIDDEN = ("Cc", "Cf", "Cs", "Zl", "Zp")


def hidden(text: str, allowed: str = "\n") -> set[str]:
    """Control, format and separator characters of `text`, other than `allowed`."""
    return {c for c in text if c not in allowed and unicodedata.category(c) in HIDDEN}


# --- WHEN ----------------------------------------------------------------------------------

WHEN_PIECES = st.sampled_from(
    [
        *"0123456789:#-+TZ .",
        "12:00",
        "23:59:59",
        "noon",
        "midnight",
        "now",
        "today",
        "yesterday ",
        " ago",
        "h",
        "m",
        "d",
        "w",
        "min",
        "hours",
        "2026-03-29",
        "0001-01-01",
        "9999-12-31",
        "T02:30",
        "+14:00",
        "-12:00",
        "١٢",  # other scripts' digits are \d too
        "\u00a0",
        "\n",
    ]
)
WHEN_TEXT = st.one_of(
    st.text(),
    st.lists(WHEN_PIECES, max_size=10).map("".join),
    # ISO dates and times, to the ends of the range datetime can hold.
    st.tuples(
        st.dates().map(date.isoformat),
        st.sampled_from(["", "T00:00", "T23:59:59", " 02:30", "T00:00+14:00", "T23:59-12:00"]),
    ).map("".join),
    # Numbers longer than Python turns into an int without complaint.
    st.tuples(
        st.sampled_from(["#", "", "1 day "]), st.sampled_from("019"), st.integers(1, 6000)
    ).map(lambda p: p[0] + p[1] * p[2] + ("m ago" if p[0] != "#" else "")),
)
ZONES = st.sampled_from(
    [
        UTC,
        ZoneInfo("Europe/Berlin"),
        ZoneInfo("America/New_York"),
        timezone(timedelta(hours=14)),
        ZoneInfo("Pacific/Kiritimati"),
        ZoneInfo("America/Adak"),
    ]
)
NOWS = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@FUZZ
@given(text=WHEN_TEXT, now=NOWS, tz=ZONES)
def test_any_when_is_read_or_refused_with_one_line(text: str, now: datetime, tz: Any) -> None:
    try:
        when = parse_when(text, now=now, tz=tz)
    except TimeSpecError as error:
        assert "\n" not in str(error)
    else:
        assert (when.at is None) != (when.snapshot is None)


# --- config --------------------------------------------------------------------------------

# Strings a config check or a later use may choke on: paths, URLs, patterns, command lines.
TRICKY = st.sampled_from(
    [
        "",
        " ",
        "~",
        "~nobody/x",
        "~\x00",
        "a\x00b",
        "/",
        "..",
        "x/../..",
        "a\nb",
        "sqlite://",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite:///~\x00",
        "postgresql://h/db",
        "ftp://x",
        "(",
        "'",
        '"unclosed',
        "\\",
        "*",
        "[",
        "a{99999999999}",
        "(?P<",
        "(?<=a+)b",
        "json",
        "yaml",
        "toml",
        "ini",
        "env",
    ]
)
STRINGS = st.one_of(TRICKY, st.text(max_size=20))
TOML_SCALARS = st.one_of(
    STRINGS,
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.datetimes(),
    st.dates(),
)
TOML_VALUES = st.recursive(
    TOML_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
# Mostly a value of the right shape, so the checks past the first type check are reached.
LIKELY = st.one_of(STRINGS, STRINGS, st.lists(STRINGS, max_size=3), TOML_VALUES)
TABLE_KEYS = {
    "services": ["unit", "pidfile", "match", "script"],
    "files": ["paths", "content", "format", "max_size", "one_file_system", "max_files"],
    "repos": ["path", "timeout"],
    "commands": ["run", "timeout", "cwd"],
    "health": ["run", "timeout", "cwd"],
    "secrets": ["redact", "allow"],
}
TOP_KEYS = ["host", "db", "secret_key_file", "systemctl", "proc_root", "templates_dir"]


SIZES = st.tuples(
    st.sampled_from(["", " "]),
    st.sampled_from("019"),
    st.integers(1, 5000),
    st.sampled_from(["", "B", "KiB", " GiB", "TiB", "kb"]),
).map(lambda p: p[0] + p[1] * p[2] + p[3])
SHAPES = {
    "content": st.booleans() | TOML_VALUES,
    "timeout": st.floats(allow_nan=True, allow_infinity=True) | TOML_VALUES,
    "max_size": SIZES | st.integers(min_value=-(2**63), max_value=2**63 - 1) | TOML_VALUES,
    "max_files": st.integers(min_value=-(2**63), max_value=2**63 - 1) | TOML_VALUES,
    "one_file_system": st.booleans() | TOML_VALUES,
}


def tables(section: str) -> st.SearchStrategy[dict[str, Any]]:
    """One [[section]] table: a name where one is needed, then any of its keys."""
    named = {"name": STRINGS} if section not in ("repos", "secrets") else {}
    return st.fixed_dictionaries(
        named, optional={key: SHAPES.get(key, LIKELY) for key in TABLE_KEYS[section]}
    )


TOML_DOCUMENTS = st.fixed_dictionaries(
    {},
    optional={
        **{key: LIKELY for key in TOP_KEYS},
        **{
            section: st.one_of(st.lists(tables(section), max_size=3), TOML_VALUES)
            for section in TABLE_KEYS
            if section != "secrets"
        },
        "secrets": st.one_of(tables("secrets"), TOML_VALUES),
    },
)


def toml_string(text: str) -> str:
    # JSON's escapes are TOML's; TOML wants DEL escaped too.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any) -> str:
    """`value` as TOML (a dict as an inline table): enough of a writer for these documents."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(value), repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(data: dict[str, Any]) -> str:
    lines = []
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for table in value:
                lines.append(f"[[{key}]]")
                lines += [f"{toml_string(k)} = {toml_value(v)}" for k, v in table.items()]
        else:
            lines.insert(0, f"{toml_string(key)} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def config_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="drift-fuzz-") as folder:
        yield Path(folder)


@settings(FUZZ, max_examples=100)
@given(data=TOML_DOCUMENTS)
def test_any_toml_document_is_a_config_or_a_config_error(
    config_dir: Path, data: dict[str, Any]
) -> None:
    path = config_dir / "drift.toml"
    text = toml_document(data)
    tomllib.loads(text)  # the document is TOML: the fuzzing reaches the config's own checks
    path.write_text(text, encoding="utf-8")
    for read in (lambda: parse_config(data, path), lambda: load_config(path)):
        try:
            read()
        except ConfigError as error:
            assert str(error).startswith(str(path)) and "\n" not in str(error)


@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.lists(
            st.sampled_from(
                [
                    b"[[services]]\n",
                    b"name = ",
                    b'"x"\n',
                    b"\xff",
                    b"\x00",
                    b"pidfile = ",
                    b"match = '('\n",
                    b"[[files]]\n",
                    b"paths = []\n",
                    b"systemctl = '\"'\n",
                    b"\n",
                    b"=",
                    b"[",
                    b"]",
                ]
            ),
            max_size=12,
        ).map(b"".join),
    )
)
def test_any_config_file_is_a_config_or_a_config_error(config_dir: Path, data: bytes) -> None:
    path = config_dir / "bytes.toml"
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigError as error:
        assert str(error).startswith(str(path)) and "\n" not in str(error)


# --- scripts -------------------------------------------------------------------------------

CORPUS = sorted(
    (Path(__file__).parent / "shell_corpus").glob("*/serve.sh"), key=lambda p: p.parent.name
)


# Beyond the collector tests' pieces: what once crashed the parser, and non-UTF-8 bytes' text.
SCRIPT_PIECES = st.sampled_from(
    ["{", "{1..", "}", "\U000f0000", "\U0001f680", "\U000e0001", "\udcff", "\x00", "\r\n"]
)


@st.composite
def scripts(draw: Callable[..., Any]) -> bytes:
    """Arbitrary bytes, shell-ish text, or a real serve script with a piece spliced in."""
    kind = draw(st.sampled_from(["bytes", "pieces", "corpus"]))
    if kind == "bytes":
        return draw(st.binary(max_size=400))
    text = "".join(draw(st.lists(SHELL_PIECES | SCRIPT_PIECES | st.text(max_size=4), max_size=30)))
    if kind == "pieces":
        return text.encode("utf-8", "surrogateescape")
    base = draw(st.sampled_from(CORPUS)).read_bytes()
    at = draw(st.integers(0, len(base)))
    cut = draw(st.integers(0, 40))
    return base[:at] + text.encode("utf-8", "surrogateescape") + base[at + cut :]


@settings(
    max_examples=80,
    # A hang is a failure: no one script may take seconds (bash -n is part of it).
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=scripts())
def test_any_serve_script_is_read_without_error_or_hang(config_dir: Path, data: bytes) -> None:
    from drift.collectors.scripts import collect_script

    path = config_dir / "serve.sh"
    path.write_bytes(data)
    found = list(collect_script("decode", str(path), CollectContext()))
    assert found and all(isinstance(item, Fact | CollectionError) for item in found)
    for item in found:
        if isinstance(item, Fact):
            json.dumps(item.provenance)  # stored as JSON
            item.value.encode("utf-8")  # stored as valid UTF-8


# --- renderers -----------------------------------------------------------------------------

# What a value from the box may hold to forge a line, reorder one or become markup.
HOSTILE = st.sampled_from(
    [
        "\n",
        "\r\n",
        "\r",
        "\v",
        "\f",
        "\x85",
        "\u2028",
        "\u2029",
        "\x1c",
        "\t",
        "\x00",
        "\x1b[31m",
        "\x1b]0;title\x07",
        "\x1b]",
        "\x9b2J",
        "\u202e",
        "\u2066",
        "\u200b",
        "\u200e",
        "\u061c",
        "\ufeff",
        "\U000e0001",
        "\ud800",
        " 9. [1.00] FORGED",
        "Blind spots: none",
        "Suspects",
        "baseline  #1",
        "## ",
        "# ",
        "- **",
        "| x |",
        "```",
        "`",
        "~~~",
        "<x-forged>",
        "</code></pre>",
        '" onload="x',
        "<!--",
        "&lt;",
        "\\",
        "{{ host }}",
        "*",
        "_",
        "[a](b)",
    ]
)
# Never shown as empty: a template may leave out what is empty (and Jinja's indent leaves a
# blank line blank), while the line structure is compared with that of benign values.
VALUES = (
    st.lists(st.one_of(HOSTILE, st.text(min_size=1, max_size=6)), min_size=1, max_size=6)
    .map("".join)
    .filter(lambda value: printable(value) != "")
)


# Fields whose value drift picks from a closed set (a change's kind, a story's status, a
# change's role): templates branch on them, so a drawn "added" would only change the branch.
DRIFT_WORDS = frozenset({"kind", "status", "role"})


def substitute(context: Any, value: Callable[[], str], key: str = "") -> Any:
    """`context` with every string (and every dict key a template shows) from `value`.

    A subject keeps its kind ("file:", "service:"): drift makes every subject
    so, and show and history print a subject at the start of its line.
    """
    if isinstance(context, dict):
        out = {}
        for i, (k, v) in enumerate(context.items()):
            # A kind of fact (by_kind) is shown; numbered, so two drawn alike stay two.
            shown_key = f"{value()}{i}" if key == "by_kind" else k
            out[shown_key] = substitute(v, value, k)
        return out
    if isinstance(context, list):
        return [substitute(v, value, key) for v in context]
    if isinstance(context, str):
        if key in DRIFT_WORDS:
            return context  # drift's own word from a closed set, never text from the box
        if key == "subject" and ":" in context:
            return context.split(":", 1)[0] + ":" + value()
        return value()
    return context


def token_source() -> Callable[[], str]:
    """Benign values: «0», «1», ... so the lines a template starts can be told from values."""
    count = iter(range(10**9))
    return lambda: f"«{next(count)}»"


def drawn_source(draw: Callable[..., Any]) -> Callable[[], str]:
    """Hostile values: a few drawn, handed out in turn (a context has hundreds of fields)."""
    pool = draw(st.lists(VALUES, min_size=1, max_size=7))
    count = iter(range(draw(st.integers(0, 6)), 10**9))
    return lambda: pool[next(count) % len(pool)]


def since_skeleton() -> dict[str, Any]:
    """since_context's shape (tests/test_report_templates), with every optional part present."""
    context = report_context()
    # The drawing is shapes made from the context (tests/test_report_templates checks its
    # escaping); its one-line-per-event text (`glance`) is fuzzed with the rest.
    del context["picture"]
    context["trust"]["warnings"] = ["the clock went back: snapshot #3 was taken at ..."]
    context["suspects"][0]["changes"][3]["diff"]["parse_error"] = "line 3: expected a value"
    context["explain"] = True
    return context


def show_skeleton() -> dict[str, Any]:
    fact = {
        "key": "env:PATH",
        "value": "/usr/bin",
        "secret": False,
        "since": "2026-12-02T12:00:00+00:00",
        "since_local": "2026-12-02 12:00:00 UTC",
        "where": "pid 7 (/proc/7/environ)",
        "provenance": {"pid": 7},
    }
    return {
        "host": "gpu-node-7",
        "snapshot": {"snapshot": 3, "local": "2026-12-02 12:00:00 UTC", "why": "latest record"},
        "pattern": "PATH",
        "service": "decode",
        "subjects": [{"subject": "service:decode", "facts": [fact, {**fact, "where": ""}]}],
        "errors": [{"subject": "file:/srv/x", "key": "sha256", "message": "cannot read: EIO"}],
    }


def history_skeleton() -> dict[str, Any]:
    version = {
        "value": "512",
        "secret": False,
        "from": "2026-12-02T12:00:00+00:00",
        "from_local": "2026-12-02 12:00:00 UTC",
        "from_snapshot": 2,
        "until": "2026-12-02T13:00:00+00:00",
        "until_local": "2026-12-02 13:00:00 UTC",
        "until_snapshot": 3,
        "untracked": True,
        "where": "/srv/serve/decode.sh:8",
        "provenance": {"file": "/srv/serve/decode.sh", "line": 8, "text": "export A=512"},
        # `history -p`: a diff of the text from the value before (box text, like the values)
        "patch": ["--- a/decode.sh", "+++ b/decode.sh", "@@ -8 +8 @@", "-export A=256", "+A=512"],
    }
    last = {**version, "until": None, "until_local": None, "until_snapshot": None}
    return {
        "host": "gpu-node-7",
        "pattern": "A",
        "limit": 2,
        "facts": [
            {
                "subject": "script:/srv/serve/decode.sh",
                "key": "export:A",
                "versions": [last, version],
                "older": 3,
            }
        ],
        "begins_snapshot": 2,
    }


RENDERERS: dict[str, tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], str]]] = {
    "since.txt": (since_skeleton, lambda c: render_template("since.txt.j2", c)),
    "show.txt": (show_skeleton, lambda c: render_template("show.txt.j2", c)),
    "history.txt": (history_skeleton, lambda c: render_template("history.txt.j2", c)),
    "report.md": (since_skeleton, lambda c: render_report(c, "md")),
}
BENIGN = {
    name: render(substitute(skeleton(), token_source()))
    for name, (skeleton, render) in RENDERERS.items()
}
TOKEN = re.compile(r"«\d+»")
FENCE = re.compile(r"^( *)`{3,}")


def in_fences(markdown: str) -> set[int]:
    """The numbers of the lines inside Markdown code fences (the Regenerate command, diffs)."""
    inside, fence = set(), None
    for number, line in enumerate(markdown.split("\n")):
        stripped = line.strip()
        if fence is None:
            match = re.match(r"(`{3,})[^`]*$", stripped)
            fence = match.group(1) if match else None
        elif re.fullmatch(rf"{fence}`*", stripped):
            fence = None
        else:
            inside.add(number)
    return inside


def assert_lines_start_as_the_template_starts_them(out: str, benign: str) -> None:
    """Each value is one line; a line starts as its template starts it, up to its first value."""
    lines, expected = out.split("\n"), benign.split("\n")
    code = in_fences(benign)
    # Only inside a code fence does a value start a line (the command to paste).
    assert not any(TOKEN.match(line) for n, line in enumerate(expected) if n not in code)
    assert len(lines) == len(expected)
    for line, template in zip(lines, expected, strict=True):
        # A Markdown fence is longer than any backtick run inside: its length may differ.
        line, template = FENCE.sub(r"\1```", line), FENCE.sub(r"\1```", template)
        first = TOKEN.search(template)
        start = template[: first.start()] if first else template
        if first:
            # A Markdown code span is the value's: its fence and padding depend on it.
            start = start.split("`", 1)[0]
        assert line.startswith(start), (line, template)


@pytest.mark.parametrize("name", list(RENDERERS))
@FUZZ
@given(data=st.data())
def test_no_value_starts_a_line_of_its_own(name: str, data: st.DataObject) -> None:
    skeleton, render = RENDERERS[name]
    out = render(substitute(skeleton(), drawn_source(data.draw)))
    assert hidden(out, allowed="\n\t") == set()
    assert_lines_start_as_the_template_starts_them(out, BENIGN[name])
    if name == "report.md":
        blocks, _rest = fenced_blocks(out)
        assert len(blocks) == len(fenced_blocks(BENIGN[name])[0])


@FUZZ
@given(data=st.data(), width=st.integers(40, 120))
def test_on_a_terminal_a_wrapped_value_goes_on_indented(data: st.DataObject, width: int) -> None:
    context = substitute(since_skeleton(), drawn_source(data.draw))
    piped = render_template("since.txt.j2", context)
    screen = render_template("since.txt.j2", context, color=True, width=width)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen)
    assert hidden(plain, allowed="\n") == set()
    cut = "cut to fit the screen" in plain.replace("\n", " ")
    if not cut:
        assert plain == wrap_lines(piped, width)  # colour changes no line
    else:
        # A value too long for the screen is cut on a terminal (never piped), and the page
        # ends saying where it is whole.
        assert "piped or with --format json, it is" in plain.replace("\n", " ")
    began = [line.expandtabs() for line in piped.split("\n")]  # a terminal line has no tab
    for line in plain.split("\n"):
        if line and not line.startswith(" ") and not (cut and ("…" in line or "cut to" in line)):
            assert any(p.startswith(line) for p in began), line


HTML_BENIGN = parse(render_report(substitute(since_skeleton(), token_source()), "html"))


@FUZZ
@given(data=st.data())
def test_no_value_becomes_html(data: st.DataObject) -> None:
    out = render_report(substitute(since_skeleton(), drawn_source(data.draw)), "html")
    assert hidden(out, allowed="\n\t") == set()
    page = parse(out)
    assert "x-forged" not in {t for t, _a in page.tags}
    # Every element and attribute is the template's, as with benign values.
    assert [t for t, _a in page.tags] == [t for t, _a in HTML_BENIGN.tags]
    assert [sorted(a) for _t, a in page.tags] == [sorted(a) for _t, a in HTML_BENIGN.tags]
    assert page.ends == HTML_BENIGN.ends


@FUZZ
@given(data=st.data())
def test_json_gives_every_value_back_on_lines_of_its_own(data: st.DataObject) -> None:
    context = substitute(since_skeleton(), drawn_source(data.draw))
    out = render_json("since", context)
    assert hidden(out) == set()
    assert json.loads(out)["data"] == context
    for line in out.split("\n"):
        assert re.match(r' *("|[\[\]{}]|-?\d|true|false|null)', line), line
