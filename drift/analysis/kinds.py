"""Kinds of fact: the human name of what a (subject, key) is, and the order kinds are listed in.

The names are the categories the collectors declare (`drift.subjects`).
Also the few sets of fact keys that more than one part of the analysis
groups together (a process's command line, a checkout's uncommitted work),
taken from the same declarations.

A kind ("script export", "live env", "process id" ...) sorts stories whose
scores tie, counts the facts verified unchanged, and picks the weight a fact
gets in ranking (`drift.analysis.rank.Weights.kind_values`).
"""

from __future__ import annotations

from drift.subjects import DECLARED, REPO, SERVICE, UNIT_SETTINGS

# Order of kinds when scores tie, and for listing: config that shapes a
# process first, volatile ids last.
CATEGORY_ORDER = (
    "script export",
    "unit environment",
    "live env",
    "script exec",
    "live flag",
    "engine config",
    "unit",
    "gpu",
    "script content",
    "python package",
    "file",
    "library",
    "repo",
    "repo working tree",
    "cache turnover",
    "live command line",
    "service state",
    "command",
    "cache",
    "health",
    "host role",
    "unit runtime",
    "process id",
)

# What systemd says about a unit's runs: volatile context of restarts and
# crash loops, never a suspect of its own.
UNIT_RUNTIME_KEYS = frozenset(SERVICE.keys_in("unit runtime"))
# A unit's settings its process starts with, beyond its environment and
# ExecStart (and ``unit:limit:NAME``): each a suspect of its own when changed.
UNIT_SETTING_KEYS = frozenset(k.key for k in UNIT_SETTINGS if not k.placeholder)
_UNIT_SETTING_PREFIXES = tuple(k.key for k in UNIT_SETTINGS if k.placeholder)


def unit_setting(key: str) -> bool:
    """Whether `key` is one of a unit's launch settings (`drift.subjects.UNIT_SETTINGS`)."""
    return key in UNIT_SETTING_KEYS or key.startswith(_UNIT_SETTING_PREFIXES)


# The facts of a running process that make up its command line, the story's root first.
COMMAND_LINE_KEYS = SERVICE.keys_in("live command line")
# The facts of a git checkout about what is not committed, the story's root first.
WORKTREE_KEYS = REPO.keys_in("repo working tree")
# The fact that says what a file is, one per kind of file (regular, link,
# special): it appears or goes with the file itself.
FILE_IDENTITY_KEYS = ("sha256", "symlink", "type")

category = DECLARED.category
"""A human name for the kind of fact (subject, key): the category its key is declared
with (`drift.subjects`); for the subjects drift records, one of CATEGORY_ORDER."""


def category_rank(name: str) -> int:
    """Position of a category in CATEGORY_ORDER; unknown kinds come last."""
    return CATEGORY_ORDER.index(name) if name in CATEGORY_ORDER else len(CATEGORY_ORDER)


def service_name(subject: str) -> str | None:
    """NAME of a ``service:NAME`` subject."""
    kind, _, name = subject.partition(":")
    return name if kind == "service" and name else None
