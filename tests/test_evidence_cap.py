"""On a terminal a story lists its first evidence lines and says how many more there are;
piped, with --all, and in JSON, Markdown and HTML it lists every one.

The operator's sequence: the incident's services recorded, then decode
restarted by hand from a shell whose environment holds two dozen more
variables, and recorded again: one story, "the environment decode was started
from changed", with a change per variable.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from conftest import run_drift
from test_terminal_width import SGR, on_terminal

from drift.demo import IncidentSandbox

EXTRA = [f"OPERATOR_SHELL_VAR_{i:02d}" for i in range(24)]
MORE = "more (--all or --format json)"


def restart_decode_from_a_busy_shell(box: IncidentSandbox) -> None:
    box.stop("decode")
    box.pidfile("decode").unlink(missing_ok=True)
    env = {"PATH": os.environ["PATH"], **{name: "1" for name in EXTRA}}
    proc = subprocess.Popen(
        ["bash", str(box.script("decode"))],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    box.procs["decode"] = proc  # stopped with the others
    deadline = time.monotonic() + 10
    while (
        box.pid("decode") != proc.pid
        or b"--model-path" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    ):
        assert time.monotonic() < deadline, "decode did not start"
        time.sleep(0.02)


def story_lines(text: str, title: str) -> list[str]:
    """The lines of the suspect whose title starts so, up to the next suspect or section."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line and "[" in line)
    out = []
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith("Timeline"):
            break
        out.append(line)
    return out


def test_a_long_story_is_cut_on_the_terminal_only(sandbox: IncidentSandbox, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)
    restart_decode_from_a_busy_shell(sandbox)
    run_drift(["record", *cfg], tmp_path)
    since = ["since", "--stable", "#2", *cfg]
    data = json.loads(run_drift([*since, "--format", "json"], tmp_path).stdout)["data"]
    story = next(
        s for s in data["suspects"] if any(c["key"] == f"env:{EXTRA[0]}" for c in s["changes"])
    )
    total = len(story["changes"])
    assert total > len(EXTRA)  # JSON keeps every change
    title = story["title"][:40]

    screen = SGR.sub("", on_terminal(since, tmp_path, 250))
    shown = story_lines(screen, title)
    evidence = [line for line in shown if line.lstrip().startswith(("* ", "- "))]
    assert len(evidence) == 10
    assert f"      ... and {total - 10} {MORE}" in shown

    # --all on the terminal, and piped output, list every change.
    everything = SGR.sub("", on_terminal([*since, "--all"], tmp_path, 250))
    assert MORE not in everything
    piped = run_drift(since, tmp_path).stdout
    assert MORE not in piped
    for text in (everything, piped):
        assert all(f"env:{name}" in text for name in EXTRA)
    md = run_drift([*since, "--format", "md"], tmp_path).stdout
    assert all(f"env:{name}" in md for name in EXTRA)
