"""The files a service's process maps: recorded as mapped, replaced under it, taken up at a restart.

Real processes load real shared libraries (copies of the system's libz, so the
test owns the files) with ctypes; the kernel, the dynamic linker and ldd are
the oracles of what is mapped; `drift record` and `drift since` are run as a
user runs them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift
from privileges import as_nobody
from shared_libs import SERVER, other_bytes, system_libz

from drift.collectors.libraries import library_facts, mapped_files
from drift.collectors.packages import normalise as normalised
from drift.facts import CollectContext, CollectionError, Fact


class Server:
    """A python process that maps the given libraries, found by drift through its pidfile."""

    def __init__(self, tmp: Path, libs: list[Path], python: str = sys.executable) -> None:
        self.tmp, self.libs, self.python = tmp, libs, python
        self.pidfile = tmp / "decode.pid"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, **kwargs: object) -> None:
        self.pidfile.unlink(missing_ok=True)
        argv = [self.python, "-c", SERVER, str(self.pidfile), *map(str, self.libs)]
        self.proc = subprocess.Popen(argv, **kwargs)  # type: ignore[call-overload]
        deadline = time.monotonic() + 20
        while not self.pidfile.exists():
            assert self.proc.poll() is None, "the server died"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def libdir(tmp_path: Path) -> Path:
    found = tmp_path / "opt" / "engine" / "lib"
    found.mkdir(parents=True)
    return found


@pytest.fixture
def server(tmp_path: Path, libdir: Path) -> Iterator[Server]:
    lib = libdir / "libdemo.so.2"
    shutil.copyfile(system_libz(), lib)
    box = Server(tmp_path, [lib])
    box.start()
    try:
        yield box
    finally:
        box.stop()


def write_config(tmp_path: Path, pidfile: Path, extra: str = "") -> Path:
    path = tmp_path / "drift.toml"
    path.write_text(f'host = "libs"\n[[services]]\nname = "decode"\npidfile = "{pidfile}"\n{extra}')
    return path


def record(tmp_path: Path) -> None:
    run_drift(["record", "--config", str(tmp_path / "drift.toml"), "--db", db(tmp_path)], tmp_path)


def db(tmp_path: Path) -> str:
    return str(tmp_path / "drift.db")


def since(tmp_path: Path, stable: str = "#1") -> dict:
    args = ["since", "--stable", stable, "--config", str(tmp_path / "drift.toml")]
    out = run_drift([*args, "--db", db(tmp_path), "--format", "json"], tmp_path)
    return json.loads(out.stdout)["data"]


def library_suspects(data: dict) -> list[dict]:
    return [s for s in data["suspects"] if s["category"] == "library"]


def shown(tmp_path: Path) -> dict[str, str]:
    """What `drift show --format json` says of the service now, by key."""
    args = ["show", "--config", str(tmp_path / "drift.toml"), "--db", db(tmp_path)]
    out = json.loads(run_drift([*args, "--format", "json"], tmp_path).stdout)["data"]
    [service] = [s for s in out["subjects"] if s["subject"] == "service:decode"]
    return {f["key"]: f["value"] for f in service["facts"]}


# --- the replaced library, as a user reads it --------------------------------------------


def test_a_library_replaced_under_the_process_is_pending_then_live_after_the_restart(
    tmp_path: Path, server: Server
) -> None:
    lib = server.libs[0]
    write_config(tmp_path, server.pidfile)
    record(tmp_path)
    old_pid = server.pid
    other_bytes(system_libz(), lib)
    record(tmp_path)

    [story] = library_suspects(since(tmp_path))
    assert story["status"] == "pending"
    assert story["title"] == (
        f"libdemo.so.2 replaced on disk; decode (pid {old_pid}) still maps the old one"
    )
    assert "not applied yet" in story["label"]

    server.restart()
    record(tmp_path)
    data = since(tmp_path)
    [story] = library_suspects(data)
    assert story["status"] == "live"
    assert story["title"].startswith("libdemo.so.2 changed: live in decode (pid ")
    assert f"(pid {server.pid}) since restart " in story["title"]
    keys = {c["key"] for c in story["changes"]}
    assert keys == {f"lib:{lib}"}  # the replaced-on-disk fact came and went inside the window
    # Against the record that saw it pending, the companion's end joins the story.
    [story] = library_suspects(since(tmp_path, "#2"))
    assert {c["key"] for c in story["changes"]} == {f"lib:{lib}", f"lib_disk:{lib}"}


def test_a_deleted_library_is_pending_and_says_deleted(tmp_path: Path, server: Server) -> None:
    write_config(tmp_path, server.pidfile)
    record(tmp_path)
    server.libs[0].unlink()
    record(tmp_path)
    [story] = library_suspects(since(tmp_path))
    assert story["status"] == "pending"
    assert story["title"] == (
        f"libdemo.so.2 deleted on disk; decode (pid {server.pid}) still maps the deleted file"
    )
    assert shown(tmp_path)[f"lib_disk:{server.libs[0]}"] == "deleted"


def test_libraries_of_one_folder_replaced_together_are_one_story(
    tmp_path: Path, libdir: Path
) -> None:
    libs = [libdir / f"libpart{i}.so.1" for i in range(5)]
    for lib in libs:
        shutil.copyfile(system_libz(), lib)
    box = Server(tmp_path, libs)
    box.start()
    try:
        write_config(tmp_path, box.pidfile)
        record(tmp_path)
        for lib in libs:
            other_bytes(system_libz(), lib)
        record(tmp_path)
        [story] = library_suspects(since(tmp_path))
    finally:
        box.stop()
    assert story["status"] == "pending"
    assert story["title"].startswith(f"libpart0.so.1, libpart1.so.1 and 3 more of {libdir} ")
    assert {c["key"] for c in story["changes"]} == {f"lib_disk:{lib}" for lib in libs}


def test_a_library_loaded_only_by_the_new_process_is_context_of_its_restart(
    tmp_path: Path, server: Server, libdir: Path
) -> None:
    write_config(tmp_path, server.pidfile)
    record(tmp_path)
    extra = libdir / "libplugin.so.1"
    shutil.copyfile(system_libz(), extra)
    server.libs.append(extra)
    server.restart()
    record(tmp_path)
    data = since(tmp_path)
    assert library_suspects(data) == []
    assert f"lib:{extra}" not in {c["key"] for s in data["suspects"] for c in s["changes"]}
    assert [e["text"] for e in data["timeline"] if e["kind"] == "restart"]
    assert [e for e in data["timeline"] if "decode" in e["text"] and "restart" in e["text"]]


def test_libraries_false_records_none(tmp_path: Path, server: Server) -> None:
    write_config(tmp_path, server.pidfile, "libraries = false\n")
    record(tmp_path)
    facts = shown(tmp_path)
    assert "pid" in facts
    assert not [k for k in facts if k.startswith(("lib:", "lib_disk:"))]


def test_turning_libraries_off_reads_as_no_longer_tracked_not_unloaded(
    tmp_path: Path, server: Server
) -> None:
    write_config(tmp_path, server.pidfile)
    record(tmp_path)
    write_config(tmp_path, server.pidfile, "libraries = false\n")
    record(tmp_path)
    data = since(tmp_path)
    assert library_suspects(data) == []
    assert data["suspects"] == []
    assert data["scope"]["untracked_facts"] >= 3  # the program, libc, the copied library
    assert any("libraries: -decode" in c["sections"] for c in data["scope"]["changes"])
    write_config(tmp_path, server.pidfile)
    record(tmp_path)
    data = since(tmp_path, "#2")
    assert data["suspects"] == []
    assert data["scope"]["tracked_facts"] >= 3


# --- cost: the stat cache -------------------------------------------------------------------


def test_an_unchanged_library_is_not_read_again(server: Server) -> None:
    lib = str(server.libs[0])
    time.sleep(0.06)  # a file changed within the racy window is read, never cached
    first = CollectContext()
    facts = {f.key: f.value for f in library_facts("service:decode", server.pid, first)}
    st = os.stat(lib)
    assert first.cache_updates[lib] == (
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
        facts[f"lib:{lib}"],
    )
    # A cache that vouches for the file with a digest no read would give: it is believed.
    cache = dict(first.cache_updates)
    cache[lib] = (*cache[lib][:4], "0" * 64)
    again = CollectContext(file_cache=cache)
    facts = {f.key: f.value for f in library_facts("service:decode", server.pid, again)}
    assert facts[f"lib:{lib}"] == "0" * 64
    assert again.cache_updates == {}
    # Touched: its stat moved, so it is read again.
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    time.sleep(0.06)  # out of the racy window: the new read may be cached
    third = CollectContext(file_cache=cache)
    facts = {f.key: f.value for f in library_facts("service:decode", server.pid, third)}
    assert facts[f"lib:{lib}"] == first_digest(lib)
    assert list(third.cache_updates) == [lib]


def first_digest(path: str) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_a_replaced_library_is_hashed_once_while_it_stays_pending(server: Server) -> None:
    lib = str(server.libs[0])
    other_bytes(system_libz(), server.libs[0])
    time.sleep(0.06)
    first = CollectContext()
    facts = {f.key: f.value for f in library_facts("service:decode", server.pid, first)}
    assert facts[f"lib:{lib}"] == first_digest(str(system_libz()))
    assert facts[f"lib_disk:{lib}"] == first_digest(lib)
    again = CollectContext(file_cache=dict(first.cache_updates))
    assert {f.key: f.value for f in library_facts("service:decode", server.pid, again)} == facts
    assert again.cache_updates == {}


# --- what is mapped: the kernel, the dynamic linker and ldd as oracles ----------------------


def lib_paths(pid: int) -> set[str]:
    out = library_facts("service:x", pid, CollectContext())
    assert not [e for e in out if isinstance(e, CollectionError)]
    return {f.key.removeprefix("lib:") for f in out if isinstance(f, Fact)}


LOADED = """
import ctypes, ctypes.util, json, sqlite3, ssl, sys
from ctypes import CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_size_t, c_void_p

class Info(Structure):
    _fields_ = [("addr", c_void_p), ("name", c_char_p)]

names = []
@CFUNCTYPE(c_int, POINTER(Info), c_size_t, c_void_p)
def each(info, size, data):
    names.append((info.contents.name or b"").decode())
    return 0

ctypes.CDLL(None).dl_iterate_phdr(each, None)
print(json.dumps(names), flush=True)
sys.stdin.read()
"""


def test_every_object_the_dynamic_linker_loaded_is_recorded_and_nothing_else() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", LOADED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        try:
            names = json.loads(proc.stdout.readline())
            recorded = lib_paths(proc.pid)
        finally:
            proc.kill()
    # The linker names the program "" and the vDSO by a name with no file: neither is a file.
    loaded = {os.path.realpath(n) for n in names if n.startswith("/")}
    loaded.add(os.path.realpath(sys.executable))
    assert recorded == loaded


@pytest.mark.parametrize("program", [["sleep", "60"], ["bash", "-c", "read x"]])
def test_a_plain_program_maps_itself_and_what_ldd_lists(program: list[str]) -> None:
    exe = os.path.realpath(shutil.which(program[0]) or program[0])
    ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, check=True).stdout
    linked = {
        os.path.realpath(word)
        for line in ldd.splitlines()
        for word in line.split()
        if word.startswith("/")
    }
    with subprocess.Popen(program, stdin=subprocess.PIPE) as proc:
        try:
            time.sleep(0.3)
            recorded = lib_paths(proc.pid)
        finally:
            proc.kill()
    assert recorded == linked | {exe}
    assert any(os.path.basename(p).startswith("libc.so") for p in recorded)


def test_the_parse_keeps_only_files_mapped_executable() -> None:
    maps = (
        b"00400000-00401000 r-xp 00000000 fd:01 11 /usr/bin/app\n"
        b"00401000-00402000 r--p 00001000 fd:01 11 /usr/bin/app\n"
        b"00500000-00600000 r--p 00000000 fd:01 12 /models/weights.safetensors\n"
        b"00600000-00601000 r-xp 00000000 00:05 13 /dev/nvidia0\n"
        b"00601000-00602000 r-xs 00000000 00:01 14 /memfd:jit (deleted)\n"
        b"00602000-00603000 r-xp 00000000 00:00 0 \n"
        b"00603000-00604000 r-xp 00000000 00:00 0 [vdso]\n"
        b"00604000-00605000 r-xp 00000000 fd:01 15 /opt/my lib/libx.so (deleted)\n"
    )
    found = {m.path: (m.dev, m.inode, m.deleted) for m in mapped_files(maps)}
    assert found == {
        "/usr/bin/app": ((0xFD, 1), 11, False),
        "/opt/my lib/libx.so": ((0xFD, 1), 15, True),
    }


# --- which package installed a library: a real venv, a real wheel ---------------------------


def build_wheel(dest: Path, lib: Path) -> Path:
    """A wheel of the distribution Demo_Native.Ext 1.0 holding a shared object."""
    import base64
    import hashlib

    files = {
        "demo_native/__init__.py": b"",
        "demo_native/_core.cpython-311-x86_64-linux-gnu.so": lib.read_bytes(),
        "demo_native_ext-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\n"
        b"Name: Demo_Native.Ext\nVersion: 1.0\n",
        "demo_native_ext-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
        b"Root-Is-Purelib: false\nTag: py3-none-any\n",
    }
    rows = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{name},sha256={digest},{len(data)}")
    rows.append("demo_native_ext-1.0.dist-info/RECORD,,")
    wheel = dest / "demo_native_ext-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("demo_native_ext-1.0.dist-info/RECORD", "\n".join(rows) + "\n")
    return wheel


def test_a_library_a_wheel_installed_names_its_package(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    wheel = build_wheel(tmp_path, system_libz())
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    subprocess.run(
        [*pip, "install", "-q", "--no-index", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    python = str(venv / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    so = Path(site) / "demo_native" / "_core.cpython-311-x86_64-linux-gnu.so"
    box = Server(tmp_path, [so], python=python)
    box.start()
    try:
        out = library_facts("service:decode", box.pid, CollectContext())
    finally:
        box.stop()
    packages = {
        f.key: f.provenance.get("package")
        for f in out
        if isinstance(f, Fact) and f.key.startswith("lib:")
    }
    assert packages[f"lib:{os.path.realpath(so)}"] == "demo-native-ext"
    assert [p for k, p in packages.items() if p is not None] == ["demo-native-ext"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [("Demo_Native.Ext", "demo-native-ext"), ("torch", "torch"), ("a--_.b", "a-b")],
)
def test_names_are_normalised_as_pep_503_says(name: str, expected: str) -> None:
    assert normalised(name) == expected


# --- without root: a blind spot, never a guess ----------------------------------------------


def test_without_root_a_replaced_library_is_a_blind_spot() -> None:
    """The mapped bytes are unknown; the path is known to hold another file, as the kernel
    marks the mapped name deleted (renamed over), even while a hard link keeps the file."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or python is None:
        pytest.skip("needs root and a python3 user nobody may run")
    shared = Path(tempfile.mkdtemp(prefix="drift-libs-"))
    try:
        shared.chmod(0o777)  # the server, as nobody, writes its pidfile here
        lib = shared / "libdemo.so.2"
        shutil.copyfile(system_libz(), lib)
        lib.chmod(0o644)
        box = Server(shared, [lib], python=python)
        nobody = 65534
        box.start(user=nobody, group=nobody, extra_groups=[], cwd=shared)
        try:
            os.link(lib, shared / "kept.so")
            other_bytes(system_libz(), lib)
            lib.chmod(0o644)
            pid = box.pid

            def read() -> dict[str, list[str]]:
                out = library_facts("service:decode", pid, CollectContext())
                return {
                    "facts": [f.key for f in out if isinstance(f, Fact)],
                    "errors": [
                        f"{e.key}: {e.message}" for e in out if isinstance(e, CollectionError)
                    ],
                }

            import queue  # noqa: F401  (nobody may not read the standard library to import it)

            seen = as_nobody(read)
        finally:
            box.stop()
    finally:
        shutil.rmtree(shared)
    assert f"lib:{lib}" not in seen["facts"]
    [mine] = [e for e in seen["errors"] if e.startswith(f"lib:{lib}: ")]
    assert f"{lib} on disk is not the file pid {pid} has mapped, and only root can read" in mine
    assert f"lib_disk:{lib}" in seen["facts"]
    assert any(k.startswith("lib:") and "libc.so" in k for k in seen["facts"])


def test_packages_and_libraries_first_read_are_now_tracked_not_a_change(
    tmp_path: Path, server: Server
) -> None:
    """A history from before drift read them: the first record that does invents no suspect."""
    write_config(tmp_path, server.pidfile, "libraries = false\npackages = false\n")
    record(tmp_path)
    write_config(tmp_path, server.pidfile)
    record(tmp_path)
    assert any(k.startswith("lib:") for k in shown(tmp_path))
    data = since(tmp_path)
    assert data["suspects"] == []
    assert data["scope"]["tracked_facts"] >= 3
    sections = [s for c in data["scope"]["changes"] for s in c["sections"]]
    assert "libraries: +decode" in sections
    assert "packages: +decode" in sections


# --- names the kernel escapes or marks -----------------------------------------------------


def test_a_name_with_a_newline_or_ending_in_deleted_is_its_file_until_unlinked(
    tmp_path: Path, libdir: Path
) -> None:
    """The kernel writes a newline as \\012 and marks an unlinked file " (deleted)"; a file
    may be named either way. The inode says which file it is, and whether it is gone."""
    newline = libdir / "libnew\nline.so"
    marked = libdir / "libold.so (deleted)"
    for lib in (newline, marked):
        shutil.copyfile(system_libz(), lib)
    box = Server(tmp_path, [newline, marked])
    box.start()
    try:
        maps = Path(f"/proc/{box.pid}/maps").read_text()
        assert "libnew\\012line.so" in maps and "libold.so (deleted)\n" in maps
        write_config(tmp_path, box.pidfile)
        record(tmp_path)
        record(tmp_path)
        facts = shown(tmp_path)
        libs = {k for k in facts if k.startswith(("lib:", "lib_disk:")) and str(libdir) in k}
        # Both are mapped and on disk as they are: no lib_disk fact, no blind spot.
        assert len(libs) == 2 and all(k.startswith("lib:") for k in libs), libs
        assert f"lib:{marked}" in libs
        assert library_suspects(since(tmp_path)) == []
        # Now the one named "(deleted)" really is: the kernel writes "... (deleted) (deleted)".
        marked.unlink()
        record(tmp_path)
        assert shown(tmp_path)[f"lib_disk:{marked}"] == "deleted"
    finally:
        box.stop()
