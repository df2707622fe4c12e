"""Tools for tests/test_contract.py: what a Jinja template reads, and a JSON Schema check.

`TemplateReads` follows every attribute chain of a template (loop variables,
`set` names and macro arguments back to the context); `Shape` says whether a
context has a path; `Validator` checks JSON against the subset of JSON Schema
draft 2020-12 that drift.render.schema writes.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Union, get_args, get_origin, get_type_hints

from jinja2 import Environment, nodes

from drift.analysis.plain import field_key


def unwrap(tp: Any) -> Any:
    """`X | None` as X."""
    if get_origin(tp) in (Union, types.UnionType):
        (inner,) = [a for a in get_args(tp) if a is not type(None)]
        return inner
    return tp


Route = tuple[str, ...]  # ("suspects", "[]", "changes", "[]", "where")
JINJA_NAMES = {"loop", "range", "dict", "lipsum", "cycler", "joiner", "namespace", "caller"}


class Shape:
    """What is at each path of a context: its fields, its items, or a value (a str, a dict)."""

    def __init__(self, tp: Any, extras: tuple[str, ...] = ()) -> None:
        tp = unwrap(tp)
        self.fields: dict[str, Shape] | None = None
        self.item: Shape | None = None
        if is_dataclass(tp) and isinstance(tp, type):
            hints = get_type_hints(tp)
            self.fields = {field_key(f.name): Shape(hints[f.name]) for f in fields(tp)}
            self.fields.update({name: Shape(str) for name in extras})
        elif get_origin(tp) in (list, tuple):
            self.item = Shape(get_args(tp)[0])

    def missing(self, path: Route) -> str | None:
        """The first part of `path` that is not there, or None when all of it is.

        Past a value (a string, a number, a free-form dict such as provenance)
        anything goes: `.startswith`, `.get("pid")`, `.items()`.
        """
        shape: Shape = self
        for i, part in enumerate(path):
            if shape.fields is not None:
                if part not in shape.fields:
                    return ".".join(path[: i + 1]).replace(".[]", "[]")
                shape = shape.fields[part]
            elif shape.item is not None:
                if part != "[]":
                    return ".".join(path[: i + 1]).replace(".[]", "[]")
                shape = shape.item
            else:
                return None
        return None


@dataclass
class Binding:
    """What a template name stands for: context paths, or constants from a literal loop."""

    paths: set[Route] = field(default_factory=set)
    consts: set[str] = field(default_factory=set)


class TemplateReads:
    """Every context path a template reads, loop variables, `set` names and macro arguments
    followed back to the context. A macro argument stands for every value passed to it: a
    path it reads must exist in at least one of them."""

    def __init__(self, source: str, roots: set[str]) -> None:
        self.tree = Environment().parse(source)
        self.roots = roots
        self.reads: set[frozenset[Route]] = set()  # each: the paths one expression may be
        self.free: set[str] = set()  # names neither bound in the template nor in the context
        self.macros = {m.name: m for m in self.tree.find_all(nodes.Macro)}
        self.arguments: dict[str, dict[str, set[Route]]] = {m: {} for m in self.macros}
        self.walk(self.tree, {})
        for _ in range(10):  # macros that call macros: until no argument learns a new path
            before = repr(self.arguments)
            for name, macro in self.macros.items():
                scope = {
                    a.name: Binding(set(self.arguments[name].get(a.name, ()))) for a in macro.args
                }
                scope.update({n: Binding() for n in ("varargs", "kwargs")})
                for statement in macro.body:
                    self.walk(statement, scope)
            if repr(self.arguments) == before:
                break

    def walk(self, node: nodes.Node, scope: dict[str, Binding]) -> None:
        if isinstance(node, nodes.Macro):
            return  # walked with its arguments' paths
        if isinstance(node, nodes.For):
            self.loop(node, scope)
        elif isinstance(node, nodes.Assign) and isinstance(node.target, nodes.Name):
            scope[node.target.name] = Binding(self.resolve(node.node, scope))
        else:
            for child in node.iter_child_nodes():
                self.visit(child, scope)

    def visit(self, node: nodes.Node, scope: dict[str, Binding]) -> None:
        if isinstance(node, nodes.Expr):
            self.resolve(node, scope)
        else:
            self.walk(node, scope)

    def loop(self, node: nodes.For, scope: dict[str, Binding]) -> None:
        inner = dict(scope)
        items = {p + ("[]",) for p in self.resolve(node.iter, scope)}
        targets = node.target.items if isinstance(node.target, nodes.Tuple) else [node.target]
        try:
            literal = node.iter.as_const()  # ("untracked", "-", "No longer tracked"), ...
        except nodes.Impossible:
            literal = None
        for i, target in enumerate(targets):
            consts: set[str] = set()
            if literal is not None:
                values = [v[i] if isinstance(node.target, nodes.Tuple) else v for v in literal]
                consts = {v for v in values if isinstance(v, str)}
            assert isinstance(target, nodes.Name)
            inner[target.name] = Binding(items if len(targets) == 1 else set(), consts)
        if node.test is not None:
            self.resolve(node.test, inner)
        for statement in node.body:
            self.walk(statement, inner)
        for statement in node.else_:
            self.walk(statement, scope)

    def resolve(self, node: nodes.Node, scope: dict[str, Binding]) -> set[Route]:
        """The context paths `node` may evaluate to (recording each read on the way)."""
        found: set[Route] = set()
        if isinstance(node, nodes.Name):
            if node.name in scope:
                found = set(scope[node.name].paths)
            elif node.name in self.roots:
                found = {(node.name,)}
            elif node.name not in self.macros and node.name not in JINJA_NAMES:
                self.free.add(node.name)
        elif isinstance(node, nodes.Getattr):
            found = {p + (node.attr,) for p in self.resolve(node.node, scope)}
        elif isinstance(node, nodes.Getitem):
            found = self.item(node, scope)
        elif (
            isinstance(node, nodes.Call)
            and isinstance(node.node, nodes.Name)
            and (node.node.name in self.macros)
        ):
            self.call(node, node.node.name, scope)
        else:
            for child in node.iter_child_nodes():
                self.visit(child, scope)
        if found:
            self.reads.add(frozenset(found))
        return found

    def item(self, node: nodes.Getitem, scope: dict[str, Binding]) -> set[Route]:
        """`x["keys"]`, `x[0]`, `x[:20]`, `scope[part]` with `part` from a literal loop."""
        bases = self.resolve(node.node, scope)
        arg = node.arg
        if isinstance(arg, nodes.Slice):
            self.visit(arg, scope)
            return bases
        if isinstance(arg, nodes.Const):
            part = arg.value if isinstance(arg.value, str) else "[]"
            return {p + (part,) for p in bases}
        if isinstance(arg, nodes.Name) and arg.name in scope and scope[arg.name].consts:
            return {p + (c,) for p in bases for c in scope[arg.name].consts}
        self.resolve(arg, scope)
        return set()  # a key known only when rendering: not checked

    def call(self, node: nodes.Call, macro: str, scope: dict[str, Binding]) -> None:
        names = [a.name for a in self.macros[macro].args]
        given = list(zip(names, node.args, strict=False))
        given += [(k.key, k.value) for k in node.kwargs]
        for name, value in given:
            self.arguments[macro].setdefault(name, set()).update(self.resolve(value, scope))

    def problems(self, shape: Shape) -> list[str]:
        """What the template reads that the context does not have."""
        out = [f"{name} (not in the context)" for name in sorted(self.free)]
        for alternatives in self.reads:
            missing = [shape.missing(p) for p in sorted(alternatives)]
            if all(m is not None for m in missing):
                out.append(" or ".join(sorted({str(m) for m in missing})))
        return sorted(set(out))


class Validator:
    """JSON Schema draft 2020-12, only the keywords drift.render.schema writes (others are refused,
    so the generator cannot start using one this does not check)."""

    TYPES: dict[str, Any] = {
        "string": str,
        "integer": int,
        "number": (int, float),
        "boolean": bool,
        "null": type(None),
        "object": dict,
        "array": list,
    }
    KNOWN = {"$schema", "title", "description", "$defs", "$ref", "type", "enum", "const"}
    KNOWN |= {"properties", "required", "additionalProperties", "items", "anyOf"}

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.seen: set[str] = set()  # the $defs some value was checked against

    def errors(self, value: Any, schema: dict[str, Any] | None = None, at: str = "") -> list[str]:
        schema = self.schema if schema is None else schema
        assert set(schema) <= self.KNOWN, f"unknown keywords {set(schema) - self.KNOWN}"
        if "$ref" in schema:
            name = schema["$ref"].removeprefix("#/$defs/")
            self.seen.add(name)
            return self.errors(value, self.schema["$defs"][name], at)
        if "anyOf" in schema:
            options = [self.errors(value, s, at) for s in schema["anyOf"]]
            return [] if any(not o for o in options) else [e for o in options for e in o]
        out = self._type(value, schema, at)
        if out:
            return out
        if isinstance(value, dict):
            out += self._object(value, schema, at)
        if isinstance(value, list) and "items" in schema:
            for i, item in enumerate(value):
                out += self.errors(item, schema["items"], f"{at}[{i}]")
        return out

    def _type(self, value: Any, schema: dict[str, Any], at: str) -> list[str]:
        if "const" in schema and value != schema["const"]:
            return [f"{at}: {value!r} is not {schema['const']!r}"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{at}: {value!r} is not one of {schema['enum']}"]
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            ok = any(
                isinstance(value, self.TYPES[n])
                and not (isinstance(value, bool) and n != "boolean")
                for n in names
            )
            if not ok:
                return [f"{at}: {value!r} is not {' or '.join(names)}"]
        return []

    def _object(self, value: dict[str, Any], schema: dict[str, Any], at: str) -> list[str]:
        out = [f"{at}: no {key!r}" for key in schema.get("required", ()) if key not in value]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                out += self.errors(item, properties[key], f"{at}.{key}")
            elif extra is False:
                out.append(f"{at}: {key!r} is not in the schema")
            elif isinstance(extra, dict):
                out += self.errors(item, extra, f"{at}.{key}")
        return out
