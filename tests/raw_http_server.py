"""A raw socket server for HTTP client tests: it writes exactly the bytes the test gives.

Unlike tests/json_server.py it does no HTTP of its own, so a test can vary
the framing (Content-Length, chunked, close), the case and folding of
headers, interim responses, malformed lines, and how the bytes trickle out.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field


@dataclass
class Reply:
    """What the server writes for one request: pieces, with a pause before each."""

    pieces: list[bytes]
    pause: float = 0.0


@dataclass
class RawServer:
    """The replies by request path (a path not listed gets `default`), and the requests seen."""

    default: Reply = field(default_factory=lambda: Reply([b"HTTP/1.1 200 OK\r\n\r\n{}"]))
    by_path: dict[str, Reply] = field(default_factory=dict)
    requests: list[bytes] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 0
    scheme: str = "http"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def reply(self, *pieces: bytes, pause: float = 0.0) -> None:
        """Answer every request with `pieces`, written one by one."""
        self.default, self.by_path = Reply(list(pieces), pause), {}

    def answer(self, conn: socket.socket) -> None:
        """Read one request head, write its reply, close."""
        request = b""
        with suppress(OSError):
            while b"\r\n\r\n" not in request:
                data = conn.recv(65_536)
                if not data:
                    return
                request += data
            self.requests.append(request)
            path = request.split(b" ", 2)[1].decode("latin-1")
            reply = self.by_path.get(path, self.default)
            for piece in reply.pieces:
                if reply.pause:
                    time.sleep(reply.pause)
                conn.sendall(piece)
            conn.shutdown(socket.SHUT_WR)
            # let the client read to the end before the close (no reset of unread bytes)
            conn.settimeout(5)
            while conn.recv(65_536):
                pass


@contextmanager
def raw_server(
    host: str = "127.0.0.1", tls: Callable[[socket.socket], ssl.SSLSocket] | None = None
) -> Iterator[RawServer]:
    """A RawServer listening on a free port of `host` until the block ends."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, 0))
    listener.listen(16)
    state = RawServer(host=host, port=listener.getsockname()[1], scheme="https" if tls else "http")
    stop = threading.Event()

    def serve_one(conn: socket.socket) -> None:
        with conn:
            if tls is not None:
                try:
                    conn = tls(conn)
                except (OSError, ssl.SSLError):
                    return  # the client refused the certificate
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            state.answer(conn)
            conn.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        listener.close()
        # a blocked accept() needs a connection to notice the close on some kernels
        with suppress(OSError), socket.create_connection((host, state.port), timeout=0.2):
            pass
        thread.join(timeout=5)
