"""The GPUs through NVML (`nvidia-ml-py`, imported as pynvml), written as nvidia-smi writes them.

Used where nvidia-smi is not on PATH (`drift.collectors.gpu`), so each value
is formatted the way `nvidia-smi -q -x` writes the same field ("700.00 W",
"1980 MHz", "Enabled"), and a GPU's facts do not change with the tool that
read them; a test on a machine with a GPU compares the two. NVML that is not
installed, or finds no driver, is `NvmlAbsent` (no GPU here); any other
failure to start it (the driver and library at different versions) is a
`GpuReadError`, a blind spot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drift.collectors.gpu import NOT_AVAILABLE, GpuReadError, GpuReading
from drift.facts import storable

# NVML's return codes (nvml.h), so that an old pynvml without the names still reads.
_NOT_SUPPORTED = 3
_NOT_FOUND = 6
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_ABSENT = frozenset({_DRIVER_NOT_LOADED, _LIBRARY_NOT_FOUND})

_CLOCK_GRAPHICS, _CLOCK_SM, _CLOCK_MEM = 0, 1, 2
_FEATURE = {0: "Disabled", 1: "Enabled"}
_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


class NvmlAbsent(Exception):
    """NVML is not installed or finds no NVIDIA driver: no GPU to read."""


def read_nvml() -> GpuReading:
    """Every GPU NVML sees, with the driver's versions."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise NvmlAbsent("NVML is not installed (pip install drift-provenance[gpu])") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        if getattr(exc, "value", None) in _ABSENT:
            raise NvmlAbsent(f"NVML finds no driver ({exc})") from None
        raise GpuReadError(f"cannot start: {exc}") from None
    try:
        return _read(pynvml)
    except pynvml.NVMLError as exc:
        raise GpuReadError(str(exc)) from None
    finally:
        pynvml.nvmlShutdown()


def _read(nvml: Any) -> GpuReading:
    reading = GpuReading()
    reading.driver["driver_version"] = _text(nvml.nvmlSystemGetDriverVersion())
    cuda = int(nvml.nvmlSystemGetCudaDriverVersion())
    reading.driver["cuda_version"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
    for index in range(int(nvml.nvmlDeviceGetCount())):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        values = {"uuid": uuid, "index": str(index)}
        for key, read in _fields(nvml, handle).items():
            try:
                values[key] = read()
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) == _NOT_SUPPORTED:
                    values[key] = NOT_AVAILABLE
                else:
                    reading.unread[uuid, key] = str(exc)
        reading.gpus.append(values)
    return reading


def _fields(nvml: Any, h: Any) -> dict[str, Callable[[], str]]:
    """Each key of `drift.collectors.gpu.GPU_FIELDS`, read through NVML as nvidia-smi shows it."""
    return {
        "name": lambda: _text(nvml.nvmlDeviceGetName(h)),
        "pci.bus_id": lambda: _text(nvml.nvmlDeviceGetPciInfo(h).busId),
        "vbios_version": lambda: _text(nvml.nvmlDeviceGetVbiosVersion(h)),
        "persistence_mode": lambda: _FEATURE[nvml.nvmlDeviceGetPersistenceMode(h)],
        "compute_mode": lambda: _COMPUTE_MODES[nvml.nvmlDeviceGetComputeMode(h)],
        "ecc.mode.current": lambda: _FEATURE[nvml.nvmlDeviceGetEccMode(h)[0]],
        "ecc.mode.pending": lambda: _FEATURE[nvml.nvmlDeviceGetEccMode(h)[1]],
        "mig.mode.current": lambda: _FEATURE[nvml.nvmlDeviceGetMigMode(h)[0]],
        "mig.mode.pending": lambda: _FEATURE[nvml.nvmlDeviceGetMigMode(h)[1]],
        "mig.devices": lambda: _mig_devices(nvml, h),
        "enforced.power.limit": lambda: _watts(nvml.nvmlDeviceGetEnforcedPowerLimit(h)),
        "power.limit": lambda: _watts(nvml.nvmlDeviceGetPowerManagementLimit(h)),
        "power.default_limit": lambda: _watts(nvml.nvmlDeviceGetPowerManagementDefaultLimit(h)),
        "clocks.applications.graphics": lambda: _mhz(
            nvml.nvmlDeviceGetApplicationsClock(h, _CLOCK_GRAPHICS)
        ),
        "clocks.applications.memory": lambda: _mhz(
            nvml.nvmlDeviceGetApplicationsClock(h, _CLOCK_MEM)
        ),
        "clocks.default_applications.graphics": lambda: _mhz(
            nvml.nvmlDeviceGetDefaultApplicationsClock(h, _CLOCK_GRAPHICS)
        ),
        "clocks.default_applications.memory": lambda: _mhz(
            nvml.nvmlDeviceGetDefaultApplicationsClock(h, _CLOCK_MEM)
        ),
        "clocks.max.graphics": lambda: _mhz(nvml.nvmlDeviceGetMaxClockInfo(h, _CLOCK_GRAPHICS)),
        "clocks.max.sm": lambda: _mhz(nvml.nvmlDeviceGetMaxClockInfo(h, _CLOCK_SM)),
        "clocks.max.memory": lambda: _mhz(nvml.nvmlDeviceGetMaxClockInfo(h, _CLOCK_MEM)),
    }


def _mig_devices(nvml: Any, h: Any) -> str:
    """As `drift.collectors.gpu` writes them from the XML: one line a device, sorted."""
    try:
        slots = int(nvml.nvmlDeviceGetMaxMigDeviceCount(h))
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) == _NOT_SUPPORTED:
            return "None"  # no MIG on this GPU: nvidia-smi writes "None" too
        raise
    lines = []
    for slot in range(slots):
        try:
            device = nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) == _NOT_FOUND:
                continue  # an empty slot
            raise
        gi = nvml.nvmlDeviceGetGpuInstanceId(device)
        ci = nvml.nvmlDeviceGetComputeInstanceId(device)
        sms = nvml.nvmlDeviceGetAttributes(device).multiprocessorCount
        lines.append(f"GPU instance {gi}, compute instance {ci}, {sms} SMs")
    return "\n".join(sorted(lines)) if lines else "None"


def _text(value: str | bytes) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="surrogateescape")
    return storable(value.strip())


def _watts(milliwatts: int) -> str:
    return f"{milliwatts / 1000:.2f} W"


def _mhz(value: int) -> str:
    return f"{value} MHz"
