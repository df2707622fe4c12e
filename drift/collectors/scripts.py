"""Serve scripts: their text, the variables they hand over, and the command they launch.

Facts are ``script:<path>`` with keys ``content`` (the whole text), one
``export:<NAME>`` per variable the launched command may receive, ``exec``
(that command) and one ``flag:<name>`` per flag of it. A file the script
sources is ``script:<that path>`` with its own ``content``. A script whose
path ends in a symlink is never followed: it has only ``symlink`` (the link's
target, as for files) and its other facts keep their last values.

The script is read, never run: `drift.shell.evaluate` walks it with every
value each variable may have (cached while neither the script nor a file it
sources changes), and `drift.collectors.script_facts` turns that into the
export, exec and flag facts, with every possibility and the line it comes
from. The analysis matches the live process's values against these to name
the line a live value came from.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Iterable, Iterator
from typing import Any

from drift.collectors.script_facts import script_facts
from drift.collectors.start_folder import StartFolder, unit_start_folder
from drift.facts import CollectContext, CollectionError, Fact, file_times, storable
from drift.rooted import HOST, Files
from drift.shell.walk import unreadable
from drift.small_files import Unread, read_small_stat

MAX_SCRIPT_BYTES = 8 << 20
"""A "script" larger than this is a misconfiguration (a log, a binary), not read each minute."""

_CACHE: dict[
    tuple[str, str, bytes, StartFolder | None], tuple[Any, tuple[tuple[str, bytes], ...]]
] = {}


def collect_script(
    service_name: str,
    script_path: str,
    ctx: CollectContext,
    *,
    unit: str | None = None,
    start: StartFolder | None = None,
) -> Iterator[Fact | CollectionError]:
    """Facts about a service's serve script; an unreadable or missing script is a blind spot.

    `start` is the folder the script is started in, when the caller knows
    it; for a service found by `unit`, systemd is asked (only when the
    script reads a relative path, which is read from that folder).
    """
    subject = f"script:{script_path}"
    files = ctx.files
    if files.root + os.path.abspath(script_path) in ctx.exclude:
        yield CollectionError(subject, None, f"{script_path} is one of drift's own files")
        return
    try:
        data, st = _read_regular_file(script_path, files)
    except IsASymlink:
        # Never followed: as root, a script swapped for a link to /etc/shadow
        # would put the password hashes in the history. The link is recorded
        # as the files collector records one; what the script said keeps its
        # last values.
        yield from _symlink_facts(subject, script_path, service_name, files)
        return
    except FileNotFoundError:
        # A serve script that vanished is suspicious, but it must not read as
        # "every export removed": its facts keep their last value.
        yield CollectionError(subject, None, f"script not found: {script_path}")
        return
    except PermissionError:
        yield CollectionError(subject, None, f"permission denied reading {script_path}")
        return
    except OSError as exc:
        yield CollectionError(subject, None, f"cannot read {script_path}: {exc.strerror or exc}")
        return

    where = _where(script_path, service_name, files)
    # The file times go on the content only: the other facts' provenance is their
    # place (a line moved is stored), and a touch must not read as a move.
    content = data.decode("utf-8", "backslashreplace")
    yield Fact(subject, "content", content, {**where, **file_times(st)})
    model = script_model(script_path, data, ctx.exclude, files, start)
    if start is None and unit is not None and model.needs_start:
        start = unit_start_folder(unit, script_path, ctx)
        if start is not None:
            model = script_model(script_path, data, ctx.exclude, files, start)
    for sourced in model.sourced:
        if sourced.path == script_path:
            continue
        yield Fact(
            f"script:{sourced.path}",
            "content",
            sourced.data.decode("utf-8", "backslashreplace"),
            {
                **_where(sourced.path, service_name, files),
                "sourced_by": f"{sourced.origin.file}:{sourced.origin.line}",
            },
        )
    yield from _read_facts(subject, script_path, model, ctx, where)


def _read_facts(
    subject: str, script_path: str, model: Any, ctx: CollectContext, where: dict[str, str]
) -> Iterator[Fact | CollectionError]:
    """What the reading gives: the exports, exec and flags, or why they keep their last values."""
    files = ctx.files
    if model.broken:
        # What the script exports and runs cannot be read: those facts keep
        # their last values rather than read as removed or as a guess.
        message = storable(model.broken[0])
        for key in ("export:", "flag:", "exec"):
            yield CollectionError(subject, key, message)
        return
    for path in model.unread_sources:
        # It is there but was not read: its recorded text keeps its last value.
        why = unreadable(path, files)
        why = "drift cannot read it" if why.startswith("which") else f"it is {why}"
        yield CollectionError(
            f"script:{storable(path)}", None, f"sourced by {script_path}, but {why}"
        )
    lost = [
        p for p in model.unread_sources if ctx.recorded and ctx.recorded(f"script:{p}", "content")
    ]
    if lost:
        # A file read before and unreadable now (made a FIFO, a link, closed to drift): what
        # the script exports and runs cannot be read whole, and keeps its last values rather
        # than read as removed.
        message = storable(f"sources {lost[0]}, which drift read before and cannot read now")
        for key in ("export:", "flag:", "exec"):
            yield CollectionError(subject, key, message)
        return
    for gap in model.gaps:
        yield CollectionError(subject, "reading", storable(gap))
    yield from script_facts(subject, model, where)


def _where(path: str, service_name: str, files: Files) -> dict[str, str]:
    """The provenance of a script's facts: its file, its service, the container it is in."""
    if files.container is None:
        return {"file": path, "service": service_name}
    return {"file": path, "service": service_name, "container": files.container}


def script_model(
    path: str,
    data: bytes,
    exclude: Iterable[str] = (),
    files: Files = HOST,
    start: StartFolder | None = None,
) -> Any:
    """The evaluated script, from a cache while neither it nor a file it sources changed.

    `files` is where the paths it names are read (a container's, seen from the host);
    `start` the folder it is started in, if known.
    """
    from drift.shell.evaluate import evaluate
    from drift.shell.syntax import bash_refuses
    from drift.shell.walk import MAX_SOURCED_BYTES, path_test

    key = (files.root, path, hashlib.blake2b(data, digest_size=16).digest(), start)
    cached = _CACHE.get(key)
    if cached is not None:
        model, sourced = cached
        if all(
            files.read_regular(p, MAX_SOURCED_BYTES) == content for p, content in sourced
        ) and all(path_test(kind, p, files) == answer for kind, p, answer in model.checked):
            return model
    excluded = frozenset(exclude)

    def read(target: str) -> bytes | None:
        if files.root + os.path.abspath(target) in excluded:
            return None
        return files.read_regular(target, MAX_SOURCED_BYTES)

    if start is None:
        model = evaluate(path, data, read, files)
    else:
        model = evaluate(path, data, read, files, start.path, start.how)
    if not model.broken:
        refused = bash_refuses(data)
        if refused is not None:
            model.broken.append(f"{path}: {refused}")
    if len(_CACHE) > 64:
        _CACHE.clear()
    _CACHE[key] = (model, tuple((s.path, s.data) for s in model.sourced))
    return model


class IsASymlink(OSError):
    """The path's last component is a symbolic link, which drift does not follow."""


def _read_regular_file(path: str, files: Files = HOST) -> tuple[bytes, os.stat_result]:
    """The file's bytes and its stat after the read (`drift.small_files`); a FIFO or device
    is refused instead of blocking the record.

    The last component must not be a symlink (IsASymlink); folders above it
    may be (``/opt/current -> /opt/v2`` is a common deployment).
    """
    try:
        found = read_small_stat(path, MAX_SCRIPT_BYTES, files=files)
    except Unread as exc:
        if exc.kind == "link" and files.islink(path):
            raise IsASymlink(errno.ELOOP, "is a symlink", path) from None
        if exc.kind == "type":
            raise OSError(errno.EINVAL, "not a regular file") from None
        if exc.kind == "size":
            raise OSError(errno.EFBIG, f"too large for a serve script: {exc.reason}") from None
        if exc.errno is not None:
            raise OSError(exc.errno, os.strerror(exc.errno), path) from None
        raise OSError(errno.EIO, exc.reason) from None
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    return found


def _symlink_facts(
    subject: str, path: str, service_name: str, files: Files
) -> Iterator[Fact | CollectionError]:
    """A serve script that is a symlink: its target as a ``symlink`` fact, the rest kept."""
    try:
        target = storable(files.readlink(path))
    except OSError as exc:
        # Swapped again while we looked (EINVAL: no longer a link) or gone.
        yield CollectionError(subject, None, f"cannot read {path}: {exc.strerror or exc}")
        return
    yield Fact(subject, "symlink", target, _where(path, service_name, files))
    yield CollectionError(
        subject,
        None,
        f"{path} is a symlink to {target}: drift does not follow a link to read a serve "
        "script (name the file itself in the config)",
    )
