"""Expanding a file set's globs: walk directories without following symlinks, say what matched.

Globs: ``**`` matches zero or more directories (``dir/**`` every file below
dir); ``*``, ``?`` and ``[...]`` stay within one name and match a leading dot
too, since a changed ``.env`` is as much a change as any other file. The
fixed leading directory of a pattern may be a symlink (the user named it);
below it no symlink is ever followed.

A walk never enters /proc, /sys or /dev below its fixed directory, nor, with
``one_file_system`` (the default), /run or a directory on another filesystem
than that fixed directory. It never lists drift's own files (the exclusions),
under their own name or their real one. A directory that cannot be listed is
a CollectionError for ``file:<dir>/``, every file below it. Past `max_files`
matches the walk stops and says which pattern took it there.

What matched comes back as what the walk's directory entry said of it (its
d_type tells a regular file without a system call), or the lstat of a literal
path; the files collector decides what each costs to read. The entry itself is
not kept: 150k of them, each holding its name, its path and, once asked, its
lstat, were a third of a large tree's record.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from fnmatch import translate
from typing import NamedTuple

from drift.facts import CollectionError, storable
from drift.globs import excluded as left_out
from drift.rooted import HOST, Files

_GLOB_CHARS = frozenset("*?[")
_PSEUDO = frozenset({"/proc", "/sys", "/dev"})
# Kernel views, not files: never walked into, only named as a glob's fixed part.
_OTHER_FILESYSTEM = _PSEUDO | {"/run"}
# What a walk that stays on one filesystem never enters either, even where
# /run is no mount of its own (a container's): sockets, pids and locks.

_Matcher = Callable[[str], object]
_Check = tuple[_Matcher, frozenset[int]]  # a component's matcher, the states a match reaches


def _ANY(name: str) -> bool:
    """The matcher of a bare ``*`` component (every name); plan() never calls it."""
    return True


Listed = bool | os.stat_result
"""A match as the walk found it: True for a regular file (by its d_type), False for anything
else (its lstat will tell what), or the lstat of a literal path."""


class Expansion(NamedTuple):
    """What a walk found: (first pattern, entry) by path, unreadable places, empty patterns.

    `overflow` is the pattern that took the matches past the limit, if one
    did: the walk stopped there, so `matches` is incomplete. Paths are where
    the host reads the files; in a container, `naming` holds, for each
    pattern, where its walk started on the host and the folder that is in
    the container's terms (`named` gives a path's name there).
    """

    matches: dict[str, tuple[str, Listed]]
    errors: list[CollectionError]
    empty: list[str]
    overflow: str | None = None
    naming: dict[str, tuple[str, str]] | None = None

    def named(self, path: str, pattern: str) -> str:
        """What a matched `path` is called in the config (inside the container, if any)."""
        mapping = None if self.naming is None else self.naming.get(pattern)
        if mapping is None:
            return path
        start, base = mapping
        return base if path == start else base.rstrip("/") + path[len(start) :]


class _TooMany(Exception):
    """A walk found more files than its set may hold."""


def expand_globs(
    patterns: Sequence[str], exclude: frozenset[str] = frozenset(), one_file_system: bool = True
) -> Iterator[tuple[str, str]]:
    """Yield (path, first pattern that matched) for each non-directory matched, sorted, once."""
    matches = expand(patterns, exclude, one_file_system=one_file_system).matches
    for path in sorted(matches):
        yield path, matches[path][0]


class Glob:
    """One pattern split into its fixed leading directory and per-component matchers.

    The matchers run as a small NFA over path components, so a directory is
    entered only if some state can still match below it. State i means
    "components [i:] are still to match"; a None matcher is ``**``.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        parts = os.path.abspath(pattern).split("/")[1:]
        fixed = 0
        while fixed < len(parts) and not _GLOB_CHARS.intersection(parts[fixed]):
            fixed += 1
        self.base = "/" + "/".join(parts[:fixed])
        rest: list[str] = []
        for part in parts[fixed:]:
            if part == "**" and rest and rest[-1] == "**":
                continue  # a/**/**/b is a/**/b
            rest.append(part)
        if rest and rest[-1] == "**":
            rest.append("*")  # a/** means every file below a
        self.literal = not rest
        self.matchers: list[_Matcher | None] = [
            None if part == "**" else _ANY if part == "*" else re.compile(translate(part)).match
            for part in rest
        ]
        self.end = len(rest)
        # closure[i]: the states reachable from i by letting each ** match zero directories.
        closure: list[frozenset[int]] = [frozenset([self.end])]
        for i in range(self.end - 1, -1, -1):
            extra = closure[0] if self.matchers[i] is None else frozenset()
            closure.insert(0, frozenset([i]) | extra)
        self.closure = closure

    def plan(self, states: frozenset[int]) -> tuple[frozenset[int], list[_Check]]:
        """For one directory's states: what any name leads to, and what a name matching each
        component adds. Computed once per directory, so each entry costs a regex match or two.
        """
        always: frozenset[int] = frozenset()
        checks: list[_Check] = []
        for i in sorted(states):
            if i == self.end:
                continue
            matcher = self.matchers[i]
            if matcher is None:
                always |= self.closure[i]  # ** swallows any directory name and stays
            elif matcher is _ANY:
                always |= self.closure[i + 1]  # a bare * matches every name: no regex to run
            else:
                checks.append((matcher, self.closure[i + 1]))
        return always, checks


def expand(
    patterns: Sequence[str],
    exclude: frozenset[str],
    listed: Callable[[int], None] | None = None,
    *,
    one_file_system: bool = True,
    max_files: int | None = None,
    files: Files = HOST,
    skip: Sequence[str] = (),
) -> Expansion:
    """Walk the patterns; `listed`, if given, hears how many files are found so far.

    Past `max_files` distinct files the walk stops and says which pattern it was on.
    The patterns name paths in `files` (a container's, whose symlinks resolve inside it).
    `skip` holds the set's exclude globs: what they match is neither listed nor walked
    into, and a pattern whose every file they drop is not "no match".
    """
    excluded = _exclusion_set(exclude)
    stops = _OTHER_FILESYSTEM if one_file_system else _PSEUDO
    limit = max_files if max_files is not None else float("inf")
    matches: dict[str, tuple[str, Listed]] = {}
    errors: list[CollectionError] = []
    empty: list[str] = []
    naming: dict[str, tuple[str, str]] | None = None if files.container is None else {}
    for pattern in patterns:
        glob = Glob(pattern)
        before = len(errors)
        start = _start(glob, files, errors)
        if naming is not None and start is not None:
            naming[pattern] = (start, glob.base)
        try:
            if start is None:
                found = False
            elif left_out(skip, glob.base, folder=not glob.literal):
                found = True  # the user left it all out: not "no file matches"
            elif glob.literal:
                found = _walk_literal(glob, excluded, matches, errors, start)
            else:
                walk = _Walk(glob, excluded, stops, one_file_system, start, files, skip)
                found = walk.run(matches, errors, listed, limit) or walk.skipped
        except _TooMany:
            return Expansion(matches, errors, empty, pattern, naming)
        if len(matches) > limit:
            return Expansion(matches, errors, empty, pattern, naming)
        if not found and len(errors) == before:
            empty.append(pattern)
    return Expansion(matches, errors, empty, None, naming)


def _start(glob: Glob, files: Files, errors: list[CollectionError]) -> str | None:
    """Where the host finds a glob's fixed part; None when it is not there (or is unreadable:
    then an error says so).

    On the host that is the path as written. In a container, every symlink
    on the way is resolved inside it (the fixed folder itself too, as the
    kernel follows one the user named; a literal file's own link is recorded,
    not followed).
    """
    if files.container is None:
        return glob.base
    try:
        return files.host_path(glob.base, follow_last=not glob.literal)
    except (FileNotFoundError, NotADirectoryError):
        return None  # nothing there: the pattern matches nothing
    except OSError as exc:
        where = glob.base if glob.literal else glob.base.rstrip("/") + "/"
        errors.append(
            CollectionError(
                "file:" + storable(where),
                None,
                f"cannot look up in container {files.container}: {exc.strerror or exc}",
            )
        )
        return None


def set_subject(patterns: Sequence[str]) -> str:
    """``file:<dir>/`` for the folder every pattern's files are under: covers the whole set."""
    folders = []
    for pattern in patterns:
        glob = Glob(pattern)
        folders.append(os.path.dirname(glob.base) if glob.literal else glob.base)
    common = os.path.commonpath(folders)
    return "file:" + storable(common if common.endswith("/") else common + "/")


def _exclusion_set(exclude: frozenset[str]) -> frozenset[str]:
    # Both the given path and where it really lives, so a symlinked state
    # directory does not let drift hash its own database.
    out: set[str] = set()
    for path in exclude:
        out.add(os.path.abspath(path))
        out.add(os.path.realpath(path))
    return frozenset(out)


def _device(entry: os.DirEntry[str]) -> int | None:
    """The device a listed directory is on."""
    try:
        return entry.stat(follow_symlinks=False).st_dev
    except OSError:
        return None  # gone: listing it finds nothing either


def _mount_points(mountinfo: str = "/proc/self/mountinfo") -> frozenset[str] | None:
    """Where filesystems are mounted in this process's view (or, from a container's
    mountinfo, in the container's), or None if /proc cannot say.

    Read once a walk, so only the directories named here cost an lstat to
    compare devices (1,900 of them were 3% of an unchanged record).
    """
    if not mountinfo:
        return None
    try:
        with open(mountinfo, "rb") as f:
            text = f.read()
    except OSError:
        return None
    points = set()
    for line in text.splitlines():
        fields = line.split(b" ")
        if len(fields) > 4:
            # Space, tab, newline and backslash are written as octal escapes.
            point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), fields[4])
            points.add(os.fsdecode(point))
    return frozenset(points)


def _walk_literal(
    glob: Glob,
    excluded: frozenset[str],
    matches: dict[str, tuple[str, Listed]],
    errors: list[CollectionError],
    path: str,
) -> bool:
    """A pattern without wildcards: the file at `path` (where the host finds it), if any."""
    head, tail = os.path.split(path)
    if path in excluded or os.path.join(os.path.realpath(head), tail) in excluded:
        return False
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        errors.append(
            CollectionError("file:" + storable(glob.base), None, f"cannot stat: {exc.strerror}")
        )
        return False
    if stat.S_ISDIR(st.st_mode):
        return False  # a directory is not a file; "no file matches" tells the user
    matches.setdefault(path, (glob.pattern, st))
    return True


class _Walk:
    """The walk of one pattern from its fixed directory, never through a symlink.

    It never enters a directory in `stops` (/proc ...) and, with
    `one_file_system`, one on another device than the fixed directory: a
    mount point. The fixed part may pass through symlinks (the user named
    it), so a path is also compared by what it is called below the real
    location of the fixed directory. In a container the walk starts at
    `start`, the fixed directory as the host finds it, and that real
    location is the container's (its /proc, its mounts).
    """

    def __init__(
        self,
        glob: Glob,
        excluded: frozenset[str],
        stops: frozenset[str] = _OTHER_FILESYSTEM,
        one_file_system: bool = True,
        start: str | None = None,
        files: Files = HOST,
        skip: Sequence[str] = (),
    ) -> None:
        self.glob = glob
        self.excluded = excluded
        self.skip = skip
        self.skipped = False  # whether `skip` left out something the glob reached
        self.stops = stops
        base = self.start = start or glob.base
        real_base = os.path.realpath(base) if files.container is None else files.inner_path(base)
        self.aliased = real_base != base
        # What a path below `start` is called below `real_base`: real_root + path[len(start):]
        # ("" for /, whose paths already start with a slash).
        self.real_root = real_base.rstrip("/")
        # drift's own files are host paths: a real path in a container is below its root.
        self.host_root = files.root
        self.device: int | None = None
        self.mounts: frozenset[str] | None = None
        if one_file_system:
            try:
                self.device = os.stat(base).st_dev
            except OSError:
                pass  # listing it fails too, and says why
            self.mounts = _mount_points(files.mountinfo)

    def run(
        self,
        matches: dict[str, tuple[str, Listed]],
        errors: list[CollectionError],
        listed: Callable[[int], None] | None = None,
        limit: float = float("inf"),
    ) -> bool:
        """Add what matches to `matches`; True if anything matched.

        Raises _TooMany once `matches` holds more than `limit` files.
        """
        found = False
        stack: list[tuple[str, frozenset[int]]] = [(self.start, self.glob.closure[0])]
        while stack:
            if listed is not None:
                listed(len(matches))
            if len(matches) > limit:
                raise _TooMany
            directory, states = stack.pop()
            prefix = directory if directory.endswith("/") else directory + "/"
            try:
                with os.scandir(directory) as entries:
                    listing = list(entries)
            except (FileNotFoundError, NotADirectoryError):
                continue  # gone, or never a directory: nothing below it
            except OSError as exc:
                named = self.glob.base.rstrip("/") + prefix[len(self.start.rstrip("/")) :]
                errors.append(
                    CollectionError(
                        f"file:{storable(named)}", None, f"cannot list directory: {exc.strerror}"
                    )
                )
                continue
            if self._sort(prefix, listing, states, stack, matches):
                found = True
        return found

    def _sort(
        self,
        prefix: str,
        listing: list[os.DirEntry[str]],
        states: frozenset[int],
        stack: list[tuple[str, frozenset[int]]],
        matches: dict[str, tuple[str, Listed]],
    ) -> bool:
        """Sort one directory's entries: directories to walk onto `stack`, files into `matches`.

        True if a file matched. The loop runs once per entry of the whole walk.
        """
        glob = self.glob
        end = glob.end
        pattern = glob.pattern
        excluded = self.excluded
        aliased = self.aliased
        always, checks = glob.plan(states)
        if len(checks) == 1:
            # The common shapes (*.py, **/*.py) have one component to test.
            only, hit = checks[0][0], always | checks[0][1]
        else:
            only, hit = None, always
        found = False
        # Shared by the matches in this folder: a match costs its path and a dict slot.
        regular: tuple[str, Listed] = (pattern, True)
        other: tuple[str, Listed] = (pattern, False)
        for entry in listing:
            name = entry.name
            if only is not None:
                next_states = hit if only(name) else always
            elif checks:
                next_states = _states_after(name, always, checks)
            else:
                next_states = always  # ** and * only: every name leads on
            if not next_states:
                continue
            path = prefix + name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if self.skip and self._left_out(path, is_dir):
                continue
            if is_dir:
                if (len(next_states) > 1 or end not in next_states) and self._enters(path, entry):
                    stack.append((path, next_states))
            elif end in next_states and not (
                path in excluded or (aliased and self.host_root + self._real(path) in excluded)
            ):
                found = True
                if path not in matches:
                    try:
                        is_file = entry.is_file(follow_symlinks=False)
                    except OSError:
                        is_file = False  # gone: its lstat will say so
                    matches[path] = regular if is_file else other  # lstat later, where needed
        return found

    def _left_out(self, path: str, folder: bool) -> bool:
        """Whether an exclude glob drops `path` (named as the config names it); its folders
        were asked on the way down."""
        named = self.glob.base.rstrip("/") + path[len(self.start.rstrip("/")) :]
        if left_out(self.skip, named, folder=folder, above=False):
            self.skipped = True
            return True
        return False

    def _real(self, path: str) -> str:
        """What `path`, below the fixed directory, is called below its real location."""
        return self.real_root + path[len(self.start) :]

    def _enters(self, path: str, entry: os.DirEntry[str]) -> bool:
        """Whether to walk into a directory: not a kernel view, not another filesystem."""
        real = self._real(path) if self.aliased else path
        if path in self.stops or real in self.stops:
            return False
        if self.device is None:
            return True
        if self.mounts is not None and real not in self.mounts:
            return True  # not a mount point: no lstat needed to know its device
        return _device(entry) == self.device


def _states_after(name: str, always: frozenset[int], checks: list[_Check]) -> frozenset[int]:
    """The states a name leads to when several components test it."""
    states = always
    for matcher, reached in checks:
        if matcher(name):
            states = states | reached
    return states
