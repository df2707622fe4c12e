"""Reading EnvironmentFile= as systemd does: values, lines, what it drops, what stops a start.

systemd itself is the oracle for the values (tests/test_unit_sources.py, on
tricky and generated files); these pin what only drift adds: the line and
text of each value, the files' order and the reasons a file gives nothing.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drift.collectors.env_file import (
    _machine,
    _plain_lines,
    load_env_files,
    parse_env_file,
    valid_name,
)
from drift.collectors.unit_files import read_file
from drift.rooted import HOST, RootedFiles
from drift.timespec import iso

FILE = "/etc/serve/decode.env"


def values(text: str, **kw: bool | None) -> dict[str, tuple[str, int]]:
    parsed = parse_env_file(text.encode(), FILE, **kw)  # type: ignore[arg-type]
    return {a.name: (a.value, a.line) for a in parsed.assignments}


def test_each_value_names_the_line_its_assignment_starts_on() -> None:
    text = (
        "# knobs for decode\n"
        "TARGET_CTAS=512\n"
        "\n"
        'MULTI="one\n'
        'two"\n'
        "JOINED=a\\\n"
        "  b\n"
        "  SPACED = v  \n"
        "TARGET_CTAS=1024\n"
    )
    parsed = parse_env_file(text.encode(), FILE)
    by_name = {a.name: a for a in parsed.assignments}
    assert {n: (a.value, a.line) for n, a in by_name.items()} == {
        "TARGET_CTAS": ("1024", 9),  # the last one wins, at its own line
        "MULTI": ("one\ntwo", 4),
        "JOINED": ("a  b", 6),
        "SPACED": ("v", 8),
    }
    assert by_name["MULTI"].text == 'MULTI="one'
    assert by_name["SPACED"].text == "  SPACED = v  "
    assert {a.file for a in parsed.assignments} == {FILE}


def test_what_systemd_drops_is_kept_apart_and_a_bad_file_gives_nothing() -> None:
    parsed = parse_env_file(b"export HF_HOME=/x\nNAME-1=2\nOK=1\n2X=3\n", FILE)
    assert [a.name for a in parsed.assignments] == ["OK"]
    assert [(a.name, a.line) for a in parsed.dropped] == [
        ("export HF_HOME", 1),
        ("NAME-1", 2),
        ("2X", 4),
    ]
    bad = parse_env_file(b"A=1\nB=\xff\n", FILE)
    assert (
        bad.assignments == ()
        and bad.failure == f"{FILE}:2: invalid UTF-8, so systemd does not load the file"
    )
    nul = parse_env_file(b"A=1\0B=2\n", FILE)
    assert nul.assignments == () and nul.failure is not None and "NUL" in nul.failure
    assert (
        valid_name("_A1") and not valid_name("1A") and not valid_name("") and not valid_name("A B")
    )


def test_a_comment_ending_in_a_backslash_reads_as_the_systemd_version_says() -> None:
    text = "# old comment \\\nSWALLOWED=1\nAFTER=2\n"
    assert values(text, comment_continues=True) == {"AFTER": ("2", 3)}  # before 254
    assert values(text, comment_continues=False) == {"SWALLOWED": ("1", 2), "AFTER": ("2", 3)}
    unknown = parse_env_file(text.encode(), FILE, comment_continues=None)
    marked = {a.name: a.unsure for a in unknown.assignments}
    assert marked["AFTER"] is None
    assert marked["SWALLOWED"] is not None and "before 254" in marked["SWALLOWED"]
    # A blank line between them: nothing is in doubt.
    clear = parse_env_file(b"# c \\\n\nX=1\n", FILE, comment_continues=None)
    assert [a.unsure for a in clear.assignments] == [None]


def test_files_are_read_in_order_globs_sorted_later_ones_winning(tmp_path: Path) -> None:
    (tmp_path / "etc/serve/d").mkdir(parents=True)
    (tmp_path / "etc/serve/base.env").write_text("A=base\nB=base\n")
    (tmp_path / "etc/serve/d/20.env").write_text("A=twenty\n")
    (tmp_path / "etc/serve/d/10.env").write_text("A=ten\nC=ten\n")
    found = load_env_files(
        (("/etc/serve/base.env", False), ("/etc/serve/d/*.env", False), ("/none.env", True)),
        RootedFiles(str(tmp_path), "test"),
    )
    assert found.problems == ()
    assert list(found.read) == ["/etc/serve/base.env", "/etc/serve/d/10.env", "/etc/serve/d/20.env"]
    assert found.read["/etc/serve/d/20.env"] == hashlib.sha256(b"A=twenty\n").hexdigest()
    assert {n: (a.value, a.file) for n, a in found.values.items()} == {
        "A": ("twenty", "/etc/serve/d/20.env"),
        "B": ("base", "/etc/serve/base.env"),
        "C": ("ten", "/etc/serve/d/10.env"),
    }
    # Each file's times as read: they say when it was edited (drift.analysis.timing).
    assert list(found.times) == list(found.read)
    st = (tmp_path / "etc/serve/d/20.env").stat()
    assert found.times["/etc/serve/d/20.env"] == {
        "mtime": iso(st.st_mtime_ns // 1000),
        "ctime": iso(st.st_ctime_ns // 1000),
    }


def test_a_required_file_missing_or_not_loading_is_a_problem_an_optional_one_is_not(
    tmp_path: Path,
) -> None:
    (tmp_path / "bad.env").write_bytes(b"A=\xff\n")
    found = load_env_files(
        (("/missing.env", False), ("/bad.env", False), ("/gone.env", True), ("rel.env", False)),
        RootedFiles(str(tmp_path), "test"),
    )
    assert found.values == {}
    assert found.problems == (
        "EnvironmentFile=/missing.env does not exist: systemd will not start the unit",
        "/bad.env:1: invalid UTF-8, so systemd does not load the file: "
        "systemd will not start the unit",
        "EnvironmentFile=rel.env is not an absolute path: systemd will not start the unit",
    )
    optional_bad = load_env_files((("/bad.env", True),), RootedFiles(str(tmp_path), "test"))
    assert optional_bad.problems == () and optional_bad.values == {}


def test_a_link_in_a_container_s_file_points_into_the_container(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "opt/app").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "opt/app/env").write_text("FROM=container\n")
    (tmp_path / "host-env").write_text("FROM=host\n")
    os.symlink("/opt/app/env", root / "etc/app.env")  # absolute: the container's /opt
    os.symlink("../opt/app", root / "etc/relative")
    os.symlink("/etc/loop", root / "etc/loop")
    inside = RootedFiles(str(root), "test")
    assert read_file(inside, "/etc/app.env", 1024) == (b"FROM=container\n", "")
    assert read_file(inside, "/etc/relative/env", 1024)[0] == b"FROM=container\n"
    assert read_file(inside, "/etc/loop", 1024) == (None, "too many levels of symbolic links")
    found = load_env_files((("/etc/app.env", False),), inside)
    assert found.values["FROM"].value == "container"
    assert found.values["FROM"].file == "/etc/app.env"  # named as systemd names it


def test_only_a_regular_file_is_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.env")  # would block a reader forever
    (tmp_path / "big.env").write_bytes(b"A=" + b"x" * 2048 + b"\n")
    assert read_file(HOST, f"{tmp_path}/fifo.env", 1024) == (None, "not a regular file")
    data, why = read_file(HOST, f"{tmp_path}/big.env", 1024)
    assert data is None and why == "larger than 1,024 bytes, not read"
    assert read_file(HOST, f"{tmp_path}/nothing.env", 1024) == (None, "no such file")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A=1 # not a comment\n", {"A": ("1 # not a comment", 1)}),
        ("A='keep \\n as is'\n", {"A": ("keep \\n as is", 1)}),
        ('A="\\$HOME \\q"\n', {"A": ("$HOME \\q", 1)}),
        ("A=\n", {"A": ("", 1)}),
        ("A", {}),
        ("A=no-newline-at-end", {"A": ("no-newline-at-end", 1)}),
        ("A=x\r\nB=y\r\n", {"A": ("x", 1), "B": ("y", 2)}),
    ],
)
def test_systemd_s_syntax_in_small(text: str, expected: dict[str, tuple[str, int]]) -> None:
    assert values(text) == expected


@given(st.text(alphabet="AB_1 \t\n=#;$xé", max_size=60))
def test_the_line_by_line_reading_is_systemd_s_machine_where_it_applies(text: str) -> None:
    """Without quotes, backslashes or carriage returns the fast reading gives what the machine
    (checked against systemd itself in tests/test_unit_sources.py) gives."""
    assert _plain_lines(text, FILE) == _machine(text, FILE, comment_continues=False)
