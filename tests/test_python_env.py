"""The distributions drift finds for a Python process equal what its own importlib.metadata finds.

The oracle is the real interpreter: each process writes, as it starts, the
distributions `importlib.metadata` gives in its environment (first on the
path wins, names PEP 503 normalised); drift's collector, reading the same
process from /proc without running anything of it, must find the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from drift.collectors.services import collect_service
from drift.config import ServiceSpec
from drift.facts import CollectContext, CollectionError, Fact

PYTHON = os.path.realpath(os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}"))
VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"

ORACLE = """
import json, re, sys, time
from importlib.metadata import distributions
found = {}
for d in distributions():
    name = d.metadata["Name"]
    if name:
        found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), d.version)
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump(found, f)
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)
"""


def dist(folder: Path, name: str, version: str, *, egg: bool = False) -> None:
    """A distribution's metadata as an installer leaves it (dist-info, or an egg-info file)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nlong text\nName: no\n"
    if egg:
        (folder / f"{name.replace('-', '_')}-{version}.egg-info").write_text(text)
        return
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(text)


def venv(path: Path, *args: str) -> Path:
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", *args, str(path)], check=True)
    return path / "bin" / "python"


def site(prefix: Path) -> Path:
    return prefix / "lib" / f"python{VERSION}" / "site-packages"


Setup = Callable[[Path], tuple[list[str], dict[str, str]]]


def plain_venv(tmp: Path) -> tuple[list[str], dict[str, str]]:
    python = venv(tmp / "v")
    dist(site(tmp / "v"), "flashinfer-python", "0.2.6")
    return [str(python)], {}


def system_site_with_user_site(tmp: Path) -> tuple[list[str], dict[str, str]]:
    python = venv(tmp / "v", "--system-site-packages")
    dist(site(tmp / "v"), "Torch", "2.5.1")
    dist(site(tmp / "home" / ".local"), "torch", "2.4.0")  # the user site comes first
    dist(site(tmp / "home" / ".local"), "user-only", "1.0")
    return [str(python)], {}


def user_site_off_with_s(tmp: Path) -> tuple[list[str], dict[str, str]]:
    argv, env = system_site_with_user_site(tmp)
    return [*argv, "-s"], env


def user_site_off_by_env(tmp: Path) -> tuple[list[str], dict[str, str]]:
    argv, _env = system_site_with_user_site(tmp)
    return argv, {"PYTHONNOUSERSITE": "1"}


def pythonpath_shadows(tmp: Path) -> tuple[list[str], dict[str, str]]:
    python = venv(tmp / "v")
    dist(site(tmp / "v"), "vllm", "0.6.0")
    dist(tmp / "extra", "vllm", "0.7.0-dev")
    dist(tmp / "extra", "zed.pkg", "3")
    return [str(python)], {"PYTHONPATH": f"{tmp / 'missing'}:{tmp / 'extra'}"}


def ignored_environment(tmp: Path) -> tuple[list[str], dict[str, str]]:
    argv, env = pythonpath_shadows(tmp)
    return [argv[0], "-E"], env


def pth_file(tmp: Path) -> tuple[list[str], dict[str, str]]:
    python = venv(tmp / "v")
    (site(tmp / "v") / "extra.pth").write_text(f"# a comment\n\n{tmp / 'src'}\n{tmp / 'gone'}\n")
    dist(tmp / "src", "sglang", "0.4.0")
    dist(tmp / "src", "old-style", "1.2", egg=True)
    return [str(python)], {}


def through_path_by_name(tmp: Path) -> tuple[list[str], dict[str, str]]:
    venv(tmp / "v")
    dist(site(tmp / "v"), "a-b", "1")
    return ["python"], {"PATH": f"{tmp / 'v' / 'bin'}:/usr/bin:/bin"}


def debian_system_python(tmp: Path) -> tuple[list[str], dict[str, str]]:
    if not os.path.exists("/usr/bin/python3") or not os.path.isdir("/usr/lib/python3"):
        pytest.skip("no Debian python3 here")
    return ["/usr/bin/python3"], {}


SETUPS: list[Setup] = [
    plain_venv,
    system_site_with_user_site,
    user_site_off_with_s,
    user_site_off_by_env,
    pythonpath_shadows,
    ignored_environment,
    pth_file,
    through_path_by_name,
    debian_system_python,
]


@pytest.mark.parametrize("setup", SETUPS, ids=[s.__name__ for s in SETUPS])
def test_drift_finds_what_the_interpreter_finds(tmp_path: Path, setup: Setup) -> None:
    argv, extra = setup(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), **extra}
    script = tmp_path / "app" / "serve.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(ORACLE)
    answer = tmp_path / "found.json"
    proc = subprocess.Popen([*argv, str(script), str(answer)], cwd=tmp_path, env=env)
    try:
        deadline = time.monotonic() + 30
        while not answer.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        pidfile = tmp_path / "p.pid"
        pidfile.write_text(f"{proc.pid}\n")
        items = list(collect_service(ServiceSpec("s", pidfile=str(pidfile)), CollectContext()))
        errors = [i for i in items if isinstance(i, CollectionError)]
        assert errors == []
        found = {
            i.key.removeprefix("package:"): i.value
            for i in items
            if isinstance(i, Fact) and i.key.startswith("package:")
        }
        assert found == json.loads(answer.read_text())
    finally:
        proc.kill()
        proc.wait()


def test_packages_false_records_no_python_facts(tmp_path: Path) -> None:
    proc = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(60)"])
    try:
        pidfile = tmp_path / "p.pid"
        pidfile.write_text(f"{proc.pid}\n")
        time.sleep(0.2)
        spec = ServiceSpec("s", pidfile=str(pidfile))
        on = list(collect_service(spec, CollectContext()))
        off = list(collect_service(replace(spec, packages=False), CollectContext()))
        assert any(isinstance(i, Fact) and i.key == "python" for i in on)
        assert not any(isinstance(i, Fact) and i.key.startswith(("python", "package")) for i in off)
    finally:
        proc.kill()
        proc.wait()
