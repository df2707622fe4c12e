"""Kinds of fact: the human name of what a (subject, key) is, and the order kinds are listed in.

Also the few fact keys that more than one part of the analysis groups
together (a process's command line, a checkout's uncommitted work).

A kind ("script export", "live env", "process id" ...) sorts stories whose
scores tie, counts the facts verified unchanged, and picks the weight a fact
gets in ranking (`drift.analysis.rank.Weights.kind_values`).
"""

from __future__ import annotations

# Order of kinds when scores tie, and for listing: config that shapes a
# process first, volatile ids last.
CATEGORY_ORDER = (
    "script export",
    "unit environment",
    "live env",
    "script exec",
    "live flag",
    "unit",
    "script content",
    "file",
    "repo",
    "repo working tree",
    "live command line",
    "service state",
    "command",
    "health",
    "unit runtime",
    "process id",
)

# What systemd says about a unit's runs: volatile context of restarts and
# crash loops, never a suspect of its own.
UNIT_RUNTIME_KEYS = frozenset(
    {
        "unit:sub_state",
        "unit:result",
        "unit:n_restarts",
        "unit:exec_main_status",
        "unit:invocation_id",
        "unit:exec_main_start",
        "unit:journal",
    }
)
# A unit's settings its process starts with, beyond its environment and
# ExecStart (and ``unit:limit:NAME``): each a suspect of its own when changed.
UNIT_SETTING_KEYS = frozenset(
    {
        "unit:exec_start_pre",
        "unit:user",
        "unit:working_directory",
        "unit:cpu_affinity",
        "unit:device_allow",
        "unit:restart",
    }
)


def unit_setting(key: str) -> bool:
    """Whether `key` is one of a unit's launch settings (UNIT_SETTING_KEYS, ``unit:limit:*``)."""
    return key in UNIT_SETTING_KEYS or key.startswith("unit:limit:")


# A unit's environment, from each systemd source: Environment= as loaded and as on
# disk, EnvironmentFile=, PassEnvironment=.
_UNIT_ENVIRONMENT = (
    "unit:environment:",
    "unit:disk_environment:",
    "unit:envfile:",
    "unit:pass_environment:",
)
# The facts of a running process that make up its command line.
COMMAND_LINE_KEYS = ("exe", "argv", "cwd", "user")
# The facts of a git checkout about what is not committed.
WORKTREE_KEYS = ("diff", "dirty", "untracked")
# The fact that says what a file is, one per kind of file (regular, link,
# special): it appears or goes with the file itself.
FILE_IDENTITY_KEYS = ("sha256", "symlink", "type")


def category(subject: str, key: str) -> str:
    """A human name for the kind of fact; for the subjects drift records, one of CATEGORY_ORDER."""
    kind = subject.split(":", 1)[0]
    if kind == "script":
        if key.startswith("export:"):
            return "script export"
        if key in ("content", "symlink"):  # a script swapped for a link: its text went
            return "script content"
        return "script exec"
    if kind == "service":
        if key.startswith("env:"):
            return "live env"
        if key.startswith("flag:"):
            return "live flag"
        if key.startswith(_UNIT_ENVIRONMENT):
            return "unit environment"
        if key in ("unit:active_state", "unit:load_state", "running"):
            return "service state"
        if key in UNIT_RUNTIME_KEYS:
            return "unit runtime"
        if key.startswith("unit:"):
            return "unit"
        if key in COMMAND_LINE_KEYS:
            return "live command line"
        return "process id"
    if kind == "systemd":  # the manager: its environment is every unit's
        return "unit environment" if key.startswith("environment:") else "unit"
    if kind == "repo":
        return "repo working tree" if key in WORKTREE_KEYS else "repo"
    return {"file": "file", "command": "command", "health": "health"}.get(kind, kind)


def category_rank(name: str) -> int:
    """Position of a category in CATEGORY_ORDER; unknown kinds come last."""
    return CATEGORY_ORDER.index(name) if name in CATEGORY_ORDER else len(CATEGORY_ORDER)


def service_name(subject: str) -> str | None:
    """NAME of a ``service:NAME`` subject."""
    kind, _, name = subject.partition(":")
    return name if kind == "service" and name else None
