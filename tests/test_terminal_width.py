"""Terminal text fits the terminal: wrapped at spaces, under its own text, never mid-word.

The incident is recorded for real, then drift runs on a pseudo-terminal of a
given size, as on a user's screen, and piped, as into grep.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import DRIFT, drift_env, read_terminal, run_drift

SGR = re.compile(r"\x1b\[[0-9;]*m")
# A line may pass the width only as one word that cannot be broken (a long path),
# after its indent and its list marker (" 1. [0.96] ", "= ", "at ") if it has one.
UNBREAKABLE = re.compile(r" *(?:\d+\. \[[\d.]+\] |[*=!~-] |at |from )?\S+")


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The demo's incident recorded (#1, #2 stable, #3 after the export line); services stopped."""
    from drift.demo import IncidentSandbox

    tmp_path = tmp_path_factory.mktemp("width")
    box = IncidentSandbox(tmp_path / "box")
    box.build()
    box.start_all()
    cfg = ["--config", str(box.config_path), "--db", str(box.db_path)]
    try:
        run_drift(["record", *cfg], tmp_path)
        run_drift(["record", *cfg], tmp_path)
        line = box.add_culprit()
        box.touch_kernel()
        box.restart_all()
        run_drift(["record", *cfg], tmp_path)
    finally:
        box.stop_all()
    yield {
        "cfg": cfg,
        "tmp": tmp_path,
        "culprit": f"{box.script('decode')}:{line}",
        "kernel": str(box.kernel),
    }


def on_terminal(args: list[str], tmp_path: Path, columns: int, **env: str) -> str:
    """What drift writes to a terminal `columns` wide (escape sequences kept)."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    environ = {k: v for k, v in drift_env(tmp_path).items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        [DRIFT, *args],
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
        env={**environ, **env},
        cwd=tmp_path,
    )
    os.close(terminal)
    screen = read_terminal(controller)
    assert proc.wait(timeout=60) == 0, screen.decode(errors="replace")
    return screen.decode().replace("\r\n", "\n")


def unwrapped(args: list[str], tmp_path: Path) -> str:
    """What a terminal too wide to wrap anything shows: the text of `on_terminal` before
    wrapping (values cut as on any terminal; piped output cuts none)."""
    return SGR.sub("", on_terminal(args, tmp_path, 200, COLUMNS="100000"))


COMMANDS = [
    ["since", "--stable", "#2", "--explain", "--all"],
    ["diff", "#1", "#3", "--digests"],
    ["show"],
    ["history", "decode"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_at_80_columns_lines_fit_and_no_word_is_split(incident: dict, command: list[str]) -> None:
    args, tmp_path = [*command, *incident["cfg"]], incident["tmp"]
    raw = on_terminal(args, tmp_path, 80)
    piped = unwrapped(args, tmp_path)
    screen = SGR.sub("", raw)

    lines = screen.splitlines()
    too_long = [line for line in lines if len(line) > 80 and not UNBREAKABLE.fullmatch(line)]
    assert too_long == []
    assert max(map(len, piped.splitlines())) > 80  # there was something to wrap
    # The same words in the same order: nothing split, joined, dropped or added.
    assert screen.split() == piped.split()
    # A line at column 0 is the start of a line drift wrote: continuations are indented.
    starts = [line for line in lines if line and not line.startswith(" ")]
    assert all(any(p.startswith(line) for p in piped.splitlines()) for line in starts)
    if command[0] in ("since", "diff"):
        assert "\x1b[" in raw  # on a terminal: coloured, so really a tty
        assert any(incident["culprit"] in line for line in lines)  # a path stays whole


def test_a_suspect_continues_under_its_title_not_its_number(incident: dict) -> None:
    args = ["since", "--stable", "#2", *incident["cfg"]]
    lines = SGR.sub("", on_terminal(args, incident["tmp"], 80)).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(" 1. ["))
    assert lines[first].startswith(" 1. [1.00] export SGLANG_SM120_MMA_TARGET_CTAS=512")
    # The title goes on at the column of its text, past " 1. [1.00] ".
    assert re.match(r" {11}\S", lines[first + 1]), lines[first : first + 3]
    why = next(line for line in lines if line.startswith("      why: "))
    after_why = lines[lines.index(why) + 1]
    assert after_why.startswith(" " * 11) and after_why[11] != " "


def test_a_wide_terminal_leaves_short_lines_alone(incident: dict) -> None:
    args = ["since", "--stable", "#2", "--explain", *incident["cfg"]]
    wide = SGR.sub("", on_terminal(args, incident["tmp"], 200)).splitlines()
    piped = unwrapped(args, incident["tmp"]).splitlines()
    short = [line for line in piped if len(line) <= 200]
    assert len(short) < len(piped)  # the "why" lines are longer: they alone wrap
    assert [line for line in wide if line in set(short)] == short
    assert all(len(line) <= 200 for line in wide)
    assert len(wide) == len(piped) + (len(piped) - len(short))  # each into two lines


def test_columns_overrides_the_terminal_and_piped_output_is_never_wrapped(
    incident: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["since", "--stable", "#2", *incident["cfg"]]
    narrow = SGR.sub("", on_terminal(args, incident["tmp"], 200, COLUMNS="60"))
    assert all(len(line) <= 60 or UNBREAKABLE.fullmatch(line) for line in narrow.splitlines())
    assert max(map(len, narrow.splitlines())) > 60  # a path longer than 60 stays whole

    plain = run_drift(args, incident["tmp"]).stdout
    monkeypatch.setenv("COLUMNS", "60")
    assert run_drift(args, incident["tmp"]).stdout == plain
    # Piped, each suspect's title is one line: grep finds it with its path.
    assert any(
        line.startswith(" 1. [") and line.endswith(incident["culprit"])
        for line in plain.splitlines()
    )


@pytest.mark.parametrize(
    "command", [*COMMANDS, ["since", "--stable", "#2"], ["show", "running"]], ids=lambda c: c[0]
)
def test_piped_output_cuts_nothing(incident: dict, command: list[str]) -> None:
    # Piped, each item is one whole line for grep: no value, title, timeline text or
    # provenance is cut short with an ellipsis (the incident holds none of its own).
    args, tmp_path = [*command, *incident["cfg"]], incident["tmp"]
    piped = run_drift(args, tmp_path).stdout
    assert "…" not in piped
    if command == ["show", "running"]:
        # The provenance of a service's `running` names its whole pidfile.
        pidfile = Path(incident["culprit"]).parent.parent / "run" / "decode.pid"
        assert f"(pidfile {pidfile})]" in piped
    if command[0] == "since":
        timeline = piped.split("\nTimeline", 1)[-1]
        assert incident["culprit"] in timeline


def test_on_a_terminal_a_cut_value_says_where_it_is_whole(incident: dict) -> None:
    args = ["show", *incident["cfg"]]
    screen = SGR.sub("", on_terminal(args, incident["tmp"], 80))
    assert "…" in screen  # long values are cut to keep the screen readable
    assert "piped or with --format json" in screen
