"""The program a command line runs once its wrappers are removed.

``env K=V numactl -N0 nohup srv`` runs ``srv``, with K set in its
environment; ``exec -c srv`` runs ``srv`` with an empty one. What a wrapper
is, and which of its options take a value, is `drift.shell.commands`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from drift.shell.commands import WRAPPER_VALUED, WRAPPERS, program_name
from drift.shell.patterns import Hole, Part, Pattern, pattern
from drift.shell.values import Field, field_literal


@dataclass
class EnvChanges:
    """What ``env`` in a wrapper chain does to the environment the program receives."""

    added: list[tuple[str, Field]] = field(default_factory=list)  # env K=V
    removed: list[str] = field(default_factory=list)  # env -u K
    cleared: bool = False  # env -i
    opaque: bool = False  # conda run: an environment drift does not read


def strip_wrappers(argv: tuple[Field, ...]) -> tuple[tuple[Field, ...], EnvChanges]:
    """The program a wrapper chain runs: ``env K=V numactl -N0 nohup srv`` -> ``srv``.

    Returns the program's fields and what ``env`` changed on the way.
    """
    changes = EnvChanges()
    k = 0
    while k < len(argv):
        word = field_literal(argv[k])
        if _runs_in_env(argv, k):
            # the environment's activation scripts may export anything
            changes.opaque = True
            k = _after_env_options(argv, k + 2)
            continue
        if word is None or not _is_wrapper(program_name(word), argv, k):
            break
        k = _after_options(program_name(word), argv, k + 1, changes)
    return argv[k:], changes


ENV_RUNNERS = frozenset({"conda", "mamba", "micromamba"})
"""Environment managers whose ``run`` runs a program inside an environment they activate."""

_ENV_RUN_VALUED = frozenset("-n --name -p --prefix --cwd -a --attach -e --env --label".split())


def _runs_in_env(argv: tuple[Field, ...], k: int) -> bool:
    """True for ``conda run`` (``mamba run``, ``"$CONDA" run`` where CONDA may be conda)."""
    if k + 1 >= len(argv) or field_literal(argv[k + 1]) != "run":
        return False
    return any(program_name(text) in ENV_RUNNERS for text in _texts(argv[k].pattern))


def _texts(item: object) -> list[str]:
    """Every literal text in a pattern, the options of its choices included."""
    if isinstance(item, str):
        return [item]
    if isinstance(item, Hole):
        return [t for option in item.options for t in _texts(option)]
    if isinstance(item, tuple | list):
        return [t for part in item for t in _texts(part)]
    return []


def _after_env_options(argv: tuple[Field, ...], k: int) -> int:
    """Where the program after ``conda run``'s options (from `k`) starts."""
    while k < len(argv):
        w = field_literal(argv[k])
        if w is None or not w.startswith("-"):
            break
        k += 1
        if w == "--":
            break
        if w in _ENV_RUN_VALUED:
            k += 1
    return k


def _is_wrapper(base: str, argv: tuple[Field, ...], k: int) -> bool:
    """True if the program at `k` runs the rest of the line (``command -v`` does not)."""
    if base not in WRAPPERS or base == "su":
        return False
    return not (
        base == "command" and k + 1 < len(argv) and field_literal(argv[k + 1]) in ("-v", "-V")
    )


def _after_options(base: str, argv: tuple[Field, ...], k: int, changes: EnvChanges) -> int:
    """Where the program after wrapper `base` starts: its options (from `k`) skipped."""
    valued = WRAPPER_VALUED.get(base, frozenset())
    positional_skips = 1 if base == "timeout" else 0  # timeout DURATION cmd
    while k < len(argv):
        w = field_literal(argv[k])
        if w is None:
            if base == "env" and _env_assignment(argv[k], changes):
                k += 1  # K=$VALUE: a value drift may not know, still env's own word
                continue
            break
        if base == "env":
            used = _env_words(argv, k, w, changes)
            if used:
                k += used
                continue
        if base == "taskset" and not w.startswith("-") and positional_skips == 0:
            # taskset MASK cmd (without -c)
            if re.fullmatch(r"(0x)?[0-9a-fA-F,-]+", w):
                k += 1
                break
        if w == "--":
            k += 1
            break
        if w.startswith("-") and len(w) > 1:
            k += 1
            if w in valued or (w[:2] in valued and len(w) == 2):
                k += 1
            continue
        if positional_skips:
            positional_skips -= 1
            k += 1
            continue
        break
    return k


def _env_words(argv: tuple[Field, ...], k: int, w: str, changes: EnvChanges) -> int:
    """How many words from `k` are ``env``'s own (``-i``, ``-u K``, ``K=V``), noted in `changes`."""
    if w in ("-i", "--ignore-environment", "-"):
        changes.cleared = True
        changes.added.clear()
        return 1
    if w in ("-u", "--unset") and k + 1 < len(argv):
        name = field_literal(argv[k + 1])
        if name:
            changes.removed.append(name)
        return 2
    if w.startswith("-u") and len(w) > 2:
        changes.removed.append(w[2:])
        return 1
    match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", w, re.S)
    if match is not None:
        f = argv[k]
        value = _pattern_after(f.pattern, len(match.group(1)) + 1)
        changes.added.append((match.group(1), replace(f, pattern=value)))
        return 1
    return 0


def _env_assignment(f: Field, changes: EnvChanges) -> bool:
    """``env K=$V``: True (noted in `changes`) if the word's literal start is ``NAME=``."""
    head = f.pattern[0] if f.pattern and not f.spread else None
    match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", head) if isinstance(head, str) else None
    if match is None:
        return False
    value = _pattern_after(f.pattern, len(match.group(0)))
    changes.added.append((match.group(1), replace(f, pattern=value)))
    return True


def after_exec_options(argv: tuple[Field, ...]) -> tuple[tuple[Field, ...], bool]:
    """The program ``exec [-c] [-a NAME] program ...`` runs; True if ``-c`` empties its env."""
    cleared = False
    k = 1
    while k < len(argv):
        word = field_literal(argv[k])
        if word is None or not word.startswith("-") or word == "-":
            break
        k += 1
        if word == "--":
            break
        if "c" in word:
            cleared = True
        if "a" in word:
            k += 1  # -a NAME
    return argv[k:], cleared


def _pattern_after(p: Pattern, skip: int) -> Pattern:
    """The pattern without its first `skip` literal characters (``K=`` of ``K=V``)."""
    out: list[Part] = []
    for part in p:
        if skip and isinstance(part, str):
            cut = min(skip, len(part))
            part, skip = part[cut:], skip - cut
        out.append(part)
    return pattern(*out) or ("",)
