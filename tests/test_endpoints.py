"""[[endpoints]]: a real HTTP server on loopback, real records, what `drift since` says of them.

The server (tests/json_server.py) serves a JSON document the test changes
between records; a real process stands for the engine when a story needs
one to restart. The collector is checked against the document itself
(every leaf by its pointer, resolved back into the document), and the user's
view through the drift command: stories, statuses, blind spots, secrets.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_drift
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_server import JsonServer, json_server

from drift.collectors.endpoints import MAX_BODY, collect_endpoint
from drift.config import EndpointSpec
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
    facts = json.loads(out)["data"]["facts"]
    return {f["key"]: f["value"] for f in facts if f["subject"] == "endpoint:engine"}


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
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(alphabet=st.sampled_from("a/~0é1 "), max_size=4) | st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=json_values)
def test_the_leaves_are_exactly_the_documents_by_pointer(
    server: JsonServer, document: Any
) -> None:
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
