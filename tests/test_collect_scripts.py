"""The serve-script collector: what a script exports to the command it execs, line by line."""

from __future__ import annotations

import json
import os
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import changes_by_fact, run_drift
from hypothesis import given, settings
from hypothesis import strategies as st
from privileges import as_nobody

from drift.collectors.script_facts import script_facts
from drift.collectors.scripts import MAX_SCRIPT_BYTES, collect_script
from drift.facts import CollectContext, CollectionError, Fact
from drift.timespec import iso

# (script, {name: (value, line)}, (exec as shell-joined, line) or None)
CASES: dict[str, tuple[str, dict[str, tuple[str, int]], tuple[str, int] | None]] = {
    "export": ("export K=V\n", {"K": ("V", 1)}, None),
    "double quotes with spaces": (
        'export HF_HOME="/data/hf cache"\n',
        {"HF_HOME": ("/data/hf cache", 1)},
        None,
    ),
    "single quotes keep dollar": (
        "export Q='$NOT ${EXPANDED}'\n",
        {"Q": ("$NOT ${EXPANDED}", 1)},
        None,
    ),
    "variables are not expanded": (
        'export P="$HOME/models" R=${BASE:-/opt x}/lib S=$(hostname -s)\n',
        {"P": ("$HOME/models", 1), "R": ("${BASE:-/opt x}/lib", 1), "S": ("$(hostname -s)", 1)},
        None,
    ),
    "several on one line": ("export K1=a K2=b\n", {"K1": ("a", 1), "K2": ("b", 1)}, None),
    "semicolons": (
        "export A=1;export B=2; C=3 ; export C\n",
        {"A": ("1", 1), "B": ("2", 1), "C": ("3", 1)},
        None,
    ),
    "value containing equals": ("export OPTS=--a=b,c=d\n", {"OPTS": ("--a=b,c=d", 1)}, None),
    "ansi-c quotes": ("export T=$'a\\tb\\'c'\n", {"T": ("a\tb'c", 1)}, None),
    "escaped characters": ('export E=a\\ b\\"c\n', {"E": ('a b"c', 1)}, None),
    "assign then export": ("MODEL=/models/x\n\nexport MODEL\n", {"MODEL": ("/models/x", 1)}, None),
    "export without value is inherited": ("export CUDA_HOME\n", {"CUDA_HOME": ("", 1)}, None),
    "plain assignment is not exported": ("PLAIN=1\nexport SHOWN=2\n", {"SHOWN": ("2", 2)}, None),
    "later assignment wins": ("export K=1\nexport K=2\n", {"K": ("2", 2)}, None),
    "assignment to an exported name": ("export K=1\necho hi\nK=3\n", {"K": ("3", 3)}, None),
    "append": ("export P=/a\nP+=:/b\n", {"P": ("/a:/b", 2)}, None),
    "declare -x": (
        "declare -x D=4\ntypeset -x T=5\ndeclare -gx G=6\ndeclare N=7\n",
        {"D": ("4", 1), "T": ("5", 2), "G": ("6", 3)},
        None,
    ),
    "declare +x unexports": ("export K=1\ndeclare +x K\n", {}, None),
    "export -n unexports": ("export K=1\nexport -n K\n", {}, None),
    "unset": ("export U=1 V=2\nunset U\n", {"V": ("2", 1)}, None),
    "set -a exports assignments": (
        "set -a\nA=1\nset +a\nB=2\nset -o allexport\nC=3\n",
        {"A": ("1", 2), "C": ("3", 6)},
        None,
    ),
    "set -euo pipefail is not allexport": ("set -euo pipefail\nA=1\n", {}, None),
    "comments": (
        "# export NO=1\n  # export NO2=1\nexport A=1 # export B=2\nexport C=x#y\n",
        {"A": ("1", 3), "C": ("x#y", 4)},
        None,
    ),
    "continuation: each variable on its own line": (
        "export A=1 \\\n    B=2\nexport C=3\n",
        {"A": ("1", 1), "B": ("2", 2), "C": ("3", 3)},
        None,
    ),
    "multi-line quoted value": (
        'export M="a\nb"\nexport N=1\n',
        {"M": ("a\nb", 1), "N": ("1", 3)},
        None,
    ),
    "heredoc body is skipped": (
        "cat > /tmp/x <<EOF\nexport H=1\nEOF\nexport AFTER=1\n",
        {"AFTER": ("1", 4)},
        None,
    ),
    "quoted heredoc with tabs": (
        "cat <<-'END' | tee /tmp/y\n\texport H=$X\n\tEND\nexport AFTER=2\n",
        {"AFTER": ("2", 4)},
        None,
    ),
    "here-string is not a heredoc": ("cat <<< hi\nexport K=1\n", {"K": ("1", 2)}, None),
    "inside if": ('if [ -n "$X" ]; then\n  export C=1\nfi\n', {"C": ("1", 2)}, None),
    "function never called": ("start() {\n  export F=1\n}\n", {}, None),
    "function called": ("start() {\n  export F=1\n}\nstart\n", {"F": ("1", 2)}, None),
    "array assignment": ("ARR=(a b c)\nexport K=1\n", {"K": ("1", 2)}, None),
    "exec line": (
        "export A=1\nexec python -m srv --tp 4\n",
        {"A": ("1", 1)},
        ("python -m srv --tp 4", 2),
    ),
    "prefix assignment on exec": ("K=V exec srv --x\n", {"K": ("V", 1)}, ("srv --x", 1)),
    "prefix assignments on other commands do not count": (
        "W=1 warmup.sh\nexec srv\n",
        {},
        ("srv", 2),
    ),
    "exec env": (
        "export A=1 B=2\nexec env -u B C=3 srv --x 1\n",
        {"A": ("1", 1), "C": ("3", 2)},
        ("env -u B C=3 srv --x 1", 2),
    ),
    "exec env -i": ("export A=1\nexec env -i C=3 srv\n", {"C": ("3", 2)}, ("env -i C=3 srv", 2)),
    "exec -c clears": ("export A=1\nexec -c srv\n", {}, ("srv", 2)),
    "exec -a": ("exec -a name srv --p 1\n", {}, ("srv --p 1", 1)),
    "redirection-only exec is not the command": (
        "exec > >(tee -a /var/log/x) 2>&1\nexport A=1\nexec srv --p 1 >> /var/log/y 2>&1\n",
        {"A": ("1", 2)},
        ("srv --p 1", 3),
    ),
    "exports after exec never reach it": (
        "export A=1\nexec srv\nexport B=2\n",
        {"A": ("1", 1)},
        ("srv", 2),
    ),
    "an exec under if is one possible launch": (
        'if [ "$D" ]; then exec dbg; fi\nexport A=1\nexec srv\n',
        {"A": ("1", 2)},
        ("dbg | srv", None),
    ),
    "an exec under a known condition": (
        'D=\nif [ "$D" ]; then exec dbg; fi\nexport A=1\nexec srv\n',
        {"A": ("1", 3)},
        ("srv", 4),
    ),
    "multi-line exec": (
        'exec python3 -m sglang.launch_server \\\n  --model-path "$M" \\\n  --enable-metrics\n'
        "export LATE=1\n",
        {},
        ("python3 -m sglang.launch_server --model-path '$M' --enable-metrics", 1),
    ),
    "no exec: the last server command; later exports do not reach it": (
        "cd /opt\nexport A=1\nK=2 python serve.py --p 1 &\nexport B=2\nwait\necho done\n",
        {"A": ("1", 2), "K": ("2", 3)},
        ("python serve.py --p 1", 3),
    ),
    "eval may be the launcher": ('eval "$CMD"\n', {}, ("eval '$CMD'", 1)),
    "case patterns are not commands": (
        'case "$1" in\n  decode) export MODE=decode ;;\nesac\n',
        {"MODE": ("decode", 2)},
        None,
    ),
    "quoted NAME= is not an assignment": ('"A=1" srv\n', {}, ("A=1 srv", 1)),
    "CRLF keeps the carriage return": ("export K=1\r\n", {"K": ("1\r", 1)}, None),
}


def _read(script: str) -> tuple[dict[str, Fact], Fact | None]:
    """The export facts and the exec fact drift derives from a script's text."""
    from drift.shell.evaluate import evaluate

    model = evaluate("/srv/serve.sh", script.encode("utf-8", "surrogateescape"), lambda p: None)
    facts = {f.key: f for f in script_facts("script:/srv/serve.sh", model, {})}
    exports = {k.removeprefix("export:"): f for k, f in facts.items() if k.startswith("export:")}
    return exports, facts.get("exec")


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_parse_script(case: str) -> None:
    script, exports, command = CASES[case]
    found, exec_fact = _read(script)
    assert {n: (f.value, f.provenance.get("line")) for n, f in found.items()} == exports
    if command is None:
        assert exec_fact is None
    else:
        assert exec_fact is not None
        assert (exec_fact.value, exec_fact.provenance.get("line")) == command


def test_provenance_text_and_inherited() -> None:
    exports, exec_fact = _read(
        "#!/bin/bash\nMODEL=/m  # the model\nexport MODEL CUDA_HOME\n"
        'exec srv \\\n   --model "$MODEL"\n'
    )
    model = exports["MODEL"].provenance
    assert (model["line"], model["text"], model["exported_at"]) == (2, "MODEL=/m  # the model", 3)
    inherited = exports["CUDA_HOME"]
    assert inherited.provenance["inherited"] and inherited.value == ""
    assert inherited.provenance["line"] == 3
    assert exec_fact is not None
    assert exec_fact.provenance["text"] == "exec srv \\"


def test_exports_follow_the_last_command_without_exec() -> None:
    _exports, exec_fact = _read("export A=1\nserver --p 1\n")
    assert exec_fact is not None and exec_fact.provenance["via"] == "last command (no exec)"


SERVE = """\
#!/bin/bash
set -euo pipefail
# decode server
export SGLANG_SM120_MMA_TARGET_CTAS=512
export HF_HOME="/data/hf cache"
cd /opt/sglang
exec python3 -m sglang.launch_server \\
    --tp-size 4 --cuda-graph-max-bs=96 \\
    --disaggregation-mode decode --enable-metrics
"""


def _collect(
    path: Path | str,
    ctx: CollectContext | None = None,
) -> tuple[dict[str, Fact], list[CollectionError]]:
    facts: dict[str, Fact] = {}
    errors: list[CollectionError] = []
    for item in collect_script("decode", str(path), ctx or CollectContext()):
        if isinstance(item, Fact):
            assert item.subject == f"script:{path}"
            assert item.key not in facts
            facts[item.key] = item
        else:
            errors.append(item)
    return facts, errors


def test_collect_script_facts(tmp_path: Path) -> None:
    script = tmp_path / "decode.sh"
    script.write_text(SERVE)
    facts, errors = _collect(script)
    assert errors == []
    assert facts["content"].value == SERVE
    # The content carries the file's times as the record read them; no other fact does.
    st = script.stat()
    assert facts["content"].provenance == {
        "file": str(script),
        "service": "decode",
        "mtime": iso(st.st_mtime_ns // 1000),
        "ctime": iso(st.st_ctime_ns // 1000),
    }

    ctas = facts["export:SGLANG_SM120_MMA_TARGET_CTAS"]
    assert ctas.value == "512"
    assert ctas.provenance == {
        "file": str(script),
        "service": "decode",
        "line": 4,
        "text": "export SGLANG_SM120_MMA_TARGET_CTAS=512",
    }
    assert facts["export:HF_HOME"].value == "/data/hf cache"
    assert facts["export:HF_HOME"].provenance["line"] == 5

    assert facts["exec"].value == (
        "python3 -m sglang.launch_server --tp-size 4 --cuda-graph-max-bs=96"
        " --disaggregation-mode decode --enable-metrics"
    )
    assert facts["exec"].provenance["line"] == 7
    assert {k: f.value for k, f in facts.items() if k.startswith("flag:")} == {
        "flag:-m": "sglang.launch_server",
        "flag:--tp-size": "4",
        "flag:--cuda-graph-max-bs": "96",
        "flag:--disaggregation-mode": "decode",
        "flag:--enable-metrics": "",
    }
    assert facts["flag:--tp-size"].provenance["line"] == 8  # the line the word is on
    assert set(facts) == {
        "content",
        "exec",
        "export:SGLANG_SM120_MMA_TARGET_CTAS",
        "export:HF_HOME",
        *(k for k in facts if k.startswith("flag:")),
    }


def test_flags_of_exec_env_are_the_programs(tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text("exec env -u X K=V /usr/bin/srv --port 1\n")
    facts, _ = _collect(script)
    assert facts["exec"].value == "env -u X K=V /usr/bin/srv --port 1"
    assert {k for k in facts if k.startswith("flag:")} == {"flag:--port"}
    assert facts["export:K"].value == "V"


def test_inherited_and_fallback_provenance(tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text("export CUDA_HOME\nsrv --p 1\n")
    facts, _ = _collect(script)
    assert facts["export:CUDA_HOME"].provenance["inherited"] is True
    assert facts["exec"].provenance["via"] == "last command (no exec)"
    assert facts["flag:--p"].value == "1"


def test_non_utf8_bytes_become_escapes(tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_bytes(b"# caf\xe9\nexport K=a\xffb\n")
    facts, errors = _collect(script)
    assert errors == []
    assert facts["content"].value == "# caf\\xe9\nexport K=a\\xffb\n"
    assert facts["export:K"].value == "a\\xffb"
    facts["content"].value.encode("utf-8")  # storable as text anywhere


def test_missing_script_is_a_blind_spot(tmp_path: Path) -> None:
    facts, errors = _collect(tmp_path / "gone.sh")
    assert facts == {}
    assert len(errors) == 1
    assert errors[0].key is None and errors[0].covers(f"script:{tmp_path}/gone.sh", "export:K")
    assert errors[0].message == f"script not found: {tmp_path}/gone.sh"


def test_directory_is_a_blind_spot(tmp_path: Path) -> None:
    facts, errors = _collect(tmp_path)
    assert facts == {}
    assert [e.key for e in errors] == [None]


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "decode.sh"
    os.mkfifo(fifo)
    facts, errors = _collect(fifo)
    assert facts == {}
    assert [e.message for e in errors] == [f"cannot read {fifo}: not a regular file"]


def test_huge_file_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "decode.sh"
    with big.open("wb") as f:
        f.truncate(MAX_SCRIPT_BYTES + 1)
    facts, errors = _collect(big)
    assert facts == {}
    assert len(errors) == 1 and "too large" in errors[0].message


def test_excluded_path_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("export K=secret\n")
    facts, errors = _collect(secret, CollectContext(exclude=frozenset({str(secret)})))
    assert facts == {}
    assert len(errors) == 1 and "secret" not in errors[0].message.replace(str(secret), "")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_unreadable_script_is_a_blind_spot(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    script = folder / "decode.sh"
    script.write_text("export K=1\n")
    script.chmod(0o600)
    # nobody must reach the file to be refused by it, not by tmp_path's parents.
    for parent in [folder, *folder.parents]:
        if str(parent) == "/":
            break
        parent.chmod(parent.stat().st_mode | 0o111)

    def work() -> list[list[Any]]:
        return [
            [type(i).__name__, i.key, getattr(i, "message", None)]
            for i in collect_script("decode", str(script), CollectContext())
        ]

    assert as_nobody(work) == [["CollectionError", None, f"permission denied reading {script}"]]


SHELL_PIECES = st.sampled_from(
    [
        "export ",
        "declare -x ",
        "exec ",
        "env ",
        "-u ",
        "K=",
        "V",
        "=",
        " ",
        "\n",
        "\\\n",
        "\\",
        "'",
        '"',
        "$",
        "$(",
        "${",
        ")",
        "}",
        "(",
        "`",
        "#",
        ";",
        "&",
        "|",
        "<<",
        "EOF",
        "<<-",
        ">",
        "2>&1",
        "\t",
        "set -a",
        "unset ",
        "+=",
        "$'",
        "if ",
        "then ",
        "fi",
        "f() {",
        "--x",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(SHELL_PIECES, max_size=40).map("".join))
def test_parser_never_crashes_and_lines_are_real(script: str) -> None:
    exports, exec_fact = _read(script)
    lines = script.split("\n")
    for fact in [*exports.values(), *([exec_fact] if exec_fact else [])]:
        line = fact.provenance.get("line")
        assert line is None or 1 <= line <= len(lines)


@pytest.mark.parametrize(
    "line",
    [
        "echo {\U000f0000",  # found by tests/test_fuzz.py
        "echo {1..\U000e0001}",
        "eval 'echo {'\"\U0010fffd\"",  # a string only the evaluator puts together
    ],
)
def test_a_script_the_bash_parser_would_crash_on_is_a_blind_spot(tmp_path: Path, line: str) -> None:
    """tree-sitter-bash reads far past a table for a character past U+FFFF right after "{"
    and can kill the process (tree-sitter-bash#337): one script must not stop every record."""
    from conftest import run_drift

    script = tmp_path / "serve.sh"
    script.write_text(f"#!/bin/bash\nexport A=1\n{line}\nexec sleep 1000\n")
    config = tmp_path / "drift.toml"
    config.write_text(
        'host = "h"\n[[services]]\nname = "web"\nmatch = "no-such-process-here"\n'
        'script = "serve.sh"\n'
    )
    args = ["record", "--config", str(config), "--db", str(tmp_path / "d.db")]
    for _ in range(3):  # the crash depends on memory layout: it would show within three
        result = run_drift(args, tmp_path, check=False)
        assert result.returncode == 4, result.stderr  # stored, with blind spots
    assert f"script:{script} exec: {script}:" in result.stderr
    assert "its parser crashes on a character past U+FFFF right after {" in result.stderr


def test_long_script_parses_in_linear_time() -> None:
    body = "".join(f'export V{i}="value {i}"  # note\n' for i in range(3000))
    script = (
        body
        + "python -c '\n"
        + "x = 1\n" * 400
        + "'\n"
        + textwrap.dedent("""\
        exec srv --last 1
        """)
    )
    started = time.perf_counter()
    exports, exec_fact = _read(script)
    # ~0.1 s here; re-reading a long open quote line by line took seconds.
    assert time.perf_counter() - started < 3
    assert len(exports) == 3000
    assert exec_fact is not None and exec_fact.value == "srv --last 1"


@pytest.mark.parametrize(
    "script",
    ['export BAD="oops\nexport GOOD=1\n', "if true; then\nexport A=1\n", "export A=1\nfi\n"],
)
def test_script_bash_rejects_is_a_blind_spot(tmp_path: Path, script: str) -> None:
    """A script that does not parse keeps its last exports, flags and exec: none is guessed."""
    path = tmp_path / "s.sh"
    path.write_text(script)
    facts, errors = _collect(path)
    assert set(facts) == {"content"}
    assert {e.key for e in errors} == {"export:", "flag:", "exec"}
    # bash's own words when bash refuses it, drift's when tree-sitter cannot parse it
    assert all(str(path) in e.message and "line" in e.message for e in errors)


# ---------------------------------------------------------------- symlinks

FAKE_HASH = "$6$saltsalt$" + "Q" * 86


def _collect_all(path: Path, timeout: float = 10.0) -> list[Fact | CollectionError]:
    """Every fact and error, sourced files' included, in a thread: a blocked read fails."""
    out: list[Fact | CollectionError] = []
    worker = threading.Thread(
        target=lambda: out.extend(collect_script("decode", str(path), CollectContext())),
        daemon=True,
    )
    worker.start()
    worker.join(timeout)
    assert not worker.is_alive(), "collect_script did not finish"
    return out


def _fake_shadow(folder: Path) -> Path:
    """A file only root may read, holding what /etc/shadow holds."""
    shadow = folder / "shadow"
    shadow.write_text(f"root:{FAKE_HASH}:19000:0:99999:7:::\n")
    shadow.chmod(0o600)
    return shadow


def test_script_that_is_a_symlink_is_recorded_as_one_never_followed(tmp_path: Path) -> None:
    shadow = _fake_shadow(tmp_path)
    script = tmp_path / "decode.sh"
    script.symlink_to(shadow)
    items = _collect_all(script)
    assert FAKE_HASH not in repr(items)
    facts = [i for i in items if isinstance(i, Fact)]
    errors = [i for i in items if isinstance(i, CollectionError)]
    assert [(f.subject, f.key, f.value) for f in facts] == [
        (f"script:{script}", "symlink", str(shadow))
    ]
    # What the script said (content, exports, exec) keeps its last values.
    assert len(errors) == 1 and errors[0].key is None
    assert errors[0].covers(f"script:{script}", "content")
    assert errors[0].message == (
        f"{script} is a symlink to {shadow}: drift does not follow a link to read a serve "
        "script (name the file itself in the config)"
    )


def test_script_that_is_a_symlink_to_a_fifo_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    script = tmp_path / "decode.sh"
    script.symlink_to(fifo)
    items = _collect_all(script, timeout=5)
    assert [(type(i).__name__, i.key) for i in items] == [
        ("Fact", "symlink"),
        ("CollectionError", None),
    ]


def test_script_in_a_symlinked_folder_is_read(tmp_path: Path) -> None:
    """/opt/current -> /opt/v2 is how many deployments switch versions: only the last
    component of the configured path must not be a link."""
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "decode.sh").write_text("export K=1\nexec srv --port 1\n")
    (tmp_path / "current").symlink_to(tmp_path / "v2")
    facts, errors = _collect(tmp_path / "current" / "decode.sh")
    assert errors == []
    assert facts["export:K"].value == "1" and "symlink" not in facts


def test_sourced_symlink_is_not_followed(tmp_path: Path) -> None:
    shadow = _fake_shadow(tmp_path)
    (tmp_path / "env.sh").symlink_to(shadow)
    script = tmp_path / "decode.sh"
    script.write_text("source ./env.sh\nexport K=1\nexec srv --port 1\n")
    items = _collect_all(script)
    assert FAKE_HASH not in repr(items)
    assert {i.subject for i in items} == {f"script:{script}"}  # no content of env.sh
    gaps = [i.message for i in items if isinstance(i, CollectionError)]
    assert gaps == [
        f"{script}:1: sources ./env.sh, a symlink to {shadow}, which drift does not follow"
    ]


def test_record_and_since_never_show_what_a_swapped_in_symlink_points_at(tmp_path: Path) -> None:
    """The incident: a serve script replaced by a link to /etc/shadow. `drift since` showed the
    password hash in the content diff and in the exec line."""
    shadow = _fake_shadow(tmp_path)
    script = tmp_path / "decode.sh"
    script.write_text("export K=1\nexec srv --port 1\n")
    db = tmp_path / "drift.db"
    config = tmp_path / "drift.toml"
    config.write_text(
        f'host = "node"\ndb = "{db}"\n[[services]]\nname = "decode"\n'
        f'match = "no-such-process-{os.getpid()}"\nscript = "{script}"\n'
    )
    run_drift(["record", "--config", str(config)], tmp_path, timeout=60)
    run_drift(["mark", "stable", "--config", str(config)], tmp_path, timeout=60)
    script.unlink()
    script.symlink_to(shadow)
    second = run_drift(["record", "--config", str(config)], tmp_path, check=False, timeout=60)
    assert second.returncode == 4, second.stderr  # stored, with a blind spot
    assert f"is a symlink to {shadow}" in second.stderr
    text = run_drift(["since", "--config", str(config)], tmp_path, timeout=60).stdout
    report = json.loads(
        run_drift(["since", "--config", str(config), "--format", "json"], tmp_path).stdout
    )["data"]
    for shown in (second.stdout + second.stderr, text, json.dumps(report)):
        assert "Q" * 20 not in shown and "saltsalt" not in shown
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("drift.db*"))
    assert b"Q" * 20 not in stored and b"saltsalt" not in stored
    assert changes_by_fact(report)[(f"script:{script}", "symlink")]["after"] == str(shadow)
    assert f"is a symlink to {shadow}" in text  # under blind spots
    # The exports and exec keep their last values: nothing reads as removed.
    assert not any(k[1] != "symlink" for k in changes_by_fact(report))
