"""[[caches]]: a JIT cache recorded as one summary, and told as one story by `drift since`.

Real folders in tmp_path, the real walk, the real `drift` executable; the
oracle for the summary is an independent os.walk with lstat.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_drift
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from privileges import as_nobody

from drift.collectors.caches import collect_cache
from drift.config import CacheSpec
from drift.facts import CollectContext, CollectionError, Fact


def summary(spec: CacheSpec) -> dict[str, str] | str:
    """The cache's facts by key, or the message of its one blind spot."""
    items = list(collect_cache(spec, CollectContext()))
    errors = [i for i in items if isinstance(i, CollectionError)]
    if errors:
        assert len(items) == 1 and errors[0].subject == f"cache:{spec.name}"
        assert errors[0].key is None  # the whole summary: no partial count survives
        return errors[0].message
    assert all(isinstance(i, Fact) and i.subject == f"cache:{spec.name}" for i in items)
    return {i.key: i.value for i in items if isinstance(i, Fact)}


def walked(root: Path) -> list[tuple[str, int, int]]:
    """(path, size, mtime_ns) of every non-directory below root, no link followed."""
    out = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        names = files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]
        for name in names:
            path = os.path.join(folder, name)
            st_ = os.lstat(path)
            out.append((path, st_.st_size, st_.st_mtime_ns))
    return sorted(out)


def fill(root: Path, n: int, size: int = 100, first: int = 0) -> None:
    """n kernels the way Triton lays them out: a folder per hash, a few files in each."""
    for i in range(first, first + n):
        folder = root / hashlib.sha256(str(i).encode()).hexdigest()[:32]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kernel.cubin").write_bytes(b"\x7fELF" + bytes(size))
        (folder / "kernel.json").write_text(json.dumps({"i": i}))


def test_stat_mode_sums_every_file_by_name_size_and_mtime(tmp_path: Path) -> None:
    cache = tmp_path / "triton"
    fill(cache, 30)
    outside = tmp_path / "outside"
    fill(outside, 5)
    (cache / "linked").symlink_to(outside)  # a link counts as itself, never followed
    (cache / "stale").symlink_to(tmp_path / "nowhere")
    got = summary(CacheSpec("triton", (str(cache),)))
    assert isinstance(got, dict)
    files = walked(cache)
    assert got["files"] == str(len(files)) == "62"
    assert got["bytes"] == str(sum(size for _p, size, _m in files))
    newest = max(m for *_r, m in files) // 1000
    oldest = min(m for *_r, m in files) // 1000
    from drift.timespec import iso

    assert (got["newest"], got["oldest"]) == (iso(newest), iso(oldest))
    lines = [f"{p}\0{s}\0{m}\n" for p, s, m in files]
    assert got["digest"] == hashlib.sha256("".join(lines).encode()).hexdigest()


def test_a_folder_not_there_yet_is_an_empty_cache(tmp_path: Path) -> None:
    got = summary(CacheSpec("flashinfer", (str(tmp_path / "no" / "such"),)))
    assert got == {"digest": hashlib.sha256(b"").hexdigest(), "files": "0", "bytes": "0"}


def test_globs_name_several_folders(tmp_path: Path) -> None:
    for version in ("0.2.5", "0.2.6"):
        fill(tmp_path / "flashinfer" / version / "cached_ops", 3)
    fill(tmp_path / "flashinfer" / "0.2.6" / "other", 3)
    got = summary(CacheSpec("fi", (str(tmp_path / "flashinfer" / "*" / "cached_ops"),)))
    assert isinstance(got, dict) and got["files"] == "12"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_a_folder_that_cannot_be_listed_is_a_blind_spot(tmp_path: Path) -> None:
    cache = tmp_path / "deepgemm"
    fill(cache, 4)
    locked = next(cache.iterdir())
    locked.chmod(0)
    # nobody must be refused by the cache's own folder, not by tmp_path's parents
    for parent in [cache, *cache.parents]:
        if str(parent) == "/":
            break
        parent.chmod(parent.stat().st_mode | 0o555)
    spec = CacheSpec("deepgemm", (str(cache),))
    got = as_nobody(lambda: summary(spec))
    assert isinstance(got, str) and f"{locked}/: cannot list directory" in got


def test_content_mode_reads_content_and_ignores_a_touch(tmp_path: Path) -> None:
    cache = tmp_path / "c"
    fill(cache, 3)
    by_content = CacheSpec("c", (str(cache),), hash="content")
    by_stat = CacheSpec("c", (str(cache),))
    first, first_stat = summary(by_content), summary(by_stat)
    assert isinstance(first, dict) and "newest" not in first
    kernel = next(cache.glob("*/kernel.cubin"))
    os.utime(kernel, ns=(1, 1))  # touched: the same bytes
    touched = summary(by_content)
    assert touched == first and summary(by_stat) != first_stat
    kernel.write_bytes(b"\x7fELF" + b"\1" * 100)  # rewritten, same size
    rewritten = summary(by_content)
    assert isinstance(rewritten, dict)
    assert rewritten["digest"] != first["digest"] and rewritten["bytes"] == first["bytes"]


FileSet = dict[str, tuple[int, int]]
_names = st.sampled_from(["a", "b", "ab/c", "ab/d", "e/f/g"])
_file_sets = st.dictionaries(_names, st.tuples(st.integers(0, 3), st.integers(1, 3)), max_size=5)


def _digest_of(cache: Path, files: FileSet) -> str:
    """The digest of a cache at `cache` holding exactly `files` (name -> size, mtime second)."""
    shutil.rmtree(cache, ignore_errors=True)
    for name, (size, second) in files.items():
        path = cache / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
        os.utime(path, ns=(second * 10**9, second * 10**9))
    got = summary(CacheSpec("h", (str(cache),)))
    assert isinstance(got, dict)
    return got["digest"]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(_file_sets, _file_sets)
def test_the_digest_changes_iff_a_path_size_or_mtime_does(
    tmp_path: Path, a: FileSet, b: FileSet
) -> None:
    # a name that is a file in a set cannot be a folder in it too
    for files in (a, b):
        if any(n.startswith(("ab/", "e/")) for n in files) and {"ab", "e"} & files.keys():
            return
    cache = tmp_path / "cache"  # the same folder: paths are part of the digest
    assert (_digest_of(cache, a) == _digest_of(cache, b)) == (a == b)


# ------------------------------------------------------------ drift since, as a user sees it


def config(tmp_path: Path, cache: Path, *, pidfile: Path | None = None) -> Path:
    path = tmp_path / "drift.toml"
    text = f'db = "{tmp_path}/h.db"\n[[caches]]\nname = "triton"\npaths = ["{cache}"]\n'
    if pidfile is not None:
        text += f'[[services]]\nname = "decode"\npidfile = "{pidfile}"\n'
    path.write_text(text)
    return path


def record(tmp_path: Path, conf: Path) -> None:
    run_drift(["record", "--quiet", "--config", str(conf)], tmp_path)
    time.sleep(0.02)  # records ordered in time, changes between them


def since(tmp_path: Path, conf: Path, stable: str) -> dict:
    out = run_drift(
        ["since", "--config", str(conf), "--stable", stable, "--format", "json"], tmp_path
    )
    data: dict = json.loads(out.stdout)["data"]
    return data


def cache_suspects(data: dict) -> list[dict]:
    return [s for s in data["suspects"] if s["changes"][0]["subject"] == "cache:triton"]


def test_growth_removal_and_a_wipe_are_one_story_each(tmp_path: Path) -> None:
    cache = tmp_path / "triton"
    fill(cache, 20)
    conf = config(tmp_path, cache)
    record(tmp_path, conf)  # 1
    fill(cache, 5, size=1 << 20, first=20)  # five new kernels
    record(tmp_path, conf)  # 2
    [grown] = cache_suspects(since(tmp_path, conf, "#1"))
    assert grown["title"] == "cache triton: 40 -> 50 files (+10), +5 MiB"
    assert grown["status"] == "on-disk"
    assert {c["key"] for c in grown["changes"]} >= {"digest", "files", "bytes", "newest"}

    # a file rewritten with the same size, a new mtime: the count stays, the digest moves
    kernel = next(cache.glob("*/kernel.json"))
    os.utime(kernel, ns=(5 * 10**18, 5 * 10**18))
    record(tmp_path, conf)  # 3
    [rewritten] = cache_suspects(since(tmp_path, conf, "#2"))
    assert rewritten["title"] == "cache triton: 50 files, some added, removed or rewritten"
    assert [c["key"] for c in rewritten["changes"]] == ["digest", "newest"]

    for folder in list(cache.iterdir())[:3]:
        for f in folder.iterdir():
            f.unlink()
    record(tmp_path, conf)  # 4
    [removed] = cache_suspects(since(tmp_path, conf, "#3"))
    assert removed["title"].startswith("cache triton: 50 -> 44 files (-6), -")

    subprocess.run(["rm", "-rf", str(cache)], check=True)
    record(tmp_path, conf)  # 5
    [wiped] = cache_suspects(since(tmp_path, conf, "#4"))
    assert wiped["title"] == "cache triton emptied (44 files -> 0)"
    assert wiped["changes"][0]["key"] == "oldest"  # filed as turnover, above growth
    assert wiped["changes"][0]["where"] == str(cache)


def test_a_cache_rebuilt_says_none_of_its_files_remain(tmp_path: Path) -> None:
    cache = tmp_path / "triton"
    fill(cache, 10)
    conf = config(tmp_path, cache)
    record(tmp_path, conf)
    subprocess.run(["rm", "-rf", str(cache)], check=True)
    time.sleep(0.05)
    fill(cache, 8)
    record(tmp_path, conf)
    [rebuilt] = cache_suspects(since(tmp_path, conf, "#1"))
    assert rebuilt["title"].startswith("cache triton rebuilt: 20 -> 16 files (-4)")
    assert "every file written since" in rebuilt["title"]


def test_a_cache_the_running_server_fills_says_so(tmp_path: Path) -> None:
    cache = tmp_path / "triton"
    fill(cache, 5)
    pidfile = tmp_path / "decode.pid"
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        pidfile.write_text(f"{server.pid}\n")
        conf = config(tmp_path, cache, pidfile=pidfile)
        record(tmp_path, conf)  # 1: decode runs
        time.sleep(0.05)
        fill(cache, 4, first=5)
        record(tmp_path, conf)  # 2
        [grown] = cache_suspects(since(tmp_path, conf, "#1"))
        assert grown["label"].startswith(
            "written while decode ran (started before it): a running server fills its cache"
        )
        # wiped, then decode restarted: its new start compiles anew
        subprocess.run(["rm", "-rf", str(cache)], check=True)
        record(tmp_path, conf)  # 3
        server.kill()
        server.wait()
        server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        pidfile.write_text(f"{server.pid}\n")
        record(tmp_path, conf)  # 4
        [wiped] = cache_suspects(since(tmp_path, conf, "#2"))
        assert wiped["title"] == "cache triton emptied (18 files -> 0)"
        assert "decode started after it, with the cache empty" in wiped["label"]
    finally:
        server.kill()
        server.wait()


def test_adding_a_cache_to_the_config_reads_now_tracked(tmp_path: Path) -> None:
    cache = tmp_path / "triton"
    fill(cache, 3)
    conf = tmp_path / "drift.toml"
    conf.write_text(f'db = "{tmp_path}/h.db"\n')
    record(tmp_path, conf)
    config(tmp_path, cache)
    record(tmp_path, conf)
    data = since(tmp_path, conf, "#1")
    assert cache_suspects(data) == []
    assert "cache:triton" in json.dumps(data["scope"]["tracked"])
