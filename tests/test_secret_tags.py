"""One secret, one tag: a server's API key on its command line and in its own config endpoint.

A real service runs with ``--api-key`` from its serve script (shell-quoted, a
``$`` escaped), and a real HTTP endpoint reports the same key as JSON (with
``\\/`` and ``\\uXXXX`` escapes). After real records, `drift show`, `since` and
`report` show one tag for the key wherever it was found, and the key itself
is nowhere: not in the terminal, the JSON, the report or the database file.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift
from json_server import JsonServer, json_server

OLD = "p4ss/w\u00f6rd$Xy-42"
NEW = "n3w/K\u00e9y$Zq-77"
TAG = re.compile(r"\[redacted:[0-9a-f]{8}\]")


def serve_script(secret: str) -> str:
    quoted = secret.replace("$", "\\$")
    return (
        "#!/bin/bash\n"
        'echo $$ > "$(dirname "$0")/engine.pid"\n'
        f'exec python3 -c "import time; time.sleep(600)" engine --port 8000 --api-key "{quoted}"\n'
    )


def json_body(secret: str) -> bytes:
    # as some servers write it: "/" escaped, non-ASCII as \\uXXXX
    text = json.dumps({"api_key": secret, "port": 8000}).replace("/", "\\/")
    return text.encode()


class Engine:
    """The service and its endpoint, restarted with a new key as an operator would."""

    def __init__(self, tmp_path: Path, server: JsonServer) -> None:
        self.tmp_path, self.server = tmp_path, server
        self.script = tmp_path / "serve.sh"
        self.proc: subprocess.Popen[bytes] | None = None
        self.config = tmp_path / "drift.toml"
        self.config.write_text(
            f'host = "box"\ndb = "{tmp_path / "drift.db"}"\n'
            f'[[services]]\nname = "engine"\npidfile = "{tmp_path / "engine.pid"}"\n'
            f'script = "{self.script}"\n'
            f'[[endpoints]]\nname = "engine"\nurl = "{server.url}/get_server_info"\n'
            'service = "engine"\n'
        )

    def start(self, secret: str) -> None:
        self.stop()
        self.script.write_text(serve_script(secret))
        self.proc = subprocess.Popen(["bash", str(self.script)])
        self.server.body = json_body(secret)
        time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def drift(self, *args: str) -> str:
        return run_drift([*args, "--config", str(self.config)], self.tmp_path).stdout


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with json_server() as server:
        box = Engine(tmp_path, server)
        try:
            yield box
        finally:
            box.stop()


def spellings(secret: str) -> list[str]:
    """Every way the key could leak: as is, JSON-encoded (each way), shell-escaped."""
    return [
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        json.dumps(secret).replace("/", "\\/")[1:-1],
        secret.replace("$", "\\$"),
    ]


def test_a_key_on_the_command_line_and_in_the_endpoint_reads_as_one_tag(engine: Engine) -> None:
    engine.start(OLD)
    engine.drift("record")
    time.sleep(1)
    engine.start(NEW)  # a new key: the service restarted with it, the server reports it
    engine.drift("record")

    shown = json.loads(engine.drift("show", "--format", "json"))["data"]["subjects"]
    values = {(s["subject"], f["key"]): f["value"] for s in shown for f in s["facts"]}
    tags = {
        values[("service:engine", "flag:--api-key")],
        values[(f"script:{engine.script}", "flag:--api-key")],
        values[("endpoint:engine", "json:/api_key")],
        *TAG.findall(values[("service:engine", "argv")]),
        *TAG.findall(values[(f"script:{engine.script}", "content")]),
    }
    assert len(tags) == 1 and TAG.fullmatch(tags.pop() or "")

    since = json.loads(engine.drift("since", "--stable", "#1", "--all", "--format", "json"))
    changes = [c for s in since["data"]["suspects"] for c in s["changes"]]
    keyed = [c for c in changes if c["key"] in ("flag:--api-key", "json:/api_key")]
    assert {(c["subject"], c["key"]) for c in keyed} >= {
        ("service:engine", "flag:--api-key"),
        ("endpoint:engine", "json:/api_key"),
    }
    assert len({c["before"] for c in keyed}) == 1 and len({c["after"] for c in keyed}) == 1
    old_tag, new_tag = keyed[0]["before"], keyed[0]["after"]
    assert TAG.fullmatch(old_tag) and TAG.fullmatch(new_tag) and old_tag != new_tag

    terminal = engine.drift("since", "--stable", "#1", "--all")
    report = engine.tmp_path / "postmortem.md"
    engine.drift("report", "--stable", "#1", "-o", str(report))
    assert new_tag in terminal and old_tag in terminal
    assert new_tag in report.read_text() and old_tag in report.read_text()

    db = b"".join(p.read_bytes() for p in engine.tmp_path.glob("drift.db*"))
    outputs = [json.dumps(shown), json.dumps(since), terminal, report.read_text()]
    for secret in (OLD, NEW):
        for spelled in spellings(secret):
            assert spelled.encode() not in db, spelled
            assert not any(spelled in out for out in outputs), spelled
