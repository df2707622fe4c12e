"""Evaluate a bash script without running it: what it may launch, with which environment.

The script is parsed with tree-sitter's bash grammar and walked in order
with an abstract environment. Each variable holds every value it may have
(`Binding`), each with the line that assigned it and the conditions it sits
under (``if [ "$MODE" = x ]``, ``case $1 in serve)``). Branches fork the
environment and merge it again; a branch that ``exec``s or ``exit``s ends.
Expansions are evaluated where the value is known (``${X:-d}``, ``${X:=d}``,
``${X:+w}``, ``$X``, arrays, ``$(dirname "$0")``, ``~``); anything else
(``$(cmd)``, a variable the script inherits, its arguments) stays a hole
with its text (see `drift.shell.patterns`). ``source`` and ``.`` are
followed into regular files, ``bash -c "..."`` and ``eval "..."`` strings are
parsed again, and functions run where they are called.

The launch is every ``exec`` that runs a program, and on each path that
does not exec, the last command that looks like the server (a Python
module, ``vllm``, ``sglang``, ... ranks above a helper; ``curl``, ``sleep``
and the like never count), in the foreground or with ``&``. Each launch
keeps the environment it receives at that point. Nothing here reads the
live process: the collector and the analysis match its values against the
possibilities.

The evaluator is one object made of rooms, one module each (see the
package docstring); this module puts them together and says, in two
tables, which room handles which kind of statement and of word.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from drift.rooted import HOST, Files
from drift.shell.assignments import ARITHMETIC_STATEMENTS, Assignments
from drift.shell.declarations import Declarations
from drift.shell.expansion import ParameterExpansion
from drift.shell.flow import ControlFlow
from drift.shell.launches import Launches
from drift.shell.model import ScriptModel
from drift.shell.substitution import CommandSubstitution
from drift.shell.walk import MAX_SOURCED_BYTES
from drift.shell.words import LITERAL_FORMS


class _Evaluator(Launches, Declarations, ControlFlow, CommandSubstitution, ParameterExpansion):
    """One evaluation of one script (and what it sources): every room, and what goes where."""

    STATEMENTS = {
        "program": ControlFlow.s_block,
        "compound_statement": ControlFlow.s_block,
        "do_group": ControlFlow.s_block,
        "subshell": ControlFlow.s_subshell,
        "redirected_statement": Launches.s_redirected,
        "pipeline": ControlFlow.s_pipeline,
        "negated_command": ControlFlow.s_negated,
        "function_definition": ControlFlow.s_function,
        "if_statement": ControlFlow.s_if,
        "case_statement": ControlFlow.s_case,
        "list": ControlFlow.s_list,
        "for_statement": ControlFlow.s_loop,
        "c_style_for_statement": ControlFlow.s_loop,
        "while_statement": ControlFlow.s_loop,
        "variable_assignment": Assignments.s_assignment,
        "variable_assignments": Assignments.s_assignments,
        "declaration_command": Declarations.s_declaration,
        "unset_command": Declarations.s_unset,
        "command": Launches.s_command,
        "test_command": ControlFlow.s_test,
        # statements that are expressions: the insides of (( ... ))
        **dict.fromkeys(ARITHMETIC_STATEMENTS, Assignments.s_arithmetic),
    }
    WORD_FORMS = {
        **LITERAL_FORMS,
        "simple_expansion": ParameterExpansion._simple_expansion,
        "expansion": ParameterExpansion._expansion,
        "command_substitution": CommandSubstitution._substitution,
        "arithmetic_expansion": Assignments._arithmetic_word,
    }


def read_regular(path: str, limit: int = MAX_SOURCED_BYTES) -> bytes | None:
    """A file's bytes if it is a regular file (never a FIFO, device or symlink), else None."""
    return HOST.read_regular(path, limit)


def evaluate(
    path: str,
    data: bytes,
    read: Callable[[str], bytes | None] = read_regular,
    files: Files = HOST,
    start: str | None = None,
    start_label: str = "",
) -> ScriptModel:
    """What the script at `path` (contents `data`) may launch, with which environment.

    `read` fetches files the script sources (None if it cannot be read);
    `files` answers what the script asks of other paths (``[ -f X ]``, ``realpath``).
    `start` is the folder the script is started in, if known (`start_label`
    says how, for the gaps: "the working folder of unit decode.service");
    without it, what depends on it is read as `drift.shell.start` says.
    """
    return _Evaluator(os.path.abspath(path), read, files, start, start_label).run_file(data)
