"""Which host differs from its siblings: `drift compare`.

Hosts that should be alike (the same `role` in drift.toml, or the hosts
named) are compared fact by fact at one moment. Where most of them agree,
a host with another value is odd: a finding, ranked and explained in words
with its provenance (the script line, the process). Values that always
differ between hosts are told apart from odd ones and never ranked:

- what a process or a record is, not how it is set up (pids, start times,
  systemd's run counters);
- a value every host holds alone, with three hosts or more: a host name,
  an address, `NODE_RANK`, a GPU's UUID;
- a value that keeps changing on the hosts themselves (it changed in more
  than one record in ten over the day before): a load average, a counter.

Without a majority (two hosts, or a split) a difference is listed as such:
drift cannot tell which side is odd and says so. A secret hashed with
another host's key cannot be compared at all, which is said too.

The facts are read at the moment asked (each host's last record at or
before it), so every host is compared as it was, not as it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from drift.analysis.compare_findings import ranked_findings
from drift.analysis.comparison import (
    Comparison,
    Expected,
    HostRef,
    HostValue,
    OddFact,
    RoleGroup,
    Split,
    host_names,
)
from drift.analysis.kinds import category
from drift.analysis.values import Values, where
from drift.analysis.windows import choose_baseline
from drift.errors import DriftError
from drift.names import check_known, natural, natural_key
from drift.scope import Scope
from drift.store.fleet import Fleet, HostInfo
from drift.store.query import History, SnapshotInfo, StoredVersion
from drift.timespec import When, iso, local_time, to_us

ROLE = ("host:drift.toml", "role")
NO_ROLE = "(no role)"
RECENT_US = 3_600_000_000  # --fleet: the hosts that recorded in the hour before
VOLATILE_LOOKBACK_US = 86_400_000_000  # a value that keeps changing: over the day before
VOLATILE_SHARE = 0.1  # ... in more than one record in ten
PER_PROCESS = frozenset({"process id", "unit runtime"})

Ident = tuple[str, str]
Token = tuple[str | None, str | None] | None  # (value, blob digest); None: absent


@dataclass(frozen=True)
class CompareOptions:
    """What to compare: `hosts` named (empty: every host that recorded lately with
    `fleet`), at `at` (None: each host's latest record), of one `role` and one
    `service` if given; the `top` findings shown (None: all)."""

    hosts: tuple[str, ...] = ()
    fleet: bool = False
    at: When | None = None
    role: str | None = None
    service: str | None = None
    top: int | None = None


@dataclass
class _Member:
    info: HostInfo
    history: History
    snapshot: SnapshotInfo
    state: dict[Ident, StoredVersion]
    role: str
    baseline_id: int | None = None
    baseline_words: str | None = None
    scope: Scope | None = None  # of the config its record was taken with, once read
    first_in_lookback: int | None = None  # its first record id in VOLATILE_LOOKBACK_US, once


def compare(fleet: Fleet, options: CompareOptions, now_us: int) -> Comparison:
    """Compare the hosts `options` names, role by role (see the module's docstring)."""
    warnings: list[str] = []
    members = _members(fleet, options, now_us, warnings)
    if not members:
        when = "--at" if options.at is not None else "now"
        raise DriftError(
            f"no host to compare: none recorded in the hour before {when} "
            f"({'; '.join(warnings) or 'the database holds no host'})"
        )
    by_role: dict[str, list[_Member]] = {}
    for member in members:
        by_role.setdefault(member.role, []).append(member)
    check_known("role", options.role, by_role, "among the hosts compared")
    check_known(
        "service",
        options.service,
        fleet.service_names([m.info.host_id for m in members]),
        "for the hosts compared",
    )
    if options.role is not None:
        by_role = {options.role: by_role[options.role]}
    groups = [_group(fleet, role, by_role[role], options) for role in sorted(by_role)]
    return Comparison(
        command="compare",
        at=None if options.at is None or options.at.at is None else iso(to_us(options.at.at)),
        groups=groups,
        warnings=warnings,
    )


def _members(
    fleet: Fleet, options: CompareOptions, now_us: int, warnings: list[str]
) -> list[_Member]:
    """The hosts asked for, each read at the moment asked."""
    known = {h.name: h for h in fleet.hosts()}
    if options.hosts:
        for host in options.hosts:
            check_known("host", host, known, f"in {fleet.db.display()}")
        chosen = [known[h] for h in natural(dict.fromkeys(options.hosts))]
    else:
        around = around_us(options, now_us)
        chosen = [
            h for h in known.values() if h.last_us is not None and h.last_us >= around - RECENT_US
        ]
    members = []
    quiet: list[str] = natural(set(known) - {h.name for h in chosen}) if options.fleet else []
    latest = _latest(options)
    roles = fleet.latest_versions([h.host_id for h in chosen], [ROLE]) if latest else {}
    latest_of = fleet.latest_snapshots([h.host_id for h in chosen]) if options.at is None else {}
    for info in chosen:
        history = fleet.history(info)
        try:
            snap = history.snapshot_for(options.at) if options.at else latest_of.get(info.host_id)
            if snap is None:
                raise DriftError("no record yet")
        except DriftError as exc:
            if options.fleet:
                quiet.append(info.name)
            else:
                warnings.append(f"{info.name}: left out: {exc}")
            continue
        if options.fleet and snap.taken_us < around_us(options, now_us) - RECENT_US:
            quiet.append(info.name)  # its record then is more than an hour old
            continue
        # The latest states are compared in SQL (_group); a moment asked is read host by host.
        state = {} if latest else history.state_at(snap.id)
        role = (roles.get(info.host_id) or state).get(ROLE)
        members.append(
            _Member(info, history, snap, state, role.value if role and role.value else NO_ROLE)
        )
    if quiet:
        listed = ", ".join(natural(quiet)) if len(quiet) <= 10 else f"{len(quiet)} hosts"
        warnings.append(f"left out, no record in the hour before: {listed}")
    return members


def around_us(options: CompareOptions, now_us: int) -> int:
    """The moment compared: --at, else now."""
    return now_us if options.at is None or options.at.at is None else to_us(options.at.at)


def _latest(options: CompareOptions) -> bool:
    """Whether the hosts' latest states are compared, with every fact: the aggregate in SQL."""
    return options.at is None and options.service is None


def _group(fleet: Fleet, role: str, members: list[_Member], options: CompareOptions) -> RoleGroup:
    notes: list[str] = []
    hosts = [_host_ref(m) for m in members]
    if len(members) < 2:
        notes.append(f"only one host of role {role}: nothing to compare it with")
        return RoleGroup(role, hosts, [], 0, [], [], 0, notes)
    fingerprints = {m.info.key_fingerprint for m in members}
    same = 0
    if _latest(options):
        ids = [m.info.host_id for m in members]
        agreed = [row for row in fleet.agreement(ids) if not _per_device(row[0])]
        idents = [(s, k) for s, k, have, values in agreed if have < len(ids) or values > 1]
        same = sum(1 for s, k, have, values in agreed if have == len(ids) and values == 1)
        same -= any((s, k) == ROLE for s, k, _h, _v in agreed)
        versions = fleet.latest_versions(ids, [i for i in idents if i != ROLE])
        devices = fleet.latest_versions(ids, [], prefix=DEVICE_PREFIX)
        for m in members:
            gpus = {i: v for i, v in devices[m.info.host_id].items() if _per_device(i[0])}
            m.state = {**versions[m.info.host_id], **_by_index(gpus)}
        idents = sorted({i for m in members for i in m.state if i != ROLE})
    else:
        for m in members:
            m.state = _by_index(m.state)
        idents = sorted(
            {i for m in members for i in m.state if i != ROLE and _wanted(i, m, options)}
        )
    found = _Found()
    for ident in idents:
        same += _compare_fact(ident, members, len(fingerprints) > 1, found)
    odd, splits, expected, unreadable = found.odd, found.splits, found.expected, found.unreadable
    if unreadable:
        notes.append(
            f"{unreadable} secret fact{'s' if unreadable != 1 else ''} not compared: "
            "the hosts hash secrets with different keys (share one with secret_key_file)"
        )
    findings = ranked_findings(role, odd, found.served)
    shown = findings if options.top is None else findings[: options.top]
    return RoleGroup(role, hosts, shown, len(findings), splits, expected, same, notes)


@dataclass
class _Found:
    """What comparing a role's facts one by one finds."""

    odd: dict[str, list[OddFact]] = field(default_factory=dict)
    splits: list[Split] = field(default_factory=list)
    expected: list[Expected] = field(default_factory=list)
    unreadable: int = 0
    # The service whose server answers each endpoint, by host: its leaves are that service's.
    served: dict[str, dict[str, str]] = field(default_factory=dict)


def _compare_fact(ident: Ident, members: list[_Member], keys_differ: bool, found: _Found) -> int:
    """Compare one fact across the members, into `found`; 1 if it is the same on all."""
    # A host whose config does not ask for the fact has no say about it.
    unwatched = [
        m
        for m in members
        if ident not in m.state and not _watches(m, ident, _example(ident, members))
    ]
    if unwatched:
        names = host_names(m.info.name for m in unwatched)
        why = f"not watched on {names}: their drift.toml does not ask for it"
        found.expected.append(Expected(ident[0], ident[1], why, len(members) - len(unwatched)))
        members = [m for m in members if m not in unwatched]
        if len(members) < 2:
            return 0
    tokens = {m.info.name: _token(m.state.get(ident)) for m in members}
    counts = Counter(tokens.values())
    if len(counts) == 1:
        return 0 if unwatched else 1
    if _secret(ident, members) and keys_differ:
        found.unreadable += 1
        return 0
    expected = _expected(ident, members, counts)
    if expected is not None:
        found.expected.append(Expected(ident[0], ident[1], expected, len(counts)))
        return 0
    top, top_count = counts.most_common(1)[0]
    if top_count * 2 <= len(members):
        found.splits.append(Split(ident[0], ident[1], _values(ident, members, tokens)))
        return 0
    majority = _host_value(ident, [m for m in members if tokens[m.info.name] == top])
    for m in members:
        if tokens[m.info.name] != top:
            odd = _odd_fact(ident, m, majority, len(members))
            found.odd.setdefault(m.info.name, []).append(odd)
            service = _served_by(ident, m, members)
            if service is not None:
                found.served.setdefault(m.info.name, {})[ident[0]] = service
    return 0


def _served_by(ident: Ident, member: _Member, members: Sequence[_Member]) -> str | None:
    """The service an endpoint's entry names on this host (else on the hosts that have it)."""
    if not ident[0].startswith("endpoint:"):
        return None
    version = member.state.get(ident) or _example(ident, members)
    service = version.provenance.get("service") if version is not None else None
    return service if isinstance(service, str) and service else None


def _example(ident: Ident, members: Sequence[_Member]) -> StoredVersion | None:
    return next((m.state[ident] for m in members if ident in m.state), None)


DEVICE_PREFIX = "gpu:"


def _per_device(subject: str) -> bool:
    """A GPU's subject names it by UUID, which no two hosts share: compared by index."""
    return subject.startswith(DEVICE_PREFIX) and subject != "gpu:driver"


def _by_index(state: dict[Ident, StoredVersion]) -> dict[Ident, StoredVersion]:
    """`state` with each GPU's facts under `gpu:#INDEX` instead of `gpu:UUID`, so that the
    hosts' GPU 0 is compared with GPU 0 (one without an index keeps its UUID)."""
    index = {s: v.value for (s, k), v in state.items() if _per_device(s) and k == "index"}
    out: dict[Ident, StoredVersion] = {}
    for (subject, key), version in state.items():
        if _per_device(subject) and index.get(subject):
            subject = f"gpu:#{index[subject]}"
        out[(subject, key)] = version
    return out


def _wanted(ident: Ident, member: _Member, options: CompareOptions) -> bool:
    if options.service is None:
        return True
    subject = ident[0]
    if subject == f"service:{options.service}":
        return True
    version = member.state.get(ident)
    return version is not None and version.provenance.get("service") == options.service


def _token(version: StoredVersion | None) -> Token:
    if version is None:
        return None
    return (version.value, version.blob_sha256)


def _secret(ident: Ident, members: Sequence[_Member]) -> bool:
    return any((v := m.state.get(ident)) is not None and v.secret for m in members)


def _expected(ident: Ident, members: Sequence[_Member], counts: Counter[Token]) -> str | None:
    """Why this fact's values are expected to differ between hosts, or None if they are not."""
    kind = category(*ident)
    if kind in PER_PROCESS or ident[1] == "started_at":
        return "what a process or a record is, not how it is set up"
    # A value of each host's own (its name, address, rank) differs on all and has stayed put
    # on each; one that moved on a host is a reading (a load, a count) as likely: say so.
    moved: list[str] = []
    if len(members) >= 3 and len(counts) == len(members) and None not in counts:
        moved = [m.info.name for m in members if not _steady(m, ident)]
        if not moved:
            return "every host holds its own value (a name, an address, a rank, an id)"
    # Asked of the hosts off the most common value, and of one on it: a value that keeps
    # changing shows on the hosts it set apart, and a hundred hosts cost a few reads.
    top = counts.most_common(1)[0][0]
    off = [m for m in members if _token(m.state.get(ident)) != top]
    on = next((m for m in members if _token(m.state.get(ident)) == top), None)
    changing = [m.info.name for m in [*off, *([on] if on else [])] if _keeps_changing(m, ident)]
    if changing:
        return f"it keeps changing on {host_names(changing)} (in more than one record in ten)"
    if moved:
        return (
            f"every host holds a different value, and it moved on {host_names(moved)} "
            "within the day: no value to hold the others to"
        )
    return None


def _steady(member: _Member, ident: Ident) -> bool:
    """Whether the member's value has held since its first record of the lookback (its
    first record, on a younger host)."""
    version = member.state.get(ident)
    if version is None:
        return False
    if member.first_in_lookback is None:
        start = member.history.first_taken_from(member.snapshot.taken_us - VOLATILE_LOOKBACK_US)
        member.first_in_lookback = start.id if start is not None else member.snapshot.id
    return version.first_snapshot_id <= member.first_in_lookback


def _watches(member: _Member, ident: Ident, example: StoredVersion | None) -> bool:
    """Whether the config of the member's record asks for this fact's subject (a fact its
    config does not watch is no difference of the box)."""
    if member.snapshot.config_id is None:
        return True  # recorded before drift kept configs: never guessed away
    if member.scope is None:
        member.scope = member.history.configs()[member.snapshot.config_id].scope
    provenance = example.provenance if example is not None else None
    return member.scope.covers(ident[0], provenance, ident[1])


def _keeps_changing(member: _Member, ident: Ident) -> bool:
    history, snap = member.history, member.snapshot
    start = history.first_taken_from(snap.taken_us - VOLATILE_LOOKBACK_US)
    if start is None or start.id >= snap.id:
        return False
    records = history.count_snapshots_upto(snap.id, start.id)
    if records < 10:
        return False
    changes = history.version_counts(snap.id, [ident], start.id).get(ident, 0) - 1
    return changes > records * VOLATILE_SHARE


def _values(ident: Ident, members: Sequence[_Member], tokens: dict[str, Token]) -> list[HostValue]:
    groups: dict[Token, list[_Member]] = {}
    for m in members:
        groups.setdefault(tokens[m.info.name], []).append(m)
    ordered = sorted(groups.values(), key=lambda ms: (-len(ms), natural_key(ms[0].info.name)))
    return [_host_value(ident, ms) for ms in ordered]


def _host_value(ident: Ident, members: Sequence[_Member]) -> HostValue:
    first = members[0]
    version = first.state.get(ident)
    shown = Values(first.history).show(version)
    return HostValue(
        hosts=[m.info.name for m in members],
        value=shown,
        where=where(version.provenance) if version is not None else "",
    )


def _odd_fact(ident: Ident, member: _Member, majority: HostValue, among: int) -> OddFact:
    version = member.state.get(ident)
    _baseline(member)
    since: bool | None = None
    if member.baseline_id is not None:
        began = version.first_snapshot_id if version is not None else None
        if version is None:
            # Absent now: it changed since the baseline if the baseline had it.
            was = member.history.versions_after(
                member.history.fact_ids_with(ident[0], ident[1]), member.baseline_id
            )
            since = any(v.subject == ident[0] and v.key == ident[1] for v in was)
        else:
            since = began is not None and began > member.baseline_id
    return OddFact(
        subject=ident[0],
        key=ident[1],
        kind=category(*ident),
        value=Values(member.history).show(version),
        where=where(version.provenance) if version is not None else "",
        majority=majority,
        among=among,
        changed_since_stable=since,
    )


def _baseline(member: _Member) -> None:
    """The end of the member's last stable window (from marks or health checks), once."""
    if member.baseline_words is not None or member.baseline_id == -1:
        return
    try:
        chosen = choose_baseline(member.history, None)
        snap = member.history.snapshot_for(chosen.when)
    except DriftError:
        member.baseline_id = -1
        return
    if snap.id > member.snapshot.id:
        member.baseline_id = -1
        return
    member.baseline_id = snap.id
    member.baseline_words = f"{local_time(snap.taken_us)} ({chosen.why})"


def _host_ref(m: _Member) -> HostRef:
    _baseline(m)
    return HostRef(
        host=m.info.name,
        snapshot=m.snapshot.id,
        taken_at=iso(m.snapshot.taken_us),
        taken_local=local_time(m.snapshot.taken_us),
        role=m.role,
        baseline=m.baseline_words,
    )
