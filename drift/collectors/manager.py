"""The systemd manager's environment: what every unit it starts begins with.

`systemctl set-environment NAME=VALUE` (or `DefaultEnvironment=` in
system.conf, or a generator) changes it, and every unit started afterwards
gets the variable, unless the unit sets the name itself. One host-level
subject, ``systemd:manager``, with one ``environment:NAME`` fact per
variable: the manager is one per host (one per `systemctl` drift is told to
use), so a variable set there is one change, which every service started
since picks up, not a change of each service. Asked once per record,
whatever the number of services, and only when a service is found by unit.

The values are the manager's `Environment` property, the one
`systemctl show-environment` prints; `systemctl show -p Environment` gives
it quoted as unit properties are, which `drift.collectors.systemd` reads.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator

from drift.collectors.process import Result
from drift.collectors.systemd import show_manager, split_quoted
from drift.errors import DriftError
from drift.facts import CollectContext, CollectionError, Fact

SUBJECT = "systemd:manager"


def collect_manager(ctx: CollectContext) -> Iterator[Result]:
    """``systemd:manager environment:NAME`` for each variable, or a blind spot on all of them.

    The manager is the one `ctx.systemctl` reaches: the host's, or a container's.
    """
    command = shlex.join([*ctx.systemctl, "show", "-p", "Environment"])
    try:
        props = show_manager(("Environment",), ctx.systemctl)
        words = split_quoted(" ".join(props.get("Environment", [])))
    except DriftError as exc:
        yield CollectionError(SUBJECT, None, f"cannot read the manager's environment: {exc}")
        return
    where: dict[str, str] = {"run": command}
    if ctx.files.container is not None:
        where["container"] = ctx.files.container
    for word in words:
        name, sep, value = word.partition("=")
        if sep and name:
            yield Fact(SUBJECT, f"environment:{name}", value, where)
