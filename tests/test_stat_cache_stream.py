"""A record reads its stat cache a shard at a time, and digests its blocks in chunks.

Both exist so that memory does not grow with the tree; neither may change
what a record finds. Each is checked against the whole-at-once way it
replaced: the store's shards against a dict of every entry, the chunked
digest against one join of every column, a collection with the sharded
cache against one with the dict, on real SQLite files and real trees.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift.collectors import hashing
from drift.collectors.files import collect_files
from drift.config import FileSpec
from drift.facts import CachedStat, CollectContext, Fact, FactBlock, StatCache
from drift.store import digest as digest_module
from drift.store.digest import state_digest
from drift.store.statcache import ShardedStatCache, load_stat_cache, write_stat_cache
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
entries = st.tuples(
    st.integers(0, 2**40), st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**40)
).map(lambda t: (*t, hashlib.sha256(repr(t).encode()).hexdigest()))


def hits(cache: StatCache, paths: list[str]) -> dict[int, CachedStat]:
    """What the cache holds of `paths`, asked part by part; each index in one part only."""
    found: dict[int, CachedStat] = {}
    asked: list[int] = []
    for indexes, shard in cache.shards(paths):
        asked.extend(indexes)
        found.update({i: shard[paths[i]] for i in indexes if paths[i] in shard})
    assert sorted(asked) == list(range(len(paths))) or not found and not asked
    return found


def open_writer(folder: str) -> tuple[HistoryWriter, int]:
    writer = HistoryWriter.open(resolve_db_url(os.path.join(folder, "d.db")))
    host_id = writer.conn.insert_id("INSERT INTO hosts (name) VALUES (?)", ("h",))
    return writer, host_id


@settings(max_examples=40, deadline=None)
@given(
    cached=st.dictionaries(names.map(lambda n: "/t/" + n), entries, max_size=200),
    asked=st.lists(names.map(lambda n: "/t/" + n), max_size=60),
)
def test_the_sharded_cache_finds_what_the_whole_cache_holds(
    cached: dict[str, CachedStat], asked: list[str]
) -> None:
    paths = [*asked, *list(cached)[::2]]  # some held, some not, some asked twice
    with tempfile.TemporaryDirectory() as folder:
        writer, host_id = open_writer(folder)
        try:
            write_stat_cache(writer.conn, host_id, cached, set())
            whole = StatCache(load_stat_cache(writer.conn, host_id))
            sharded = ShardedStatCache(writer.conn, host_id)
            expected = {i: cached[p] for i, p in enumerate(paths) if p in cached}
            assert hits(sharded, paths) == hits(whole, paths) == expected
            for path in paths:
                assert sharded.get(path) == cached.get(path)
            # What get() kept is used, and still gives the same.
            assert hits(sharded, paths) == expected
            # A host the store has never seen has an empty cache.
            assert hits(ShardedStatCache(writer.conn, None), paths) == {}
        finally:
            writer.close()


def _whole_columns(h: Any, columns: list[list[str]]) -> None:
    """The digest's columns as they were hashed before chunking: each joined at once."""
    for column in columns:
        h.update("\0".join(column).encode("utf-8", "surrogateescape"))
        h.update(array("Q", map(len, column)).tobytes())


def whole_column_digest(items: list[Fact | FactBlock]) -> bytes:
    """The state digest with each column joined at once (the rest of it, parts and blocks
    as they are, is state_digest's own)."""
    saved = digest_module._digest_columns
    digest_module._digest_columns = _whole_columns
    try:
        return state_digest(items)
    finally:
        digest_module._digest_columns = saved


texts = st.text(max_size=6)
blocks = st.lists(st.tuples(texts, texts, texts, texts), max_size=30).map(
    lambda rows: FactBlock(
        ("sha256", "size", "mode"),
        [r[0] for r in rows],
        [[r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]],
        [{}] * len(rows),
    )
)
facts = st.builds(Fact, texts, texts, texts, st.just({}), st.booleans())


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.one_of(facts, blocks), max_size=6), chunk=st.integers(1, 7))
def test_a_chunked_digest_is_the_digest_of_whole_columns(
    items: list[Fact | FactBlock], chunk: int
) -> None:
    expected = whole_column_digest(items)
    saved = digest_module._CHUNK
    digest_module._CHUNK = chunk
    try:
        assert state_digest(items) == expected
    finally:
        digest_module._CHUNK = saved
    assert state_digest(items) == expected


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True),
    kept=st.lists(st.booleans(), min_size=8, max_size=8),
    edited=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_a_tree_collected_with_the_sharded_cache_reads_as_with_the_whole_one(
    files: list[str], kept: list[bool], edited: list[bool]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder) / "tree"
        for i, name in enumerate(files):
            (tree / name[0]).mkdir(parents=True, exist_ok=True)
            (tree / name[0] / f"{name}.txt").write_text(f"{name} {i}\n")
        os.symlink("a/a.txt", tree / "link")
        spec = FileSpec("t", (str(tree / "**"),))
        time.sleep(hashing.RACY_WINDOW_NS / 1e9 + 0.02)
        first = CollectContext()
        list(collect_files(spec, first))
        # Some entries forgotten, some files changed since they were cached.
        held = zip(first.cache_updates.items(), kept, strict=False)
        cache = {p: e for (p, e), keep in held if keep}
        for name, edit in zip(files, edited, strict=False):
            if edit:
                (tree / name[0] / f"{name}.txt").write_text("edited, longer than before\n")
        writer, host_id = open_writer(folder)
        try:
            write_stat_cache(writer.conn, host_id, cache, set())
            whole = CollectContext(file_cache=dict(cache))
            sharded = CollectContext(file_cache=ShardedStatCache(writer.conn, host_id))
            assert list(collect_files(spec, sharded)) == list(collect_files(spec, whole))
            assert sharded.cache_updates == whole.cache_updates
        finally:
            writer.close()
