"""A real HTTP server on 127.0.0.1 for the [[endpoints]] tests, serving what the test sets.

It runs in a thread of the test process and answers every GET with
`body` and `status` after `delay` seconds, or with a redirect to
`redirect` when set; the test changes them between records.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonServer:
    """What the server answers, changed by the test as it goes."""

    def __init__(self) -> None:
        self.body = b"{}"
        self.status = 200
        self.delay = 0.0
        self.redirect: str | None = None
        self.requests: list[dict[str, str]] = []
        self.url = ""

    def serve(self, document: Any) -> None:
        """Answer with `document` as JSON, 200 OK, at once."""
        self.body = json.dumps(document).encode()
        self.status, self.delay, self.redirect = 200, 0.0, None


@contextmanager
def json_server() -> Iterator[JsonServer]:
    """A JsonServer listening on a free port of 127.0.0.1 until the block ends."""
    state = JsonServer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            state.requests.append(dict(self.headers.items()))
            if state.delay:
                time.sleep(state.delay)
            if state.redirect is not None:
                self.send_response(302)
                self.send_header("Location", state.redirect)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            try:
                self.wfile.write(state.body)
            except OSError:  # the client gave up (a timeout test)
                pass

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # quiet: pytest shows what a test prints

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def engine_server(port: int, defaults: str, knobs: dict[str, str]) -> str:
    """A server's program an engine's process runs itself, as its /get_server_info: it
    answers with what it was started with, its own environment (each variable of `knobs`
    as the leaf it names, null when unset) and the `defaults` file read at its start."""
    return f"""\
import json, os
from http.server import BaseHTTPRequestHandler, HTTPServer

info = {{}}
if os.path.exists({defaults!r}):
    with open({defaults!r}) as fh:
        info.update(json.load(fh))
for variable, leaf in {knobs!r}.items():
    value = os.environ.get(variable)
    info[leaf] = None if value is None else int(value) if value.isdigit() else value
body = json.dumps(info).encode()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", {port}), Handler).serve_forever()
"""


def wait_answering(url: str, timeout: float = 10.0) -> None:
    """Wait until a GET of `url` answers 200: the engine's server is up."""
    from urllib.request import ProxyHandler, build_opener

    opener = build_opener(ProxyHandler({}))
    deadline = time.monotonic() + timeout
    while True:
        try:
            with opener.open(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.02)
