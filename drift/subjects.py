"""Every kind of subject drift records and every key its facts may have, declared once.

Each key says what it means, the category the analysis files it under and
how redaction treats its values (`drift.declaration`). The collectors'
registry (`drift.collectors.registry`) says which collector writes which
kind; the analysis and redaction read `DECLARED`, the lookups built from
`SUBJECT_KINDS`, so a new kind of fact needs its declaration here and nothing
else. docs/collectors.md lists them all (a test keeps the table in step).
"""

from __future__ import annotations

from drift.declaration import Declarations, FactKey, SubjectKind
from drift.facts import LIVE_UNREADABLE

_PROCESS = "process id"
_COMMAND_LINE = "live command line"
_STATE = "service state"
_UNIT = "unit"

UNIT_SETTINGS = (
    FactKey("unit:exec_start_pre", "its ExecStartPre= command lines, one a line", _UNIT, "value"),
    FactKey("unit:user", "its User=, when set", _UNIT, "value"),
    FactKey("unit:working_directory", "its WorkingDirectory=, when set", _UNIT, "value"),
    FactKey("unit:cpu_affinity", "its CPUAffinity=, when set", _UNIT, "value"),
    FactKey("unit:device_allow", "its DeviceAllow= entries, one a line", _UNIT, "value"),
    FactKey("unit:restart", "its Restart=, when not `no`", _UNIT, "value"),
    FactKey(
        "unit:limit:",
        "a Limit*= its files set, as systemd applies it (`SOFT:HARD` when they differ)",
        _UNIT,
        "value",
        "NAME",
    ),
)
"""Settings a unit starts its process with, beyond its environment and ExecStart: each
change a suspect of its own, pending until a restart (`drift.analysis.kinds.unit_setting`)."""

# How the unit's last run went: volatile context of restarts and crash loops, never a suspect.
_RUNTIME = "unit runtime"
_UNIT_RUNTIME = (
    FactKey(
        "unit:sub_state",
        "systemd's SubState (running, auto-restart, failed ...)",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:result",
        "systemd's Result of the last run (success, exit-code ...)",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:n_restarts",
        "systemd's NRestarts: automatic restarts since the last start by hand",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:exec_main_status",
        "how the last main process ended: `exited 1`, `killed SIGSEGV`, `dumped SIGABRT`",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:invocation_id",
        "systemd's InvocationID of the current (or last) run",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:exec_main_start",
        "when systemd started the current (or last) main process, to the microsecond",
        _RUNTIME,
        "value",
    ),
    FactKey(
        "unit:journal",
        "while the unit fails: its journal lines of its last few runs, a few each",
        _RUNTIME,
        "value",
    ),
)

_PYTHON = "python package"
PYTHON_KEYS = (
    FactKey(
        "python",
        "a Python process's sys.prefix: its venv's folder, or the base prefix",
        _PYTHON,
        "value",
    ),
    FactKey(
        "python:path",
        "the folders its distributions are found in, in sys.path order",
        _PYTHON,
        "value",
    ),
    FactKey(
        "package:",
        "the version of a distribution on its path (the first wins)",
        _PYTHON,
        "never",
        "NAME",
    ),
    FactKey(
        "package_source:",
        "where a distribution was installed from (direct_url.json)",
        _PYTHON,
        "value",
        "NAME",
    ),
    FactKey(
        "package_head:",
        "the HEAD commit of the checkout an editable install points at",
        _PYTHON,
        "never",
        "NAME",
    ),
)
"""What a Python service runs (`drift.collectors.packages`): its interpreter and distributions."""
# The files a process has mapped executable (`drift.collectors.libraries`): its code.
_LIBRARY_KEYS = (
    FactKey(
        "lib:",
        "the SHA-256 of a file it has mapped executable (its program, a shared library)",
        "library",
        "never",
        "PATH",
    ),
    FactKey(
        "lib_disk:",
        "only while PATH on disk is no longer the mapped file: its SHA-256 now, or `deleted`",
        "library",
        "never",
        "PATH",
    ),
)

SERVICE = SubjectKind(
    "service",
    "NAME",
    "the main process of a [[services]] entry, as it runs now",
    (
        FactKey(
            "running", '"true" while the process runs, "false" once it is gone', _STATE, "value"
        ),
        FactKey("pid", "its process id", _PROCESS, "never"),
        FactKey(
            "started_at",
            "when it started (ISO 8601, UTC): systemd's stamp for a unit's main process, "
            "else to the clock tick",
            _PROCESS,
            "never",
        ),
        FactKey("ppid", "its parent's process id", _PROCESS, "value"),
        # the command line's keys in the order its story picks a root: the executable first
        FactKey("exe", "the executable it runs", _COMMAND_LINE, "value"),
        FactKey("argv", "its command line, a JSON list of words", _COMMAND_LINE, "value"),
        FactKey(
            "title",
            "the title it wrote over its command line (setproctitle): then its argv, flags "
            "and environment cannot be read",
            _COMMAND_LINE,
            "value",
        ),
        FactKey("cwd", "its working folder", _COMMAND_LINE, "value"),
        FactKey("user", "the user it runs as", _COMMAND_LINE, "value"),
        FactKey(
            "flag:",
            "one flag of its command line and the flag's value",
            "live flag",
            "name",
            "--NAME",
        ),
        FactKey("env:", "one variable of its live environment", "live env", "name", "NAME"),
        FactKey("matches", "how many processes the `match` regex found", _PROCESS, "value"),
        FactKey("unit:load_state", "systemd's LoadState of the unit", _STATE, "value"),
        FactKey("unit:active_state", "systemd's ActiveState of the unit", _STATE, "value"),
        FactKey("unit:fragment_path", "the unit file systemd loaded", _UNIT, "value"),
        FactKey("unit:drop_ins", "its drop-in files, one a line", _UNIT, "value"),
        FactKey(
            "unit:environment_files", "its EnvironmentFile= entries, one a line", _UNIT, "value"
        ),
        FactKey("unit:exec_start", "its ExecStart= command lines, one a line", _UNIT, "value"),
        FactKey(
            "unit:need_daemon_reload",
            '"yes" when unit files changed since systemd read them',
            _UNIT,
            "value",
        ),
        FactKey(
            "unit:environment:",
            "one variable of the unit's Environment=",
            "unit environment",
            "name",
            "NAME",
            moves="line",
        ),
        *UNIT_SETTINGS,
        *_UNIT_RUNTIME,
        FactKey(
            "unit:file:",
            "the text of its unit file or a drop-in, on disk now",
            _UNIT,
            "value",
            "PATH",
        ),
        FactKey(
            "unit:disk_environment:",
            "one variable its files on disk set with Environment= (what a daemon-reload loads)",
            "unit environment",
            "name",
            "NAME",
            moves="line",
        ),
        FactKey(
            "unit:envfile:",
            "one variable its EnvironmentFile= files set now (read at its next start)",
            "unit environment",
            "name",
            "NAME",
            moves="line",
        ),
        FactKey(
            "unit:envfile_sha256:",
            "the SHA-256 of one of its EnvironmentFile= files",
            _UNIT,
            "value",
            "PATH",
        ),
        FactKey(
            "unit:envfile_ignored",
            "lines of its EnvironmentFile= files systemd ignores (not a variable name), "
            "as `FILE:LINE: NAME=…` (the value is not kept)",
            _UNIT,
            "value",
        ),
        FactKey(
            "unit:pass_environment:",
            "one variable PassEnvironment= hands on from the manager's own environment",
            "unit environment",
            "name",
            "NAME",
        ),
        *PYTHON_KEYS,
        *_LIBRARY_KEYS,
    ),
    # a process that rewrote its title: one error for its argv, flags, environment, Python
    notes=(LIVE_UNREADABLE,),
    undeclared=(("unit:", _UNIT), ("", _PROCESS)),
)

SYSTEMD = SubjectKind(
    "systemd",
    "manager",
    "the systemd manager of the services found by unit (one per `systemctl`)",
    (
        FactKey(
            "environment:",
            "one variable of its environment (`systemctl show-environment`): units start with it",
            "unit environment",
            "name",
            "NAME",
        ),
    ),
    undeclared=(("", _UNIT),),  # the manager: its environment is every unit's, the rest its own
)

SCRIPT = SubjectKind(
    "script",
    "PATH",
    "a [[services]] entry's serve script, or a file it sources; read, never run",
    (
        FactKey("content", "the whole text", "script content", "value"),
        FactKey(
            "symlink",
            "the target of a script that is a symlink (never followed)",
            "script content",
            "value",
            moves="provenance",  # where it was read (the service that runs it) is its place
        ),
        FactKey(
            "export:",
            "a variable the launched command may receive, every value it may have",
            "script export",
            "name",
            "NAME",
            moves="provenance",
        ),
        FactKey(
            "exec",
            "the command the script launches, every form it may take",
            "script exec",
            "value",
            moves="provenance",
        ),
        FactKey(
            "flag:",
            "one flag of the launched command, every value it may have",
            "script exec",
            "name",
            "--NAME",
            moves="provenance",
        ),
    ),
    notes=("reading",),
    undeclared=(("", "script exec"),),
)

FILE = SubjectKind(
    "file",
    "PATH",
    "a file a [[files]] glob matched (an error on `file:DIR/` covers a whole folder)",
    (
        FactKey("sha256", "its content's SHA-256, or why it was not read", "file", "never"),
        FactKey("size", "its size in bytes", "file", "never"),
        FactKey("mode", "its permission bits, in octal", "file", "never"),
        FactKey("symlink", "the target of a symlink (never followed)", "file", "value"),
        FactKey(
            "type", "fifo, socket, char-device or block-device (never opened)", "file", "value"
        ),
        FactKey("content", "its text, for a set with `content = true`", "file", "value"),
    ),
)

FILE_SET = SubjectKind(
    "files",
    "SET",
    "a [[files]] set, in errors only: a pattern of it matched nothing",
)

REPO = SubjectKind(
    "repo",
    "PATH",
    "the git checkout of a [[repos]] entry, by its path as configured",
    (
        FactKey("head", "the commit HEAD names", "repo", "never"),
        FactKey("branch", 'the branch checked out, or "(detached)"', "repo", "value"),
        # the working tree's keys in the order its story picks a root: the patch first
        FactKey("diff", "the SHA-256 of `git diff HEAD`'s patch", "repo working tree", "value"),
        FactKey(
            "dirty", '"yes" when tracked content differs from HEAD', "repo working tree", "never"
        ),
        FactKey(
            "untracked",
            "how many untracked files (`1000+` past 1,000)",
            "repo working tree",
            "value",
        ),
        FactKey(
            "state", "clean, empty, or an operation in progress (rebasing ...)", "repo", "value"
        ),
        FactKey("shallow", '"yes" for a shallow clone', "repo", "value"),
    ),
)

COMMAND = SubjectKind(
    "command",
    "NAME",
    "a [[commands]] entry, run under a time and output bound",
    (
        FactKey("stdout", "what it printed (at most 1 MiB)", "command", "value"),
        FactKey("exit", 'its exit code, or "signal NAME"', "command", "never"),
    ),
)

HEALTH = SubjectKind(
    "health",
    "NAME",
    "a [[health]] check, run at every record",
    (FactKey("ok", '"true" when the check exited 0 within its timeout', "health", "never"),),
)

ENDPOINT = SubjectKind(
    "endpoint",
    "NAME",
    "the JSON document an [[endpoints]] entry's server answers with, leaf by leaf",
    (
        # judged by name: the pointer's names (``/api_key``, ``/auth/hf_token``) say what
        # a leaf holds, as a variable's name does
        FactKey(
            "json:",
            "one leaf of the document (a scalar, or an empty object or array) as JSON text, "
            "by its RFC 6901 pointer",
            "engine config",
            "name",
            "POINTER",
            json_text=True,
        ),
    ),
)

# A cache holds thousands of files named by hashes: one summary, never a fact per file.
CACHE = SubjectKind(
    "cache",
    "NAME",
    "a JIT or kernel cache of a [[caches]] entry: every file below its folders, summed up",
    (
        # the summary's keys in the order its story picks a root: the digest moves on any change
        FactKey(
            "digest",
            'SHA-256 over every file\'s path, size and mtime (content with `hash = "content"`)',
            "cache",
            "never",
        ),
        FactKey("files", "how many files it holds", "cache", "never"),
        FactKey("bytes", "their size in bytes, summed", "cache", "never"),
        FactKey(
            "newest", "the newest file's mtime (ISO 8601, UTC); none when empty", "cache", "never"
        ),
        FactKey(
            "oldest",
            "the oldest file's mtime (ISO 8601, UTC): it moves when old files go, not when "
            "new ones come",
            "cache turnover",
            "never",
        ),
    ),
)

_GPU = "gpu"
GPU_PENDING_KEYS = ("ecc.mode.pending", "mig.mode.pending")
"""Settings a GPU applies only at its next reset or reboot (`drift.analysis.gpu_stories`)."""

# Keys are nvidia-smi's own --query-gpu names where it has one; values as nvidia-smi
# writes them, "N/A" where it has none. Never a reading that moves by itself
# (temperature, utilisation, memory used, clocks now, power draw, processes, fans).
GPU = SubjectKind(
    "gpu",
    "UUID",
    "an NVIDIA GPU by its UUID, and `gpu:driver` for the driver they share (nvidia-smi or NVML)",
    (
        FactKey("driver_version", "of `gpu:driver`: the NVIDIA driver loaded", _GPU, "value"),
        FactKey(
            "cuda_version", "of `gpu:driver`: the CUDA version that driver supports", _GPU, "value"
        ),
        FactKey("index", "its index, as nvidia-smi and NVML number it", _GPU, "value"),
        FactKey("name", "its product name", _GPU, "value"),
        FactKey("pci.bus_id", "its PCI bus id", _GPU, "value"),
        FactKey("vbios_version", "its VBIOS version", _GPU, "value"),
        FactKey("persistence_mode", "Enabled or Disabled", _GPU, "value"),
        FactKey("compute_mode", "Default, Exclusive_Process or Prohibited", _GPU, "value"),
        FactKey("ecc.mode.current", "its ECC mode", _GPU, "value"),
        FactKey("ecc.mode.pending", "its ECC mode after the next reset", _GPU, "value"),
        FactKey("mig.mode.current", "its MIG mode", _GPU, "value"),
        FactKey("mig.mode.pending", "its MIG mode after the next reset", _GPU, "value"),
        FactKey(
            "mig.devices",
            "its MIG devices, one a line: GPU instance, compute instance, SMs",
            _GPU,
            "value",
        ),
        FactKey("enforced.power.limit", "the power limit it enforces (700.00 W)", _GPU, "value"),
        FactKey("power.limit", "the power limit software set (nvidia-smi -pl)", _GPU, "value"),
        FactKey("power.default_limit", "its default power limit", _GPU, "value"),
        FactKey(
            "clocks.applications.graphics", "its application graphics clock (MHz)", _GPU, "value"
        ),
        FactKey("clocks.applications.memory", "its application memory clock", _GPU, "value"),
        FactKey(
            "clocks.default_applications.graphics",
            "its default application graphics clock",
            _GPU,
            "value",
        ),
        FactKey(
            "clocks.default_applications.memory",
            "its default application memory clock",
            _GPU,
            "value",
        ),
        FactKey("clocks.max.graphics", "its maximum graphics clock", _GPU, "value"),
        FactKey("clocks.max.sm", "its maximum SM clock", _GPU, "value"),
        FactKey("clocks.max.memory", "its maximum memory clock", _GPU, "value"),
    ),
)


NOTIFY = SubjectKind(
    "notify",
    "NAME",
    "a [[notify]] entry, in errors only: the record's changes could not be sent",
    notes=("sent",),
)

HOST = SubjectKind(
    "host",
    "drift.toml",
    "what drift.toml says this host is in a fleet (`role`): `drift compare` groups hosts by it",
    (FactKey("role", 'the role, as `role = "decode"` gives it', "host role", "value"),),
)


SUBJECT_KINDS = (
    SERVICE,
    SYSTEMD,
    SCRIPT,
    FILE,
    FILE_SET,
    REPO,
    COMMAND,
    HEALTH,
    GPU,
    ENDPOINT,
    CACHE,
    HOST,
)
"""Every kind of subject drift records; a collector writes only kinds listed here."""

AFTER_RECORD_KINDS = (NOTIFY,)
"""Subjects a record's own steps after collecting write errors on (`drift.notify`)."""

DECLARED = Declarations((*SUBJECT_KINDS, *AFTER_RECORD_KINDS))
"""The lookups the analysis (`DECLARED.category`) and redaction read, built once at import."""
