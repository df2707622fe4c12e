"""A report's Regenerate command makes the same report later, after more has been recorded.

It used to repeat the command as typed: without --stable, --until or
--config, run later it compared against whatever baseline and latest record
there were by then (15 suspects instead of 2).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from conftest import DRIFT, drift_env, run_drift
from investigations import baseline, investigation, snapshot

from drift.render.regenerate import regenerate_command
from drift.store.urls import resolve_db_url


def knobs(tmp_path: Path, **values: str) -> None:
    for name, value in values.items():
        (tmp_path / name).write_text(value + "\n")


def regenerate_line(text: str) -> str:
    """The command under the report's Regenerate heading (Markdown or HTML)."""
    if "## Regenerate" in text:
        block = text.split("## Regenerate", 1)[1]
        return re.search(r"```sh\n(.+)\n```", block).group(1)  # type: ignore[union-attr]
    import html

    match = re.search(r'id="regenerate">.*?<code>(.+?)</code>', text, re.S)
    assert match
    return html.unescape(match.group(1))


def suspects(markdown: str) -> str:
    """The Suspects section of a Markdown report: titles, reasons, scores, evidence."""
    return markdown.split("## Suspects", 1)[1].split("\n## ", 1)[0]


def run_line(line: str, cwd: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run a Regenerate command as a user would paste it, from another folder."""
    args = shlex.split(line)
    assert args[0] == "drift"
    result = subprocess.run(
        [DRIFT, *args[1:]], capture_output=True, text=True, env=drift_env(tmp_path), cwd=cwd
    )
    assert result.returncode == 0, result.stderr
    return result


def test_the_regenerate_command_gives_the_same_suspects_later(tmp_path: Path) -> None:
    conf = tmp_path / "etc"
    conf.mkdir()
    config_path = conf / "drift.toml"
    config_path.write_text(
        'host = "gpu-node-7"\ndb = "drift.db"\n'
        + "".join(
            f'[[commands]]\nname = "{name}"\nrun = "cat {tmp_path}/{name}"\n'
            for name in ("ctas", "graphs", "driver")
        )
    )
    cfg = ["--config", str(config_path)]
    knobs(tmp_path, ctas="256", graphs="96", driver="575")
    run_drift(["record", *cfg], tmp_path)  # #1
    run_drift(["mark", "stable", "--note", "p99 fine", *cfg], tmp_path)
    knobs(tmp_path, ctas="512", graphs="128")
    run_drift(["record", *cfg], tmp_path)  # #2: the incident, two suspects

    report = tmp_path / "postmortem.md"
    run_drift(["report", "-o", str(report), *cfg], tmp_path)
    first = report.read_text()
    line = regenerate_line(first)
    assert line.startswith(f"drift report -o {report} --stable '#1' --until '#2' ")
    assert f"--host gpu-node-7 --config {config_path}" in line
    assert "--db" not in line  # the config says where the history is
    since_md = run_drift(["since", "--format", "md", *cfg], tmp_path).stdout
    since_line = regenerate_line(since_md)
    assert since_line.startswith("drift since --stable '#1' --until '#2' --format md ")
    html_report = tmp_path / "postmortem.html"
    run_drift(["report", "-o", str(html_report), "--top", "1", *cfg], tmp_path)
    html_line = regenerate_line(html_report.read_text())
    assert html_line.endswith(f"--config {config_path} --top 1")

    # Later: more changes, a new stable mark, more records.
    knobs(tmp_path, driver="580")
    run_drift(["record", *cfg], tmp_path)  # #3
    run_drift(["mark", "stable", *cfg], tmp_path)
    knobs(tmp_path, ctas="1024")
    run_drift(["record", *cfg], tmp_path)  # #4
    # The command as typed now says something else ...
    assert suspects(run_drift(["since", "--format", "md", *cfg], tmp_path).stdout) != suspects(
        first
    )
    # ... the Regenerate command, pasted from another folder, gives the same suspects.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report.unlink()
    run_line(line, elsewhere, tmp_path)
    again = report.read_text()
    assert suspects(again) == suspects(first)
    assert suspects(first).count("\n### ") == 2
    assert regenerate_line(again) == line
    assert suspects(run_line(since_line, elsewhere, tmp_path).stdout) == suspects(since_md)
    run_line(html_line, elsewhere, tmp_path)
    assert regenerate_line(html_report.read_text()) == html_line


def test_a_given_database_is_named_and_its_password_dropped() -> None:
    found = investigation([], baseline=baseline(5), current=snapshot(6), host="gpu-node-7")
    db = resolve_db_url("postgresql://drift:s3cret@db-host:5432/drift?sslmode=require")
    line = regenerate_command("diff", found, {"service": "decode"}, db=db.public())
    assert line == (
        "drift diff '#5' '#6' --host gpu-node-7 "
        "--db 'postgresql://drift@db-host:5432/drift?sslmode=require' --service decode"
    )
    for url in (
        "postgresql://drift:s3cret@db-host/drift",
        "postgresql://drift@db-host/drift?password=s3cret&sslmode=require",
        "postgres://:s3cret@db-host/drift",
    ):
        db = resolve_db_url(url)
        assert "s3cret" not in db.public() and "s3cret" not in db.display()
    assert resolve_db_url("postgresql://:s3cret@db-host/drift").public() == (
        "postgresql://db-host/drift"
    )
