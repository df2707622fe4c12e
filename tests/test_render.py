"""The terminal report: colour only when asked, and never an escape sequence from the box."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from investigations import LOCAL, TIME, change, investigation, snapshot, suspect

from drift.analysis.investigation import SuspectChange
from drift.analysis.plain import plain
from drift.analysis.views import StateFact, StateView, SubjectState
from drift.render.jinja import render_template

EVIL = "\x1b[2J\x1b[31mHACKED\x07"


def context(title: str, changes: list[SuspectChange] | None = None) -> dict[str, Any]:
    """since.txt.j2's context for one live suspect with `title` (and `changes`)."""
    found = investigation([suspect(1, title, changes=changes or [])])
    return {**plain(found), "explain": False, "digests": False}


def test_plain_output_has_no_escape_sequences_even_from_values() -> None:
    out = render_template("since.txt.j2", context(f"export K={EVIL}"))
    assert "\x1b" not in out and "\x07" not in out
    assert "[31m" not in out and "[2J" not in out  # whole sequences go, no residue
    assert "HACKED" in out  # the text is kept, only the control characters go


def test_colour_styles_drift_s_own_text_but_not_values() -> None:
    out = render_template("since.txt.j2", context(f"export K={EVIL}"), color=True)
    assert "\x1b[1m" in out  # titles are bold
    assert "\x1b[2J" not in out and "\x1b[31mHACKED" not in out and "\x07" not in out


def test_counts_read_with_thousands_separators_in_every_human_format(tmp_path: Path) -> None:
    from drift.analysis.investigate import InvestigateOptions, investigate
    from drift.facts import Fact
    from drift.render.envelope import render_json
    from drift.render.jinja import render_report
    from drift.store.query import History
    from drift.store.urls import resolve_db_url
    from drift.store.writer import HistoryWriter
    from drift.timespec import When

    db = resolve_db_url(str(tmp_path / "d.db"))
    writer = HistoryWriter.open(db)
    try:
        ids = []
        for n, word in enumerate(("line", "row")):
            facts = [Fact(f"file:/data/f{i:04}", "sha256", f"{i:064x}") for i in range(1200)]
            output = "".join(f"{word} {i}\n" for i in range(1500))
            facts.append(Fact("command:big", "stdout", output, {"run": "seq"}))
            ids.append(writer.write_snapshot("h", 1_780_000_000_000_000 + n, facts, [], {}))
    finally:
        writer.close()
    history = History.open(db, "h")
    try:
        found = investigate(
            history, When(snapshot=ids[0].snapshot_id, text="#1"), None, InvestigateOptions()
        )
    finally:
        history.close()

    context = plain(found)
    extras = {"regenerate": "drift report", "generated_at": "2026-12-02T12:00:00+00:00"}
    text = render_template("since.txt.j2", {**context, "explain": False, "digests": False})
    md = render_report({**context, **extras, "explain": False, "digests": False}, "md")
    html = render_report({**context, **extras, "explain": True, "digests": False}, "html")
    assert "Verified unchanged: 1,200 facts (file 1,200)" in text
    assert "... and 1,180 more unchanged subjects" in text
    for out in (text, md, html):
        assert "1,200" in out and "1200" not in out
        assert "(1,500 lines, " in out and "1500 lines" not in out  # a hunk header keeps 1500
    data = json.loads(render_json("since", context))["data"]
    assert data["unchanged"]["count"] == 1200  # JSON keeps the plain number


def test_a_wrapped_coloured_title_closes_its_colour_before_the_indent() -> None:
    title = "export SGLANG_SM120_MMA_TARGET_CTAS=512 added to /opt/serve/decode.sh:8"
    out = render_template("since.txt.j2", context(title), color=True, width=60)
    first, second = next(
        (line, out.splitlines()[i + 1])
        for i, line in enumerate(out.splitlines())
        if line.startswith(" 1. [")
    )
    # Bold ends with the line and starts again after the hanging indent, so the
    # indent is never underlined or coloured, and the path sits under the text.
    assert first.startswith(" 1. [0.90] \x1b[1mexport") and first.endswith("\x1b[0m")
    assert second == " " * 11 + "\x1b[1m/opt/serve/decode.sh:8\x1b[0m"


def test_a_value_with_a_newline_stays_on_one_line() -> None:
    value = "python -c 'import time\nwhile True: pass'"
    fact = StateFact(
        key="exec",
        value=value,
        secret=False,
        since=TIME,
        since_local=LOCAL,
        where="",
        provenance={},
    )
    state = StateView(
        host="h",
        snapshot=snapshot(3),
        pattern=None,
        subjects=[SubjectState(subject="script:/opt/serve/decode.sh", facts=[fact])],
        errors=[],
    )
    out = render_template("show.txt.j2", plain(state))
    assert "  exec = python -c 'import time\\nwhile True: pass'\n" in out
    assert "\nwhile" not in out


def test_long_values_that_differ_late_are_shortened_where_they_differ() -> None:
    """Two long paths cut at the same place would read as one value on both sides of the arrow."""
    root = "/home/alice/work/checkouts/inference-serving/deployments/decode-node-7"
    home = change("service:decode", "env:HOME", "modified", f"{root}/old-home", f"{root}/new-home")
    title = "the environment decode was started from changed: HOME, PATH, +4"
    # On a terminal (a width): piped, nothing is cut.
    out = render_template("since.txt.j2", context(title, [home]), width=500)
    line = next(line for line in out.splitlines() if "env:HOME" in line)
    assert line.endswith(": …/decode-node-7/old-home -> …/decode-node-7/new-home")
    piped = render_template("since.txt.j2", context(title, [home]))
    assert f"{root}/old-home -> {root}/new-home" in piped


def test_colour_never_changes_where_a_line_wraps() -> None:
    """A coloured line wraps as the plain one: a tab counts its visible columns, and a colour
    code after a value's last space does not start a line of its own."""
    export = change(
        "script:/opt/serve/decode.sh",
        "export:K",
        "added",
        None,
        "a\tb",
        where="/opt/serve/decode.sh:8 or /opt/serve/decode.sh:12 ",  # ends with a space
    )
    ctx = context("export K='a\tb' added to /opt/serve/decode.sh:8", [export])
    for width in range(40, 90, 2):
        plain = render_template("since.txt.j2", ctx, width=width)
        coloured = render_template("since.txt.j2", ctx, color=True, width=width)
        assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain, width


@given(count=st.integers(0, 10**7))
def test_a_count_agrees_with_its_noun(count: int) -> None:
    from drift.display import plural

    text = plural(count, "mark")
    assert text.replace(",", "").split(" ")[0] == str(count)
    assert text.endswith(" mark" if count == 1 else " marks")
    assert plural(count, "entry", "entries").endswith(" entry" if count == 1 else " entries")


def test_a_template_compiled_with_colour_renders_plain_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compiled templates are cached by their source alone: a styled heading must be painted
    when rendered, not folded into the cached code of whichever run compiled it first."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ctx = context("t", [change("script:/x", "export:K", "added", None, "v")])
    assert "\x1b[" in render_template("since.txt.j2", ctx, color=True, width=80)
    assert "\x1b" not in render_template("since.txt.j2", ctx, width=80)
    assert "\x1b" not in render_template("since.txt.j2", ctx)
