"""The grouper's room for the GPUs and their driver (`drift.collectors.gpu`): stories and titles.

A GPU's settings are in effect on the GPU as soon as they are set, for every
process on it, so a changed power limit or clock is live; ECC and MIG modes
wait for the GPU's next reset ("pending" ones). Related keys are one story
(``nvidia-smi -pl`` moves the requested and the enforced limit; enabling MIG
moves its mode and its devices), rooted at the key that matters most. A GPU
that appears or goes is one story. A driver update is one story with the
CUDA version it brings; the services running now that started before it
started with the old one, which its label says (as a file's story does, from
the same start times, `Claims.running_starts`).
"""

from __future__ import annotations

from drift.analysis.claims import Claims, value_of
from drift.analysis.diff import Change
from drift.analysis.story import Status
from drift.analysis.titles import about_the_same_time, shown
from drift.display import truncated
from drift.store.query import StoredVersion
from drift.subjects import GPU_PENDING_KEYS

DRIVER = "gpu:driver"

# Keys changed together by one operation, the story's root first.
_FAMILIES = (
    ("enforced.power.limit", "power.limit", "power.default_limit"),
    ("mig.mode.current", "mig.mode.pending", "mig.devices"),
    ("ecc.mode.current", "ecc.mode.pending"),
    ("clocks.applications.graphics", "clocks.applications.memory"),
    ("clocks.default_applications.graphics", "clocks.default_applications.memory"),
    ("clocks.max.graphics", "clocks.max.sm", "clocks.max.memory"),
)
_WORDS = {
    "enforced.power.limit": "power limit",
    "power.limit": "requested power limit",
    "power.default_limit": "default power limit",
    "persistence_mode": "persistence mode",
    "compute_mode": "compute mode",
    "ecc.mode.current": "ECC mode",
    "ecc.mode.pending": "ECC mode at the next reset",
    "mig.mode.current": "MIG mode",
    "mig.mode.pending": "MIG mode at the next reset",
    "mig.devices": "MIG devices",
    "clocks.applications.graphics": "application graphics clock",
    "clocks.applications.memory": "application memory clock",
    "clocks.default_applications.graphics": "default application graphics clock",
    "clocks.default_applications.memory": "default application memory clock",
    "clocks.max.graphics": "max graphics clock",
    "clocks.max.sm": "max SM clock",
    "clocks.max.memory": "max memory clock",
    "vbios_version": "VBIOS",
    "pci.bus_id": "PCI bus id",
}
IN_EFFECT = "in effect on the GPU now, for every process on it"
AT_RESET = "not applied yet: takes effect at the GPU's next reset or reboot"


class GpuStories(Claims):
    """Stories of the GPUs and their driver."""

    def gpu_stories(self) -> None:
        """One story per GPU that came or went, per family of settings changed, per driver."""
        subjects = sorted({c.subject for c in self.unclaimed() if c.subject.startswith("gpu:")})
        gpus = [s for s in subjects if s != DRIVER]
        for subject in gpus:
            self._whole_gpu_story(subject)
        for subject in gpus:
            self._setting_stories(subject)
        if DRIVER in subjects:
            self._driver_story()

    def _whole_gpu_story(self, subject: str) -> bool:
        """A GPU that appeared or is no longer listed: one story of all its facts.

        The other GPUs' new indexes are its evidence: a GPU gone renumbers those after it.
        """
        changes = self.unclaimed(subject)
        kinds = {c.kind for c in changes}
        gone = kinds == {"removed"} and not any(s == subject for s, _k in self.after)
        came = kinds == {"added"} and any(c.key == "index" for c in changes)
        if not (gone or came):
            return False
        root = next((c for c in changes if c.key == "name"), changes[0])
        # The GPUs after it on the bus are numbered again: that follows from this story.
        renumbered = [self.free(s, "index") for s, k in self.by_ident if k == "index"]
        rest = [c for c in changes if c is not root] + [
            c for c in renumbered if c is not None and c.kind == "modified"
        ]
        name = self.gpu_name(subject)
        if gone:
            title = f"{name} no longer listed by the GPU tool"
            label = "gone for every process: off the bus, failed or unbound from the driver"
        else:
            title, label = f"{name} appeared", "listed by the GPU tool now"
        self.add(root, rest, "live", label, title)
        return True

    def _setting_stories(self, subject: str) -> None:
        for change in self.unclaimed(subject):
            if not self.free(subject, change.key):
                continue  # claimed by its family's story already
            family = next((f for f in _FAMILIES if change.key in f), (change.key,))
            found = [c for c in (self.free(subject, k) for k in family) if c is not None]
            root, *rest = found
            status: Status = "pending" if root.key in GPU_PENDING_KEYS else "live"
            label = AT_RESET if status == "pending" else IN_EFFECT
            self.add(root, rest, status, label, f"{self.gpu_name(subject)}: {setting_text(root)}")

    def _driver_story(self) -> None:
        found = [self.free(DRIVER, k) for k in ("driver_version", "cuda_version")]
        changes = [c for c in found if c is not None]
        if not changes:
            return
        root, *rest = changes
        status, label = self._driver_status(root)
        self.add(root, rest, status, label, driver_title(changes))

    def _driver_status(self, change: Change) -> tuple[Status, str]:
        """Loaded now; the running services that started before it run with the old one."""
        started = self.running_starts()
        old = _value(change.before) or "none"
        if not started:
            return "live", "loaded now; no running service recorded to say who uses it"
        span = self.records.span(change)
        order = {name: at.order(span) for name, at in started.items()}
        before = sorted(name for name, o in order.items() if o == "before")
        if len(before) == len(order):
            return "pending", (
                f"not in the running services yet: {', '.join(before)} started "
                f"with the old driver ({old}); takes effect on their next restart"
            )
        parts = ["loaded now"]
        later = sorted(name for name, o in order.items() if o == "after")
        unknown = sorted(name for name, o in order.items() if o == "unknown")
        if later:
            parts.append(f"{', '.join(later)} started after it")
        if unknown:
            parts.append(f"{', '.join(unknown)} started {about_the_same_time([], span)}")
        if before:
            parts.append(f"{', '.join(before)} started with the old driver ({old})")
        return "live", "; ".join(parts)

    def gpu_name(self, subject: str) -> str:
        """``GPU 3 (NVIDIA H100 80GB HBM3, GPU-5e3c4a1b…)``, from its facts now or last seen."""
        uuid = subject.removeprefix("gpu:")
        index = self._last(subject, "index")
        product = self._last(subject, "name")
        short = uuid[:12] + "…" if len(uuid) > 12 else uuid
        described = f"{product}, {short}" if product else short
        return f"GPU {index} ({described})" if index is not None else f"GPU ({described})"

    def _last(self, subject: str, key: str) -> str | None:
        now = value_of(self.after.get((subject, key)))
        if now is not None:
            return now
        change = self.by_ident.get((subject, key))
        return None if change is None else value_of(change.before)


def setting_text(change: Change) -> str:
    """``power limit 700.00 W -> 500.00 W``; a key the tool starts or stops giving says so."""
    words = _WORDS.get(change.key, change.key)
    if change.key == "mig.devices":
        return f"{words} {_devices(change.before)} -> {_devices(change.after)}"
    if change.kind == "added":
        return f"{words} {_value(change.after)} (not reported before)"
    if change.kind == "removed":
        return f"{words} no longer reported (was {_value(change.before)})"
    return f"{words} {_value(change.before)} -> {_value(change.after)}"


def _value(version: StoredVersion | None) -> str:
    """A value as nvidia-smi writes it, unquoted ("700.00 W"); a secret as its marker."""
    if version is None or version.secret or version.value is None:
        return shown(version)
    return truncated(version.value, 40)


def _devices(version: object) -> str:
    value = getattr(version, "value", None)
    if not isinstance(value, str) or value in ("None", ""):
        return "none"
    count = len(value.splitlines())
    return f"{count} device" if count == 1 else f"{count} devices"


def driver_title(changes: list[Change]) -> str:
    """``NVIDIA driver 550.54.15 -> 550.90.07 (CUDA 12.4 -> 12.5)``."""
    parts = []
    for change in changes:
        what = "NVIDIA driver" if change.key == "driver_version" else "CUDA"
        if change.kind == "modified":
            parts.append(f"{what} {_value(change.before)} -> {_value(change.after)}")
        elif change.kind == "added":
            parts.append(f"{what} {_value(change.after)} (not recorded before)")
        else:
            parts.append(f"{what} no longer reported (was {_value(change.before)})")
    head, *more = parts
    return head + (f" ({'; '.join(more)})" if more else "")
