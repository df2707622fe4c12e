"""drift's own HTTP GET client, held to urllib's behaviour on the same server bytes.

A raw socket server (tests/raw_http_server.py) writes exactly the bytes a
test gives; urllib.request (with no proxy) is the oracle: for generated
bodies and framings, drift's client returns what urllib returns, or fails
where urllib fails. Past that: the whole request bounded by one deadline,
the body cap, redirects kept to one origin, one-line errors for malformed
responses, and https refused without a trusted certificate.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import AbstractContextManager
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raw_http_server import RawServer, Reply, raw_server

from drift.collectors.http_get import MAX_REDIRECTS, FetchError, http_get

LIMIT = 1 << 20


@pytest.fixture(scope="module")
def server() -> Iterator[RawServer]:
    with raw_server() as s:
        yield s


def ours(url: str, timeout: float = 5, limit: int = LIMIT) -> tuple[str, bytes | str]:
    """("body", bytes) or ("error", the message)."""
    try:
        return "body", http_get(url, timeout, limit)
    except FetchError as exc:
        return "error", str(exc)


def by_urllib(url: str, timeout: float = 5) -> tuple[str, bytes | str]:
    """What urllib says for the same URL: ("body", bytes) or ("error", the HTTP status or "")."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            return "body", response.read()
    except urllib.error.HTTPError as exc:
        exc.close()
        return "error", f"HTTP {exc.code} {exc.reason}".rstrip()
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        return "error", f"{type(exc).__name__}"


# ---------------------------------------------------------------- differential

STATUSES = [
    (200, "OK"),
    (200, ""),
    (201, "Created"),
    (203, "Non-Authoritative Information"),
    (299, "Odd But Fine"),
    (300, "Multiple Choices"),
    (404, "Not Found"),
    (500, "Internal Server Error"),
    (503, "Service Unavailable"),
]


def cased(name: str, how: int) -> str:
    return [name, name.lower(), name.upper(), name.swapcase()][how]


@st.composite
def responses(draw: st.DrawFn) -> tuple[list[bytes], bytes]:
    """A response's bytes cut into pieces, and its body: framed every way HTTP/1.1 allows."""
    body = draw(st.binary(max_size=3000) | st.text(max_size=500).map(str.encode))
    status, reason = draw(st.sampled_from(STATUSES))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0"]))
    how = draw(st.integers(0, 3))
    head = [f"{version} {status} {reason}".rstrip() if reason or draw(st.booleans()) else ""]
    head[0] = head[0] or f"{version} {status}"
    if draw(st.booleans()):
        head.append("Content-Type: application/json")
    if draw(st.booleans()):  # an obsolete folded header
        head.append("X-Folded: first part\r\n\tsecond part")
    framing = draw(st.sampled_from(["length", "chunked", "close"]))
    payload = body
    if framing == "length":
        head.append(f"{cased('Content-Length', how)}: {len(body)}")
    elif framing == "chunked":
        head.append(f"{cased('Transfer-Encoding', how)}: {cased('chunked', how)}")
        chunks = [c for c in cut(body, draw(st.lists(st.integers(0, len(body)), max_size=8))) if c]
        payload = b""
        for chunk in chunks:
            size = f"{len(chunk):x}"
            size = size.upper() if draw(st.booleans()) else size
            ext = draw(st.sampled_from(["", ";ext", ";name=value", ' ; q="x;y"']))
            payload += f"{size}{ext}\r\n".encode() + chunk + b"\r\n"
        trailers = draw(st.lists(st.sampled_from(["X-Trailer: 1", "Digest: x"]), max_size=2))
        payload += b"0\r\n" + b"".join(t.encode() + b"\r\n" for t in trailers) + b"\r\n"
    raw = "\r\n".join(head).encode() + b"\r\n\r\n" + payload
    if draw(st.booleans()):
        raw = b"HTTP/1.1 100 Continue\r\n\r\n" + raw
    return cut(raw, draw(st.lists(st.integers(0, len(raw)), max_size=6))), body


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """`data` cut at `points` (in any order), the pieces in order."""
    return [data[a:b] for a, b in pairwise([0, *sorted(points), len(data)])]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(response=responses())
def test_the_client_reads_what_urllib_reads_from_the_same_bytes(
    server: RawServer, response: tuple[list[bytes], bytes]
) -> None:
    pieces, body = response
    server.reply(*pieces)
    mine, theirs = ours(server.url + "/info"), by_urllib(server.url + "/info")
    assert mine[0] == theirs[0], (mine, theirs)
    if mine[0] == "body":
        assert mine[1] == theirs[1] == body
    else:
        assert mine[1] == theirs[1]  # the same "HTTP 404 Not Found"


def test_a_same_origin_redirect_is_followed_as_urllib_follows_it(server: RawServer) -> None:
    server.reply(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n[1,2,3]")
    for code in (301, 302, 303, 307, 308):
        server.by_path = {
            "/a": Reply([f"HTTP/1.1 {code} Moved\r\nLocation: /b?x=1\r\n\r\n".encode()])
        }
        assert ours(server.url + "/a") == by_urllib(server.url + "/a") == ("body", b"[1,2,3]")
        assert server.requests[-1].startswith(b"GET /b?x=1 HTTP/1.1\r\n")


# ---------------------------------------------------------------- what is sent


def test_the_request_asks_for_json_uncompressed_and_closes(server: RawServer) -> None:
    server.reply(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    assert ours(server.url + "/get_server_info?v=1") == ("body", b"{}")
    request = server.requests[-1].decode()
    lines = request.split("\r\n")
    assert lines[0] == "GET /get_server_info?v=1 HTTP/1.1"
    headers = dict(line.split(": ", 1) for line in lines[1:] if line)
    assert headers["Host"] == f"127.0.0.1:{server.port}"  # not port 80: it is named
    assert headers["Accept"] == "application/json"
    assert headers["Accept-Encoding"] == "identity"
    assert headers["Connection"] == "close"


def test_a_proxy_in_the_environment_is_never_used(
    server: RawServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.reply(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    assert ours(server.url) == ("body", b"{}")


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_an_ipv6_literal_host_is_reached_and_named_in_brackets() -> None:
    with raw_server("::1") as s6:
        s6.reply(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ntrue")
        assert ours(s6.url + "/v") == by_urllib(s6.url + "/v") == ("body", b"true")
        assert f"\r\nHost: [::1]:{s6.port}\r\n".encode() in s6.requests[0]


# ---------------------------------------------------------------- bounds


def test_a_trickle_past_the_timeout_is_bounded_as_a_whole_not_per_read(
    server: RawServer,
) -> None:
    # every byte comes well within a per-read timeout; the whole never comes in time
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n"
    server.reply(*[head[i : i + 1] for i in range(len(head))], *[b"1"] * 40, pause=0.05)
    started = time.monotonic()
    assert ours(server.url, timeout=0.5) == ("error", "timed out after 0.5s")
    assert time.monotonic() - started < 1.2


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
def test_a_body_over_the_cap_is_an_error(server: RawServer, framing: str) -> None:
    body = b"x" * 1500
    if framing == "length":
        server.reply(b"HTTP/1.1 200 OK\r\nContent-Length: 1500\r\n\r\n" + body)
    elif framing == "chunked":
        chunks = b"".join(b"1f4\r\n" + b"x" * 500 + b"\r\n" for _ in range(3))
        server.reply(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
        )
    else:
        server.reply(b"HTTP/1.1 200 OK\r\n\r\n" + body)
    assert ours(server.url, limit=1000) == ("error", "body over 1,000 bytes: not read")
    assert ours(server.url, limit=1500) == ("body", body)


def test_a_body_cut_short_is_an_error_not_a_shorter_document(server: RawServer) -> None:
    # "12" of a declared "12345" would parse as JSON: taking it would be a wrong value
    server.reply(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n12")
    assert ours(server.url) == ("error", "request failed: body ended after 2 of 5 bytes")


# ---------------------------------------------------------------- redirects


def test_a_redirect_to_another_port_is_refused_and_not_asked(server: RawServer) -> None:
    with raw_server() as other:
        target = f"{other.url}/x"
        server.reply(f"HTTP/1.1 302 Found\r\nLocation: {target}\r\n\r\n".encode())
        assert ours(server.url) == ("error", f"redirected to {target}: not followed (another host)")
        assert other.requests == []


def test_a_redirect_loop_and_a_long_chain_are_errors(server: RawServer) -> None:
    server.reply(b"HTTP/1.1 302 Found\r\nLocation: /loop\r\nContent-Length: 0\r\n\r\n")
    assert ours(server.url + "/loop") == (
        "error",
        f"redirected back to {server.url}/loop: a redirect loop",
    )
    server.by_path = {
        f"/{i}": Reply([f"HTTP/1.1 307 Again\r\nLocation: /{i + 1}\r\n\r\n".encode()])
        for i in range(20)
    }
    assert ours(server.url + "/0") == (
        "error",
        f"redirected more than {MAX_REDIRECTS} times: not followed",
    )
    server.by_path.pop(f"/{MAX_REDIRECTS}")  # the last hop answers 200 {}
    server.default = Reply([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"])
    assert ours(server.url + "/0") == ("body", b"{}")


def test_a_redirect_without_a_location_is_its_status_as_urllib_says(server: RawServer) -> None:
    server.reply(b"HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n")
    assert ours(server.url) == by_urllib(server.url) == ("error", "HTTP 302 Found")


# ---------------------------------------------------------------- malformed


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "request failed: connection closed without a response"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "request failed: malformed status line 'SSH-2.0-OpenSSH_9.6'"),
        (b"HTTP/1.1 2OO OK\r\n\r\n", "request failed: malformed status line 'HTTP/1.1 2OO OK'"),
        (
            b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n{}",
            "request failed: malformed header 'no colon here'",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "request failed: malformed chunk size 'zz'",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
            "request failed: malformed chunk: no CRLF after its data",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}",
            "request failed: connection closed in the chunked body",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\n{}",
            "request failed: malformed Content-Length '2, 3'",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n\x1f\x8b",
            "body sent with Content-Encoding gzip: not read",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "body sent with Transfer-Encoding gzip, chunked: not read",
        ),
        (
            b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n",
            "request failed: more than 100 headers",
        ),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000, "request failed: header over 65,536 bytes"),
    ],
)
def test_a_malformed_response_is_a_one_line_error(
    server: RawServer, raw: bytes, message: str
) -> None:
    server.reply(raw)
    kind, said = ours(server.url)
    assert (kind, said) == ("error", message)
    assert "\n" not in str(said)


# ---------------------------------------------------------------- https


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 only (not for "localhost")."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to make a self-signed certificate with")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=drift test", "-addext", "subjectAltName=IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


def tls_server(certificate: tuple[Path, Path]) -> AbstractContextManager[RawServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    return raw_server(tls=lambda conn: context.wrap_socket(conn, server_side=True))


def test_https_with_an_untrusted_certificate_is_refused_as_urllib_refuses_it(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with tls_server(certificate) as s:
        s.reply(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        kind, message = ours(s.url)
        assert kind == "error"
        assert str(message).startswith("cannot connect: [SSL: CERTIFICATE_VERIFY_FAILED]")
        assert "self-signed certificate" in str(message)
        try:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(s.url, timeout=5)
        except urllib.error.URLError as exc:
            assert message == f"cannot connect: {exc.reason}"
        assert s.requests == []  # nothing was asked of it


def test_https_is_read_once_the_certificate_is_trusted_and_its_name_checked(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    with tls_server(certificate) as s:
        s.reply(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        assert ours(s.url) == by_urllib(s.url) == ("body", b"{}")
        # the certificate names 127.0.0.1, not localhost: the host name check refuses it
        other = s.url.replace("127.0.0.1", "localhost")
        kind, message = ours(other)
        assert kind == "error" and "Hostname mismatch" in str(message)


# ---------------------------------------------------------------- import cost


def test_an_http_fetch_imports_neither_urllib_request_nor_ssl(server: RawServer) -> None:
    server.reply(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    code = (
        "import sys; from drift.collectors.endpoints import fetch; "
        f"body = fetch({server.url!r}, 5); "
        "print(body.decode(), sorted(m for m in ('ssl', 'http.client', 'urllib.request', 'email')"
        " if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ).stdout
    assert out.split(" ", 1) == ["{}", "[]\n"]
    assert json.loads(out.split(" ", 1)[0]) == {}
