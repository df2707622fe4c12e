"""A Python service's interpreter and distributions, read from disk, never imported.

Facts on the service's own subject (``service:NAME``), since what is pending
or live is about that service's process: ``python`` (its sys.prefix),
``python:path`` (the folders distributions are found in, in sys.path order),
``package:NAME`` (the version in its ``*.dist-info/METADATA`` or egg-info
``PKG-INFO``: the Name and Version headers only; the first on the path wins,
as importlib.metadata has it), ``package_source:NAME`` (``direct_url.json``:
an editable folder, a VCS URL at a commit, a local archive or folder) and
``package_head:NAME`` (the HEAD commit of the git checkout an editable or
local-folder install points at). The interpreter and its path are found by
`drift.collectors.python_env`.

An unchanged record costs a listing of each folder and a stat of each
distribution's metadata and of its folder: what a metadata file said is kept
in the stat cache under ``python-metadata:PATH`` (never a [[files]] path,
which is absolute), with the distribution's INSTALLER and direct_url.json,
which pip writes after it as new files (so the folder's mtime says when they
came). As for any file, what changed within the timestamps' tick is not
cached. A checkout's HEAD is read from its files (HEAD, the loose ref or
packed-refs), without running git.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from drift.collectors.hashing import RACY_WINDOW_NS
from drift.collectors.python_env import PythonEnv, PythonUnknown, is_interpreter, python_env
from drift.facts import CachedStat, CollectContext, CollectionError, Fact, storable
from drift.small_files import Unread, as_text, read_head, read_small

Result = Fact | CollectionError

CACHE_PREFIX = "python-metadata:"
PYTHON_KEYS = ("python", "python:", "package:", "package_source:", "package_head:")
"""What the python facts of a service are: an error on each covers them all."""

_SUFFIXES = (".dist-info", ".egg-info")
HEADER_BYTES = 1 << 20  # of a METADATA or PKG-INFO, at most this much is read for its headers
PACKED_REFS_BYTES = 32 << 20  # a checkout with 100,000 tags has a 6 MB packed-refs


_SEPARATORS = re.compile(r"[-_.]+")


def normalise(name: str) -> str:
    """A distribution's name as PEP 503 normalises it."""
    return _SEPARATORS.sub("-", name).lower()


def python_facts(subject: str, facts: Sequence[Result], ctx: CollectContext) -> list[Result]:
    """The python facts of the process whose facts are `facts`; none if it is not Python."""
    values = {f.key: f.value for f in facts if isinstance(f, Fact)}
    exe, pid = values.get("exe"), values.get("pid")
    if exe is None or pid is None or not is_interpreter(exe):
        return []
    if ctx.files.container is not None:
        return _blind(subject, "the Python of a process inside a container is not read yet")
    if "title" in values:  # its command line and environment are gone: what is still sure
        from drift.collectors.retitled import retitled_python_facts

        return retitled_python_facts(subject, int(pid), exe, ctx)
    if "argv" not in values or "cwd" not in values or not any(k.startswith("env:") for k in values):
        return _blind(subject, f"cannot read the command line, folder or environment of pid {pid}")
    environ = {k[4:]: v for k, v in values.items() if k.startswith("env:")}
    try:
        env = python_env(
            exe,
            json.loads(values["argv"]),
            environ,
            values["cwd"],
            user_site_allowed=_same_ids(pid, ctx.proc_root),
        )
    except PythonUnknown as exc:
        return _blind(subject, f"which Python pid {pid} runs: {exc}")
    return list(_facts(subject, int(pid), env, ctx))


def _blind(subject: str, message: str) -> list[Result]:
    return [CollectionError(subject, key, message) for key in PYTHON_KEYS]


def _same_ids(pid: str, proc_root: str) -> bool:
    """Whether the process's real and effective user and group are the same (site.py's test)."""
    try:
        with open(f"{proc_root}/{pid}/status", encoding="utf-8", errors="replace") as f:
            lines = {k: v.split() for k, _, v in (line.partition(":") for line in f)}
    except OSError:
        return True
    uid, gid = lines.get("Uid", []), lines.get("Gid", [])
    return uid[:1] == uid[1:2] and gid[:1] == gid[1:2]


def _facts(subject: str, pid: int, env: PythonEnv, ctx: CollectContext) -> Iterator[Result]:
    python: dict[str, Any] = {
        "pid": pid,
        "executable": env.executable,
        "resolved": env.resolved,
        "python_version": env.version,
        "base_prefix": env.base_prefix,
    }
    yield Fact(subject, "python", storable(env.prefix), python)
    path = {"pid": pid, **({"unsure": "; ".join(env.unsure)} if env.unsure else {})}
    yield Fact(subject, "python:path", storable("\n".join(env.paths)), path)
    seen: set[str] = set()
    for folder in env.paths:
        try:
            names = os.listdir(folder)
        except OSError as exc:
            yield CollectionError(subject, "package:", f"cannot list {folder}: {exc.strerror}")
            continue
        here: dict[str, list[tuple[str, tuple[str, str, str, str]]]] = {}
        unread: dict[str, str] = {}
        for entry in sorted(n for n in names if n.lower().endswith(_SUFFIXES)):
            try:
                found = distribution(f"{folder}/{entry}", ctx)
            except Unread as exc:
                unread.setdefault(folder_name(entry), str(exc))
                continue
            if found is not None:
                here.setdefault(normalise(found[0]), []).append((entry, found))
        for name, message in unread.items():
            if name not in seen:
                # Which version it is, and whether it shadows one later on the path, is
                # unknown: its facts keep their last values, never read as removed.
                seen.add(name)
                yield from unread_facts(subject, name, message)
        for name, dists in here.items():
            if name in seen:
                continue  # shadowed by a folder earlier on the path
            seen.add(name)
            (entry, found), *others = dists
            unsure = _duplicates(folder, entry, others)
            yield from _package_facts(subject, name, f"{folder}/{entry}", found, unsure)


def folder_name(entry: str) -> str:
    """The distribution name a dist-info or egg-info folder's name gives (``Foo_Bar-1.0.dist-info``
    is foo-bar), normalised: how a distribution whose metadata cannot be read is named."""
    return normalise(os.path.splitext(os.path.basename(entry))[0].split("-", 1)[0])


def unread_facts(subject: str, name: str, message: str) -> list[Result]:
    """A distribution's facts as blind spots: its metadata is there but was not read."""
    return [CollectionError(subject, f"{key}{name}", message) for key in PYTHON_KEYS[2:]]


def _duplicates(
    folder: str, entry: str, others: list[tuple[str, tuple[str, str, str, str]]]
) -> str:
    """Why a distribution's version is unsure: more metadata folders of it in one folder.

    An interrupted install or a tool other than pip can leave two; which one
    describes the files there is unknown, so drift names them, never picks silently.
    """
    if not others:
        return ""
    listed = ", ".join(f"{e} ({found[1]})" for e, found in others)
    return f"{folder} also holds {listed} beside {entry}: which one describes its files is unknown"


def package_facts(
    subject: str, where: str, found: tuple[str, str, str, str], via: str
) -> list[Result]:
    """The facts of one distribution (`distribution` read it) and how it was found (`via`)."""
    return list(_package_facts(subject, normalise(found[0]), where, found, via=via))


def _package_facts(
    subject: str,
    name: str,
    where: str,
    found: tuple[str, str, str, str],
    unsure: str = "",
    via: str = "",
) -> Iterator[Result]:
    _display, version, installer, source = found
    provenance: dict[str, Any] = {"dist_info": storable(where)}
    if unsure:
        provenance["unsure"] = storable(unsure)
    if via:
        provenance["via"] = storable(via)
    if installer:
        provenance["installer"] = storable(installer)
    yield Fact(subject, f"package:{name}", storable(version), provenance)
    if not source:
        return
    yield Fact(subject, f"package_source:{name}", storable(source), provenance)
    kind, _, folder = source.partition(" ")
    if kind in ("editable", "folder"):
        try:
            head = checkout_head(folder)
        except HeadUnknown as exc:
            yield CollectionError(subject, f"package_head:{name}", str(exc))
            return
        if head is not None:
            yield Fact(subject, f"package_head:{name}", head[0], {**provenance, "git_dir": head[1]})


def distribution(where: str, ctx: CollectContext) -> tuple[str, str, str, str] | None:
    """(Name, Version, installer, source) of one dist-info or egg-info; None without a Name.

    Unread when a file of it is there but not read (`drift.small_files`).
    """
    # Two stats in the usual case (a dist-info folder's METADATA, and the folder):
    # this runs for every distribution at every record.
    candidates = (
        (f"{where}/PKG-INFO", where)
        if where.lower().endswith(".egg-info")
        else (f"{where}/METADATA", f"{where}/PKG-INFO", where)
    )
    for metadata in candidates:
        try:
            # A link named METADATA is its metadata too: read (and refused) as one.
            st = os.stat(metadata, follow_symlinks=metadata == where)
        except OSError:
            continue
        if metadata == where and stat.S_ISDIR(st.st_mode):
            return None  # a folder without its metadata file
        break
    else:
        return None
    key = CACHE_PREFIX + metadata
    stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    # pip writes INSTALLER and direct_url.json after METADATA, as new files: the
    # folder's mtime moves then, so a record that read the folder half written
    # reads it again. (An egg-info's PKG-INFO is all that is read of it.)
    folder = _mtime_ns(where) if metadata.endswith("/METADATA") else 0
    cached = ctx.file_cache.get(key)
    found = None if cached is None or cached[:4] != stamp else json.loads(cached[4])
    if found is not None and len(found) == 5 and found[4] == folder:
        name, version, installer, source = found[:4]
    else:
        name, version = _headers(metadata)
        installer, source = "", ""
        if metadata.endswith("/METADATA"):
            installer = _small_text(f"{where}/INSTALLER").strip()
            source = _direct_url(f"{where}/direct_url.json")
        # Changed within the timestamps' tick, it may change again unseen: read it next time.
        if folder != -1 and time.time_ns() - max(st.st_ctime_ns, folder) >= RACY_WINDOW_NS:
            entry: CachedStat = (*stamp, json.dumps([name, version, installer, source, folder]))
            ctx.cache_updates[key] = entry
    if not name:
        return None
    return name, version, installer, source


def _mtime_ns(folder: str) -> int:
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return -1  # gone since it was listed: what was read of it is not cached


def _headers(path: str) -> tuple[str, str]:
    """The Name and Version headers of a metadata file (its header block only).

    Only the first HEADER_BYTES are read: Name and Version come first in every
    metadata version, and what is before the blank line is header, however
    long the rest. Unread if the file cannot be read as a regular file.
    """
    data = read_head(path, HEADER_BYTES, b"\n\n") or b""
    found: dict[str, str] = {}
    for line in as_text(data).splitlines():
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and not line[:1].isspace() and key in ("name", "version"):
            found.setdefault(key, value.strip())
    return found.get("name", ""), found.get("version", "")


def _small_text(path: str) -> str:
    """A small marker file's text ("" if it is not there); Unread if it cannot be read."""
    data = read_small(path)
    return "" if data is None else as_text(data)


def _direct_url(path: str) -> str:
    """direct_url.json in words: ``editable /src/x``, ``git URL@COMMIT``, ``archive URL``."""
    text = _small_text(path)
    if not text:
        return ""
    try:
        data = json.loads(text)
    except ValueError:
        return f"unreadable {path}"
    if not isinstance(data, dict):
        return f"unreadable {path}"
    url = str(data.get("url", ""))
    vcs = data.get("vcs_info")
    if isinstance(vcs, Mapping):
        return f"{vcs.get('vcs', 'vcs')} {url}@{vcs.get('commit_id', '?')}"
    folder = url.removeprefix("file://") if url.startswith("file://") else ""
    directory = data.get("dir_info")
    if isinstance(directory, Mapping) and folder:
        from urllib.parse import unquote

        return f"{'editable' if directory.get('editable') else 'folder'} {unquote(folder)}"
    return f"archive {url}"


class HeadUnknown(Exception):
    """A checkout whose HEAD drift cannot read from its files."""


def checkout_head(folder: str) -> tuple[str, str] | None:
    """(HEAD's commit, git dir) of the git checkout holding `folder`; None outside one.

    Read from the files as git keeps them (a worktree's ``.git`` file, HEAD,
    the loose ref, packed-refs); what is not there (a reftable, a ref that
    is not written), or a file there drift will not read (`read_small`), raises
    HeadUnknown, never a guess.
    """
    try:
        return _checkout_head(os.path.abspath(folder))
    except Unread as exc:
        raise HeadUnknown(str(exc)) from None


def _checkout_head(at: str) -> tuple[str, str] | None:
    while True:
        dot = f"{at}/.git"
        if os.path.exists(dot):
            break
        parent = os.path.dirname(at)
        if parent == at:
            return None
        at = parent
    git_dir = dot
    if os.path.isfile(dot):
        pointer = _small_text(dot).strip()
        if not pointer.startswith("gitdir:"):
            raise HeadUnknown(f"{dot}: not a gitdir pointer")
        git_dir = os.path.normpath(os.path.join(at, pointer[7:].strip()))
    head = _small_text(f"{git_dir}/HEAD").strip()
    common = _small_text(f"{git_dir}/commondir").strip()
    common_dir = os.path.normpath(os.path.join(git_dir, common)) if common else git_dir
    for _depth in range(5):
        if not head.startswith("ref:"):
            if re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", head):
                return head, git_dir
            raise HeadUnknown(f"{git_dir}: cannot read HEAD ({head[:40]!r})")
        ref = head[4:].strip()
        base = git_dir if ref == "HEAD" or not ref.startswith("refs/") else common_dir
        loose = _small_text(f"{base}/{ref}").strip() or _small_text(f"{common_dir}/{ref}").strip()
        head = loose or _packed(common_dir, ref)
    raise HeadUnknown(f"{git_dir}: HEAD's refs go too deep")


def _packed(common_dir: str, ref: str) -> str:
    wanted = ref.encode("utf-8", "surrogateescape")
    for line in (read_small(f"{common_dir}/packed-refs", PACKED_REFS_BYTES) or b"").splitlines():
        sha, _, name = line.partition(b" ")
        if name == wanted:
            return sha.decode("ascii", "replace")
    return ""
