"""[gpu]: the NVIDIA driver and each GPU's settings, read from `nvidia-smi -q -x` or NVML.

One subject per GPU, named by its UUID (a reordered bus is not a change of
every GPU; the index is a fact of its own), and ``gpu:driver`` for the
driver they share. Only what an operator sets or an upgrade moves is kept:
modes, limits, application and maximum clocks, versions, MIG devices; never
a reading that changes by itself (temperature, utilisation, memory used,
clocks now, power draw, processes, fans). Values are as nvidia-smi writes
them ("700.00 W", "1980 MHz", "Enabled"); what it cannot give ("N/A",
"[N/A]", "[Not Supported]") is stored as "N/A", and what it failed to read
("[Unknown Error]", "[Insufficient Permissions]") is a blind spot on that
key alone. The tool failing (the driver and its library at different
versions, a timeout, output that is not its XML) is a blind spot over every
GPU, which keeps their last values: only a working tool that no longer
lists a GPU removes it. NVML (`drift.collectors.nvml`) gives the same facts
where nvidia-smi is not on PATH.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast
from xml.etree import ElementTree

from defusedxml import EntitiesForbidden
from defusedxml.ElementTree import DefusedXMLParser

from drift.collectors.commands import run_bounded
from drift.config import GpuSpec
from drift.facts import CollectContext, CollectionError, Fact, storable
from drift.secrets.shapes import cut

SCOPE = "gpu:"
"""The error subject that covers every GPU and the driver (`CollectionError.covers`)."""
DRIVER = "gpu:driver"
NOT_AVAILABLE = "N/A"
# nvidia-smi -q -x writes several GPUs' worth of supported clocks: room for a big box.
MAX_OUTPUT = 32 << 20

_NO_VALUE = frozenset({"N/A", "[N/A]", "Not Supported", "[Not Supported]"})
_UNREAD = frozenset({"Unknown Error"})

DRIVER_FIELDS = (("driver_version", "driver_version"), ("cuda_version", "cuda_version"))
GPU_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("name", ("product_name",)),
    ("pci.bus_id", ("pci/pci_bus_id",)),
    ("vbios_version", ("vbios_version",)),
    ("persistence_mode", ("persistence_mode",)),
    ("compute_mode", ("compute_mode",)),
    ("ecc.mode.current", ("ecc_mode/current_ecc",)),
    ("ecc.mode.pending", ("ecc_mode/pending_ecc",)),
    ("mig.mode.current", ("mig_mode/current_mig",)),
    ("mig.mode.pending", ("mig_mode/pending_mig",)),
    # drivers since 535 write gpu_power_readings, older ones power_readings
    (
        "enforced.power.limit",
        ("gpu_power_readings/current_power_limit", "power_readings/enforced_power_limit"),
    ),
    ("power.limit", ("gpu_power_readings/requested_power_limit", "power_readings/power_limit")),
    (
        "power.default_limit",
        ("gpu_power_readings/default_power_limit", "power_readings/default_power_limit"),
    ),
    ("clocks.applications.graphics", ("applications_clocks/graphics_clock",)),
    ("clocks.applications.memory", ("applications_clocks/mem_clock",)),
    ("clocks.default_applications.graphics", ("default_applications_clocks/graphics_clock",)),
    ("clocks.default_applications.memory", ("default_applications_clocks/mem_clock",)),
    ("clocks.max.graphics", ("max_clocks/graphics_clock",)),
    ("clocks.max.sm", ("max_clocks/sm_clock",)),
    ("clocks.max.memory", ("max_clocks/mem_clock",)),
)
"""Each key and where nvidia-smi's XML has it, newest layout first."""


class GpuReadError(Exception):
    """The GPUs could not be read at all: the message is the blind spot's."""


@dataclass
class GpuReading:
    """What one read of the GPUs gave: the driver's values and each GPU's, as text.

    Each GPU's values hold its ``uuid``; a value None is one the tool failed
    to read (its text is in `unread`, by (uuid or "driver", key)).
    """

    driver: dict[str, str] = field(default_factory=dict)
    gpus: list[dict[str, str]] = field(default_factory=list)
    unread: dict[tuple[str, str], str] = field(default_factory=dict)


def collect_gpus(spec: GpuSpec, ctx: CollectContext) -> Iterator[Fact | CollectionError]:
    """`gpu:driver` and one `gpu:UUID` per GPU; nothing when auto finds no tool."""
    command = spec.command
    if _on_path(command[0]):
        run = shlex.join(command)
        try:
            reading = read_command(command, spec.timeout)
        except GpuReadError as exc:
            yield CollectionError(SCOPE, None, f"{run}: {exc}")
            return
        yield from reading_facts(reading, {"run": run})
        return
    from drift.collectors.nvml import NvmlAbsent, read_nvml

    try:
        reading = read_nvml()
    except NvmlAbsent as exc:
        loaded = driver_gpus(spec.proc_root)
        if spec.enabled or loaded:
            # A box whose driver knows GPUs and whose tool went missing (mid-upgrade):
            # what its GPUs are set to is unknown, not gone.
            driver = f", yet the NVIDIA driver lists {loaded} GPUs" if loaded else ""
            yield CollectionError(SCOPE, None, f"{command[0]} is not on PATH and {exc}{driver}")
        return
    except GpuReadError as exc:
        yield CollectionError(SCOPE, None, f"NVML: {exc}")
        return
    yield from reading_facts(reading, {"source": "NVML"})


def driver_gpus(proc_root: str) -> int:
    """How many GPUs the loaded NVIDIA driver lists (``driver/nvidia/gpus`` in /proc); 0 if none."""
    try:
        return len(os.listdir(os.path.join(proc_root, "driver", "nvidia", "gpus")))
    except OSError:
        return 0


def _on_path(program: str) -> bool:
    return shutil.which(program) is not None


def read_command(command: tuple[str, ...], timeout: float) -> GpuReading:
    """Run nvidia-smi -q -x (or the configured command) and read its XML."""
    done = run_bounded(command, timeout, max_output=MAX_OUTPUT)
    if done.error is not None:
        raise GpuReadError(done.error)
    if done.timed_out or done.exit_code is None:
        raise GpuReadError(f"timed out after {timeout:g}s")
    said = _first_line(done.stderr) or _first_line(done.stdout)
    if done.exit_code != 0:
        if "No devices were found" in said:
            return GpuReading()  # the tool works and says there is no GPU
        raise GpuReadError(f"exit {done.exit_code}" + (f": {said}" if said else ""))
    if done.truncated:
        raise GpuReadError(f"output over {MAX_OUTPUT >> 20} MiB, not read")
    return parse_smi_xml(done.stdout)


def _first_line(data: bytes) -> str:
    for line in data.decode("utf-8", errors="replace").splitlines():
        if line.strip():
            return cut(storable(line.strip()), 300)
    return ""


def parse_smi_xml(data: bytes) -> GpuReading:
    """The facts of `nvidia-smi -q -x` output; GpuReadError if it is not that XML.

    Parsed by defusedxml, so no entity is ever expanded whatever the output's
    encoding (nvidia-smi never declares one: output that does is refused), and
    bounded: past MAX_DEPTH levels or MAX_ELEMENTS kept elements it is refused,
    and only the elements a fact comes from are built. An answer that lists
    fewer GPUs than it says are attached, or none, is not read: "no GPU" from
    a broken answer is a blind spot, never every GPU removed.
    """
    root = _bounded_tree(data)
    reading = GpuReading()
    for key, path in DRIVER_FIELDS:
        _keep(reading, reading.driver, "driver", key, root.findtext(path))
    gpus = root.findall("gpu")
    attached = (root.findtext("attached_gpus") or "").strip()
    if not gpus or attached != str(len(gpus)):
        said = f"says {attached} attached" if attached.isdigit() else "says none are attached"
        raise GpuReadError(f"output lists {len(gpus)} GPUs and {said}: not read")
    for index, gpu in enumerate(gpus):
        uuid = _clean(gpu.findtext("uuid") or "") or f"PCI-{gpu.get('id', index)}"
        values = {"uuid": uuid, "index": str(index)}
        for key, paths in GPU_FIELDS:
            text = next((t for t in map(gpu.findtext, paths) if t is not None), None)
            _keep(reading, values, uuid, key, text)
        if "pci.bus_id" not in values and gpu.get("id"):
            values["pci.bus_id"] = gpu.get("id", "")
        migs = gpu.find("mig_devices")
        if migs is not None:
            values["mig.devices"] = _mig_devices(migs)
        reading.gpus.append(values)
    return reading


MAX_DEPTH = 16  # nvidia-smi's XML is 5 deep
MAX_ELEMENTS = 100_000  # of those kept: some 40 a GPU
_MIG = ("mig_devices", "mig_device")
_KEPT_PATHS = (
    "attached_gpus",
    *(path for _key, path in DRIVER_FIELDS),
    "gpu/uuid",
    *(f"gpu/{path}" for _key, paths in GPU_FIELDS for path in paths),
    *(
        f"gpu/{'/'.join(_MIG)}/{leaf}"
        for leaf in (
            "gpu_instance_id",
            "compute_instance_id",
            "device_attributes/shared/multiprocessor_count",
        )
    ),
)
_KEPT = frozenset(
    ("nvidia_smi_log", *parts[:n])
    for parts in (tuple(p.split("/")) for p in _KEPT_PATHS)
    for n in range(len(parts) + 1)
)
"""The element paths a fact is read from, and every path above them: nothing else is built."""


class _Refused(Exception):
    """The XML is past a bound: the message says which."""


class _KeptTree:
    """An XMLParser target building only the elements under `_KEPT`, within the bounds."""

    def __init__(self) -> None:
        self.builder = ElementTree.TreeBuilder()
        self.path: list[str] = []
        self.root = ""
        self.skipping = 0  # depth inside an element not kept
        self.kept = 0

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        self.root = self.root or tag
        self.path.append(tag)
        if len(self.path) > MAX_DEPTH:
            raise _Refused(f"output nests deeper than {MAX_DEPTH} levels")
        if self.skipping or tuple(self.path) not in _KEPT:
            self.skipping += 1
            return
        self.kept += 1
        if self.kept > MAX_ELEMENTS:
            raise _Refused(f"output has more than {MAX_ELEMENTS:,} elements to read")
        self.builder.start(tag, attrs)

    def end(self, tag: str) -> None:
        self.path.pop()
        if self.skipping:
            self.skipping -= 1
        else:
            self.builder.end(tag)

    def data(self, text: str) -> None:
        if not self.skipping:
            self.builder.data(text)

    def close(self) -> ElementTree.Element | None:
        return self.builder.close() if self.root == "nvidia_smi_log" else None


def _bounded_tree(data: bytes) -> ElementTree.Element:
    """The kept elements of nvidia-smi's XML, parsed in chunks so a bound stops it early."""
    target = _KeptTree()
    parser = DefusedXMLParser(target=target)
    try:
        for at in range(0, len(data), _FEED):
            parser.feed(data[at : at + _FEED])
        root = parser.close()
    except _Refused as exc:
        raise GpuReadError(f"{exc}: not read") from None
    except EntitiesForbidden:
        raise GpuReadError(
            "output declares XML entities, which nvidia-smi never does: not read"
        ) from None
    except (ElementTree.ParseError, ValueError) as exc:  # DefusedXmlException; an encoding
        # expat cannot take ("multi-byte encodings are not supported")
        raise GpuReadError(f"output is not XML ({exc})") from None
    if root is None:
        raise GpuReadError(f"output is not nvidia-smi's XML (its root is <{target.root}>)")
    return cast(ElementTree.Element, root)


_FEED = 64 << 10


def _keep(reading: GpuReading, into: dict[str, str], who: str, key: str, text: str | None) -> None:
    """Put one field's text in `into`, "N/A" for no value; note one the tool failed to read."""
    if text is None:
        return  # this driver's XML has no such field
    value = _clean(text)
    if value in _NO_VALUE:
        into[key] = NOT_AVAILABLE
    elif value in _UNREAD or (value.startswith("[") and value.endswith("]")):
        reading.unread[who, key] = value.strip("[]")
    else:
        into[key] = value


def _clean(text: str) -> str:
    return storable(" ".join(text.split()))


def _mig_devices(element: ElementTree.Element) -> str:
    """Its MIG devices, one a line, in order: "None" when MIG makes none."""
    lines = []
    for device in element.iterfind("mig_device"):
        gi = _clean(device.findtext("gpu_instance_id") or "?")
        ci = _clean(device.findtext("compute_instance_id") or "?")
        line = f"GPU instance {gi}, compute instance {ci}"
        sms = device.findtext("device_attributes/shared/multiprocessor_count")
        if sms is not None:
            line += f", {_clean(sms)} SMs"
        lines.append(line)
    return "\n".join(sorted(lines)) if lines else "None"


def reading_facts(
    reading: GpuReading, provenance: Mapping[str, str]
) -> Iterator[Fact | CollectionError]:
    """The facts of a reading, driver first then GPU by GPU; a key not read is a blind spot."""
    prov = dict(provenance)
    for key, value in reading.driver.items():
        yield Fact(DRIVER, key, value, prov)
    for (who, key), message in sorted(reading.unread.items()):
        if who == "driver":
            yield CollectionError(DRIVER, key, f"{prov_text(prov)} says {message!r}")
    seen: set[str] = set()
    for values in reading.gpus:
        uuid = values["uuid"]
        subject = f"gpu:{uuid}"
        if uuid in seen:
            yield CollectionError(subject, None, f"{prov_text(prov)} lists {uuid} twice")
            continue
        seen.add(uuid)
        for key, value in values.items():
            if key != "uuid":
                yield Fact(subject, key, value, prov)
        for (who, key), message in sorted(reading.unread.items()):
            if who == uuid:
                yield CollectionError(subject, key, f"{prov_text(prov)} says {message!r}")


def prov_text(provenance: Mapping[str, str]) -> str:
    """Where a reading came from, in words: the command line, or NVML."""
    return provenance.get("run") or provenance.get("source") or "the GPU tool"
