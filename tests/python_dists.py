"""Real Python distributions: wheels per the wheel spec, an in-tree build backend, venvs, pip.

Shared by the package tests and benchmarks/bench_inference.py. pip runs
offline (``--no-index``): every wheel it installs is built here.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path

PYTHON = os.path.realpath(os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}"))


def build_wheel(
    folder: Path, name: str, version: str, extra: dict[str, str | bytes] | None = None
) -> Path:
    """A pure-Python wheel of one module, written per the wheel spec (PEP 427)."""
    stem = name.replace("-", "_")
    dist_info = f"{stem}-{version}.dist-info"
    files: dict[str, str | bytes] = {
        f"{stem}.py": f"VERSION = {version!r}\n",
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        **(extra or {}),
    }
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
        z.writestr(f"{dist_info}/RECORD", record_text(files, f"{dist_info}/RECORD"))
    return wheel


def record_text(files: Mapping[str, str | bytes], record: str) -> str:
    """A RECORD listing `files` (path, sha256 as the wheel spec writes it, size), then itself."""
    lines = []
    for path, text in files.items():
        data = text if isinstance(text, bytes) else text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        lines.append(f"{path},sha256={digest.decode()},{len(data)}")
    return "\n".join([*lines, f"{record},,"]) + "\n"


# An in-tree PEP 517/660 build backend: pip -e calls build_editable, which gives a wheel
# whose .pth puts the checkout's folder on the path (what setuptools does), and pip writes
# direct_url.json with dir_info.editable, as for any editable install.
BACKEND = """
import os, zipfile

NAME, VERSION = "sglang", "0.4.0"
DIST = f"{NAME}-{VERSION}.dist-info"


def _wheel(directory, files):
    path = os.path.join(directory, f"{NAME}-{VERSION}-py3-none-any.whl")
    files = {
        **files,
        f"{DIST}/METADATA": f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n\\n",
        f"{DIST}/WHEEL": "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr(f"{DIST}/RECORD", "".join(f"{n},,\\n" for n in [*files, f"{DIST}/RECORD"]))
    return os.path.basename(path)


def build_wheel(directory, config_settings=None, metadata_directory=None):
    return _wheel(directory, {})


def build_editable(directory, config_settings=None, metadata_directory=None):
    return _wheel(directory, {"__editable__.sglang.pth": os.path.abspath(".") + "\\n"})
"""


def make_venv(path: Path, *args: str) -> Path:
    subprocess.run([PYTHON, "-m", "venv", *args, str(path)], check=True, timeout=120)
    return path / "bin" / "python"


def pip(python: Path, *args: str) -> None:
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--disable-pip-version-check",
            *args,
        ],
        check=True,
        timeout=120,
        capture_output=True,
    )


def editable_checkout(checkout: Path) -> tuple[Path, list[str]]:
    """A git repository at `checkout` whose ``python/`` is project sglang, built by BACKEND.

    Returns the project's folder (what ``pip install -e`` takes) and git's
    command line for the repository, for the commits a caller makes next.
    """
    project = checkout / "python"
    (project / "sglang").mkdir(parents=True)
    (project / "sglang" / "__init__.py").write_text("")
    (project / "backend.py").write_text(BACKEND)
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "one"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return project, git
