"""The benchmark host, for real: three services from serve scripts, 2,001 files, a repo, commands.

bench_history.py replays a week, a month or a year of this host's records
on a fake clock; the facts it writes come from drift's real collectors run
on this sandbox (history_gen.py). Every change the replay makes is made here
for real first: a script edited and its service restarted, a file
rewritten, a commit that moves the repository's HEAD. The `loadavg` command
prints the 26-byte line of state/loadavg, which the replay rewrites every
minute.
"""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from drift.demo import SERVICES, IncidentSandbox

HOST = "hist-node"
# A service inherits 5 variables from the demo sandbox that starts it (PATH, LANG, HOME,
# USER, TZ): with the script's 57 exports, 62 per process.
SLEEPER = "import time\nwhile True: time.sleep(3600)"


@dataclass(frozen=True)
class Shape:
    """How big the host is, and how often it changes (per year of minutes)."""

    exports: int = 57
    files: int = 2001
    changes_per_year: int = 1493
    marks_per_year: int = 67
    seed: int = 1


def loadavg_line(minute: int) -> str:
    """The `loadavg` command's output at a minute: 26 bytes shaped like /proc/loadavg."""
    rng = random.Random(minute)
    a, b, c = (rng.uniform(0.1, 9.9) for _ in range(3))
    running, threads, last_pid = rng.randint(1, 9), rng.randint(10, 99), rng.randint(10000, 99999)
    return f"{a:.2f} {b:.2f} {c:.2f} {running}/3{threads} {last_pid}"


def _export_name(service: str, i: int) -> str:
    return f"SGLANG_{service.upper()}_OPT_{i:02d}"


@dataclass
class HostSandbox(IncidentSandbox):
    """The host in a folder: serve/, data/ (the files), repo/, state/, drift.toml.

    The demo's sandbox starts and stops the services (the same three names,
    from serve/NAME.sh, with the same inherited environment); this one
    writes a bigger host.
    """

    shape: Shape = field(default_factory=Shape)

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def loadavg(self) -> Path:
        return self.root / "state" / "loadavg"

    def data_file(self, i: int) -> Path:
        return self.root / "data" / f"d{i % 20:02d}" / f"s{i % 7}" / f"file{i:05d}.txt"

    # ------------------------------------------------------------ building

    def build(self) -> None:
        """Write everything (no process started yet); the same shape gives the same bytes."""
        for folder in ("serve", "run", "state", "data"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        for name in SERVICES:
            self.write_script(
                name, {_export_name(name, i): str(i) for i in range(self.shape.exports)}
            )
        for i in range(self.shape.files):
            path = self.data_file(i)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"file {i}\n" + "x" * (i % 300) + "\n")
        self.loadavg.write_text(loadavg_line(0) + "\n")
        self.repo.mkdir(exist_ok=True)
        (self.repo / "model.py").write_text("BLOCK = 64\n")
        self.git("init", "-q")
        self.commit("initial", at_us=None)
        self.config_path.write_text(self.config_text())

    def config_text(self) -> str:
        services = "\n".join(
            f'[[services]]\nname = "{n}"\npidfile = "run/{n}.pid"\nscript = "serve/{n}.sh"\n'
            for n in SERVICES
        )
        return (
            f'host = "{HOST}"\nsecret_key_file = "{self.root}/secret.key"\n\n{services}\n'
            '[[files]]\nname = "data"\npaths = ["data/**/*.txt"]\n\n'
            '[[repos]]\npath = "repo"\n\n'
            '[[commands]]\nname = "gpu-driver"\nrun = "echo 575.57.08"\n\n'
            '[[commands]]\nname = "kernel"\nrun = "echo 6.8.0-45-generic"\n\n'
            f'[[commands]]\nname = "loadavg"\nrun = "cat {self.loadavg}"\n'
        )

    def write_script(self, name: str, exports: dict[str, str]) -> None:
        lines = ["#!/bin/bash", f"# {name} server (history benchmark)", "set -e"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in exports.items()]
        lines += [
            f"echo $$ > {shlex.quote(str(self.pidfile(name)))}",
            f"exec {shlex.quote(sys.executable)} -c {shlex.quote(SLEEPER)} --model-path m --port "
            f"{30000 + SERVICES.index(name)}",
            "",
        ]
        self.script(name).write_text("\n".join(lines))
        self.script(name).chmod(0o755)

    def exports(self, name: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in self.script(name).read_text().splitlines():
            if line.startswith("export "):
                key, _, value = line.removeprefix("export ").partition("=")
                out[key] = shlex.split(value)[0] if value else ""
        return out

    def git(self, *args: str, at_us: int | None = None) -> None:
        env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null"}
        if at_us is not None:  # the reflog's time, which the repo collector reads as moved_at
            env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"] = f"@{at_us // 1_000_000} +0000"
        subprocess.run(
            [
                "git",
                "-C",
                str(self.repo),
                "-c",
                "user.name=bench",
                "-c",
                "user.email=b@localhost",
                "-c",
                "init.defaultBranch=main",
                *args,
            ],
            check=True,
            capture_output=True,
            env=env,
        )

    def commit(self, message: str, at_us: int | None) -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message, at_us=at_us)
