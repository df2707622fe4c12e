"""The bash oracle: every corpus script launches as annotated, and small scripts come out exact."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest
from bash_oracle import (
    BASH_OWN,
    Launch,
    LaunchError,
    launched,
    logical_lines,
    run_script,
    stop,
)
from hypothesis import given, settings
from hypothesis import strategies as st

CORPUS = Path(__file__).parent / "shell_corpus"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "case.json").is_file())


def where(ref: int | str, folder: Path) -> tuple[str, int]:
    """A case.json line reference (a line of serve.sh, or "file:line") as (absolute file, line)."""
    if isinstance(ref, int):
        return str(folder / "serve.sh"), ref
    file, _, line = ref.rpartition(":")
    return str(folder / file), int(line)


def line_text(file: str, line: int) -> str:
    return Path(file).read_text().split("\n")[line - 1]


def command_text(file: str, line: int) -> str:
    """The whole command that starts at `line` (its continuation lines joined)."""
    text = Path(file).read_text()
    start, end = logical_lines(text)
    lines = text.split("\n")
    return "\n".join(lines[start[line] - 1 : end[line]])


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def in_session(sid: int) -> list[int]:
    """Live processes of session `sid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def flag_names(argv: list[str]) -> set[str]:
    return {w.split("=")[0] for w in argv[1:] if w.startswith("-") and not w[1:2].isdigit()}


# ---------------------------------------------------------------------------------------------
# The corpus


@pytest.mark.parametrize("name", CASES)
def test_corpus_case_launches_as_annotated(name: str, tmp_path: Path) -> None:
    case = json.loads((CORPUS / name / "case.json").read_text())
    work = tmp_path / "case"
    shutil.copytree(CORPUS / name, work)
    script = work / "serve.sh"
    with launched(script, sandbox=tmp_path / "sandbox", args=case["args"], env=case["env"]) as run:
        assert Path(f"/proc/{run.pid}/cmdline").read_bytes().split(b"\0")[:-1] == [
            a.encode() for a in run.argv
        ]
        assert run.argv[0] in ("python", "python3", "sglang", "vllm", "torchrun", "trtllm-serve",
                               "text-generation-launcher")  # fmt: skip

        assert run.launch == where(case["launch"], work)
        launch_text = command_text(*run.launch)
        assert run.argv[0] in launch_text or "$" in launch_text  # exec "$@", bash -c "$CMD"

        for var in set(run.exported) - BASH_OWN:
            assert var in run.assigned, f"{var} has no origin"
            file, line = run.assigned[var]
            text = line_text(file, line)
            # a line that names it, a sourced file, what a command printed: $(...), <(...),
            # a string it runs: eval "$CMD", the launch (K=V in a variable: exec $CMD)
            runs = " eval " in f" {text.strip()} " or (file, line) == run.launch
            made = "$(" in text or "<(" in text
            assert var in text or file in run.sourced or made or runs, (var, line, text)
        expected = {var: where(ref, work) for var, ref in case["assigned"].items()}
        assert {k: v for k, v in run.assigned.items() if k not in BASH_OWN} == expected

        assert flag_names(run.argv) == set(case["flags"])
        for flag, ref in case["flags"].items():
            text = line_text(*where(ref, work))
            # a line that names it, or (a flag the caller gave) one that takes the arguments
            caller = flag in case["args"] and re.search(r"\$\{?[1-9@*]", text)
            assert flag in text or "$@" in text or caller, (flag, ref, text)
        assert case["about"] and "\n" not in case["about"]
    assert not alive(run.pid)
    assert run._proc is not None and not in_session(run._proc.pid)


# ---------------------------------------------------------------------------------------------
# Small scripts with an exact account

SMALL: dict[str, tuple[str, dict[str, str], dict[str, str], dict[str, int | str], int]] = {
    # name: (serve.sh, other files, env, assigned, launch line)
    "re-assignment with the same value is the origin": (
        "export A=1\necho step\nA=1\nexec python3 -m sglang.launch_server --port 1\n",
        {},
        {},
        {"A": 3},
        4,
    ),
    ":= then export": (
        ': "${PORT:=30000}"\nexport PORT\nexec vllm serve /m --port "$PORT"\n',
        {},
        {},
        {"PORT": 1},
        3,
    ),
    ":= on a variable the caller set assigns nothing": (
        ': "${PORT:=30000}"\nexport PORT\nexec vllm serve /m --port "$PORT"\n',
        {},
        {"PORT": "8000"},
        {},
        3,
    ),
    "set -a with a sourced .env": (
        "set -a\nsource .env\nset +a\nC=3\nexec python3 -m sglang.launch_server\n",
        {".env": '# settings\nA=1\nB="two words"\n'},
        {},
        {"A": ".env:2", "B": ".env:3"},
        5,
    ),
    "one-line if/else": (
        "MODE=fast\n"
        'if [ "$MODE" = fast ]; then export OPT=1; else export OPT=2; fi\n'
        "exec torchrun --nproc-per-node 2 serve.py\n",
        {},
        {},
        {"OPT": 2},
        3,
    ),
    "one-line if/else, other branch from the caller": (
        'if [ "$MODE" = fast ]; then export OPT=1; else export OPT=2; fi\n'
        "exec torchrun --nproc-per-node 2 serve.py\n",
        {},
        {"MODE": "slow"},
        {"OPT": 1},
        2,
    ),
    "eval of a helper's lines: each value on the eval's line, not a line after it": (
        "eval \"$(printf 'export A=1\\nexport B=2\\n')\"\nexport C=3\nexec vllm serve /m\n",
        {},
        {},
        {"A": 1, "B": 1, "C": 2},
        3,
    ),
    "K=V exec cmd": (
        "export K=outer\nK=inner exec python3 -m vllm.entrypoints.openai.api_server --port 1\n",
        {},
        {},
        {"K": 2},
        2,
    ),
    "exec env -u A B=2": (
        "export A=1\nexec env -u A B=2 vllm serve /m\n",
        {},
        {},
        {"B": 2},
        2,
    ),
    "a local does not leave its line behind": (
        'export X=global\nf() { local X=inner; echo "$X"; }\nf\nexec vllm serve /m\n',
        {},
        {},
        {"X": 1},
        4,
    ),
    "a sourced file's last line is the origin, even back to the value before it": (
        "export B=2\nset -a; source ./gen.env; set +a\nexec python3 -m sglang.launch_server\n",
        {"gen.env": "B=1\nB=2\n"},
        {},
        {"B": "gen.env:2"},
        3,
    ),
    "a function that sets a global back to its old value": (
        "export X=1\nf() {\n    X=2\n    X=1\n}\nf\nexec vllm serve /m\n",
        {},
        {},
        {"X": 4},
        7,
    ),
    "K=V on a function call ends with the call": (
        'export K=a\nf() { echo "$K"; }\nK=b f\nexec vllm serve /m\n',
        {},
        {},
        {"K": 1},
        4,
    ),
    "K=V on a function call reaches a launch inside it": (
        "export K=a\nf() { exec vllm serve /m; }\nK=b f\n",
        {},
        {},
        {"K": 3},
        2,
    ),
    "a function's := is the origin": (
        'setup() {\n    : "${Q:=q}"\n}\nsetup\nexport Q\nexec vllm serve /m\n',
        {},
        {},
        {"Q": 2},
        6,
    ),
    "exports after a background launch do not count": (
        "export A=1\nvllm serve /m &\nexport B=2\nA=3\nwait\n",
        {},
        {},
        {"A": 1},
        2,
    ),
    "multi-line export and quoted value": (
        'export A=1 \\\n    B=2\nexport M="x\ny"\nexec vllm serve /m \\\n    --tp 2\n',
        {},
        {},
        {"A": 1, "B": 2, "M": 3},
        5,
    ),
    "read and printf -v": (
        "read -r R <<< value\nprintf -v P '%s' pval\nexport R P\nexec vllm serve /m\n",
        {},
        {},
        {"R": 1, "P": 2},
        4,
    ),
    "bash -c string lines map into the file": (
        'bash -c "\n  export IN=1\n  exec vllm serve /m --tp 2\n"\n',
        {},
        {},
        {"IN": 2},
        3,
    ),
    "python helpers are not the server": (
        "N=$(python3 -c 'import torch; print(torch.cuda.device_count())')\n"
        "python3 prepare.py\n"
        "export N\n"
        'exec python3 -m sglang.launch_server --tp "$N"\n',
        {"prepare.py": "print('prepared')\n"},
        {},
        {"N": 1},
        4,
    ),
}


@pytest.mark.parametrize("name", SMALL)
def test_small_script_account_is_exact(name: str, tmp_path: Path) -> None:
    body, files, env, assigned, launch_line = SMALL[name]
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/bash\n" + body)
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    # the "#!/bin/bash" line shifts every expected line by one
    expected = {
        k: (str(tmp_path / "serve.sh"), v + 1) if isinstance(v, int) else where(v, tmp_path)
        for k, v in assigned.items()
    }
    with launched(script, sandbox=tmp_path / "sandbox", env=env) as run:
        assert {k: v for k, v in run.assigned.items() if k not in BASH_OWN} == expected
        assert set(run.exported) - BASH_OWN == set(expected)
        assert run.launch == (str(script), launch_line + 1)


def test_argv_and_environment_are_exactly_what_bash_gave(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text(
        "export SPACES='a  b' EMPTY= NL=$'x\\ny'\n"
        "exec -a custom-name python3 -m sglang.launch_server '' ' lead' 'q\"uote' --x=1\n"
    )
    with launched(script, sandbox=tmp_path / "sandbox", env={"GIVEN": "g"}) as run:
        assert run.argv == ["custom-name", "-m", "sglang.launch_server", "", " lead", 'q"uote',
                            "--x=1"]  # fmt: skip
        assert run.env["GIVEN"] == "g" and "GIVEN" not in run.exported
        assert run.exported["SPACES"] == "a  b"
        assert run.exported["EMPTY"] == ""
        assert run.exported["NL"] == "x\ny"
        assert run.env["PATH"].split(":")[0] == str(tmp_path / "sandbox" / "stubs")


def test_numactl_and_nohup_wrappers_reach_the_launcher(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text(
        "nohup numactl --cpunodebind=0 -m 0 -- python3 -m vllm.entrypoints.api_server --p 1 &\n"
        "wait\n"
    )
    with launched(script, sandbox=tmp_path / "sandbox") as run:
        assert run.argv == ["python3", "-m", "vllm.entrypoints.api_server", "--p", "1"]
        assert run.launch == (str(script), 1)


# ---------------------------------------------------------------------------------------------
# Failures, and nothing left behind


def test_a_script_that_fails_before_launching_says_why(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text("sleep 1000 &\necho 'cannot find the model' >&2\nexit 3\n")
    with pytest.raises(LaunchError, match="cannot find the model"):
        run_script(script, sandbox=tmp_path / "sandbox")
    assert not [p for p in _sleepers(tmp_path)]


def test_a_script_that_never_launches_times_out_and_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text("echo 'still loading'\nsleep 1000\n")
    with pytest.raises(LaunchError, match="still loading"):
        run_script(script, sandbox=tmp_path / "sandbox", timeout=0.5)
    assert not _sleepers(tmp_path)


def _sleepers(tmp_path: Path) -> list[int]:
    """Processes whose working directory is `tmp_path` (what a script left running)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(entry / "cwd").resolve() == tmp_path.resolve() and alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_stop_kills_the_keeper_even_in_another_session(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text("sleep 1000 &\nsetsid vllm serve /m &\nwait\n")
    run: Launch = run_script(script, sandbox=tmp_path / "sandbox")
    try:
        assert alive(run.pid)
        assert run._proc is not None and in_session(run._proc.pid)
    finally:
        stop(run)
    assert not alive(run.pid)
    assert not in_session(run._proc.pid)
    stop(run)  # twice is harmless


# ---------------------------------------------------------------------------------------------
# Bash's lines, and a model of simple scripts


def test_logical_lines() -> None:
    text = textwrap.dedent(
        """\
        export A=1 \\
            B=2
        M="a
        b"
        cat <<EOF
        export NO=1 \\
        EOF
        cmd --x \\
            # comment \\
            --y
        ARR=(
          # --z \\
          --w
        )
        X=$(echo "$(
          pwd)")
        """
    )
    start, end = logical_lines(text)
    assert [(start[n], end[n]) for n in range(1, 17)] == [
        (1, 2), (1, 2), (3, 4), (3, 4), (5, 5), (6, 6), (7, 7), (8, 9), (8, 9), (10, 10),
        (11, 14), (11, 14), (11, 14), (11, 14), (15, 16), (15, 16),
    ]  # fmt: skip


NAMES = ("A", "B", "C")
VALUES = ("1", "2", "two words")
STATEMENTS = st.one_of(
    st.tuples(st.just("export"), st.sampled_from(NAMES), st.sampled_from(VALUES)),
    st.tuples(st.just("assign"), st.sampled_from(NAMES), st.sampled_from(VALUES)),
    st.tuples(st.just("export-name"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("default"), st.sampled_from(NAMES), st.sampled_from(VALUES)),
    st.tuples(st.just("unset"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("empty"), st.sampled_from(NAMES), st.just("")),
)


@settings(max_examples=25, deadline=None)
@given(st.lists(STATEMENTS, max_size=10))
def test_oracle_agrees_with_a_model_of_simple_scripts(program: list[tuple[str, str, str]]) -> None:
    lines: list[str] = []
    value: dict[str, str] = {}
    exported: set[str] = set()
    origin: dict[str, int] = {}
    for kind, name, val in program:
        number = len(lines) + 1
        if kind == "export":
            lines.append(f'export {name}="{val}"')
            value[name], origin[name] = val, number
            exported.add(name)
        elif kind == "assign":
            lines.append(f'{name}="{val}"')
            value[name], origin[name] = val, number
        elif kind == "export-name":
            lines.append(f"export {name}")
            exported.add(name)
        elif kind == "default":
            lines.append(f': "${{{name}:={val}}}"')
            if not value.get(name):
                value[name], origin[name] = val, number
        elif kind == "unset":
            lines.append(f"unset {name}")
            value.pop(name, None)
            origin.pop(name, None)
            exported.discard(name)
        else:
            lines.append(f"{name}=")
            value[name], origin[name] = "", number
    lines.append("exec vllm serve /m")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "serve.sh"
        script.write_text("\n".join(lines) + "\n")
        with launched(script, sandbox=Path(tmp) / "sandbox") as run:
            expected = {n: value[n] for n in exported if n in value}
            assert {k: v for k, v in run.exported.items() if k not in BASH_OWN} == expected
            assert run.assigned == {n: (str(script), origin[n]) for n in expected}
            assert run.launch == (str(script), len(lines))
