"""Differential tests: bash runs the script, drift reads it; drift may be unsure, never wrong.

Scripts are generated from a small grammar (exports, defaults, ``if`` and
``case`` on a variable the caller sets, ``[ ] && export``, arrays, a sourced
env file under ``set -a``, ``exec`` or a background launch) and run for real
under bash with stub launchers (tests/bash_oracle.py). Every single-line
claim drift makes about a live variable or flag must be the line bash ran
last for it; the exec line must be the one bash launched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bash_oracle import launched
from bench_scripts import attribute_live  # noqa: E402
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from drift.collectors.flags import parse_flags
from drift.collectors.scripts import collect_script
from drift.collectors.start_folder import StartFolder
from drift.facts import CollectContext, CollectionError, Fact

NAMES = ("A", "B", "C")
VALUES = ("1", "2", "a-b")
MANY = 30
"""Arms of a ``case`` that all set one variable: more values than drift keeps apart."""
OPTIONS = ("1", "2", "3")
"""Options the caller may give the script (``--o1=v1``, ``--o2 v2``), each with a default."""


@dataclass
class Script:
    """A generated script: its lines, its env file, and which line wrote each flag token."""

    lines: list[str] = field(default_factory=lambda: ["#!/bin/bash", "ARGS=()"])
    env_file: list[str] = field(default_factory=list)
    flag_lines: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    flag_names: dict[str, int] = field(default_factory=dict)  # flag -> the line writing it
    in_strings: int = 0  # options in the OPTS string
    passed: dict[str, int] = field(default_factory=dict)  # a caller's flag -> the line passing it
    sure: set[str] = field(default_factory=set)  # caller's flags only one script word can hold
    unread: bool = False  # a sourced file drift cannot read may have changed any value
    xargs_file: list[str] = field(default_factory=list)  # KEY=VALUE lines export $(...) reads

    def linked(self, flag: str) -> bool:
        """True if drift must link the flag: an option, in a string of few enough values.

        A string that grows by several options, each of three values, under
        branches soon has more values than drift tells apart (MAX_ALTERNATIVES):
        unsure, rightly.
        """
        if self.unread:
            return False  # code drift did not read may set anything, the arguments too
        return (flag in self.flag_names and self.in_strings <= 1) or flag in self.sure

    def add(self, line: str) -> int:
        self.lines.append(line)
        return len(self.lines)

    def token(self) -> str:
        self.tokens += 1
        return f"t{self.tokens}"


names = st.sampled_from(NAMES)
values = st.sampled_from(VALUES)
simple = st.one_of(
    st.tuples(st.just("export"), names, values),
    st.tuples(st.just("assign"), names, values),
    st.tuples(st.just("export_name"), names),
    st.tuples(st.just("default"), names, values),
    st.tuples(st.just("colon_default"), names, values),
    st.tuples(st.just("unset"), names),
    st.tuples(st.just("and"), names, values),
    st.tuples(st.just("oneline_if"), names, values, values),
    st.tuples(st.just("flag")),
    st.tuples(st.just("option"), st.sampled_from(OPTIONS), st.booleans()),
    st.tuples(st.just("glued"), st.sampled_from(OPTIONS)),
    st.tuples(st.just("arith_flag"), st.sampled_from(OPTIONS)),
    st.tuples(st.just("source"), st.lists(st.tuples(names, values), min_size=1, max_size=3)),
    # declare -i: what is assigned is computed, then and on every later assignment
    # (not on a name read below: read of a word into an integer gives 0, again and again,
    # and a re-assignment of the same value by read is one bash's trace does not show)
    st.tuples(
        st.just("declare_i"), st.sampled_from(("B", "C")), st.sampled_from(("2*4", "7/2", "010"))
    ),
    # export of several names on one line, after whatever set them (or not)
    st.tuples(
        st.just("export_names"), st.lists(st.sampled_from(("A", "B", "R")), min_size=2, max_size=3)
    ),
    # more branches giving one variable than drift tells values apart
    st.tuples(st.just("many_arms"), names),
    # read NAME from a here-string, or from a prompt with nothing to read
    st.tuples(st.just("read_here"), st.sampled_from(("A", "R")), values),
    st.tuples(st.just("read_prompt"), st.sampled_from(("A", "R"))),
    # export $(grep ... FILE | sed ... | xargs) of a file the caller may name, notes after values
    st.tuples(st.just("xargs_env"), st.lists(st.tuples(names, values), min_size=1, max_size=3)),
    # arithmetic that assigns: (( X++ )), let X+=2, $(( X += 5 ))
    st.tuples(
        st.just("arith"),
        st.sampled_from(("B", "C", "R")),
        st.sampled_from(("(( {0}++ ))", "let {0}-=1", ": $(( {0} += 5 ))")),
    ),
    # exports a helper prints, eval'd: the doubt is on what runs after it only
    st.tuples(st.just("eval_helper"), names, values),
    # an env file a command writes as the script runs, then sourced
    st.tuples(st.just("helper_env"), names, values),
)
statement = st.one_of(
    simple,
    st.tuples(st.just("if"), st.lists(simple, max_size=3), st.lists(simple, max_size=3)),
    st.tuples(st.just("case"), st.lists(simple, max_size=3), st.lists(simple, max_size=3)),
)


def render_option(k: str, in_string: bool, script: Script, indent: str) -> None:
    """An option's value, the caller's or its default, expanded unquoted.

    In an array element or in a string of flags split where it is expanded.
    """
    flag = f"--fo{k}-{script.token()}"
    if in_string:
        line = script.add(f'{indent}OPTS="$OPTS {flag} $O{k}"')
        script.in_strings += 1
    else:
        line = script.add(f"{indent}ARGS+=({flag} $O{k})")
    script.flag_names[flag] = line


def render_word_flag(kind: str, k: str, script: Script, indent: str) -> None:
    """A flag beside a value from elsewhere: glued to it, or followed by a computed number.

    "glued": ``--flag=$G1`` in one word, its value written at another line;
    "arith_flag": ``--flag $((...))`` unquoted, one word whatever follows it.
    """
    flag = f"--f{kind[0]}{k}-{script.token()}"
    if kind == "glued":
        value = f"G{script.tokens}"
        script.add(f"{indent}{value}=g{k}")
        script.flag_names[flag] = script.add(f'{indent}ARGS+=("{flag}=${value}")')
    else:
        script.flag_names[flag] = script.add(f"{indent}ARGS+=({flag} $(( ${{#O{k}}} + 1 )))")


def render_state(stmt: Any, script: Script, indent: str) -> bool:
    """The statements of declarations and reads (``declare -i``, ``read``); False for others."""
    kind = stmt[0]
    if kind == "declare_i":
        script.add(f"{indent}declare -gi {stmt[1]}={stmt[2]}")  # -g: global in a function too
    elif kind == "export_names":
        script.add(f"{indent}export {' '.join(stmt[1])}")
    elif kind == "many_arms":
        # one arm a line, the first giving a value an earlier line may give too; the word
        # is not one the live environment decides ($NONE is never set)
        script.add(f'{indent}case "$MODE$NONE" in')
        for k in range(MANY):
            script.add(f"{indent}  k{k}) {stmt[1]}={'1' if k == 0 else f'v{k}'} ;;")
        script.add(f"{indent}esac")
    elif kind == "read_here":
        script.add(f'{indent}read -r {stmt[1]} _ <<< "r{stmt[2]}{script.token()} rest"')
    elif kind == "read_prompt":
        # nothing to read: the name is emptied, then given a value of its own
        script.add(f'{indent}read -r -p "? " {stmt[1]} || {stmt[1]}=p{script.token()}')
    elif kind == "xargs_env":
        script.xargs_file += [f"{name}={value}  # note {script.token()}" for name, value in stmt[1]]
        script.add(
            f"{indent}export $(grep -v '^#' \"${{XF:-./xargs.env}}\" | sed 's/#.*//' | xargs)"
        )
        script.unread = True  # the caller's file may set anything
    elif kind == "arith":
        script.add(indent + stmt[2].format(stmt[1]))
    elif kind == "eval_helper":
        script.add(f"{indent}eval \"$(printf 'export %s=%s\\n' {stmt[1]} {stmt[2]})\"")
        script.unread = True
    elif kind == "helper_env":
        written = "> ./written.env" if script.tokens % 2 else "| tee ./written.env >/dev/null"
        script.token()
        script.add(f"{indent}printf '%s\\n' {stmt[1]}={stmt[2]} {written}")
        script.add(f"{indent}set -a; . ./written.env; set +a")
        script.unread = True
    else:
        return False
    return True


def render_flag(stmt: Any, script: Script, indent: str) -> None:
    """A flag the script writes: alone, an option with its default, or beside another value."""
    kind = stmt[0]
    if kind == "flag":
        token = script.token()
        line = script.add(f"{indent}ARGS+=(--f{token} v{token})")
        script.flag_lines[f"v{token}"] = line
    elif kind == "option":
        render_option(stmt[1], stmt[2], script, indent)
    else:
        render_word_flag(kind, stmt[1], script, indent)


def render(statements: list[Any], script: Script, indent: str = "") -> None:
    for stmt in statements:
        kind = stmt[0]
        if render_state(stmt, script, indent):
            continue
        if kind == "export":
            script.add(f"{indent}export {stmt[1]}={stmt[2]}")
        elif kind == "assign":
            script.add(f"{indent}{stmt[1]}={stmt[2]}")
        elif kind in ("export_name", "unset"):
            script.add(f"{indent}{kind.removesuffix('_name')} {stmt[1]}")
        elif kind == "default":
            script.add(f'{indent}export {stmt[1]}="${{{stmt[1]}:-{stmt[2]}}}"')
        elif kind == "colon_default":
            script.add(f'{indent}: "${{{stmt[1]}:={stmt[2]}}}"')
        elif kind == "and":
            script.add(f'{indent}[ "$MODE" = y ] && export {stmt[1]}={stmt[2]}')
        elif kind == "oneline_if":
            name, a, b = stmt[1:]
            script.add(
                f'{indent}if [ "$MODE" = x ]; then export {name}={a}; else export {name}={b}; fi'
            )
        elif kind in ("flag", "option", "arith_flag", "glued"):
            render_flag(stmt, script, indent)
        elif kind == "source":
            script.env_file += [f"{name}={value}" for name, value in stmt[1]]
            script.add(f"{indent}set -a; source ./gen.env; set +a")
        elif kind == "if":
            script.add(f'{indent}if [ "$MODE" = x ]; then')
            script.add(f"{indent}  :")
            render(stmt[1], script, indent + "  ")
            script.add(f"{indent}else")
            script.add(f"{indent}  :")
            render(stmt[2], script, indent + "  ")
            script.add(f"{indent}fi")
        elif kind == "case":
            script.add(f'{indent}case "$MODE" in')
            script.add(f"{indent}  y)")
            render(stmt[1], script, indent + "    ")
            script.add(f"{indent}    ;;")
            script.add(f"{indent}  *)")
            render(stmt[2], script, indent + "    ")
            script.add(f"{indent}    ;;")
            script.add(f"{indent}esac")


def parse_loop(style: str) -> list[str]:
    """Defaults, then a loop that takes ``--oK=V`` / ``--oK V`` from the arguments (`style`)."""
    lines = [f"O{k}=d{k}" for k in OPTIONS]
    if style == "for":
        lines.append('for arg in "$@"; do')
        lines.append('  case "$arg" in')
        lines += [f'    --o{k}=*) O{k}="${{arg#*=}}" ;;' for k in OPTIONS]
        lines += ["  esac", "done"]
    else:
        lines.append("while [ $# -gt 0 ]; do")
        lines.append("  case $1 in")
        for k in OPTIONS:
            lines.append(f"    --o{k}) O{k}=$2; shift ;;")
            lines.append(f"    --o{k}=*) O{k}=${{1#*=}} ;;")
        lines += ["    *) ;;", "  esac", "  shift", "done"]
    return lines


def build(statements: list[Any], background: bool, loop: str = "for") -> Script:
    script = Script()
    script.lines += ['OPTS=""', *parse_loop(loop)]
    render(statements, script)
    launch = 'python3 -m sglang.serve --port 30000 "${ARGS[@]}" $OPTS'
    if background:
        script.flag_lines["30000"] = script.add(f"{launch} &")
        script.add("wait")
    else:
        script.flag_lines["30000"] = script.add(f"exec {launch}")
    return script


@dataclass
class Tally:
    """How many live values drift linked to one line, and how many it left unsure."""

    linked: int = 0
    unsure: int = 0


TALLY = {"env": Tally(), "flag": Tally(), "exec": Tally()}


def check(
    folder: Path,
    script: Script,
    mode: str | None,
    preset: str | None,
    args: Sequence[str] = (),
    given: Mapping[str, str] | None = None,
    unsure_exec: bool = False,
) -> None:
    """Run the script under bash (with `args`, and `given` in its environment) and judge drift.

    The exec line is the one bash launched: named alone by the script's
    facts, or, among several candidates, picked by the live command line
    (left unpicked only if `unsure_exec`).
    """
    path = folder / "serve.sh"
    path.write_text("\n".join(script.lines) + "\n")
    (folder / "gen.env").write_text("\n".join(script.env_file) + "\n")
    (folder / "xargs.env").write_text("\n".join(script.xargs_file) + "\n")
    env = {k: v for k, v in (("MODE", mode), ("A", preset)) if v is not None}
    env.update(given or {})
    facts = {
        item.key: item
        for item in collect_script("s", str(path), CollectContext())
        if isinstance(item, Fact)
    }
    # drift told the folder bash starts the script in (as a unit's WorkingDirectory= tells
    # it), and not told (a script started by hand)
    told = {
        item.key: item
        for item in collect_script(
            "s", str(path), CollectContext(), start=StartFolder(str(folder), "the test")
        )
        if isinstance(item, Fact)
    }
    with launched(path, sandbox=folder / "sandbox", env=env, args=list(args), cwd=folder) as run:
        for known in (facts, told):
            judge(known, run, script, unsure_exec)


def judge(facts: dict[str, Fact], run: Any, script: Script, unsure_exec: bool) -> None:
    """Every single-line claim of `facts` against what bash did in `run`."""
    # As the analysis does: every value of the process attributed together.
    live_flags = parse_flags(run.argv)
    found = attribute_live(facts, run.argv, run.env)
    for name, value in run.exported.items():
        attribution = found.get(f"export:{name}")
        spot = attribution.single if attribution is not None else None
        if spot is None:
            TALLY["env"].unsure += name in run.assigned
            if os.environ.get("DRIFT_ORACLE_DEBUG") and name in run.assigned:
                print("UNSURE", name, value, run.assigned.get(name), attribution)
                print("\n".join(f"{i}: {t}" for i, t in enumerate(script.lines, 1)))
            continue
        truth = run.assigned.get(name)
        if truth is None and spot.given:
            TALLY["env"].linked += 1  # "the value it was given, kept at this line"
            continue
        assert truth is not None, f"{name}={value}: drift says {spot}, bash assigned none"
        assert (os.path.realpath(spot.file), spot.line) == (
            os.path.realpath(truth[0]),
            truth[1],
        ), f"{name}={value}: drift says {spot}, bash ran {truth}"
        TALLY["env"].linked += 1
    for flag, value in live_flags.items():
        attribution = found.get(f"flag:{flag}")
        spot = attribution.single if attribution is not None else None
        # A caller's option or its default, taken by a parsing loop: one line, always.
        assert spot is not None or not script.linked(flag), (
            f"{flag} {value}: drift says {attribution and attribution.words()}"
        )
        if spot is None:
            TALLY["flag"].unsure += 1
            continue
        expected = script.passed.get(flag) or script.flag_names.get(
            flag, script.flag_lines.get(value)
        )
        if flag == "-m" and expected is None:
            expected = run.launch[1]
        assert spot.line == expected, f"{flag} {value}: drift says {spot}, not line {expected}"
        TALLY["flag"].linked += 1
    exec_line = facts["exec"].provenance.get("line")
    picked = found.get("exec")
    if exec_line is None and picked is not None and picked.single is not None:
        exec_line = picked.single.line  # the live command line chose among candidates
    # code drift does not read (an eval'd helper's output, a file written then sourced) may
    # itself exec another program: then the exec is left unpicked, rightly
    unsure_exec = unsure_exec or script.unread
    assert exec_line == run.launch[1] or (exec_line is None and unsure_exec), (
        f"exec: drift says {exec_line}, bash launched {run.launch}"
    )
    if picked is None or picked.single is None:
        TALLY["exec"].unsure += 1
    else:
        TALLY["exec"].linked += 1


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("oracle")
    for kind, tally in TALLY.items():
        total = tally.linked + tally.unsure
        if total:
            print(f"\n{kind}: {tally.linked} of {total} linked to one line")


@settings(
    max_examples=int(os.environ.get("DRIFT_ORACLE_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    statements=st.lists(statement, min_size=1, max_size=8),
    background=st.booleans(),
    mode=st.sampled_from([None, "x", "y", "k0", "k7"]),
    preset=st.sampled_from([None, "1"]),
    loop=st.sampled_from(["for", "while"]),
    given_options=st.lists(st.tuples(st.sampled_from(OPTIONS), st.booleans()), max_size=3),
)
# An export made in both arms of two branches, the branch choice resting on a
# string of options whose values the caller may give.
@example(
    statements=[
        ("option", "1", True),
        ("if", [], [("flag",), ("export", "A", "1")]),
        ("case", [("flag",), ("option", "1", True)], [("export", "A", "1")]),
        ("case", [], [("flag",)]),
    ],
    background=False,
    mode=None,
    preset=None,
    loop="for",
    given_options=[],
)
@example(
    statements=[
        ("if", [], [("flag",)]),
        ("if", [], [("flag",)]),
        ("case", [], [("flag",)]),
        ("case", [("option", "1", False)], []),
    ],
    background=False,
    mode="y",
    preset=None,
    loop="for",
    given_options=[],
)
# declare -i computes what is assigned; a variable set in more branches than drift keeps apart
@example(
    statements=[("declare_i", "B", "2*4"), ("export", "A", "1"), ("many_arms", "A")],
    background=False,
    mode="k0",
    preset=None,
    loop="for",
    given_options=[],
)
# an env file the script writes, then sources: drift cannot read it before the run
@example(
    statements=[("export", "A", "1"), ("helper_env", "A", "1")],
    background=False,
    mode=None,
    preset=None,
    loop="for",
    given_options=[],
)
# a read of the caller's variable, not exported by the script, where the other branch exports it
@example(
    statements=[
        ("read_prompt", "A"),
        ("case", [("export", "A", "1"), ("read_here", "A", "1")], []),
    ],
    background=False,
    mode=None,
    preset="1",
    loop="for",
    given_options=[],
)
# arithmetic that assigns, back to a value an earlier line gave
@example(
    statements=[("export", "A", "1"), ("arith", "A", "(( {0}++ ))"), ("arith", "A", "let {0}-=1")],
    background=False,
    mode="k0",
    preset=None,
    loop="for",
    given_options=[],
)
def test_every_single_line_claim_is_the_line_bash_ran(
    workdir: Path,
    statements: list[Any],
    background: bool,
    mode: str | None,
    preset: str | None,
    loop: str,
    given_options: list[tuple[str, bool]],
) -> None:
    folder = workdir / "case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    args: list[str] = []
    for k, joined in given_options:
        # `for arg in "$@"` reads only the joined form; the while loop reads both
        args += [f"--o{k}=v{k}"] if joined or loop == "for" else [f"--o{k}", f"v{k}"]
    check(folder, build(statements, background, loop), mode, preset, tuple(args))


# A script bash refuses is a blind spot, never a crash or a guess.
fragments = st.sampled_from(
    [
        "export A=1\n",
        "if [ x ]; then\n",
        "fi\n",
        "case $M in\n",
        "a) B=2 ;;\n",
        "esac\n",
        '"',
        "'",
        "$(",
        ")",
        "{",
        "}",
        "ARGS+=(--x 1)\n",
        "exec srv --p 1\n",
        "\\\n",
        "done\n",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(fragments, max_size=12).map("".join))
def test_a_script_bash_rejects_is_a_collection_error(tmp_path_factory: Any, text: str) -> None:
    folder = tmp_path_factory.mktemp("reject")
    path = folder / "serve.sh"
    path.write_text(text)
    rejected = subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode != 0
    items = list(collect_script("s", str(path), CollectContext()))
    errors = {e.key for e in items if isinstance(e, CollectionError)}
    if rejected:
        assert {"export:", "flag:", "exec"} <= errors, text
