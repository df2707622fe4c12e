"""Incidents that go through a serve script's expansions, sourced files and arrays.

Each test runs a real serve script under bash (a pidfile, then ``exec`` of a
long-lived Python that holds the environment and command line bash gave
it), records a stable baseline, makes one edit an operator would make,
restarts the service and records again. `drift since` must put the edited
line first, live in the restarted process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import changes_by_fact, run_drift

SLEEPER = "import time; time.sleep(600)"


class Service:
    """One service: a serve script in its own folder, started by bash like systemd would."""

    def __init__(self, root: Path, script: str, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.script = root / "decode.sh"
        self.pidfile = root / "decode.pid"
        self.env = env or {}
        self.args: tuple[str, ...] = ()  # what starts it gives the script (ExecStart= options)
        self.proc: subprocess.Popen[bytes] | None = None
        self.write(script)
        (root / "drift.toml").write_text(
            f'host = "node"\n[[services]]\nname = "decode"\npidfile = "{self.pidfile}"\n'
            f'script = "{self.script}"\n'
        )

    def write(self, script: str) -> None:
        text = textwrap.dedent(script).replace("PIDFILE", str(self.pidfile))
        self.script.write_text(text.replace("SLEEPER", f"{sys.executable} -c '{SLEEPER}'"))

    def line_of(self, needle: str) -> int:
        lines = self.script.read_text().splitlines()
        return next(i for i, line in enumerate(lines, 1) if needle in line)

    def start(self) -> int:
        self.pidfile.unlink(missing_ok=True)
        env = {"PATH": os.environ["PATH"], "HOME": str(self.root), "LANG": "C.UTF-8", **self.env}
        self.proc = subprocess.Popen(
            ["bash", str(self.script), *self.args],
            cwd=self.root,
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            cmdline = Path(f"/proc/{self.proc.pid}/cmdline")
            if self.pidfile.exists() and b"time.sleep" in cmdline.read_bytes():
                return self.proc.pid
            time.sleep(0.01)
        raise RuntimeError("the service did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        time.sleep(0.02)  # a new start time, as a real restart has
        self.start()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    created: list[Service] = []

    def make(script: str, env: dict[str, str] | None = None) -> Service:
        root = tmp_path / "box"
        root.mkdir(exist_ok=True)
        svc = Service(root, script, env)
        created.append(svc)
        return svc

    yield make  # type: ignore[misc]
    for svc in created:
        svc.stop()


def _since(svc: Service, tmp_path: Path, stable: str = "#2") -> dict:
    cfg = ["--config", str(svc.root / "drift.toml"), "--db", str(tmp_path / "drift.db")]
    out = run_drift(["since", "--stable", stable, "--all", "--format", "json", *cfg], tmp_path)
    return json.loads(out.stdout)["data"]


def _record(svc: Service, tmp_path: Path) -> str:
    cfg = ["--config", str(svc.root / "drift.toml"), "--db", str(tmp_path / "drift.db")]
    return run_drift(["record", *cfg], tmp_path).stdout


def _baseline(svc: Service, tmp_path: Path) -> None:
    svc.start()
    _record(svc, tmp_path)
    _record(svc, tmp_path)  # the stable window: #2


def test_an_edited_default_in_an_expansion_is_the_first_suspect(service, tmp_path: Path) -> None:
    svc = service(
        """\
        #!/bin/bash
        set -euo pipefail
        echo $$ > PIDFILE
        TP=${TP:-8}
        export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
        exec SLEEPER --tp "$TP" --port 30000
        """
    )
    _baseline(svc, tmp_path)
    svc.write(svc.script.read_text().replace("${TP:-8}", "${TP:-4}"))
    svc.restart()
    _record(svc, tmp_path)

    data = _since(svc, tmp_path)
    top = data["suspects"][0]
    root = top["changes"][0]
    line = svc.line_of("TP=${TP:-4}")
    assert (root["key"], root["provenance"]["value_line"]) == ("flag:--tp", line)
    assert top["status"] == "live" and f"decode.sh:{line}" in top["title"]
    live = changes_by_fact(data)[("service:decode", "flag:--tp")]
    assert live["suspect"]["rank"] == 1 and (live["before"], live["after"]) == ("8", "4")


def test_a_value_edited_in_a_sourced_env_file_names_that_file(service, tmp_path: Path) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        set -a
        source ./serving.env
        set +a
        exec SLEEPER --port 30000
        """
    )
    env_file = svc.root / "serving.env"
    env_file.write_text("# tuning\nSGLANG_MAX_CTAS=256\nNCCL_DEBUG=WARN\n")
    _baseline(svc, tmp_path)
    env_file.write_text("# tuning\nSGLANG_MAX_CTAS=512\nNCCL_DEBUG=WARN\n")
    svc.restart()
    _record(svc, tmp_path)

    data = _since(svc, tmp_path)
    top = data["suspects"][0]
    root = top["changes"][0]
    assert root["key"] == "export:SGLANG_MAX_CTAS"
    # ./serving.env is read from where the script was started: the live PWD says it was here
    assert {(p["file"], p["line"]) for p in root["provenance"]["possible"]} >= {(str(env_file), 2)}
    assert top["status"] == "live" and f"{env_file}:2" in top["title"]
    assert f"(branch taken: if started in {svc.root})" in top["label"]
    live = changes_by_fact(data)[("service:decode", "env:SGLANG_MAX_CTAS")]
    assert live["suspect"]["rank"] == 1
    # the sourced file's own text change belongs to the same story, not a second suspect
    assert all(
        c["subject"] != f"script:{env_file}" or s["rank"] == 1
        for s in data["suspects"]
        for c in s["changes"]
    )


def test_an_edited_array_flag_points_at_the_array_line(service, tmp_path: Path) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        ARGS=(--model-path /models/m --tp 8)
        ARGS+=(--max-running-requests 64)
        if [ -n "${DEBUG:-}" ]; then
          ARGS+=(--log-level debug)
        fi
        exec SLEEPER "${ARGS[@]}"
        """
    )
    _baseline(svc, tmp_path)
    svc.write(svc.script.read_text().replace("requests 64", "requests 128"))
    svc.restart()
    _record(svc, tmp_path)

    data = _since(svc, tmp_path)
    top = data["suspects"][0]
    root = top["changes"][0]
    line = svc.line_of("requests 128")
    assert (root["key"], root["provenance"]["line"]) == ("flag:--max-running-requests", line)
    assert top["status"] == "live"
    live = changes_by_fact(data)[("service:decode", "flag:--max-running-requests")]
    assert live["suspect"]["rank"] == 1 and live["after"] == "128"


def test_the_live_value_picks_the_branch_that_ran(service, tmp_path: Path) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        exec SLEEPER --port 30000
        """,
        env={"ROLE": "decode"},
    )
    _baseline(svc, tmp_path)
    svc.write(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        if [ "$ROLE" = prefill ]; then
          export NCCL_IB_QPS=4
        else
          export NCCL_IB_QPS=8
        fi
        exec SLEEPER --port 30000
        """
    )
    svc.restart()
    _record(svc, tmp_path)

    data = _since(svc, tmp_path)
    top = data["suspects"][0]
    assert top["changes"][0]["key"] == "export:NCCL_IB_QPS" and top["status"] == "live"
    line = svc.line_of("NCCL_IB_QPS=8")
    assert f"decode.sh:{line}" in top["title"]
    assert 'branch taken: else of if [ "$ROLE" = prefill ]' in top["label"]


def test_a_line_added_above_moves_every_claim_with_it(service, tmp_path: Path) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        export NCCL_DEBUG=WARN
        exec SLEEPER --port 30000
        """
    )
    _baseline(svc, tmp_path)
    svc.script.write_text("# a comment added on top\n" + svc.script.read_text())
    _record(svc, tmp_path)

    data = _since(svc, tmp_path)
    keys = {c["key"] for s in data["suspects"] for c in s["changes"]}
    assert keys == {"content"}  # the text changed; no export or flag did
    cfg = ["--config", str(svc.root / "drift.toml"), "--db", str(tmp_path / "drift.db")]
    shown = json.loads(run_drift(["show", "NCCL_DEBUG", "--format", "json", *cfg], tmp_path).stdout)
    export = next(
        f for s in shown["data"]["subjects"] for f in s["facts"] if f["key"] == "export:NCCL_DEBUG"
    )
    assert export["provenance"]["line"] == svc.line_of("export NCCL_DEBUG")


def test_a_moved_line_is_not_counted_as_a_change(service, tmp_path: Path) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        export NCCL_DEBUG=WARN
        exec SLEEPER --port 30000 --tp 8
        """
    )
    _baseline(svc, tmp_path)
    svc.script.write_text("# a comment added on top\n" + svc.script.read_text())
    # only the script's text changed; the export, exec and flags only moved down a line
    assert ", 1 changed," in _record(svc, tmp_path)


# A token-shaped value in the operator's shell: it must stay redacted in every format.
SHELL_TOKEN = "FwoGZXIvYXdzEBYa" + "NotARealSessionToken42"


def test_a_restart_from_another_shell_is_one_story_under_the_real_change(
    service, tmp_path: Path
) -> None:
    """An export is added and the service restarted by hand from an operator's login shell.

    The shell brings its own HOME, PATH, pyenv, OLDPWD, SHLVL and a session
    token: one story (where it was started from) under the export, each
    variable's old and new value listed in it, in every format.
    """
    home = tmp_path / "operator"
    (home / "src").mkdir(parents=True)
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        export NCCL_DEBUG=WARN
        exec SLEEPER --port 30000
        """,
        env={
            "PYENV_ROOT": "/opt/pyenv",
            "PYENV_VERSION": "3.11.9",
            "OLDPWD": str(tmp_path),
            "SHLVL": "1",
        },
    )
    _baseline(svc, tmp_path)
    svc.write(svc.script.read_text().replace("WARN\n", "WARN\nexport SGLANG_MAX_CTAS=512\n"))
    svc.env = {
        "HOME": str(home),
        "PATH": f"{home}/.pyenv/shims:{home}/.pyenv/bin:{os.environ['PATH']}",
        "PYENV_ROOT": f"{home}/.pyenv",
        "PYENV_VERSION": "3.12.3",
        "OLDPWD": str(home / "src"),
        "SHLVL": "2",
        "AWS_SESSION_TOKEN": SHELL_TOKEN,
    }
    svc.restart()
    _record(svc, tmp_path)

    data = _since(svc, tmp_path)
    top, shell = data["suspects"]
    assert top["changes"][0]["key"] == "export:SGLANG_MAX_CTAS" and top["status"] == "live"
    assert shell["rank"] == 2 and shell["score"] < top["score"]
    assert shell["status"] == "unsourced" and shell["restarts"][0]["service"] == "decode"
    assert shell["title"] == (
        "the environment decode was started from changed: AWS_SESSION_TOKEN, HOME, +5"
    )
    assert shell["label"].startswith("7 variables inherited from what started decode")
    listed = {c["key"].removeprefix("env:"): c for c in shell["changes"]}
    assert list(listed) == [
        "AWS_SESSION_TOKEN",
        "HOME",
        "PATH",
        "PYENV_ROOT",
        "PYENV_VERSION",
        "OLDPWD",
        "SHLVL",
    ]
    assert (listed["HOME"]["before"], listed["HOME"]["after"]) == (str(svc.root), str(home))
    assert (listed["PYENV_VERSION"]["before"], listed["PYENV_VERSION"]["after"]) == (
        "3.11.9",
        "3.12.3",
    )
    token = listed["AWS_SESSION_TOKEN"]
    assert token["secret"] and token["kind"] == "added" and token["after"].startswith("[redacted")

    cfg = ["--config", str(svc.root / "drift.toml"), "--db", str(tmp_path / "drift.db")]
    for fmt in ("text", "md", "html", "json"):
        out = run_drift(["since", "--stable", "#2", "--format", fmt, *cfg], tmp_path).stdout
        assert SHELL_TOKEN not in out
        for name in listed:
            assert f"env:{name}" in out, (fmt, name)
        assert "3.11.9" in out and "3.12.3" in out
        # the terminal shortens long values, yet keeps where old and new differ in view
        assert "operator/src" in out
        assert fmt == "text" or str(home / "src") in out
        assert out.index("SGLANG_MAX_CTAS") < out.index("env:HOME")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=op", "-c", "user.email=op@localhost", *args],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("order", ["checkout first", "restart first", "no reflog"])
def test_a_checkout_and_a_restart_are_ordered_only_as_far_as_the_times_tell(
    service, tmp_path: Path, order: str
) -> None:
    """A commit lands in the checkout the service runs from, and the service restarts.

    Records a minute apart cannot order the two; the reflog's time for the
    move can, a few seconds apart. Without a reflog, drift says they happened
    at about the same time, in every format.
    """
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        exec SLEEPER --port 30000
        """
    )
    repo = svc.root / "app"
    repo.mkdir()
    (repo / "model.py").write_text("BLOCK = 64\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "first")
    if order == "no reflog":
        _git(repo, "config", "core.logAllRefUpdates", "false")
        for log in (repo / ".git" / "logs").rglob("*"):
            if log.is_file():
                log.unlink()
    with (svc.root / "drift.toml").open("a") as config:
        config.write(f'[[repos]]\npath = "{repo}"\n')
    _baseline(svc, tmp_path)

    def commit() -> None:
        (repo / "model.py").write_text("BLOCK = 128\n")
        _git(repo, "commit", "-q", "-am", "bigger blocks")

    # The reflog counts whole seconds: over a second apart, the order is certain.
    if order == "checkout first":
        commit()
        time.sleep(1.2)
        svc.restart()
    elif order == "restart first":
        svc.restart()
        time.sleep(1.2)
        commit()
    else:
        commit()
        svc.restart()
    _record(svc, tmp_path)

    (story,) = _since(svc, tmp_path)["suspects"]
    assert story["changes"][0]["subject"] == f"repo:{repo}"
    if order == "checkout first":
        assert story["status"] == "on-disk"
        assert story["label"].endswith("; decode started after it")
    elif order == "restart first":
        assert story["status"] == "pending"
        assert story["label"].endswith("(every running service started before it)")
    else:
        assert story["status"] == "on-disk"
        said = story["label"].split("; ", 1)[1]
        assert said.startswith("decode started at about the same time (start ")
        assert said.endswith("), order unknown") and "change between " in said
        cfg = ["--config", str(svc.root / "drift.toml"), "--db", str(tmp_path / "drift.db")]
        for fmt in ("text", "md", "html"):
            out = run_drift(["since", "--stable", "#2", "--format", fmt, *cfg], tmp_path).stdout
            assert said in out, fmt
            assert "started after" not in out and "started before" not in out


def _live_after_edit(svc: Service, tmp_path: Path, old: str, new: str, name: str) -> dict:
    """Baseline, one edit of the script and a restart, a record: the live change of `name`."""
    _baseline(svc, tmp_path)
    svc.write(svc.script.read_text().replace(old, new))
    svc.restart()
    _record(svc, tmp_path)
    return changes_by_fact(_since(svc, tmp_path))[("service:decode", name)]


def test_an_edited_integer_declaration_is_the_line_that_gave_the_live_value(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        declare -i WORKERS=2*4
        export WORKERS
        exec SLEEPER --max-num-seqs "$WORKERS" --port 8080
        """
    )
    _baseline(svc, tmp_path)
    svc.write(svc.script.read_text().replace("WORKERS=2*4", "WORKERS=2*8"))
    svc.restart()
    _record(svc, tmp_path)

    data = _since(svc, tmp_path)
    line = svc.line_of("WORKERS=2*8")
    live = changes_by_fact(data)[("service:decode", "env:WORKERS")]
    assert (live["before"], live["after"]) == ("8", "16")
    assert f"decode.sh:{line}" in json.dumps(live)
    flag = changes_by_fact(data)[("service:decode", "flag:--max-num-seqs")]
    assert f"decode.sh:{line}" in json.dumps(flag)


def test_a_value_from_an_env_file_the_script_writes_and_removes_is_not_claimed_elsewhere(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        export NCCL_IB_HCA=mlx5_0
        printf 'NCCL_IB_HCA=%s\\n' mlx5_0 > "$(dirname "$0")/node.env"
        set -a; . "$(dirname "$0")/node.env"; set +a
        rm -f "$(dirname "$0")/node.env"
        exec SLEEPER --port 8080
        """
    )
    cfg = ["--config", str(svc.root / "drift.toml"), "--db", str(tmp_path / "drift.db")]

    def record() -> None:
        # the line drift does not follow is reported as a gap of the reading (exit 4)
        assert run_drift(["record", *cfg], tmp_path, check=False).returncode in (0, 4)

    svc.start()
    record()
    record()
    svc.write(svc.script.read_text().replace("' mlx5_0 >", "' mlx5_1 >"))
    svc.restart()
    record()

    data = _since(svc, tmp_path)
    live = changes_by_fact(data)[("service:decode", "env:NCCL_IB_HCA")]
    assert (live["before"], live["after"]) == ("mlx5_0", "mlx5_1")
    said = json.dumps(live)
    sourced = svc.line_of('. "$(dirname')
    assert f"decode.sh:{sourced} (not followed)" in said


def test_a_value_with_a_trailing_note_in_an_exported_env_file_names_its_line(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        export $(grep -v '^#' "$(dirname "$0")/serving.env" | sed 's/#.*//' | xargs)
        exec SLEEPER --port 8080
        """
    )
    env_file = svc.root / "serving.env"
    env_file.write_text("# serving settings\nVLLM_ATTENTION_BACKEND=FLASH_ATTN  # fastest here\n")
    _baseline(svc, tmp_path)
    env_file.write_text("# serving settings\nVLLM_ATTENTION_BACKEND=XFORMERS  # fastest here\n")
    svc.restart()
    _record(svc, tmp_path)

    live = changes_by_fact(_since(svc, tmp_path))[("service:decode", "env:VLLM_ATTENTION_BACKEND")]
    assert (live["before"], live["after"]) == ("FLASH_ATTN", "XFORMERS")
    said = json.dumps(live)
    assert "serving.env:2" in said and "inherited" not in said


def test_an_edited_arithmetic_line_is_the_line_that_gave_the_live_value(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        export OMP_NUM_THREADS=4
        (( OMP_NUM_THREADS *= 2 ))
        exec SLEEPER --port 8080
        """
    )
    live = _live_after_edit(svc, tmp_path, "*= 2", "*= 4", "env:OMP_NUM_THREADS")
    assert (live["before"], live["after"]) == ("8", "16")
    assert f"decode.sh:{svc.line_of('*= 4')}" in json.dumps(live)


def test_a_variable_the_caller_exported_is_placed_where_the_script_set_it(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        if grep -q drift-debug-run /proc/cmdline; then
            export NCCL_DEBUG=$(cat /etc/hostname)
        else
            NCCL_DEBUG=INFO
        fi
        exec SLEEPER --port 8080
        """,
        env={"NCCL_DEBUG": "WARN"},  # the unit exports it; the script only assigns it
    )
    live = _live_after_edit(svc, tmp_path, "NCCL_DEBUG=INFO", "NCCL_DEBUG=TRACE", "env:NCCL_DEBUG")
    assert (live["before"], live["after"]) == ("INFO", "TRACE")
    line = svc.line_of("NCCL_DEBUG=TRACE")
    assert f"decode.sh:{line}" in live["suspect"]["title"]
    assert live["suspect"]["rank"] == 1


def test_a_flag_value_the_caller_gave_through_a_default_names_no_line_as_its_value(
    service, tmp_path: Path
) -> None:
    """`echo "--max-running-requests ${MAX_REQ:-1024}"` in a function, `CMD=$(build_cmd)`,
    and the caller gives MAX_REQ: the flag is the echo line's, and no line of the script is
    named as where 2048 came from (not the `CMD=$(...)` line, which only captured it)."""
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        build_cmd() {
            echo "--port 30000 --max-running-requests ${MAX_REQ:-1024}"
        }
        CMD=$(build_cmd)
        exec SLEEPER $CMD
        """,
        env={"MAX_REQ": "2048"},
    )
    svc.start()
    _record(svc, tmp_path)
    _record(svc, tmp_path)
    svc.write(svc.script.read_text().replace("MAX_REQ:-1024", "MAX_REQ:-512"))
    svc.env["MAX_REQ"] = "4096"
    svc.restart()
    _record(svc, tmp_path)

    data = _since(svc, tmp_path)
    [story] = [s for s in data["suspects"] if "flag --max-running-requests" in s["title"]]
    captured = svc.line_of("CMD=$(build_cmd)")
    echoed = svc.line_of("--max-running-requests")
    assert f"at {svc.script}:{echoed}" in story["title"], story["title"]
    assert f"value from {svc.script}:{captured}" not in story["title"], story["title"]


def test_a_sourced_file_replaced_by_a_fifo_is_a_blind_spot_not_removed(
    service, tmp_path: Path
) -> None:
    """The env file a script sources becomes a FIFO (or anything drift will not open): its
    recorded text keeps its last value and the blind spot names it; no story says it was
    removed, and the record does not hang."""
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        set -a; . "$(dirname "$0")/prefill.env"; set +a
        exec SLEEPER --port "${PORT:-30002}"
        """
    )
    env_file = svc.root / "prefill.env"
    env_file.write_text("PREFILL_CHUNK=4096\n")
    svc.start()
    _record(svc, tmp_path)
    _record(svc, tmp_path)
    env_file.unlink()
    os.mkfifo(env_file)
    cfg = ["--config", str(svc.root / "drift.toml"), "--db", str(tmp_path / "drift.db")]
    done = run_drift(["record", *cfg], tmp_path, check=False, timeout=30)
    assert done.returncode == 4, done.stderr  # stored, with a blind spot

    data = _since(svc, tmp_path)
    told = json.dumps(data["suspects"])
    assert "removed" not in told, told
    spots = json.dumps(data["blind_spots"])
    assert f"script:{env_file}" in spots and "drift cannot read it" in spots, spots
