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
entry's timeout. The request is drift's own small client
(drift.collectors.http_get), not urllib: importing urllib cost more than
the fetch, every minute.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from drift.collectors.http_get import FetchError, http_get
from drift.config import EndpointSpec
from drift.facts import CollectContext, CollectionError, Fact, storable
from drift.json_pointer import PointerError, leaves, parse, resolve, under
from drift.secrets.shapes import cut

MAX_BODY = 1 << 20
"""The most of a body read (1 MiB, as a command's output): a larger one is a blind spot."""

MAX_LEAVES = 10_000
"""The most leaves recorded of one document: past it, `pointer` or `ignore` should narrow it."""


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
    return http_get(url, timeout, MAX_BODY)


def _parse(body: bytes) -> Any:
    """The body as JSON (UTF-8, as RFC 8259 requires), or why it is not."""
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise FetchError(f"not JSON: not UTF-8 at byte {exc.start}") from None
    except RecursionError:
        raise FetchError("not JSON drift can read: nested too deep") from None
    except ValueError as exc:  # JSONDecodeError, or an integer of over 4,300 digits
        # cut after the catalogue read the start whole: a token cut short is no token
        head = cut(body[:4096].decode("utf-8", "replace"), 40, "")
        raise FetchError(f"not JSON ({exc}): starts {head!r}") from None
