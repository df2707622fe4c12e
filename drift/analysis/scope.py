"""Changes of scope: facts that left or entered the history because the config changed.

A fact closed at a snapshot whose config no longer asks for it was not
removed from the box, and one opened at a snapshot whose previous config did
not ask for it was not added: both are set apart from the changes before any
story is told, so a config edit never invents a suspect.
"""

from __future__ import annotations

from dataclasses import dataclass

from drift.analysis.diff import Change
from drift.scope import ConfigInfo
from drift.store.query import SnapshotInfo


@dataclass(frozen=True)
class ConfigSwitch:
    """The config changed between two consecutive snapshots of the window."""

    snapshot_id: int
    taken_us: int
    before_path: str | None
    after_path: str | None
    sections: tuple[str, ...]  # "services: -web", "files: +kernels"

    @property
    def text(self) -> str:
        return f"config {self.detail}"

    @property
    def detail(self) -> str:
        what = "; ".join(self.sections) if self.sections else "settings only"
        moved = ""
        if self.before_path != self.after_path:
            moved = (
                f", {self.before_path or 'no config file'} -> {self.after_path or 'no config file'}"
            )
        return f"changed at #{self.snapshot_id} ({what}{moved})"


@dataclass(frozen=True)
class ScopeSplit:
    """The changes that happened on the box, and those that only moved the config's scope."""

    changes: list[Change]
    untracked: list[Change]  # left the scope: "no longer tracked since #N"
    tracked: list[Change]  # entered the scope: "now tracked"
    switches: list[ConfigSwitch]


def split_scope(
    changes: list[Change], series: list[SnapshotInfo], configs: dict[int, ConfigInfo]
) -> ScopeSplit:
    """Set apart the changes of scope among `changes`, over `series` (baseline first).

    A snapshot whose config is unknown (taken before drift kept it) covers
    everything: nothing is read as having left or entered its scope.
    """
    scope_at = {s.id: configs.get(s.config_id) if s.config_id is not None else None for s in series}
    previous = {b.id: a.id for a, b in zip(series, series[1:], strict=False)}
    kept: list[Change] = []
    untracked: list[Change] = []
    tracked: list[Change] = []
    for change in changes:
        if change.kind == "removed" and change.before is not None:
            closed_at = change.before.until_snapshot_id
            config = scope_at.get(closed_at) if closed_at is not None else None
            if config is not None and not config.scope.covers(
                change.subject, change.before.provenance, change.key
            ):
                untracked.append(change)
                continue
        elif change.kind == "added" and change.after is not None:
            before_id = previous.get(change.after.first_snapshot_id)
            config = scope_at.get(before_id) if before_id is not None else None
            if config is not None and not config.scope.covers(
                change.subject, change.after.provenance, change.key
            ):
                tracked.append(change)
                continue
        kept.append(change)
    return ScopeSplit(kept, untracked, tracked, config_switches(series, configs))


def config_switches(
    series: list[SnapshotInfo], configs: dict[int, ConfigInfo]
) -> list[ConfigSwitch]:
    """Each point of `series` where the config differs from the snapshot before."""
    out = []
    for a, b in zip(series, series[1:], strict=False):
        if a.config_id is None or b.config_id is None or a.config_id == b.config_id:
            continue
        before, after = configs.get(a.config_id), configs.get(b.config_id)
        if before is None or after is None:
            continue
        out.append(
            ConfigSwitch(
                b.id,
                b.taken_us,
                before.path,
                after.path,
                tuple(before.scope.changes_to(after.scope)),
            )
        )
    return out
