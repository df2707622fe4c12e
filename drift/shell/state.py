"""One path through a script: its variables, working folder, arguments and launch candidates.

A branch forks the `State` and `merge_paths` joins the paths again, each
variable then holding every value any path left in it. `environment` is
what a command started on a path receives.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from drift.shell.model import Launch
from drift.shell.patterns import Hole, feasible
from drift.shell.values import (
    MAX_ALTERNATIVES,
    Alt,
    Binding,
    Field,
    Prefix,
    Seg,
    dedupe,
    field_literal,
    folded,
)


@dataclass
class Frame:
    """A function call: its arguments and the variables it made local (with their saved values)."""

    args: tuple[Field, ...] | None
    saved: dict[str, tuple[Binding, ...] | None] = field(default_factory=dict)


@dataclass
class State:
    """One path through the script (after merges: several paths that agree)."""

    vars: dict[str, tuple[Binding, ...]]
    conds: tuple[str, ...] = ()
    allexport: bool = False
    # The working folder: absolute when known; relative ("." at first) to the folder the
    # script was started in while that folder is unknown; None when nothing is known of it.
    cwd: str | None = None
    args: tuple[Field, ...] | None = None  # the positional parameters; None: unknown
    frames: tuple[Frame, ...] = ()
    stop: Literal["exit", "exec", "return"] | None = None
    last: tuple[tuple[int, Launch], ...] = ()  # best server-looking commands on this path
    # what the path printed so far, while its output is captured (``$(f)``): each value it may be
    out: tuple[Alt, ...] | None = None

    def fork(self, cond: str | None = None) -> State:
        """A copy of this path to walk a branch on, under `cond` if given."""
        return State(
            dict(self.vars),
            self.conds + ((cond,) if cond else ()),
            self.allexport,
            self.cwd,
            self.args,
            self.frames,
            self.stop,
            self.last,
            self.out,
        )


ArgsVariant = tuple[tuple[Field, ...] | None, tuple[str, ...]]
"""One path's positional parameters (None: the caller's) and the conditions of that path."""


def mixed_args(variants: Sequence[ArgsVariant]) -> tuple[Field, ...]:
    """The positional parameters after paths that set them differently (``set -- A`` in one
    ``case`` arm, the caller's in another): one field of an unknown number of words whose
    hole keeps each path's arguments, under that path's conditions."""
    flat: list[ArgsVariant] = []
    for args, conds in variants:
        inner = args_variants(args)
        if inner is None:
            flat.append((args, conds))
        else:
            flat.extend((a, dedupe(conds + c)) for a, c in inner)
    kept = dedupe(flat)[-MAX_ALTERNATIVES:]
    return (Field((Hole('"$@"', "unknown", kept),), None, spread=True),)


def args_variants(args: tuple[Field, ...] | None) -> tuple[ArgsVariant, ...] | None:
    """The paths' arguments a `mixed_args` field keeps, or None for arguments of one path."""
    if args is None or len(args) != 1 or not args[0].spread:
        return None
    hole = args[0].pattern[0] if args[0].pattern else None
    if isinstance(hole, Hole) and hole.kind == "unknown" and hole.text == '"$@"':
        return hole.options
    return None


def shifted(
    given: tuple[Field, ...] | None, words: Sequence[Field] = ()
) -> tuple[Field, ...] | None:
    """The arguments after ``shift`` or ``shift N``.

    Where paths set them differently, each path's are shifted. A spread
    argument (``"$@"`` of the caller) is any number of words: a shift may
    take its words or the next ones, so from it on the arguments stay what
    they were; a count drift cannot read leaves them unknown.
    """
    variants = args_variants(given)
    if variants is not None:
        return mixed_args([(shifted(a, words), c) for a, c in variants])
    if given is None:
        return None
    count = field_literal(words[0]) if words else "1"
    if count is None or not count.isdigit():
        return None
    n = int(count)
    for i, f in enumerate(given[:n]):
        if f.spread:
            return given[i:]
    return given[n:] if n <= len(given) else given  # past the end, bash shifts nothing


def caller_bindings(name: str) -> tuple[Binding, ...]:
    """A variable the script never set: whatever its caller gave it, if anything."""
    hole = Seg(Hole("$" + name, "caller"), None, split=True)
    return (Binding((Alt((hole,)),), None, exported=True, kind="caller"),)


def unset_bindings(st: State, name: str) -> tuple[Binding, ...]:
    """A variable this path never set: the caller's value, or what a line not followed set."""
    return caller_bindings(name) + (() if name.startswith("\0") else st.vars.get("\0unknown", ()))


def _same_launches(
    items: Iterable[tuple[int, Launch]],
) -> tuple[tuple[int, Launch], ...]:
    """Launch candidates without repeats (the same object reached by two paths)."""
    return tuple({id(launch): (score, launch) for score, launch in items}.values())


def merge_paths(states: Sequence[State], base: State) -> State:
    """Join paths after a branch: every value any live path may hold."""
    live = [s for s in states if s.stop is None]
    out = base.fork()
    if not live:
        out.stop = "exit"
        out.last = _same_launches(x for s in states for x in s.last)
        return out
    if len(live) == 1:
        only = live[0]
        out.vars, out.allexport, out.cwd, out.args = only.vars, only.allexport, only.cwd, only.args
        out.last = only.last
        out.frames = only.frames
        out.out = only.out
        return out
    # Only names some branch changed need joining; the rest are shared as they are.
    first_vars = live[0].vars
    changed: set[str] = set()
    for s in live[1:]:
        for name, value in s.vars.items():
            if first_vars.get(name) is not value:
                changed.add(name)
        changed.update(name for name in first_vars if name not in s.vars)
    merged = dict(first_vars)
    for name in changed:
        bindings: list[Binding] = []
        before = base.vars.get(name)
        for s in live:
            values = s.vars.get(name)
            if values is None or values is before:
                # Kept through this branch: the value now also says the branch was taken.
                extra = tuple(c for c in s.conds if c not in base.conds)
                values = tuple(
                    replace(b, conds=dedupe(b.conds + extra)) if extra else b
                    for b in values or unset_bindings(s, name)
                )
            bindings.extend(values)
        # A value kept through both sides of one test (`case y)` then `*)` of another
        # `case` on the same variable) is in no run: left out.
        runs = [b for b in bindings if feasible(b.conds)] or bindings
        merged[name] = folded(dedupe(runs))
    out.vars = merged
    out.allexport = any(s.allexport for s in live)
    cwds = {s.cwd for s in live}
    out.cwd = cwds.pop() if len(cwds) == 1 else None
    argses = {s.args for s in live}
    if len(argses) == 1:
        out.args = argses.pop()
    else:
        out.args = mixed_args(
            [(s.args, tuple(c for c in s.conds if c not in base.conds)) for s in live]
        )
    out.last = _same_launches(x for s in live for x in s.last)
    out.frames = live[0].frames
    if base.out is not None:
        out.out = _printed_by(live, base)
    return out


def _printed_by(live: Sequence[State], base: State) -> tuple[Alt, ...]:
    """What the joined paths may have printed: each path's output, under its branch."""
    printed: list[Alt] = []
    for s in live:
        extra = tuple(c for c in s.conds if c not in base.conds)
        printed.extend(Alt(a.segs, dedupe(a.conds + extra)) for a in s.out or ())
    runs = dedupe([a for a in printed if feasible(a.conds)] or printed)
    return runs if len(runs) <= MAX_ALTERNATIVES else (UNKNOWN_OUTPUT,)


UNKNOWN_OUTPUT = Alt((Seg(Hole("$(...)", "command"), None, split=True),))
"""Output drift cannot tell: too many values, or a command it cannot know prints it."""


def forget_iterations(body: State, before: State) -> None:
    """After a loop body walked once for any number of runs: branch conditions of one run go.

    Each run of the body may take another branch (``case "$1" in --tp=*)``
    on one argument, ``--port=*)`` on the next), so a value set inside it
    cannot say which branch ran: kept, its conditions from inside the body
    would make values of two runs exclude each other. What the path had
    before the loop, and the loop's own condition, stay.
    """
    keep = set(body.conds)
    for name, bindings in body.vars.items():
        old = before.vars.get(name)
        if bindings is old:
            continue
        known = keep | {c for b in old or () for c in b.conds}
        body.vars[name] = dedupe(_only_conds(b, known) for b in bindings)


def _only_conds(b: Binding, keep: set[str]) -> Binding:
    conds = tuple(c for c in b.conds if c in keep)
    alts = b.alts
    if alts is not None:
        alts = tuple(Alt(a.segs, tuple(c for c in a.conds if c in keep)) for a in alts)
    elems = b.elems
    if elems is not None:
        elems = tuple(
            tuple(Alt(a.segs, tuple(c for c in a.conds if c in keep)) for a in e) for e in elems
        )
    if conds == b.conds and alts is b.alts and elems is b.elems:
        return b
    return replace(b, conds=conds, alts=alts, elems=elems)


def assign_state(target: State, source: State) -> None:
    """Make `target` the path `source` is (after a merge), in place: callers hold `target`."""
    target.vars = source.vars
    target.allexport = source.allexport
    target.cwd = source.cwd
    target.args = source.args
    target.stop = source.stop
    target.last = source.last
    target.frames = source.frames
    target.out = source.out


def better_launches(
    current: tuple[tuple[int, Launch], ...], new: tuple[int, Launch]
) -> tuple[tuple[int, Launch], ...]:
    """The server-looking commands of a path after `new` runs: the latest of the best kind."""
    best = max((score for score, _ in current), default=0)
    if new[0] >= best:
        return (new,)
    return current


def environment(st: State, prefix: Sequence[Prefix]) -> dict[str, tuple[Binding, ...]]:
    """What a command started on this path receives: the exported variables, then `prefix`.

    ``"\0unknown"`` stands for whatever a line drift could not follow may have exported.
    """
    env = {
        # a value the script set without exporting it reaches the command too where the
        # caller had exported the name (then only the lines that export it may not be the source)
        name: tuple(
            b if b.exported else replace(b, exported=True)
            for b in bs
            if b.exported or b.given_export
        )
        for name, bs in st.vars.items()
        if not name.startswith("\0") and any(b.exported for b in bs)
    }
    unknown = st.vars.get("\0unknown")
    if unknown:
        env["\0unknown"] = unknown
    for name, alts, where, written in prefix:
        env[name] = (Binding(alts, where, True, st.conds, export_origin=where, written=written),)
    return env
