"""Markdown escaping: untrusted text as Markdown that renders as exactly that text.

The `md`, `code` and `fence` filters of the templates (report.md.j2).
"""

from __future__ import annotations

import re
from typing import Any

from drift.display import printable

# `_` between two letters or digits cannot start or end emphasis: left as is, for readability.
# `#` before a digit would link an issue when pasted into a GitHub issue or pull request.
_MD_SPECIAL = re.compile(r"[\\`*\[\]<&|~]|(?<![^\W_])_|_(?![^\W_])|#(?=\d)")
_MD_BLOCK_START = re.compile(r"^([#>+=-])|^(\d+)([.)])")
_MD_SCHEME = re.compile(r"(?<=[A-Za-z]):(?=//)")
_MD_WWW = re.compile(r"(?i)\b(www)\.")
_BACKTICKS = re.compile(r"`+")


def md_text(text: Any) -> str:
    """Untrusted text as one line of Markdown prose that renders as exactly that text.

    Backslash escapes stop emphasis, links, images, raw HTML, entities and
    table cells; `://`, `www.` and `@` are escaped too so GitHub cannot
    autolink a URL, address or issue number; a leading `#`, `>`, `-`, `1.`
    cannot start a block.
    """
    flat = " ".join(printable(str(text)).split())
    out = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), flat)
    out = _MD_WWW.sub(r"\1\\.", _MD_SCHEME.sub(r"\\:", out)).replace("@", "\\@")
    return _MD_BLOCK_START.sub(
        lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3), out
    )


def md_code(text: Any, cell: bool = False) -> str:
    """Untrusted text as a Markdown code span: nothing inside is Markdown or HTML.

    The backtick fence is longer than any run inside. In a table `cell`, `|`
    must still be escaped (GFM splits cells before it sees code spans).
    """
    flat = " ".join(printable(str(text)).splitlines()).replace("\t", " ")
    if flat == "":
        return "*(empty)*"
    if cell:
        flat = flat.replace("|", "\\|")
    fence = "`" * (max((len(r) for r in _BACKTICKS.findall(flat)), default=0) + 1)
    # CommonMark strips one space from each side when both are there: pad so edges survive.
    if flat[0] in "` " or flat[-1] in "` ":
        flat = f" {flat} "
    return f"{fence}{flat}{fence}"


def md_fence(lines: list[str]) -> str:
    """A backtick fence for a code block: longer than any backtick run in `lines`.

    Runs are counted in the lines as printed (`printable`): an escape sequence
    between two runs vanishes there and joins them into a longer one.
    """
    longest = max(
        (len(r) for line in lines for r in _BACKTICKS.findall(printable(line))), default=0
    )
    return "`" * max(3, longest + 1)
