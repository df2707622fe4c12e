"""The command line as a user meets it: help, bad input, and what stays unimported."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DRIFT, drift_env, run_drift, start_drift

from drift.cli import cli

COMMANDS = [
    "init",
    "record",
    "since",
    "mark",
    "show",
    "history",
    "demo",
    "db upgrade",
    "db current",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_that_teaches(command: str) -> None:
    result = CliRunner().invoke(cli, [*command.split(), "--help"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "Usage: " in result.output
    summary = result.output.split("\n\n")[1].strip()
    assert len(summary) > 20, f"{command} --help has no real description"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A history of one snapshot; tests only read it."""
    tmp_path = tmp_path_factory.mktemp("recorded")
    config = tmp_path / "drift.toml"
    config.write_text('host = "cli"\n[[commands]]\nname = "hello"\nrun = "echo hello"\n')
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    run_drift(["record", *cfg], tmp_path)
    return cfg


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["since", "--stable", "tea time"], "cannot understand time 'tea time'"),
        (["since", "--stable", "2001-01-01T00:00Z"], "is before the first record"),
        (["since", "--stable", "#99"], "no snapshot #99"),
        (["show", "--at", "#0"], "cannot understand time '#0'"),
        (["since", "--stable", "#1", "--until", "25:00"], "cannot understand time '25:00'"),
    ],
)
def test_bad_when_is_one_line_and_exit_2(
    recorded: list[str], tmp_path: Path, args: list[str], message: str
) -> None:
    result = run_drift([*args, *recorded], tmp_path, check=False)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("drift: ") and result.stderr.count("\n") == 1
    assert message in result.stderr


def test_reading_a_host_never_recorded_names_the_recorded_ones(
    recorded: list[str], tmp_path: Path
) -> None:
    result = run_drift(
        ["since", "--stable", "#1", "--host", "gpu-node-9", *recorded], tmp_path, check=False
    )
    assert result.returncode == 2
    assert result.stderr.startswith('drift: no host "gpu-node-9" on record in ')
    assert result.stderr.endswith("; known: cli\n")


def test_reading_a_database_that_does_not_exist_says_how_to_start(tmp_path: Path) -> None:
    result = run_drift(["show", "--db", str(tmp_path / "none.db")], tmp_path, check=False)
    assert result.returncode == 2
    assert "no drift database here yet" in result.stderr
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["prune", "--keep", "90d"],
        ["prune", "--keep", "90d", "--yes"],
        ["prune", "--keep", "90d", "--dry-run"],
        ["since"],
        ["show"],
        ["history", "x"],
        ["diff", "#1", "#2"],
        ["report", "-o", "r.html"],
        ["mark", "stable"],
        ["db", "current"],
        ["compare", "--fleet"],
    ],
    ids=" ".join,
)
def test_every_command_on_a_database_that_does_not_exist_is_one_line(
    tmp_path: Path, args: list[str]
) -> None:
    config = tmp_path / "drift.toml"
    config.write_text('host = "cli"\n')
    db = tmp_path / "none.db"
    result = run_drift([*args, "--config", str(config), "--db", str(db)], tmp_path, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("drift: ") and result.stderr.count("\n") == 1, result.stderr
    assert f"{db}: no drift database here yet" in result.stderr
    assert not db.exists()


def test_record_without_any_config_says_how_to_make_one(tmp_path: Path) -> None:
    result = run_drift(["record", "--db", str(tmp_path / "d.db")], tmp_path, check=False)
    assert result.returncode == 2
    assert "drift init" in result.stderr
    assert not (tmp_path / "d.db").exists()


def test_init_writes_a_starter_config_that_records(tmp_path: Path) -> None:
    out = run_drift(["init", "--db", str(tmp_path / "d.db")], tmp_path).stdout
    assert "wrote a starter config" in out and (tmp_path / "drift.toml").exists()
    again = run_drift(["init", "--db", str(tmp_path / "d.db")], tmp_path).stdout
    assert "wrote" not in again and "already at schema" in again
    assert run_drift(["record", "--db", str(tmp_path / "d.db")], tmp_path).stdout.startswith(
        "snapshot #1: 0 facts"
    )


def test_init_with_a_database_names_it_in_the_starter_config(tmp_path: Path) -> None:
    # `drift init --db PATH` then its own hint `drift record`: the record lands in PATH, not
    # in a second history (and key) in the default state folder.
    (tmp_path / "elsewhere").mkdir()
    out = run_drift(["init", "--db", "elsewhere/x.db"], tmp_path).stdout
    db = tmp_path / "elsewhere" / "x.db"
    assert f'db = "{db}"' in (tmp_path / "drift.toml").read_text()
    assert out.splitlines()[-1].startswith("next: drift record ")
    assert run_drift(["record"], tmp_path).stdout.startswith("snapshot #1: 0 facts")
    shown = json.loads(run_drift(["show", "--db", str(db), "--format", "json"], tmp_path).stdout)
    assert shown["data"]["snapshot"]["snapshot"] == 1
    assert not (tmp_path / "xdg-state" / "drift").exists()


def test_init_with_a_database_its_config_does_not_name_says_the_exact_next_command(
    tmp_path: Path,
) -> None:
    (tmp_path / "drift.toml").write_text('host = "h"\n')
    out = run_drift(["init", "--db", str(tmp_path / "x.db")], tmp_path).stdout
    assert out.splitlines()[-1].startswith(f"next: drift record --db {tmp_path / 'x.db'}   ")
    again = run_drift(["init", "--db", str(tmp_path / "x.db"), "--config", "drift.toml"], tmp_path)
    assert f"next: drift record --config drift.toml --db {tmp_path / 'x.db'}" in again.stdout


def imported_modules(args: list[str], tmp_path: Path) -> set[str]:
    """Top-level modules a real `drift ARGS` process imported (python -X importtime)."""
    code = "import sys; from drift.cli import main; sys.argv[0] = 'drift'; main()"
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args],
        capture_output=True,
        text=True,
        env=drift_env(tmp_path),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [
        line.split("|")[-1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    ]
    return {name.split(".")[0] for name in lines}


def test_record_imports_nothing_heavy_it_does_not_need(tmp_path: Path) -> None:
    config = tmp_path / "drift.toml"
    config.write_text('host = "lazy"\n[[commands]]\nname = "hello"\nrun = "echo hello"\n')
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    run_drift(["record", *cfg], tmp_path)  # the first record creates the schema (Alembic)
    modules = imported_modules(["record", *cfg], tmp_path)
    assert "drift" in modules and "psutil" not in modules
    assert not modules & {"alembic", "sqlalchemy", "jinja2", "deepdiff", "git", "mako"}

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    config.write_text(config.read_text() + f'[[repos]]\npath = "{repo}"\n')
    assert "git" in imported_modules(["record", *cfg], tmp_path)


@pytest.mark.parametrize(
    "args",
    [
        ["since", "--stable", "#1"],
        ["diff", "#1", "#2"],
        ["report", "--stable", "#1", "-o", "r.md"],
        ["show", "hello"],
        ["history", "hello"],
        ["mark", "note", "--note", "looked"],
    ],
    ids=lambda a: a[0],
)
def test_read_commands_import_no_sqlalchemy(args: list[str], tmp_path: Path) -> None:
    """Reads speak DB-API as `record` does: SQLAlchemy and Alembic are for migrations only."""
    config = tmp_path / "drift.toml"
    config.write_text('host = "lazy"\n[[commands]]\nname = "hello"\nrun = "date +%s%N"\n')
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)
    modules = imported_modules([*args, *cfg], tmp_path)
    assert "drift" in modules
    assert not modules & {"alembic", "sqlalchemy", "asyncio", "ssl", "mako"}


def test_help_imports_only_click(tmp_path: Path) -> None:
    modules = imported_modules(["--help"], tmp_path)
    assert not modules & {"alembic", "sqlalchemy", "jinja2", "deepdiff", "git", "psutil", "sqlite3"}


def test_readme_mentions_every_command_and_option() -> None:
    import click

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    missing = []

    def visit(command: click.Command, path: list[str]) -> None:
        if path and f"drift {' '.join(path)}" not in readme:
            missing.append(f"drift {' '.join(path)}")
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-") and not re.search(
                    rf"(?<![\w-]){re.escape(opt)}(?![\w-])", readme
                ):
                    missing.append(f"{' '.join(path) or 'drift'} {opt}")
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                visit(sub, [*path, name])

    visit(cli, [])
    assert missing == []


def test_templates_dir_in_drift_toml_overrides_a_template(tmp_path: Path) -> None:
    mine = tmp_path / "my-templates"
    mine.mkdir()
    (mine / "since.txt.j2").write_text(
        "ON CALL VIEW {{ host }}: {{ total_suspects }} suspect(s)\n"
        "{% for s in suspects %}{{ s.rank }} {{ s.title | printable }}\n{% endfor %}"
    )
    config = tmp_path / "drift.toml"
    config.write_text(
        f'host = "tpl"\ntemplates_dir = "{mine}"\n'
        f'[[commands]]\nname = "v"\nrun = "cat {tmp_path}/v"\n'
    )
    (tmp_path / "v").write_text("1\n")
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    run_drift(["record", *cfg], tmp_path)
    (tmp_path / "v").write_text("2\n")
    run_drift(["record", *cfg], tmp_path)
    out = run_drift(["since", "--stable", "#1", *cfg], tmp_path).stdout
    assert out.startswith("ON CALL VIEW tpl: 1 suspect(s)\n1 command v: output modified")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"{% if suspects %}\n{{ host }\n", "2: template syntax error: unexpected '}'"),
        (b"ok\n{{ on_call_rota }}\n", "2: template error: 'on_call_rota' is undefined"),
        (b"caf\xe9 {{ host }}\n", " template not UTF-8 (byte 0xe9 at offset 3)"),
    ],
)
def test_a_broken_template_in_templates_dir_is_one_line_and_writes_nothing(
    tmp_path: Path, text: bytes, problem: str
) -> None:
    mine = tmp_path / "my-templates"
    mine.mkdir()
    for name in ("since.txt.j2", "report.md.j2"):
        (mine / name).write_bytes(text)
    config = tmp_path / "drift.toml"
    config.write_text(
        f'host = "tpl"\ntemplates_dir = "{mine}"\n[[commands]]\nname = "v"\nrun = "echo 1"\n'
    )
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    run_drift(["record", *cfg], tmp_path, timeout=60)
    run_drift(["record", *cfg], tmp_path, timeout=60)
    for args, name in (
        (["since", "--stable", "#1"], "since.txt.j2"),
        (["report", "--stable", "#1", "-o", str(tmp_path / "pm.md")], "report.md.j2"),
    ):
        result = run_drift([*args, *cfg], tmp_path, check=False, timeout=60)
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        assert result.stderr == f"drift: {mine / name}:{problem}\n"
    assert not (tmp_path / "pm.md").exists()


def test_history_that_matches_nothing_is_refused_as_a_typo(
    recorded: list[str], tmp_path: Path
) -> None:
    missed = run_drift(["history", "NOPE", *recorded], tmp_path, check=False)
    assert (missed.returncode, missed.stdout) == (2, "")
    assert missed.stderr.startswith('drift: no recorded fact of host cli matches "NOPE"')
    assert "`drift show` lists every fact" in missed.stderr and missed.stderr.count("\n") == 1
    as_json = run_drift(["history", "NOPE", "--format", "json", *recorded], tmp_path, check=False)
    assert as_json.returncode == 2 and '"data": null' in as_json.stdout
    assert run_drift(["history", "hello", *recorded], tmp_path).returncode == 0
    help_text = " ".join(run_drift(["history", "--help"], tmp_path).stdout.split())
    assert "Exit 2 when no recorded fact matches" in help_text


def test_mark_without_a_history_refuses_and_creates_nothing(tmp_path: Path) -> None:
    result = run_drift(["mark", "stable", "--note", "p99 ok"], tmp_path, check=False)
    assert result.returncode == 2 and result.stdout == ""
    default = tmp_path / "xdg-state" / "drift" / "drift.db"
    assert result.stderr.startswith(f"drift: {default}: no drift database here yet (the default")
    assert "run `drift record` first" in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "xdg-state").exists()


def test_mark_for_a_host_never_recorded_refuses(recorded: list[str], tmp_path: Path) -> None:
    result = run_drift(["mark", "stable", "--host", "gpu-node-9", *recorded], tmp_path, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith('drift: no host "gpu-node-9" on record in ')
    assert result.stderr.endswith("; known: cli\n")


def test_reading_during_the_first_record_says_one_is_running(tmp_path: Path) -> None:
    config = tmp_path / "drift.toml"
    config.write_text('host = "first"\n[[commands]]\nname = "slow"\nrun = "sleep 4"\n')
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    first = start_drift(["record", *cfg], tmp_path)
    try:
        deadline = time.monotonic() + 20
        while True:  # until the record has created the database and holds its lock
            result = run_drift(["since", "--stable", "#1", *cfg], tmp_path, check=False)
            if "is running now" in result.stderr or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert result.returncode == 3 and result.stdout == ""
        assert result.stderr == (
            f"drift: no history for host 'first' in {tmp_path / 'd.db'} yet: its first "
            "`drift record` is running now; try again when it has finished\n"
        )
    finally:
        out, _err = first.communicate(timeout=30)
    assert out.startswith("snapshot #1")
    after = run_drift(["since", "--stable", "#1", *cfg], tmp_path)
    assert "trust     0 after the baseline" in after.stdout


# --- Errors inside the JSON envelope ---------------------------------------------------


def error_envelope(result: subprocess.CompletedProcess[str], command: str) -> dict:
    """The envelope a failed JSON run printed, checked against its stderr line and exit code."""
    assert result.stderr.startswith("drift: ") and result.stderr.count("\n") == 1, result.stderr
    envelope = json.loads(result.stdout)
    assert envelope == {
        "drift_result_version": 1,
        "command": command,
        "data": None,
        "errors": [
            {
                "level": "error",
                "message": result.stderr.removeprefix("drift: ").rstrip("\n"),
                "exit_code": result.returncode,
            }
        ],
    }
    return envelope


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["since", "--stable", "tea time", "--format", "json"], "cannot understand time"),
        # --format after the bad WHEN on the command line: still known to be JSON.
        (["since", "--until", "25:00", "--stable", "#1", "--format", "json"], "'25:00'"),
        (["since", "--stable", "#99", "--format", "json"], "no snapshot #99"),
        (
            ["since", "--stable", "#1", "--host", "gpu-node-9", "--format", "json"],
            'no host "gpu-node-9" on record',
        ),
        (["diff", "#1", "tea time", "--format", "json"], "cannot understand time"),
        (["show", "--at", "#0", "--format", "json"], "snapshot numbers start at #1"),
        (["show", "--at", "2001-01-01T00:00Z", "--format", "json"], "before the first record"),
        (
            ["history", "hello", "--host", "gpu-node-9", "--format", "json"],
            'no host "gpu-node-9" on record',
        ),
        (["report", "--stable", "#99", "-o", "pm.json"], "no snapshot #99"),
        (["report", "--stable", "#99", "-o", "pm.html", "--format", "json"], "no snapshot #99"),
    ],
)
def test_a_json_run_that_fails_prints_an_envelope_with_the_error(
    recorded: list[str], tmp_path: Path, args: list[str], message: str
) -> None:
    result = run_drift([*args, *recorded], tmp_path, check=False)
    assert result.returncode == 2
    envelope = error_envelope(result, args[0])
    assert message in envelope["errors"][0]["message"]
    assert not (tmp_path / "pm.json").exists() and not (tmp_path / "pm.html").exists()


def test_without_json_a_failure_prints_nothing_on_stdout(
    recorded: list[str], tmp_path: Path
) -> None:
    for args in (["since", "--stable", "#99"], ["report", "--stable", "#99", "-o", "pm.md"]):
        result = run_drift([*args, *recorded], tmp_path, check=False)
        assert (result.returncode, result.stdout) == (2, "")


def test_no_database_and_a_bad_config_are_json_errors_too(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    result = run_drift(["since", "--format", "json", "--db", str(missing)], tmp_path, check=False)
    assert result.returncode == 2
    assert (
        "no drift database here yet (from --db)"
        in error_envelope(result, "since")["errors"][0]["message"]
    )
    broken = tmp_path / "drift.toml"
    broken.write_text('host = "h"\n[[services]\n')
    result = run_drift(["show", "--format", "json", "--config", str(broken)], tmp_path, check=False)
    assert result.returncode == 2
    assert "TOML syntax error" in error_envelope(result, "show")["errors"][0]["message"]


def test_a_result_s_warnings_are_in_its_envelope_and_on_stderr(tmp_path: Path) -> None:
    config = tmp_path / "drift.toml"
    config.write_text(f'host = "k"\n[[commands]]\nname = "v"\nrun = "cat {tmp_path}/v"\n')
    (tmp_path / "v").write_text("1\n")
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    run_drift(["record", *cfg], tmp_path)
    (tmp_path / "secret.key").chmod(0o644)  # a key others can read: a warning on every secret
    (tmp_path / "v").write_text("2\n")
    assert run_drift(["record", *cfg], tmp_path, check=False).returncode == 4

    result = run_drift(["since", "--stable", "#1", "--format", "json", *cfg], tmp_path)
    envelope = json.loads(result.stdout)
    warnings = envelope["data"]["trust"]["warnings"]
    assert len(warnings) == 1 and "can be read by other users" in warnings[0]
    assert envelope["errors"] == [{"level": "warning", "message": warnings[0], "exit_code": None}]
    assert result.stderr == f"drift: warning: {warnings[0]}\n"

    run_drift(["report", "--stable", "#1", "-o", "pm.json", *cfg], tmp_path)
    written = json.loads((tmp_path / "pm.json").read_text())
    assert written["command"] == "report" and written["errors"] == envelope["errors"]
    text = run_drift(["since", "--stable", "#1", *cfg], tmp_path)
    assert text.stderr == "" and f"warning   {warnings[0]}" in text.stdout  # as today


# --- $DRIFT_CONFIG and $DRIFT_DB through click ------------------------------------------


def test_environment_variables_are_named_in_help_and_in_messages(tmp_path: Path) -> None:
    help_text = " ".join(run_drift(["since", "--help"], tmp_path).stdout.split())
    assert "[env var: DRIFT_CONFIG]" in help_text and "[env var: DRIFT_DB]" in help_text

    env = {**drift_env(tmp_path), "DRIFT_DB": str(tmp_path / "env.db")}
    result = subprocess.run(
        [DRIFT, "show"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"drift: {tmp_path / 'env.db'}: no drift database here yet (from $DRIFT_DB): "
    )
    flag = run_drift(["show", "--db", str(tmp_path / "flag.db")], tmp_path, check=False)
    assert "(from --db)" in flag.stderr

    env = {**drift_env(tmp_path), "DRIFT_CONFIG": str(tmp_path / "gone.toml")}
    for args in (["show"], ["init"]):
        result = subprocess.run(
            [DRIFT, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
        )
        assert (result.returncode, result.stderr) == (
            2,
            f"drift: {tmp_path / 'gone.toml'}: config file not found (from $DRIFT_CONFIG)\n",
        )
    assert not (tmp_path / "drift.toml").exists()


# --- report's file, mark's #N, WHEN everywhere -------------------------------------------


@pytest.mark.parametrize(
    ("where", "why"),
    [("missing/pm.html", "No such file or directory"), ("file/pm.html", "Not a directory")],
)
def test_a_report_that_cannot_be_written_is_one_line_and_leaves_nothing(
    recorded: list[str], tmp_path: Path, where: str, why: str
) -> None:
    (tmp_path / "file").write_text("a regular file, not a folder\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    target = tmp_path / where
    args = ["report", "--stable", "#1", "-o", str(target), *recorded]
    result = run_drift(args, tmp_path, check=False)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"drift: {target}: cannot write: {why}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_report_replaces_its_file_whole_and_leaves_no_temporary_file(
    recorded: list[str], tmp_path: Path
) -> None:
    target = tmp_path / "pm.md"
    target.write_text("an older report\n")
    out = run_drift(["report", "--stable", "#1", "-o", str(target), *recorded], tmp_path).stdout
    assert out == f"wrote {target} (md, 0 suspects)\n"
    assert target.read_text().startswith("# drift report: `cli`")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_mark_at_a_snapshot_number_is_the_moment_it_was_taken(tmp_path: Path) -> None:
    config = tmp_path / "drift.toml"
    config.write_text('host = "m"\n[[commands]]\nname = "hello"\nrun = "echo hello"\n')
    cfg = ["--config", str(config), "--db", str(tmp_path / "d.db")]
    run_drift(["record", *cfg], tmp_path)
    taken = json.loads(run_drift(["show", "--at", "#1", "--format", "json", *cfg], tmp_path).stdout)
    out = run_drift(["mark", "stable", "--at", "#1", *cfg], tmp_path).stdout
    assert out == f"mark #1: stable at {taken['data']['snapshot']['local']} for host m\n"
    missing = run_drift(["mark", "stable", "--at", "#7", *cfg], tmp_path, check=False)
    assert (missing.returncode, missing.stderr) == (
        2,
        "drift: --at #7: no snapshot #7 for host 'm'\n",
    )


@pytest.mark.parametrize("command", [["mark", "stable"], ["show"]])
def test_a_time_in_the_future_is_refused_not_taken_as_the_latest_record(
    recorded: list[str], tmp_path: Path, command: list[str]
) -> None:
    future = (datetime.now(UTC) + timedelta(days=400)).strftime("%Y-%m-%dT%H:%M:%SZ")
    refused = run_drift([*command, "--at", future, *recorded], tmp_path, check=False)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"drift: --at {future} (")
    assert "is in the future (now is " in refused.stderr
    assert refused.stderr.count("\n") == 1
    # A moment that has happened is still taken; a refused mark left nothing behind.
    taken = run_drift([*command, "--at", "now", *recorded], tmp_path).stdout
    if command[0] == "mark":
        assert taken.startswith("mark #1: stable at ")


@pytest.mark.parametrize(
    "args",
    [
        ["diff", "tea time", "#1"],
        ["diff", "#1", "tea time"],
        ["mark", "note", "--at", "tea time"],
        ["report", "--until", "tea time", "-o", "pm.html"],
    ],
)
def test_every_when_is_read_the_same_way(
    recorded: list[str], tmp_path: Path, args: list[str]
) -> None:
    result = run_drift([*args, *recorded], tmp_path, check=False)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "drift: cannot understand time 'tea time': use 12:00, noon, yesterday 12:00, 2h ago, "
        "an ISO 8601 time, or #57\n"
    )
