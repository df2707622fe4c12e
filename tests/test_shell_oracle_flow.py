"""Differential tests of control flow: dispatch into functions, command strings, launchers.

The statements of tests/test_shell_oracle.py, placed in the shapes launch
scripts give their control flow: one function per role (``start_ra``,
``start_rb``) each with its own launch, reached by ``case "$1"``, by a
built name ``"start_$ROLE" "$@"``, by ``if`` on a caller variable or on
``$#``, or ``set --`` rewriting the arguments into the server's command
before ``exec "$@"``; the launch itself written as ``exec``, ``... &`` then ``wait`` /
``wait -n`` / ``wait $PID``, ``nohup ... | tee log &``, or as a command
string (``CMD="..."; CMD+=" ..."``) run by ``eval``, ``bash -c``, ``exec
$CMD`` or a bare ``$CMD``, with ``K=V`` or ``env $ENVP`` before the program
in the string, or ``exec env K=V`` over continuation lines, or ``conda run`` (whose
activation exports what bash does not trace), or printed by code and captured
(a function's ``echo`` pieces, ``printf ' %q'`` then ``eval``).
bash runs each script; every single-line claim drift makes must be the
line bash ran, and the exec line the one bash launched (or left unpicked).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_shell_oracle import OPTIONS, Script, check, render, simple, workdir

ROLES = ("ra", "rb")
LAUNCHES = (
    "exec",
    "bg_wait",
    "bg_wait_n",
    "bg_wait_pid",
    "nohup_tee",
    "eval",
    "eval_env",
    "exec_unquoted",
    "bare",
    "bash_c_bg",
    "env_string",
    "env_string_bare",
    "env_lines",
    "conda_run",
    "printed",
    "printf_q",
)
DISPATCHES = ("none", "case_arg", "built_name", "if_role", "nargs")

EXAMPLES = settings(
    max_examples=int(os.environ.get("DRIFT_ORACLE_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
"""Each script runs under bash: a few dozen examples by default."""

__all__ = ["workdir"]  # the fixture, shared with the statements' own oracle test


def launch_lines(script: Script, role: str, form: str, indent: str) -> None:
    """The server started for `role` in the shape `form`; its flag lines noted."""
    port = "3000" + str(ROLES.index(role) + 1)
    words = f'python3 -m sglang.serve_{role} --port {port} --role {role} "${{ARGS[@]}}"'
    if form in STRINGS:
        command_string(script, role, port, form, indent)
        return
    if form in ("printed", "printf_q"):
        printed_command(script, role, port, form, indent)
        return
    if form == "exec":
        line = script.add(f"{indent}exec {words}")
    elif form == "conda_run":
        # its activation may export anything, the script's names too (CONDA_SH)
        line = script.add(f"{indent}exec ./conda run -n e{role} --no-capture-output {words}")
    elif form == "env_lines":
        # env K=V over continuation lines: bash places K on the command's first line
        script.add(f"{indent}exec env E{role}=e{role} \\")
        line = script.add(f"{indent}  F{role}=f{role} {words}")
        script.flag_lines[f"sglang.serve_{role}"] = line
    elif form == "nohup_tee":
        line = script.add(f"{indent}nohup {words} 2>&1 | tee {role}.log &")
        script.add(f"{indent}wait")
    else:
        line = script.add(f"{indent}{words} &")
        script.add(
            indent
            + {"bg_wait": "wait", "bg_wait_n": "wait -n", "bg_wait_pid": 'PID=$!; wait "$PID"'}[
                form
            ]
        )
    script.flag_lines[port] = script.flag_lines[role] = line


CONDA_SH = """#!/bin/sh
export CONDA_DEFAULT_ENV="$3" A=conda
shift 4
exec "$@"
"""
"""``conda run -n ENV --no-capture-output CMD``: bash does not trace it (sh), as it does not
trace a real conda's activation scripts."""

STRINGS = {
    "eval": ['eval "$CMD"'],
    "eval_env": ['eval "$CMD"'],
    "exec_unquoted": ["exec ${CMD}"],
    "bare": ["$CMD"],
    "bash_c_bg": ['bash -c "$CMD" &', "wait"],
    "env_string": ["exec $CMD"],
    "env_string_bare": ["$CMD"],
}


def command_string(script: Script, role: str, port: str, form: str, indent: str) -> None:
    """The server's command line built in a string, then run by `form` (`STRINGS`)."""
    local = "local " if indent else ""
    env = f"E{role}=e{role} " if form in ("eval_env", "bash_c_bg") else ""
    if form.startswith("env_string"):
        # ``env K=V ...`` assembled from strings, one value the caller's or a default
        script.add(f'{indent}{local}ENVP="E{role}=e{role}  F{role}=${{F{role}:-f}}"')
        program = script.add(f'{indent}{local}PROG="python3 -m sglang.serve_{role}"')
        first = script.add(f'{indent}{local}CMD="env $ENVP $PROG --port {port}"')
        script.flag_lines[f"sglang.serve_{role}"] = program
    else:
        first = script.add(
            f'{indent}{local}CMD="{env}python3 -m sglang.serve_{role} --port {port}"'
        )
        script.flag_lines[f"sglang.serve_{role}"] = first
    second = script.add(f'{indent}CMD+=" --role {role} ${{ARGS[*]}}"')
    if form == "eval":
        # optional flags under guards on the caller's values: the string's values multiply
        mode = script.add(f'{indent}[ "$MODE" = x ] && CMD+=" --gm{role} m{role}"')
        script.add(f'{indent}[ "$MODE" != y ] && CMD+=" --gn{role} n{role}"')
        script.add(f'{indent}[ -n "$MODE" ] && CMD+=" --gz{role} z{role}"')
        # the caller's F, or none: the live environment says which (F is never set here)
        given = script.add(f'{indent}[ -n "${{F{role}:-}}" ] && CMD+=" --gf{role} $F{role}"')
        script.flag_lines.update({f"{k}{role}": mode + i for i, k in enumerate("mnz")})
        script.flag_lines["cf"] = given
    for line in STRINGS[form]:
        script.add(indent + line)
    script.flag_lines[port] = first
    script.flag_lines[role] = second


def printed_command(script: Script, role: str, port: str, form: str, indent: str) -> None:
    """The command line printed by code and captured by ``$(...)``, then run.

    "printed": a function echoes it piece by piece (one piece under ``if``, a
    log line to stderr), ``CMD=$(build "${ARGS[*]}")``, ``exec ${CMD}``;
    "printf_q": ``$(printf ' %q' ...)`` quotes the words (a value with a
    blank, the caller's or a default), more are appended, ``eval "exec $CMD"``.
    """
    local = "local " if indent else ""
    if form == "printed":
        script.add(f"{indent}build_{role}() {{")
        module = script.add(f'{indent}  echo -n "python3 -m sglang.serve_{role}"')
        mode = script.add(f'{indent}  if [ "$MODE" = x ]; then echo -n " --pm{role} on{role}"; fi')
        script.add(f'{indent}  echo "building {role}" >&2')
        last = script.add(f'{indent}  echo " --port {port} --role {role} $1"')
        script.add(f"{indent}}}")
        script.add(f'{indent}{local}CMD=$(build_{role} "${{ARGS[*]}}")')
        script.add(f"{indent}exec ${{CMD}}")
        script.flag_lines.update({f"sglang.serve_{role}": module, f"on{role}": mode})
        script.flag_lines[port] = script.flag_lines[role] = last
        return
    first = script.add(
        f"{indent}{local}CMD=$(printf ' %q' python3 -m sglang.serve_{role} --port {port}"
        f' --pq "${{F{role}:-a b}}")'
    )
    second = script.add(f'{indent}CMD+=" --role {role} ${{ARGS[*]}}"')
    script.add(f'{indent}eval "exec $CMD"')
    script.flag_lines.update({f"sglang.serve_{role}": first, port: first, role: second})
    script.flag_lines["a b"] = script.flag_lines["cf"] = first


def build_flow(
    top: list[Any], bodies: list[list[Any]], dispatch: str, forms: list[str]
) -> tuple[Script, list[str], dict[str, str]]:
    """The script, the arguments and the environment that pick role rb (ra when undispatched)."""
    script = Script()
    render(top, script)
    if dispatch == "none":
        render(bodies[0], script)
        launch_lines(script, "ra", forms[0], "")
        return script, [], {}
    for role, body, form in zip(ROLES, bodies, forms, strict=True):
        script.add(f"start_{role}() {{")
        script.add("  :")
        render(body, script, "  ")
        launch_lines(script, role, form, "  ")
        script.add("}")
    if dispatch == "case_arg":
        script.add('case "${1:-ra}" in')
        script.add('  ra) shift || true; start_ra "$@" ;;')
        script.add('  rb) shift; start_rb "$@" ;;')
        script.add('  *) echo "usage: $0 {ra|rb}" >&2; exit 1 ;;')
        script.add("esac")
        return script, ["rb"], {}
    if dispatch == "built_name":
        script.add('ROLE="${ROLE:-ra}"')
        script.add('"start_$ROLE" "$@"')
        return script, [], {"ROLE": "rb"}
    if dispatch == "if_role":
        script.add('if [ "$ROLE" = ra ]; then')
        script.add("  start_ra")
        script.add("else")
        script.add("  start_rb")
        script.add("fi")
        return script, [], {"ROLE": "rb"}
    script.add('if [ "$#" -eq 0 ]; then')
    script.add("  start_ra")
    script.add("else")
    script.add('  start_rb "$@"')
    script.add("fi")
    return script, ["x"], {}


@EXAMPLES
@given(
    top=st.lists(simple, max_size=3),
    bodies=st.lists(st.lists(simple, max_size=3), min_size=2, max_size=2),
    dispatch=st.sampled_from(DISPATCHES),
    forms=st.lists(st.sampled_from(LAUNCHES), min_size=2, max_size=2),
    mode=st.sampled_from([None, "x", "y"]),
    caller_f=st.booleans(),
)
# the branch that ran sources a file it writes (drift cannot read it): the other branch's
# line that gives the same value is not the answer
@example(
    top=[],
    bodies=[[("export", "A", "1")], [("helper_env", "A", "1")]],
    dispatch="case_arg",
    forms=["exec", "exec"],
    mode=None,
    caller_f=False,
)
# the same with an eval'd helper's exports, where the other branch exports the caller's value
@example(
    top=[],
    bodies=[[("export_names", ["A", "A"])], [("eval_helper", "A", "1")]],
    dispatch="case_arg",
    forms=["exec", "exec"],
    mode=None,
    caller_f=False,
)
def test_the_branch_that_ran_is_the_one_drift_names(
    workdir: Path,
    top: list[Any],
    bodies: list[list[Any]],
    dispatch: str,
    forms: list[str],
    mode: str | None,
    caller_f: bool,
) -> None:
    folder = workdir / "flow"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    script, args, env = build_flow(top, bodies, dispatch, forms)
    ran = ROLES[0] if dispatch == "none" else ROLES[1]
    if forms[ROLES.index(ran)] in ("printed", "printf_q"):
        # printed by code drift reads: every word the script writes is on one line
        script.sure |= {"--port", "--role", f"--pm{ran}", "--pq"}
    if forms[ROLES.index(ran)] == "eval":
        script.sure |= {f"--g{k}{ran}" for k in "mnzf"}  # each value of the string is run
    (folder / "conda").write_text(CONDA_SH)
    (folder / "conda").chmod(0o755)
    if caller_f:
        env = {**env, **{f"F{role}": "cf" for role in ROLES}}
    check(folder, script, mode, None, args=args, given=env, unsure_exec=True)


PASSES = (
    "exec_args",
    "string_args",
    "string_star",
    "function",
    "array",
    "case_shift",
    "while",
    "unread",
    "set_own",
    "set_dispatch",
    "parsed_array",
    "getopt",
    "mapfile",
)
"""How a script forwards the flags its caller gives to the server (see build_passing)."""


def set_arguments(script: Script, form: str, launch: str) -> int:
    """The arguments rewritten into the server's command by ``set --``, then ``exec "$@"``;
    the line of that ``set`` (where the caller's words are taken into the command)."""
    if form == "set_own":
        line = script.add(f'set -- {launch} "$@"')
        script.add('exec "$@"')
        return line
    # an image entrypoint: no arguments means serve; `serve` rewrites the arguments into
    # the server's command; anything else runs as given, and so may hold any flag, written
    # ones too
    script.unread = True
    script.add('if [ "$#" -eq 0 ]; then')
    script.add("  set -- serve")
    script.add("fi")
    script.add('case "$1" in')
    script.add("  serve) shift")
    line = script.add(f'    set -- {launch} "$@" ;;')
    script.add(f'  -*) set -- {launch} --other "$@" ;;')
    script.add("esac")
    script.add('exec "$@"')
    return line


def parsed_arguments(script: Script, form: str, launch: str) -> tuple[int, int]:
    """An option parser before the launch: getopt, or a loop that keeps the rest in an
    array; the line the caller's flags are expected at, and the launch's line."""
    if form == "getopt":
        # getopt rearranges the arguments, eval set -- puts them back, a loop takes some
        script.add('OPTS=$(getopt -o "" --long keep,c1:,c2:,c3,port: -n serve -- "$@")')
        script.add('eval set -- "$OPTS"')
        script.add("while true; do")
        script.add('  case "$1" in')
        script.add("    --keep) shift ;;")
        script.add("    --) shift; break ;;")
        script.add("    *) break ;;")
        script.add("  esac")
        script.add("done")
        line = script.add(f'exec {launch} "$@"')
        return line, line
    # parsed_array:
    # main "$@" -> a parser stores the rest in an array (after shifts of 1 or 2 words),
    # and a launcher function gets it as "${EXTRA[@]}": the flags are the array's line's
    script.add("EXTRA=()")
    script.add("parse() {")
    script.add("  while [ $# -gt 0 ]; do")
    script.add('    case "$1" in')
    script.add("      --keep) shift 2 || shift ;;")
    line = script.add('      *) EXTRA=("$@"); break ;;')
    script.add("    esac")
    script.add("  done")
    script.add("}")
    script.add("start() {")
    port = script.add(f'  exec {launch} "$@"')
    script.add("}")
    script.add('parse "$@"')
    script.flag_lines["w0"] = script.add('start --c0 w0 "${EXTRA[@]}"')
    return line, port


def build_passing(top: list[Any], form: str, given: list[str]) -> tuple[Script, list[str]]:
    """A script that passes its arguments to the server in the shape `form`; the arguments.

    Each flag the caller gives is expected at the line where the arguments
    enter the command line (``"$@"``, ``$1``); a flag the script writes too
    (``--port``) comes from two lines, so no single one may be named.
    """
    script = Script()
    script.lines += [f"O{k}=d{k}" for k in OPTIONS]  # the options' defaults, as build() has them
    render(top, script)
    launch = 'python3 -m sglang.serve --port 30000 "${ARGS[@]}"'
    args = [*given]
    if form == "exec_args":
        line = port = script.add(f'exec {launch} "$@"')
    elif form == "unread":
        # a file drift cannot know the path of sets $EXTRA: its flags are not the caller's
        script.add('source "./role_${ROLE:-a}.sh"')
        script.unread = True  # $EXTRA may hold the options' flags too: unsure, rightly
        line = port = script.add(f'exec {launch} $EXTRA "$@"')
    elif form in ("string_args", "string_star"):
        line = script.add(
            f'CMD="python3 -m sglang.serve --port 30000 {"$@" if form == "string_args" else "$*"}"'
        )
        port = line
        script.add("exec $CMD")
    elif form == "function":
        script.add("start() {")
        line = port = script.add(f'  exec {launch} "$@"')
        script.add("}")
        script.add('start "$@"')
    elif form in ("set_own", "set_dispatch"):
        line = port = set_arguments(script, form, launch)
        args = ["serve", *given] if form == "set_dispatch" else args
    elif form == "array":
        line = script.add('ARGS+=("$@")')
        port = script.add(f"exec {launch}")
    elif form == "case_shift":
        args = ["serve", *given]
        script.add('case "${1:-serve}" in')
        script.add("  serve) shift")
        line = port = script.add(f'    exec {launch} "$@" ;;')
        script.add(f'  *) exec {launch} --other "$@" ;;')
        script.add("esac")
    elif form == "mapfile":
        # flags one word a line in a file, comments left out, then the caller's
        script.add("""mapfile -t EXTRA < <(grep -v '^#' "$(dirname "$0")/extra.txt")""")
        line = port = script.add(f'exec {launch} "${{EXTRA[@]}}" "$@"')
        script.flag_names["--c8"] = EXTRA_TXT.splitlines().index("--c8") + 1
        script.sure.add("--c8")
    elif form in ("getopt", "parsed_array"):
        line, port = parsed_arguments(script, form, launch)
    else:
        script.add('EXTRA=""')
        script.add("while [ $# -gt 0 ]; do")
        script.add("  case $1 in")
        script.add("    --keep) ;;")
        line = script.add('    *) EXTRA="$EXTRA $1" ;;')
        script.add("  esac")
        script.add("  shift")
        script.add("done")
        port = script.add(f"exec {launch} $EXTRA")
    script.flag_lines["30000"] = script.flag_lines["sglang.serve"] = port
    for word in given:
        flag = word.partition("=")[0]
        if flag == "--port" and port != line:
            continue  # written at one line, given through another: no single line
        if flag == "--keep" and form == "while":
            continue  # the loop takes it
        if flag.startswith("--"):
            script.passed[flag] = line
        if flag.startswith("--c") and form not in (
            "string_args",
            "string_star",
            "while",
            "unread",
            "set_dispatch",  # the arm that runs the arguments as given could hold them too
        ):
            # one quoted "$@" holds them; a string or a split value could hold a value's words
            script.sure.add(flag)
    return script, args


EXTRA_TXT = "# flags of the site\n--c8\nw8\n"
"""The file the mapfile form reads: its flag is placed at its own line there."""

caller_flags = st.lists(
    st.sampled_from(["--c1 w1", "--c2=w2", "--c3", "--port 1", "--keep", "x y"]),
    max_size=4,
    unique=True,
)


@EXAMPLES
@given(
    top=st.lists(simple, max_size=3),
    form=st.sampled_from(PASSES),
    given_flags=caller_flags,
    mode=st.sampled_from([None, "x", "y"]),
)
def test_a_flag_the_caller_passes_is_placed_at_the_line_that_passes_it(
    workdir: Path, top: list[Any], form: str, given_flags: list[str], mode: str | None
) -> None:
    folder = workdir / "passing"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    given = [w for item in given_flags for w in (item.split(" ") if item != "x y" else [item])]
    script, args = build_passing(top, form, given)
    (folder / "role_a.sh").write_text('EXTRA="--c9 w9 --c1 w8"\n')
    (folder / "extra.txt").write_text(EXTRA_TXT)
    check(folder, script, mode, None, args=args)
