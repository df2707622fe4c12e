"""Files read from the folder the script was started in, when drift does not know that folder.

bash reads ``source ./common.sh``, ``bash ./child.sh``, ``[ -f ./x ]`` from
its working folder, not from the script's: under systemd the unit's
WorkingDirectory= (``/`` unless the unit says), by hand wherever the
operator stood. When the caller of `drift.shell.evaluate.evaluate` gives
that folder, paths are read from it like any other. When it does not,
`State.cwd` stays relative to it and such a file splits the path in two:
``if started in DIR`` (the script's own folder), where the file there is
read, and its ``else``, where the file is one drift cannot see, so every
variable the file sets there (and any command it launches) is unknown: a
value it gives is then "one of common.sh:3, decode.sh:2, a line drift
could not follow", never a single line.

The live process can tell the two apart: bash exports its working folder
as PWD, so when nothing changed folder before the launch, the launched
process's PWD names the folder the script was started in. The condition
then is a test on PWD, which the analysis runs like a test on a variable
the script was given (`drift.shell.walk.pwd_shows_start` says when).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from drift.shell.assignments import Assignments
from drift.shell.model import Launch
from drift.shell.patterns import ELSE, Hole
from drift.shell.state import State, assign_state, better_launches, environment, merge_paths
from drift.shell.values import Alt, Binding, Field, Origin, Seg, dedupe
from drift.shell.walk import STARTED_IN

Follow = Callable[[State, str], None]
"""Read a file on one path: (the path, the file's absolute name)."""


class StartFolder(Assignments):
    """Files read from an unknown start folder, mixed into the evaluator (see the module doc)."""

    def _home(self) -> str:
        """The script's own folder: where a service is most often started."""
        return os.path.dirname(self.top)

    def _guess(self, relative: str) -> str:
        """Where a path relative to the start folder is, if started in the script's own folder."""
        return os.path.normpath(os.path.join(self._home(), relative))

    def _where_written(self, relative: str) -> str:
        """The end of a gap's sentence for a file read from the unknown start folder."""
        return (
            "from the folder the script is started in, which drift does not know (read as "
            f"{self._guess(relative)} {STARTED_IN}{self._home()})"
        )

    def _from_start(
        self,
        st: State,
        origin: Origin,
        relative: str,
        follow: Follow,
        elsewhere: Callable[[State], None] | None = None,
    ) -> None:
        """Read the file `relative` names on the path started in the script's folder only.

        On the other path `elsewhere` says what happens; by default each
        variable the file sets there may hold anything, and a command it
        launches may be anything. No gap: the condition says it, and the
        live PWD may settle it.
        """
        cond = STARTED_IN + self._home()
        self.tests[cond] = {"var": "PWD", "op": "==", "value": self._home()}
        launched = len(self.launches)
        taken = st.fork(cond)
        skipped = st.fork(ELSE + cond)
        follow(taken, self._guess(relative))
        if elsewhere is not None:
            elsewhere(skipped)
        else:
            self._unknown_file(st, taken, skipped, origin, len(self.launches) > launched)
        merged = merge_paths([taken, skipped], st)
        assign_state(st, merged)

    def _unknown_file(
        self, st: State, taken: State, skipped: State, origin: Origin, launched: bool
    ) -> None:
        """On `skipped`, a file drift cannot see did what the one read on `taken` did: unknown."""
        unknown = unknown_binding(origin, skipped.conds)
        extra = tuple(c for c in skipped.conds if c not in st.conds)
        for name, bindings in taken.vars.items():
            if not name.startswith("\0") and bindings is not st.vars.get(name):
                # Kept on this path only if the unseen file left it: that path's condition too.
                kept = (replace(b, conds=dedupe(b.conds + extra)) for b in st.vars.get(name, ()))
                skipped.vars[name] = dedupe((*kept, unknown))
        if launched or taken.last is not st.last:
            self._unknown_launch(skipped, origin, "exec" if taken.stop == "exec" else "other")

    def _unknown_launch(self, st: State, origin: Origin, how: str) -> None:
        """A command drift cannot read runs here: it may launch anything, with any environment."""
        unknown = unknown_binding(origin, st.conds)
        env = {
            # what reaches this launch reaches it on this path only
            name: dedupe((*(replace(b, conds=dedupe(b.conds + st.conds)) for b in bs), unknown))
            for name, bs in environment(st, []).items()
        }
        env["\0unknown"] = (unknown,)
        program = (Field((Hole(origin.text or "?", "command"),), origin, st.conds, spread=True),)
        launch = Launch(
            (program,),
            env,
            origin,
            st.conds,
            "exec" if how == "exec" else ("background" if how == "background" else "foreground"),
            source=origin.text,
            cwd=st.cwd,
            unknown=True,
        )
        if how == "exec":
            self.launches.append(launch)
        else:
            # As likely as any server to be the service: it ranks with them.
            st.last = better_launches(st.last, (2, launch))


def unknown_binding(origin: Origin, conds: tuple[str, ...]) -> Binding:
    """A value a file drift cannot see may have set (exported: it may export it too)."""
    hole = Alt((Seg(Hole(origin.text or "?", "unread"), origin, split=True),))
    return Binding((hole,), origin, True, conds, kind="unknown", export_origin=origin)
