"""The files collector on real trees: globs, symlinks, special files, permissions, stat cache."""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import run_drift

from drift.collectors import files, hashing
from drift.collectors.files import collect_files
from drift.collectors.walk import expand_globs
from drift.config import FileSpec
from drift.facts import CollectContext, CollectionError, Fact, FactBlock

REPO = Path(__file__).resolve().parent.parent


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def settle() -> None:
    """Wait until files written so far are older than the racy window, so they may be cached."""
    time.sleep(hashing.RACY_WINDOW_NS / 1e9 + 0.02)


def covers(error: CollectionError, subject: str, key: str) -> bool:
    """True if the store keeps (subject, key) at its last value because of `error`."""
    return error.covers(subject, key)


def run(
    spec: FileSpec,
    ctx: CollectContext | None = None,
    timeout: float = 10.0,
) -> tuple[dict[str, dict[str, str]], list[CollectionError]]:
    """Collect in a thread, so a hang (a FIFO, a symlink loop) fails the test, not stalls it."""
    ctx = ctx if ctx is not None else CollectContext()
    out: list[Fact | CollectionError] = []
    worker = threading.Thread(target=lambda: out.extend(collect_files(spec, ctx)), daemon=True)
    worker.start()
    worker.join(timeout)
    assert not worker.is_alive(), "collect_files did not finish"
    facts: dict[str, dict[str, str]] = {}
    errors: list[CollectionError] = []
    for item in out:
        if isinstance(item, CollectionError):
            errors.append(item)
        elif isinstance(item, FactBlock):
            for fact in item:
                facts.setdefault(fact.subject, {})[fact.key] = fact.value
        else:
            facts.setdefault(item.subject, {})[item.key] = item.value
    return facts, errors


def globbed(*patterns: Path | str, exclude: frozenset[str] = frozenset()) -> list[str]:
    return [path for path, _ in expand_globs([str(p) for p in patterns], exclude)]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for rel, body in {
        "a.py": "a",
        "notes.txt": "n",
        "x/b.py": "b",
        "x/y/c.py": "c",
        "x/y/c.txt": "ct",
        "x/y/z/d.py": "d",
        ".hidden/e.py": "e",
        "q/b.py": "qb",
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return root


# ---------------------------------------------------------------------------
# Globs


def test_double_star_matches_zero_or_more_directories_at_start_middle_and_end(tree: Path) -> None:
    r = str(tree)
    assert globbed(tree / "**/*.py") == [
        f"{r}/.hidden/e.py",
        f"{r}/a.py",
        f"{r}/q/b.py",
        f"{r}/x/b.py",
        f"{r}/x/y/c.py",
        f"{r}/x/y/z/d.py",
    ]
    assert globbed(tree / "x/**/b.py") == [f"{r}/x/b.py"]  # zero directories
    assert globbed(tree / "x/**/d.py") == [f"{r}/x/y/z/d.py"]  # two directories
    assert globbed(tree / "x/**") == [
        f"{r}/x/b.py",
        f"{r}/x/y/c.py",
        f"{r}/x/y/c.txt",
        f"{r}/x/y/z/d.py",
    ]
    assert globbed(tree / "**/y/**/*.txt") == [f"{r}/x/y/c.txt"]


def test_single_star_question_mark_and_brackets_never_cross_a_slash(tree: Path) -> None:
    r = str(tree)
    assert globbed(tree / "*.py") == [f"{r}/a.py"]
    assert globbed(tree / "x/*") == [f"{r}/x/b.py"]  # not x/y/c.py, and not the directory y
    assert globbed(tree / "?/b.py") == [f"{r}/q/b.py", f"{r}/x/b.py"]
    assert globbed(tree / "[x]/b.py") == [f"{r}/x/b.py"]
    assert globbed(tree / "x*c.py") == []


def test_pattern_without_glob_characters_names_one_file(tree: Path) -> None:
    assert globbed(tree / "x/y/c.py") == [f"{tree}/x/y/c.py"]
    facts, errors = run(FileSpec("one", (str(tree / "x/y/c.py"),)))
    assert facts == {f"file:{tree}/x/y/c.py": {"sha256": sha(b"c"), "size": "1", "mode": "0644"}}
    assert errors == []


def test_each_path_once_sorted_with_the_first_pattern_that_matched(tree: Path) -> None:
    spec = FileSpec("py", (str(tree / "x/**/*.py"), str(tree / "**/b.py")))
    got = list(expand_globs(spec.paths))
    assert got == [
        (f"{tree}/q/b.py", spec.paths[1]),
        (f"{tree}/x/b.py", spec.paths[0]),
        (f"{tree}/x/y/c.py", spec.paths[0]),
        (f"{tree}/x/y/z/d.py", spec.paths[0]),
    ]
    items = list(collect_files(spec, CollectContext()))
    out = [
        f
        for i in items
        if isinstance(i, FactBlock | Fact)
        for f in (i if isinstance(i, FactBlock) else [i])
    ]
    assert {f.provenance["glob"] for f in out if f.subject == f"file:{tree}/q/b.py"} == {
        spec.paths[1]
    }
    assert all(f.provenance["set"] == "py" for f in out)


def test_pattern_matching_nothing_is_an_error_that_covers_no_file(tree: Path) -> None:
    missing = str(tree / "nowhere/**/*.conf")
    directory = str(tree / "x")
    facts, errors = run(FileSpec("conf", (missing, directory, str(tree / "a.py"))))
    assert list(facts) == [f"file:{tree}/a.py"]
    assert [(e.subject, e.key, e.message) for e in errors] == [
        ("files:conf", None, f"no file matches {missing}"),
        # A folder is not a file: the error says how to watch the files in it.
        (
            "files:conf",
            None,
            f"no file matches {directory}: it is a folder; use {directory}/** for the files in it",
        ),
    ]
    # A file that was recorded before and is gone now must read as removed.
    assert not any(covers(e, f"file:{tree}/nowhere/a.conf", "sha256") for e in errors)


def test_excluded_paths_are_never_listed_even_through_a_symlinked_directory(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    for name in ("drift.db", "drift.db-wal", "drift.db-shm", "drift.lock", "secret.key", "keep"):
        (state / name).write_text(name)
    alias = tmp_path / "alias"
    alias.symlink_to(state)
    exclude = frozenset(
        str(alias / n)
        for n in ("drift.db", "drift.db-wal", "drift.db-shm", "drift.lock", "secret.key")
    )
    assert globbed(state / "*", exclude=exclude) == [f"{state}/keep"]
    assert globbed(alias / "*", exclude=exclude) == [f"{alias}/keep"]
    # And the other way round: excluded by its real path, globbed through the alias.
    real = frozenset(str(state / n) for n in ("drift.db", "secret.key"))
    assert globbed(alias / "*", exclude=real) == [
        f"{alias}/{n}" for n in ("drift.db-shm", "drift.db-wal", "drift.lock", "keep")
    ]
    assert globbed(state / "drift.db", exclude=exclude) == []
    facts, _ = run(FileSpec("all", (str(state / "*"),)), CollectContext(exclude=exclude))
    assert list(facts) == [f"file:{state}/keep"]


# ---------------------------------------------------------------------------
# Symlinks and special files


def test_symlink_is_recorded_with_its_target_and_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("do not read")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "dirlink").symlink_to(outside)
    facts, errors = run(FileSpec("s", (str(root / "**/*.txt"), str(root / "*"))))
    assert facts == {
        f"file:{root}/dirlink": {"symlink": str(outside)},
        f"file:{root}/link.txt": {"symlink": str(outside / "secret.txt")},
    }
    assert errors == []


def test_symlink_loops_terminate_and_are_recorded(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    (root / "sub" / "up").symlink_to("..")
    (root / "sub" / "f").write_text("f")
    facts, errors = run(FileSpec("loops", (str(root / "**"),)))
    assert facts == {
        f"file:{root}/a": {"symlink": "b"},
        f"file:{root}/b": {"symlink": "a"},
        f"file:{root}/sub/f": {"sha256": sha(b"f"), "size": "1", "mode": "0644"},
        f"file:{root}/sub/up": {"symlink": ".."},
    }
    assert errors == []


def test_fixed_leading_directory_may_be_a_symlink_the_user_named(tmp_path: Path) -> None:
    real = tmp_path / "v2"
    real.mkdir()
    (real / "k.py").write_text("k")
    (tmp_path / "current").symlink_to(real)
    assert globbed(tmp_path / "current/*.py") == [f"{tmp_path}/current/k.py"]


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "root" / "pipe"
    path.parent.mkdir()
    os.mkfifo(path)
    yield path
    # If a broken collector is stuck opening the FIFO, a writer lets it go.
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def test_fifo_is_recorded_by_type_without_blocking(fifo: Path) -> None:
    os.chmod(fifo, 0o620)
    facts, errors = run(FileSpec("p", (str(fifo.parent / "*"),)), timeout=5)
    assert facts == {f"file:{fifo}": {"type": "fifo", "mode": "0620"}}
    assert errors == []


def test_socket_and_device_are_recorded_by_type(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(root / "s.sock"))
        facts, _ = run(FileSpec("sock", (str(root / "*.sock"),)))
    finally:
        sock.close()
    assert facts[f"file:{root}/s.sock"]["type"] == "socket"
    assert "sha256" not in facts[f"file:{root}/s.sock"]
    try:
        os.mknod(root / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod not permitted here; socket part checked")
    facts, _ = run(FileSpec("dev", (str(root / "null"),)))
    assert facts == {f"file:{root}/null": {"type": "char-device", "mode": "0600"}}


# ---------------------------------------------------------------------------
# Permissions: root ignores mode bits, so the collector runs in a child process
# without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH (dropped from the bounding set
# before exec, so the child's root has no way around chmod 000).

_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from drift.collectors.files import collect_files
from drift.config import FileSpec
from drift.facts import CollectContext, CollectionError, FactBlock
out = []
for pattern in sys.argv[2:]:
    for got in collect_files(FileSpec("p", (pattern,)), CollectContext()):
      for item in got if isinstance(got, FactBlock) else [got]:
        out.append([pattern, type(item).__name__, item.subject, item.key,
                    getattr(item, "value", None) or getattr(item, "message", None)])
print(json.dumps(out))
"""


def _drop_dac_capabilities() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    pr_capbset_drop, cap_dac_override, cap_dac_read_search = 24, 1, 2
    for cap in (cap_dac_override, cap_dac_read_search):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def collect_unprivileged(*patterns: str, child: str = _CHILD) -> list[list[str | None]]:
    """Collect in a child that lost root's power to ignore file permissions."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", child, str(REPO), *patterns],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            preexec_fn=_drop_dac_capabilities if os.geteuid() == 0 else None,
        )
    except subprocess.SubprocessError as exc:
        if "prctl" in str(exc):
            pytest.skip("cannot drop CAP_DAC_OVERRIDE here, so chmod 000 cannot fail for root")
        raise
    result: list[list[str | None]] = json.loads(done.stdout)
    return result


def test_unreadable_file_and_directory_are_blind_spots_not_removals(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "locked").mkdir(parents=True)
    (root / "locked" / "inner.txt").write_text("inner")
    (root / "ok.txt").write_text("ok")
    (root / "secret.txt").write_text("secret")
    os.chmod(root / "secret.txt", 0)
    os.chmod(root / "locked", 0)
    try:
        every, top = str(root / "**"), str(root / "*")
        out = collect_unprivileged(every, top)
    finally:
        os.chmod(root / "locked", 0o755)
    by_pattern = {p: [row[1:] for row in out if row[0] == p] for p in (every, top)}
    assert sorted(by_pattern[every]) == sorted(
        [
            [
                "CollectionError",
                f"file:{root}/locked/",
                None,
                "cannot list directory: Permission denied",
            ],
            ["Fact", f"file:{root}/ok.txt", "sha256", sha(b"ok")],
            ["Fact", f"file:{root}/ok.txt", "size", "2"],
            ["Fact", f"file:{root}/ok.txt", "mode", "0644"],
            # The mode change that made it unreadable is itself recorded.
            ["Fact", f"file:{root}/secret.txt", "size", "6"],
            ["Fact", f"file:{root}/secret.txt", "mode", "0000"],
            [
                "CollectionError",
                f"file:{root}/secret.txt",
                "sha256",
                "cannot read: Permission denied",
            ],
        ]
    )
    errors = [
        CollectionError(s, k, m) for kind, s, k, m in by_pattern[every] if kind == "CollectionError"
    ]
    # Facts recorded earlier for files under the locked directory keep their value.
    assert any(covers(e, f"file:{root}/locked/inner.txt", "sha256") for e in errors)
    assert any(covers(e, f"file:{root}/secret.txt", "sha256") for e in errors)
    assert not any(covers(e, f"file:{root}/ok.txt", "sha256") for e in errors)
    assert not any(covers(e, f"file:{root}/locked-other/x", "sha256") for e in errors)
    # `root/*` matches the directory name but a directory is not a file and
    # nothing can match below it, so it is never listed and costs no blind spot.
    assert [row[1] for row in by_pattern[top] if row[0] == "CollectionError"] == [
        f"file:{root}/secret.txt"
    ]


# ---------------------------------------------------------------------------
# The stat cache


def test_unchanged_files_are_taken_from_the_cache_without_being_read(tree: Path) -> None:
    spec = FileSpec("all", (str(tree / "**"),))
    settle()
    first = CollectContext()
    facts, errors = run(spec, first)
    assert errors == []
    assert len(first.cache_updates) == 8
    second = CollectContext(file_cache=dict(first.cache_updates))
    assert run(spec, second) == (facts, [])
    assert second.cache_updates == {}
    # A cache entry whose stat matches is trusted outright: the file is not opened.
    path = f"{tree}/a.py"
    third = CollectContext(
        file_cache={
            **first.cache_updates,
            path: (*first.cache_updates[path][:4], "f" * 64),
        }
    )
    facts3, _ = run(spec, third)
    assert facts3[f"file:{path}"]["sha256"] == "f" * 64


def test_read_files_and_cached_files_come_as_two_blocks(tree: Path) -> None:
    spec = FileSpec("all", (str(tree / "**"),))
    settle()
    first = CollectContext()
    run(spec, first)
    edited = tree / "a.py"
    edited.write_text("changed\n")
    settle()
    items = list(collect_files(spec, CollectContext(file_cache=dict(first.cache_updates))))
    read, cached = [i for i in items if isinstance(i, FactBlock)]
    assert read.keys == cached.keys == ("sha256", "size", "mode")
    assert read.subjects == [f"file:{edited}"]
    assert [f.value for f in read] == [sha(b"changed\n"), "8", read.columns[2][0]]
    assert f"file:{edited}" not in cached.subjects
    assert not any(isinstance(i, Fact) and i.key == "sha256" for i in items)
    assert len(cached.subjects) == len(first.cache_updates) - 1
    (stored,) = [f for f in cached if f.subject == f"file:{tree}/x/b.py" and f.key == "sha256"]
    assert stored.value == first.cache_updates[f"{tree}/x/b.py"][4] == sha(b"b")
    assert stored.provenance == {"glob": str(tree / "**"), "set": "all"}


def test_large_files_read_on_a_second_thread_give_the_facts_of_a_read_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: drift reads every file on one thread")
    root = tmp_path / "mixed"
    contents: dict[str, bytes] = {}
    for i in range(120):  # small files, read by the collecting thread in path order
        contents[f"src/m{i:03}.py"] = f"value = {i}\n".encode() * (i + 1)
    for i, mib in enumerate((1, 3, 2, 1)):  # large ones, read largest first by the other
        contents[f"blobs/w{i}.bin"] = os.urandom(mib << 20)
    contents["blobs/edge.bin"] = os.urandom(hashing._LARGE - 1)
    for rel, data in contents.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "blobs" / "latest").symlink_to("w1.bin")
    spec = FileSpec("mixed", (str(root / "**"),))
    settle()

    two = CollectContext()
    items_two = list(collect_files(spec, two))
    # With a progress line every size is known first, so the large files are
    # handed over before any is opened; at most one waiting at a time, the
    # collecting thread reads the others itself.
    sized = CollectContext(progress=lambda line: None)
    items_sized = list(collect_files(spec, sized))
    monkeypatch.setattr(hashing, "_MAX_HANDED", 1)
    capped = CollectContext()
    items_capped = list(collect_files(spec, capped))
    monkeypatch.setattr(hashing, "HASH_THREADS", 1)
    one = CollectContext()
    items_one = list(collect_files(spec, one))

    assert items_two == items_sized == items_capped == items_one  # the same facts, same order
    assert two.cache_updates == sized.cache_updates == capped.cache_updates == one.cache_updates
    facts, errors = run(spec)
    assert errors == []
    for rel, data in contents.items():
        values = facts[f"file:{root}/{rel}"]
        assert values["sha256"] == sha(data), rel
        assert values["size"] == str(len(data))
    assert facts[f"file:{root}/blobs/latest"] == {"symlink": "w1.bin"}


def test_rewrite_with_same_size_and_restored_mtime_is_rehashed_because_ctime_moved(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kernel.py"
    path.write_bytes(b"CTAS=256\n")
    settle()
    spec = FileSpec("k", (str(path),))
    first = CollectContext()
    facts, _ = run(spec, first)
    assert facts[f"file:{path}"]["sha256"] == sha(b"CTAS=256\n")
    before = os.lstat(path)
    path.write_bytes(b"CTAS=512\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.lstat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    assert after.st_ctime_ns != before.st_ctime_ns
    facts, errors = run(spec, CollectContext(file_cache=dict(first.cache_updates)))
    assert facts[f"file:{path}"]["sha256"] == sha(b"CTAS=512\n")
    assert errors == []


def test_file_replaced_by_rename_with_same_size_and_mtime_is_rehashed(tmp_path: Path) -> None:
    path, new = tmp_path / "a.conf", tmp_path / "a.conf.new"
    path.write_bytes(b"one")
    settle()
    first = CollectContext()
    run(FileSpec("c", (str(path),)), first)
    old = os.lstat(path)
    new.write_bytes(b"two")
    os.utime(new, ns=(old.st_atime_ns, old.st_mtime_ns))
    os.rename(new, path)
    facts, _ = run(FileSpec("c", (str(path),)), CollectContext(file_cache=first.cache_updates))
    assert facts[f"file:{path}"]["sha256"] == sha(b"two")


def test_recently_changed_file_is_hashed_but_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "Recently" is within RACY_WINDOW_NS (50 ms) of the read, and no test can
    # promise to get from its write to the read that fast on a busy machine;
    # with the window an hour wide, the file written just now is inside it
    # wherever this runs. The window, not the file, is what decides: with
    # none, the same untouched file is cached.
    monkeypatch.setattr(hashing, "RACY_WINDOW_NS", 3600 * 10**9)
    path = tmp_path / "hot.conf"
    path.write_bytes(b"hot")
    ctx = CollectContext()
    facts, errors = run(FileSpec("h", (str(path),)), ctx)
    assert facts[f"file:{path}"]["sha256"] == sha(b"hot")  # read twice, the same both times
    assert errors == []
    assert str(path) not in ctx.cache_updates  # its mtime could still move within one tick
    monkeypatch.setattr(hashing, "RACY_WINDOW_NS", 0)
    settled = CollectContext()
    facts, _ = run(FileSpec("h", (str(path),)), settled)
    assert facts[f"file:{path}"]["sha256"] == sha(b"hot")
    assert settled.cache_updates[str(path)][4] == sha(b"hot")


def test_mode_changes_are_recorded_including_setuid_and_sticky(tmp_path: Path) -> None:
    path = tmp_path / "tool"
    path.write_bytes(b"#!/bin/sh\n")
    os.chmod(path, 0o644)
    settle()
    spec = FileSpec("t", (str(path),))
    first = CollectContext()
    facts, _ = run(spec, first)
    assert facts[f"file:{path}"]["mode"] == "0644"
    for mode, text in ((0o4755, "4755"), (0o1600, "1600")):
        os.chmod(path, mode)
        facts, _ = run(spec, CollectContext(file_cache=dict(first.cache_updates)))
        assert facts[f"file:{path}"]["mode"] == text
        assert facts[f"file:{path}"]["sha256"] == sha(b"#!/bin/sh\n")


def test_cache_updates_hold_the_stat_after_hashing(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 3000)
    settle()
    ctx = CollectContext()
    run(FileSpec("f", (str(path),)), ctx)
    st = os.lstat(path)
    assert ctx.cache_updates == {
        str(path): (3000, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha(b"x" * 3000))
    }


# ---------------------------------------------------------------------------
# A file that changes while it is hashed


def test_file_appended_to_while_hashed_gives_a_true_hash_or_an_error(tmp_path: Path) -> None:
    """Never a torn hash: the digest must be of a length the file really had, or a blind spot.

    The file only ever holds a prefix of `stream`, so any sha256 we report must
    equal sha256(stream[:reported size]); which of the two outcomes happens
    depends on timing, the assertion does not.
    """
    stream = os.urandom(40 << 20)
    start = 24 << 20
    path = tmp_path / "big.log"
    path.write_bytes(stream[:start])
    stop = threading.Event()
    written = [start]

    def append() -> None:
        with open(path, "ab", buffering=0) as f:
            while not stop.is_set() and written[0] < len(stream):
                f.write(stream[written[0] : written[0] + (64 << 10)])
                written[0] += 64 << 10
                time.sleep(0.0005)

    writer = threading.Thread(target=append)
    writer.start()
    try:
        facts, errors = run(FileSpec("log", (str(path),)))
    finally:
        stop.set()
        writer.join()
    subject = f"file:{path}"
    if subject in facts:
        size = int(facts[subject]["size"])
        assert start <= size <= written[0]
        assert facts[subject]["sha256"] == sha(stream[:size])
    else:
        assert errors == [CollectionError(subject, None, "changed while being read")]
    # Once the writer is done, the hash is of the final content.
    facts, errors = run(FileSpec("log", (str(path),)))
    assert facts[subject]["sha256"] == sha(stream[: written[0]])
    assert facts[subject]["size"] == str(written[0])


# ---------------------------------------------------------------------------
# Kept content (`content = true`)


def test_content_is_kept_only_for_content_sets_with_format_in_provenance(tmp_path: Path) -> None:
    conf = tmp_path / "serve.json"
    conf.write_text('{"port": 8000}\n')
    raw = tmp_path / "raw.conf"
    raw.write_bytes(b"name=caf\xc3\xa9\nbad=\xff\xfe\n")
    spec = FileSpec("cfg", (str(conf), str(raw)), content=True, format="json")
    items = list(collect_files(spec, CollectContext()))
    contents = {i.subject: i for i in items if isinstance(i, Fact) and i.key == "content"}
    assert contents[f"file:{conf}"].value == '{"port": 8000}\n'
    assert contents[f"file:{conf}"].provenance == {
        "glob": str(conf),
        "set": "cfg",
        "format": "json",
    }
    # Invalid UTF-8 stays visible as escapes instead of failing the file.
    assert contents[f"file:{raw}"].value == "name=café\nbad=\\xff\\xfe\n"
    facts, errors = run(FileSpec("plain", (str(conf),)))
    assert errors == []
    assert set(facts[f"file:{conf}"]) == {"sha256", "size", "mode"}


def test_content_comes_with_a_cache_hit_and_is_the_text_that_was_hashed(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_text("[server]\nport = 8000\n")
    spec = FileSpec("cfg", (str(path),), content=True, format="toml")
    settle()
    first = CollectContext()
    facts, errors = run(spec, first)
    assert errors == [] and str(path) in first.cache_updates
    subject = f"file:{path}"
    assert facts[subject]["content"] == "[server]\nport = 8000\n"
    # A stat-matching cache entry with a wrong digest: a file whose content is
    # kept is read again, so its digest and text come from that one read.
    wrong = (*first.cache_updates[str(path)][:4], "f" * 64)
    again, errors = run(spec, CollectContext(file_cache={str(path): wrong}))
    assert errors == []
    assert again == facts
    assert again[subject]["sha256"] == sha(b"[server]\nport = 8000\n")


def test_content_over_1_mib_is_a_blind_spot_for_content_only(tmp_path: Path) -> None:
    big, edge = tmp_path / "big.json", tmp_path / "edge.txt"
    big.write_bytes(b" " * files.CONTENT_MAX + b"{}")
    edge.write_bytes(b"e" * files.CONTENT_MAX)
    spec = FileSpec("cfg", (str(big), str(edge)), content=True, format="json")
    settle()
    ctx = CollectContext()
    facts, errors = run(spec, ctx)
    size = files.CONTENT_MAX + 2
    too_large = CollectionError(
        f"file:{big}", "content", f"too large to keep content ({size} bytes)"
    )
    assert errors == [too_large]
    assert facts[f"file:{big}"] == {
        "sha256": sha(b" " * files.CONTENT_MAX + b"{}"),
        "size": str(size),
        "mode": "0644",
    }
    assert too_large.covers(f"file:{big}", "content")
    assert not too_large.covers(f"file:{big}", "sha256")
    assert facts[f"file:{edge}"]["content"] == "e" * files.CONTENT_MAX  # exactly 1 MiB is kept
    # From the cache the big file is not re-read, and still says why it has no content.
    cached = CollectContext(file_cache=dict(ctx.cache_updates))
    assert run(spec, cached) == (facts, [too_large])
    assert list(cached.cache_updates) == [str(edge)]


def test_content_of_a_file_rewritten_while_read_always_matches_its_digest(tmp_path: Path) -> None:
    path = tmp_path / "flap.json"
    versions = [json.dumps({"port": 8000 + i, "pad": "x" * 5000 * i}).encode() for i in range(3)]
    path.write_bytes(versions[0])
    stop = threading.Event()

    def rewrite() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            path.write_bytes(versions[i % 3])  # truncate and write in place: torn states exist

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        outcomes = [run(FileSpec("c", (str(path),), content=True)) for _ in range(40)]
    finally:
        stop.set()
        writer.join()
    for facts, errors in outcomes:
        for values in facts.values():
            if "content" in values:
                assert values["sha256"] == sha(values["content"].encode())
                # Caught between truncate and write, an empty file is a true state too.
                assert any(v.startswith(values["content"].encode()) for v in versions)
            else:
                assert "sha256" not in values
        assert all(e.key is None or e.key == "content" for e in errors)


_CONTENT_CHILD = _CHILD.replace(
    'FileSpec("p", (pattern,))', 'FileSpec("p", (pattern,), content=True)'
)


def test_unreadable_content_file_keeps_its_last_content(tmp_path: Path) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text("a: 1\n")
    os.chmod(path, 0)
    rows = collect_unprivileged(str(path), child=_CONTENT_CHILD)
    errors = [row[2:] for row in rows if row[1] == "CollectionError"]
    assert errors == [
        [f"file:{path}", "sha256", "cannot read: Permission denied"],
        [f"file:{path}", "content", "cannot read: Permission denied"],
    ]


# ---------------------------------------------------------------------------
# Files too large or too sparse to read


def not_hashed(reason: str, path: Path) -> str:
    """The sha256 value of a file drift did not read: why, and the stat that moves with it."""
    st = path.stat()
    seconds, nanos = divmod(st.st_mtime_ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return f"not hashed: {reason} (mtime {moment}.{nanos:09d} UTC, inode {st.st_ino})"


def sparse_file(path: Path, size: int, data: bytes = b"") -> Path:
    """A file of `size` bytes that holds only `data` at its start: the rest is one hole."""
    with open(path, "wb") as f:
        f.write(data)
    os.truncate(path, size)  # costs no disk
    return path


def test_a_100_gib_file_is_recorded_by_its_stat_at_once_and_never_read(tmp_path: Path) -> None:
    image = sparse_file(tmp_path / "vm.img", 100 << 30, b"boot")
    small = tmp_path / "small.conf"
    small.write_text("k = v\n")
    spec = FileSpec("images", (str(tmp_path / "*"),))
    settle()
    first = CollectContext()
    facts, errors = run(spec, first)  # reading 100 GiB would take minutes; run() allows 10 s
    assert errors == []
    subject = f"file:{image}"
    assert facts[subject] == {
        "sha256": not_hashed("larger than 1 GiB", image),
        "size": str(100 << 30),
        "mode": "0644",
    }
    assert facts[f"file:{small}"]["sha256"] == sha(b"k = v\n")
    # Never in the stat cache (there is no digest to vouch for), and the same
    # facts however it is listed: with its lstat (a progress line, a cached
    # neighbour) or only opened.
    assert list(first.cache_updates) == [str(small)]
    assert run(spec, CollectContext(progress=lambda line: None)) == (facts, [])
    assert run(spec, CollectContext(file_cache=dict(first.cache_updates))) == (facts, [])
    # Written in place (mtime moves) or replaced (a new inode): the value moves with it.
    st = image.stat()
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    touched, _ = run(spec)
    assert touched[subject]["sha256"] == not_hashed("larger than 1 GiB", image)
    assert touched[subject]["sha256"] != facts[subject]["sha256"]
    replacement = sparse_file(tmp_path / "vm.img.new", 100 << 30, b"boot")
    os.utime(replacement, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    replacement.rename(image)
    replaced, _ = run(spec)
    assert replaced[subject]["sha256"] == not_hashed("larger than 1 GiB", image)
    assert replaced[subject]["sha256"] != touched[subject]["sha256"]


def test_a_lower_max_size_wins_over_a_digest_in_the_stat_cache(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    data = os.urandom(3 << 20)
    path.write_bytes(data)
    settle()
    first = CollectContext()
    facts, _ = run(FileSpec("w", (str(path),)), first)
    assert facts[f"file:{path}"]["sha256"] == sha(data) and str(path) in first.cache_updates
    lowered = FileSpec("w", (str(path),), max_size=2 << 20)
    for ctx in (CollectContext(file_cache=dict(first.cache_updates)), CollectContext()):
        facts, errors = run(lowered, ctx)
        assert errors == []
        assert facts[f"file:{path}"]["sha256"] == not_hashed("larger than 2 MiB", path)
        assert ctx.cache_updates == {}
    # Exactly max_size is still read.
    facts, _ = run(FileSpec("w", (str(path),), max_size=3 << 20))
    assert facts[f"file:{path}"]["sha256"] == sha(data)


def test_a_sparse_file_under_max_size_is_not_read_whole(tmp_path: Path) -> None:
    sparse = sparse_file(tmp_path / "lastlog", 1000 << 20, b"x" * 4096)
    with open(sparse, "rb") as f:
        if os.lseek(f.fileno(), 0, os.SEEK_HOLE) >= 1000 << 20:
            pytest.skip("this filesystem reports no holes")
    # Below SPARSE_MIN a sparse file is read: its holes are zeros, and quick.
    little = sparse_file(tmp_path / "little", 1 << 20, b"y" * 4096)
    # A dense file past SPARSE_MIN is read too: only holes make a file sparse.
    dense = tmp_path / "dense.bin"
    dense_data = os.urandom(hashing.SPARSE_MIN)
    dense.write_bytes(dense_data)
    spec = FileSpec("logs", (str(tmp_path / "*"),), content=True)
    facts, errors = run(spec)
    assert facts[f"file:{sparse}"] == {
        "sha256": not_hashed("sparse", sparse),
        "size": str(1000 << 20),
        "mode": "0644",
    }
    assert facts[f"file:{little}"]["sha256"] == sha(b"y" * 4096 + bytes((1 << 20) - 4096))
    assert facts[f"file:{dense}"]["sha256"] == sha(dense_data)
    # Its content, if kept, is a blind spot, as for any file over 1 MiB.
    assert (
        CollectionError(
            f"file:{sparse}", "content", f"too large to keep content ({1000 << 20} bytes)"
        )
        in errors
    )


def test_drift_record_of_a_100_gib_file_is_quick_and_quiet_until_it_changes(
    tmp_path: Path,
) -> None:
    images = tmp_path / "images"
    images.mkdir()
    image = sparse_file(images / "disk.qcow2", 100 << 30)
    (tmp_path / "drift.toml").write_text(
        f'host = "h"\n[[files]]\nname = "images"\npaths = ["{images}/*"]\nmax_size = "4GiB"\n'
    )
    args = ["--config", str(tmp_path / "drift.toml"), "--db", str(tmp_path / "d.db")]
    settle()
    assert run_drift(["record", *args], tmp_path, timeout=30).stdout.startswith(
        "snapshot #1: 3 facts, 3 changed, 0 errors"
    )
    assert run_drift(["record", *args], tmp_path, timeout=30).stdout.startswith(
        "snapshot #2: 3 facts, 0 changed, 0 errors"
    )
    st = image.stat()
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert run_drift(["record", *args], tmp_path, timeout=30).stdout.startswith(
        "snapshot #3: 3 facts, 1 changed, 0 errors"
    )
    shown = run_drift(["show", *args, "--format", "json"], tmp_path).stdout
    (subject,) = json.loads(shown)["data"]["subjects"]
    values = {fact["key"]: fact["value"] for fact in subject["facts"]}
    assert values["sha256"] == not_hashed("larger than 4 GiB", image)


# ---------------------------------------------------------------------------
# Where a walk stops


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    """tmp_path/tree with a tmpfs at "tree/the mount", each holding files; skips if mount fails.

    The space in the name is written as an escape in /proc/self/mountinfo.
    """
    tree = tmp_path / "tree"
    mount_point = tree / "the mount"
    mount_point.mkdir(parents=True)
    (tree / "a.txt").write_text("a")
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        timeout=10,
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.strip()}")
    try:
        (mount_point / "sub").mkdir()
        (mount_point / "b.txt").write_text("b")
        (mount_point / "sub" / "c.txt").write_text("c")
        yield tree
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True, timeout=10)


def test_a_walk_stays_on_the_filesystem_of_its_fixed_directory(mounted: Path) -> None:
    inside = [f"{mounted}/the mount/b.txt", f"{mounted}/the mount/sub/c.txt"]
    assert globbed(mounted / "**") == [f"{mounted}/a.txt"]
    assert globbed(mounted / "*" / "*.txt") == []
    # Through a symlink the user named, the mount is still seen for what it is.
    link = mounted.parent / "link"
    link.symlink_to(mounted)
    assert globbed(link / "**") == [f"{link}/a.txt"]
    crossing = [p for p, _ in expand_globs([f"{mounted}/**"], one_file_system=False)]
    assert crossing == [f"{mounted}/a.txt", *inside]
    # A glob whose fixed part is on the mount walks it: the user named it.
    assert globbed(mounted / "the mount" / "**") == inside
    facts, errors = run(FileSpec("t", (str(mounted / "**"),), one_file_system=False))
    assert errors == [] and facts[f"file:{mounted}/the mount/sub/c.txt"]["sha256"] == sha(b"c")


def test_a_walk_from_the_root_never_enters_proc_sys_or_dev(tmp_path: Path) -> None:
    # Two levels below /: every top-level folder is listed, none walked deeper.
    kernel = ("/proc/", "/sys/", "/dev/")
    root = tmp_path / "root"  # the same, through a symlink the user named
    root.symlink_to("/")
    for one_file_system in (True, False):
        found = [p for p, _ in expand_globs(["/*/*"], one_file_system=one_file_system)]
        assert found, "nothing at all two levels below /"
        assert not [p for p in found if p.startswith(kernel)]
        if one_file_system:
            assert not [p for p in found if p.startswith("/run/")]
        for pattern in ("/*/loadavg", f"{root}/*/loadavg"):
            assert list(expand_globs([pattern], one_file_system=one_file_system)) == []
    # Named as the fixed part of a glob, they are walked as any folder.
    assert globbed("/proc/loadavg") == ["/proc/loadavg"]
    assert "/proc/self/status" in globbed("/proc/self/stat*")


def test_a_set_over_max_files_is_refused_in_one_error_that_keeps_its_files(tree: Path) -> None:
    spec = FileSpec("all", (str(tree / "**"),), max_files=5)
    facts, errors = run(spec)
    assert facts == {}
    assert errors == [
        CollectionError(
            f"file:{tree}/",
            None,
            f"more than 5 files match {tree}/**: set all not recorded (max_files = 5)",
        )
    ]
    assert covers(errors[0], f"file:{tree}/x/y/c.py", "sha256")
    facts, errors = run(FileSpec("all", (str(tree / "**"),), max_files=8))  # exactly 8 files
    assert errors == [] and len(facts) == 8
    # Over several globs, the error covers the folder they share.
    two = FileSpec("two", (str(tree / "x" / "**"), str(tree / "notes.txt")), max_files=2)
    assert [e.subject for e in run(two)[1]] == [f"file:{tree}/"]


def test_a_walk_past_max_files_stops_there(tmp_path: Path) -> None:
    for d in range(40):
        folder = tmp_path / "data" / f"d{d:02}"
        folder.mkdir(parents=True)
        for f in range(50):
            (folder / f"f{f:02}").write_text("")
    found: list[int] = []
    ctx = CollectContext(progress=lambda line: found.append(int(line.rsplit(": ", 1)[1][:-6])))
    spec = FileSpec("data", (str(tmp_path / "data" / "**"),), max_files=100)
    items = list(collect_files(spec, ctx))
    assert [type(item) for item in items] == [CollectionError]
    # Counted as it walks (the progress line a terminal shows): it stopped at
    # the folder that took it past 100, not after listing all 2,000 files.
    assert max(found) <= 150


def test_drift_record_over_max_files_keeps_the_last_values_and_says_why(tree: Path) -> None:
    home = tree.parent
    config = home / "drift.toml"
    args = ["--config", str(config), "--db", str(home / "d.db")]
    entry = f'[[files]]\nname = "all"\npaths = ["{tree}/**"]\n'
    config.write_text('host = "h"\n' + entry)
    assert run_drift(["record", *args], home).stdout.startswith("snapshot #1: 24 facts, 24 changed")
    config.write_text('host = "h"\n' + entry + "max_files = 3\n")
    result = run_drift(["record", *args], home, check=False)
    assert result.returncode == 4
    # Nothing collected, nothing removed: the 24 facts keep their values.
    assert result.stdout.startswith("snapshot #2: 0 facts, 0 changed, 1 error")
    assert result.stderr == (
        f"  ! file:{tree}/: more than 3 files match {tree}/**: "
        "set all not recorded (max_files = 3)\n"
    )
    shown = json.loads(run_drift(["show", *args, "--format", "json"], home).stdout)
    assert len(shown["data"]["subjects"]) == 8
