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
