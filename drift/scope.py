"""What a config covers: its scope, stored with every snapshot.

A fact that leaves the history because the config stopped asking for it was
not removed from the box; a fact that enters because the config started asking
for it was not added. Each snapshot therefore records which config it was taken
with (its path and a digest of its effective content) and that config's scope:
the services, scripts, file sets, repos, commands, health checks and
endpoints it names.
Analysis asks the scope whether a subject was watched before saying "removed"
or "added"; a subject outside it is "no longer tracked" or "now tracked".

This module sits beside config.py: record writes a scope, analysis reads one,
and neither the collectors nor the store depend on it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Set
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from drift.globs import excluded, glob_matches

if TYPE_CHECKING:
    from drift.config import Config

_LIBRARY_KEYS = ("lib:", "lib_disk:")
# A service's interpreter and distributions (`drift.collectors.packages`).
_PACKAGE_KEYS = ("package:", "package_source:", "package_head:")
_PYTHON_KEYS = ("python", "python:path")


@dataclass(frozen=True)
class Scope:
    """The subjects one config asks drift to watch, by section and name.

    `services` maps a service's name to its serve script (or None);
    `files` maps a file set's name to its globs. Everything is plain data so
    a scope round-trips through JSON unchanged.
    """

    services: dict[str, str | None] = field(default_factory=dict)
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    repos: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    health: tuple[str, ...] = ()
    caches: tuple[str, ...] = ()
    # Whether the systemd manager is asked (a service is found by unit). True when not
    # known (a scope stored before drift recorded the manager): never guessed away.
    systemd: bool = True
    # Whether GPUs are read ([gpu] enabled "auto" or true). False in a scope stored
    # before drift read GPUs: what it finds then is "now tracked", not new on the box.
    gpu: bool = True
    endpoints: tuple[str, ...] = ()
    # Services whose Python distributions (`packages`) and mapped libraries
    # (`libraries`) are recorded: turned off, their facts leave the scope, not the
    # process. Empty in a scope stored before drift read them, so what it finds
    # then is "now tracked", not new on the box.
    packages: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    # A file set's exclude globs, by its name: a file they drop left the scope, not the box.
    excludes: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, config: Config) -> Scope:
        return cls(
            services={s.name: s.script for s in config.services},
            files={f.name: tuple(f.paths) for f in config.files},
            repos=tuple(r.path for r in config.repos),
            commands=tuple(c.name for c in config.commands),
            health=tuple(h.name for h in config.health),
            systemd=any(s.unit for s in config.services),
            gpu=config.gpu.enabled is not False,
            endpoints=tuple(e.name for e in config.endpoints),
            caches=tuple(c.name for c in config.caches),
            packages=tuple(s.name for s in config.services if s.packages),
            libraries=tuple(s.name for s in config.services if s.libraries),
            excludes={f.name: tuple(f.exclude) for f in config.files if f.exclude},
        )

    def masked(self, name: Callable[[str], str], glob: Callable[[str], str]) -> Scope:
        """This scope with every name and path passed through `name`, every glob through `glob`.

        Redaction masks a secret in a subject; the scope stored beside it must
        name that subject the same way.
        """
        return Scope(
            services={name(k): None if v is None else name(v) for k, v in self.services.items()},
            files={name(k): tuple(glob(g) for g in v) for k, v in self.files.items()},
            repos=tuple(name(r) for r in self.repos),
            commands=tuple(name(c) for c in self.commands),
            health=tuple(name(h) for h in self.health),
            systemd=self.systemd,
            gpu=self.gpu,
            endpoints=tuple(name(e) for e in self.endpoints),
            caches=tuple(name(c) for c in self.caches),
            packages=tuple(name(n) for n in self.packages),
            libraries=tuple(name(n) for n in self.libraries),
            excludes={name(k): tuple(glob(g) for g in v) for k, v in self.excludes.items()},
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Scope:
        data = json.loads(text)
        return cls(
            services=dict(data.get("services", {})),
            files={k: tuple(v) for k, v in data.get("files", {}).items()},
            repos=tuple(data.get("repos", ())),
            commands=tuple(data.get("commands", ())),
            health=tuple(data.get("health", ())),
            systemd=bool(data.get("systemd", True)),
            gpu=bool(data.get("gpu", False)),
            endpoints=tuple(data.get("endpoints", ())),
            caches=tuple(data.get("caches", ())),
            packages=tuple(data.get("packages", ())),
            libraries=tuple(data.get("libraries", ())),
            excludes={k: tuple(v) for k, v in data.get("excludes", {}).items()},
        )

    @property
    def empty(self) -> bool:
        return not (
            self.services
            or self.files
            or self.repos
            or self.commands
            or self.health
            or self.endpoints
            or self.caches
        )

    def covers(self, subject: str, provenance: dict[str, Any] | None = None, key: str = "") -> bool:
        """Whether this scope asks for `subject` (``service:decode``, ``file:/etc/x`` ...).

        A sourced file (``script:`` with the service it was read for in its
        provenance) is covered while that service's script is. A subject of a
        kind this scope does not know is covered: drift never guesses it away.
        """
        kind, _, name = subject.partition(":")
        if kind == "service":
            if key.startswith(_LIBRARY_KEYS):
                return name in self.libraries
            if key in _PYTHON_KEYS or key.startswith(_PACKAGE_KEYS):
                return name in self.packages
            return name in self.services
        if kind == "script":
            if name in self.services.values():
                return True
            service = (provenance or {}).get("service")
            return isinstance(service, str) and self.services.get(service) is not None
        if kind == "file":
            return any(
                any(glob_matches(g, name) for g in globs)
                and not excluded(self.excludes.get(set_name, ()), name)
                for set_name, globs in self.files.items()
            )
        if kind == "repo":
            return name in self.repos
        if kind == "command":
            return name in self.commands
        if kind == "health":
            return name in self.health
        if kind == "systemd":
            return self.systemd
        if kind == "gpu":
            return self.gpu
        if kind == "endpoint":
            return name in self.endpoints
        if kind == "cache":
            return name in self.caches
        return True

    def shares_with(self, other: Scope) -> bool:
        """Whether the two scopes name anything in common (a service, a glob, a repo ...)."""
        return bool(
            self.services.keys() & other.services.keys()
            or {g for gs in self.files.values() for g in gs}
            & {g for gs in other.files.values() for g in gs}
            or set(self.repos) & set(other.repos)
            or set(self.commands) & set(other.commands)
            or set(self.health) & set(other.health)
            or set(self.endpoints) & set(other.endpoints)
            or set(self.caches) & set(other.caches)
        )

    def _file_sets(self) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        """Each file set's globs and exclude globs: either changed is `~name`."""
        return {k: (v, self.excludes.get(k, ())) for k, v in self.files.items()}

    def changes_to(self, other: Scope) -> list[str]:
        """What changed from this scope to `other`, by section: ``services: -web, +router``.

        A name kept with other paths (a service's script, a file set's globs) is ``~name``.
        """
        kept = self.services.keys() & other.services.keys()
        sections: tuple[tuple[str, Mapping[str, object], Mapping[str, object]], ...] = (
            ("services", self.services, other.services),
            ("files", self._file_sets(), other._file_sets()),
            ("repos", dict.fromkeys(self.repos), dict.fromkeys(other.repos)),
            ("commands", dict.fromkeys(self.commands), dict.fromkeys(other.commands)),
            ("health", dict.fromkeys(self.health), dict.fromkeys(other.health)),
            ("endpoints", dict.fromkeys(self.endpoints), dict.fromkeys(other.endpoints)),
            ("caches", dict.fromkeys(self.caches), dict.fromkeys(other.caches)),
            # per-service switches, for a service kept (one added or removed says so above)
            ("packages", _kept(self.packages, kept), _kept(other.packages, kept)),
            ("libraries", _kept(self.libraries, kept), _kept(other.libraries, kept)),
        )
        parts = []
        for section, before, after in sections:
            names = [f"-{n}" for n in before if n not in after]
            names += [f"+{n}" for n in after if n not in before]
            names += [f"~{n}" for n in before if n in after and before[n] != after[n]]
            if names:
                parts.append(f"{section}: {', '.join(names)}")
        return parts


def _kept(names: tuple[str, ...], kept: Set[str]) -> dict[str, None]:
    """The names among `kept`, as a section's mapping."""
    return {n: None for n in names if n in kept}


def config_digest(config: Config) -> str:
    """A digest of what the config says, not how it is written: comments and order aside."""
    data = asdict(config)
    data.pop("path", None)
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class ConfigInfo:
    """The config a snapshot was taken with: its path, a digest of what it said, its scope."""

    path: str | None
    digest: str
    scope: Scope

    @classmethod
    def of(cls, config: Config) -> ConfigInfo:
        path = str(config.path.resolve()) if config.path is not None else None
        return cls(path, config_digest(config), Scope.of(config))
