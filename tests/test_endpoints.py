"""[[endpoints]]: a real HTTP server on loopback, real records, what `drift since` says of them.

The server (tests/json_server.py) serves a JSON document the test changes
between records; a real process stands for the engine when a story needs
one to restart. The collector is checked against the document itself
(every leaf by its pointer, resolved back into the document), and the user's
view through the drift command: stories, statuses, blind spots, secrets.
"""

from __future__ import annotations

import json
import shlex
import socket
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import changes_by_fact, run_drift
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_server import JsonServer, engine_server, json_server, wait_answering
from test_compare import ODD, record_fleet

from drift.analysis.knobs import (
    ENGINE_PREFIXES,
    SAME_NAME,
    SAME_NAME_OTHER_VALUE,
    knob_match,
    knob_words,
    leaf_name,
    rare,
    same_value,
)
from drift.collectors.endpoints import MAX_BODY, collect_endpoint
from drift.config import EndpointSpec
from drift.demo import IncidentSandbox
from drift.facts import CollectContext, CollectionError, Fact
from drift.json_pointer import parse, resolve

SERVER_INFO = {
    "chunked_prefill_size": 4096,
    "max_running_requests": 256,
    "attention_backend": "fa3",
    "served_model_names": ["deepseek-v3"],
    "enable_mixed_chunk": False,
    "lora_paths": [],
    "sampling": {"temperature": 1.0, "top_p": "1"},
    "model/path~": "/models/dsv3",
}


@pytest.fixture
def server() -> Iterator[JsonServer]:
    with json_server() as s:
        s.serve(SERVER_INFO)
        yield s


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "drift.toml"
    path.write_text(f'db = "{tmp_path / "drift.db"}"\n{body}')
    return path


def endpoint(url: str, **extra: Any) -> str:
    lines = ["[[endpoints]]", 'name = "engine"', f"url = {json.dumps(url)}"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def record(config: Path, *, errors: bool = False) -> str:
    result = run_drift(["record", "--config", str(config)], config.parent, check=False)
    assert result.returncode == (4 if errors else 0), result.stdout + result.stderr
    return result.stdout + result.stderr


def since(config: Path, fmt: str = "json") -> Any:
    args = ["since", "--config", str(config), "--stable", "#1", "--all", "--format", fmt]
    out = run_drift(args, config.parent).stdout
    return json.loads(out)["data"] if fmt == "json" else out


def shown(config: Path) -> dict[str, str]:
    """What `drift show` says the endpoint's facts are now."""
    out = run_drift(["show", "--config", str(config), "--format", "json"], config.parent).stdout
    subjects = json.loads(out)["data"]["subjects"]
    return {
        f["key"]: f["value"]
        for s in subjects
        if s["subject"] == "endpoint:engine"
        for f in s["facts"]
    }


def collect(spec: EndpointSpec) -> list[Fact | CollectionError]:
    return list(collect_endpoint(spec, CollectContext()))


# ---------------------------------------------------------------- the leaves


def test_every_leaf_is_a_fact_as_json_text(server: JsonServer) -> None:
    items = collect(EndpointSpec("engine", server.url + "/get_server_info"))
    facts = {i.key: i.value for i in items if isinstance(i, Fact)}
    assert facts == {
        "json:/attention_backend": '"fa3"',
        "json:/chunked_prefill_size": "4096",
        "json:/enable_mixed_chunk": "false",
        "json:/lora_paths": "[]",  # an empty list is a leaf: one that empties is a change
        "json:/max_running_requests": "256",
        "json:/model~1path~0": '"/models/dsv3"',
        "json:/sampling/temperature": "1.0",
        "json:/sampling/top_p": '"1"',  # the string "1", not the number
        "json:/served_model_names/0": '"deepseek-v3"',
    }
    assert server.requests[-1]["Accept"] == "application/json"


def test_pointer_keeps_a_subtree_and_ignore_leaves_parts_out(server: JsonServer) -> None:
    spec = EndpointSpec("engine", server.url, pointer="/sampling", ignore=("/sampling/top_p",))
    items = collect(spec)
    assert [(i.key, i.value) for i in items if isinstance(i, Fact)] == [
        ("json:/sampling/temperature", "1.0")
    ]


def leaf_count(value: Any) -> int:
    """How many leaves a document has, counted without pointers (the oracle's own count)."""
    if isinstance(value, dict) and value:
        return sum(leaf_count(v) for v in value.values())
    if isinstance(value, list) and value:
        return sum(leaf_count(v) for v in value)
    return 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(alphabet=st.sampled_from("a/~0é1 "), max_size=4) | st.text(), inner, max_size=4
        )
    ),
    max_leaves=30,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(document=json_values)
def test_the_leaves_are_exactly_the_documents_by_pointer(server: JsonServer, document: Any) -> None:
    server.serve(document)
    items = collect(EndpointSpec("engine", server.url))
    facts = [i for i in items if isinstance(i, Fact)]
    assert len(facts) == len(items) == leaf_count(document)
    assert len({f.key for f in facts}) == len(facts)
    for fact in facts:
        pointer = fact.key.removeprefix("json:")
        assert json.loads(fact.value) == resolve(document, parse(pointer))


# ---------------------------------------------------------------- stories


def test_a_changed_default_is_a_story_with_its_path_and_both_values(
    server: JsonServer, tmp_path: Path
) -> None:
    config = write_config(tmp_path, endpoint(server.url + "/get_server_info"))
    record(config)
    server.serve({**SERVER_INFO, "chunked_prefill_size": 8192})
    record(config)

    data = since(config)
    [suspect] = data["suspects"]
    assert suspect["title"] == "endpoint engine: /chunked_prefill_size 8192 (was 4096)"
    assert suspect["category"] == "engine config"
    assert suspect["status"] == "changed"
    [change] = suspect["changes"]
    assert (change["key"], change["before"], change["after"]) == (
        "json:/chunked_prefill_size",
        "4096",
        "8192",
    )
    assert change["where"] == f"GET {server.url}/get_server_info"
    text = since(config, "text")
    assert "endpoint engine: /chunked_prefill_size 8192 (was 4096)" in text
    assert "json:/chunked_prefill_size: 4096 -> 8192" in text


def test_leaves_changed_together_are_one_story_and_a_later_one_its_own(
    server: JsonServer, tmp_path: Path
) -> None:
    config = write_config(tmp_path, endpoint(server.url))
    record(config)
    upgraded = {
        **SERVER_INFO,
        "chunked_prefill_size": 8192,
        "max_running_requests": 128,
        "attention_backend": "flashinfer",
        "lora_paths": ["/loras/a"],
        "new_default": True,
    }
    del upgraded["enable_mixed_chunk"]
    server.serve(upgraded)
    record(config)
    server.serve({**upgraded, "sampling": {"temperature": 0.7, "top_p": "1"}})
    record(config)

    stories = {len(s["changes"]): s for s in since(config)["suspects"]}
    assert sorted(stories) == [1, 7]
    together = stories[7]
    assert together["title"].startswith("endpoint engine: 7 values changed together (")
    moved = {(c["key"], c["kind"], c["before"], c["after"]) for c in together["changes"]}
    assert moved == {
        ("json:/attention_backend", "modified", '"fa3"', '"flashinfer"'),
        ("json:/chunked_prefill_size", "modified", "4096", "8192"),
        ("json:/enable_mixed_chunk", "removed", "false", None),
        ("json:/lora_paths", "removed", "[]", None),
        ("json:/lora_paths/0", "added", None, '"/loras/a"'),
        ("json:/max_running_requests", "modified", "256", "128"),
        ("json:/new_default", "added", None, "true"),
    }
    alone = stories[1]
    assert alone["title"] == "endpoint engine: /sampling/temperature 0.7 (was 1.0)"


def test_adding_an_endpoint_reads_now_tracked_not_added(server: JsonServer, tmp_path: Path) -> None:
    config = write_config(tmp_path, "")
    record(config)
    write_config(tmp_path, endpoint(server.url))
    record(config)
    data = since(config)
    assert data["suspects"] == []
    assert [t["subject"] for t in data["scope"]["tracked"]] == ["endpoint:engine"]


def start_engine(marker: str) -> subprocess.Popen[bytes]:
    """A real process standing for the engine, found by the regex `marker`."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", marker],
        stdin=subprocess.DEVNULL,
    )


def test_values_that_came_with_a_restart_are_live_and_later_ones_changed(
    server: JsonServer, tmp_path: Path
) -> None:
    marker = f"engine-{uuid.uuid4().hex}"
    service = f'[[services]]\nname = "decode"\nmatch = "{marker}"\n'
    config = write_config(tmp_path, service + endpoint(server.url, service="decode"))
    engine = start_engine(marker)
    try:
        record(config)
        engine.kill()
        engine.wait()
        engine = start_engine(marker)  # the upgraded server comes up with a new default
        server.serve({**SERVER_INFO, "chunked_prefill_size": 8192})
        record(config)

        [story] = since(config)["suspects"]
        assert story["status"] == "live"
        assert story["label"].startswith(f"live in decode (pid {engine.pid}) since restart ")
        assert ": came with its start " in story["label"]
        assert story["services"] == ["decode"]
        assert [r["after_pid"] for r in story["restarts"]] == [str(engine.pid)]

        # the same server, still running, changes a value: no restart brought it
        server.serve({**SERVER_INFO, "chunked_prefill_size": 8192, "max_running_requests": 64})
        record(config)
        by_key = {s["changes"][0]["key"]: s for s in since(config)["suspects"]}
        later = by_key["json:/max_running_requests"]
        assert later["status"] == "changed"
        assert later["label"].startswith(f"changed while decode (pid {engine.pid}) kept running")
        assert later["restarts"] == []
        assert by_key["json:/chunked_prefill_size"]["status"] == "live"
    finally:
        engine.kill()
        engine.wait()


# ---------------------------------------------------------------- the server's view of a knob

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


def engine_info(box: Any, *, defaults: dict[str, Any] | None = None) -> tuple[str, Path]:
    """decode's process is to answer /get_server_info itself, from what it started with:
    `KNOB` from its environment as /mma_target_ctas, and a defaults file it reads at its
    start. The entry goes into drift.toml for decode; decode's next start serves it."""
    port = closed_port()
    url = f"http://127.0.0.1:{port}/get_server_info"
    defaults_file = box.root / "serve" / "decode-defaults.json"
    defaults_file.write_text(json.dumps(defaults or {}))
    program = box.root / "serve" / "engine.py"
    program.write_text(engine_server(port, str(defaults_file), {KNOB: "mma_target_ctas"}))
    script = box.script("decode")
    text = script.read_text()
    at = text.index("\nexec ") + 1  # the last line; its program spans lines
    words = shlex.split(text[at:])
    assert words[2] == "-c"
    script.write_text(text[:at] + shlex.join([words[0], words[1], str(program), *words[4:]]) + "\n")
    with box.config_path.open("a") as fh:
        fh.write(f'\n[[endpoints]]\nname = "decode-info"\nurl = "{url}"\nservice = "decode"\n')
    return url, defaults_file


def serve_info(box: Any, *, defaults: dict[str, Any] | None = None) -> tuple[str, Path]:
    """`engine_info`, and decode restarted to serve it."""
    url, defaults_file = engine_info(box, defaults=defaults)
    box.stop("decode")
    box.start("decode")
    wait_answering(url)
    return url, defaults_file


def box_drift(box: Any, *args: str) -> str:
    cfg = ["--config", str(box.config_path), "--db", str(box.db_path)]
    return run_drift([args[0], *cfg, *args[1:]], box.root).stdout


def box_since(box: Any) -> dict[str, Any]:
    return json.loads(box_drift(box, "since", "--all", "--format", "json"))["data"]


def restart_serving(box: Any, url: str) -> None:
    box.restart_all()
    wait_answering(url)


def test_the_servers_own_report_of_a_knob_is_evidence_of_the_export_that_set_it(
    sandbox: Any,
) -> None:
    url, _ = serve_info(sandbox)
    box_drift(sandbox, "record")
    box_drift(sandbox, "record")
    box_drift(sandbox, "mark", "stable")
    sandbox.add_culprit()
    restart_serving(sandbox, url)
    box_drift(sandbox, "record")

    data = box_since(sandbox)
    first, second, *_ = data["suspects"]
    assert first["title"].startswith(f"export {KNOB}=512 added to ")
    assert first["status"] == "live"
    changes = changes_by_fact(data)
    leaf = changes[("endpoint:decode-info", "json:/mma_target_ctas")]
    assert (leaf["before"], leaf["after"]) == ("null", "512")
    assert leaf["suspect"]["rank"] == first["rank"]  # evidence of the export, not a suspect
    assert "decode-info answers 512" in first["label"]
    assert not any(c["subject"].startswith("endpoint:") for c in second["changes"])
    assert not any(s["changes"][0]["subject"].startswith("endpoint:") for s in data["suspects"])

    text = box_drift(sandbox, "since")
    assert "json:/mma_target_ctas: null -> 512" in text
    assert " 2. [" in text and "endpoint decode-info" not in text.split(" 2. [", 1)[1]


def test_a_leaf_no_live_change_explains_stays_its_own_suspect(sandbox: Any) -> None:
    url, defaults = serve_info(sandbox, defaults={"chunked_prefill_size": 4096, "overlap": False})
    box_drift(sandbox, "record")
    box_drift(sandbox, "mark", "stable")
    # The server's defaults move at the restart (an upgrade), with an export of another
    # knob whose value is as common as the leaf's: neither name nor value ties them.
    defaults.write_text(json.dumps({"chunked_prefill_size": 8192, "overlap": True}))
    script = sandbox.script("decode")
    script.write_text(
        script.read_text().replace("set -e\n", "set -e\nexport SGLANG_ENABLE_JIT=1\n")
    )
    restart_serving(sandbox, url)
    box_drift(sandbox, "record")

    data = box_since(sandbox)
    changes = changes_by_fact(data)
    export = changes[(f"script:{script}", "export:SGLANG_ENABLE_JIT")]["suspect"]
    assert not any(c["subject"].startswith("endpoint:") for c in export["changes"])
    assert "answers" not in export["label"]
    alone = changes[("endpoint:decode-info", "json:/chunked_prefill_size")]["suspect"]
    assert alone["changes"][0]["subject"] == "endpoint:decode-info"
    assert {c["key"] for c in alone["changes"]} == {"json:/chunked_prefill_size", "json:/overlap"}
    assert alone["status"] == "live" and ": came with its start " in alone["label"]
    assert ("endpoint:decode-info", "json:/mma_target_ctas") not in changes


def test_compare_finds_the_servers_report_with_the_export_in_the_running_server(
    tmp_path: Path,
) -> None:
    """Three decode hosts on the same paths, one after another (as tests/test_compare.py
    records them), each serving its own view; decode-3 gets the export and restarts. Its
    server's report of the knob is part of the export's finding, in a running process."""
    hosts = ["decode-1", "decode-2", ODD]
    db = str(tmp_path / "fleet.db")
    box = IncidentSandbox(tmp_path / "node")
    box.build()
    url, _ = engine_info(box)
    record_fleet(tmp_path, db, hosts, box, lambda: wait_answering(url))

    compare = ["compare", "--db", str(db), *hosts]
    data = json.loads(run_drift([*compare, "--format", "json"], tmp_path).stdout)["data"]
    (group,) = data["groups"]
    first = group["findings"][0]
    assert first["host"] == ODD and first["title"].startswith(f"{ODD} exports {KNOB}=512 (")
    facts = {(f["subject"], f["key"]): f for f in first["facts"]}
    leaf = facts[("endpoint:decode-info", "json:/mma_target_ctas")]
    assert (leaf["value"], leaf["majority"]["value"]) == ("512", "null")
    assert "in a running process" in first["reasons"]
    assert "the running server answers it: decode-info /mma_target_ctas = 512" in first["reasons"]
    for finding in group["findings"]:
        assert "not seen in a running process (on disk or in a script)" not in finding["reasons"]
        if finding is not first:
            assert not any(f["subject"].startswith("endpoint:") for f in finding["facts"])
    assert "not seen in a running process" not in run_drift(compare, tmp_path).stdout


knob_names = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=6).filter(
        lambda w: w not in ENGINE_PREFIXES
    ),
    min_size=1,
    max_size=4,
)


@given(words=knob_names, value=st.integers(0, 10**6))
def test_a_knob_spelled_as_a_flag_a_variable_or_a_leaf_is_one_knob(
    words: list[str], value: int
) -> None:
    leaf = "/server_args/" + "_".join(words)
    camel = words[0] + "".join(w.capitalize() for w in words[1:])
    for name in ("--" + "-".join(words), "SGLANG_" + "_".join(words).upper(), camel):
        assert knob_match(leaf, str(value), name, str(value)) == SAME_NAME, name
        assert knob_match(leaf, str(value), name, str(value + 1)) == SAME_NAME_OTHER_VALUE


@given(
    leaf=st.sampled_from(["true", "false", "null", "0", "1", "-1", "0.5", '"auto"', '""', "[]"]),
    name=knob_names,
)
def test_a_common_value_alone_ties_no_leaf_to_a_knob(leaf: str, name: list[str]) -> None:
    value = {"true": "1", "false": "0", "null": None, '"auto"': "auto", '""': ""}.get(leaf, leaf)
    assert knob_match("/some_leaf", leaf, "VLLM_" + "_".join(name) + "_x", value) == 0
    assert not rare(leaf)


def test_names_and_values_spelled_alike() -> None:
    assert knob_words("SGLANG_MAX_RUNNING_REQUESTS") == ("max", "running", "requests")
    assert knob_words("--max-running-requests") == knob_words("maxRunningRequests")
    assert leaf_name("/served_model_names/0") == "served_model_names"
    assert leaf_name("/a~1b~0c") == "a/b~c"
    assert same_value("true", "") and same_value('"fa3"', "fa3") and same_value("512", "512.0")
    assert not same_value('"512"', None) and not same_value("[]", "[]")
    # the end of a name ties a leaf only when the values agree
    assert knob_match("/mma_target_ctas", "512", "SGLANG_SM120_MMA_TARGET_CTAS", "512") > 0
    assert knob_match("/target_ctas", "256", "SGLANG_SM120_MMA_TARGET_CTAS", "512") == 0
    assert rare("512") and rare('"flashinfer"') and not rare("96")


# ---------------------------------------------------------------- blind spots


def test_a_server_past_its_timeout_is_a_blind_spot_and_its_values_are_kept(
    server: JsonServer, tmp_path: Path
) -> None:
    config = write_config(tmp_path, endpoint(server.url, timeout=0.5))
    record(config)
    before = shown(config)
    server.delay = 2.0
    out = record(config, errors=True)
    assert "endpoint:engine" in out and "timed out after 0.5s" in out
    assert shown(config) == before
    data = since(config)
    assert data["suspects"] == []
    [spot] = data["blind_spots"]
    assert (spot["subject"], spot["current"]) == ("endpoint:engine", True)
    assert spot["message"] == f"{server.url}: timed out after 0.5s"
    assert "timed out after 0.5s" in since(config, "text")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("status 500", "HTTP 500 Internal Server Error"),
        (
            "not json",
            "not JSON (Expecting value: line 1 column 1 (char 0)): starts '<html>oops</html>'",
        ),
        ("not utf-8", "not JSON: not UTF-8 at byte 2"),
        ("too large", "body over 1 MiB: not read"),
        ("wrong pointer", "no key 'server_args' at the top"),
        ("index past the end", "no item '1' at '/served_model_names' (1 items)"),
        ("refused", "cannot connect: [Errno 111] Connection refused"),
        ("redirect elsewhere", "redirected to http://127.0.0.2:9/x: not followed (another host)"),
    ],
)
def test_what_cannot_be_read_is_a_blind_spot_never_a_removal(
    server: JsonServer, tmp_path: Path, case: str, message: str
) -> None:
    config = write_config(tmp_path, endpoint(server.url))
    record(config)
    url, pointer = server.url, ""
    if case == "status 500":
        server.status = 500
    elif case == "not json":
        server.body = b"<html>oops</html>"
    elif case == "not utf-8":
        server.body = b'["\xff"]'
    elif case == "too large":
        server.body = b'"' + b"x" * MAX_BODY + b'"'
    elif case == "wrong pointer":
        pointer = "/server_args"
    elif case == "index past the end":
        pointer = "/served_model_names/1"
    elif case == "refused":
        url = f"http://127.0.0.1:{closed_port()}"
    else:
        server.redirect = "http://127.0.0.2:9/x"
    write_config(tmp_path, endpoint(url, pointer=pointer))
    # the same leaves asked differently (a pointer) are a config change: compare with #1
    record(config, errors=True)
    data = since(config)
    assert [s["title"] for s in data["suspects"]] == []
    assert [(b["subject"], b["message"]) for b in data["blind_spots"]] == [
        ("endpoint:engine", f"{url}: {message}")
    ]
    assert len(shown(config)) == 9


def test_a_same_host_redirect_is_followed(server: JsonServer) -> None:
    server.redirect = server.url + "/elsewhere"
    first = collect(EndpointSpec("engine", server.url))
    assert [type(i).__name__ for i in first] == ["CollectionError"]  # a loop, not followed forever
    server.redirect = None
    assert len(collect(EndpointSpec("engine", server.url))) == 9


def test_a_proxy_in_the_environment_is_not_used(
    server: JsonServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a proxy that does not exist: using it would be a blind spot
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    items = collect(EndpointSpec("engine", server.url))
    assert all(isinstance(i, Fact) for i in items) and len(items) == 9


def test_ignore_leaves_a_counter_out(server: JsonServer, tmp_path: Path) -> None:
    config = write_config(tmp_path, endpoint(server.url, ignore=["/stats", "/sampling/top_p"]))
    server.serve({**SERVER_INFO, "stats": {"requests": 1, "tokens_per_s": 10.5}})
    record(config)
    assert not any(k.startswith(("json:/stats", "json:/sampling/top_p")) for k in shown(config))
    server.serve({**SERVER_INFO, "stats": {"requests": 99, "tokens_per_s": 31.0}})
    record(config)
    assert since(config)["suspects"] == []


# ---------------------------------------------------------------- secrets

API_KEY = "correct-horse-battery-staple-42"
NEW_API_KEY = "another-long-passphrase-99"
LISTED_KEY = "listed-admin-credential-7"
TOKEN = "hf_" + "EndpointTokenShapedNotReal012345678"


def test_a_secret_leaf_never_reaches_the_database_terminal_or_reports(
    server: JsonServer, tmp_path: Path
) -> None:
    config = write_config(tmp_path, endpoint(server.url))
    secretive = {
        **SERVER_INFO,
        "api_key": API_KEY,  # secret by its name
        "admin": {"api_keys": [LISTED_KEY]},  # by a name above it on the path
        "notes": f"pulled with {TOKEN}",  # by its shape, under a plain name
    }
    server.serve(secretive)
    record(config)
    server.serve({**secretive, "api_key": NEW_API_KEY, "chunked_prefill_size": 8192})
    record(config)

    outputs = [(tmp_path / "drift.db").read_bytes()]
    for name in ("drift.db-wal",):
        if (tmp_path / name).exists():
            outputs.append((tmp_path / name).read_bytes())
    with sqlite3.connect(tmp_path / "drift.db") as db:
        outputs.append("\n".join(map(str, db.execute("select * from versions"))).encode())
    outputs.append(since(config, "text").encode())
    outputs.append(json.dumps(since(config)).encode())
    for suffix in ("html", "md", "json"):
        report = tmp_path / f"report.{suffix}"
        run_drift(
            ["report", "--config", str(config), "--stable", "#1", "-o", str(report)], tmp_path
        )
        outputs.append(report.read_bytes())
    outputs.append(json.dumps(shown(config)).encode())
    for output in outputs:
        for secret in (API_KEY, NEW_API_KEY, LISTED_KEY, TOKEN):
            assert secret.encode() not in output

    story = {s["changes"][0]["key"]: s for s in since(config)["suspects"]}
    [both] = story.values()  # the key and the default moved between the same records
    changes = {c["key"]: c for c in both["changes"]}
    assert changes["json:/api_key"]["secret"] is True
    assert changes["json:/api_key"]["before"] != changes["json:/api_key"]["after"]
    assert changes["json:/chunked_prefill_size"]["after"] == "8192"
    now = shown(config)
    assert now["json:/admin/api_keys/0"].startswith("[redacted:")
    assert now["json:/notes"].startswith('"pulled with [redacted:')
    assert now["json:/attention_backend"] == '"fa3"'
