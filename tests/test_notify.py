"""`[[notify]]`: a record that saw a live or pending change tells a webhook or a command.

Real processes (the incident sandbox), the real `drift record`, and a real HTTP
server on loopback standing for the webhook (Slack, Grafana, anything that takes
a POST of JSON).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import run_drift

from drift.demo import CULPRIT, DEMO_TOKEN, IncidentSandbox

CULPRIT_NAME = CULPRIT.removeprefix("export ").split("=")[0]


class Webhook:
    """A loopback HTTP server that keeps what was POSTed and answers `status` after `delay`."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.status = 200
        self.delay = 0.0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the handler's own name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(hook.delay)
                hook.bodies.append(body)
                self.send_response(hook.status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/T0/B0/s3cr3tpart"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


def drift(box: IncidentSandbox, tmp: Path, *args: str, check: bool = True):  # type: ignore[no-untyped-def]
    cfg = ["--config", str(box.config_path), "--db", str(box.db_path)]
    return run_drift([*args, *cfg], tmp, check=check)


def add_notify(box: IncidentSandbox, entry: str) -> None:
    box.config_path.write_text(box.config_path.read_text() + "\n[[notify]]\n" + entry + "\n")


def record_an_edit(box: IncidentSandbox, tmp: Path, entry: str):  # type: ignore[no-untyped-def]
    """With `entry` in the config: a first record, then the bad export added and recorded."""
    add_notify(box, entry)
    drift(box, tmp, "record")
    box.add_culprit()
    return drift(box, tmp, "record")


def test_a_live_change_is_posted_once_and_an_unchanged_record_posts_nothing(
    sandbox, tmp_path: Path, webhook: Webhook
) -> None:
    box = sandbox
    add_notify(box, f'name = "oncall"\nurl = "{webhook.url}"')
    drift(box, tmp_path, "record")
    drift(box, tmp_path, "record")
    assert webhook.bodies == []  # a first record and an unchanged one tell nobody

    box.add_culprit()
    box.stop("decode")
    box.start("decode")
    drift(box, tmp_path, "record")
    [body] = webhook.bodies
    sent = json.loads(body)
    assert sent["command"] == "since"
    told = sent["data"]["suspects"]
    assert told and all(s["status"] in {"live", "launched", "pending", "unsourced"} for s in told)
    assert any(CULPRIT_NAME in s["title"] and s["status"] == "live" for s in told), told
    assert DEMO_TOKEN.encode() not in body  # what is sent was read masked from the database

    drift(box, tmp_path, "record")
    assert len(webhook.bodies) == 1


def test_a_pending_edit_is_told_before_the_restart(sandbox, tmp_path: Path) -> None:
    """The script edited, nothing restarted: a command notifier gets the summary and the JSON."""
    box = sandbox
    out = tmp_path / "told"
    add_notify(
        box,
        'name = "log"\n'
        f'run = "cp \\"$DRIFT_NOTIFY_JSON\\" {out}.json && '
        f'printf %s \\"$DRIFT_NOTIFY_TEXT\\" > {out}.txt"',
    )
    drift(box, tmp_path, "record")
    box.add_culprit()
    drift(box, tmp_path, "record")
    text = Path(f"{out}.txt").read_text()
    assert text.startswith(
        f"drift on {json.loads(Path(f'{out}.json').read_text())['data']['host']}"
    )
    assert (
        CULPRIT_NAME in text
        and "pending"
        in json.loads(Path(f"{out}.json").read_text())["data"]["suspects"][0]["status"]
    )


def test_a_failing_webhook_is_a_blind_spot_not_a_failed_record(
    sandbox, tmp_path: Path, webhook: Webhook
) -> None:
    box = sandbox
    webhook.status = 500
    # exit 0: stored, every fact collected
    done = record_an_edit(box, tmp_path, f'name = "oncall"\nurl = "{webhook.url}"\ntimeout = 2')
    assert "notify:oncall sent: the webhook answered HTTP 500" in done.stderr
    assert "s3cr3tpart" not in done.stderr + done.stdout

    since = drift(box, tmp_path, "since", "--stable", "#1", "--format", "json").stdout
    data = json.loads(since)["data"]
    spots = json.dumps(data["blind_spots"])
    assert "notify:oncall" in spots and "HTTP 500" in spots
    assert b"s3cr3tpart" not in box.db_path.read_bytes()


def test_a_webhook_that_hangs_costs_its_timeout_once(
    sandbox, tmp_path: Path, webhook: Webhook
) -> None:
    box = sandbox
    webhook.delay = 30
    began = time.monotonic()
    done = record_an_edit(box, tmp_path, f'name = "slow"\nurl = "{webhook.url}"\ntimeout = 1')
    assert time.monotonic() - began < 25  # two records and one timeout, not the server's 30 s
    assert (
        "notify:slow sent: the webhook could not be reached (timed out after 1s; not sent)"
        in done.stderr
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('name = "x"', "give exactly one of url, run"),
        ('name = "x"\nurl = "https://h/"\nrun = "true"', "give exactly one of url, run"),
        ('name = "x"\nurl = "ftp://user:pw@h/"', "expected an http:// or https:// URL"),
        ('name = "x"\nrun = "true"\ncolour = "red"', "colour"),
    ],
)
def test_a_bad_notify_entry_is_one_line_and_exit_2(
    sandbox, tmp_path: Path, entry: str, message: str
) -> None:
    add_notify(sandbox, entry)
    done = drift(sandbox, tmp_path, "record", check=False)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "pw@" not in done.stderr and "Traceback" not in done.stderr


def recipe(name: str) -> str:
    """The `run` line of a recipe in docs/notify.md, as a user would paste it."""
    docs = (Path(__file__).parent.parent / "docs" / "notify.md").read_text()
    block = docs.split(f'name = "{name}"\n', 1)[1]
    return block.split("run = '''", 1)[1].split("'''", 1)[0]


@pytest.mark.parametrize(
    ("name", "secret_file", "shape"),
    [("slack", "slack-webhook", {"text"}), ("grafana", "grafana-token", {"text", "tags"})],
)
def test_the_documented_recipes_post_what_the_service_expects(
    sandbox, tmp_path: Path, webhook: Webhook, name: str, secret_file: str, shape: set[str]
) -> None:
    """Each recipe of docs/notify.md, pasted as written, its URL pointed at a loopback server."""
    box = sandbox
    command = recipe(name).replace("/etc/drift/", f"{tmp_path}/")
    command = command.replace("https://grafana.example.com", webhook.url.split("/hooks")[0])
    (tmp_path / secret_file).write_text(webhook.url if name == "slack" else "glsa_token\n")
    done = record_an_edit(box, tmp_path, f'name = "{name}"\nrun = """{command}"""\ntimeout = 5')
    assert "notify:" not in done.stderr, done.stderr
    [body] = webhook.bodies
    sent = json.loads(body)
    assert set(sent) == shape
    assert sent["text"].startswith("drift on ") and CULPRIT_NAME in sent["text"]
    if name == "grafana":
        assert sent["tags"][0] == "drift"
