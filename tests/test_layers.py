"""The layers hold: no module of drift imports one from a layer above its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import module_graph  # noqa: E402


def test_no_module_imports_a_higher_layer() -> None:
    assert module_graph.upward_imports(module_graph.graph()) == []


def test_every_module_is_in_a_layer() -> None:
    for module in module_graph.graph():
        module_graph.layer_of(module)  # KeyError names the module and where to add it


def test_lazy_imports_count_and_an_upward_one_is_named() -> None:
    edges = module_graph.graph()
    # record imports the collectors inside a function, to keep `drift record` lean
    assert any(dep.startswith("collectors.") for dep in edges["record"])
    wrong = module_graph.upward_imports({**edges, "store.query": {"analysis.rank"}})
    assert wrong == ["drift.store.query (store) imports drift.analysis.rank (analysis)"]


def test_the_graph_is_drawn_as_dot_and_the_check_is_a_command() -> None:
    tool = str(ROOT / "tools" / "module_graph.py")
    drawn = subprocess.run([sys.executable, tool, "--dot"], capture_output=True, text=True)
    assert drawn.returncode == 0 and drawn.stdout.startswith("digraph drift {")
    assert '"cli" -> "analysis.investigate";' in drawn.stdout
    checked = subprocess.run([sys.executable, tool], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    assert "every import goes down" in checked.stdout
