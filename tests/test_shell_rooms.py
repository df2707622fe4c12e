"""The seams between the shell reader's rooms: its dispatch tables and the helpers they share."""

from __future__ import annotations

import tree_sitter
import tree_sitter_bash

from drift.shell.evaluate import _Evaluator, evaluate
from drift.shell.patterns import is_literal, shown
from drift.shell.syntax import node_text, parse, pieces_between, walk_nodes
from drift.shell.values import Field
from drift.shell.wrappers import after_exec_options, strip_wrappers

BASH = tree_sitter.Language(tree_sitter_bash.language())


def test_every_table_entry_names_a_node_type_of_the_grammar() -> None:
    """A misspelt key would leave its statements or words unread, silently."""
    for kind in [*_Evaluator.STATEMENTS, *_Evaluator.WORD_FORMS]:
        assert BASH.id_for_node_kind(kind, True) is not None, kind


def test_every_handler_belongs_to_the_evaluator() -> None:
    for handler in [*_Evaluator.STATEMENTS.values(), *_Evaluator.WORD_FORMS.values()]:
        assert getattr(_Evaluator, handler.__name__) is handler


def test_pieces_between_gives_the_children_and_the_text_no_child_covers() -> None:
    tree = parse(b'X="a\nb$Y"')
    string = next(n for n in walk_nodes(tree.root_node) if n.type == "string")
    inner = list(string.children)[1:-1]  # without the quotes
    start, end = inner[0].start_byte, inner[-1].end_byte
    pieces = [
        p if isinstance(p, str) else node_text(p) for p in pieces_between(string, inner, start, end)
    ]
    assert pieces == ["a", "\n", "b", "$Y"]


def test_pieces_between_gives_text_before_the_first_and_after_the_last_child() -> None:
    tree = parse(b'X="a\nb"')
    string = next(n for n in walk_nodes(tree.root_node) if n.type == "string")
    content = [c for c in string.children if c.type == "string_content"]
    pieces = list(pieces_between(string, content[1:], string.start_byte, string.end_byte))
    assert [p if isinstance(p, str) else node_text(p) for p in pieces] == ['"a\n', "b", '"']


def words(*texts: str) -> tuple[Field, ...]:
    return tuple(Field((t,), None) for t in texts)


def test_strip_wrappers_finds_the_program_and_what_env_changed() -> None:
    argv = words("env", "A=1", "-i", "B=2", "-u", "C", "-uD", "numactl", "-N", "0", "nohup", "srv")
    program, changes = strip_wrappers(argv + words("--port", "1"))
    assert program == words("srv", "--port", "1")
    assert changes.cleared
    assert [(name, f.pattern) for name, f in changes.added] == [("B", ("2",))]  # -i dropped A
    assert changes.removed == ["C", "D"]


def test_strip_wrappers_keeps_commands_that_run_nothing_after_them() -> None:
    for argv in (words("command", "-v", "srv"), words("su", "-c", "srv"), words("srv", "x")):
        program, changes = strip_wrappers(argv)
        assert program == argv
        assert not (changes.added or changes.removed or changes.cleared)
    assert strip_wrappers(words("timeout", "-s", "KILL", "10", "srv"))[0] == words("srv")
    assert strip_wrappers(words("taskset", "0x3", "srv"))[0] == words("srv")


def test_after_exec_options() -> None:
    assert after_exec_options(words("exec", "-c", "-a", "name", "srv", "-x")) == (
        words("srv", "-x"),
        True,
    )
    assert after_exec_options(words("exec", "--", "-srv")) == (words("-srv"), False)
    assert after_exec_options(words("exec")) == ((), False)


def test_an_expansion_the_reader_does_not_evaluate_is_one_hole() -> None:
    """``${#X}`` (a length) is not evaluated: the value stays as the script writes it."""
    model = evaluate("/srv/serve.sh", b'X=abc\nexport N="${#X}"\n')
    (binding,) = model.exported["N"]
    assert binding.alts is not None
    (value,) = binding.alts
    assert not is_literal(value.pattern)
    assert shown(value.pattern) == "${#X}"
