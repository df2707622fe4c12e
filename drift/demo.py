"""A sandbox that replays the motivating incident with real processes.

Three serve scripts (prefill, decode, router) run as real processes that
exec a long-sleeping Python with realistic flags; a small git checkout holds
attention kernel files; a drift.toml points at all of it. The same sandbox
backs `drift demo` and the end-to-end tests.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drift.analysis.investigation import Investigation

SERVICES = ("prefill", "decode", "router")
CULPRIT = "export SGLANG_SM120_MMA_TARGET_CTAS=512"
# A token-shaped value, so the demo shows that secrets never reach the report.
DEMO_TOKEN = "hf_" + "DemoTokenNotRealButShapedLikeOne42"

_SLEEPER = "import time\nwhile True: time.sleep(3600)"

_FLAGS = {
    "prefill": "--disaggregation-mode prefill --tp-size 4 --port 30000 --chunked-prefill-size 8192",
    "decode": "--disaggregation-mode decode --tp-size 4 --port 30001 --cuda-graph-max-bs 96",
    "router": "--pd-disaggregation --prefill http://127.0.0.1:30000 --decode http://127.0.0.1:30001",
}

_KERNELS = {
    "python/sglang/srt/layers/attention/flashmla_backend.py": (
        "def split_k_waves(ctas: int) -> int:\n    return max(1, ctas // 132)\n"
    ),
    "python/sglang/srt/layers/attention/triton_ops/decode_attention.py": (
        "BLOCK = 64\n\ndef decode_attention_fwd(q, k, v):\n    return q\n"
    ),
    "python/sglang/srt/managers/scheduler.py": "MAX_RUNNING_REQUESTS = 256\n",
}


def serve_script(name: str, pidfile: Path, python: str) -> str:
    """The text of one serve script: exports, a pidfile, and exec of the server."""
    exports = [
        "export CUDA_VISIBLE_DEVICES=" + ("0,1,2,3" if name == "prefill" else "4,5,6,7"),
        "export SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0",
        'export HF_HOME="/data/hf cache"',
        f"export HF_TOKEN={DEMO_TOKEN}",
    ]
    if name == "router":
        exports = ["export RUST_LOG=info"]
    return "\n".join(
        [
            "#!/bin/bash",
            f"# sglang {name} server (demo sandbox)",
            "set -e",
            *exports,
            f"echo $$ > {shlex.quote(str(pidfile))}",
            f"exec {shlex.quote(python)} -c {shlex.quote(_SLEEPER)} "
            f"--model-path deepseek-ai/DeepSeek-V4-Flash {_FLAGS[name]}",
            "",
        ]
    )


@dataclass
class IncidentSandbox:
    """The incident's deployment in a folder: scripts, processes, a git checkout, drift.toml."""

    root: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def config_path(self) -> Path:
        return self.root / "drift.toml"

    @property
    def db_path(self) -> Path:
        return self.root / "state" / "drift.db"

    @property
    def repo(self) -> Path:
        return self.root / "sglang"

    def script(self, name: str) -> Path:
        return self.root / "serve" / f"{name}.sh"

    def pidfile(self, name: str) -> Path:
        return self.root / "run" / f"{name}.pid"

    @property
    def kernel(self) -> Path:
        return self.repo / "python/sglang/srt/layers/attention/flashmla_backend.py"

    def build(self) -> None:
        """Write the scripts, the git checkout and drift.toml (no process started yet)."""
        for folder in ("serve", "run", "state"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        for name in SERVICES:
            self.script(name).write_text(serve_script(name, self.pidfile(name), sys.executable))
            self.script(name).chmod(0o755)
        for rel, text in _KERNELS.items():
            path = self.repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        git = [
            "git",
            "-C",
            str(self.repo),
            "-c",
            "user.name=demo",
            "-c",
            "user.email=demo@localhost",
            "-c",
            "init.defaultBranch=main",
        ]
        for args in (
            ["init", "-q"],
            ["add", "-A"],
            ["commit", "-q", "-m", "sglang at the stable tag"],
        ):
            subprocess.run([*git, *args], check=True, capture_output=True)
        services = "\n".join(
            f'[[services]]\nname = "{n}"\npidfile = "run/{n}.pid"\nscript = "serve/{n}.sh"\n'
            for n in SERVICES
        )
        self.config_path.write_text(
            f'host = "gpu-node-7"\n\n{services}\n'
            '[[files]]\nname = "attention-kernels"\n'
            'paths = ["sglang/python/sglang/srt/layers/attention/**/*.py"]\n\n'
            '[[repos]]\npath = "sglang"\n\n'
            '[[commands]]\nname = "gpu-driver"\nrun = "echo 575.57.08"\n\n'
            '[[commands]]\nname = "loadavg"\nrun = "cat /proc/loadavg"\n'
        )

    def start(self, name: str) -> int:
        """Start one service from its serve script; returns its pid once the pidfile is written."""
        self.pidfile(name).unlink(missing_ok=True)
        proc = subprocess.Popen(
            ["bash", str(self.script(name))],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self._service_env(),
        )
        self.procs[name] = proc
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            # bash writes the pidfile, then execs the server in the same process
            if self.pid(name) == proc.pid and _cmdline_has(proc.pid, "--model-path"):
                return proc.pid
            time.sleep(0.01)
        raise RuntimeError(f"{name} did not start")

    def stop(self, name: str) -> None:
        """Stop one service (its whole process group) and wait for it to go."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=5)
        except ProcessLookupError:
            proc.wait()
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def start_all(self) -> None:
        for name in SERVICES:
            self.start(name)

    def stop_all(self) -> None:
        for name in SERVICES:
            self.stop(name)

    def restart_all(self) -> None:
        """The co-restart of the incident: stop all three, start all three."""
        self.stop_all()
        self.start_all()

    def pid(self, name: str) -> int | None:
        try:
            return int(self.pidfile(name).read_text().strip())
        except (OSError, ValueError):
            return None

    def add_culprit(self) -> int:
        """Add the export line to decode.sh just before its exec line; returns its line number."""
        lines = self.script("decode").read_text().splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("echo $$"))
        lines.insert(at, CULPRIT)
        self.script("decode").write_text("\n".join(lines) + "\n")
        return at + 1

    def touch_kernel(self) -> None:
        """Touch a kernel file without changing a byte (new mtime, same content)."""
        later = time.time() + 5
        os.utime(self.kernel, (later, later))

    def _service_env(self) -> dict[str, str]:
        keep = ("PATH", "LANG", "HOME", "USER", "TZ")
        return {k: v for k, v in os.environ.items() if k in keep}


def _cmdline_has(pid: int, word: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return word.encode() in fh.read()
    except OSError:
        return False


def run_demo(root: Path, say: Callable[[str], None], *, keep: bool = False) -> Investigation:
    """Replay the incident in `root`; return what `drift since` finds in it.

    The morning is three records and a `drift mark stable`; then the culprit
    line lands in decode.sh, a kernel file is touched without a byte
    changing, the three services are co-restarted, and one more record is
    taken. `drift since` with no --stable then starts from the stable mark.
    Processes are stopped on the way out (Ctrl-C included) unless `keep`.
    """
    from drift.analysis.investigate import InvestigateOptions, investigate
    from drift.config import load_config
    from drift.record import record
    from drift.store.query import History
    from drift.store.urls import resolve_db_url
    from drift.store.writer import add_mark

    box = IncidentSandbox(root)
    box.build()
    config = load_config(box.config_path)
    db = resolve_db_url(str(box.db_path))
    try:
        box.start_all()
        say(f"sandbox {root}: prefill, decode and router running from serve/*.sh")
        for _ in range(3):
            snap = record(config, db)
            say(f"  morning: drift record -> snapshot #{snap.snapshot_id}, {snap.facts:,} facts")
        add_mark(db, config.host, "stable", snap.taken_us, "decode answers; p99 fine")
        say("  morning: drift mark stable --note 'decode answers; p99 fine'")
        line = box.add_culprit()
        say(f"later: line {line} is added to serve/decode.sh: {CULPRIT}")
        box.touch_kernel()
        say("       a kernel file is touched (same bytes); all three services are co-restarted")
        box.restart_all()
        snap = record(config, db)
        say(f"       drift record -> snapshot #{snap.snapshot_id}, {snap.changed:,} facts changed")
        say("\n$ drift since\n")
        with History.open(db, config.host) as history:
            return investigate(history, None, None, InvestigateOptions())
    finally:
        if not keep:
            box.stop_all()
