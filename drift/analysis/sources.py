"""Where a service's live value could come from, in one recorded state.

`drift.analysis.origins` matches one script fact against one live value;
here the question is asked for a service across the whole current state:
every serve script that serves it (with the branches its other live values
show were taken), then systemd's sources in the order systemd merges them
(`SYSTEMD_SOURCES`), and ExecStart=, else "source unknown".

systemd builds a unit's environment from its manager's environment, then
PassEnvironment=, then Environment=, then the EnvironmentFile= files, a
later source overriding an earlier one (exec_child in systemd's
src/core/execute.c; checked against a real systemd in
tests/test_unit_sources.py); the serve script it runs exports over all of
them. Only the strongest source that sets a name can give its value: a
weaker one that happens to hold the same value is not named.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from drift.analysis.diff import Change, State
from drift.analysis.origins import (
    Attribution,
    attribute,
    attribute_together,
    branches_from_env,
    either,
    passed_flags,
)
from drift.analysis.titles import MANAGER, SOURCE_UNKNOWN, shown
from drift.shell.patterns import feasible
from drift.store.query import StoredVersion

MANAGER_SUBJECT = "systemd:manager"
SYSTEMD_SOURCES = ("unit:envfile:", "unit:environment:", "unit:pass_environment:", "manager")
"""systemd's sources of a unit's variable, strongest first (``manager``: its environment)."""


class ServiceSources:
    """The recorded sources of each service's live values in the state `after`.

    `script_service` maps each ``script:PATH`` subject to the service it
    serves. What a service's values show about its scripts' branches is
    worked out once per service.
    """

    def __init__(self, after: State, script_service: Mapping[str, str]) -> None:
        self.after = after
        self.script_service = script_service
        self._branches: dict[str, frozenset[str]] = {}

    def inherited(self, service: str, change: Change) -> bool:
        """True if no recorded script line or unit setting of the service gives this live variable.

        A line that only passes on the value the script was given
        (``${NAME:-default}`` taking the caller's) counts as inherited.
        """
        name = change.key.removeprefix("env:")
        if self.systemd_source(service, name) is not None:
            return False
        exported = any(
            (script, f"export:{name}") in self.after
            for script, owner in self.script_service.items()
            if owner == service
        )
        if not exported:
            # A line drift did not follow may have set it: not known to be inherited.
            return not self.unread(service)
        if change.after is None:
            return False
        found = self.script_origin(service, f"export:{name}", change.after)
        return (
            found is not None
            and not found.unsure
            and (found.caller or bool(found.spots))
            and all(spot.given for spot in found.spots)
        )

    def env_source(self, service: str, change: Change) -> str:
        """Where a live variable could have come from, when no changed source explains it."""
        name = change.key.removeprefix("env:")
        if change.after is None:
            return f"removed; {SOURCE_UNKNOWN}"
        found = self.script_origin(service, f"export:{name}", change.after)
        if found is not None:
            return f"{found.words()} (unchanged since the baseline)"
        source = self.systemd_source(service, name)
        if source is None:
            unread = self.unread(service)
            if unread:
                return f"unsure: perhaps set by {', '.join(unread)} (not followed)"
            return SOURCE_UNKNOWN
        words = source_words(*source)
        if _same(source[1], change.after):
            return f"from {words}"
        # The strongest source says otherwise: none weaker can have given it.
        return f"{SOURCE_UNKNOWN} ({words} sets {shown(source[1])} now)"

    def unread(self, service: str) -> list[str]:
        """FILE:LINE of each line of the service's scripts drift did not follow.

        Such a line (``conda activate``, a file written while the script
        runs) may have exported any variable the service has.
        """
        out: list[str] = []
        for script, owner in sorted(self.script_service.items()):
            version = self.after.get((script, "exec"))
            if owner != service or version is None:
                continue
            for spot in version.provenance.get("unread") or ():
                if isinstance(spot, dict) and spot.get("file") and spot.get("line"):
                    out.append(f"{spot['file']}:{spot['line']}")
        return list(dict.fromkeys(out))

    def systemd_source(self, service: str, name: str) -> tuple[str, StoredVersion] | None:
        """The strongest systemd source that sets `name` for the service now, and its value.

        The manager's environment counts only for a service systemd starts
        (one found by unit).
        """
        subject = f"service:{service}"
        for prefix in SYSTEMD_SOURCES[:-1]:
            version = self.after.get((subject, prefix + name))
            if version is not None:
                return prefix, version
        if (subject, "unit:load_state") in self.after:
            version = self.after.get((MANAGER_SUBJECT, f"environment:{name}"))
            if version is not None:
                return "manager", version
        return None

    def overridden(self, service: str, name: str, source: str) -> str | None:
        """What sets `name` for the service over the systemd `source`, in words; None if nothing.

        A serve script's export overrides every systemd source; among them
        the order of SYSTEMD_SOURCES decides.
        """
        for script, owner in sorted(self.script_service.items()):
            version = self.after.get((script, f"export:{name}"))
            if owner == service and version is not None and not version.provenance.get("inherited"):
                return f"the serve script exports {name} ({_line_of(version)}), over it"
        stronger = SYSTEMD_SOURCES[: SYSTEMD_SOURCES.index(source)]
        found = self.systemd_source(service, name)
        if found is not None and found[0] in stronger:
            return f"{source_words(*found)} sets {name} over it"
        return None

    def flag_source(self, service: str, change: Change) -> str:
        """Where a live flag could have come from: the script's exec line, the unit's ExecStart=."""
        name = change.key.removeprefix("flag:")
        if change.after is None:
            return f"removed; {SOURCE_UNKNOWN}"
        found = self.script_origin(service, change.key, change.after)
        if found is not None:
            return f"{found.words()} (unchanged since the baseline)"
        exec_start = self.after.get((f"service:{service}", "unit:exec_start"))
        words = None if exec_start is None else exec_start.value
        if words and name in words.split():
            return "from unit ExecStart="
        return SOURCE_UNKNOWN

    def script_origin(self, service: str, key: str, live: StoredVersion) -> Attribution | None:
        """The script lines of `service` that can give the live value of `key`, if any.

        A live flag is also placed by the live command line: a word the script
        does not write (``"$@"``) may hold it (`passed_flags`).
        """
        argv = self.argv_words(service) if key.startswith("flag:") else None
        for script, owner in sorted(self.script_service.items()):
            if owner != service:
                continue
            found = self.attribute(service, self.after.get((script, key)), live)
            if argv is not None:
                passed = passed_flags(
                    self.after.get((script, "exec")),
                    argv,
                    self.known_branches(service),
                    self.live_env(service),
                )
                found = either(found, passed.get(key.removeprefix("flag:")))
            if found is not None:
                return found
        return None

    def live_env(self, service: str) -> dict[str, str] | None:
        """The service's live environment, or None if part of it is secret (not comparable)."""
        subject = f"service:{service}"
        env: dict[str, str] = {}
        for (s, k), v in self.after.items():
            if s == subject and k.startswith("env:"):
                if v.value is None or v.secret:
                    return None
                env[k.removeprefix("env:")] = v.value
        return env or None

    def argv_words(self, service: str) -> list[str] | None:
        """The service's live command line, word by word, if recorded and not secret."""
        argv = self.after.get((f"service:{service}", "argv"))
        if argv is None or argv.value is None or argv.secret:
            return None
        try:
            words = json.loads(argv.value)
        except ValueError:
            return None
        return [str(w) for w in words] if isinstance(words, list) else None

    def attribute(
        self, service: str, script: StoredVersion | None, live: StoredVersion | None
    ) -> Attribution | None:
        """`attribute`, knowing which branches this service's own values show were taken."""
        return attribute(script, live, self.known_branches(service))

    def known_branches(self, service: str) -> frozenset[str]:
        """Branch conditions the service's live values single out (cached per service)."""
        cached = self._branches.get(service)
        if cached is not None:
            return cached
        pairs: dict[tuple[str, str], tuple[StoredVersion | None, StoredVersion | None]] = {}
        subject = f"service:{service}"
        env = {
            k.removeprefix("env:"): v.value
            for (s, k), v in self.after.items()
            if s == subject and k.startswith("env:") and v.value is not None and not v.secret
        }
        decided: set[str] = set()
        for script, owner in self.script_service.items():
            if owner == service:
                decided |= branches_from_env(self.after.get((script, "exec")), env)
        for (script, key), version in self.after.items():
            if self.script_service.get(script) != service:
                continue
            if key.startswith("export:"):
                live_key = "env:" + key.removeprefix("export:")
            elif key.startswith("flag:"):
                live_key = key
            else:
                continue
            pairs[(script, key)] = (version, self.after.get((subject, live_key)))
        argv = self.after.get((subject, "argv"))
        if argv is not None and argv.value is not None and not argv.secret:
            live_line = _joined_argv(argv)
            for script, owner in self.script_service.items():
                if owner == service and (script, "exec") in self.after:
                    pairs[(script, "exec")] = (self.after[(script, "exec")], live_line)
        found = attribute_together(pairs, decided if feasible(decided) else ())
        known: set[str] = set(decided) if feasible(decided) else set()
        for attribution in found.values():
            if attribution is not None and attribution.single is not None:
                known.update(attribution.held)
        result = frozenset(known) if feasible(known) else frozenset()
        self._branches[service] = result
        return result


def source_words(source: str, version: StoredVersion) -> str:
    """A systemd source of a variable in words, with its file and line where known."""
    where = _line_of(version)
    unit = version.provenance.get("unit")
    if source == "unit:envfile:":
        return f"EnvironmentFile {where}"
    if source == "unit:environment:":
        return "unit Environment=" + (f" ({where})" if where else f" ({unit})" if unit else "")
    if source == "unit:pass_environment:":
        return f"PassEnvironment= of {unit} (the manager's own environment)"
    return f"{MANAGER} (systemctl set-environment, or DefaultEnvironment=)"


def _line_of(version: StoredVersion) -> str:
    """FILE:LINE of a value, or "" when no one line gives it."""
    file, line = version.provenance.get("file"), version.provenance.get("line")
    return f"{file}:{line}" if file and line else ""


def _same(a: StoredVersion | None, b: StoredVersion | None) -> bool:
    """The same value: both absent, or equal (digests for secrets, never the secret)."""
    if a is None or b is None:
        return a is None and b is None
    return (a.value, a.blob_sha256, a.secret) == (b.value, b.blob_sha256, b.secret)


def _joined_argv(argv: StoredVersion) -> StoredVersion | None:
    """The live command line as one string of words, to match against a script's launches."""
    try:
        words = json.loads(argv.value or "")
    except ValueError:
        return None
    if not isinstance(words, list):
        return None
    return replace(argv, value=" ".join(str(w) for w in words))
