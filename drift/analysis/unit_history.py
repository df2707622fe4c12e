"""A service's runs inside a window: every value its start and systemd facts took, in time order.

The baseline and the current state are the two ends; a service restarted ten
times, or a crash loop, happens in between. This gathers, per service, the
versions of the facts that tell its runs (the process's ``running``, ``pid``
and ``started_at``; systemd's ``unit:sub_state``, ``unit:result``,
``unit:n_restarts`` ...) from the one open at the baseline to the current
one, so `drift.analysis.restarts` can count restarts and
`drift.analysis.failures` can tell a crash loop. Pure: versions in, no store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from drift.analysis.kinds import UNIT_RUNTIME_KEYS, service_name
from drift.store.query import StoredVersion

RUN_KEYS = frozenset({"running", "pid", "started_at"}) | UNIT_RUNTIME_KEYS
"""The facts of a service that tell its runs."""


@dataclass
class ServiceRuns:
    """The versions of one service's run facts in a window, per key, oldest first.

    The first version of a key may be the one open at the baseline; every
    other one began inside the window.
    """

    service: str
    versions: dict[str, list[StoredVersion]] = field(default_factory=dict)

    def of(self, key: str) -> list[StoredVersion]:
        """Every version of `key` in the window, oldest first."""
        return self.versions.get(key, [])

    def at(self, key: str, snapshot_id: int) -> StoredVersion | None:
        """The version of `key` a snapshot saw, or None."""
        for version in reversed(self.of(key)):
            if version.first_snapshot_id <= snapshot_id:
                until = version.until_snapshot_id
                return version if until is None or until > snapshot_id else None
        return None

    def inside(self, key: str, baseline_id: int) -> list[StoredVersion]:
        """The versions of `key` that began after the baseline, oldest first."""
        return [v for v in self.of(key) if v.first_snapshot_id > baseline_id]


def service_runs(
    before: Mapping[tuple[str, str], StoredVersion], inside: Iterable[StoredVersion]
) -> dict[str, ServiceRuns]:
    """Per service, its run facts from the baseline state `before` and the versions `inside`."""
    out: dict[str, ServiceRuns] = {}

    def add(version: StoredVersion) -> None:
        name = service_name(version.subject)
        if name is None or version.key not in RUN_KEYS:
            return
        runs = out.setdefault(name, ServiceRuns(name))
        runs.versions.setdefault(version.key, []).append(version)

    for (subject, key), version in before.items():
        if key in RUN_KEYS and subject.startswith("service:"):
            add(version)
    for version in inside:
        add(version)
    for runs in out.values():
        for versions in runs.versions.values():
            versions.sort(key=lambda v: v.first_snapshot_id)
    return out
