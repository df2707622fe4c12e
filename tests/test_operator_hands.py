"""The moves around an answer, as an operator used to git reaches for them: read a recorded
file as it was (`drift cat`, `history -p`), a log of records and marks (`drift log`),
list and take back marks (`mark --list`, `unmark`), and an exit status that says
whether anything changed (`since`/`diff --exit-code`).

Each test is the operator's sequence on the demo's real processes: real records a
moment apart, then the real `drift` command.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import DRIFT, drift_env, read_terminal, run_drift
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift.demo import CULPRIT, DEMO_TOKEN, IncidentSandbox

CULPRIT_KEY = "export:SGLANG_SM120_MMA_TARGET_CTAS"


def drift(box: IncidentSandbox, tmp: Path, *args: str, check: bool = True):  # type: ignore[no-untyped-def]
    cfg = ["--config", str(box.config_path), "--db", str(box.db_path)]
    return run_drift([*args, *cfg], tmp, check=check)


def record(box: IncidentSandbox, tmp: Path, times: int) -> None:
    for _ in range(times):
        drift(box, tmp, "record")


def on_terminal(box: IncidentSandbox, tmp: Path, args: list[str], typed: bytes = b"", **env: str):  # type: ignore[no-untyped-def]
    """Run drift with stdin and stdout on a pseudo-terminal; what it drew, and its exit code."""
    controller, terminal = pty.openpty()
    cfg = ["--config", str(box.config_path), "--db", str(box.db_path)]
    proc = subprocess.Popen(
        [DRIFT, *args, *cfg],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env={**drift_env(tmp), "COLUMNS": "200", **env},
        cwd=tmp,
    )
    os.close(terminal)
    if typed:
        os.write(controller, typed)
    screen = read_terminal(controller)
    return screen.decode(errors="replace"), proc.wait(timeout=30)


# --- drift cat, history -p ---------------------------------------------------------------


def test_cat_prints_a_recorded_script_as_it_was_with_its_secrets_masked(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    box = sandbox
    before = box.script("decode").read_text()
    drift(box, tmp_path, "record")  # #1
    box.add_culprit()
    drift(box, tmp_path, "record")  # #2
    after = box.script("decode").read_text()

    old = drift(box, tmp_path, "cat", str(box.script("decode")), "--at", "#1")
    now = drift(box, tmp_path, "cat", str(box.script("decode")))
    # As it was, secrets masked: the token's line is there, the token is not.
    assert DEMO_TOKEN in before and DEMO_TOKEN not in old.stdout + now.stdout
    assert "export HF_TOKEN=[redacted:" in old.stdout
    for line in before.splitlines():
        expected = line if DEMO_TOKEN not in line else "export HF_TOKEN=[redacted:"
        assert any(got.startswith(expected) for got in old.stdout.splitlines()), line
    assert CULPRIT not in old.stdout and CULPRIT in now.stdout
    assert len(now.stdout.splitlines()) == len(after.splitlines())
    assert "#1" in old.stderr and "#2" in now.stderr and "secrets masked" in now.stderr
    # A relative path reads as the same file.
    rel = drift(box, tmp_path, "cat", os.path.relpath(box.script("decode"), tmp_path))
    assert rel.stdout == now.stdout

    # A sourced env file is recorded whole too.
    env_file = box.root / "serve" / "common.env"
    env_file.write_text(
        "# shared\nexport MODEL_DIR=/models\nAPI_KEY=sk-live-0123456789abcdefghijklmnop\n"
    )
    lines = box.script("decode").read_text().splitlines()
    lines.insert(3, f". {env_file}")
    box.script("decode").write_text("\n".join(lines) + "\n")
    drift(box, tmp_path, "record")
    shown = drift(box, tmp_path, "cat", str(env_file)).stdout
    assert shown.startswith("# shared\nexport MODEL_DIR=/models\nAPI_KEY=[redacted:"), shown
    assert "sk-live" not in shown


def test_cat_of_a_path_never_recorded_names_the_closest_ones(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    box = sandbox
    drift(box, tmp_path, "record")
    typo = str(box.script("decode")).replace("decode.sh", "decod.sh")
    result = drift(box, tmp_path, "cat", typo, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert f"{typo}: never recorded" in result.stderr
    assert str(box.script("decode")) in result.stderr  # the closest recorded path
    # A file added later was not recorded at an earlier record: said so, not printed empty.
    late = box.root / "serve" / "late.sh"
    late.write_text("#!/bin/sh\necho late\n")
    box.config_path.write_text(
        box.config_path.read_text() + f'\n[[files]]\nname = "late"\npaths = ["{late}"]\n'
        "content = true\n"
    )
    drift(box, tmp_path, "record")
    assert drift(box, tmp_path, "cat", str(late)).stdout == "#!/bin/sh\necho late\n"
    early = drift(box, tmp_path, "cat", str(late), "--at", "#1", check=False)
    assert early.returncode == 2 and "was not recorded at #1" in early.stderr


def test_history_p_shows_each_change_as_a_patch(sandbox: IncidentSandbox, tmp_path: Path) -> None:
    box = sandbox
    drift(box, tmp_path, "record")  # #1
    box.add_culprit()
    drift(box, tmp_path, "record")  # #2
    text = drift(box, tmp_path, "history", "decode.sh content", "-p").stdout
    # each line of the patch behind a gutter, so no text from the box starts a line
    assert "      | --- #1\n" in text and "      | +++ #2" in text
    assert f"      | +{CULPRIT}\n" in text
    assert "--- /dev/null" in text  # the first value: the whole text, as added
    assert DEMO_TOKEN not in text and "+export HF_TOKEN=[redacted:" in text
    # With --limit 1, the patch of the one value shown is still against the one before it.
    one = drift(box, tmp_path, "history", "decode.sh content", "-p", "--limit", "1").stdout
    assert f"      | +{CULPRIT}\n" in one and "--- /dev/null" not in one
    assert "1 older value" in one
    data = json.loads(
        drift(box, tmp_path, "history", "decode.sh content", "-p", "--format", "json").stdout
    )
    patch = data["data"]["facts"][0]["versions"][0]["patch"]
    assert patch[:2] == ["--- #1", "+++ #2"] and f"+{CULPRIT}" in patch
    # Without -p, no patch.
    assert "+++" not in drift(box, tmp_path, "history", "decode.sh content").stdout


# --- drift log ------------------------------------------------------------------------------


def test_log_lists_records_and_marks_newest_first(sandbox: IncidentSandbox, tmp_path: Path) -> None:
    import time

    box = sandbox
    took = []
    for _ in range(4):  # #1..#4, back to back: their interval is how long one takes
        start = time.monotonic()
        drift(box, tmp_path, "record")
        took.append(time.monotonic() - start)
    drift(box, tmp_path, "mark", "stable", "--note", "p99 fine")
    box.add_culprit()
    time.sleep(4 * max(took))  # recording stopped for a while: a gap before #5
    drift(box, tmp_path, "record")  # #5

    lines = drift(box, tmp_path, "log", "--marks").stdout.splitlines()
    assert lines[0] == "drift log: host gpu-node-7, with marks"
    body = [line for line in lines[1:] if line]
    assert [("  #5  " in b, "mark #1" in b) for b in body] == [
        (True, False),
        (False, True),
        (False, False),
        (False, False),
        (False, False),
        (False, False),
    ], body
    assert " changed of " in body[0]
    assert "no record for" in body[0] and "before it" in body[0]  # the gap
    assert "mark #1 stable: p99 fine" in body[1]
    assert "  #1  " in body[5] and "no record for" not in "".join(body[1:])
    # Without --marks, records only; --since keeps the newer ones.
    assert "mark #" not in drift(box, tmp_path, "log").stdout
    newer = drift(box, tmp_path, "log", "--since", "#4").stdout
    assert "  #4  " in newer and "  #5  " in newer and "  #3  " not in newer
    data = json.loads(drift(box, tmp_path, "log", "--marks", "--format", "json").stdout)
    entries = data["data"]["entries"]
    assert [e["record"] for e in entries] == [5, None, 4, 3, 2, 1]
    assert entries[1]["mark"]["kind"] == "stable" and entries[0]["changed"] >= 1


def test_log_on_a_terminal_goes_through_the_pager(sandbox: IncidentSandbox, tmp_path: Path) -> None:
    box = sandbox
    drift(box, tmp_path, "record")
    paged = tmp_path / "paged.txt"
    pager = tmp_path / "pager.sh"
    pager.write_text(f"#!/bin/sh\ncat > {paged}\n")
    pager.chmod(0o755)
    _screen, code = on_terminal(box, tmp_path, ["log"], PAGER=str(pager))
    assert code == 0
    assert "drift log: host gpu-node-7" in paged.read_text()
    # Piped: no pager, the text itself.
    assert "drift log: host" in drift(box, tmp_path, "log").stdout


# --- marks: list, undo, out of range, a note asked for ----------------------------------------


def test_a_wrong_stable_mark_is_undone_and_since_finds_the_cause_again(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    box = sandbox
    record(box, tmp_path, 2)  # #1, #2
    drift(box, tmp_path, "mark", "stable", "--note", "p99 fine")  # mark #1
    box.add_culprit()
    box.restart_all()
    drift(box, tmp_path, "record")  # #3: the culprit
    # Marked stable by mistake, after the change: the baseline now hides the cause.
    drift(box, tmp_path, "mark", "stable", "--note", "looked ok")  # mark #2
    drift(box, tmp_path, "record")  # #4
    hidden = json.loads(drift(box, tmp_path, "since", "--format", "json").stdout)["data"]
    assert hidden["baseline"]["snapshot"] >= 3

    out = drift(box, tmp_path, "unmark", "2").stdout
    assert out.startswith("mark #2 (stable at ") and "looked ok" in out
    data = json.loads(drift(box, tmp_path, "since", "--all", "--format", "json").stdout)["data"]
    assert data["baseline"]["snapshot"] == 2, data["baseline"]
    top = data["suspects"][0]["changes"][0]
    assert (top["subject"], top["key"]) == (f"script:{box.script('decode')}", CULPRIT_KEY)
    text = drift(box, tmp_path, "since").stdout
    assert "looked ok" not in text  # the undone mark is not a baseline, nor a mark on the way

    # Kept in the history as an undo: listed, said undone.
    listing = drift(box, tmp_path, "mark", "--list").stdout.splitlines()
    assert listing[1].startswith("#2  stable  ") and "looked ok" in listing[1]
    assert "(undone at " in listing[1]
    assert listing[2].startswith("#1  stable  ") and "undone" not in listing[2]
    marks = json.loads(drift(box, tmp_path, "mark", "--list", "--format", "json").stdout)
    assert [(m["mark"], m["undone"] is not None) for m in marks["data"]["marks"]] == [
        (2, True),
        (1, False),
    ]
    # Twice, or a mark that does not exist: one line, exit 2.
    for number in ("2", "9"):
        again = drift(box, tmp_path, "unmark", number, check=False)
        assert again.returncode == 2 and len(again.stderr.splitlines()) == 1, again.stderr
    assert "already undone" in drift(box, tmp_path, "unmark", "2", check=False).stderr


def test_a_mark_after_the_latest_record_is_warned_with_both_times(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    import time

    box = sandbox
    drift(box, tmp_path, "record")
    time.sleep(2.5)
    later = datetime.fromtimestamp(time.time() - 1, UTC).isoformat(timespec="seconds")
    result = drift(box, tmp_path, "mark", "stable", "--at", later)
    warning = result.stderr
    assert "after the latest record of host gpu-node-7 (#1 at " in warning, warning
    assert len(warning.splitlines()) == 1
    # Before the first record: warned too, naming the first record.
    early = drift(box, tmp_path, "mark", "note", "--at", "2h ago", "--note", "deploy")
    assert "before the first record" in early.stderr and "#1 at " in early.stderr
    # A mark at a recorded moment says nothing.
    assert drift(box, tmp_path, "mark", "stable", "--at", "#1").stderr == ""


def test_mark_note_asks_for_its_text_on_a_terminal_and_refuses_without_one(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    box = sandbox
    drift(box, tmp_path, "record")
    piped = drift(box, tmp_path, "mark", "note", check=False)
    assert piped.returncode == 2 and len(piped.stderr.splitlines()) == 1
    assert "--note" in piped.stderr and "Traceback" not in piped.stderr
    screen, code = on_terminal(box, tmp_path, ["mark", "note"], b"rolled back decode\n")
    assert code == 0 and "Note" in screen, screen
    marks = json.loads(drift(box, tmp_path, "mark", "--list", "--format", "json").stdout)
    assert [m["note"] for m in marks["data"]["marks"]] == ["rolled back decode"]


# --- exit status ----------------------------------------------------------------------------


def test_since_and_diff_exit_code_say_whether_anything_changed(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    box = sandbox
    record(box, tmp_path, 2)  # #1, #2
    box.add_culprit()
    drift(box, tmp_path, "record")  # #3

    changed = drift(box, tmp_path, "since", "--stable", "#2", "--exit-code", check=False)
    assert changed.returncode == 1 and CULPRIT_KEY in changed.stdout
    assert drift(box, tmp_path, "diff", "#2", "#3", "--exit-code", check=False).returncode == 1
    same = drift(box, tmp_path, "diff", "#3", "#3", "--exit-code", "--format", "json")
    assert json.loads(same.stdout)["data"]["suspects"] == []  # exit 0 (checked by drift())
    # Without --exit-code, a change still exits 0; an error stays 2.
    drift(box, tmp_path, "since", "--stable", "#2")
    bad = drift(box, tmp_path, "since", "--stable", "#99", "--exit-code", check=False)
    assert bad.returncode == 2


# --- an env file: what drift keeps of it is what was read from it -----------------------------

ENV_FILE = "/etc/serve/decode.env"
UNIT_FILE = "/etc/systemd/system/decode.service"
UNIT_TEXT = f"[Service]\nEnvironmentFile={ENV_FILE}\nExecStart=/opt/serve/decode.sh\n"


def env_file_reads_back_as_its_assignments(db_url: str, tmp: Path) -> None:
    """A unit's EnvironmentFile= is kept as the assignments read from it, each with its
    line: `drift cat` prints those, by line, and says it is not the file's text."""
    from drift.facts import Fact
    from drift.store.urls import resolve_db_url
    from drift.store.writer import HistoryWriter, now_us

    def envfile(name: str, value: str, line: int) -> Fact:
        return Fact(
            "service:decode", f"unit:envfile:{name}", value, {"file": ENV_FILE, "line": line}
        )

    unit = Fact("service:decode", f"unit:file:{UNIT_FILE}", UNIT_TEXT, {"unit": "decode.service"})
    token = Fact("service:decode", "unit:envfile:TOKEN", "hmac-sha256:0123456789abcdef", {})
    token.provenance, token.secret = {"file": ENV_FILE, "line": 5}, True
    states = [
        [envfile("TP", "8", 4), envfile("MODEL_DIR", "/models", 2), unit, token],
        [envfile("TP", "4", 4), envfile("MODEL_DIR", "/models", 2), unit, token],
        [Fact("service:decode", "pid", "42")],  # the unit no longer reads it
    ]
    with HistoryWriter.open(resolve_db_url(db_url)) as writer:
        ids = [writer.write_snapshot("env-host", now_us(), s, [], {}).snapshot_id for s in states]
    args = ["--db", db_url, "--host", "env-host"]
    old = run_drift(["cat", ENV_FILE, "--at", f"#{ids[0]}", *args], tmp)
    assert old.stdout == "MODEL_DIR=/models\nTP=8\nTOKEN=[redacted:01234567]\n"
    assert "keeps no text of it" in old.stderr and "3 assignments, by line" in old.stderr
    new = run_drift(["cat", ENV_FILE, "--at", f"#{ids[1]}", *args], tmp).stdout
    assert new == "MODEL_DIR=/models\nTP=4\nTOKEN=[redacted:01234567]\n"
    # A unit file is kept whole: it prints as it was.
    shown = run_drift(["cat", UNIT_FILE, "--at", f"#{ids[1]}", *args], tmp)
    assert shown.stdout == UNIT_TEXT and f"#{ids[1]}" in shown.stderr
    gone = run_drift(["cat", ENV_FILE, *args], tmp, check=False)
    assert gone.returncode == 2 and "read from it at other times" in gone.stderr
    never = run_drift(["cat", "/etc/serve/prefill.env", *args], tmp, check=False)
    assert never.returncode == 2 and "never recorded" in never.stderr


def test_an_env_file_reads_back_as_its_assignments(tmp_path: Path) -> None:
    env_file_reads_back_as_its_assignments(str(tmp_path / "env.db"), tmp_path)


# --- the invariant: cat --at #k is what record k saw; the patches rebuild it ------------------

texts = st.lists(st.text("ab \n=", max_size=40), min_size=1, max_size=6)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(versions=texts)
def test_cat_at_each_record_is_what_it_recorded_and_the_patches_rebuild_it(
    tmp_path_factory: pytest.TempPathFactory, versions: list[str]
) -> None:
    from drift.analysis.recorded_text import recorded_text
    from drift.analysis.views import fact_history
    from drift.facts import Fact
    from drift.store.query import History
    from drift.store.urls import resolve_db_url
    from drift.store.writer import HistoryWriter, now_us
    from drift.timespec import When

    db = resolve_db_url(str(tmp_path_factory.mktemp("cat") / "drift.db"))
    script = "/srv/serve.sh"
    with HistoryWriter.open(db) as writer:
        ids = [
            writer.write_snapshot(
                "h", now_us(), [Fact(f"script:{script}", "content", text)], [], {}
            ).snapshot_id
            for text in versions
        ]
    with History.open(db, "h") as history:
        for snapshot, text in zip(ids, versions, strict=True):
            assert recorded_text(history, script, When(snapshot=snapshot)).text == text
        pages = fact_history(history, "serve.sh content", None, patch=True).facts
        # Each patch, oldest first, applied to the text before it gives the text it made.
        built: list[str] = []
        for version in reversed(pages[0].versions):
            built = apply_patch(built, version.patch or [])
            made = recorded_text(history, script, When(snapshot=version.from_snapshot)).text
            assert built == made.splitlines()


def apply_patch(old: list[str], patch: list[str]) -> list[str]:
    """A unified diff applied to `old`'s lines (the hunks in order, as difflib writes them)."""
    out: list[str] = []
    at = 0
    for line in patch[2:]:
        if line.startswith("@@"):
            # "-a,b": the hunk's old lines start at line a; with b = 0, after line a.
            first, _, length = line.split()[1][1:].partition(",")
            begin = int(first) if length == "0" else int(first) - 1
            out += old[at:begin]
            at = begin
        elif line.startswith("-"):
            at += 1
        elif line.startswith("+"):
            out.append(line[1:])
        else:
            out.append(old[at])
            at += 1
    return out + old[at:]
