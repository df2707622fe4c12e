"""Values a serve script takes from code drift does not read, or from its caller.

Each test runs a real serve script under bash, records, makes the change an
operator would make, restarts and records again; `drift since` must name
the line that gave each live value, or say it is unsure, never a false
line and never "inherited" for a value a line of the script may have set.
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import run_drift
from test_script_incidents import Service, _since, service  # noqa: F401

CONDA_HOOK = """\
#!/bin/bash
# conda's hook prints a shell function that exports the environment's variables
if [ "$1" = shell.bash ] && [ "$2" = hook ]; then
  cat <<'HOOK'
conda() {
  if [ "$1" = activate ]; then
    export CONDA_DEFAULT_ENV="$2"
    export CONDA_PREFIX="$(cat "$HOME/prefix")/envs/$2"
    export CONDA_PYTHON_EXE="$(cat "$HOME/prefix")/bin/python"
  fi
}
HOOK
fi
"""


def _record(svc: Service, tmp_path: Path) -> None:
    """`drift record`; a line drift cannot follow is reported and exits 4 (a partial record)."""
    cfg = ["--config", str(svc.root / "drift.toml"), "--db", str(tmp_path / "drift.db")]
    result = run_drift(["record", *cfg], tmp_path, check=False)
    assert result.returncode in (0, 4), result.stderr


def _baseline(svc: Service, tmp_path: Path) -> None:
    svc.start()
    _record(svc, tmp_path)
    _record(svc, tmp_path)  # the stable window: #2


def test_variables_from_conda_activate_are_set_by_that_line_not_inherited(
    service,  # noqa: F811
    tmp_path: Path,
) -> None:
    """conda moved to another prefix: its variables changed, set by `conda activate`.

    drift does not read conda's hook; the words must name the lines it did
    not follow, never "inherited from what started" the service.
    """
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "conda").write_text(CONDA_HOOK)
    (stubs / "conda").chmod(0o755)
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        eval "$(conda shell.bash hook)"
        conda activate sglang
        export NCCL_DEBUG=WARN
        exec SLEEPER --port 30000
        """,
        env={"PATH": f"{stubs}:{os.environ['PATH']}"},
    )
    (svc.root / "prefix").write_text("/opt/conda\n")
    _baseline(svc, tmp_path)
    (svc.root / "prefix").write_text("/opt/miniforge3\n")
    svc.restart()
    _record(svc, tmp_path)

    data = _since(svc, tmp_path)
    labels = {
        change["key"]: suspect["label"]
        for suspect in data["suspects"]
        for change in suspect["changes"]
    }
    assert not any("inherited" in label for label in labels.values()), labels
    hook, activate = f"{svc.script}:3", f"{svc.script}:4"
    for name in ("CONDA_PREFIX", "CONDA_PYTHON_EXE"):
        assert labels[f"env:{name}"] == (
            f"unsure: perhaps set by {hook}, {activate} (not followed)"
        ), labels


def test_an_option_the_caller_gives_through_a_parsing_loop_is_linked_to_its_line(
    tmp_path: Path,
) -> None:
    """``for arg in "$@"; case --tp=*) TP="${arg#*=}"``: restarted with another --tp.

    Each run of the loop may take another arm; the value of one arm is not
    tied to the arms of other runs, so the live --tp (the caller's) is
    the exec line's, its value from the arm that took it.
    """
    root = tmp_path / "box"
    root.mkdir()
    svc = Service(
        root,
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        MODEL=/models/default
        TP=1
        PORT=30000
        for arg in "$@"; do
          case "$arg" in
            --model=*) MODEL="${arg#*=}" ;;
            --tp=*) TP="${arg#*=}" ;;
            --port=*) PORT="${arg#*=}" ;;
            *) echo "ignored: $arg" ;;
          esac
        done
        exec SLEEPER --model $MODEL --tp $TP --port $PORT
        """,
    )
    try:
        svc.args = ("--tp=2",)
        _baseline(svc, tmp_path)
        svc.args = ("--model=/models/b", "--tp=4", "--port=30001")
        svc.restart()
        _record(svc, tmp_path)
        data = _since(svc, tmp_path)
    finally:
        svc.stop()
    labels = {
        change["key"]: suspect["label"]
        for suspect in data["suspects"]
        for change in suspect["changes"]
    }
    exec_line = svc.line_of("exec ")
    for flag in ("--model", "--tp", "--port"):
        assert labels[f"flag:{flag}"].startswith(f"from {svc.script}:{exec_line}"), labels
