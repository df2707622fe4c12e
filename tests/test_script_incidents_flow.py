"""Incidents in scripts whose control flow picks the command: eval'd strings, built names.

The operator's sequence, as in tests/test_script_incidents.py: bash starts
the service, drift records a stable window, a line of the script is edited
and the service restarted, drift records again and ``drift since`` names
the edited line, not the line that ran the command.
"""

from __future__ import annotations

from pathlib import Path

from conftest import changes_by_fact, run_drift
from test_script_incidents import _baseline, _record, _since, service

__all__ = ["service"]  # the fixture


def edited(svc, tmp_path: Path, old: str, new: str) -> dict:  # type: ignore[no-untyped-def]
    """Two records of the script as written, then `old` edited to `new`, a restart, a record:
    what `drift since` says of it."""
    _baseline(svc, tmp_path)
    svc.write(svc.script.read_text().replace(old, new))
    svc.restart()
    _record(svc, tmp_path)
    return _since(svc, tmp_path)


def test_a_flag_edited_in_an_evald_string_points_at_the_string_line(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        start_decode() {
            local CMD="CUDA_VISIBLE_DEVICES=4,5 exec SLEEPER --port 8200"
            CMD+=" --max-running-requests 64"
            eval "$CMD"
        }
        case "${1:-decode}" in
            decode) start_decode ;;
            *) exit 1 ;;
        esac
        """
    )
    top = edited(svc, tmp_path, "requests 64", "requests 128")["suspects"][0]
    root = top["changes"][0]
    line = svc.line_of("requests 128")
    assert (root["key"], root["provenance"]["line"]) == ("flag:--max-running-requests", line)
    assert top["status"] == "live"


def test_a_flag_edited_in_a_function_called_by_a_built_name_points_at_its_exec(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        start_prefill() {
            exec SLEEPER --port 8100 --max-running-requests 32
        }
        start_decode() {
            exec SLEEPER --port 8200 --max-running-requests 64
        }
        "start_$ROLE" "$@"
        """,
        env={"ROLE": "decode"},
    )
    top = edited(svc, tmp_path, "requests 64", "requests 128")["suspects"][0]
    assert top["changes"][0]["key"] == "flag:--max-running-requests"
    assert top["status"] == "live"
    # two functions write the flag: the live command line says which one ran
    assert f"decode.sh:{svc.line_of('requests 128')}" in top["title"]


def test_an_env_value_edited_in_a_command_string_points_at_its_line(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        NET="NCCL_P2P_LEVEL=NVL"
        DEV="CUDA_VISIBLE_DEVICES=${GPU_IDS:-0,1}"
        ENVCMD="env $NET $DEV"
        exec $ENVCMD SLEEPER --port 8200
        """,
        env={"GPU_IDS": "2,3"},
    )
    data = edited(svc, tmp_path, "LEVEL=NVL", "LEVEL=SYS")
    top = data["suspects"][0]
    root = top["changes"][0]
    # bash ran the env words at the exec line; the edit is the NET line
    assert root["key"] == "export:NCCL_P2P_LEVEL"
    assert top["status"] == "live"
    live = changes_by_fact(data)[("service:decode", "env:NCCL_P2P_LEVEL")]
    assert live["suspect"]["rank"] == 1
    # the caller's GPU_IDS, through a default, reaches the server unchanged: not a suspect
    assert ("service:decode", "env:CUDA_VISIBLE_DEVICES") not in changes_by_fact(data)


def test_a_variable_conda_run_sets_is_set_by_that_line_not_inherited(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        export HF_HOME=/data/hf
        exec ./conda run -n chat --no-capture-output SLEEPER --port 8200
        """
    )
    conda = svc.root / "conda"
    # conda run: the environment's name and its activation scripts' exports, then the program
    conda.write_text(
        '#!/bin/sh\nexport CONDA_DEFAULT_ENV="$3" CUDA_HOME="/envs/$3"\nshift 4\nexec "$@"\n'
    )
    conda.chmod(0o755)
    cfg = ["--config", str(svc.root / "drift.toml"), "--db", str(tmp_path / "drift.db")]
    svc.start()
    for _ in range(2):  # the stable window; a line drift does not follow is reported (exit 4)
        assert run_drift(["record", *cfg], tmp_path, check=False).returncode in (0, 4)
    svc.write(svc.script.read_text().replace("-n chat", "-n chat2"))
    svc.restart()
    run_drift(["record", *cfg], tmp_path, check=False)

    data = _since(svc, tmp_path)
    line = f"decode.sh:{svc.line_of('conda run')}"
    for name in ("CONDA_DEFAULT_ENV", "CUDA_HOME"):
        label = changes_by_fact(data)[("service:decode", f"env:{name}")]["suspect"]["label"]
        assert "inherited" not in label
        assert label.endswith(f"{line} (not followed)"), label


def test_a_flag_the_caller_passes_through_args_is_placed_at_the_line_that_passes_it(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        case "${1:-serve}" in
            serve) shift || true
                exec SLEEPER --port 8200 \\
                    "$@" ;;
            *) exec SLEEPER --port 9 "$@" ;;
        esac
        """
    )
    svc.args = ("serve", "--max-num-seqs", "32")
    _baseline(svc, tmp_path)
    svc.args = ("serve", "--max-num-seqs", "64")  # the unit's ExecStart= gives another value
    svc.restart()
    _record(svc, tmp_path)

    top = _since(svc, tmp_path)["suspects"][0]
    assert top["changes"][0]["key"] == "flag:--max-num-seqs"
    # no line writes the flag: the caller gave it, through the "$@" of the branch that ran
    line = svc.line_of('"$@" ;;')
    assert top["label"].startswith(f'passed by the caller through "$@" at {svc.script}:{line}')


def test_a_flag_edited_in_a_command_a_function_prints_points_at_its_echo_line(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        build_cmd() {
            echo -n "--port 8200"
            if [ "${TP:-1}" -gt 4 ]; then
                echo -n " --max-num-batched-tokens 32768"
            fi
            echo "building" >&2
            echo " --max-running-requests 64"
        }
        ARGS=$(build_cmd)
        exec SLEEPER ${ARGS}
        """
    )
    top = edited(svc, tmp_path, "requests 64", "requests 128")["suspects"][0]
    root = top["changes"][0]
    # the function printed the words: the edit is its echo line, not the exec
    line = svc.line_of("requests 128")
    assert (root["key"], root["provenance"]["line"]) == ("flag:--max-running-requests", line)
    assert top["status"] == "live"


def test_a_flag_edited_in_words_quoted_by_printf_q_points_at_the_printf_line(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        opts=$(printf ' %q' --port "${PORT:-8200}" --served-model-name "chat model")
        opts+=" --max-running-requests 64"
        export LOG_LEVEL=INFO
        eval "exec SLEEPER $opts"
        """
    )
    data = edited(svc, tmp_path, '"chat model"', '"chat model 2"')
    top = data["suspects"][0]
    root = top["changes"][0]
    line = svc.line_of("printf")
    assert (root["key"], root["provenance"]["line"]) == ("flag:--served-model-name", line)
    # the eval runs known words only: the export before it keeps its one line
    assert ("service:decode", "env:LOG_LEVEL") not in changes_by_fact(data)


def test_a_flag_the_caller_passes_after_dashes_is_placed_where_the_parser_keeps_it(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        EXTRA=()
        parse_args() {
            while [[ $# -gt 0 ]]; do
                case "$1" in
                    --tp) TP=$2; shift 2 ;;
                    --) shift; EXTRA=("$@"); break ;;
                    *) exit 2 ;;
                esac
            done
        }
        launch() {
            exec SLEEPER --port 8200 "$@"
        }
        parse_args "$@"
        launch --tp "${TP:-1}" "${EXTRA[@]}"
        """
    )
    svc.args = ("--tp", "2", "--", "--max-num-seqs", "32")
    _baseline(svc, tmp_path)
    svc.args = ("--tp", "2", "--", "--max-num-seqs", "64")  # the unit's ExecStart= changed
    svc.restart()
    _record(svc, tmp_path)

    top = _since(svc, tmp_path)["suspects"][0]
    assert top["changes"][0]["key"] == "flag:--max-num-seqs"
    line = svc.line_of('EXTRA=("$@")')
    # the flag reached the server through the array the parser filled, not the launcher's "$@"
    assert top["label"].startswith(f'passed by the caller through "$@" at {svc.script}:{line}')


def test_a_flag_edited_in_a_file_read_by_mapfile_points_at_its_line_there(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        mapfile -t EXTRA < <(grep -v '^#' "$(dirname "$0")/extra_args.txt")
        exec SLEEPER --port 8200 "${EXTRA[@]}"
        """
    )
    flags = svc.root / "extra_args.txt"
    flags.write_text("# one word a line\n--max-running-requests\n64\n")
    _baseline(svc, tmp_path)
    flags.write_text("# one word a line\n--max-running-requests\n128\n")
    svc.restart()
    _record(svc, tmp_path)

    suspects = _since(svc, tmp_path)["suspects"]
    flag = next(s for s in suspects if s["changes"][0]["key"] == "flag:--max-running-requests")
    assert flag["status"] == "live"
    # the words are the file's lines, which the script read into the array: the value's line
    assert flag["changes"][0]["provenance"]["file"] == str(flags)
    assert f"value from {flags}:3 (was 64)" in flag["title"]


def test_a_flag_after_a_computed_number_points_at_its_line(service, tmp_path: Path) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        MAX_INPUT=${MAX_INPUT:-4096}
        exec SLEEPER --max-total-tokens $((MAX_INPUT + 2048)) \\
            ${QUANTIZE:+--quantize "$QUANTIZE"} \\
            --max-running-requests 64
        """,
        env={"QUANTIZE": "fp8"},
    )
    _baseline(svc, tmp_path)
    svc.env["QUANTIZE"] = "awq"  # what starts the service changed it
    svc.restart()
    _record(svc, tmp_path)

    data = _since(svc, tmp_path)
    flag = changes_by_fact(data)[("service:decode", "flag:--quantize")]
    # $((...)) is one number, which cannot hold the flag after it: the line writing it
    line = svc.line_of("--quantize")
    assert flag["suspect"]["label"].startswith(f"from {svc.script}:{line}"), flag["suspect"]


def test_a_flag_beside_a_value_the_caller_did_not_give_points_at_its_line(
    service, tmp_path: Path
) -> None:
    svc = service(
        """\
        #!/bin/bash
        echo $$ > PIDFILE
        CMD="SLEEPER --port ${PORT:-8200} ${EXTRA_FLAGS}"
        CMD+=" --max-running-requests 64"
        eval "exec $CMD"
        """,
        env={"PORT": "8300"},
    )
    data = edited(svc, tmp_path, "requests 64", "requests 128")
    live = changes_by_fact(data)[("service:decode", "flag:--max-running-requests")]
    # EXTRA_FLAGS is not in the live environment and the script never sets it: it was not
    # given, so it holds no flag; the flag is the line that writes it
    line = svc.line_of("requests 128")
    # the live flag is the evidence of that line's story (not a story of its own, unsourced)
    assert live["role"] == "evidence"
    assert f"{svc.script}:{line} (was 64)" in live["suspect"]["title"]
    assert live["suspect"]["status"] == "live"
