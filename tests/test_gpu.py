"""[gpu]: the driver and each GPU's settings, from a real nvidia-smi-shaped executable on PATH.

There is no GPU here, so `nvidia-smi` is a script that prints XML written
for these tests in the shape of `nvidia-smi -q -x` (tests/gpu_xml: several
GPUs, MIG on and off, "N/A" and "[N/A]" fields, the old and the new power
layout); the tests swap what it prints, or make it fail, and read what
`drift record` and `drift since` say. One test compares NVML with nvidia-smi
and runs only where a real GPU is present.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from conftest import changes_by_fact, drift_env
from hypothesis import given, settings
from hypothesis import strategies as st

from drift.collectors.gpu import parse_smi_xml, reading_facts

ROOT = Path(__file__).resolve().parents[1]
XML = ROOT / "tests" / "gpu_xml"
H100 = (XML / "h100x4.xml").read_bytes()
A100 = (XML / "a100x2_r470.xml").read_bytes()
GPU3 = "gpu:GPU-d41e2b3c-4d5e-4f60-8172-93a4b5c6d7e8"
GPU2 = "gpu:GPU-0c9d8e7f-6a5b-4c3d-2e1f-0a9b8c7d6e5f"
GPU1 = "gpu:GPU-77a01f3c-2b4d-4e6f-9a8b-0c1d2e3f4a5b"
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"
VOLATILE = ("temp", "util", "draw", "used", "free", "process", "fan", "clock ")


class Box:
    """A box whose `nvidia-smi` on PATH prints what the test says, and drift run against it."""

    def __init__(self, tmp_path: Path, config: str = "") -> None:
        self.tmp = tmp_path
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.output = tmp_path / "smi.xml"
        self.config = tmp_path / "drift.toml"
        self.config.write_text(f'host = "gpu-box"\n{config}')
        self.db = tmp_path / "drift.db"

    def prints(self, xml: bytes) -> None:
        """nvidia-smi prints `xml` and exits 0."""
        self.output.write_bytes(xml)
        self.tool(f'cat "{self.output}"')

    def tool(self, body: str) -> None:
        script = self.bin / "nvidia-smi"
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)

    def no_tool(self) -> None:
        (self.bin / "nvidia-smi").unlink(missing_ok=True)

    def drift(self, *args: str, code: int = 0) -> Any:
        env = {
            **drift_env(self.tmp),
            "PYTHONPATH": str(ROOT),
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
        }
        done = subprocess.run(
            [sys.executable, "-m", "drift", *args, "--config", str(self.config)],
            capture_output=True,
            text=True,
            env={**env, "DRIFT_DB": str(self.db)},
            cwd=self.tmp,
            timeout=120,
        )
        assert done.returncode == code, done.stdout + done.stderr
        if "--format" in args:
            return json.loads(done.stdout)["data"]
        return done

    def record(self, code: int = 0) -> subprocess.CompletedProcess[str]:
        done: subprocess.CompletedProcess[str] = self.drift("record", code=code)
        return done

    def since(self, stable: str) -> Any:
        return self.drift("since", "--stable", stable, "--all", "--format", "json")

    def shown(self) -> dict[str, dict[str, str]]:
        subjects = self.drift("show", "--format", "json")["subjects"]
        return {
            s["subject"]: {f["key"]: f["value"] for f in s["facts"]}
            for s in subjects
            if s["subject"].startswith("gpu:")
        }


def edited(xml: bytes, gpu_uuid: str, **paths: str) -> bytes:
    """`xml` with fields of one GPU set (path__to__field="text"), or the driver's (gpu_uuid "")."""
    root = ElementTree.fromstring(xml)
    where = root
    if gpu_uuid:
        where = next(g for g in root.iterfind("gpu") if g.findtext("uuid") == gpu_uuid)
    for path, text in paths.items():
        element = where.find(path.replace("__", "/"))
        assert element is not None, path
        element.text = text
    return ElementTree.tostring(root, xml_declaration=True)


def without_gpu(xml: bytes, gpu_uuid: str) -> bytes:
    """`xml` as nvidia-smi writes it without that GPU: one fewer listed, and attached."""
    root = ElementTree.fromstring(xml)
    root.remove(next(g for g in root.iterfind("gpu") if g.findtext("uuid") == gpu_uuid))
    attached = root.find("attached_gpus")
    assert attached is not None
    attached.text = str(len(root.findall("gpu")))
    return ElementTree.tostring(root, xml_declaration=True)


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def test_facts_are_the_settings_not_the_readings(box: Box) -> None:
    box.prints(H100)
    box.record()
    gpus = box.shown()
    assert gpus["gpu:driver"] == {"driver_version": "550.54.15", "cuda_version": "12.4"}
    assert len(gpus) == 5
    three = gpus[GPU3]
    assert three["index"] == "3" and three["name"] == "NVIDIA H100 80GB HBM3"
    assert three["pci.bus_id"] == "00000000:5D:00.0"
    assert three["ecc.mode.current"] == "Disabled"
    assert three["enforced.power.limit"] == "700.00 W"
    assert three["clocks.max.sm"] == "1980 MHz"
    assert three["mig.devices"] == "None"
    assert gpus[GPU1]["persistence_mode"] == "Disabled"
    two = gpus[GPU2]
    assert two["mig.mode.current"] == "Enabled"
    assert two["mig.devices"].splitlines() == [
        "GPU instance 1, compute instance 0, 60 SMs",
        "GPU instance 2, compute instance 0, 60 SMs",
    ]
    assert two["vbios_version"] == "N/A"  # "[N/A]" in the XML
    assert two["clocks.applications.graphics"] == "N/A"  # "N/A" in the XML
    # temperatures, utilisation, power draw, memory used, clocks now, processes: never kept
    values = " ".join(v for facts in gpus.values() for v in facts.values())
    assert "C" not in values.split() and "%" not in values and "71.42" not in values
    assert not any(k.startswith(VOLATILE) for facts in gpus.values() for k in facts)


def test_the_old_power_layout_gives_the_same_keys() -> None:
    new = {f.key for f in reading_facts(parse_smi_xml(H100), {}) if f.subject == GPU3}
    reading = parse_smi_xml(A100)
    old = {(f.subject, f.key): getattr(f, "value", None) for f in reading_facts(reading, {})}
    assert {k for s, k in old if s != "gpu:driver"} == new
    second = "gpu:GPU-f0e1d2c3-b4a5-4968-8776-5a4b3c2d1e0f"
    assert old[second, "enforced.power.limit"] == "300.00 W"
    assert old[second, "power.default_limit"] == "400.00 W"


@settings(max_examples=25, deadline=None)
@given(st.permutations(range(4)))
def test_a_reordered_bus_changes_only_the_indexes(order: list[int]) -> None:
    """A GPU is named by its UUID: listed in another order, only `index` moves."""
    root = ElementTree.fromstring(H100)
    gpus = list(root.iterfind("gpu"))
    for gpu in gpus:
        root.remove(gpu)
    for i in order:
        root.append(gpus[i])

    def facts(xml: bytes) -> dict[tuple[str, str], str]:
        return {(f.subject, f.key): f.value for f in reading_facts(parse_smi_xml(xml), {})}  # type: ignore[union-attr]

    before, after = facts(H100), facts(ElementTree.tostring(root))
    moved = {ident for ident in before if before[ident] != after[ident]}
    assert before.keys() == after.keys()
    assert {key for _subject, key in moved} <= {"index"}
    assert len(moved) == sum(1 for position, i in enumerate(order) if position != i)


@pytest.fixture
def noisy(tmp_path: Path) -> Box:
    """A box with a command whose output changes at every record: noise to rank above."""
    return Box(tmp_path, '[[commands]]\nname = "clock"\nrun = "date +%s%N"\n')


def test_a_lowered_power_limit_is_a_live_suspect_above_noise(noisy: Box) -> None:
    noisy.prints(H100)
    noisy.record()
    noisy.record()
    noisy.prints(
        edited(
            H100,
            GPU3.removeprefix("gpu:"),
            gpu_power_readings__current_power_limit="500.00 W",
            gpu_power_readings__requested_power_limit="500.00 W",
            temperature__gpu_temp="61 C",  # a reading: never a change
        )
    )
    noisy.record()
    since = noisy.since("#2")
    top = since["suspects"][0]
    assert top["title"] == (
        "GPU 3 (NVIDIA H100 80GB HBM3, GPU-d41e2b3c…): power limit 700.00 W -> 500.00 W"
    )
    assert top["status"] == "live" and top["category"] == "gpu"
    assert [(c["key"], c["before"], c["after"]) for c in top["changes"]] == [
        ("enforced.power.limit", "700.00 W", "500.00 W"),
        ("power.limit", "700.00 W", "500.00 W"),
    ]
    titles = [s["title"] for s in since["suspects"]]
    assert titles[1:] == ["command clock: output modified"]
    text = noisy.drift("since", "--stable", "#2").stdout
    assert "GPU 3 (NVIDIA H100 80GB HBM3, GPU-d41e2b3c…): power limit 700.00 W -> 500.00 W" in text


FAILURES = {
    "mismatch": (f"echo '{MISMATCH}'\necho 'NVML library version: 550.90'\nexit 18", MISMATCH),
    "timeout": ("sleep 30", "timed out after 1s"),
    "garbage": ("echo 'Segmentation fault (core dumped)'", "output is not XML"),
    "other XML": ("echo '<html><body>hi</body></html>'", "its root is <html>"),
    "entities": (
        "printf '<!DOCTYPE x [<!ENTITY a \"aaaa\">]><nvidia_smi_log>&a;</nvidia_smi_log>'",
        "output declares XML entities",
    ),
    # The same in UTF-16, where the bytes "<!ENTITY" never appear: the name would be "PWNED".
    "entities in UTF-16": (
        'printf \'<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE x [<!ENTITY a "PWNED">]>'
        "<nvidia_smi_log><attached_gpus>1</attached_gpus><gpu><uuid>GPU-1</uuid>"
        "<product_name>&a;</product_name></gpu></nvidia_smi_log>' | iconv -t UTF-16",
        "output declares XML entities",
    ),
    # No GPU, and 3 million levels of nesting (12 MB): bounded, and not "every GPU removed".
    "deep": (
        "printf '<nvidia_smi_log>'; yes '<a>' | head -n 3000000 | tr -d '\\n'",
        "output nests deeper than 16 levels",
    ),
    "no GPU listed": (
        "echo '<nvidia_smi_log><driver_version>550.54.15</driver_version>"
        "<attached_gpus>4</attached_gpus></nvidia_smi_log>'",
        "output lists 0 GPUs and says 4 attached",
    ),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failing_tool_is_a_blind_spot_that_keeps_the_last_values(
    tmp_path: Path, failure: str
) -> None:
    box = Box(tmp_path, "[gpu]\ntimeout = 1\n")
    box.prints(H100)
    box.record()
    before = box.shown()
    body, message = FAILURES[failure]
    box.tool(body)
    box.record(code=4)  # a snapshot stored with collection errors
    since = box.since("#1")
    assert since["suspects"] == []  # no GPU removed, no driver gone
    (spot,) = since["blind_spots"]
    assert spot["subject"] == "gpu:" and spot["current"] is True
    assert spot["message"].startswith("nvidia-smi -q -x: ") and message in spot["message"]
    assert box.shown() == before
    assert GPU3 not in {c["subject"] for c in since["unchanged"].get("facts", [])}
    text = box.drift("since", "--stable", "#1").stdout
    assert message in text


def test_a_gpu_the_working_tool_no_longer_lists_is_removed(box: Box) -> None:
    box.prints(H100)
    box.record()
    box.prints(without_gpu(H100, GPU1.removeprefix("gpu:")))
    box.record()
    since = box.since("#1")
    by_title = {s["title"]: s for s in since["suspects"]}
    gone = by_title["GPU 1 (NVIDIA H100 80GB HBM3, GPU-77a01f3c…) no longer listed by the GPU tool"]
    assert gone["rank"] == 1 and gone["status"] == "live"
    assert {c["key"] for c in gone["changes"] if c["subject"] == GPU1} == set(box.shown()[GPU3])
    # the GPUs after it are numbered again, by their own UUIDs: evidence of this story
    renumbered = {
        (c["subject"], c["before"], c["after"]) for c in gone["changes"] if c["key"] == "index"
    }
    assert renumbered == {(GPU1, "1", None), (GPU2, "2", "1"), (GPU3, "3", "2")}
    assert len(since["suspects"]) == 1
    assert blind_spots_of(since) == []


def blind_spots_of(since: dict[str, Any]) -> list[str]:
    return [s["message"] for s in since["blind_spots"]]


def test_no_tool_and_no_nvml_records_nothing_and_says_nothing(tmp_path: Path) -> None:
    if shutil.which("nvidia-smi") or _nvml_installed():
        pytest.skip("this machine has a GPU tool: the case is a machine without one")
    box = Box(tmp_path, '[[commands]]\nname = "hello"\nrun = "echo hello"\n')
    done = box.record()
    assert done.stderr == ""
    box.record()
    assert box.shown() == {}
    assert [s["subject"] for s in box.drift("show", "--format", "json")["subjects"]] == [
        "command:hello"
    ]
    assert box.since("#1")["blind_spots"] == []


def test_enabled_without_a_tool_is_a_blind_spot(tmp_path: Path) -> None:
    if _nvml_installed():
        pytest.skip("NVML is installed here: the case is a machine without it")
    box = Box(tmp_path, "[gpu]\nenabled = true\n")
    box.record(code=4)
    box.record(code=4)
    (spot,) = box.since("#1")["blind_spots"]
    assert spot["subject"] == "gpu:"
    assert spot["message"].startswith("nvidia-smi is not on PATH and NVML is not installed")


def test_disabled_reads_nothing_even_with_a_tool(tmp_path: Path) -> None:
    box = Box(tmp_path, "[gpu]\nenabled = false\n")
    box.prints(H100)
    box.record()
    assert box.shown() == {}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A running service, found by regex: started before any change the test makes."""
    marker = f"drift-gpu-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", marker],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        yield marker
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_driver_update_under_a_running_service_says_it_runs_the_old_one(
    tmp_path: Path, server: str
) -> None:
    box = Box(tmp_path, f'[[services]]\nname = "decode"\nmatch = "{server}"\n')
    box.prints(H100)
    box.record()
    box.prints(edited(H100, "", driver_version="550.90.07", cuda_version="12.5"))
    box.record()
    (story,) = [s for s in box.since("#1")["suspects"] if s["category"] == "gpu"]
    assert story["title"] == "NVIDIA driver 550.54.15 -> 550.90.07 (CUDA 12.4 -> 12.5)"
    assert story["status"] == "pending"
    assert "decode started with the old driver (550.54.15)" in story["label"]


def test_mig_is_pending_until_the_reset_then_live(box: Box) -> None:
    one = GPU3.removeprefix("gpu:")
    box.prints(H100)
    box.record()
    asked = edited(H100, one, mig_mode__pending_mig="Enabled")
    box.prints(asked)
    box.record()
    (pending,) = box.since("#1")["suspects"]
    assert pending["title"].endswith("MIG mode at the next reset Disabled -> Enabled")
    assert pending["status"] == "pending"
    assert "next reset" in pending["label"]
    # The reset: MIG on, and the devices an operator made from it, as GPU 2 has them.
    root = ElementTree.fromstring(edited(asked, one, mig_mode__current_mig="Enabled"))
    gpus = {g.findtext("uuid"): g for g in root.iterfind("gpu")}
    made, none = gpus[GPU2.removeprefix("gpu:")].find("mig_devices"), gpus[one].find("mig_devices")
    assert made is not None and none is not None
    none[:] = list(made)
    none.text = made.text
    box.prints(ElementTree.tostring(root, xml_declaration=True))
    box.record()
    (live,) = box.since("#1")["suspects"]
    assert live["title"].endswith("MIG mode Disabled -> Enabled")
    assert live["status"] == "live"
    assert {c["key"] for c in live["changes"]} == {
        "mig.mode.current",
        "mig.mode.pending",
        "mig.devices",
    }
    assert changes_by_fact(box.since("#1"))[GPU3, "mig.devices"]["after"].count("\n") == 1


def _nvml_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("pynvml") is not None


def _real_gpu() -> bool:
    if shutil.which("nvidia-smi") is None or not _nvml_installed():
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _real_gpu(), reason="needs a real NVIDIA GPU with nvidia-smi and NVML")
def test_nvml_and_nvidia_smi_agree_on_a_real_gpu() -> None:
    from drift.collectors.gpu import read_command
    from drift.collectors.nvml import read_nvml

    def facts(reading: Any) -> dict[tuple[str, str], str]:
        return {
            (f.subject, f.key): getattr(f, "value", "unread") for f in reading_facts(reading, {})
        }

    assert facts(read_nvml()) == facts(read_command(("nvidia-smi", "-q", "-x"), 30))


def test_turning_gpus_off_is_no_longer_tracked_not_removed(tmp_path: Path) -> None:
    box = Box(tmp_path)
    box.prints(H100)
    box.record()
    box.config.write_text('host = "gpu-box"\n[gpu]\nenabled = false\n')
    box.record()
    since = box.drift("since", "--stable", "#1", "--format", "json")
    assert since["suspects"] == []
    assert GPU3 in {u["subject"] for u in since["scope"]["untracked"]}


def test_auto_with_the_driver_loaded_but_no_tool_is_a_blind_spot_not_gpus_removed(
    tmp_path: Path,
) -> None:
    """nvidia-smi gone mid-upgrade while the driver still lists GPUs: unknown, not removed."""
    if _nvml_installed():
        pytest.skip("NVML is installed here: the case is a machine without it")
    proc = tmp_path / "proc"
    for bus in ("0000:18:00.0", "0000:2a:00.0"):
        (proc / "driver" / "nvidia" / "gpus" / bus).mkdir(parents=True)
    box = Box(tmp_path, f'proc_root = "{proc}"\n')
    box.prints(H100)
    box.record()
    before = box.shown()
    box.no_tool()
    box.record(code=4)
    since = box.since("#1")
    assert since["suspects"] == []
    assert [s["subject"] for s in since["blind_spots"]] == ["gpu:"]
    assert "the NVIDIA driver lists 2 GPUs" in since["blind_spots"][0]["message"]
    assert box.shown() == before
