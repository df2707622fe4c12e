"""Relative paths in a serve script are read from the folder bash was started in.

bash reads ``. ./common.sh``, ``source lib/env.sh``, ``./child.sh`` and
``[ -f ./flag.conf ]`` from its working folder: the script's own folder
when the operator stands there, ``/`` under systemd by default, anywhere
else by hand. Generated scripts run for real under bash (tests/bash_oracle.py)
from each of those folders, next to a folder holding files of the same
names with other contents; drift reads them told the folder, and not told.
Every single-line claim must be what bash did, and every variable drift says
the launch gets for sure must be in the live process.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bash_oracle import Launch, LaunchError, launched
from bench_scripts import attribute_live  # noqa: E402
from conftest import run_drift
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift.collectors.scripts import collect_script
from drift.collectors.start_folder import StartFolder
from drift.facts import CollectContext, CollectionError, Fact

NAMES = ("A", "B", "C")
VALUES = ("1", "2")
SOURCES = (". ./common.sh", "source common.sh", "source ./lib/env.sh", "source lib/env.sh")
SERVER = "python3 -m sglang.launch_server"


@dataclass
class Layout:
    """A serve script in opt/serve, its files, and files of the same names elsewhere."""

    lines: list[str] = field(default_factory=lambda: ["#!/bin/bash"])
    files: dict[str, list[str]] = field(default_factory=dict)  # relative path -> lines
    decoys: dict[str, list[str]] = field(default_factory=dict)  # the same names, elsewhere

    def write(self, base: Path) -> Path:
        home = base / "opt" / "serve"
        for folder, files in ((home, self.files), (base / "elsewhere", self.decoys)):
            folder.mkdir(parents=True, exist_ok=True)
            for rel, lines in files.items():
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_text("\n".join(lines) + "\n")
                (folder / rel).chmod(0o755)
        script = home / "serve.sh"
        script.write_text("\n".join(self.lines) + "\n")
        return script


exports = st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES)), max_size=3)
statement = st.one_of(
    st.tuples(st.just("export"), st.sampled_from(NAMES), st.sampled_from(VALUES)),
    st.tuples(st.just("source"), st.sampled_from(SOURCES)),
    st.tuples(st.just("test")),
    st.tuples(st.just("cd")),
    st.tuples(st.just("cd_lib")),
)
# a decoy: absent, the same file, or one that sets other values on other lines
decoy = st.sampled_from(["absent", "same", "other"])


def build(
    statements: list[Any],
    launch: str,
    common: list[tuple[str, str]],
    env_sh: list[tuple[str, str]],
    decoys: dict[str, str],
    flag_conf: tuple[bool, bool],
) -> Layout:
    layout = Layout()
    for stmt in statements:
        if stmt[0] == "export":
            layout.lines.append(f"export {stmt[1]}={stmt[2]}")
        elif stmt[0] == "source":
            layout.lines.append(stmt[1])
        elif stmt[0] == "test":
            layout.lines.append("[ -f ./flag.conf ] && export F=on")
        elif stmt[0] == "cd_lib":
            layout.lines.append("cd lib")
        else:
            layout.lines.append('cd "$(dirname "$0")"')
    flags = '--a "${A:-none}" --b "${B:-none}" --port 30000'
    if launch == "exec":
        layout.lines.append(f"exec {SERVER} {flags}")
    else:
        layout.lines.append("./child.sh" if launch == "child" else "bash child.sh")
    own = {
        "common.sh": [f"export {n}={v}" for n, v in common],
        "lib/env.sh": [f"export {n}={v}" for n, v in env_sh],
        "child.sh": ["#!/bin/bash", "export C=child", f'exec {SERVER} {flags} --c "$C"'],
    }
    layout.files = dict(own)
    for rel, kind in decoys.items():
        if kind == "same":
            layout.decoys[rel] = list(own[rel])
        elif kind == "other":
            # other values, one line further down: a claim of the script folder's line is wrong
            layout.decoys[rel] = ["# elsewhere", *(line.replace("=", "=x") for line in own[rel])]
    for folder, present in zip((layout.files, layout.decoys), flag_conf, strict=True):
        if present:
            folder["flag.conf"] = ["# present"]
    return layout


def facts_of(script: Path, start: StartFolder | None) -> dict[str, Fact]:
    items = collect_script("s", str(script), CollectContext(), start=start)
    return {item.key: item for item in items if isinstance(item, Fact)}


@dataclass
class Tally:
    linked: int = 0
    unsure: int = 0


TALLY = {"told": Tally(), "untold": Tally()}


def judge(facts: dict[str, Fact], run: Launch, tally: Tally) -> None:
    """No single-line claim differs from bash; nothing claimed for sure is missing live."""
    found = attribute_live(facts, run.argv, run.env)
    for name in run.exported:
        attribution = found.get(f"export:{name}")
        spot = attribution.single if attribution is not None else None
        truth = run.assigned.get(name)
        if spot is None:
            tally.unsure += truth is not None
            continue
        assert truth is not None, f"{name}: drift says {spot}, bash assigned none"
        assert (os.path.realpath(spot.file), spot.line) == (
            os.path.realpath(truth[0]),
            truth[1],
        ), f"{name}={run.env[name]}: drift says {spot}, bash ran {truth}"
        tally.linked += 1
    for flag in ("--a", "--b", "--c"):
        attribution = found.get(f"flag:{flag}")
        spot = attribution.single if attribution is not None else None
        if spot is None or flag not in run.argv:
            continue
        assert (os.path.realpath(spot.file), spot.line) == (
            os.path.realpath(run.launch[0]),
            run.launch[1],
        ), f"{flag}: drift says {spot}, bash launched {run.launch}"
        truth = run.assigned.get(flag[2:].upper())
        if truth is not None:
            assert spot.value is not None, f"{flag}: value from the flag's line, bash {truth}"
            file, _, line = spot.value.rpartition(":")
            assert (os.path.realpath(file), int(line)) == (os.path.realpath(truth[0]), truth[1])
    exec_fact = facts.get("exec")
    if exec_fact is not None and isinstance(exec_fact.provenance.get("line"), int):
        where = (exec_fact.provenance["file"], exec_fact.provenance["line"])
    else:
        picked = found.get("exec")
        single = picked.single if picked is not None else None
        where = (single.file, single.line) if single is not None else None
    if where is not None:
        assert (os.path.realpath(where[0]), where[1]) == (
            os.path.realpath(run.launch[0]),
            run.launch[1],
        ), f"exec: drift says {where}, bash launched {run.launch}"
    for key, fact in facts.items():
        # One line, no condition, one literal value: drift says the launch gets it for sure.
        name = key.removeprefix("export:")
        sure = "line" in fact.provenance and not {"when", "possible", "inherited"} & set(
            fact.provenance
        )
        if key.startswith("export:") and sure:
            assert run.env.get(name) == fact.value, (
                f"drift: {name}={fact.value} from {fact.provenance['file']}:"
                f"{fact.provenance['line']}, live: {run.env.get(name)!r}"
            )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("start")
    for mode, tally in TALLY.items():
        total = tally.linked + tally.unsure
        if total:
            print(f"\n{mode}: {tally.linked} of {total} variables linked to one line")


@settings(
    max_examples=int(os.environ.get("DRIFT_ORACLE_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    statements=st.lists(statement, min_size=1, max_size=6),
    launch=st.sampled_from(["exec", "child", "bash_child"]),
    common=exports,
    env_sh=exports,
    decoys=st.fixed_dictionaries({"common.sh": decoy, "lib/env.sh": decoy, "child.sh": decoy}),
    flag_conf=st.tuples(st.booleans(), st.booleans()),
    started=st.sampled_from(["home", "root", "elsewhere"]),
)
def test_relative_paths_are_read_from_where_bash_was_started(
    workdir: Path,
    statements: list[Any],
    launch: str,
    common: list[tuple[str, str]],
    env_sh: list[tuple[str, str]],
    decoys: dict[str, str],
    flag_conf: tuple[bool, bool],
    started: str,
) -> None:
    base = workdir / "case"
    shutil.rmtree(base, ignore_errors=True)
    script = build(statements, launch, common, env_sh, decoys, flag_conf).write(base)
    folder = {"home": script.parent, "root": Path("/"), "elsewhere": base / "elsewhere"}[started]
    told = facts_of(script, StartFolder(str(folder), "the test started it there"))
    untold = facts_of(script, None)
    try:
        with launched(script, sandbox=base / "sandbox", cwd=folder, timeout=5) as run:
            judge(told, run, TALLY["told"])
            judge(untold, run, TALLY["untold"])
    except LaunchError:
        return  # bash found no child.sh where it was started: nothing was launched


def test_told_the_start_folder_a_file_that_is_not_there_gives_nothing(tmp_path: Path) -> None:
    """The systemd incident: WorkingDirectory= unset, so bash ran in / and found no common.sh."""
    layout = Layout(
        lines=["#!/bin/bash", ". ./common.sh", "export TP=8", f"exec {SERVER} --tp $TP"],
        files={"common.sh": ["export COMMON=1"]},
    )
    script = layout.write(tmp_path)
    start = StartFolder("/", "unit decode.service sets no WorkingDirectory=")
    items = list(collect_script("s", str(script), CollectContext(), start=start))
    facts = {i.key for i in items if isinstance(i, Fact)}
    assert "export:COMMON" not in facts and "export:TP" in facts
    gaps = [i.message for i in items if isinstance(i, CollectionError)]
    assert gaps == [
        f"{script}:2: sources ./common.sh: no such file in / "
        "(unit decode.service sets no WorkingDirectory=)"
    ]
    with launched(script, sandbox=tmp_path / "sandbox", cwd=Path("/")) as run:
        assert "COMMON" not in run.env  # what bash did, in /
        judge({i.key: i for i in items if isinstance(i, Fact)}, run, Tally())


@pytest.mark.parametrize(
    ("path", "sure"),
    [('PATH="$HOME_BIN:$STUBS:/usr/bin:/bin"', True), ('PATH="$HOME_BIN:$PATH"', True)],
    ids=["whole", "ahead-of-the-callers"],
)
def test_source_without_a_slash_reads_the_file_bash_finds_on_path(
    tmp_path: Path, path: str, sure: bool
) -> None:
    sandbox = tmp_path / "sandbox"
    layout = Layout(
        lines=[
            "#!/bin/bash",
            f"HOME_BIN={tmp_path}/opt/serve/bin",
            f"STUBS={sandbox}/stubs",
            path,
            "source common.sh",
            f"exec {SERVER} --port 30000",
        ],
        files={"common.sh": ["export A=cwd"], "bin/common.sh": ["# on PATH", "export A=path"]},
    )
    script = layout.write(tmp_path)
    facts = facts_of(script, StartFolder(str(script.parent), "the test started it there"))
    with launched(script, sandbox=sandbox, cwd=script.parent) as run:
        assert run.env["A"] == "path"
        found = attribute_live(facts, run.argv, run.env)["export:A"]
        assert found is not None and found.single is not None
        assert (found.single.file, found.single.line) == (f"{script.parent}/bin/common.sh", 2)


def test_a_file_found_after_a_part_of_path_drift_does_not_know_is_not_claimed(
    tmp_path: Path,
) -> None:
    """``PATH="$EXTRA:$HOME_BIN"``: EXTRA may hold a folder with a common.sh of its own.

    Here it is empty, and an empty folder in PATH is the working one: bash
    reads ./common.sh, not bin/common.sh. drift names neither for sure.
    """
    sandbox = tmp_path / "sandbox"
    layout = Layout(
        lines=[
            "#!/bin/bash",
            f"HOME_BIN={tmp_path}/opt/serve/bin",
            'PATH="$EXTRA:$HOME_BIN"',
            "source common.sh",
            f"exec {sandbox}/stubs/{SERVER} --port 30000",
        ],
        files={"common.sh": ["export A=cwd"], "bin/common.sh": ["# on PATH", "export A=path"]},
    )
    script = layout.write(tmp_path)
    items = list(
        collect_script(
            "s", str(script), CollectContext(), start=StartFolder(str(script.parent), "here")
        )
    )
    gaps = [i.message for i in items if isinstance(i, CollectionError)]
    assert gaps == [
        f"{script}:4: sources common.sh, which bash looks for on PATH first: "
        f"{script.parent}/bin/common.sh may be the file it reads (drift does not know all of PATH)"
    ]
    facts = {i.key: i for i in items if isinstance(i, Fact)}
    with launched(script, sandbox=sandbox, cwd=script.parent) as run:
        assert run.env["A"] == "cwd"
        found = attribute_live(facts, run.argv, run.env).get("export:A")
        assert found is None or found.single is None


# ------------------------------------------------------------------ what `drift since` says


def _start_by_hand(script: Path, folder: Path, env: dict[str, str]) -> Any:
    import subprocess

    return subprocess.Popen(
        ["bash", str(script)],
        cwd=folder,
        env={"PATH": os.environ["PATH"], "HOME": str(folder), "LANG": "C.UTF-8", **env},
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("started", ["elsewhere", "home"])
def test_since_says_unsure_where_the_start_folder_decides(tmp_path: Path, started: str) -> None:
    """A service started by hand, found by its pidfile: drift is not told where it started.

    Started elsewhere (where there is no common.sh), COMMON comes from the
    shell that started it; drift used to say "from common.sh:1". Started in
    the script's folder, the live PWD shows it, and common.sh:1 is the line.
    """
    import signal
    import time

    pidfile = tmp_path / "decode.pid"
    layout = Layout(
        lines=[
            "#!/bin/bash",
            f"echo $$ > {pidfile}",
            ". ./common.sh",
            f"exec {sys.executable} -c 'import time; time.sleep(600)' --port 30000",
        ],
        files={"common.sh": ["export COMMON=1"]},
    )
    script = layout.write(tmp_path)
    folder = script.parent if started == "home" else tmp_path / "elsewhere"
    config = tmp_path / "drift.toml"
    config.write_text(
        f'host = "node"\n[[services]]\nname = "decode"\npidfile = "{pidfile}"\n'
        f'script = "{script}"\n'
    )
    cfg = ["--config", str(config), "--db", str(tmp_path / "drift.db")]
    procs = []

    def start(env: dict[str, str]) -> None:
        pidfile.unlink(missing_ok=True)
        procs.append(_start_by_hand(script, folder, env))
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and b"time.sleep" in _cmdline(procs[-1].pid)):
            assert time.monotonic() < deadline, "the service did not start"
            time.sleep(0.01)

    try:
        # The baseline: nothing gives COMMON where it was started elsewhere.
        start({})
        run_drift(["record", *cfg], tmp_path)
        run_drift(["record", *cfg], tmp_path)
        os.killpg(procs[-1].pid, signal.SIGTERM)
        procs[-1].wait(timeout=10)
        if started == "home":
            (script.parent / "common.sh").write_text("export COMMON=2\n")
            start({})
        else:
            start({"COMMON": "1"})  # the operator's shell has it: bash read no common.sh
        run_drift(["record", *cfg], tmp_path)
        out = run_drift(["since", "--stable", "#2", "--all", *cfg], tmp_path).stdout
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
    common = f"{script.parent}/common.sh:1"
    if started == "elsewhere":
        assert "COMMON=1 in the live environment of decode" in out
        assert f"from {common}" not in out  # the line bash never read
        assert f"unsure: perhaps set by {script}:3 (not followed)" in out
    else:
        assert f"export COMMON=2 at {common} (was 1)" in out
        assert f"(branch taken: if started in {script.parent})" in out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
