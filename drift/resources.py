"""Find migrations/ and templates/, which live at the repository's top level.

In a wheel they are shipped inside the package (pyproject's force-include
puts them at drift/migrations and drift/templates); in a source checkout or
an editable install they sit beside the package. Either way the answer does
not depend on the working directory.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The folder `name` ("migrations" or "templates") for this installation of drift."""
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"drift is installed without its {name}/ folder (looked in {_PACKAGE})")
