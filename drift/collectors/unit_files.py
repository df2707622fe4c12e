"""A unit's files on disk: their text, the `Environment=` they set, and the line that set each.

systemd merges the unit file and its drop-ins (`FragmentPath`, `DropInPaths`)
into one `Environment=` list and `systemctl show` gives only the result, as
loaded at the last daemon-reload. drift reads the same files in the same
order and names the line that set each variable last. Two uses:

- the line of a loaded value: systemd stays the judge, a line is claimed
  only when what drift reads there is exactly the value systemd reports (a
  specifier such as `%i`, a file drift cannot read, a syntax it does not
  follow: no claim, the provenance stays "unit NAME");
- what the files say now, loaded or not: after an edit without
  daemon-reload (`NeedDaemonReload=yes`) the two differ, and the files'
  values are what the next daemon-reload loads. A drop-in created since
  the last reload is not in `DropInPaths` yet, so the unit's drop-in
  folders are listed for it then.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from drift.collectors.systemd import SystemdError, split_quoted
from drift.facts import CollectContext
from drift.rooted import HOST, Files, RootedFiles
from drift.small_files import Unread, read_small_stat

MAX_UNIT_FILE = 1 << 20  # a unit file or drop-in larger than this is not read

# Where the system manager looks for units and their drop-in folders, most
# important first (`systemd-analyze unit-paths` on systemd 252).
UNIT_PATHS = (
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/run/systemd/generator.early",
    "/etc/systemd/system",
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/run/systemd/system.attached",
    "/run/systemd/generator",
    "/usr/local/lib/systemd/system",
    "/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/run/systemd/generator.late",
)


class Origin(NamedTuple):
    """The line of a unit file that set a variable."""

    file: str  # the path as systemd names it (inside the container, if any)
    line: int
    text: str


class UnitFile(NamedTuple):
    """One unit file or drop-in as read now: its text, or why it could not be read."""

    path: str  # as systemd names it
    text: str | None
    error: str = ""


def files_root(proc_root: str) -> str | None:
    """The root the unit's paths are under, from `proc_root` (`/proc/N/root/proc` -> its root).

    None when proc_root does not end in /proc: then drift cannot tell where the
    files systemd names are, and claims no line.
    """
    trimmed = proc_root.rstrip("/")
    if not trimmed.endswith("/proc") and trimmed != "/proc":
        return None
    return trimmed[: -len("proc")] or "/"


def unit_files_view(ctx: CollectContext) -> tuple[Files, str | None] | None:
    """Where to read the files systemd names, and the host folder they sit in, if not /.

    With [container], the config's own view of the container (`ctx.files`),
    whose paths are the container's, as systemd's are. With only `proc_root`
    pointing into a container, its root, read the same way (symlinks resolved
    inside it); the folder is then named, since a [[files]] entry watches the
    same files by their host paths. None when proc_root says nothing of where
    the files are.
    """
    if ctx.files.root:
        return ctx.files, None
    root = files_root(ctx.proc_root)
    if root is None:
        return None
    if root == "/":
        return HOST, None
    return RootedFiles(root, container=f"the root of {ctx.proc_root}"), root


NO_SUCH_FILE = "no such file"


def read_file(files: Files, path: str, limit: int) -> tuple[bytes | None, str]:
    """The bytes of regular file `path`, its symlinks followed as systemd follows them; or why not.

    In a container its links are followed inside it (`drift.rooted`). Nothing
    but a regular file is read: a FIFO would block.
    """
    data, error, _st = read_file_stat(files, path, limit)
    return data, error


def read_file_stat(
    files: Files, path: str, limit: int
) -> tuple[bytes | None, str, os.stat_result | None]:
    """As `read_file`, with the file's stat taken after the read (None when not read)."""
    try:
        found = read_small_stat(path, limit, follow=True, files=files)
    except Unread as exc:
        return None, "not a regular file" if exc.kind == "type" else exc.reason, None
    if found is None:
        return None, NO_SUCH_FILE, None
    return found[0], "", found[1]


def read_unit_files(paths: list[str], files: Files) -> list[UnitFile]:
    """Each file of `paths` (the unit file, then its drop-ins) as it is on disk now."""
    out = []
    for path in paths:
        data, error = read_file(files, path, MAX_UNIT_FILE)
        if data is None:
            out.append(UnitFile(path, None, error))
        else:
            # systemd reads unit files as UTF-8 text; what is not is shown, not dropped.
            out.append(UnitFile(path, data.decode("utf-8", "backslashreplace")))
    return out


def disk_environment(files: list[UnitFile]) -> dict[str, tuple[str, Origin]] | None:
    """NAME -> (value, the line that sets it) of the `Environment=` lines of `files`, merged.

    Later files and lines win and an empty `Environment=` forgets what came
    before, as systemd merges them. None when a file could not be read: it
    could hold the last word on any variable.
    """
    last: dict[str, tuple[str, Origin]] = {}
    for unit_file in files:
        if unit_file.text is None:
            return None
        for number, text, value in _environment_lines(unit_file.text.split("\n")):
            if value.strip() == "":
                last.clear()  # an empty Environment= resets the list
                continue
            try:
                words = split_quoted(value)
            except SystemdError:
                continue  # systemd ignores a line it cannot split, and so does drift
            for word in words:
                name, sep, assigned = word.partition("=")
                if sep and name:
                    last[name] = (assigned, Origin(unit_file.path, number, text))
    return last


def environment_origins(
    paths: list[str], environment: dict[str, str], files: Files | None
) -> dict[str, Origin]:
    """For each variable of `environment` (systemd's merged value), the line that set it.

    `paths` are the unit file then its drop-ins, in systemd's order.
    """
    if files is None:
        return {}
    return loaded_origins(disk_environment(read_unit_files(paths, files)), environment)


def loaded_origins(
    disk: dict[str, tuple[str, Origin]] | None, environment: dict[str, str]
) -> dict[str, Origin]:
    """The line of each loaded variable whose value on disk is exactly systemd's."""
    return {
        name: origin
        for name, (assigned, origin) in (disk or {}).items()
        if environment.get(name) == assigned
    }


def drop_ins_on_disk(unit: str, loaded: tuple[str, ...], files: Files) -> list[str]:
    """The drop-ins a daemon-reload would load now: those loaded that remain, and new ones.

    Looked for in the folders of the loaded drop-ins and in ``UNIT.d`` (and
    ``TEMPLATE@.SUFFIX.d``) under every unit path; sorted by file name across
    folders, as systemd applies them, a name in a more important folder
    hiding the same name in a later one.
    """
    names = [unit]
    prefix, at, rest = unit.partition("@")
    if at and "." in rest:
        names.append(f"{prefix}@.{rest.rsplit('.', 1)[1]}")
    loaded_folders = list(dict.fromkeys(os.path.dirname(p) for p in loaded))
    candidates = [f"{base}/{name}.d" for base in UNIT_PATHS for name in names]
    candidates += [f for f in loaded_folders if f not in candidates]
    # A folder is named as systemd named it when it loaded a drop-in from it:
    # /lib and /usr/lib are one folder on a merged /usr.
    named = {_identity(files, f): f for f in reversed(loaded_folders)}
    seen: set[tuple[int, int]] = set()
    found: dict[str, str] = {}
    for candidate in candidates:
        identity = _identity(files, candidate)
        if identity is None or identity in seen:
            continue
        seen.add(identity)
        folder = named.get(identity, candidate)
        try:
            entries = os.listdir(files.host_path(folder))
        except (OSError, ValueError):
            continue
        for entry in entries:
            if entry.endswith(".conf") and entry not in found:
                found[entry] = f"{folder}/{entry}"
    return [found[name] for name in sorted(found)]


def _identity(files: Files, folder: str) -> tuple[int, int] | None:
    """(device, inode) of a folder, None if it is not there."""
    try:
        info = files.stat(folder)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


def _environment_lines(lines: list[str]) -> list[tuple[int, str, str]]:
    """(line number, the line's text, the value) of each `Environment=` in [Service]."""
    return [(a.line, a.text, a.value) for a in service_assignments(lines) if a.key == "Environment"]


class Assignment(NamedTuple):
    """One `KEY=value` of a unit file's [Service] section, and the line it starts on."""

    line: int
    text: str  # the line as written (its first line, for one continued with a backslash)
    key: str
    value: str


def service_assignments(lines: list[str]) -> list[Assignment]:
    """Every assignment of the [Service] section, in file order.

    A line ending in a backslash continues on the next; comments start with
    # or ;, as systemd reads them.
    """
    out = []
    section = ""
    index = 0
    while index < len(lines):
        start = index
        text = lines[index].strip()
        while text.endswith("\\") and index + 1 < len(lines):
            index += 1
            text = text[:-1] + " " + lines[index].strip()
        index += 1
        if not text or text[0] in "#;":
            continue
        if text.startswith("["):
            section = text
            continue
        key, sep, value = text.partition("=")
        if section == "[Service]" and sep:
            out.append(Assignment(start + 1, lines[start].strip(), key.strip(), value.strip()))
    return out
