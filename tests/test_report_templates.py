"""The postmortem report (HTML and Markdown): inert, complete, and values from the box stay text."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jinja2
import pytest
from investigations import LOCAL, TIME, baseline, change, investigation, snapshot, suspect

from drift.analysis.investigation import (
    BlindSpotEntry,
    Investigation,
    MarkPoint,
    Overview,
    Scope,
    ScopeSubject,
    ScopeSwitch,
    ServiceFailure,
    ServiceLane,
    ServiceRestart,
    Stretch,
    TimelineEntry,
    Unchanged,
    UnchangedFact,
)
from drift.analysis.plain import plain
from drift.analysis.rank import Signal
from drift.analysis.structured import KeyChange
from drift.analysis.values import ValueDiff
from drift.render.glance import glance_lines
from drift.render.jinja import render_report
from drift.render.timeline import picture
from drift.timespec import local_time, to_us

SCRIPT = "<script>alert(1)</script>"
BREAKOUT = "</details><img src=x onerror=alert(1)>"
LINK = "[link](http://evil)"
FENCE = "```"
ANSI = "\x1b[31m"
SECRET = "[redacted:1a2b3c4d]"
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _signals(score: float) -> list[Signal]:
    return [
        Signal(name="liveness", value=1.0, weight=0.5, contribution=0.5, reason="live"),
        Signal(name="kind", value=1.0, weight=0.5, contribution=score - 0.5, reason=LINK),
    ]


def _text_diff(lines: list[str]) -> ValueDiff:
    return ValueDiff(format="text", keys=[], parse_error=None, lines=lines)


def report_investigation() -> Investigation:
    """The incident demo's investigation, reduced, with hostile values."""
    script = "script:/srv/serve/decode.sh"
    long_diff = ["--- baseline", "+++ current", "@@ -1,30 +1,30 @@"] + [
        f"-old line {i}" if i % 2 else f"+new line {i}" for i in range(30)
    ]
    root = change(
        script,
        "export:EVIL",
        "added",
        None,
        f"{SCRIPT}{BREAKOUT}",
        role="root",
        where="/srv/serve/decode.sh:8",
        provenance={"file": "/srv/serve/decode.sh", "line": 8, "service": "decode"},
    )
    content = change(
        script,
        "content",
        "modified",
        "sha256:7c297d8e1d05 (10 lines, 456 chars)",
        "sha256:712dfba0555f (11 lines, 496 chars)",
        where="/srv/serve/decode.sh",
        provenance={"file": "/srv/serve/decode.sh", "service": "decode"},
        diff=_text_diff(
            [
                "--- baseline",
                "+++ current",
                "@@ -7,3 +7,5 @@",
                f" export HF_TOKEN={SECRET}",
                f"+export EVIL='{SCRIPT}'",
                f"+# {FENCE}` </pre>{BREAKOUT} {ANSI}red\x1b[0m {LINK}",
                f" {FENCE}",  # a context line that would close a three-backtick fence
                # Two runs an escape sequence keeps apart until it vanishes from the output.
                f" {FENCE}\x1b[31m{FENCE}",
                " echo $$ > /srv/run/decode.pid",
            ]
        ),
    )
    live = change(
        "service:decode",
        "env:EVIL",
        "added",
        None,
        f"{SCRIPT}{BREAKOUT}",
        where="pid 11199 (/proc/11199/environ)",
        provenance={"pid": 11199, "source": "/proc/11199/environ"},
    )
    config = change(
        "file:/etc/serve/config.json",
        "content",
        "modified",
        "sha256:aaaa (40 lines)",
        "sha256:bbbb (40 lines)",
        where="/etc/serve/config.json",
        provenance={"file": "/etc/serve/config.json", "format": "json"},
        diff=ValueDiff(
            format="json",
            keys=[
                KeyChange(path="a|b", kind="changed", before="1", after=f"2 | {LINK}"),
                KeyChange(path="`tick`", kind="added", before=None, after='"x"'),
            ],
            parse_error=None,
            lines=long_diff,
        ),
    )
    output = change(
        "command:gpu",
        "stdout",
        "modified",
        "sha256:1111 (31 lines)",
        "sha256:2222 (31 lines)",
        role="root",
        where="$ nvidia-smi -q",
        provenance={"run": "nvidia-smi -q"},
        diff=_text_diff(long_diff),
    )
    token = change(
        "service:decode",
        "env:HF_TOKEN",
        "modified",
        "[redacted:1a2b3c4d]",
        "[redacted:5e6f7a8b]",
        secret=True,
        where="pid 11199 (/proc/11199/environ)",
        provenance={"pid": 11199},
    )
    restart = ServiceRestart(
        service="decode",
        before_pid="11135",
        after_pid="11199",
        at="2026-12-02T12:55:31.380000+00:00",
        at_local=LOCAL,
        count=4,
        counted_by="systemd",
        first="2026-12-02T12:55:01.380000+00:00",
        first_local=LOCAL,
    )
    # What the unit's journal said: lines a program wrote, whatever they hold.
    failure = ServiceFailure(
        service="decode",
        summary="crash-looping since 12:55:01 (4 restarts, exit 1)",
        state="failing",
        since="2026-12-02T12:55:01.380000+00:00",
        since_local=LOCAL,
        restarts=4,
        exit="exit 1",
        result="exit-code",
        journal=[
            f"2026-12-02T12:55:01.400000Z 0a1b2c3d bash[7]: {SCRIPT} {FENCE}</pre>{BREAKOUT}",
            f"2026-12-02T12:55:01.500000Z 0a1b2c3d bash[7]: {LINK} {ANSI}| pipe",
        ],
    )
    suspects = [
        suspect(
            1,
            f"export EVIL={SCRIPT} added to /srv/serve/decode.sh:8 {ANSI}",
            score=1.0,
            label=f"live in decode (pid 11199) since restart 12:55:31 {BREAKOUT}",
            reasons=[f"in a running process | {LINK}", f"new {FENCE}"],
            signals=_signals(1.0),
            changes=[root, live, content, config, token],
            restarts=[restart],
            failure=failure,
        ),
        suspect(
            2,
            "command gpu: output modified",
            score=0.32,
            status="pending",
            label="not applied yet: takes effect on next restart",
            category="command",
            services=[],
            reasons=["kind: a command's output, often noise"],
            signals=_signals(0.32),
            changes=[output],
        ),
    ]
    switch = ScopeSwitch(
        snapshot=3,
        at=TIME,
        local=LOCAL,
        before_path="/etc/drift/drift.toml",
        after_path=f"/srv/{SCRIPT}/drift.toml",
        sections=["services: -web"],
        text=f"config changed at #3 (services: -web, /srv/{SCRIPT}/drift.toml)",
        detail=f"changed at #3 (services: -web, /srv/{SCRIPT}/drift.toml)",
    )
    since = "2026-12-02T12:55:30.871424+00:00"
    return investigation(
        suspects,
        baseline=baseline(2, facts=114, unhealthy_at="2026-12-02T12:56:00+00:00"),
        current=snapshot(3, facts=116),
        scope=Scope(
            changes=[switch],
            untracked_facts=1,
            tracked_facts=1,
            untracked=[
                ScopeSubject(subject=f"service:{BREAKOUT}", facts=1, since=3, since_local="x")
            ],
            tracked=[ScopeSubject(subject=f"file:/srv/{LINK}", facts=1, since=3, since_local="x")],
        ),
        total_suspects=3,
        overview=hostile_overview(),
        timeline=[
            TimelineEntry(at=f"2026-12-02T12:55:31.{us}+00:00", local=LOCAL, kind=kind, text=text)
            for us, kind, text in (
                ("370000", "restart", "co-restart of prefill, decode (pids 11134 -> 11196)"),
                ("661557", "change", f"#1 export EVIL={SCRIPT} | {LINK} {ANSI}"),
            )
        ],
        unchanged=Unchanged(
            count=3,
            by_kind={"file": 1, "live env": 2},
            subjects=["file:/srv/model.py", "service:prefill"],
            whole_subjects=["file:/srv/model.py"],
            facts=[
                UnchangedFact(subject=subject, key=key, value=value, since=since)
                for subject, key, value in (
                    ("file:/srv/model.py", "sha256", "sha256:4941b0cadba5 (1 line, 10 chars)"),
                    ("service:prefill", "env:PS1", f"{FENCE}{BREAKOUT}|{LINK}"),
                    ("service:prefill", "env:HF_TOKEN", SECRET),
                )
            ],
        ),
        blind_spots=[
            BlindSpotEntry(
                kind="error",
                subject="command:gpu",
                key=None,
                message=f"exit 1: {SCRIPT}",
                first_seen="2026-12-02T12:55:31+00:00",
                last_seen="2026-12-02T12:56:31+00:00",
                first_local=LOCAL,
                last_local="2026-12-02 12:56:31 UTC",
                count=2,
                current=True,
            )
        ],
    )


EXTRAS = {
    "regenerate": "drift report --stable '#2' --host gpu-node-7 -o postmortem.html",
    "generated_at": "2026-12-02T13:00:00+00:00",
    "explain": False,
    "digests": True,
}


def report_context() -> dict[str, Any]:
    """What the report templates receive: the investigation as plain data, and the extras,
    the drawn timeline's included."""
    context = plain(report_investigation())
    return {**context, **EXTRAS, "picture": picture(context), "glance": glance_lines(context)}


def hostile_overview() -> Overview:
    """The drawn timeline's parts, with a service and a mark note that try to end the SVG."""
    at = "2026-12-02T12:55:{:02d}+00:00".format

    def stretch(a: int, b: int, state: str, text: str) -> Stretch:
        return Stretch(
            start=at(a), end=at(b), start_local=LOCAL, end_local=LOCAL, state=state, text=text
        )

    name = f"decode</svg>{SCRIPT}"
    return Overview(
        start=at(20),
        end=at(59),
        health=[
            stretch(20, 45, "passing", "passing: ok"),
            stretch(45, 58, "failing", f"failing: {SCRIPT}"),
        ],
        services=[
            ServiceLane(
                service=name,
                starts=[at(31), at(40)],
                starts_local=[LOCAL, LOCAL],
                stretches=[
                    stretch(20, 40, "running", "running"),
                    stretch(40, 50, "crash-loop", f"{name} crash-looping since 12:55:40"),
                ],
            )
        ],
        marks=[
            MarkPoint(at=at(25), local=LOCAL, kind="note", note=f"</text></svg>{SCRIPT}{BREAKOUT}")
        ],
    )


class Page(HTMLParser):
    """Every element and the text a reader sees, as a browser's parser would split them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.ends: list[str] = []
        self.text: list[str] = []
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self.ends.append(tag)
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data
        else:
            self.text.append(data)

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.tags if t == tag)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


@pytest.fixture(scope="module")
def html() -> str:
    return render_report(report_context(), "html")


@pytest.fixture(scope="module")
def md() -> str:
    return render_report(report_context(), "md")


# --- HTML --------------------------------------------------------------------------------


def test_html_loads_nothing_and_runs_nothing(html: str) -> None:
    page = parse(html)
    assert "<script" not in html.lower()
    assert page.count("script") == 0
    for tag, attrs in page.tags:
        assert tag not in ("img", "link", "iframe", "object", "embed", "base", "form"), tag
        assert "src" not in attrs, (tag, attrs)
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        href = attrs.get("href")
        assert href is None or href.startswith("#"), (tag, attrs)
        assert "url(" not in (attrs.get("style") or "")
    assert "url(" not in page.style and "@import" not in page.style
    csp = [
        a for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert [a["content"] for a in csp] == [CSP]
    # The CSP must come before anything that could load: first in <head> after the charset.
    assert html.index("Content-Security-Policy") < html.index("<style>")


def test_hostile_values_show_as_text(html: str) -> None:
    page = parse(html)
    shown = "".join(page.text)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;/details&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;/pre&gt;" in html
    # The reader sees the values exactly, minus control characters.
    assert f"{SCRIPT}{BREAKOUT}" in shown
    assert SECRET in shown and LINK in shown
    assert "\x1b" not in html
    assert html.count("<details") == html.count("</details>") == page.count("details")
    assert page.ends.count("details") == page.count("details")
    assert page.count("pre") == page.ends.count("pre")


def test_html_sections_in_order_with_the_culprit_first(html: str) -> None:
    ids = ["suspects", "timeline", "changes", "unchanged", "blind-spots", "regenerate"]
    positions = [html.index(f'id="{name}"') for name in ids]
    assert positions == sorted(positions)
    drawing = re.compile(r'<section id="glance">.*?</section>', re.S)
    assert len(drawing.findall(html)) == 1
    shown = "".join(parse(drawing.sub("", html[html.index("<body>") :])).text)
    # Above the fold: only the short header (and the drawing, whose height the browser
    # test checks) comes before suspect #1's title.
    before_culprit = shown[: shown.index("export EVIL=")]
    assert len(" ".join(before_culprit.split())) < 600
    assert "first unhealthy" in before_culprit
    assert "given with --stable #2" in before_culprit
    assert "drift report --stable '#2' --host gpu-node-7 -o postmortem.html" in shown
    # The page says when it was made in the one human form; the machine form stays in
    # the <time> element's datetime attribute.
    assert (
        f"Generated by drift at {local_time(to_us(datetime(2026, 12, 2, 13, tzinfo=UTC)))}."
        in shown
    )
    assert '<time datetime="2026-12-02T13:00:00+00:00">' in html
    # Status is spelled out, not only a colour.
    assert re.search(r'class="suspect s-live"[^>]*>.*?LIVE', html, re.S)
    assert re.search(r'class="suspect s-pending"[^>]*>.*?PENDING', html, re.S)


def test_html_collapses_long_evidence_and_diffs(html: str) -> None:
    first = html[html.index('id="suspect-1"') : html.index('id="suspect-2"')]
    visible, _, hidden = first.partition('<details class="more"><summary>2 more changes')
    assert hidden, "changes beyond the first 3 are collapsed"
    assert "env:EVIL" in visible and "env:HF_TOKEN" not in visible and "env:HF_TOKEN" in hidden
    second = html[html.index('id="suspect-2"') : html.index('id="timeline"')]
    assert "<summary>diff (33 lines)</summary>" in second
    # Structured content: changed keys shown, the unified diff collapsed.
    assert "<code>a|b</code>" in hidden and "unified diff (33 lines)" in hidden
    unchanged = html[html.index('id="unchanged"') :]
    assert '<details class="bulk"><summary>all 3 unchanged facts' in unchanged


def test_html_autoescapes_a_users_own_report(tmp_path: Path) -> None:
    (tmp_path / "report.html.j2").write_text("<p>mine: {{ host }}</p>\n")
    out = render_report({**report_context(), "host": SCRIPT}, "html", str(tmp_path))
    assert out == "<p>mine: &lt;script&gt;alert(1)&lt;/script&gt;</p>\n"


# --- Markdown ----------------------------------------------------------------------------


def fenced_blocks(md: str) -> tuple[list[list[str]], list[str]]:
    """Split Markdown into fenced code blocks and the other lines, as CommonMark does."""
    blocks: list[list[str]] = []
    rest: list[str] = []
    fence = None
    for line in md.splitlines():
        stripped = line.strip()
        if fence is None:
            m = re.match(r"(`{3,})[^`]*$", stripped)
            if m:
                fence = m.group(1)
                blocks.append([])
            else:
                rest.append(line)
        elif re.fullmatch(rf"{fence}`*", stripped):
            fence = None
        else:
            blocks[-1].append(line)
    assert fence is None, "a fenced block is never closed"
    return blocks, rest


def without_code_spans(line: str) -> str:
    """The line minus its inline code spans (a run of N backticks up to the next run of N)."""
    return re.sub(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", "", line)


def test_markdown_fences_hold_hostile_lines(md: str) -> None:
    blocks, _rest = fenced_blocks(md)
    diffs = [b for b in blocks if any("+++ current" in line for line in b)]
    # content (twice: suspect and appendix), config and gpu output (twice each)
    assert len(diffs) == 6
    hostile = next(b for b in diffs if any("</pre>" in line for line in b))
    assert any(f"{FENCE}` </pre>" in line for line in hostile)
    assert f"   {FENCE}" in hostile  # kept inside, indented with the list item
    assert any(SECRET in line for line in hostile)
    assert "drift report --stable '#2' --host gpu-node-7 -o postmortem.html" in md


def test_markdown_has_no_live_html_links_or_control_characters(md: str) -> None:
    assert "\x1b" not in md
    _blocks, rest = fenced_blocks(md)
    prose = "\n".join(without_code_spans(line) for line in rest)
    for line in prose.splitlines():
        # Our own <details> around the list of every unchanged fact is the only HTML.
        if line.strip() not in ("<details><summary>All 3 unchanged facts</summary>", "</details>"):
            assert not re.search(r"(?<!\\)<[A-Za-z/!?]", line), line
    assert not re.search(r"(?<!\\)<script", prose)
    assert not re.search(r"(?<!\\)\[[^\]]*(?<!\\)\]\(", prose), "a live link"
    assert "http://" not in prose and "www." not in prose
    assert "\\[link\\](http\\://evil)" in prose  # escaped, still readable
    # The secret marker is kept for the reader, but only ever inside code.
    assert SECRET in md and SECRET not in prose


def test_markdown_tables_keep_their_columns(md: str) -> None:
    _blocks, rest = fenced_blocks(md)
    tables: list[list[str]] = []
    previous = ""
    for line in rest:
        if line.strip().startswith("|"):
            if not previous.strip().startswith("|"):
                tables.append([])
            tables[-1].append(line.strip())
        previous = line
    assert len(tables) >= 5  # header, key changes (twice), timeline, digests, facts
    for table in tables:
        widths = {len(re.findall(r"(?<!\\)\|", row)) for row in table}
        assert len(widths) == 1, table
        assert re.fullmatch(r"\|( --- \|)+", table[1]), table
    timeline = next(t for t in tables if t[0] == "| time | event | what |")
    assert len(timeline) == 4


def test_markdown_values_survive_as_code(md: str) -> None:
    # In a code span the reader sees the value exactly: nothing to unescape.
    assert f"`{SCRIPT}{BREAKOUT}`" in md
    (heading,) = [line for line in md.splitlines() if line.startswith("### 1. `")]
    assert "export EVIL=<script>alert(1)</script> added to /srv/serve/decode.sh:8" in heading
    assert heading.endswith("`") and "[31m" not in heading
    # A value with a backtick run gets a longer fence; edges padded so they survive.
    assert "```` ```</details><img src=x onerror=alert(1)>\\|[link](http://evil) ````" in md
    assert "**LIVE**" in md and "**PENDING**" in md


# --- Both --------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["html", "md"])
@pytest.mark.parametrize("key", ["regenerate", "generated_at", "explain", "digests"])
def test_a_missing_key_is_an_error(fmt: str, key: str) -> None:
    context = report_context()
    del context[key]
    with pytest.raises(jinja2.UndefinedError):
        render_report(context, fmt)


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_a_missing_nested_key_is_an_error(fmt: str) -> None:
    context = copy.deepcopy(report_context())
    del context["suspects"][0]["changes"][0]["where"]
    with pytest.raises(jinja2.UndefinedError):
        render_report(context, fmt)


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_no_change_renders_every_section(fmt: str) -> None:
    nothing = replace(
        report_investigation(),
        suspects=[],
        total_suspects=0,
        changes_by_subject=[],
        timeline=[],
        blind_spots=[],
        unchanged=Unchanged(count=0, by_kind={}, subjects=[], whole_subjects=[], facts=[]),
    )
    out = render_report({**plain(nothing), **EXTRAS}, fmt)
    assert "No change since the baseline." in out
    assert "every fact was collected in every snapshot" in out
    assert "postmortem.html" in out


def test_a_users_template_wins(tmp_path: Path) -> None:
    (tmp_path / "report.md.j2").write_text("# ours for {{ host }}\n")
    assert render_report(report_context(), "md", str(tmp_path)) == "# ours for gpu-node-7\n"
    # Only that one: the HTML report still comes from drift.
    assert "Content-Security-Policy" in render_report(report_context(), "html", str(tmp_path))


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="html or md"):
        render_report(report_context(), "pdf")


# --- A broken template of the user's -----------------------------------------------------


BROKEN = {
    "syntax": (
        "{% for s in suspects %}\n{{ s.rank }\n",
        "2: template syntax error: unexpected '}'",
    ),
    "undefined": ("fine\n{{ no_such_variable }}\n", "2: template error: 'no_such_variable' is"),
    "type": ("{{ 1 + 'a' }}\n", "1: template error: TypeError: unsupported operand"),
}


@pytest.mark.parametrize("fmt", ["html", "md"])
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_user_template_is_one_line_naming_its_file_and_line(
    tmp_path: Path, fmt: str, case: str
) -> None:
    from drift.errors import TemplateError

    text, problem = BROKEN[case]
    name = f"report.{fmt}.j2"
    (tmp_path / name).write_text(text)
    with pytest.raises(TemplateError) as exc:
        render_report(report_context(), fmt, str(tmp_path))
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / name}:{problem}"), message
    assert exc.value.exit_code == 2


def test_a_user_template_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    from drift.errors import TemplateError

    (tmp_path / "report.md.j2").write_bytes(b"# caf\xe9 {{ host }}\n")
    with pytest.raises(TemplateError) as exc:
        render_report(report_context(), "md", str(tmp_path))
    assert str(exc.value) == (
        f"{tmp_path / 'report.md.j2'}: template not UTF-8 (byte 0xe9 at offset 5)"
    )


def test_a_broken_template_a_user_template_includes_is_named(tmp_path: Path) -> None:
    from drift.errors import TemplateError

    (tmp_path / "report.md.j2").write_text("head\n{% include 'part.j2' %}\n")
    (tmp_path / "part.j2").write_text("one\ntwo {{ nope.deeper }}\n")
    with pytest.raises(TemplateError) as exc:
        render_report(report_context(), "md", str(tmp_path))
    assert str(exc.value).startswith(f"{tmp_path / 'part.j2'}:2: template error: 'nope' is")


def test_the_drawing_shows_hostile_values_as_text(html: str) -> None:
    """A service name or mark note that tries to close the SVG, or the page, stays text."""
    assert html.count("<svg") == 1 and html.count("</svg>") == 1
    drawing = html[html.index("<svg") : html.index("</svg>")]
    assert "decode&lt;/svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in drawing
    assert "&lt;/text&gt;&lt;/svg&gt;&lt;script&gt;" in drawing
    page = parse(drawing + "</svg>")
    assert page.count("script") == page.count("img") == 0
    assert page.count("text") == page.ends.count("text")
    assert page.count("title") == page.ends.count("title")
    # A suspect's marker links to its card and says what it is when pointed at.
    links = [a["href"] for t, a in page.tags if t == "a"]
    assert sorted(links) == [f"#suspect-{s['rank']}" for s in report_context()["suspects"]]


def test_md_tells_the_drawing_one_line_per_event(md: str) -> None:
    part = md[md.index("## At a glance") : md.index("## Suspects")]
    lines = part.splitlines()
    fence = lines[2].removesuffix("text")
    body = lines[3 : lines.index(fence, 3)]
    events = [line.split("  ", 1)[1] for line in body]
    assert events[0] == "health passing: ok"
    assert "baseline: snapshot #2" in events and "current: snapshot #3" in events
    assert f"marked note: </text></svg>{SCRIPT}{BREAKOUT}" in events
    assert "first failing health check" in events
    assert any(e.startswith("suspect #1 LIVE: export EVIL=") for e in events)
    # Times in order, each on the reader's clock with its zone.
    assert all(re.match(r"\d\d:\d\d:\d\d UTC  ", line) for line in body)
    assert [line[:8] for line in body] == sorted(line[:8] for line in body)
