"""[[caches]]: a JIT or kernel cache (Triton, FlashInfer, DeepGEMM ...) summed up as one subject.

A cache holds thousands of files named by hashes, written by the running
server as it compiles: a fact per file would flood the history with names
nobody reads. So a cache is recorded as a summary, ``cache:NAME``: how many
files, their bytes, a digest over every file's path, size and mtime (any
file added, removed or rewritten moves it), and the mtimes of its newest and
oldest files (the oldest moves only when old files go, which tells a cache
wiped or replaced from one that grew).

With ``hash = "stat"`` (the default) nothing is read: a listing and one lstat
a file, so a 20k-file cache costs a record a few tens of milliseconds. With
``hash = "content"`` every file is read at every record (no stat cache: its
entries would outlive the files of a cache that churns) and the digest is
over path, size and content, so a file merely touched does not count.

The walk is the files collector's (`drift.collectors.walk`): no symlink
below the named folder is followed (a link counts as itself), no other
filesystem is entered, drift's own files are never listed. A folder that
does not exist yet is an empty cache; one that cannot be listed makes the
whole cache a blind spot that keeps its last values, never a partial count.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from typing import NamedTuple

from drift.collectors.hashing import read_all
from drift.collectors.walk import Expansion, expand
from drift.config import MAX_FILES, CacheSpec
from drift.facts import CollectContext, CollectionError, Fact, storable
from drift.timespec import iso


class CacheFile(NamedTuple):
    """One file of a cache: its path as the config names it, where the host reads it, its lstat."""

    name: str
    path: str
    st: os.stat_result


def collect_cache(spec: CacheSpec, ctx: CollectContext) -> Iterator[Fact | CollectionError]:
    """`cache:NAME` files, bytes, digest (and newest, oldest by stat), or one blind spot."""
    subject = f"cache:{spec.name}"
    found = expand(walk_patterns(spec.paths), ctx.exclude, max_files=MAX_FILES, files=ctx.files)
    if found.overflow is not None:
        yield CollectionError(
            subject, None, f"more than {MAX_FILES:,} files below {found.overflow}: not recorded"
        )
        return
    if found.errors:
        yield _blind_spot(subject, found.errors)
        return
    try:
        listed = cache_files(found)
    except OSError as exc:
        yield CollectionError(subject, None, f"cannot stat {exc.filename}: {exc.strerror}")
        return
    provenance = {"paths": list(spec.paths)}
    if spec.hash == "content":
        try:
            lines, listed = _content_lines(listed, ctx)
        except OSError as exc:
            yield CollectionError(subject, None, f"cannot read {exc.filename}: {exc.strerror}")
            return
    else:
        lines = [f"{f.name}\0{f.st.st_size}\0{f.st.st_mtime_ns}\n" for f in listed]
    yield Fact(subject, "digest", digest_of(lines), provenance)
    yield Fact(subject, "files", str(len(listed)), provenance)
    yield Fact(subject, "bytes", str(sum(f.st.st_size for f in listed)), provenance)
    if spec.hash == "stat" and listed:
        mtimes = [f.st.st_mtime_ns for f in listed]
        yield Fact(subject, "newest", iso(max(mtimes) // 1000), provenance)
        yield Fact(subject, "oldest", iso(min(mtimes) // 1000), provenance)


def walk_patterns(paths: tuple[str, ...]) -> list[str]:
    """The walk's globs for a cache's paths: each path itself and every file below it."""
    patterns = []
    for path in paths:
        patterns.append(path)
        patterns.append(path.rstrip("/") + "/**")
    return patterns


def cache_files(found: Expansion) -> list[CacheFile]:
    """Every file the walk found, sorted by name, with its lstat (a file gone since: left out)."""
    named = found.named if found.naming is not None else None
    out = []
    for path, (pattern, entry) in found.matches.items():
        try:
            st = entry if isinstance(entry, os.stat_result) else os.lstat(path)
        except FileNotFoundError:
            continue  # removed since it was listed: the server evicts as it writes
        name = storable(path if named is None else named(path, pattern))
        out.append(CacheFile(name, path, st))
    out.sort()
    return out


def digest_of(lines: list[str]) -> str:
    """SHA-256 over the files' lines, in order."""
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _content_lines(
    listed: list[CacheFile], ctx: CollectContext
) -> tuple[list[str], list[CacheFile]]:
    """Each file's line by content (a regular file's SHA-256, a link's target, else its type),
    and the files still there; raises OSError naming a file that cannot be read.
    """
    regular = [f for f in listed if stat.S_ISREG(f.st.st_mode)]
    reads = iter(read_all([(f.path, f.st.st_size) for f in regular], None, None, files=ctx.files))
    lines, kept = [], []
    for listed_file in listed:
        f, mode = listed_file, listed_file.st.st_mode
        if stat.S_ISREG(mode):
            read = next(reads)
            if read.kind == "gone":
                continue
            if read.kind != "ok" or read.st is None:
                raise OSError(0, read.error or f"{read.kind} while read", f.name)
            f = f._replace(st=read.st)  # the size the read vouches for
            what = read.digest
        elif stat.S_ISLNK(mode):
            try:
                what = "-> " + storable(ctx.files.readlink(ctx.files.inner_path(f.path)))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, f.name) from None
        else:
            what = f"type {stat.S_IFMT(mode):o}"
        lines.append(f"{f.name}\0{f.st.st_size}\0{what}\n")
        kept.append(f)
    return lines, kept


def _blind_spot(subject: str, errors: list[CollectionError]) -> CollectionError:
    """The walk's errors (``file:DIR/`` each) as one error on the cache: its summary is unknown."""
    where = [f"{e.subject.removeprefix('file:')}: {e.message}" for e in errors[:3]]
    more = f" (and {len(errors) - 3:,} more)" if len(errors) > 3 else ""
    return CollectionError(subject, None, "; ".join(where) + more)
