"""drift's module graph: who imports whom inside the package, and whether the layers hold.

    python tools/module_graph.py             the layer check (exit 1 on an import upwards)
    python tools/module_graph.py --dot       the graph in Graphviz's DOT, modules grouped
                                             by layer; draw it with `| dot -Tsvg > graph.svg`

Imports are read from the source with `ast` (nothing is imported), including the
lazy ones inside functions, which drift uses to keep `--help` and `record` fast:
a lazy import is still a dependency. docs/architecture.md explains the layers.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "drift"

# Lowest first. A module may import its own layer and those below it, never one above.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "errors",
            "display",
            "timespec",
            "resources",
            "atomic",
            "private_dirs",
            "small_files",
            "rooted",
            "facts",
            "declaration",
            "subjects",
            "json_pointer",
            "names",
            "globs",
        ),
    ),
    ("config", ("config", "scope", "sample_config", "keyfile", "secrets")),
    ("shell", ("shell",)),
    ("collectors", ("collectors",)),
    ("store", ("store",)),
    ("record", ("record",)),
    ("analysis", ("analysis", "marks")),
    ("render", ("render",)),
    ("notify", ("notify",)),
    (
        "cli",
        (
            "cli",
            "cli_context",
            "cli_options",
            "cli_fleet",
            "cli_records",
            "progress",
            "demo",
            "__main__",
            "__init__",
        ),
    ),
]


def module_name(path: Path) -> str:
    """`drift/analysis/rank.py` -> `analysis.rank`; a package's `__init__` is the package."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> Iterator[str]:
    """Every `drift.X` module a file imports (top level or inside a function), without `drift.`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("drift."):
                    yield alias.name.removeprefix("drift.")
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from its own package
                yield package
            elif node.module and node.module.startswith("drift."):
                yield node.module.removeprefix("drift.")


def graph() -> dict[str, set[str]]:
    """module -> the drift modules it imports."""
    out: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        out[name] = {dep for dep in imports_of(path) if dep != name}
    return out


def layer_of(module: str) -> int:
    """The index in LAYERS of the layer a module belongs to (by its first name part)."""
    top = module.split(".", 1)[0]
    for index, (_name, roots) in enumerate(LAYERS):
        if top in roots:
            return index
    raise KeyError(f"drift.{module} is in no layer: add it to LAYERS in tools/module_graph.py")


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    """Each import from a lower layer into a higher one, as a sentence."""
    wrong = []
    for module, deps in sorted(edges.items()):
        for dep in sorted(deps):
            if layer_of(dep) > layer_of(module):
                low, high = LAYERS[layer_of(module)][0], LAYERS[layer_of(dep)][0]
                wrong.append(f"drift.{module} ({low}) imports drift.{dep} ({high})")
    return wrong


def dot(edges: dict[str, set[str]]) -> str:
    """The graph in DOT: one cluster per layer, lowest at the bottom."""
    lines = ["digraph drift {", "  rankdir=BT;", "  node [shape=box, fontsize=10];"]
    for index, (name, _roots) in enumerate(LAYERS):
        members = sorted(m for m in edges if layer_of(m) == index)
        lines.append(f'  subgraph "cluster_{name}" {{ label="{name}";')
        lines += [f'    "{m}";' for m in members]
        lines.append("  }")
    for module, deps in sorted(edges.items()):
        lines += [f'  "{module}" -> "{dep}";' for dep in sorted(deps) if dep in edges]
    lines.append("}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the DOT graph (--dot), or check the layers: exit 1 when an import goes upwards."""
    edges = graph()
    if argv[1:] == ["--dot"]:
        print(dot(edges))
        return 0
    wrong = upward_imports(edges)
    for sentence in wrong:
        print(sentence)
    if not wrong:
        print(f"{len(edges)} modules; every import goes down or stays in its layer")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
