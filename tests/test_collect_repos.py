"""[[repos]]: real git repositories made in tmp_path, including hostile ones."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from drift.collectors.repos import collect_repo
from drift.config import RepoSpec
from drift.facts import CollectContext, CollectionError, Fact


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Test-side git runs as a known author and never reads the real user's config."""
    for key in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{key}_NAME", "Drift Test")
        monkeypatch.setenv(f"GIT_{key}_EMAIL", "drift@example.invalid")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def git(repo: Path, *args: str, check: bool = True) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    if check:
        assert result.returncode == 0, f"git {args}: {result.stderr}"
    return result.stdout.strip()


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A repository on branch main with one commit of `files`."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in (files or {"serve.sh": "python -m server\n"}).items():
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    return path


def collect(path: Path | str, timeout: float = 10.0) -> list[Fact | CollectionError]:
    return list(collect_repo(RepoSpec(path=str(path), timeout=timeout), CollectContext()))


def facts(path: Path | str) -> dict[str, str]:
    items = collect(path)
    assert all(isinstance(i, Fact) for i in items), items
    return {i.key: i.value for i in items if isinstance(i, Fact)}


def test_clean_repo_on_a_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    items = collect(repo)
    assert {i.subject for i in items} == {f"repo:{repo}"}
    where = {"path": str(repo), "git_dir": str(repo / ".git")}
    moved = git(repo, "reflog", "-1", "--date=unix", "--format=%gd")  # HEAD@{SECONDS}
    moved_at = datetime.fromtimestamp(int(moved[len("HEAD@{") : -1]), UTC).isoformat()
    assert all(
        isinstance(i, Fact)
        and i.provenance == ({**where, "moved_at": moved_at} if i.key == "head" else where)
        for i in items
    )
    assert facts(repo) == {
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": "main",
        "dirty": "no",
        "diff": "",
        "untracked": "0",
        "state": "clean",
        "shallow": "no",
    }


def head_provenance(repo: Path) -> dict:
    return next(i.provenance for i in collect(repo) if isinstance(i, Fact) and i.key == "head")


def test_head_moved_at_is_when_the_reflog_says_head_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit, then a checkout of the one before: each time HEAD moves, the reflog says when."""
    repo = make_repo(tmp_path / "app")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "@1796282566 +0100")
    (repo / "serve.sh").write_text("python -m server --tp 4\n")
    git(repo, "commit", "-qam", "tp 4")
    assert head_provenance(repo)["moved_at"] == "2026-12-03T07:22:46+00:00"

    monkeypatch.setenv("GIT_COMMITTER_DATE", "@1796282600 +0100")
    git(repo, "checkout", "-q", "HEAD~1")
    assert head_provenance(repo)["moved_at"] == "2026-12-03T07:23:20+00:00"


def test_no_reflog_no_moved_at(tmp_path: Path) -> None:
    """Without a reflog, or one whose last entry is not HEAD, nothing says when HEAD moved."""
    repo = make_repo(tmp_path / "app")
    git(repo, "config", "core.logAllRefUpdates", "false")
    (repo / ".git" / "logs" / "HEAD").unlink()
    assert "moved_at" not in head_provenance(repo)

    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    assert "moved_at" not in head_provenance(bare)


def test_a_fifo_for_a_reflog_neither_hangs_nor_says_when(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    log = repo / ".git" / "logs" / "HEAD"
    log.unlink()
    os.mkfifo(log)
    started = time.monotonic()
    assert "moved_at" not in head_provenance(repo)
    assert time.monotonic() - started < 5


def test_branch_with_slash_and_packed_refs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    git(repo, "switch", "-q", "-c", "bench/ctas-512")
    git(repo, "pack-refs", "--all")
    got = facts(repo)
    assert (got["branch"], got["head"]) == ("bench/ctas-512", git(repo, "rev-parse", "HEAD"))


def test_detached_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    first = git(repo, "rev-parse", "HEAD")
    (repo / "serve.sh").write_text("python -m server --fast\n")
    git(repo, "commit", "-q", "-am", "second")
    git(repo, "checkout", "-q", "--detach", first)
    got = facts(repo)
    assert (got["head"], got["branch"], got["state"]) == (first, "(detached)", "clean")


def test_dirty_diff_digest_follows_the_diff(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    (repo / "serve.sh").write_text("export SGLANG_SM120_MMA_TARGET_CTAS=512\npython -m server\n")
    first = facts(repo)
    assert first["dirty"] == "yes" and first["diff"].startswith("sha256:")
    assert len(first["diff"]) == len("sha256:") + 64
    assert facts(repo)["diff"] == first["diff"]  # stable while nothing changes
    os.utime(repo / "serve.sh", (time.time() + 5, time.time() + 5))
    assert facts(repo)["diff"] == first["diff"]  # a touch is not a change

    (repo / "serve.sh").write_text("export SGLANG_SM120_MMA_TARGET_CTAS=256\npython -m server\n")
    second = facts(repo)
    assert second["dirty"] == "yes" and second["diff"] != first["diff"]

    git(repo, "add", "serve.sh")  # staged changes are still changes against HEAD
    assert facts(repo)["diff"] == second["diff"]

    git(repo, "reset", "-q", "--hard")
    assert (facts(repo)["dirty"], facts(repo)["diff"]) == ("no", "")


def test_untracked_files_counted_and_ignored_ones_not(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app", {".gitignore": "*.log\n", "serve.sh": "x\n"})
    (repo / "notes.txt").write_text("n")
    (repo / "sub").mkdir()
    (repo / "sub" / "a.py").write_text("a")
    (repo / "sub" / "b.py").write_text("b")
    (repo / "server.log").write_text("ignored")
    got = facts(repo)
    assert (got["untracked"], got["dirty"]) == ("3", "no")  # untracked files are not "dirty"


def test_untracked_count_is_capped(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    junk = repo / "junk"
    junk.mkdir()
    for i in range(1005):
        (junk / f"f{i}").touch()
    assert facts(repo)["untracked"] == "1000+"
    for i in range(5):
        (junk / f"f{i}").unlink()
    assert facts(repo)["untracked"] == "1000"


def test_empty_repo_without_commits(tmp_path: Path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    assert facts(repo) == {
        "head": "",
        "branch": "main",
        "dirty": "no",
        "diff": "",
        "untracked": "0",
        "state": "empty",
        "shallow": "no",
    }
    (repo / "a.txt").write_text("a")
    assert facts(repo)["untracked"] == "1"
    git(repo, "add", "a.txt")  # staged before the first commit: dirty against nothing
    got = facts(repo)
    assert (got["dirty"], got["untracked"], got["head"]) == ("yes", "0", "")
    assert got["diff"].startswith("sha256:")


def conflicting_branches(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "app", {"conf": "ctas = 128\n"})
    git(repo, "switch", "-q", "-c", "feature")
    (repo / "conf").write_text("ctas = 512\n")
    git(repo, "commit", "-q", "-am", "feature")
    git(repo, "switch", "-q", "main")
    (repo / "conf").write_text("ctas = 256\n")
    git(repo, "commit", "-q", "-am", "main")
    return repo


def test_mid_rebase(tmp_path: Path) -> None:
    repo = conflicting_branches(tmp_path)
    git(repo, "switch", "-q", "feature")
    git(repo, "rebase", "main", check=False)
    assert (repo / ".git" / "rebase-merge").exists() or (repo / ".git" / "rebase-apply").exists()
    got = facts(repo)
    assert (got["state"], got["branch"], got["dirty"]) == ("rebasing", "(detached)", "yes")


def test_mid_merge(tmp_path: Path) -> None:
    repo = conflicting_branches(tmp_path)
    git(repo, "merge", "feature", check=False)
    got = facts(repo)
    assert (got["state"], got["branch"], got["dirty"]) == ("merging", "main", "yes")
    git(repo, "merge", "--abort")
    assert facts(repo)["state"] == "clean"


def test_mid_cherry_pick_and_bisect(tmp_path: Path) -> None:
    repo = conflicting_branches(tmp_path)
    git(repo, "cherry-pick", "feature", check=False)
    assert facts(repo)["state"] == "cherry-picking"
    git(repo, "cherry-pick", "--abort")
    git(repo, "bisect", "start")
    assert facts(repo)["state"] == "bisecting"


def test_shallow_clone(tmp_path: Path) -> None:
    origin = make_repo(tmp_path / "origin")
    (origin / "serve.sh").write_text("v2\n")
    git(origin, "commit", "-q", "-am", "second")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(clone))
    got = facts(clone)
    assert (got["shallow"], got["head"]) == ("yes", git(origin, "rev-parse", "HEAD"))
    assert facts(origin)["shallow"] == "no"


def test_bare_repository_has_no_working_tree_facts(tmp_path: Path) -> None:
    origin = make_repo(tmp_path / "origin")
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(origin), str(bare))
    assert facts(bare) == {
        "head": git(origin, "rev-parse", "HEAD"),
        "branch": "main",
        "state": "clean",
        "shallow": "no",
    }


def test_linked_worktree_reports_its_own_branch_and_state(tmp_path: Path) -> None:
    repo = conflicting_branches(tmp_path)
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", "-b", "hotfix", str(other), "feature")
    git(other, "merge", "main", check=False)
    got = facts(other)
    assert (got["branch"], got["state"], got["dirty"]) == ("hotfix", "merging", "yes")
    assert facts(repo)["state"] == "clean"
    assert [i.provenance["git_dir"] for i in collect(other)][0] == str(
        repo / ".git" / "worktrees" / "other"
    )


def test_not_a_repo_and_missing_path_are_collection_errors(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    missing = tmp_path / "missing"
    afile = tmp_path / "file"
    afile.write_text("x")
    for path, words in (
        (plain, "not a git repository"),
        (missing, "no such file"),
        (afile, "not a directory"),
    ):
        items = collect(path)
        assert len(items) == 1 and isinstance(items[0], CollectionError), items
        assert (items[0].subject, items[0].key) == (f"repo:{path}", None)
        assert words in items[0].message and "\n" not in items[0].message


def test_subdirectory_of_a_repo_is_not_silently_the_whole_repo(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    (repo / "python").mkdir()
    items = collect(repo / "python")
    assert len(items) == 1 and isinstance(items[0], CollectionError)
    assert "top of the checkout" in items[0].message


def test_repository_configured_programs_never_run(tmp_path: Path) -> None:
    markers = {name: tmp_path / f"ran-{name}" for name in ("fsmonitor", "evil", "sneaky")}
    repo = make_repo(
        tmp_path / "evil",
        {
            ".gitattributes": "* filter=evil\n*.py filter=sneaky\n",
            "conf": "a\n",
            "tool.py": "1\n",
        },
    )
    git(repo, "config", "core.fsmonitor", f"touch {markers['fsmonitor']}; false #")
    git(repo, "config", "filter.evil.clean", f"touch {markers['evil']}; cat")
    git(repo, "config", "filter.evil.smudge", f"touch {markers['evil']}; cat")
    git(repo, "config", "filter.evil.required", "true")
    # A driver hidden in an included file, and a long-running "process" one.
    (repo / ".git" / "extra.cfg").write_text(
        f'[filter "sneaky"]\n\tprocess = touch {markers["sneaky"]}; false\n'
    )
    git(repo, "config", "include.path", "extra.cfg")
    # Tracked and modified but the same size: git has to hash them, through their filters.
    (repo / "conf").write_text("b\n")
    (repo / "tool.py").write_text("2\n")
    (repo / "new.txt").write_text("untracked\n")

    got = facts(repo)
    assert [m.name for m in markers.values() if m.exists()] == []
    assert (got["dirty"], got["untracked"]) == ("yes", "1")
    # The traps are armed: plain git in the same repository springs every one.
    git(repo, "diff", "HEAD", check=False)
    assert [m.name for m in markers.values() if m.exists()] == list(
        m.name for m in markers.values()
    )


def test_hooks_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "hooked"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction"):
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
        hook.chmod(0o755)
    repo = make_repo(tmp_path / "app")
    git(repo, "config", "core.hooksPath", str(hooks))
    later = time.time() + 5
    os.utime(repo / "serve.sh", (later, later))  # stale index stat data: git wants to refresh
    index = (repo / ".git" / "index").read_bytes()
    got = facts(repo)
    assert not marker.exists()
    assert got["dirty"] == "no"
    assert (repo / ".git" / "index").read_bytes() == index  # drift never writes the index
    git(repo, "status")  # plain git refreshes the index and fires post-index-change
    assert marker.exists()


def test_submodule_config_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    sub = make_repo(tmp_path / "lib", {".gitattributes": "* filter=evil\n", "k.py": "k\n"})
    repo = make_repo(tmp_path / "app")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "lib")
    git(repo, "commit", "-q", "-m", "add lib")
    checkout = repo / "lib"
    git(checkout, "config", "filter.evil.clean", f"touch {marker}; cat")
    # Same size as before, so git cannot tell it changed without hashing it (filtering it).
    (checkout / "k.py").write_text("K\n")
    got = facts(repo)
    assert not marker.exists()
    assert got["dirty"] == "no"  # submodule working trees are their own [[repos]]
    git(checkout, "-c", "filter.evil.clean=cat", "commit", "-q", "-am", "moved")
    assert facts(repo)["dirty"] == "yes"  # a moved submodule commit is a change
    assert not marker.exists()
    (checkout / "k.py").write_text("k\n")
    git(repo, "diff", "HEAD", check=False)
    assert marker.exists()  # the trap was armed


def test_user_config_and_git_environment_are_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "app")
    (repo / "scratch.tmp").write_text("x")
    user_git = tmp_path / "home" / ".config" / "git"
    user_git.mkdir(parents=True)
    (user_git / "ignore").write_text("*.tmp\n")
    assert git(repo, "status", "--porcelain") == ""  # the user's own git hides scratch.tmp
    # Variables a git hook or a developer's shell may leave behind; git commands drop them.
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "no-such-index"))
    got = facts(repo)
    assert (got["untracked"], got["dirty"]) == ("1", "no")


def test_git_environment_that_would_mislead_gitpython_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "app")
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path))
    [error] = collect(repo)
    assert isinstance(error, CollectionError) and "GIT_WORK_TREE" in error.message


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand the repo to another user")
def test_repo_owned_by_another_user_is_read(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "app")
    (repo / "serve.sh").write_text("changed\n")
    for root, dirs, files in os.walk(repo):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), 65534, 65534)
    os.chown(repo, 65534, 65534)
    refused = subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, text=True)
    assert "dubious ownership" in refused.stderr
    got = facts(repo)
    assert (got["branch"], got["dirty"]) == ("main", "yes")


def git_processes_in(path: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] == "git" and proc.cwd() == str(path):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def test_a_hanging_git_is_killed_at_the_timeout(tmp_path: Path) -> None:
    # A FIFO where git expects a .gitignore blocks `git ls-files` on open().
    repo = make_repo(tmp_path / "app")
    os.mkfifo(repo / "sub.gitignore")
    (repo / "sub").mkdir()
    os.rename(repo / "sub.gitignore", repo / "sub" / ".gitignore")
    started = time.monotonic()
    items = collect(repo, timeout=1.0)
    assert time.monotonic() - started < 2
    assert items == [CollectionError(f"repo:{repo}", None, "git ls-files timed out after 1s")]
    assert git_processes_in(repo) == []


def test_git_missing_from_path_is_a_collection_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "app")
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    message = "git: command not found on PATH (install git to record repositories)"
    assert collect(repo) == [CollectionError(f"repo:{repo}", None, message)]
