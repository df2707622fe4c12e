"""The documents a newcomer reads agree with the code: exit codes, links, the module map."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import drift.errors

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    "README.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
    "docs/architecture.md",
    "docs/collectors.md",
    "docs/fleet.md",
]


def exit_codes_in_code() -> set[int]:
    """Every exit code drift can end with: its errors' own, and those cli.py decides."""
    codes = {
        cls.exit_code
        for cls in vars(drift.errors).values()
        if isinstance(cls, type) and issubclass(cls, drift.errors.DriftError)
    }
    tree = ast.parse((ROOT / "drift" / "cli.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id.startswith("EXIT_"):
                codes.add(int(node.value.value))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "exit"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            codes.add(int(node.args[0].value))
    return codes


def test_every_exit_code_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = readme[readme.index("**Exit codes**") :].split("\n\n", 1)[0]
    listed = {int(n) for n in re.findall(r"(?:: |; )(\d+) ", paragraph)}
    assert exit_codes_in_code() - {0} <= listed, paragraph
    assert {0, 1, 2, 3, 4, 130} <= listed


def test_links_between_the_documents_resolve() -> None:
    for name in DOCS:
        doc = ROOT / name
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (doc.parent / target).exists(), f"{name} links to {target}, which is missing"


def test_the_architecture_names_modules_that_exist() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"\*\*((?:[a-z_]+/)*[a-z_]+(?:\.py|/))\*\*", text))
    assert len(named) > 15
    for path in named:
        assert (ROOT / "drift" / path).exists(), f"docs/architecture.md names {path}"
