"""A small HTTP/1.1 GET client over a socket, for [[endpoints]], held to urllib's behaviour.

drift does not use ``urllib.request`` here because importing it costs more
than the whole fetch: ``http.client`` pulls in ``email.parser`` and ``ssl``,
15-130 ms of every minute's ``drift record`` on a loaded box (measured with
``python -X importtime``), against ~2 ms to fetch and walk a document. This
client imports ``socket`` only, and ``ssl`` only for an https URL (verifying
the certificate and the host name, as urllib does by default).

What it does, and tests/test_http_get.py checks against urllib itself on
the same server bytes: no proxy, ever; one deadline over the whole request
(connect, send, headers, body); a body cap; redirects followed only to the
same scheme, host and port, a few times, a loop an error; a status outside
2xx an error with its status and reason; bodies framed by Content-Length,
chunked transfer coding (extensions, trailers) or the connection's close.
No content coding is asked for, and one declared anyway is an error, as is
a body cut short: every failure is a one-line FetchError, never a traceback.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import SplitResult, quote, urljoin, urlsplit

from drift.secrets.shapes import cut

MAX_REDIRECTS = 5
"""The most redirects followed for one request; a revisited URL is a loop at once."""

MAX_LINE = 65_536
"""The longest status, header or chunk-size line read (http.client's own limit)."""

MAX_HEADERS = 100
"""The most header lines of one response (http.client's own limit)."""

_T = TypeVar("_T")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}


class FetchError(Exception):
    """Why the document could not be read, in a few words."""


def http_get(url: str, timeout: float, limit: int) -> bytes:
    """GET `url`: its body, at most `limit` bytes, within `timeout` seconds in all."""
    deadline = time.monotonic() + timeout
    origin = _origin(url)
    seen = {url}
    while True:
        with _Wire(url, deadline, timeout) as wire:
            head = wire.head()
            if head.status in _REDIRECTS and "location" in head.headers:
                url = _follow(url, head.headers["location"], origin, seen)
                continue
            if not 200 <= head.status < 300:
                raise FetchError(f"HTTP {head.status} {head.reason}".rstrip())
            return wire.body(head, limit)


def _origin(url: str) -> tuple[str, str | None, int | None]:
    """Scheme, host and port, the port filled in when the URL leaves it to the scheme."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchError(f"request failed: {exc}") from None
    return parts.scheme, parts.hostname, port or _DEFAULT_PORTS.get(parts.scheme)


def _follow(
    url: str, location: str, origin: tuple[str, str | None, int | None], seen: set[str]
) -> str:
    """Where a redirect leads, if drift may go there; else why not."""
    target = urljoin(url, location.strip())
    if _origin(target) != origin:
        raise FetchError(f"redirected to {target}: not followed (another host)")
    if target in seen:
        raise FetchError(f"redirected back to {target}: a redirect loop")
    if len(seen) > MAX_REDIRECTS:
        raise FetchError(f"redirected more than {MAX_REDIRECTS} times: not followed")
    seen.add(target)
    return target


class _Head:
    """A response's status line and headers (names lower-cased, repeats joined by ", ")."""

    # a plain class: @dataclass would cost more at import than the fetch it serves
    __slots__ = ("status", "reason", "headers")

    def __init__(self, status: int, reason: str) -> None:
        self.status, self.reason = status, reason
        self.headers: dict[str, str] = {}


class _Wire:
    """One connection: the request written, the response read, all within the deadline."""

    def __init__(self, url: str, deadline: float, timeout: float) -> None:
        self.deadline, self.timeout = deadline, timeout
        self.buffer = b""
        parts = urlsplit(url)
        scheme, host, port = _origin(url)
        if host is None or port is None:
            raise FetchError(f"request failed: no host in {url}")
        try:
            self.sock = socket.create_connection((host, port), timeout=self._left())
        except TimeoutError:
            raise FetchError(f"timed out after {timeout:g}s") from None
        except OSError as exc:
            raise FetchError(f"cannot connect: {exc}") from None
        try:
            if scheme == "https":
                self.sock = self._guarded(lambda: _tls(self.sock, host), "cannot connect")
            self._guarded(
                lambda: self.sock.sendall(_request(parts, host, port, scheme)), "cannot connect"
            )
        except BaseException:
            self.sock.close()
            raise

    def __enter__(self) -> _Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise FetchError(f"timed out after {self.timeout:g}s")
        return left

    def _guarded(self, step: Callable[[], _T], failure: str) -> _T:
        """One step on the socket, its wait bounded by what is left of the deadline."""
        try:
            self.sock.settimeout(self._left())
            return step()
        except TimeoutError:
            raise FetchError(f"timed out after {self.timeout:g}s") from None
        except OSError as exc:
            raise FetchError(f"{failure}: {exc}") from None

    def _recv(self) -> bytes:
        """The next bytes from the server, b"" once it closed."""
        return self._guarded(lambda: self.sock.recv(65_536), "request failed")

    def line(self, what: str) -> bytes:
        """One line without its CRLF (a bare LF is taken too, as http.client takes it)."""
        while (end := self.buffer.find(b"\n")) < 0:
            if len(self.buffer) > MAX_LINE:
                raise FetchError(f"request failed: {what} over {MAX_LINE:,} bytes")
            data = self._recv()
            if not data:
                said = (
                    f"in the {what}"
                    if self.buffer or what != "status line"
                    else "without a response"
                )
                raise FetchError(f"request failed: connection closed {said}")
            self.buffer += data
        if end > MAX_LINE:
            raise FetchError(f"request failed: {what} over {MAX_LINE:,} bytes")
        line, self.buffer = self.buffer[:end], self.buffer[end + 1 :]
        return line.removesuffix(b"\r")

    def exactly(self, size: int, what: str) -> bytes:
        """`size` bytes, or an error saying the body was cut short."""
        while len(self.buffer) < size:
            data = self._recv()
            if not data:
                raise FetchError(
                    f"request failed: {what} ended after {len(self.buffer):,} of {size:,} bytes"
                )
            self.buffer += data
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def head(self) -> _Head:
        """The final response's status line and headers (interim 1xx ones skipped)."""
        while True:
            head = _status(self.line("status line"))
            for name, value in _fields(self, "header"):
                if name in head.headers:
                    head.headers[name] += ", " + value
                else:
                    head.headers[name] = value
            if not 100 <= head.status < 200 or head.status == 101:
                return head

    def body(self, head: _Head, limit: int) -> bytes:
        """The body as the headers frame it, never more than `limit` bytes."""
        coding = head.headers.get("content-encoding", "identity").strip().lower()
        if coding not in ("", "identity"):
            raise FetchError(f"body sent with Content-Encoding {coding}: not read")
        if head.status in (204, 205):
            return b""
        transfer = head.headers.get("transfer-encoding")
        if transfer is not None:
            if transfer.strip().lower() != "chunked":
                raise FetchError(f"body sent with Transfer-Encoding {transfer.strip()}: not read")
            return self._chunked(limit)
        length = head.headers.get("content-length")
        if length is not None:
            return self.exactly(_length(length, limit), "body")
        return self._until_close(limit)

    def _chunked(self, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while chunk := _chunk_size(self.line("chunk size")):
            size += chunk
            if size > limit:
                raise _over(limit)
            chunks.append(self.exactly(chunk, "chunk"))
            if self.line("chunked body"):
                raise FetchError("request failed: malformed chunk: no CRLF after its data")
        for _trailer in _fields(self, "trailer"):
            pass  # read to the blank line; a trailer is not part of the body
        return b"".join(chunks)

    def _until_close(self, limit: int) -> bytes:
        chunks = [self.buffer]
        size = len(self.buffer)
        while size <= limit and (data := self._recv()):
            chunks.append(data)
            size += len(data)
        if size > limit:
            raise _over(limit)
        return b"".join(chunks)


def _tls(sock: socket.socket, host: str) -> socket.socket:
    """The connection wrapped in TLS, the certificate and host name checked as urllib does."""
    import ssl  # only for https: its import alone costs what a whole http fetch does

    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    return context.wrap_socket(sock, server_hostname=host)


def _request(parts: SplitResult, host: str, port: int, scheme: str) -> bytes:
    """The request's bytes: no body, no compression asked for, the connection closed after."""
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    # non-ASCII in a path is sent percent-encoded; anything already encoded stays
    target = quote(target, safe="".join(chr(c) for c in range(33, 127)))
    try:
        name = host.encode("ascii")
    except UnicodeEncodeError:
        name = host.encode("idna")
    if b":" in name:
        name = b"[" + name + b"]"  # an IPv6 literal
    if port != _DEFAULT_PORTS[scheme]:
        name += b":%d" % port
    return (
        b"GET " + target.encode("ascii") + b" HTTP/1.1\r\n"
        b"Host: " + name + b"\r\n"
        b"Accept: application/json\r\n"
        b"Accept-Encoding: identity\r\n"
        b"User-Agent: drift\r\n"
        b"Connection: close\r\n\r\n"
    )


def _status(line: bytes) -> _Head:
    """`HTTP/1.1 200 OK` read, or an error quoting the line."""
    version, _, rest = line.partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/") or len(code) != 3 or not code.isdigit():
        raise FetchError(f"request failed: malformed status line {_quote(line)}")
    return _Head(int(code), reason.strip().decode("latin-1"))


def _fields(wire: _Wire, what: str) -> list[tuple[str, str]]:
    """Header (or trailer) lines to the blank line, folded lines joined, names lower-cased."""
    fields: list[tuple[str, str]] = []
    while line := wire.line(what):
        if line[:1] in (b" ", b"\t") and fields:  # obsolete folding: part of the line above
            above, text = fields[-1]
            fields[-1] = (above, f"{text} {line.strip().decode('latin-1')}".strip())
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise FetchError(f"request failed: malformed {what} {_quote(line)}")
        fields.append((name.decode("latin-1").lower(), value.strip().decode("latin-1")))
        if len(fields) > MAX_HEADERS:
            raise FetchError(f"request failed: more than {MAX_HEADERS} {what}s")
    return fields


def _chunk_size(line: bytes) -> int:
    """A chunk's size from its line (`1a;ext=1`), or an error quoting the line."""
    digits = line.partition(b";")[0].strip()
    if not digits or len(digits) > 16 or digits.strip(b"0123456789abcdefABCDEF"):
        raise FetchError(f"request failed: malformed chunk size {_quote(line)}")
    return int(digits, 16)


def _length(value: str, limit: int) -> int:
    """Content-Length as a number (repeats must agree), checked against the cap up front."""
    values = {v.strip() for v in value.split(",")}
    if len(values) != 1 or not (text := values.pop()).isdigit() or not text.isascii():
        raise FetchError(f"request failed: malformed Content-Length {value!r}")
    if int(text) > limit:
        raise _over(limit)
    return int(text)


def _over(limit: int) -> FetchError:
    """The error for a body past the cap, the cap in MiB when it is whole MiB."""
    size = f"{limit >> 20} MiB" if limit and limit % (1 << 20) == 0 else f"{limit:,} bytes"
    return FetchError(f"body over {size}: not read")


def _quote(line: bytes) -> str:
    """A line from the server, short and printable, for a one-line message."""
    return repr(cut(line[:4096].decode("latin-1"), 63))
