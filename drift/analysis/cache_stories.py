"""The room of the grouper that tells a JIT or kernel cache's story: grown, emptied or rebuilt.

A cache (``cache:NAME``, `drift.collectors.caches`) is one summary, so its
changes are one story: counts and bytes in the title ("cache triton: 1,204
-> 1,260 files (+56), +12 MiB"), and what the running services make of it
in the label. A server fills its own cache as it compiles, so a cache that
grew while every running service was already up is expected and says so; a
cache whose old files went (its `oldest` moved: wiped, evicted, replaced) is
rooted at that key, filed under "cache turnover", which ranks above plain
growth; and a service started after the change started with the cache as it
is now. Whether a running process reads a file of it is never recorded, so
the status stays ``on-disk``.
"""

from __future__ import annotations

from drift.analysis.claims import Claims, value_of
from drift.analysis.diff import Change
from drift.analysis.timing import parse_time_us
from drift.analysis.titles import about_the_same_time
from drift.timespec import clock

CACHE_KEYS = ("digest", "files", "bytes", "newest", "oldest")
"""A cache's keys, the story's root first (the digest moves on any change) unless old files went."""

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


class CacheStories(Claims):
    """Tells each changed cache as one story, and which running services started since."""

    def cache_story(self, subject: str) -> None:
        """One story for every free change of a cache, rooted at `oldest` when old files went."""
        changes = {k: c for k in CACHE_KEYS if (c := self.free(subject, k)) is not None}
        if not changes:
            return
        oldest = changes.get("oldest")
        turnover = oldest is not None and oldest.kind != "added"
        root = oldest if turnover and oldest is not None else next(iter(changes.values()))
        summary = _Summary(subject, changes, self)
        label, services = self._cache_label(root, summary)
        evidence = [c for c in changes.values() if c is not root]
        self.add(root, evidence, "on-disk", label, summary.title(), services)

    def _cache_label(self, root: Change, summary: _Summary) -> tuple[str, list[str]]:
        """What the running services make of the change, and the services started since it."""
        started = self.running_starts()
        if not started:
            return "on disk: whether a running server reads it is not recorded", []
        span = self.records.span(root)
        order = {name: at.order(span) for name, at in started.items()}
        before = sorted(n for n, o in order.items() if o == "before")
        later = sorted(n for n, o in order.items() if o == "after")
        unknown = sorted(n for n, o in order.items() if o == "unknown")
        parts = []
        if before:
            phrase = f"{summary.verb} while {', '.join(before)} ran (started before it)"
            if summary.grew_only:
                phrase += ": a running server fills its cache as it compiles"
            parts.append(phrase)
        if later:
            parts.append(f"{', '.join(later)} started after it, {summary.start_phrase}")
        if unknown:
            shown_at = [
                parse_time_us(value_of(self.after[f"service:{n}", "started_at"])) for n in unknown
            ]
            when = about_the_same_time([at for at in shown_at if at is not None], span)
            parts.append(f"{', '.join(unknown)} started {when}")
        parts.append("whether a process reads its files is not recorded")
        return "; ".join(parts), later + unknown


class _Summary:
    """A cache's counts before and after, and the words for what happened to it."""

    def __init__(self, subject: str, changes: dict[str, Change], claims: Claims) -> None:
        self.name = subject.partition(":")[2]

        def values(key: str) -> tuple[str | None, str | None]:
            change = changes.get(key)
            if change is not None:
                return value_of(change.before), value_of(change.after)
            now = value_of(claims.after.get((subject, key)))
            return now, now

        self.files = tuple(_number(v) for v in values("files"))
        self.bytes = tuple(_number(v) for v in values("bytes"))
        newest_before = parse_time_us(values("newest")[0])
        oldest_after = parse_time_us(values("oldest")[1])
        self.oldest_after = oldest_after
        # Every file now is newer than every file then: none of those is left as it was.
        self.rebuilt = (
            oldest_after is not None and newest_before is not None and oldest_after > newest_before
        )
        self.old_went = "oldest" in changes and changes["oldest"].kind != "added"
        self.emptied = self.files[1] == 0 and bool(self.files[0])
        self.grew_only = not self.old_went and _grew(self.files) and _grew(self.bytes)

    @property
    def verb(self) -> str:
        if self.emptied:
            return "emptied"
        if self.rebuilt:
            return "rebuilt"
        return "changed" if self.old_went or not self.grew_only else "written"

    @property
    def start_phrase(self) -> str:
        """How a service started after the change found the cache."""
        if self.emptied:
            return "with the cache empty: it compiles anew what it needs"
        if self.rebuilt:
            return "with none of the files it had before"
        return "with the cache as it is now"

    def title(self) -> str:
        """``cache triton: 1,204 -> 1,260 files (+56), +12 MiB`` and its variants."""
        before, after = self.files
        name = f"cache {self.name}"
        if self.emptied:
            return f"{name} emptied ({before or 0:,} files -> 0)"
        counts = f"{_count(before)} -> {_count(after)} files"
        if before is not None and after is not None and before != after:
            counts += f" ({after - before:+,})"
        grown = _bytes_delta(self.bytes)
        if grown:
            counts += f", {grown}"
        if self.rebuilt and self.oldest_after is not None:
            return f"{name} rebuilt: {counts}, every file written since {clock(self.oldest_after)}"
        if self.old_went and self.oldest_after is not None:
            return f"{name}: {counts}; files older than {clock(self.oldest_after)} went"
        if before == 0:
            return f"{name} filled: {counts}"
        if before == after:
            return f"{name}: {_count(after)} files, some added, removed or rewritten" + (
                f", {grown}" if grown else ""
            )
        return f"{name}: {counts}"


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _count(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def _grew(pair: tuple[int | None, ...]) -> bool:
    before, after = pair
    return before is not None and after is not None and after > before


def _bytes_delta(pair: tuple[int | None, ...]) -> str:
    """``+12 MiB``, ``-300 KiB``, ``+512 B``; empty when unknown or unchanged."""
    before, after = pair
    if before is None or after is None or before == after:
        return ""
    delta = after - before
    size = abs(delta)
    sign = "+" if delta > 0 else "-"
    for unit, scale in _UNITS:
        if size >= scale:
            # one decimal below ten units (1.5 MiB), whole units above (12 MiB)
            small = size < 10 * scale
            shown = f"{size / scale:.1f}".removesuffix(".0") if small else f"{size // scale:,}"
            return f"{sign}{shown} {unit}"
    return f"{sign}{size:,} B"
