"""A config edit is part of the history, never a change on the box.

Reproduced the way it was found: the incident's deployment recorded with its
drift.toml, then with a second config (a section removed, another set added,
or a config from another folder that watches none of it). `drift since` must
list no suspect that is only a change of scope, name the config change in the
header and the timeline, and still find the real change made meanwhile.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_drift
from hypothesis import given, settings
from hypothesis import strategies as st

from drift.collectors.files import collect_files
from drift.config import FileSpec
from drift.facts import CollectContext, FactBlock
from drift.scope import Scope, glob_matches


def _since(sandbox, tmp_path: Path, *extra: str) -> dict:
    args = ["since", "--stable", "#2", "--all", "--format", "json", "--host", "gpu-node-7"]
    args += ["--db", str(sandbox.db_path)]
    out = run_drift([*args, *extra], tmp_path).stdout
    return json.loads(out)["data"]


def _without_service(text: str, name: str) -> str:
    """The sandbox's drift.toml with one [[services]] table left out."""
    blocks = text.split("\n\n")
    return "\n\n".join(b for b in blocks if f'name = "{name}"' not in b)


def test_a_section_removed_from_the_config_invents_no_suspect(sandbox, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)  # stable: #2

    # The operator drops the router from the config and adds a file set...
    original = sandbox.config_path.read_text()
    edited = _without_service(original, "router").replace(
        "[[repos]]",
        '[[files]]\nname = "scripts"\npaths = ["serve/*.sh"]\n\n[[repos]]',
    )
    assert edited != original and 'name = "router"' not in edited
    sandbox.config_path.write_text(edited)
    # ...and, meanwhile, the real cause lands and decode restarts.
    sandbox.add_culprit()
    sandbox.restart_all()
    out = run_drift(["record", *cfg], tmp_path).stdout
    assert "config changed since the last record (services: -router; files: +scripts)" in out

    data = _since(sandbox, tmp_path, "--config", str(sandbox.config_path))
    suspects = data["suspects"]
    touched = {c["subject"] for s in suspects for c in s["changes"]}
    assert not any("router" in subject for subject in touched), touched
    assert not any(subject.startswith("file:") and subject.endswith(".sh") for subject in touched)
    assert suspects[0]["changes"][0]["key"] == "export:SGLANG_SM120_MMA_TARGET_CTAS"

    scope = data["scope"]
    assert [c["text"] for c in scope["changes"]] == [
        "config changed at #3 (services: -router; files: +scripts)"
    ]
    untracked = {u["subject"]: u for u in scope["untracked"]}
    assert "service:router" in untracked and untracked["service:router"]["since"] == 3
    assert f"script:{sandbox.script('router')}" in untracked
    assert {t["subject"] for t in scope["tracked"]} == {
        f"file:{sandbox.script(n)}" for n in ("prefill", "decode", "router")
    }
    assert any(t["kind"] == "config" and "#3" in t["text"] for t in data["timeline"])
    assert "config changed at #3" in data["trust"]["summary"]

    text = run_drift(["since", "--stable", "#2", *cfg], tmp_path).stdout
    assert "config    changed at #3 (services: -router; files: +scripts)" in text
    assert "No longer tracked (the config stopped asking for them):" in text
    assert "router stopped" not in text and "removed from" not in text

    # history tells the same: router's pid ended at #3 because the config let it go.
    told = run_drift(["history", "service:router", "--format", "json", *cfg], tmp_path).stdout
    (pid,) = (f for f in json.loads(told)["data"]["facts"] if f["key"] == "pid")
    assert [(v["until_snapshot"], v["untracked"]) for v in pid["versions"]] == [(3, True)]
    shown = run_drift(["history", "service:router", *cfg], tmp_path).stdout
    assert "(#3), then no longer tracked (the config stopped asking for it)" in shown
    # decode's pid changed at the restart: a new value, not a fact that left the scope.
    told = run_drift(["history", "service:decode", "--format", "json", *cfg], tmp_path).stdout
    (pid,) = (f for f in json.loads(told)["data"]["facts"] if f["key"] == "pid")
    assert [v["untracked"] for v in pid["versions"]] == [False, False]


def test_a_config_from_another_folder_warns_and_is_no_all_clear(sandbox, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "notes.txt").write_text("x\n")
    (other / "drift.toml").write_text(
        'host = "gpu-node-7"\n[[files]]\nname = "notes"\npaths = ["notes.txt"]\n'
    )
    # cron runs it --quiet: the warning must still reach stderr (and cron's mail).
    result = run_drift(
        ["record", "--quiet", "--config", str(other / "drift.toml"), "--db", str(sandbox.db_path)],
        tmp_path,
    )
    assert result.stdout == ""
    assert result.stderr.startswith(f"warning: {other / 'drift.toml'} watches nothing")
    assert str(sandbox.config_path) in result.stderr and "wrong --config?" in result.stderr

    data = _since(sandbox, tmp_path)
    assert data["suspects"] == []
    assert data["scope"]["untracked_facts"] > 50
    assert data["scope"]["changes"][0]["after_path"] == str(other / "drift.toml")
    text = run_drift(
        ["since", "--stable", "#2", "--host", "gpu-node-7", "--db", str(sandbox.db_path)], tmp_path
    ).stdout
    assert "No change since the baseline." in text
    assert "no longer tracked, " in text and "not changes on the box" in text


def test_a_real_removal_inside_the_scope_is_still_a_removal(sandbox, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)
    # A comment and a timeout change the config's digest, not its scope...
    sandbox.config_path.write_text(
        "# reviewed\n"
        + sandbox.config_path.read_text().replace(
            'run = "echo 575.57.08"', 'run = "echo 575.57.08"\ntimeout = 5'
        )
    )
    # ...while a kernel file really is deleted.
    sandbox.kernel.unlink()
    out = run_drift(["record", *cfg], tmp_path).stdout
    assert "config changed since the last record (settings only): 0 facts no longer" in out
    data = _since(sandbox, tmp_path)
    removed = [
        c
        for s in data["suspects"]
        for c in s["changes"]
        if c["subject"] == f"file:{sandbox.kernel}"
    ]
    assert removed and all(c["kind"] == "removed" for c in removed)
    assert data["scope"]["untracked"] == [] and data["scope"]["tracked"] == []
    assert data["scope"]["changes"][0]["text"] == "config changed at #3 (settings only)"


def test_the_same_config_again_is_no_config_change(sandbox, tmp_path: Path) -> None:
    cfg = ["--config", str(sandbox.config_path), "--db", str(sandbox.db_path)]
    run_drift(["record", *cfg], tmp_path)
    # Reformatted, same meaning: not a change of config at all.
    sandbox.config_path.write_text("\n\n" + sandbox.config_path.read_text() + "\n# end\n")
    out = run_drift(["record", *cfg], tmp_path).stdout
    assert "config changed" not in out
    data = json.loads(
        run_drift(
            ["since", "--stable", "#1", "--format", "json", *cfg],
            tmp_path,
        ).stdout
    )["data"]
    assert data["scope"]["changes"] == []


# The scope's glob rules are the files collector's: the collector is the oracle.

_NAMES = st.sampled_from(["a", "b", ".env", "x.py", "y.txt", "conf.d"])
_PARTS = st.sampled_from(["*", "**", "?", "*.py", "[ab]", ".*", "a", "conf.d", "x.py"])


@settings(max_examples=60, deadline=None)
@given(
    tree=st.lists(st.lists(_NAMES, min_size=1, max_size=4), min_size=1, max_size=8),
    pattern=st.lists(_PARTS, min_size=1, max_size=4),
)
def test_scope_globs_match_exactly_what_the_files_collector_finds(
    tmp_path_factory: pytest.TempPathFactory, tree: list[list[str]], pattern: list[str]
) -> None:
    root = tmp_path_factory.mktemp("tree")
    files = set()
    for parts in tree:
        path = root.joinpath(*parts)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_dir():
                path.write_text("x")
                files.add(str(path))
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            continue  # a name used as both a file and a folder: keep what was made
    files = {f for f in files if os.path.isfile(f)}
    glob = os.path.join(str(root), *pattern)
    found = {
        subject[len("file:") :]
        for item in collect_files(FileSpec("t", (glob,)), CollectContext())
        if isinstance(item, FactBlock)
        for subject in item.subjects
    }
    assert found == {f for f in files if glob_matches(glob, f)}


def test_scope_covers_a_sourced_file_while_its_service_has_a_script() -> None:
    scope = Scope(services={"decode": "/srv/decode.sh", "router": None})
    assert scope.covers("script:/srv/decode.sh")
    assert scope.covers("script:/srv/common.sh", {"service": "decode"})
    assert not scope.covers("script:/srv/common.sh", {"service": "router"})
    assert not scope.covers("script:/srv/common.sh", {"service": "prefill"})
    assert scope.covers("service:router") and not scope.covers("service:prefill")
    assert Scope.from_json(scope.to_json()) == scope


def test_a_scope_stored_before_drift_read_packages_libraries_or_gpus_covers_none_of_them() -> None:
    """What a newer drift reads for the first time is "now tracked", never new on the box.

    A scope stored by a drift that did not read a service's packages, its
    mapped libraries or the GPUs has no word for them; the first record that
    has them must not read as 300 distributions installed at once.
    """
    old = Scope.from_json(json.dumps({"services": {"decode": None}, "systemd": True}))
    assert old.covers("service:decode", key="env:PATH")
    for key in ("python", "python:path", "package:torch", "package_head:sglang", "lib:/x.so"):
        assert not old.covers("service:decode", key=key), key
    assert not old.covers("gpu:driver")
    now = Scope(services={"decode": None}, packages=("decode",), libraries=("decode",))
    assert now.covers("service:decode", key="package:torch")
    assert now.covers("service:decode", key="lib:/x.so")
    assert Scope.from_json(now.to_json()) == now
    assert old.changes_to(now) == ["packages: +decode", "libraries: +decode"]
