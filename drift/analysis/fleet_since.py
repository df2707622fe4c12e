"""What changed across the hosts of a role since they last worked: `drift since --fleet`.

Each host is investigated as `drift since` would (from `--stable`, or from its
own last stable window), and the suspects are grouped by change: the same
fact going from the same value to the same value on several hosts is one
line, "3 of 4 decode hosts: flashinfer 0.2.5 -> 0.2.6 at 11:58-12:03", not
four stories. A change only some hosts of a role have is listed with the
hosts that have it: a partial rollout reads as one.

Hosts are those of the fleet that recorded in the hour before `--until` (or
now). A host with no baseline, or whose window has recording gaps or
collection errors, is named in the warnings: the trust line of the fleet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from drift.analysis.compare import NO_ROLE, RECENT_US, ROLE
from drift.analysis.investigate import InvestigateOptions, investigate
from drift.analysis.investigation import Investigation, Suspect, SuspectChange
from drift.errors import DriftError
from drift.names import check_known, natural
from drift.store.fleet import Fleet
from drift.store.query import History
from drift.timespec import When, to_us


@dataclass(frozen=True)
class FleetOptions:
    """`drift since --fleet`: the window (`stable` None: each host's own stable window,
    `until` None: each host's latest record), one `role` and one `service` if given."""

    stable: When | None = None
    until: When | None = None
    role: str | None = None
    service: str | None = None


@dataclass(frozen=True)
class HostWindow:
    """One host's window: from which record to which, and how far to trust it."""

    host: str
    baseline: int
    baseline_local: str
    baseline_why: str
    current: int
    current_local: str
    suspects: int
    trust: str


@dataclass(frozen=True)
class StatusHosts:
    """The hosts where a change is in the same state (live, pending, on disk ...)."""

    status: str
    hosts: list[str]


@dataclass(frozen=True)
class FleetChange:
    """One change as several hosts of a role have it."""

    rank: int
    score: float  # the best of the hosts'
    title: str
    subject: str
    key: str
    before: str | None
    after: str | None
    where: str
    hosts: list[str]
    of: int  # hosts of the role investigated
    statuses: list[StatusHosts]
    first_local: str
    last_local: str
    reasons: list[str]  # of the host where it scored best


@dataclass(frozen=True)
class FleetRole:
    """The hosts of one role and what changed on them."""

    role: str
    hosts: list[HostWindow]
    changes: list[FleetChange]


@dataclass(frozen=True)
class FleetSince:
    """Everything `drift since --fleet` shows."""

    command: str
    roles: list[FleetRole]
    warnings: list[str]


def fleet_since(fleet: Fleet, options: FleetOptions, now_us: int) -> FleetSince:
    """Investigate every recent host and group their suspects by change, role by role."""
    warnings: list[str] = []
    around = (
        now_us if options.until is None or options.until.at is None else to_us(options.until.at)
    )
    recent = [h for h in fleet.hosts() if h.last_us is not None and h.last_us >= around - RECENT_US]
    if not recent:
        raise DriftError("no host recorded in the hour before: nothing to compare")
    role_of = {info.name: _role(fleet.history(info)) for info in recent}
    check_known(
        "role", options.role, role_of.values(), "among the hosts recorded in the hour before"
    )
    check_known(
        "service",
        options.service,
        fleet.service_names([info.host_id for info in recent]),
        "for the hosts recorded in the hour before",
    )
    by_role: dict[str, list[tuple[str, Investigation]]] = {}
    for info in recent:
        history = fleet.history(info)
        role = role_of[info.name]
        if options.role is not None and role != options.role:
            continue
        try:
            found = investigate(
                history,
                options.stable,
                options.until,
                InvestigateOptions(top=None, service=options.service),
            )
        except DriftError as exc:
            warnings.append(f"{info.name}: left out: {exc}")
            continue
        by_role.setdefault(role, []).append((info.name, found))
        if found.trust.gaps or found.trust.errors:
            warnings.append(f"{info.name}: {found.trust.summary}")
    if not by_role:
        if options.role is not None:
            raise DriftError(f"no recent host of role {options.role!r} could be investigated")
        raise DriftError("no recent host could be investigated")
    roles = [_role_changes(role, by_role[role]) for role in sorted(by_role)]
    return FleetSince(command="since --fleet", roles=roles, warnings=warnings)


def _role(history: History) -> str:
    """The role the host's latest record gives it."""
    ids = history.fact_ids_with(ROLE[0], ROLE[1])
    found = [
        v for v in history.versions_after(ids, history.latest().id) if v.until_snapshot_id is None
    ]
    role = next((v.value for v in found if (v.subject, v.key) == ROLE), None)
    return role or NO_ROLE


def _role_changes(role: str, found: Sequence[tuple[str, Investigation]]) -> FleetRole:
    hosts = [
        HostWindow(
            host=name,
            baseline=inv.baseline.snapshot,
            baseline_local=inv.baseline.local,
            baseline_why=inv.baseline.why,
            current=inv.current.snapshot,
            current_local=inv.current.local,
            suspects=inv.total_suspects,
            trust=inv.trust.summary,
        )
        for name, inv in found
    ]
    groups: dict[tuple[object, ...], list[tuple[str, Suspect, SuspectChange]]] = {}
    for name, inv in found:
        for suspect in inv.suspects:
            root = suspect.changes[0]
            signature = (root.subject, root.key, root.kind, root.before, root.after)
            groups.setdefault(signature, []).append((name, suspect, root))
    changes = [_change(members, len(found)) for members in groups.values()]
    changes.sort(key=lambda c: (-c.score, -len(c.hosts), c.subject, c.key))
    ranked = [_with_rank(c, i) for i, c in enumerate(changes, 1)]
    return FleetRole(role=role, hosts=hosts, changes=ranked)


def _change(members: list[tuple[str, Suspect, SuspectChange]], of: int) -> FleetChange:
    best = max(members, key=lambda m: m[1].score)
    root = best[2]
    statuses: dict[str, list[str]] = {}
    for name, suspect, _root in members:
        statuses.setdefault(suspect.status, []).append(name)
    times = sorted(m[2].changed_at for m in members)
    local = {m[2].changed_at: m[2].changed_local for m in members}
    return FleetChange(
        rank=0,
        score=best[1].score,
        title=best[1].title,
        subject=root.subject,
        key=root.key,
        before=root.before,
        after=root.after,
        where=root.where,
        hosts=natural(m[0] for m in members),
        of=of,
        statuses=[StatusHosts(s, natural(h)) for s, h in sorted(statuses.items())],
        first_local=local[times[0]],
        last_local=local[times[-1]],
        reasons=best[1].reasons,
    )


def _with_rank(change: FleetChange, rank: int) -> FleetChange:
    return replace(change, rank=rank)
