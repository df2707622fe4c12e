"""What the commands of a launch script are: housekeeping, wrappers, servers, shells.

Knowledge about programs, not about the shell: which commands never are
the service (``curl``, ``sleep``), which run another program after their
own options (``numactl``, ``env``, ``nohup``), and how much a command line
looks like a model server. The evaluator asks; nothing here walks code.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from drift.rooted import HOST, Files

# Commands that prepare the ground, wait or report: never the service.
HOUSEKEEPING = frozenset(
    """. : [ [[ alias awk basename bg break builtin caller cat cd chgrp chmod chown command
    compgen complete continue cp curl cut date declare df dirname disown du echo enable eval
    exit export false fg find free getopts grep hash head help history hostname id ip jobs
    jq kill killall let ln local logger ls mapfile mkdir mktemp mv nc nproc nvidia-smi
    pgrep pidof pip pip3 pkill popd printf ps pushd pwd read readarray readlink readonly
    realpath return rm rmdir sed seq set shift shopt sleep sort source ss stat tail tee test
    timeout_helper touch tput tr trap true type typeset ulimit umask unalias uniq unset wait
    wc wget which whoami xargs yes""".split()
)
# Programs that run another program given after their own options.
WRAPPERS = frozenset(
    {"nohup", "setsid", "numactl", "taskset", "nice", "ionice", "chrt", "stdbuf", "timeout"}
    | {"sudo", "time", "command", "exec", "env", "caffeinate", "unbuffer", "runuser", "su"}
)
# Options of wrappers that take a separate value.
WRAPPER_VALUED = {
    "numactl": frozenset("-N -m -C -p -i -P --cpunodebind --membind --physcpubind".split())
    | frozenset("--preferred --interleave".split()),
    "taskset": frozenset({"-c", "--cpu-list"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-R", "-T", "--user", "--group"}),
    "runuser": frozenset({"-u", "-g", "-G", "--user", "--group"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}),
    "exec": frozenset({"-a"}),
    "chrt": frozenset(),
}
_SERVER_NAMES = frozenset(
    """sglang vllm torchrun trtllm-serve text-generation-launcher deepspeed accelerate
    tritonserver llama-server ollama uvicorn gunicorn hypercorn ray lmdeploy mpirun srun
    dynamo""".split()
)
_PYTHON = re.compile(r"python[0-9.]*")
_SERVERISH = re.compile(r"serve|server|launch|api|router|worker", re.IGNORECASE)
SHELLS = frozenset({"bash", "sh", "dash", "zsh"})


def program_name(word: str) -> str:
    return os.path.basename(word)


def server_score(words: Sequence[str | None]) -> int:
    """How much a command looks like the service: 2 a server, 1 some program, 0 housekeeping.

    `words` are the program and its arguments (None where a word is unknown).
    """
    if not words:
        return 0
    name = words[0]
    if name is None:
        return 1
    base = program_name(name)
    if base in HOUSEKEEPING:
        return 0
    if base in _SERVER_NAMES:
        return 2
    if _PYTHON.fullmatch(base):
        rest = list(words[1:])
        while rest and rest[0] is not None and rest[0].startswith("-") and rest[0] != "-m":
            if rest[0] == "-c":
                return 0
            rest = rest[1:]
        if rest[:1] == ["-m"]:
            module = rest[1] if len(rest) > 1 else None
            if module is None:
                return 1
            if module.split(".")[0] in ("pip", "ensurepip", "venv", "json", "http", "torch"):
                return 0 if module.split(".")[0] != "torch" else 2
            return 2
        script = rest[0] if rest else None
        return 2 if script and _SERVERISH.search(program_name(script)) else 1
    if _SERVERISH.search(base):
        return 2
    return 1


# Housekeeping commands the evaluator gives a meaning to (cwd, variables, code).
MEANINGFUL = frozenset(
    """. : cd pushd popd source set eval exit return read mapfile readarray getopts printf
    shift export declare typeset local readonly unset exec command builtin let tee cp mv""".split()
)


def is_shell_script(path: str, files: Files = HOST) -> bool:
    """A file whose first line names a shell (``#!/bin/bash``, ``#!/usr/bin/env sh``)."""
    first = files.first_line(path, 200)
    if first is None:
        return False
    if not first.startswith(b"#!"):
        return path.endswith(".sh")
    words = first[2:].decode("utf-8", "replace").split()
    names = [program_name(w) for w in words[:2]]
    return any(n in SHELLS for n in names)
