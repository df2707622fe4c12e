"""Paths read inside a root: every symlink resolves inside it, as the kernel does in a chroot.

The oracle is the kernel itself: a child process chroots into the same tree and
opens, stats and resolves the same paths; `RootedFiles`, walking from the host,
must find the very same files (device and inode) or fail with the same errno.
Files of the same names sit outside the root, so an escape cannot go unseen.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift.rooted import HOST, RootedFiles

NAMES = ("a", "b", "c")


def _seen(call: object) -> tuple[str, object]:
    """("ok", result) or ("errno", number) of a call, the way both sides are compared."""
    try:
        return "ok", call()  # type: ignore[operator]
    except OSError as exc:
        return "errno", exc.errno


def _identity(info: os.stat_result) -> list[int]:
    return [info.st_dev, info.st_ino]


def _open_identity(opener: object, path: str) -> list[int]:
    fd = opener(path, os.O_RDONLY | os.O_NONBLOCK)  # type: ignore[operator]
    try:
        return _identity(os.fstat(fd))
    finally:
        os.close(fd)


def _in_chroot(root: Path, queries: list[str]) -> list[dict[str, object]]:
    """What the kernel says of each path in a process whose / is `root`."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: chroot, answer, exit without running pytest's cleanup
        code = 1
        try:
            os.close(read)
            os.chroot(root)
            os.chdir("/")
            answers = [
                {
                    "open": _seen(lambda q=q: _open_identity(os.open, q)),
                    "lstat": _seen(lambda q=q: _identity(os.lstat(q))),
                    "real": os.path.realpath(q) if os.path.exists(q) else None,
                }
                for q in queries
            ]
            with os.fdopen(write, "w") as out:
                json.dump(answers, out)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as given_back:
        text = given_back.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0, "the chroot child failed"
    return [
        {k: tuple(v) if isinstance(v, list) else v for k, v in a.items()} for a in json.loads(text)
    ]


def _rooted(files: RootedFiles, queries: list[str]) -> list[dict[str, object]]:
    out = []
    for q in queries:

        def host_lstat(q: str = q) -> list[int]:
            return _identity(os.lstat(files.host_path(q, follow_last=False)))

        lstat = _seen(lambda q=q: _identity(files.stat(q, follow_symlinks=False)))
        # host_path hands the host a path it opens without meeting a link on the way.
        assert _seen(host_lstat) == lstat, q
        out.append(
            {
                "open": _seen(lambda q=q: _open_identity(files.open, q)),
                "lstat": lstat,
                "real": files.realpath(q) if files.exists(q) else None,
            }
        )
    return [{k: tuple(v) if isinstance(v, list) else v for k, v in a.items()} for a in out]


def _normal(answers: list[dict[str, object]]) -> list[dict[str, object]]:
    """Both sides as JSON would carry them: tuples of (kind, value), values as lists."""
    return json.loads(json.dumps(answers))


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")

component = st.sampled_from([*NAMES, "..", "."])
relative = st.lists(component, min_size=1, max_size=4).map("/".join)
target = st.one_of(relative, relative.map(lambda p: "/" + p), st.just("/"))
node = st.one_of(
    st.just(("file",)),
    st.just(("dir",)),
    st.tuples(st.just("link"), target),
)
tree = st.dictionaries(
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join), node, max_size=12
)
query = st.lists(component, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))


def _build(base: Path, layout: dict[str, tuple[str, ...]]) -> None:
    for path in sorted(layout, key=lambda p: p.count("/")):
        kind = layout[path]
        here = base / path
        parts = path.split("/")
        folders = [base.joinpath(*parts[:i]) for i in range(1, len(parts))]
        if any(f.is_symlink() or not f.is_dir() for f in folders) or os.path.lexists(here):
            continue  # below a file or a link (never built through one): this node cannot be
        if kind[0] == "dir":
            here.mkdir()
        elif kind[0] == "file":
            here.write_text(f"inside {path}")
        else:
            here.symlink_to(kind[1])


@needs_root
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(layout=tree, queries=st.lists(query, min_size=1, max_size=12))
def test_every_path_resolves_as_in_a_chroot(
    tmp_path_factory: pytest.TempPathFactory, layout: dict[str, tuple[str, ...]], queries: list[str]
) -> None:
    top = tmp_path_factory.mktemp("tree")
    root = top / "root"
    root.mkdir()
    _build(root, layout)
    # The same names outside the root: a link that escaped would find these.
    for name in NAMES:
        (top / name).write_text(f"outside {name}")
    files = RootedFiles(str(root), "test")
    assert _normal(_rooted(files, queries)) == _normal(_in_chroot(root, queries))


@needs_root
def test_absolute_and_dotdot_links_stay_inside(tmp_path: Path) -> None:
    """The deployment shapes: `current -> /opt/serve/v2`, a relative link climbing too far."""
    root = tmp_path / "root"
    (root / "opt/serve/v2").mkdir(parents=True)
    (root / "opt/serve/v2/decode.sh").write_text("inside\n")
    (root / "opt/serve/current").symlink_to("/opt/serve/v2")
    (root / "opt/serve/up").symlink_to("../../../../../../../opt/serve/v2")
    # Where a link followed by the host's kernel would land.
    (tmp_path / "opt/serve/v2").mkdir(parents=True)
    (tmp_path / "opt/serve/v2/decode.sh").write_text("outside\n")
    files = RootedFiles(str(root), "box")
    for path in ("/opt/serve/current/decode.sh", "/opt/serve/up/decode.sh"):
        assert files.read_regular(path, 100) == b"inside\n"
        assert files.realpath(path) == "/opt/serve/v2/decode.sh"
        assert files.host_path(path) == f"{root}/opt/serve/v2/decode.sh"
    # The last name is a link: open(O_NOFOLLOW) refuses it, readlink says where it points.
    with pytest.raises(OSError) as info:
        files.open("/opt/serve/current", os.O_RDONLY | os.O_NOFOLLOW)
    assert info.value.errno == errno.ELOOP
    assert files.readlink("/opt/serve/current") == "/opt/serve/v2"
    assert files.islink("/opt/serve/current") and not files.isfile("/opt/serve/current")
    assert stat.S_ISDIR(files.stat("/opt/serve/current").st_mode)
    assert files.inner_path(f"{root}/opt/serve/v2") == "/opt/serve/v2"
    assert files.inner_path(str(root)) == "/"


def test_a_link_loop_is_eloop(tmp_path: Path) -> None:
    (tmp_path / "x").symlink_to("/y")
    (tmp_path / "y").symlink_to("x")
    files = RootedFiles(str(tmp_path), "box")
    with pytest.raises(OSError) as info:
        files.open("/x", os.O_RDONLY)
    assert info.value.errno == errno.ELOOP
    assert files.read_regular("/x", 10) is None
    assert files.realpath("/x") == "/x"  # unresolvable: kept as named


def test_the_host_reads_paths_as_named(tmp_path: Path) -> None:
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2/run.sh").write_text("#!/bin/bash\n")
    (tmp_path / "current").symlink_to(tmp_path / "v2")
    path = str(tmp_path / "current/run.sh")
    assert HOST.host_path(path) == path == HOST.inner_path(path)
    assert HOST.read_regular(path, 100) == b"#!/bin/bash\n"
    assert HOST.first_line(path, 5) == b"#!/bi"
    assert HOST.container is None and HOST.root == ""


def test_a_folder_where_a_file_is_asked_for_is_no_file(tmp_path: Path) -> None:
    """A launcher word that names a folder (a script `exec`s its own folder's name) is read
    as no script: None, never IsADirectoryError out of a record."""
    from drift.shell.commands import is_shell_script

    (tmp_path / "python3").mkdir()
    for files in (HOST, RootedFiles(str(tmp_path), "box")):
        folder = str(tmp_path / "python3") if files is HOST else "/python3"
        assert files.first_line(folder, 200) is None
        assert files.read_regular(folder, 1 << 20) is None
        assert is_shell_script(folder, files) is False
