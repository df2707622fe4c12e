"""Where the history is: `db` in drift.toml, shared by the timer and the person at the terminal.

The shipped systemd unit wrote /var/lib/drift/drift.db while `drift since
--config ...` by hand looked in ~/.local/state, said "no drift database here
yet", and following its hint started a second history. Now the config says
where the history is, for every command that reads it; --db and $DRIFT_DB
still override it.
"""

from __future__ import annotations

import configparser
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import DRIFT, drift_env

from drift.config import load_config

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def unit_service() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string((SAMPLES / "systemd" / "drift-record.service").read_text())
    return parser["Service"]


def run(
    args: list[str], cwd: Path, env: dict[str, str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [DRIFT, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )
    if check:
        assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


def test_the_shipped_unit_and_a_hand_run_read_the_same_history(tmp_path: Path) -> None:
    service = unit_service()
    exec_start = shlex.split(service["ExecStart"])
    assert exec_start[0] == "/usr/local/bin/drift" and exec_start[1] == "record"
    # Nothing in the unit moves the history away from the config's `db`.
    assert "--db" not in exec_start
    assert "DRIFT_DB" not in service.get("Environment", "")
    assert "XDG_STATE_HOME" not in service.get("Environment", "")
    sample = load_config(SAMPLES / "sglang-pd" / "drift.toml")
    assert sample.db == "/var/lib/drift/drift.db"
    assert Path(sample.db).parent == Path(service["ReadWritePaths"])  # the unit may write it

    # The same deployment in a sandbox: /etc/drift/drift.toml with `db` relative to it.
    etc = tmp_path / "etc" / "drift"
    etc.mkdir(parents=True)
    (tmp_path / "knob").write_text("256\n")
    config_path = etc / "drift.toml"
    config_path.write_text(
        'host = "gpu-node-7"\ndb = "../../var/lib/drift/drift.db"\n'
        f'[[commands]]\nname = "knob"\nrun = "cat {tmp_path}/knob"\n'
    )
    args = [str(config_path) if a == "/etc/drift/drift.toml" else a for a in exec_start[1:]]
    as_unit = {**drift_env(tmp_path), "XDG_STATE_HOME": str(tmp_path / "root-state")}
    run(args, tmp_path, as_unit)
    (tmp_path / "knob").write_text("512\n")
    run(args, tmp_path, as_unit)
    history = tmp_path / "var" / "lib" / "drift" / "drift.db"
    assert history.exists() and (history.parent / "secret.key").exists()

    # By hand, as someone else, from elsewhere: the same history, nothing new started.
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    by_hand = {**drift_env(tmp_path), "XDG_STATE_HOME": str(tmp_path / "user-state")}
    cfg = ["--config", str(config_path)]
    out = run(["since", "--stable", "#1", *cfg], elsewhere, by_hand).stdout
    assert "drift since: host gpu-node-7" in out and "command knob: output modified" in out
    assert "512" in run(["show", "knob", *cfg], elsewhere, by_hand).stdout
    assert run(["mark", "note", "--note", "checked", *cfg], elsewhere, by_hand).returncode == 0
    assert f"{history}: schema" in run(["db", "current", *cfg], elsewhere, by_hand).stdout
    assert not (tmp_path / "user-state").exists() and not (tmp_path / "root-state").exists()


@pytest.fixture
def four_databases(tmp_path: Path) -> dict[str, Path]:
    """A history at each place drift may look: --db, $DRIFT_DB, the config's db, the default."""
    places = {
        "flag": tmp_path / "flag.db",
        "env": tmp_path / "env.db",
        "config": tmp_path / "conf" / "config.db",
        "default": tmp_path / "xdg-state" / "drift" / "drift.db",
    }
    for path in places.values():
        run(["db", "upgrade", "--db", str(path)], tmp_path, drift_env(tmp_path))
    (tmp_path / "conf" / "drift.toml").write_text('db = "config.db"\n')
    return places


def test_flag_then_env_then_config_then_default(tmp_path: Path, four_databases: dict) -> None:
    def used(args: list[str], env_db: str | None = None) -> str:
        env = drift_env(tmp_path)
        if env_db:
            env["DRIFT_DB"] = env_db
        return run(["db", "current", *args], tmp_path, env).stdout.split(": schema")[0]

    cfg = ["--config", str(tmp_path / "conf" / "drift.toml")]
    places = {k: str(v) for k, v in four_databases.items()}
    assert used([*cfg, "--db", places["flag"]], places["env"]) == places["flag"]
    assert used(cfg, places["env"]) == places["env"]
    assert used(cfg) == places["config"]
    assert used([]) == places["default"]  # no drift.toml here or in /etc/drift


def test_no_database_says_where_it_looked_and_where_the_config_keeps_it(
    tmp_path: Path, four_databases: dict
) -> None:
    config_path = tmp_path / "conf" / "drift.toml"
    missing = tmp_path / "typo.db"
    result = run(
        ["since", "--config", str(config_path), "--db", str(missing)],
        tmp_path,
        drift_env(tmp_path),
        check=False,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"drift: {missing}: no drift database here yet (from --db); {config_path} keeps its "
        f"history in {four_databases['config']}: drop --db to use it\n"
    )
    assert not missing.exists()

    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "drift.toml").write_text('host = "h"\n')
    env = {**drift_env(tmp_path), "XDG_STATE_HOME": str(bare / "state")}
    result = run(["history", "x"], bare, env, check=False)
    assert result.returncode == 2
    default = bare / "state" / "drift" / "drift.db"
    assert result.stderr.startswith(
        f"drift: {default}: no drift database here yet (the default; drift.toml sets no db): "
    )


def test_a_password_in_the_config_url_is_never_printed(tmp_path: Path) -> None:
    # Nothing listens on port 1: the connection fails, and the error names the database.
    config_path = tmp_path / "drift.toml"
    config_path.write_text('host = "h"\ndb = "postgresql://drift:s3cret-pw@127.0.0.1:1/drift"\n')
    for args in (["since"], ["record"], ["db", "current"], ["init"]):
        result = run([*args, "--config", str(config_path)], tmp_path, drift_env(tmp_path), False)
        if args == ["record"]:
            # A record is kept in the host's spool while the database is out of reach.
            assert result.returncode == 0 and "database out of reach" in result.stderr
        else:
            assert result.returncode != 0
        assert "s3cret-pw" not in result.stdout + result.stderr
        assert "127.0.0.1" in result.stderr and "Traceback" not in result.stderr
