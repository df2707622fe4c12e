"""[[endpoints]]: a server's own view of its config, fetched over HTTP as JSON, one fact per leaf.

An engine's defaults move with its upgrades while its command line stays
the same; the server says what it really runs with (SGLang's
``/get_server_info``, vLLM's ``/version``). Each leaf of the document is
a fact ``json:POINTER`` whose value is the leaf as JSON text, so ``1``,
``"1"`` and ``true`` differ. Anything that keeps drift from reading the
document (a timeout, a refused connection, an HTTP error, a body that is
not JSON or too large, a pointer that names nothing) is one blind spot
on the endpoint: its last values are kept, never read as removed.

The request goes straight to the URL: proxy environment variables are
ignored (a cron job's ``http_proxy`` must not route a loopback server
through a proxy), no redirect to another host, scheme or port is
followed, and the whole request, connecting included, is bounded by the
entry's timeout.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.client import HTTPException, HTTPResponse
from typing import Any
from urllib.parse import urlsplit

from drift.config import EndpointSpec
from drift.facts import CollectContext, CollectionError, Fact, storable
from drift.json_pointer import PointerError, leaves, parse, resolve, under

MAX_BODY = 1 << 20
"""The most of a body read (1 MiB, as a command's output): a larger one is a blind spot."""

MAX_LEAVES = 10_000
"""The most leaves recorded of one document: past it, `pointer` or `ignore` should narrow it."""


class FetchError(Exception):
    """Why the document could not be read, in a few words."""


def collect_endpoint(spec: EndpointSpec, ctx: CollectContext) -> Iterator[Fact | CollectionError]:
    """`endpoint:NAME json:POINTER` for every leaf, or one blind spot on the endpoint."""
    subject = f"endpoint:{spec.name}"
    try:
        body = fetch(spec.url, spec.timeout)
        document = _parse(body)
        found = resolve(document, parse(spec.pointer))
    except (FetchError, PointerError) as exc:
        yield CollectionError(subject, None, f"{spec.url}: {exc}")
        return
    kept = [
        (pointer, leaf)
        for pointer, leaf in leaves(found, spec.pointer)
        if not any(under(pointer, ignored) for ignored in spec.ignore)
    ]
    if len(kept) > MAX_LEAVES:
        yield CollectionError(
            subject,
            None,
            f"{spec.url}: {len(kept):,} values, over {MAX_LEAVES:,}: "
            "narrow it with pointer or ignore",
        )
        return
    # one provenance for every leaf of the document
    provenance: dict[str, Any] = {"url": spec.url}
    if spec.service is not None:
        provenance["service"] = spec.service
    for pointer, leaf in kept:
        yield Fact(subject, "json:" + storable(pointer), leaf_text(leaf), provenance)


def leaf_text(leaf: Any) -> str:
    """A leaf as JSON text (``8192``, ``"fa3"``, ``true``, ``[]``), unicode as it is."""
    text = json.dumps(leaf, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\\ud800"): JSON's own escape keeps it
        text = json.dumps(leaf)
    return text


def fetch(url: str, timeout: float) -> bytes:
    """GET `url`: its body, at most MAX_BODY bytes, within `timeout` seconds in all."""
    deadline = time.monotonic() + timeout
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), _SameOriginRedirects(urlsplit(url))
    )
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with opener.open(request, timeout=timeout) as response:
            return _read_bounded(response, deadline, timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise FetchError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise FetchError(f"timed out after {timeout:g}s") from None
        raise FetchError(f"cannot connect: {reason}") from None
    except TimeoutError:
        raise FetchError(f"timed out after {timeout:g}s") from None
    except (OSError, HTTPException, ValueError) as exc:
        raise FetchError(f"request failed: {exc or type(exc).__name__}") from None


def _read_bounded(response: HTTPResponse, deadline: float, timeout: float) -> bytes:
    """The body in chunks, so neither a slow trickle nor an endless one outlasts the deadline."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise FetchError(f"timed out after {timeout:g}s")
        # the socket's own timeout bounds each read; shrink it to what is left
        sock = getattr(getattr(response.fp, "raw", None), "_sock", None)
        if sock is not None:
            sock.settimeout(left)
        chunk = response.read1(64 * 1024)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY:
            raise FetchError(f"body over {MAX_BODY >> 20} MiB: not read")
        chunks.append(chunk)


def _parse(body: bytes) -> Any:
    """The body as JSON (UTF-8, as RFC 8259 requires), or why it is not."""
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise FetchError(f"not JSON: not UTF-8 at byte {exc.start}") from None
    except RecursionError:
        raise FetchError("not JSON drift can read: nested too deep") from None
    except ValueError as exc:  # JSONDecodeError, or an integer of over 4,300 digits
        head = body[:40].decode("utf-8", "replace")
        raise FetchError(f"not JSON ({exc}): starts {head!r}") from None


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the same scheme, host and port; any other is an error."""

    max_redirections = 5

    def __init__(self, origin: Any) -> None:
        self.origin = (origin.scheme, origin.hostname, origin.port)

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        target = urlsplit(newurl)
        if (target.scheme, target.hostname, target.port) != self.origin:
            raise FetchError(f"redirected to {newurl}: not followed (another host)")
        return super().redirect_request(req, fp, code, msg, headers, newurl)
