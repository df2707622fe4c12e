"""The JSON Schema (draft 2020-12) of `--format json`, generated from the typed contexts.

The envelope `{drift_result_version, command, data, errors}` with `data` the
command's context: `Investigation` for since, diff and report, `StateView`
for show, `FactHistory` for history, `HistoryLog` for log, `MarkList` for
mark --list, `Comparison` for compare, `FleetSince`
for since --fleet. docs/schema/*.schema.json are this module's output, kept
in the repository for readers and tools; a test fails when they are out of
date. Regenerate them with:

    python -m drift.render.schema docs/schema
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from drift.analysis.comparison import Comparison
from drift.analysis.fleet_since import FleetSince
from drift.analysis.history_log import HistoryLog, MarkList
from drift.analysis.investigation import Investigation
from drift.analysis.plain import field_key
from drift.analysis.views import FactHistory, StateView
from drift.render.envelope import RESULT_VERSION

DRAFT = "https://json-schema.org/draft/2020-12/schema"

# command -> (the commands whose output it is, the context type, what it is)
SCHEMAS: dict[str, tuple[tuple[str, ...], type, str]] = {
    "since": (
        ("since", "diff", "report"),
        Investigation,
        "drift since, drift diff and drift report --format json: ranked suspects with evidence",
    ),
    "show": (("show",), StateView, "drift show --format json: the recorded state at a snapshot"),
    "history": (
        ("history",),
        FactHistory,
        "drift history --format json: every version of the facts matching a pattern",
    ),
    "compare": (
        ("compare",),
        Comparison,
        "drift compare --format json: where a host differs from its siblings",
    ),
    "log": (("log",), HistoryLog, "drift log --format json: the records and marks, newest first"),
    "marks": (
        ("mark --list",),
        MarkList,
        "drift mark --list --format json: every mark, those undone included",
    ),
    "since-fleet": (
        ("since --fleet",),
        FleetSince,
        "drift since --fleet --format json: what changed on the hosts of each role, by change",
    ),
}

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


ERROR_ENTRY: dict[str, Any] = {
    "type": "object",
    "description": "What drift said on stderr: an error that stopped the command (data is "
    "null, exit_code the command's), or a warning about a result still given",
    "properties": {
        "level": {"enum": ["error", "warning"]},
        "message": {"type": "string"},
        "exit_code": {"type": ["integer", "null"]},
    },
    "required": ["level", "message", "exit_code"],
    "additionalProperties": False,
}
"""An entry of the envelope's `errors` (render/envelope.py error_entry, warning_entry)."""


def json_schema(name: str) -> dict[str, Any]:
    """The schema of the JSON output of SCHEMAS[name]: the envelope, its data by $ref."""
    commands, context, title = SCHEMAS[name]
    defs = _Definitions()
    data = defs.schema(context)
    command = {"const": commands[0]} if len(commands) == 1 else {"enum": list(commands)}
    return {
        "$schema": DRAFT,
        "title": title,
        "type": "object",
        "properties": {
            "drift_result_version": {"const": RESULT_VERSION},
            "command": command,
            # null when the command stopped: its `errors` hold the one that stopped it
            "data": {"anyOf": [data, {"type": "null"}]},
            "errors": {"type": "array", "items": ERROR_ENTRY},
        },
        "required": ["drift_result_version", "command", "data", "errors"],
        "additionalProperties": False,
        "$defs": dict(sorted(defs.defs.items())),
    }


def schema_text(name: str) -> str:
    """json_schema(name) as the file docs/schema/NAME.schema.json holds it."""
    return json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n"


class _Definitions:
    """The schemas of Python types; each dataclass defined once in `defs`, used by $ref."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.classes: dict[str, type] = {}

    def schema(self, tp: Any) -> dict[str, Any]:
        """The schema of a scalar, Literal, list, dict, `X | None` or dataclass type."""
        if isinstance(tp, type) and is_dataclass(tp):
            return self._ref(tp)
        origin, args = get_origin(tp), get_args(tp)
        if tp in _SCALARS:
            return {"type": _SCALARS[tp]}
        if tp is Any:
            return {}
        if origin is Literal:
            return {"enum": list(args)}
        if origin in (list, tuple):
            return {"type": "array", "items": self.schema(args[0])}
        if origin is dict:
            values = self.schema(args[1])
            return (
                {"type": "object", "additionalProperties": values} if values else {"type": "object"}
            )
        if origin in (Union, types.UnionType):
            return self._optional(tp)
        raise TypeError(f"no JSON schema for {tp!r}")

    def _ref(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        known = self.classes.setdefault(name, cls)
        if known is not cls:
            raise TypeError(f"two dataclasses named {name}: {known!r} and {cls!r}")
        if name not in self.defs:
            self.defs[name] = {}  # taken before recursing: a type that contains itself ends here
            self.defs[name] = self._object(cls)
        return {"$ref": f"#/$defs/{name}"}

    def _object(self, cls: type) -> dict[str, Any]:
        hints = get_type_hints(cls)
        keys = [(field_key(f.name), hints[f.name]) for f in fields(cls)]
        doc = (cls.__doc__ or "").strip().split("\n\n")[0]
        return {
            "description": " ".join(doc.split()),
            "type": "object",
            "properties": {key: self.schema(tp) for key, tp in keys},
            "required": [key for key, _tp in keys],
            "additionalProperties": False,
        }

    def _optional(self, tp: Any) -> dict[str, Any]:
        """`X | None`: X's schema that also takes null."""
        others = [a for a in get_args(tp) if a is not type(None)]
        if len(others) != 1 or len(get_args(tp)) != 2:
            raise TypeError(f"no JSON schema for {tp!r}: only `X | None` unions")
        inner = self.schema(others[0])
        if set(inner) == {"type"}:
            return {"type": [inner["type"], "null"]}
        if set(inner) == {"enum"}:
            return {"enum": [*inner["enum"], None]}
        return {"anyOf": [inner, {"type": "null"}]}


def write_schemas(folder: Path) -> list[Path]:
    """Write every NAME.schema.json into `folder`; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCHEMAS:
        path = folder / f"{name}.schema.json"
        path.write_text(schema_text(name), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> None:
    """`python -m drift.render.schema FOLDER`: regenerate the schema files in FOLDER."""
    if len(argv) != 1:
        sys.exit("usage: python -m drift.render.schema FOLDER   (the repository's is docs/schema)")
    for path in write_schemas(Path(argv[0])):
        print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
