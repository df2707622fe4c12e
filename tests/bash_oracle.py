"""bash as the oracle: run a launch script for real and read what its server received.

`run_script` runs a serve script under bash with stub programs first on ``PATH``. The server
launchers (``python3 -m sglang...``, ``vllm``, ``torchrun``...) are one small C program that
records its pid and pauses: that "keeper" is the server, so its ``/proc/PID/cmdline`` and
``/proc/PID/environ`` are exactly the argv and environment bash gave it. Helpers keep working:
``python3 -c ...``, ``python3 prepare.py`` and ``python3 -m pip`` go to the real interpreter
(with fake ``torch``/``sglang``/``vllm`` modules importable), ``numactl`` drops its options and
execs the rest, and side-effect tools (``nvidia-smi``, ``docker``, ``curl``, ``pip``, ``sudo``,
``wget``) exit 0. ``env``, ``nohup``, ``setsid``, ``taskset`` and ``hostname`` are the real ones.

Before that, the same script runs once more with ``BASH_ENV`` switching on xtrace and a DEBUG
trap before its first line, to learn which line gave each exported variable its value and which
command started the server (see `Launch.assigned`). The recipe is /work/shared/bash-oracle.md.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_LAUNCHERS: tuple[str, ...] = (
    "python",
    "python3",
    "sglang",
    "vllm",
    "torchrun",
    "trtllm-serve",
    "text-generation-launcher",
)
"""Programs whose stub may become the server (python only for a server module or script)."""

SIDE_EFFECT_TOOLS: tuple[str, ...] = (
    "nvidia-smi",
    "docker",
    "curl",
    "wget",
    "pip",
    "pip3",
    "sudo",
)
"""Programs whose stub does nothing and exits 0 (``nvidia-smi`` prints eight H100s)."""

BASH_OWN: frozenset[str] = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})
"""Variables bash itself puts in every child's environment; in `Launch.exported`, never in
`Launch.assigned` unless a line assigns them by name."""

REAL_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


class LaunchError(RuntimeError):
    """The script did not start a server (it failed, ended, or took too long)."""


@dataclass
class Launch:
    """A script's server, still running, and what bash says about it.

    `assigned` names, for each variable of `exported` that a line of the script (or of a file it
    sources or runs) gave its value, the last such line before the launch: a re-assignment of
    the same value counts, a bare ``export NAME`` does not. The line is the one where the
    assigning word starts (``export A=1 \\`` / ``B=2``: A on the first line, B on the second);
    for ``: "${X:=v}"``, ``read``, ``export $(grep ... | xargs)`` it is the command's first line.
    A value bash took from a ``bash -c "..."`` string is placed on the string's own line when
    the string is written in the file, else on the ``bash -c`` line; so is a value from an
    ``eval`` of a string not written there (``eval "$CMD"``, ``eval "$(helper)"``: bash numbers
    its lines on from the eval's, the oracle puts them all on the eval's). ``K=V cmd`` and
    ``env K=V cmd`` on the launch put K on the launch line. Variables that only came from the
    starting environment, and `BASH_OWN`, are left out.

    `launch` is the first line of the command that started the server (``exec``, a foreground
    or ``&`` command, a wrapper such as ``numactl`` or ``nohup``, the ``bash -c`` string's line).
    """

    pid: int  # the keeper: the "server", in the script's own session
    argv: list[str]  # /proc/PID/cmdline of the keeper: exactly what the script passed
    env: dict[str, str]  # /proc/PID/environ of the keeper
    exported: dict[str, str]  # env minus the starting environment (added or changed)
    assigned: dict[str, tuple[str, int]]  # name -> (absolute file, line) of its last assignment
    launch: tuple[str, int]  # (absolute file, line) of the command that started the server
    sandbox: Path
    sourced: list[str] = field(default_factory=list)  # other files whose lines ran, in order
    log: Path | None = None  # the script's stdout and stderr
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)
    _keepers: list[tuple[int, int]] = field(default_factory=list, repr=False, compare=False)


# ---------------------------------------------------------------------------------------------
# The stub program: keeper, python dispatcher, numactl, no-op tools

_STUB_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char self_dir[PATH_MAX];

static const char *base(const char *p) { const char *s = strrchr(p, '/'); return s ? s + 1 : p; }

static int is_server_word(const char *w) {
    static const char *keys[] = {"sglang", "vllm", "server", "serve", "launch",
                                 "torch.distributed.run", "tensorrt_llm", 0};
    for (int i = 0; keys[i]; i++) if (strstr(w, keys[i])) return 1;
    return 0;
}

static int is_server_python(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-c") || !strcmp(a, "-") || !strcmp(a, "--")) return 0;
        if (!strcmp(a, "-m")) return i + 1 < argc && is_server_word(argv[i + 1])
                                     && strncmp(argv[i + 1], "pip", 3) != 0;
        if (!strncmp(a, "-m", 2)) return is_server_word(a + 2);
        if (!strcmp(a, "-W") || !strcmp(a, "-X")) { i++; continue; }
        if (a[0] == '-') { if (a[1] != '-' && strchr(a, 'c')) return 0; continue; }
        return is_server_word(base(a));
    }
    return 0;
}

static void keep(void) {
    char dir[PATH_MAX], tmp[PATH_MAX + 32], done[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", self_dir);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;  /* the sandbox: the folder above stubs/ */
    snprintf(tmp, sizeof tmp, "%s/launched/.%d", dir, (int)getpid());
    snprintf(done, sizeof done, "%s/launched/%d", dir, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { dprintf(fd, "%d\n", (int)getpid()); close(fd); rename(tmp, done); }
    for (;;) pause();
}

static int numactl(int argc, char **argv) {
    static const char *with_arg[] = {"-N", "-m", "-C", "-p", "-i", "-P", "-f", "-L", "-M", "-o",
        "-S", "-T", "--cpunodebind", "--membind", "--physcpubind", "--preferred", "--interleave",
        "--preferred-many", "--cpubind", "--shm", "--file", "--length", "--mode", "--offset",
        "--shmid", 0};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--")) { i++; break; }
        for (int k = 0; with_arg[k]; k++) if (!strcmp(argv[i], with_arg[k])) { i++; break; }
    }
    if (i >= argc) return 0;
    execvp(argv[i], argv + i);
    perror("numactl stub: exec");
    return 127;
}

static int nvidia_smi(int argc, char **argv) {
    const char *query = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-L")) {
            for (int g = 0; g < 8; g++)
                printf("GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-%08d-0000-0000-0000)\n", g, g);
            return 0;
        }
        if (!strncmp(argv[i], "--query-gpu=", 12)) query = argv[i] + 12;
    }
    if (!query) return 0;
    for (int g = 0; g < 8; g++) {
        char fields[1024]; snprintf(fields, sizeof fields, "%s", query);
        int first = 1;
        for (char *f = strtok(fields, ","); f; f = strtok(0, ",")) {
            if (!first) printf(", ");
            first = 0;
            if (!strcmp(f, "index")) printf("%d", g);
            else if (!strcmp(f, "name")) printf("NVIDIA H100 80GB HBM3");
            else if (!strncmp(f, "memory.total", 12)) printf("81559 MiB");
            else printf("0");
        }
        printf("\n");
    }
    return 0;
}

int main(int argc, char **argv) {
    ssize_t n = readlink("/proc/self/exe", self_dir, sizeof self_dir - 1);
    if (n <= 0) return 126;
    self_dir[n] = 0;
    char name[256];
    snprintf(name, sizeof name, "%s", base(self_dir));
    *strrchr(self_dir, '/') = 0;
    if (!strcmp(name, "numactl")) return numactl(argc, argv);
    if (!strcmp(name, "nvidia-smi")) return nvidia_smi(argc, argv);
    char noop[PATH_MAX];
    snprintf(noop, sizeof noop, "%s/.noop/%s", self_dir, name);
    if (access(noop, F_OK) == 0) return 0;
    if (!strncmp(name, "python", 6) && !is_server_python(argc, argv)) {
        char shim[PATH_MAX + 16];
        snprintf(shim, sizeof shim, "%s/.pyshim.py", self_dir);
        char **args = calloc(argc + 3, sizeof *args);
        args[0] = (char *)REAL_PYTHON;
        args[1] = shim;
        for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
        execv(REAL_PYTHON, args);
        perror("python stub: exec");
        return 127;
    }
    keep();
    return 0;
}
"""

_PYSHIM = r'''"""Run a helper as python would, with fake torch/sglang/vllm modules importable."""
import os
import runpy
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".pymods"))
args = sys.argv[1:]
i = 0
while i < len(args):
    a = args[i]
    if a == "-c":
        sys.argv = ["-c", *args[i + 2 :]]
        exec(compile(args[i + 1], "<string>", "exec"), {"__name__": "__main__"})
        sys.exit(0)
    if a == "-m" or (a.startswith("-m") and len(a) > 2):
        mod = args[i + 1] if a == "-m" else a[2:]
        rest = args[i + 2 :] if a == "-m" else args[i + 1 :]
        if mod.split(".")[0] in ("pip", "ensurepip", "venv"):
            sys.exit(0)
        sys.argv = [mod, *rest]
        runpy.run_module(mod, run_name="__main__", alter_sys=True)
        sys.exit(0)
    if a in ("-V", "--version"):
        print("Python " + sys.version.split()[0])
        sys.exit(0)
    if a in ("-W", "-X"):
        i += 2
        continue
    if a == "-":
        sys.argv = ["-", *args[i + 1 :]]
        exec(compile(sys.stdin.read(), "<stdin>", "exec"), {"__name__": "__main__"})
        sys.exit(0)
    if a.startswith("-"):
        i += 1
        continue
    sys.argv = args[i:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(a)))
    runpy.run_path(a, run_name="__main__")
    sys.exit(0)
exec(compile(sys.stdin.read(), "<stdin>", "exec"), {"__name__": "__main__"})
'''

_PYMODS = {
    "torch/__init__.py": (
        '"""A stand-in for torch: enough for launch scripts\' checks."""\n'
        "from . import cuda, version\n\n"
        '__version__ = "2.5.1+cu124"\n'
    ),
    "torch/cuda.py": (
        "import os\n\n\n"
        "def is_available():\n    return True\n\n\n"
        "def device_count():\n"
        '    visible = os.environ.get("CUDA_VISIBLE_DEVICES")\n'
        '    return len(visible.split(",")) if visible else 8\n\n\n'
        "def get_device_name(index=0):\n"
        '    return "NVIDIA H100 80GB HBM3"\n'
    ),
    "torch/version.py": 'cuda = "12.4"\n',
    "sglang/__init__.py": '__version__ = "0.4.6.post1"\n',
    "vllm/__init__.py": '__version__ = "0.8.5"\n',
}


@functools.cache
def stub_binary() -> Path:
    """The stub program, compiled with ``cc`` once per process into a private temp folder."""
    folder = Path(tempfile.mkdtemp(prefix="drift-bash-oracle-"))
    atexit.register(shutil.rmtree, folder, True)
    source = folder / "stub.c"
    source.write_text(_STUB_C)
    binary = folder / "stub"
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise LaunchError("the bash oracle needs a C compiler (cc) for its keeper")
    subprocess.run(
        [cc, "-O1", "-w", f'-DREAL_PYTHON="{REAL_PYTHON}"', "-o", str(binary), str(source)],
        check=True,
        capture_output=True,
    )
    return binary


def prepare_sandbox(sandbox: Path, launchers: Sequence[str] = DEFAULT_LAUNCHERS) -> Path:
    """Fill `sandbox` with ``stubs/`` (to put first on PATH), ``launched/`` and ``home/``."""
    stubs = sandbox / "stubs"
    for sub in (stubs / ".noop", stubs / ".pymods", sandbox / "launched", sandbox / "home"):
        sub.mkdir(parents=True, exist_ok=True)
    binary = stub_binary()
    for name in (*launchers, *SIDE_EFFECT_TOOLS, "numactl"):
        target = stubs / name
        if not target.exists():
            shutil.copy2(binary, target)
    for name in SIDE_EFFECT_TOOLS:
        if name != "nvidia-smi":
            (stubs / ".noop" / name).touch()
    (stubs / ".pyshim.py").write_text(_PYSHIM)
    for rel, text in _PYMODS.items():
        path = stubs / ".pymods" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return stubs


# ---------------------------------------------------------------------------------------------
# Processes

# script pid -> (its Popen, the keepers it started), until stopped: killed at exit at the latest
_LIVE: dict[int, tuple[subprocess.Popen[bytes], list[tuple[int, int]]]] = {}


def _kill_leftovers() -> None:
    for proc, keepers in list(_LIVE.values()):
        _stop_proc(proc, keepers)


atexit.register(_kill_leftovers)


def _start_time(pid: int) -> int | None:
    """The start time of `pid` (clock ticks since boot), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _exited(proc: subprocess.Popen[bytes]) -> int | None:
    """The script's exit status if it has ended, without reaping it (its pid stays ours)."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return proc.poll()
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _stop_proc(proc: subprocess.Popen[bytes], keepers: Sequence[tuple[int, int]]) -> None:
    """Kill the keepers (if still the same processes) and the script's process group."""
    for pid, started in keepers:
        if _start_time(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    _LIVE.pop(proc.pid, None)
    # SIGKILL is delivered asynchronously: return once nothing of ours still runs
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        if not any(_start_time(pid) == started for pid, started in keepers) and not _session(
            proc.pid
        ):
            break
        time.sleep(0.001)


def _session(sid: int) -> list[int]:
    """The live (not zombie) processes of session `sid`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[3] == str(sid) and fields[0] != "Z":
                found.append(int(name))
    return found


def _start(
    script: Path,
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    log: Path,
) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [shutil.which("bash") or "/bin/bash", str(script), *args],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _LIVE[proc.pid] = (proc, [])
    return proc


def _wait_for_keeper(
    proc: subprocess.Popen[bytes], launched: Path, timeout: float, log: Path
) -> list[tuple[int, int]]:
    """The keepers that have reported (pid, start time), waiting up to `timeout` for one.

    They are added to the script's entry in `_LIVE` as they are found, so that whatever
    happens next can kill them."""
    deadline = time.monotonic() + timeout
    ended_at: float | None = None
    keepers = _LIVE[proc.pid][1]
    while True:
        names = [n for n in os.listdir(launched) if not n.startswith(".")]
        if names:
            for name in sorted(names, key=int):
                started = _start_time(int(name))
                if started is not None and (int(name), started) not in keepers:
                    keepers.append((int(name), started))
            if keepers:
                return keepers
        status = _exited(proc)
        now = time.monotonic()
        if status is not None:
            if status != 0:
                raise LaunchError(f"{proc.args} exited {status} before launching:\n{_tail(log)}")
            # a server started in the background may still be on its way
            ended_at = ended_at or now
            if now - ended_at > 0.5:
                raise LaunchError(f"{proc.args} ended without launching a server:\n{_tail(log)}")
        if now > deadline:
            raise LaunchError(f"{proc.args} launched no server within {timeout}s:\n{_tail(log)}")
        time.sleep(0.002)


def _tail(log: Path, limit: int = 6000) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return text[-limit:] or "(empty log)"


def _read_proc(pid: int) -> tuple[list[str], dict[str, str]]:
    raw_argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    raw_env = Path(f"/proc/{pid}/environ").read_bytes()
    argv = [os.fsdecode(a) for a in raw_argv.split(b"\0")[:-1]]
    env: dict[str, str] = {}
    for item in raw_env.split(b"\0"):
        if item:
            name, _, value = os.fsdecode(item).partition("=")
            env[name] = value
    return argv, env


# ---------------------------------------------------------------------------------------------
# Public API


def run_script(
    script: Path,
    *,
    sandbox: Path,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    launchers: Sequence[str] = DEFAULT_LAUNCHERS,
    timeout: float = 10.0,
    cwd: Path | None = None,
) -> Launch:
    """Run `script` until it starts its server; return the live server and bash's account.

    The script runs as ``bash SCRIPT ARGS`` in `cwd` (default: its own folder) with only
    ``PATH`` (the stubs first), ``HOME`` (``sandbox/home``) and ``LANG``, plus `env`. It runs
    twice: traced (then stopped) and plain; the plain run's server is the one returned.
    """
    script = Path(os.path.abspath(script))
    sandbox = Path(os.path.abspath(sandbox))
    workdir = Path(os.path.abspath(cwd)) if cwd is not None else script.parent
    stubs = prepare_sandbox(sandbox, launchers)
    start_env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(sandbox / "home"),
        "LANG": "C.UTF-8",
        **(env or {}),
    }
    start_env["PATH"] = f"{stubs}:{start_env['PATH']}"  # the stubs come first, whatever env says
    launched = sandbox / "launched"

    trace = _traced_run(script, args, start_env, workdir, sandbox, timeout)

    for name in os.listdir(launched):
        (launched / name).unlink()
    log = sandbox / "script.log"
    proc = _start(script, args, start_env, workdir, log)
    keepers = _LIVE[proc.pid][1]
    try:
        _wait_for_keeper(proc, launched, timeout, log)
        pid = keepers[0][0]
        argv, keeper_env = _read_proc(pid)
        exported = {k: v for k, v in keeper_env.items() if start_env.get(k) != v}
        assigned, launch, sourced = trace.account(exported, argv)
    except BaseException:
        _stop_proc(proc, keepers)
        raise
    return Launch(
        pid=pid,
        argv=argv,
        env=keeper_env,
        exported=exported,
        assigned=assigned,
        launch=launch,
        sandbox=sandbox,
        sourced=sourced,
        log=log,
        _proc=proc,
        _keepers=keepers,
    )


def stop(launch: Launch) -> None:
    """Kill exactly what `run_script` started: the keeper(s) and the script's process group."""
    if launch._proc is not None:
        _stop_proc(launch._proc, launch._keepers)


@contextmanager
def launched(script: Path, **kw: Any) -> Iterator[Launch]:
    """`run_script` as a context: the server is stopped on the way out, whatever happened."""
    launch = run_script(script, **kw)
    try:
        yield launch
    finally:
        stop(launch)


# ---------------------------------------------------------------------------------------------
# The traced run

_BASH_ENV = r"""# drift bash oracle: trace this shell from its first line (read through BASH_ENV)
__drift_dir=@DIR@
exec 19>>"$__drift_dir/trace"
BASH_XTRACEFD=19
__drift_owner=$BASHPID
__drift_inc=$BASHPID.${SRANDOM:-$RANDOM}
__drift_seq=0
printf '\036I\037%s\037%s\037%s\n' "$BASHPID" "$__drift_inc" "$PPID" >&19
__drift_dbg() {
    set +x
    if [[ $__drift_owner != "$BASHPID" ]]; then
        __drift_new=$BASHPID.${SRANDOM:-$RANDOM}
        printf '\036F\037%s\037%s\037%s\037%s\n' \
            "$BASHPID" "$__drift_inc" "$__drift_seq" "$__drift_new" >&19
        __drift_owner=$BASHPID
        __drift_inc=$__drift_new
        __drift_seq=0
    fi
    __drift_seq=$((__drift_seq + 1))
    declare -p >"$__drift_dir/s/$__drift_inc.$__drift_seq" 2>/dev/null
    printf '\036D\037%s\037%s\037%s\037%s\037%s\037%s\037%s\037%s\n' "$1" "$2" "$BASHPID" \
        "$__drift_inc" "$__drift_seq" "$((${#FUNCNAME[@]} - 1))" "$PWD" "${FUNCNAME[*]:1}" >&19
    set -x
}
PS4=$'\036X\037${BASH_SOURCE-}\037${LINENO}\037${BASHPID}\037${__drift_inc}\037${__drift_seq}\037${PWD}\037'
set -T
trap '__drift_dbg "${BASH_SOURCE-}" "$LINENO" "$_"' DEBUG
set -x
"""


@dataclass
class _Rec:
    kind: str  # X (xtrace), D (DEBUG trap), I (a bash starts), F (a subshell's first trap)
    index: int
    pid: int
    inc: str = ""
    seq: int = 0
    file: str = ""
    line: int = 0
    pwd: str = ""
    depth: int = 0
    text: str = ""  # X: the traced command
    ppid: int = 0  # I
    parent_inc: str = ""  # F
    parent_seq: int = 0  # F


_Place = tuple[str, int, bool]  # file, line as bash gave it, whether that line is already exact

_RECORD = re.compile(r"(?:\A|\n)\x1e+(?=[XDIF]\x1f)")


def _parse_trace(data: str) -> list[_Rec]:
    recs: list[_Rec] = []
    for chunk in _RECORD.split(data):
        if not chunk:
            continue
        kind = chunk[0]
        if kind == "X":
            parts = chunk.split("\x1f", 7)
            if len(parts) < 8:
                continue
            _, file, line, pid, inc, seq, pwd, text = parts
            text = text.removesuffix("\n")
            rec = _Rec("X", len(recs), int(pid), inc, int(seq or 0), file, int(line or 0), pwd)
            rec.text = text
            recs.append(rec)
        elif kind == "D":
            parts = chunk.rstrip("\n").split("\x1f")
            if len(parts) < 8:
                continue
            _, file, line, pid, inc, seq, depth, pwd = parts[:8]
            rec = _Rec("D", len(recs), int(pid), inc, int(seq), file, int(line or 0), pwd)
            rec.depth = int(depth)
            rec.text = parts[8] if len(parts) > 8 else ""  # FUNCNAME, innermost first
            recs.append(rec)
        elif kind == "I":
            _, pid, inc, ppid = chunk.rstrip("\n").split("\x1f")[:4]
            recs.append(_Rec("I", len(recs), int(pid), inc, ppid=int(ppid)))
        elif kind == "F":
            _, pid, pinc, pseq, inc = chunk.rstrip("\n").split("\x1f")[:5]
            recs.append(
                _Rec("F", len(recs), int(pid), inc, parent_inc=pinc, parent_seq=int(pseq or 0))
            )
    return recs


def _traced_run(
    script: Path,
    args: Sequence[str],
    start_env: Mapping[str, str],
    workdir: Path,
    sandbox: Path,
    timeout: float,
) -> _Trace:
    tdir = sandbox / "trace"
    shutil.rmtree(tdir, ignore_errors=True)
    (tdir / "s").mkdir(parents=True)
    bashenv = tdir / "bashenv.sh"
    bashenv.write_text(_BASH_ENV.replace("@DIR@", shlex.quote(str(tdir))))
    launched = sandbox / "launched"
    for name in os.listdir(launched):
        (launched / name).unlink()
    log = sandbox / "trace.log"
    proc = _start(script, args, {**start_env, "BASH_ENV": str(bashenv)}, workdir, log)
    keepers = _LIVE[proc.pid][1]
    try:
        _wait_for_keeper(proc, launched, timeout, log)
        chain = [keepers[0][0]]
        while chain[-1] not in (proc.pid, 1) and len(chain) < 64:
            parent = _ppid(chain[-1])
            if parent is None:
                break
            chain.append(parent)
    finally:
        _stop_proc(proc, keepers)
    data = (tdir / "trace").read_bytes().decode("utf-8", "surrogateescape")
    return _Trace(_parse_trace(data), chain, str(bashenv), tdir / "s", workdir, script)


# ---------------------------------------------------------------------------------------------
# Reading bash's account


_DECL = re.compile(r"^declare -(\S+) ([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$")


def _snapshot(path: Path) -> dict[str, str | None]:
    """``declare -p`` output as name -> value as bash quoted it (None: declared, no value)."""
    try:
        text = path.read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return {}
    out: dict[str, str | None] = {}
    name = None
    for raw in text.split("\n"):
        m = _DECL.match(raw)
        if m:
            name = m.group(2)
            out[name] = m.group(3)
        elif name is not None and out[name] is not None:
            out[name] = f"{out[name]}\n{raw}"  # a value with newlines goes on
    return {k: v for k, v in out.items() if not k.startswith("__drift_")}


_NAME_EQ = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?\+?=")
_DECLARERS = {"export", "declare", "typeset", "local", "readonly"}


def xtrace_words(text: str) -> list[str]:
    """The words of one xtrace line, with bash's quoting ('...', $'...', \\x) removed."""
    words: list[str] = []
    cur: list[str] = []
    have = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n":
            if have:
                words.append("".join(cur))
                cur, have = [], False
            i += 1
        elif c == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j
            cur.append(text[i + 1 : j])
            have, i = True, j + 1
        elif c == "$" and text.startswith("$'", i):
            j = i + 2
            buf = []
            while j < n and text[j] != "'":
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j : j + 2])
                    j += 2
                else:
                    buf.append(text[j])
                    j += 1
            literal = "".join(buf)
            try:
                cur.append(literal.encode("latin-1", "backslashreplace").decode("unicode_escape"))
            except UnicodeDecodeError:
                cur.append(literal)
            have, i = True, j + 1
        elif c == "\\" and i + 1 < n:
            cur.append(text[i + 1])
            have, i = True, i + 2
        else:
            cur.append(c)
            have, i = True, i + 1
    if have:
        words.append("".join(cur))
    return words


def _assignment_names(words: list[str]) -> list[str] | None:
    """Names a traced command assigns in the shell itself; None if it is not an assignment."""
    if not words:
        return None
    array = re.match(r"^([A-Za-z_]\w*)\+?=\(", words[0])
    if array:
        return [array.group(1)]
    matches = [_NAME_EQ.match(w) for w in words]
    if all(matches):
        return [m.group(1) for m in matches if m]
    head = 1 if words[0] in ("builtin", "command") else 0
    if len(words) > head and words[head] in _DECLARERS:
        names = []
        for w in words[head + 1 :]:
            m = _NAME_EQ.match(w)
            if m:
                names.append(m.group(1))
        return names
    if words[0] == "printf" and len(words) > 2 and words[1] == "-v":
        return [words[2]]
    return None


@dataclass
class _Frame:
    """A function (or ``source``) being run: what its end undoes."""

    caller_depth: int
    name: str
    found_at_call: dict[str, tuple[int, _Place]]
    locals: set[str]


def _local_names(words: list[str]) -> set[str]:
    """Names a ``local``/``declare``/``typeset`` (without -g) makes local to its function."""
    if not words or words[0] not in ("local", "declare", "typeset"):
        return set()
    options = [w for w in words[1:] if w.startswith(("-", "+"))]
    if words[0] != "local" and any("g" in o for o in options):
        return set()
    names = set()
    for word in words[1:]:
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)(?:$|\[|\+?=)", word)
        if m:
            names.add(m.group(1))
    return names


class _Source:
    """One script file: its lines and, for each line, the command (logical line) it is in."""

    def __init__(self, path: str) -> None:
        try:
            text = Path(path).read_bytes().decode("utf-8", "surrogateescape")
        except OSError:
            text = ""
        self.lines = text.split("\n")
        self.start, self.end = logical_lines(text)

    def text(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def span(self, line: int) -> tuple[int, int]:
        if 0 < line < len(self.start):
            return self.start[line], self.end[line]
        return line, line

    def word_line(self, line: int, name: str) -> int:
        """The line, in the command around `line`, where `name` is assigned (or mentioned)."""
        first, last = self.span(line)
        patterns = (
            rf"(?<![\w$.{{-]){re.escape(name)}(?:\[[^\]]*\])?\+?=",
            rf"\$\{{{re.escape(name)}:?[=]",
            rf"(?<![\w-]){re.escape(name)}(?![\w])",
        )
        for pat in patterns:
            for number in range(first, last + 1):
                if re.search(pat, self.text(number)):
                    return number
        return first


def logical_lines(text: str) -> tuple[list[int], list[int]]:
    """For each physical line (index from 1), the first and last line of the command it is in.

    Lines are joined where bash reads on: a backslash-newline outside a comment, an open quote,
    ``$(...)``, a backquote, ``${...}`` or ``NAME=(...)``. A heredoc's body lines stand alone.
    """
    reader = _LineReader(text)
    reader.read()
    return reader.start, reader.end


class _LineReader:
    """`logical_lines` reading a text: where it is, what is open, and the spans found so far."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.count = text.count("\n") + 2
        self.start = list(range(self.count))
        self.end = list(range(self.count))
        self.i, self.line, self.first = 0, 1, 1
        self.stack: list[list] = []  # [kind, paren depth]
        self.heredocs: list[tuple[str, bool]] = []
        self.at_word = True

    def read(self) -> None:
        while self.i < self.n:
            c = self.text[self.i]
            top = self.stack[-1][0] if self.stack else None
            if c == "\n":
                self._newline(top)
            elif top in (None, "$(", "=("):
                self._code(c, top)
            else:  # inside "...", `...` or ${...}
                self._quoted(c, top)
        self._close(self.line)

    def _close(self, last: int) -> None:
        """The command that started at `self.first` ends at line `last`."""
        for number in range(self.first, min(last, self.count - 1) + 1):
            self.start[number], self.end[number] = self.first, last

    def _newline(self, top: str | None) -> None:
        self.line += 1
        self.i += 1
        if top is None:
            self._close(self.line - 1)
            self._skip_heredoc_bodies()
            self.first = self.line
            self.at_word = True

    def _skip_heredoc_bodies(self) -> None:
        text, n = self.text, self.n
        while self.heredocs and self.i < n:
            delim, strip = self.heredocs[0]
            nl = text.find("\n", self.i)
            body = text[self.i : n if nl < 0 else nl]
            self.line += 1
            self.i = n if nl < 0 else nl + 1
            if (body.lstrip("\t") if strip else body) == delim:
                self.heredocs.pop(0)
        self.heredocs.clear()

    def _escape(self) -> None:
        """A backslash: it and the next character (a newline then continues the line)."""
        if self.text.startswith("\\\n", self.i):
            self.line += 1
        self.i += 2

    def _single_quoted(self) -> None:
        """Past a '...' string, whose text is literal (lines and all)."""
        j = self.text.find("'", self.i + 1)
        j = self.n - 1 if j < 0 else j
        self.line += self.text.count("\n", self.i, j)
        self.i = j + 1

    def _code(self, c: str, top: str | None) -> None:
        """One character of code: outside quotes, or inside ``$(...)`` or ``NAME=(...)``."""
        text, i = self.text, self.i
        if c == "\\":
            self._escape()
            self.at_word = False
        elif c == "#" and self.at_word:
            nl = text.find("\n", i)
            self.i = self.n if nl < 0 else nl
        elif c == "'":
            self._single_quoted()
            self.at_word = False
        elif text.startswith("$'", i):
            j = i + 2
            while j < self.n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            self.line += text.count("\n", i, j)
            self.i, self.at_word = j + 1, False
        elif text.startswith("<<<", i):
            self.i += 3
            self.at_word = False
        elif text.startswith("<<", i):
            self._heredoc_start()
        else:
            self._open_or_close(c, top)
            self.at_word = c in " \t;&|()"
            self.i += 1

    def _heredoc_start(self) -> None:
        """``<<EOF`` or ``<<-'EOF'``: the body starts after this line, up to the delimiter."""
        text, n = self.text, self.n
        j = self.i + 2
        strip = j < n and text[j] == "-"
        j += 1 if strip else 0
        while j < n and text[j] in " \t":
            j += 1
        k = j
        while k < n and text[k] not in " \t\n;&|<>()":
            k += 1
        delim = re.sub(r"[\"'\\]", "", text[j:k])
        if delim:
            self.heredocs.append((delim, strip))
        self.i = k
        self.at_word = False

    def _open_or_close(self, c: str, top: str | None) -> None:
        """Quotes, ``$(``, ``${`` and ``NAME=(`` open what the lines join inside; ``)`` closes."""
        text, i, stack = self.text, self.i, self.stack
        if c == '"':
            stack.append(['"', 0])
        elif c == "`":
            stack.append(["`", 0])
        elif text.startswith("$(", i):
            stack.append(["$(", 0])
            self.i += 1
        elif text.startswith("${", i):
            stack.append(["${", 0])
            self.i += 1
        elif c == "(":
            if top in ("$(", "=("):
                stack[-1][1] += 1
            else:
                before = text[max(0, i - 200) : i]
                if re.search(r"(?:^|[\s;&|])[A-Za-z_]\w*(?:\[[^\]]*\])?\+?=$", before):
                    stack.append(["=(", 0])
        elif c == ")" and top in ("$(", "=("):
            if stack[-1][1]:
                stack[-1][1] -= 1
            else:
                stack.pop()

    def _quoted(self, c: str, top: str | None) -> None:
        """One character inside "...", `...` or ``${...}``."""
        text, i, stack = self.text, self.i, self.stack
        if c == "\\":
            self._escape()
            return
        if top == '"' and c == '"' or top == "`" and c == "`" or top == "${" and c == "}":
            stack.pop()
        elif top in ('"', "${") and text.startswith("$(", i):
            stack.append(["$(", 0])
            self.i += 1
        elif top in ('"', "${") and text.startswith("${", i):
            stack.append(["${", 0])
            self.i += 1
        elif top in ('"', "${") and c == "`":
            stack.append(["`", 0])
        elif top == "${" and c == '"':
            stack.append(['"', 0])
        elif top == "${" and c == "'" and not (len(stack) > 1 and stack[-2][0] == '"'):
            self._single_quoted()
            return
        self.i += 1


class _Trace:
    """The records of one traced run, and the account of the launch they give."""

    def __init__(
        self,
        recs: list[_Rec],
        chain: list[int],
        bashenv: str,
        snaps: Path,
        workdir: Path,
        script: Path,
    ) -> None:
        self.recs = recs
        self.chain = chain
        self.bashenv = bashenv
        self.snaps = snaps
        self.workdir = str(workdir)
        self.script = str(script)
        self.sources: dict[str, _Source] = {}

    # -- which records led to the keeper

    def _timeline(self) -> list[_Rec]:
        """The records that led to the keeper, in order, across the shells and subshells on the
        way (each piece cut where the next one took over)."""
        contexts, created = self._contexts()
        by_pid: dict[int, list[tuple[int, str]]] = {}
        for key in sorted(contexts, key=lambda k: contexts[k][0].index):
            by_pid.setdefault(key[0], []).append(key)

        current: tuple[int, str] | None = None
        for pid in self.chain:
            if pid in by_pid:
                current = max(by_pid[pid], key=lambda k: contexts[k][-1].index)
                break
        if current is None:
            raise LaunchError("the trace shows no shell on the way to the server")

        pieces: list[list[_Rec]] = []
        cut: int | None = None
        seen: set[tuple[int, str]] = set()
        while current is not None and current not in seen:
            seen.add(current)
            recs = contexts[current]
            pieces.append([r for r in recs if cut is None or r.seq <= cut or r.kind in "IF"])
            current, cut = _earlier_context(current, recs, created, contexts, by_pid)
        timeline: list[_Rec] = []
        for piece in reversed(pieces):
            timeline.extend(piece)
        return timeline

    def _contexts(self) -> tuple[dict[tuple[int, str], list[_Rec]], dict[str, _Rec]]:
        """The records by (pid, bash instance), and the record that started each instance.

        The harness's own records (its BASH_ENV file, its DEBUG function) are left out.
        """
        contexts: dict[tuple[int, str], list[_Rec]] = {}
        created: dict[str, _Rec] = {}
        for rec in self.recs:
            if rec.kind in ("I", "F"):
                created[rec.inc] = rec
            elif rec.kind == "D" and rec.file == self.bashenv:
                continue
            elif rec.kind == "X" and (
                rec.file == self.bashenv or rec.text.startswith("__drift_dbg ")
            ):
                continue
            contexts.setdefault((rec.pid, rec.inc), []).append(rec)
        return contexts, created

    # -- files and lines

    def _source(self, path: str) -> _Source:
        if path not in self.sources:
            self.sources[path] = _Source(path)
        return self.sources[path]

    def _real(self, rec: _Rec) -> str | None:
        """The absolute path of the file a record ran in, if it is a regular file."""
        if not rec.file:
            return None
        path = os.path.normpath(os.path.join(rec.pwd or self.workdir, rec.file))
        if path.startswith(("/dev/", "/proc/")) or not os.path.isfile(path):
            path = os.path.normpath(os.path.join(self.workdir, rec.file))
            if not os.path.isfile(path):
                return None
        return path

    def _places(self, timeline: list[_Rec]) -> list[_Place | None]:
        """Where each record ran. A line of a string run by ``bash -c`` maps into the file that
        holds the string (exactly); anything else without a file maps to the command that ran
        it."""
        places: list[_Place | None] = []
        first_seen: dict[str, str] = {}  # relative BASH_SOURCE -> absolute, as first resolved
        last_real: _Place | None = None
        last_command: _Place | None = None
        c_origin: tuple[str, int, int] | None = None  # file, line the string starts on, last
        evals: dict[str, tuple[str, int, int]] = {}  # shell -> eval of a string not in the file
        for rec in timeline:
            if rec.kind == "I":
                c_origin = None
                if last_command is not None:
                    c_origin = self._string_start(last_command[0], last_command[1])
                places.append(last_real)
                continue
            if rec.kind not in "XD":
                places.append(last_real)
                continue
            if rec.kind == "X" and xtrace_words(rec.text)[:1] in (["source"], ["."]):
                # Sourced again (after a cd, say): its relative name is resolved afresh.
                first_seen.pop(next(iter(xtrace_words(rec.text)[1:2]), ""), None)
            path = first_seen.get(rec.file) if not os.path.isabs(rec.file) else None
            if path is None:
                path = self._real(rec)
                if path is not None and not os.path.isabs(rec.file):
                    first_seen[rec.file] = path
            place: _Place | None
            if path is not None and rec.inc in evals:
                place = self._in_eval(rec, path, evals)
                if place is not None:
                    places.append(place)
                    continue
            if path is not None and rec.kind == "X":
                opened = self._eval_opened(rec, path)
                if opened is not None:
                    evals[rec.inc] = opened
            if path is not None:
                place = (path, rec.line, False)
                last_real = place
                if rec.kind == "X":
                    last_command = place
            elif c_origin is not None and not rec.file:
                file, at, last = c_origin
                target = at + rec.line - 1
                place = (file, target, True) if at <= target <= last else (file, at, True)
            else:
                place = last_real
            places.append(place)
        return places

    def _eval_opened(self, rec: _Rec, path: str) -> tuple[str, int, int] | None:
        """``eval "$CMD"`` / ``eval "$(helper)"``: the string is not written in the file, yet
        bash numbers its lines on from the eval's line. (file, eval line, last such number)."""
        words = xtrace_words(rec.text)
        if words[:1] != ["eval"]:
            return None
        src = self._source(path)
        first, last = src.span(rec.line)
        text = "\n".join(src.text(k) for k in range(first, last + 1))
        after = text[text.find("eval") + 4 :] if "eval" in text else ""
        if "$" not in after:
            return None  # a literal string: its lines are the file's own
        body = " ".join(words[1:])
        return (path, first, rec.line + body.count("\n"))

    def _in_eval(
        self, rec: _Rec, path: str, evals: dict[str, tuple[str, int, int]]
    ) -> _Place | None:
        """A record run from an eval'd string (its line number is not a line of the file):
        placed on the eval's line; None for a record of the file itself, which ends the eval."""
        file, at, last = evals[rec.inc]
        if path != file:
            return None  # a file it sources, a function of the file: lines of their own
        if not at <= rec.line <= last:
            if rec.line > last:
                del evals[rec.inc]
            return None
        if rec.kind == "D":
            return (file, at, True) if rec.line > at else None
        words = xtrace_words(rec.text)
        names = _assignment_names(words) or words[:1]
        source_line = self._source(file).text(rec.line)
        if rec.line > at and names and all(n in source_line for n in names):
            del evals[rec.inc]  # the file's own next command
            return None
        return (file, at, True)

    def _string_start(self, file: str, line: int) -> tuple[str, int, int] | None:
        """Where the string of a ``bash -c '...'`` command starts, when it is written there."""
        src = self._source(file)
        first, last = src.span(line)
        text = "\n".join(src.text(k) for k in range(first, last + 1))
        m = re.search(r"(?:^|\s)-\w*c\s+(\$?['\"])", text)
        if not m or re.match(r"\"\$\{?\w+\}?\"", text[m.start(1) :]):
            return (file, first, first)  # a string from a variable: its lines are unknown
        return (file, first + text.count("\n", 0, m.start(1)), last)

    # -- the account

    def account(
        self, exported: Mapping[str, str], argv: Sequence[str]
    ) -> tuple[dict[str, tuple[str, int]], tuple[str, int], list[str]]:
        """`assigned`, `launch` and the other files that ran, for the keeper's `exported`."""
        timeline = self._timeline()
        places = self._places(timeline)
        values = _Values(timeline, places, set(exported), self.snaps)
        launch_i = max(
            (i for i, r in enumerate(timeline) if r.kind == "X" and places[i] is not None),
            default=None,
        )
        if launch_i is None:
            raise LaunchError("the trace shows no command that started the server")
        words_of = {i: xtrace_words(r.text) for i, r in enumerate(timeline) if r.kind == "X"}
        prefix = _prefixes(timeline, words_of)
        values.follow(words_of, prefix)
        values.launched(launch_i, prefix, argv[0] if argv else "")

        assigned: dict[str, tuple[str, int]] = {}
        for name, (_, (file, line, exact)) in values.found.items():
            assigned[name] = (file, line if exact else self._source(file).word_line(line, name))
        launch_file, launch_line, exact = places[launch_i]  # type: ignore[misc]
        if not exact:
            launch_line = self._source(launch_file).span(launch_line)[0]
        launch = (launch_file, launch_line)
        sourced: list[str] = []
        for place in places:
            if place is not None and place[0] != self.script and place[0] not in sourced:
                sourced.append(place[0])
        return assigned, launch, sourced


def _prefixes(timeline: list[_Rec], words_of: dict[int, list[str]]) -> set[int]:
    """The records that are ``K=V`` before a command: they reach only that command.

    ``K=V cmd`` traces as "K=V" then "cmd" (same shell, line and step). (case/for/select
    trace before their DEBUG trap.)
    """
    prefix: set[int] = set()
    for i, words in words_of.items():
        rec = timeline[i]
        if _assignment_names(words) is not None or words[:1] in (["case"], ["for"], ["select"]):
            continue
        j = i - 1
        while j in words_of and (timeline[j].pid, timeline[j].seq, timeline[j].line) == (
            rec.pid,
            rec.seq,
            rec.line,
        ):
            if not words_of[j] or not all(_NAME_EQ.match(w) for w in words_of[j]):
                break
            prefix.add(j)
            j -= 1
    return prefix


def _env_assignments(words: Sequence[str]) -> Iterator[str]:
    """The names ``env K=V`` words assign, in the words that start a command."""
    for k, w in enumerate(words):
        if os.path.basename(w) != "env":
            continue
        skip = False
        for x in words[k + 1 :]:
            if skip:
                skip = False
                continue
            if x in ("-u", "--unset", "-C", "--chdir", "-S", "--split-string"):
                skip = True
                continue
            if x.startswith("-"):
                continue
            m = _NAME_EQ.match(x)
            if not m:
                break
            yield m.group(1)


class _Values:
    """Where each watched variable got the value the server has: one pass over a timeline."""

    def __init__(
        self, timeline: list[_Rec], places: list[_Place | None], watched: set[str], snaps: Path
    ) -> None:
        self.timeline = timeline
        self.places = places
        self.watched = watched
        self.folder = snaps
        self.snaps: dict[int, dict[str, str | None]] = {}
        self.found: dict[str, tuple[int, _Place]] = {}  # name -> (timeline index, place)
        d_index = [i for i, r in enumerate(timeline) if r.kind == "D"]
        self.final = self.snap(d_index[-1]) if d_index else {}
        self.next_d: dict[int, int] = {}  # record -> the next DEBUG trap after it
        upcoming: int | None = None
        for i in range(len(timeline) - 1, -1, -1):
            if upcoming is not None:
                self.next_d[i] = upcoming
            if timeline[i].kind == "D":
                upcoming = i

    def snap(self, i: int) -> dict[str, str | None]:
        """The variables at DEBUG trap record `i`."""
        if i not in self.snaps:
            rec = self.timeline[i]
            self.snaps[i] = _snapshot(self.folder / f"{rec.inc}.{rec.seq}")
        return self.snaps[i]

    def note(self, name: str, i: int) -> None:
        """`name` got its value at record `i` (a later record overrides an earlier one)."""
        place = self.places[i]
        if place is not None and (name not in self.found or self.found[name][0] <= i):
            self.found[name] = (i, place)

    def follow(self, words_of: dict[int, list[str]], prefix: set[int]) -> None:
        """One pass in order. A value that changed between one DEBUG trap and the next was set
        by the command between; an assignment xtrace shows counts too (a re-assignment of the
        same value), if the value it left is the one the server got. A function's locals (and
        K=V on the call) end with it: on return their origin is the one they had at the call.
        ``source`` is a frame too, but without locals of its own."""
        prev: int | None = None
        frames: list[_Frame] = []
        for i, rec in enumerate(self.timeline):
            if rec.kind == "I":
                prev, frames = None, []
            elif rec.kind == "X" and i not in prefix:
                self._assignment(i, words_of[i], frames)
            elif rec.kind == "D":
                if prev is not None:
                    self._step(prev, i, frames)
                prev = i

    def _assignment(self, i: int, words: list[str], frames: list[_Frame]) -> None:
        """A traced command: the locals it makes, and the values it assigns that lasted."""
        scoped = [f for f in frames if f.name != "source"]
        if scoped:
            scoped[-1].locals.update(_local_names(words))
        for name in _assignment_names(words) or []:
            after = self.snap(self.next_d[i]) if i in self.next_d else self.final
            if name in self.watched and after.get(name) == self.final.get(name):
                self.note(name, i)

    def _step(self, prev: int, i: int, frames: list[_Frame]) -> None:
        """From DEBUG trap `prev` to trap `i`: frames that ended, values that changed."""
        rec = self.timeline[i]
        before, after = self.snap(prev), self.snap(i)
        depth_before = self.timeline[prev].depth
        ended: set[str] = set()
        while frames and frames[-1].caller_depth >= rec.depth:
            frame = frames.pop()
            for name in frame.locals & self.watched:
                if name in frame.found_at_call:
                    self.found[name] = frame.found_at_call[name]
                else:
                    self.found.pop(name, None)
                ended.add(name)
        changed = {
            name
            for name in self.watched - BASH_OWN
            if before.get(name, "\0unset") != after.get(name, "\0unset")
        }
        if rec.depth > depth_before:
            name = rec.text.split(" ")[0] if rec.text else ""
            # what changed on the way in is K=V on the call: it ends with the frame
            frames.append(_Frame(depth_before, name, dict(self.found), set(changed)))
        for name in changed - ended:
            self.note(name, prev)

    def launched(self, launch_i: int, prefix: set[int], launcher: str) -> None:
        """The launch command's own prefix (K=V cmd) and env K=V words reach only the server."""
        j = launch_i - 1
        while j in prefix:
            for w in xtrace_words(self.timeline[j].text):
                m = _NAME_EQ.match(w)
                if m and m.group(1) in self.watched:
                    self.note(m.group(1), launch_i)
            j -= 1
        words = xtrace_words(self.timeline[launch_i].text)
        stop_at = next((k for k, w in enumerate(words) if w == launcher), len(words))
        for name in _env_assignments(words[:stop_at]):
            if name in self.watched:
                self.note(name, launch_i)


def _earlier_context(
    current: tuple[int, str],
    recs: list[_Rec],
    created: dict[str, _Rec],
    contexts: dict[tuple[int, str], list[_Rec]],
    by_pid: dict[int, list[tuple[int, str]]],
) -> tuple[tuple[int, str] | None, int | None]:
    """The context that ran before `current` on the way to the keeper, and where to cut it.

    None when `current` is where the run began.
    """
    pid, inc = current
    origin = created.get(inc)
    if origin is None:
        return None, None
    if origin.pid != pid:  # records of a subshell before its first trap
        return (origin.pid, inc), recs[0].seq
    if origin.kind == "F":
        parent_origin = created.get(origin.parent_inc)
        if (pid, origin.parent_inc) in contexts:  # its own records before the trap
            return (pid, origin.parent_inc), None
        if parent_origin is None:
            return None, None
        return (parent_origin.pid, origin.parent_inc), origin.parent_seq
    # a new bash: exec'd by a subshell of the same pid, or run by its parent
    first = recs[0].index
    for owner in (pid, origin.ppid):
        earlier = [k for k in by_pid.get(owner, []) if contexts[k][0].index < first]
        earlier = [k for k in earlier if k != (pid, inc)]
        if earlier:
            return max(earlier, key=lambda k: contexts[k][0].index), None
    return None, None
