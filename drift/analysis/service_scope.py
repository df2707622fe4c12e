"""Which subjects belong to a service, for `--service NAME` filters.

A service owns `service:NAME` (its process, unit, live environment and command
line) and every subject whose facts were read on its behalf: its serve script and
the files that script sources, its endpoints (their provenance names it). A
subject no service owns (a file set, a repo, a command, the GPU) belongs to the
host: a filter keeps its blind spots, which may hide what the service depends on,
and leaves out its facts, which are not the service's.
"""

from __future__ import annotations

from collections.abc import Iterable

from drift.store.query import StoredVersion

SERVICE_PREFIX = "service:"


def owners(versions: Iterable[StoredVersion]) -> dict[str, str]:
    """The owning service of each subject that has one, from the facts' subjects and provenance."""
    out: dict[str, str] = {}
    for v in versions:
        if v.subject.startswith(SERVICE_PREFIX):
            out[v.subject] = v.subject.removeprefix(SERVICE_PREFIX)
        elif isinstance(owner := v.provenance.get("service"), str):
            out.setdefault(v.subject, owner)
    return out


def owned_by(subject: str, service: str, known: dict[str, str]) -> bool:
    """Whether `subject` is one of `service`'s (`known`: owners() of the facts at hand)."""
    if subject.startswith(SERVICE_PREFIX):
        return subject == SERVICE_PREFIX + service
    return known.get(subject) == service


def another_services(subject: str, service: str, known: dict[str, str]) -> bool:
    """Whether `subject` belongs to a service other than `service` (not to the host)."""
    if subject.startswith(SERVICE_PREFIX):
        return subject != SERVICE_PREFIX + service
    return known.get(subject, service) != service
