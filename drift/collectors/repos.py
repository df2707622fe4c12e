"""[[repos]]: a git checkout's HEAD, branch, dirtiness, diff digest, untracked count and state.

Facts are ``repo:<path as configured>`` with keys ``head``, ``branch``,
``dirty``, ``diff``, ``untracked``, ``state`` and ``shallow`` (a bare
repository has no working tree, so only ``head``, ``branch``, ``state`` and
``shallow``). ``dirty`` is about tracked content (index or working tree
against HEAD); untracked files only count in ``untracked``.

Reading a repository must never run a program the repository names. What
GitPython reads in pure Python (where the .git directory is, HEAD, refs,
operation-in-progress files) it reads; the rest is three git commands
(``config``, ``diff-index -p``, ``ls-files``; before the first commit also
``rev-parse`` and ``hash-object``) hardened like this:

- only commands that never write the repository: ``diff-index`` rather than
  ``git diff`` (which refreshes the index), plus ``--no-optional-locks`` and
  ``GIT_OPTIONAL_LOCKS=0``; so no ``index.lock`` fights with the owner's git and
  no ``post-index-change`` hook.
- ``core.fsmonitor=false``, ``core.hooksPath=/dev/null``, ``diff.external=``,
  ``core.pager=cat``, ``protocol.allow=never``, and ``--no-ext-diff
  --no-textconv`` for the diff.
- every ``filter.<name>`` the repository's configuration defines (includes
  followed, as git itself resolves them) gets empty ``clean``, ``smudge`` and
  ``process`` and ``required=false``. A file whose stat data is stale is then
  hashed unfiltered, so in repositories with content filters (git-lfs) such a
  file can read as dirty where `git status` would not; safety wins.
- ``--ignore-submodules=dirty``: a submodule's own configuration would name
  filters we have not neutralised, so git is never run inside submodules;
  a submodule's recorded commit still shows in the diff. Configure a
  submodule as its own [[repos]] to watch its working tree.
- System and user configuration are not read (``GIT_CONFIG_NOSYSTEM=1``,
  ``GIT_CONFIG_GLOBAL=/dev/null``, ``GIT_ATTR_NOSYSTEM=1``, and ``HOME=/dev/null``
  for gits older than 2.32 and for the user's global ignore/attributes
  files), inherited ``GIT_*`` variables are dropped: the facts are the same
  whichever user, shell or cron job runs drift. GitPython itself obeys
  ``GIT_WORK_TREE``, ``GIT_COMMON_DIR`` and ``GIT_OBJECT_DIRECTORY`` from
  drift's own environment, so with any of them set the repository is a
  CollectionError rather than a wrong answer.

Ownership: git refuses a repository owned by another user ("dubious
ownership"), which is the normal case for drift running as root from cron
over a checkout owned by a developer. Naming the path in drift.toml is the
administrator's statement of trust, and with the hardening above git runs
nothing of the repository's, so drift passes ``safe.directory`` for exactly
that repository (its working tree and git directory, resolved), nothing wider.
If git still refuses (an old git, an unusual layout), the error says so.

Time: ``spec.timeout`` bounds the whole collection of one repository; each git
command gets what is left and is killed (with its process group) when it runs
out. ``untracked`` counts at most 1000 files (``1000+`` beyond), killing
``ls-files`` as soon as it has listed more.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from drift.collectors.commands import stream_bounded
from drift.config import RepoSpec
from drift.facts import CollectContext, CollectionError, Fact
from drift.rooted import HOST, Files

if TYPE_CHECKING:
    from git import Repo

UNTRACKED_CAP = 1000

_GITPYTHON_ENV = ("GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")

_HARDENING = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("diff.external", ""),
    ("core.pager", "cat"),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
)

# Checked in this order: a rebase stopped on a conflict may also leave
# CHERRY_PICK_HEAD or MERGE_HEAD behind, and the rebase is what the user started.
_STATE_MARKERS = (
    ("rebase-merge", "rebasing"),
    ("rebase-apply", "rebasing"),
    ("MERGE_HEAD", "merging"),
    ("CHERRY_PICK_HEAD", "cherry-picking"),
    ("REVERT_HEAD", "reverting"),
    ("BISECT_LOG", "bisecting"),
)


class _GitFailed(Exception):
    """A git command failed or ran out of time; the message is the one-line CollectionError text."""


def collect_repo(spec: RepoSpec, ctx: CollectContext) -> Iterator[Fact | CollectionError]:
    """Facts for one [[repos]] entry, or one CollectionError for the whole repository."""
    subject = f"repo:{spec.path}"
    try:
        facts = _read_repo(spec) if ctx.files.container is None else _read_inside(spec, ctx)
    except _GitFailed as exc:
        yield CollectionError(subject, None, str(exc))
        return
    yield from facts


def _read_repo(spec: RepoSpec) -> list[Fact]:
    repo = _open_repo(spec.path)
    # The budget starts after GitPython's one-off import, which is not the repository's fault.
    deadline = time.monotonic() + spec.timeout
    try:
        git_dir = os.path.abspath(repo.git_dir)
        common_dir = os.path.abspath(repo.common_dir)
        work_tree = repo.working_tree_dir
        git = _Git(
            cwd=os.fspath(work_tree) if work_tree else git_dir,
            trusted=[os.path.realpath(p) for p in (work_tree, git_dir) if p],
            deadline=deadline,
            timeout=spec.timeout,
        )
        try:
            head = _head_sha(repo, git)
            branch = _branch(repo)
        except (ValueError, TypeError, OSError) as exc:
            # A HEAD or ref file GitPython cannot parse, or one that vanished mid-read.
            raise _GitFailed(f"{spec.path}: cannot read HEAD: {exc}") from None
    finally:
        repo.close()

    provenance: dict[str, Any] = {"path": spec.path, "git_dir": git_dir}
    subject = f"repo:{spec.path}"
    values = {"head": head, "branch": branch}
    if work_tree:
        git.neutralise_filters()
        digest = _diff_digest(git, head)
        values["dirty"] = "yes" if digest else "no"
        values["diff"] = digest
        values["untracked"] = _untracked(git)
    values["state"] = _state(git_dir, head)
    values["shallow"] = "yes" if os.path.exists(os.path.join(common_dir, "shallow")) else "no"
    # When HEAD moved tells a restart before the move from one after it;
    # records alone only say "somewhere between two records".
    moved_at = _head_moved_at(git_dir, head)
    head_provenance = provenance if moved_at is None else {**provenance, "moved_at": moved_at}
    return [
        Fact(subject, key, value, head_provenance if key == "head" else provenance)
        for key, value in values.items()
    ]


def _read_inside(spec: RepoSpec, ctx: CollectContext) -> list[Fact]:
    """A checkout inside a container: git run in it, its files read through `ctx.files`.

    Neither GitPython nor the host's git can read a checkout through
    /proc/PID/root: both resolve real paths, and the road through the
    container's root leads back to the host's /. So every question goes to
    git inside the container (``nsenter ... git -C PATH``), hardened as on
    the host; a container without git is a blind spot.
    """
    files, container = ctx.files, ctx.files.container
    top = files.realpath(spec.path)
    if not files.exists(top):
        raise _GitFailed(f"{spec.path}: no such file or directory in container {container}")
    deadline = time.monotonic() + spec.timeout
    git = _Git("/", [top, f"{top}/.git"], deadline, spec.timeout, (*ctx.enter, "git", "-C", top))
    said = git.run(["rev-parse", "--absolute-git-dir", "--is-bare-repository", "--git-common-dir"])
    lines = said.split(b"\n")
    if len(lines) < 3:
        raise _GitFailed(f"{spec.path}: git rev-parse said {said!r}")
    git_dir, bare = os.fsdecode(lines[0]), lines[1] == b"true"
    # Relative to `top` where git gives it so (--path-format=absolute needs git 2.31).
    common = os.path.join(top, os.fsdecode(lines[2]))
    if not bare:
        toplevel = os.fsdecode(git.run(["rev-parse", "--show-toplevel"])).strip()
        if toplevel != top:
            raise _GitFailed(f"{spec.path}: not the top of a checkout (that is {toplevel})")
    head = git.run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], ok_codes=(0, 1))
    branch = git.run(["symbolic-ref", "--quiet", "HEAD"], ok_codes=(0, 1)).decode().strip()
    values = {
        "head": head.decode("ascii", errors="replace").strip(),
        "branch": branch.removeprefix("refs/heads/") if branch else "(detached)",
    }
    if not bare:
        git.neutralise_filters()
        digest = _diff_digest(git, values["head"])
        values.update(dirty="yes" if digest else "no", diff=digest, untracked=_untracked(git))
    values["state"] = _state(git_dir, values["head"], files)
    values["shallow"] = "yes" if files.exists(os.path.join(common, "shallow")) else "no"
    provenance: dict[str, Any] = {"path": spec.path, "git_dir": git_dir, "container": container}
    moved_at = _head_moved_at(git_dir, values["head"], files)
    head_provenance = provenance if moved_at is None else {**provenance, "moved_at": moved_at}
    subject = f"repo:{spec.path}"
    return [
        Fact(subject, key, value, head_provenance if key == "head" else provenance)
        for key, value in values.items()
    ]


def _open_repo(path: str) -> Repo:
    """The repository at exactly `path` (its working tree, or a bare repository's directory)."""
    if not os.path.lexists(path):
        raise _GitFailed(f"{path}: no such file or directory")
    if not os.path.isdir(path):
        raise _GitFailed(f"{path}: not a directory")
    misleading = [name for name in _GITPYTHON_ENV if os.environ.get(name)]
    if misleading:
        # GitPython reads these from os.environ and would look at another repository.
        raise _GitFailed(
            f"{', '.join(misleading)} set in drift's environment would point "
            "GitPython elsewhere; unset it"
        )
    if shutil.which("git") is None:
        # Checked first: GitPython refuses to import without a git executable.
        raise _GitFailed("git: command not found on PATH (install git to record repositories)")
    # Imported here so a `drift record` without [[repos]] never pays for GitPython.
    from git import InvalidGitRepositoryError, NoSuchPathError, Repo

    try:
        # expand_vars=False: a literal "$" in a path is a path, not a variable.
        return Repo(path, search_parent_directories=False, expand_vars=False)
    except InvalidGitRepositoryError:
        raise _GitFailed(
            f"{path}: not a git repository (no .git here; give the top of the checkout)"
        ) from None
    except NoSuchPathError:
        raise _GitFailed(f"{path}: no such file or directory") from None
    except PermissionError as exc:
        raise _GitFailed(f"{path}: permission denied ({exc.filename or path})") from None
    except OSError as exc:
        raise _GitFailed(f"{path}: cannot read: {exc.strerror or exc}") from None


def _head_sha(repo: Repo, git: _Git) -> str:
    """HEAD's commit id, "" before the first commit."""
    from git.refs.symbolic import SymbolicReference

    try:
        return SymbolicReference.dereference_recursive(repo, "HEAD")
    except ValueError:
        pass  # unborn branch, or refs GitPython cannot parse (SHA-256, reftable): ask git
    out = git.run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], ok_codes=(0, 1))
    return out.decode("ascii", errors="replace").strip()


def _head_moved_at(git_dir: str, head: str, files: Files = HOST) -> str | None:
    """When HEAD last moved to `head`, from the last entry of its reflog (whole seconds, UTC).

    None without a reflog (``core.logAllRefUpdates=false``, a bare
    repository) or when its last entry is not this commit.
    """
    if not head:
        return None
    try:
        # Non-blocking and regular files only: a FIFO or a device planted in
        # .git/logs must not hang or flood the record.
        fd = files.open(os.path.join(git_dir, "logs", "HEAD"), os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        tail = os.pread(fd, 4096, max(0, st.st_size - 4096)).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    lines = [line for line in tail.splitlines() if line.strip()]
    if not lines:
        return None
    # "<old> <new> <name> <<email>> <seconds> <zone>\t<message>"
    entry = lines[-1].split("\t", 1)[0]
    words = entry.split(" ")
    if len(words) < 4 or words[1] != head or not words[-2].isdigit():
        return None
    return datetime.fromtimestamp(int(words[-2]), UTC).isoformat()


def _branch(repo: Repo) -> str:
    """The checked-out branch (also before its first commit), or "(detached)"."""
    if repo.head.is_detached:
        return "(detached)"
    path = repo.head.reference.path
    return path.removeprefix("refs/heads/")


def _state(git_dir: str, head: str, files: Files = HOST) -> str:
    for name, state in _STATE_MARKERS:
        if files.exists(os.path.join(git_dir, name)):
            return state
    return "clean" if head else "empty"


def _diff_digest(git: _Git, head: str) -> str:
    """sha256 of the patch `git diff HEAD` shows (vs the empty tree before any commit), or ""."""
    base = head or git.run(["hash-object", "-t", "tree", "/dev/null"]).decode().strip()
    digest = hashlib.sha256()
    size = 0

    def feed(chunk: bytes) -> bool:
        nonlocal size
        digest.update(chunk)
        size += len(chunk)
        return False

    # Plumbing, not `git diff`: the porcelain rewrites the index when stat data is
    # stale, even under --no-optional-locks (git < 2.50), and reads diff.* UI settings
    # that would change the digest. `diff-index -p` prints the same patch, and
    # nothing for a file that was only touched.
    git.stream(
        [
            "diff-index",
            "-p",
            "--binary",
            "--no-ext-diff",
            "--no-textconv",
            "--ignore-submodules=dirty",
            base,
            "--",
        ],
        feed,
    )
    return f"sha256:{digest.hexdigest()}" if size else ""


def _untracked(git: _Git) -> str:
    count = 0

    def tally(chunk: bytes) -> bool:
        nonlocal count
        count += chunk.count(b"\0")
        return count > UNTRACKED_CAP

    git.stream(["ls-files", "--others", "--exclude-standard", "-z"], tally)
    return f"{UNTRACKED_CAP}+" if count > UNTRACKED_CAP else str(count)


class _Git:
    """Runs hardened git commands in one repository within one deadline."""

    def __init__(
        self,
        cwd: str,
        trusted: list[str],
        deadline: float,
        timeout: float,
        command: tuple[str, ...] = ("git",),
    ) -> None:
        self.cwd = cwd
        # How git is run: ("git",), or in a container ("nsenter", ..., "git", "-C", PATH).
        self.command = command
        self.where = command[-1] if len(command) > 1 else cwd
        self.deadline = deadline
        self.timeout = timeout
        self.overrides: list[tuple[str, str]] = list(_HARDENING)
        self.overrides += [("safe.directory", path) for path in dict.fromkeys(trusted)]
        self.env = _git_env()

    def neutralise_filters(self) -> None:
        """Blank every filter driver the repository's own configuration defines."""
        out = self.run(
            ["config", "--includes", "-z", "--get-regexp", r"^filter\."], ok_codes=(0, 1)
        )  # 1: no filter configured
        names: set[str] = set()
        for entry in out.split(b"\0"):
            key = entry.split(b"\n", 1)[0].decode("utf-8", errors="surrogateescape")
            if key.startswith("filter.") and key.count(".") >= 2:
                names.add(key[len("filter.") : key.rindex(".")])
        for name in sorted(names):
            if "=" in name:
                # `-c` splits at the first "=", so this driver cannot be overridden; refuse.
                raise _GitFailed(
                    f"filter driver {name!r} has '=' in its name; drift cannot "
                    "disable it safely, so it does not run git here"
                )
            self.overrides += [
                (f"filter.{name}.{var}", "") for var in ("clean", "smudge", "process")
            ]
            self.overrides.append((f"filter.{name}.required", "false"))

    def _argv(self, args: list[str]) -> list[str]:
        argv = [*self.command, "--no-optional-locks"]
        for key, value in self.overrides:
            argv += ["-c", f"{key}={value}"]
        return argv + args

    def stream(
        self, args: list[str], sink: Callable[[bytes], bool], ok_codes: tuple[int, ...] = (0,)
    ) -> None:
        """Run git, feeding stdout to `sink`; raise _GitFailed on failure or timeout."""
        remaining = self.deadline - time.monotonic()
        what = f"git {args[0]}"
        if remaining <= 0:
            raise _GitFailed(f"{what} timed out after {self.timeout:g}s")
        run = stream_bounded(
            self._argv(args), remaining, on_stdout=sink, cwd=self.cwd, env=self.env
        )
        if run.error is not None:
            raise _GitFailed(run.error)
        if run.timed_out:
            raise _GitFailed(f"{what} timed out after {self.timeout:g}s")
        if run.stopped:
            return
        if run.exit_code not in ok_codes:
            last = run.stderr_last_line
            if run.exit_code == 127 and len(self.command) > 1:
                raise _GitFailed(f"cannot run git in the container: {last or 'not found'}")
            if "dubious ownership" in run.stderr.decode("utf-8", errors="replace"):
                raise _GitFailed(
                    f"git refuses {self.where}: owned by another user (dubious ownership) and "
                    "not the repository drift trusts; point [[repos]] path at the top of the "
                    "checkout itself"
                )
            raise _GitFailed(f"{what} failed (exit {run.exit_code}): {last or 'no message'}")

    def run(self, args: list[str], ok_codes: tuple[int, ...] = (0,)) -> bytes:
        """Run git and return its stdout (small outputs only)."""
        out = bytearray()

        def keep(chunk: bytes) -> bool:
            out.extend(chunk)
            return False

        self.stream(args, keep, ok_codes)
        return bytes(out)


def _git_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") and k not in ("HOME", "XDG_CONFIG_HOME")
    }
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        # Not a directory: git finds no ~/.gitconfig, ~/.config/git/{ignore,attributes}.
        HOME="/dev/null",
        LC_ALL="C",
    )
    return env
