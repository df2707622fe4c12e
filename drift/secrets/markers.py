"""How a secret reads once redacted: the stored digest and the marker shown in its place.

A secret fact is stored as ``hmac-sha256:<32 hex>``, a keyed digest, so
drift can say "changed" without showing either value. A secret inside a
larger text becomes ``[redacted:<8 hex>]``, the first hex digits of the same
digest: two different secrets read differently, one secret reads the same
everywhere and in every record. Reports and the analysis show a secret fact
with the same marker (`shown_secret`). Nothing here knows the key.
"""

from __future__ import annotations

import re

DIGEST_PREFIX = "hmac-sha256:"
MARKER_FORMAT = "[redacted:{}]"

ALREADY_REDACTED = re.compile(r"\[redacted:[0-9a-f]{8}\]|hmac-sha256:[0-9a-f]{32}")
"""A marker or a stored digest: drift's own output, never a secret to mask again."""


def stored_digest(hexdigest: str) -> str:
    """The stored form of a secret fact, from the hex HMAC of its value."""
    return DIGEST_PREFIX + hexdigest[:32]


def marker(hexdigest: str) -> str:
    """What a secret inside a larger text becomes, from the hex HMAC of its value."""
    return MARKER_FORMAT.format(hexdigest[:8])


def shown_secret(stored: str | None) -> str:
    """How a secret fact is shown: ``[redacted:<8 hex>]``, the same marker as inside a text.

    `stored` is the fact's ``hmac-sha256:`` digest; both forms start with the
    same hex digits, so a secret reads the same in a value, a title and a diff.
    """
    hexed = (stored or "").rsplit(":", 1)[-1][:8]
    return MARKER_FORMAT.format(hexed) if hexed else "[redacted]"
