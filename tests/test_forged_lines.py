"""A value from the box cannot forge a line of a report, nor reorder or hide the text around it.

The incident's deployment is recorded for real with hostile values: decode's
serve script exports (and so its live process holds) a value with newlines that
spell a suspect and a "Blind spots: none" line, and a bidi override; a watched
file's name holds a newline, bidi isolates and a zero-width space; router's
script sources a file whose name spells a suspect, so a blind spot's message
holds one; a mark's note holds a Markdown heading; the host name holds a
suspect line. Every report (terminal, pipe, Markdown, HTML, JSON) is read as
the user would read it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator

import pytest
from conftest import run_drift
from test_report_templates import fenced_blocks, parse
from test_terminal_width import SGR, on_terminal, unwrapped

SUSPECT = "\n 9. [1.00] FORGED SUSPECT"
BLIND = "\nBlind spots: none (FORGED)"
EVIL = f"ok{SUSPECT}{BLIND}\u202e"
FILE = "evil\n 7. [1.00] FORGED FILE\u202e\u2066\u200b.py"
SOURCED = "/nonexistent\n 6. [1.00] FORGED GAP"
NOTE = "looks fine\n## FORGED heading\n- **FORGED** item\u2028 5. [1.00] FORGED NOTE"
HOST = "gpu-node-7\n 4. [1.00] FORGED HOST"

# The lines the hostile values spell, as they would read had a value started a line.
FORGED_LINE = re.compile(
    r" ?\d+\. \[1\.00\] FORGED|Blind spots: none \(FORGED|## FORGED|- \*\*FORGED"
)


def bash_ansi_c(text: str) -> str:
    """`text` as a bash $'...' word: newlines as \\n, everything else as itself."""
    return "$'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The incident recorded with hostile values: #1 and #2 before, #3 after; services stopped."""
    from drift.demo import IncidentSandbox

    tmp_path = tmp_path_factory.mktemp("forged")
    sandbox = IncidentSandbox(tmp_path / "box")
    sandbox.build()
    sandbox.start_all()
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path), "--host", HOST]
    try:
        run_drift(["record", *cfg], tmp_path)
        run_drift(["record", *cfg], tmp_path)
        for name, line in (
            ("decode", f"export EVIL={bash_ansi_c(EVIL)}"),
            ("router", f"source {bash_ansi_c(SOURCED)} || true"),
        ):
            script = sandbox.script(name)
            lines = script.read_text().splitlines()
            lines.insert(next(i for i, s in enumerate(lines) if s.startswith("echo $$")), line)
            script.write_text("\n".join(lines) + "\n")
        (sandbox.kernel.parent / FILE).write_text("x = 1\n")
        sandbox.restart_all()
        run_drift(["mark", "note", "--note", NOTE, *cfg], tmp_path)
        recorded = run_drift(["record", *cfg], tmp_path, check=False)
    finally:
        sandbox.stop_all()
    assert recorded.returncode == 4, recorded.stderr  # stored, with router's blind spot
    yield {"cfg": cfg, "tmp": tmp_path, "record": recorded}


def hidden(text: str) -> list[str]:
    """The control, format and separator characters in `text`, other than its own newlines."""
    return sorted(
        {c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")}
    )


def assert_no_forged_line(text: str) -> None:
    """Every FORGED word sits inside a value, after its escaped newline, never at a line start."""
    assert hidden(text) == []
    forged = [line for line in text.split("\n") if "FORGED" in line]
    assert forged, "the hostile values are in the report"
    for line in forged:
        assert not FORGED_LINE.match(line.lstrip(" ")), line
        assert "\\n" in line[: line.index("FORGED")], line


COMMANDS = [
    ["since", "--stable", "#2", "--all", "--explain"],
    ["diff", "#1", "#3", "--all"],
    ["show"],
    ["history", "EVIL"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_piped_text_keeps_every_value_on_its_line(box: dict, command: list[str]) -> None:
    out = run_drift([*command, *box["cfg"]], box["tmp"]).stdout
    assert_no_forged_line(out)
    if command[0] != "history":
        assert "FORGED FILE\\u202e\\u2066\\u200b.py" in out
    assert "FORGED SUSPECT\\nBlind spots: none (FORGED)\\u202e" in out
    assert "host gpu-node-7\\n 4. [1.00] FORGED HOST" in out.split("\n", 1)[0]


def test_since_shows_the_blind_spot_and_the_note_escaped(box: dict) -> None:
    out = run_drift(["since", "--stable", "#2", "--all", *box["cfg"]], box["tmp"]).stdout
    lines = out.split("\n")
    # The real section headers are drift's, once each; the forged ones are inside values.
    assert [line for line in lines if line.startswith("Blind spots")] == ["Blind spots (1):"]
    assert sum(line.startswith("Suspects") for line in lines) == 1
    (gap,) = [line for line in lines if "FORGED GAP" in line and line.startswith("  ! ")]
    assert gap.startswith("  ! script:") and "sources /nonexistent\\n 6. [1.00] FORGED GAP" in gap
    (note,) = [line for line in lines if "FORGED NOTE" in line]
    assert "marked note: looks fine\\n## FORGED heading\\n- **FORGED** item\\u2028 5." in note
    assert re.match(r"  \d{4}-\d\d-\d\d [\d:]+ \S+  mark", note)
    ranks = [line for line in lines if re.match(r" ?\d+\. \[", line)]
    assert all("FORGED" not in line.split("]", 1)[0] for line in ranks)
    assert len(ranks) == len({line.split(".", 1)[0] for line in ranks})


def test_record_reports_the_blind_spot_on_one_line(box: dict) -> None:
    (gap,) = [line for line in box["record"].stderr.split("\n") if "FORGED GAP" in line]
    assert gap.startswith("  ! script:") and gap.endswith("FORGED GAP: no such file in /")
    assert_no_forged_line(box["record"].stderr)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_on_a_terminal_a_wrapped_value_never_starts_a_line(box: dict, command: list[str]) -> None:
    args = [*command, *box["cfg"]]
    raw = on_terminal(args, box["tmp"], 80)
    screen = SGR.sub("", raw)
    if command[0] in ("since", "diff"):
        assert "\x1b[" in raw  # coloured: really a terminal
    assert hidden(screen) == []
    # The same terminal too wide to wrap: values cut alike (piped output cuts none).
    piped = unwrapped(args, box["tmp"]).split("\n")
    # A line at column 0 is one drift began; a value wrapped goes on indented.
    for line in screen.split("\n"):
        if (line and not line.startswith(" ")) or re.match(r" ?\d+\. \[", line):
            assert any(p.startswith(line) for p in piped), line


def test_markdown_keeps_each_value_on_its_line(box: dict) -> None:
    out = run_drift(
        ["since", "--stable", "#2", "--all", "--format", "md", *box["cfg"]], box["tmp"]
    ).stdout
    report = box["tmp"] / "postmortem.md"
    run_drift(["report", "--stable", "#2", "-o", str(report), *box["cfg"]], box["tmp"])
    for md in (out, report.read_text()):
        assert hidden(md) == []
        _blocks, rest = fenced_blocks(md)
        headings = [line for line in rest if line.startswith("#")]
        assert not any("FORGED" in h.split("`", 1)[0] for h in headings), headings
        for line in rest:
            if "FORGED" in line:
                assert "\\n" in line[: line.index("FORGED")], line
        # In prose a backslash is escaped for Markdown: the reader sees \n, as in code.
        assert "sources /nonexistent\\\\n 6. \\[1.00\\] FORGED GAP" in md
        assert "`ok\\n 9. [1.00] FORGED SUSPECT\\nBlind spots: none (FORGED)\\u202e`" in md


def test_html_and_json_escape_what_would_reorder_or_break_lines(box: dict) -> None:
    html_file = box["tmp"] / "postmortem.html"
    out = run_drift(
        ["report", "--stable", "#2", "-o", str(html_file), *box["cfg"]], box["tmp"]
    ).stdout
    html = html_file.read_text()
    assert hidden(html) == []
    shown = "".join(parse(html).text)
    assert "ok\\n 9. [1.00] FORGED SUSPECT\\nBlind spots: none (FORGED)\\u202e" in shown
    assert "FORGED FILE\\u202e\\u2066\\u200b.py" in shown
    assert out.startswith("wrote ") and out.count("\n") == 1

    raw = run_drift(
        ["since", "--stable", "#2", "--all", "--format", "json", *box["cfg"]], box["tmp"]
    ).stdout
    assert hidden(raw) == []  # JSON escapes them as \uXXXX ...
    data = json.loads(raw)["data"]
    values = {c["after"] for s in data["suspects"] for c in s["changes"]}
    assert EVIL in values  # ... and gives the exact value back
    assert data["host"] == HOST


def test_a_report_file_name_is_echoed_on_one_line(box: dict) -> None:
    name = "post\n 9. [1.00] FORGED\u202e.md"
    out = run_drift(["report", "--stable", "#2", "-o", name, *box["cfg"]], box["tmp"]).stdout
    assert (box["tmp"] / name).exists()
    assert out.startswith("wrote post\\n 9. [1.00] FORGED\\u202e.md (md, ")
    assert out.count("\n") == 1
