"""Incidents in scripts whose control flow picks the command: eval'd strings, built names.

The operator's sequence, as in tests/test_script_incidents.py: bash starts
the service, drift records a stable window, a line of the script is edited
and the service restarted, drift records again and ``drift since`` names
the edited line, not the line that ran the command.
"""

from __future__ import annotations

from pathlib import Path

from test_script_incidents import _baseline, _record, _since, service

__all__ = ["service"]  # the fixture


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
    _baseline(svc, tmp_path)
    svc.write(svc.script.read_text().replace("requests 64", "requests 128"))
    svc.restart()
    _record(svc, tmp_path)

    top = _since(svc, tmp_path)["suspects"][0]
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
    _baseline(svc, tmp_path)
    svc.write(svc.script.read_text().replace("requests 64", "requests 128"))
    svc.restart()
    _record(svc, tmp_path)

    top = _since(svc, tmp_path)["suspects"][0]
    assert top["changes"][0]["key"] == "flag:--max-running-requests"
    assert top["status"] == "live"
    # two functions write the flag: the live command line says which one ran
    assert f"decode.sh:{svc.line_of('requests 128')}" in top["title"]


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
