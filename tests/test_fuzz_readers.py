"""Fuzzing what drift reads from files and tools others control: bounded, and never a lie.

The small-file reader (and the METADATA reader on it), the journal reader and
the GPU parser are fed hostile generated inputs: FIFOs, links to devices, huge
or endless files, broken JSON, stamps out of range, deep XML, entities in any
encoding. Each input must give an answer or drift's own refusal (Unread,
UnreadableEntry, GpuReadError), within a time and a memory bound, and no
entity's text may reach a value that would be stored.
"""

from __future__ import annotations

import json
import os
import socket
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift.collectors.gpu import GpuReadError, parse_smi_xml, reading_facts
from drift.collectors.journal import read_entries
from drift.collectors.packages import distribution
from drift.facts import CollectContext, Fact
from drift.small_files import TIMEOUT, Unread, read_head, read_small

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
SECONDS = TIMEOUT + 1.0  # one input's time, at most
MEMORY = 64 << 20  # one input's peak allocation, at most (Python's own, traced)


@contextmanager
def bounded(what: object) -> Iterator[None]:
    """The block must finish within SECONDS and allocate at most MEMORY at its peak."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        yield
    finally:
        took = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert took < SECONDS, f"{took:.1f} s for {what!r:.200}"
    assert peak < MEMORY, f"{peak >> 20} MiB for {what!r:.200}"


# --- the small-file reader -----------------------------------------------------------------

LINES = st.sampled_from(
    [
        b"Name: flashinfer-python\n",
        b"Version: 0.2.5\n",
        b"Metadata-Version: 2.1\n",
        b"\n",
        b"\n\n",
        b"Name:",
        b" continued\n",
        b"\r\n",
        b"\xff\xfe",
        b"x" * 1000,
        b"Classifier: " + b"y" * 70 + b"\n",
    ]
)


def _regular(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _fifo(path: Path, _data: bytes) -> None:
    os.mkfifo(path)


def _to_device(path: Path, _data: bytes) -> None:
    path.symlink_to("/dev/zero")


def _to_file(path: Path, data: bytes) -> None:
    target = path.with_name(path.name + ".target")
    target.write_bytes(data)
    path.symlink_to(target)


def _folder(path: Path, _data: bytes) -> None:
    path.mkdir()


def _socket(path: Path, _data: bytes) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))


def _huge(path: Path, data: bytes) -> None:
    with path.open("wb") as f:  # sparse: 3 GiB on the books, nothing on disk
        f.write(data)
        f.truncate(3 << 30)


PLANTS: dict[str, Callable[[Path, bytes], None]] = {
    "regular": _regular,
    "fifo": _fifo,
    "link to /dev/zero": _to_device,
    "link to a file": _to_file,
    "folder": _folder,
    "socket": _socket,
    "sparse 3 GiB": _huge,
}


@st.composite
def planted(draw: st.DrawFn) -> tuple[str, bytes, int]:
    """(how the file is planted, its leading bytes, how many times they repeat)."""
    kind = draw(st.sampled_from(sorted(PLANTS)))
    head = b"".join(draw(st.lists(LINES, max_size=12)))
    return kind, head, draw(st.sampled_from([1, 10, 1000, 20000]))


@FUZZ
@given(planted(), st.sampled_from([0, 1, 4096, 1 << 20]), st.booleans())
def test_the_small_file_reader_is_bounded_and_says_what_it_did_not_read(
    tmp_path_factory: Any, plant: tuple[str, bytes, int], limit: int, follow: bool
) -> None:
    kind, head, times = plant
    folder = tmp_path_factory.mktemp("small")
    path = folder / "METADATA"
    PLANTS[kind](path, head * times)
    readers = {
        "whole": lambda: read_small(str(path), limit, follow=follow),
        "head": lambda: read_head(str(path), limit, b"\n\n", follow=follow),
    }
    readable = kind in ("regular", "sparse 3 GiB") or (kind == "link to a file" and follow)
    for name, read in readers.items():
        with bounded((kind, name, limit, follow)):
            try:
                data = read()
            except Unread as exc:
                assert str(path) in str(exc) and exc.reason
                # A file it may read is refused only whole, and only when over the limit.
                assert (
                    not readable
                    or (name == "whole" and len(head * times) > limit)
                    or (kind == "sparse 3 GiB")
                )
                continue
        assert readable and data is not None and len(data) <= limit


@FUZZ
@given(planted(), st.sampled_from(["METADATA", "INSTALLER", "direct_url.json"]))
def test_a_distribution_is_read_or_unread_never_hung(
    tmp_path_factory: Any, plant: tuple[str, bytes, int], which: str
) -> None:
    kind, head, times = plant
    dist = tmp_path_factory.mktemp("site") / "flashinfer_python-0.2.5.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_bytes(b"Name: flashinfer-python\nVersion: 0.2.5\n\n")
    target = dist / which
    target.unlink(missing_ok=True)
    PLANTS[kind](target, head * times)
    with bounded((kind, which)):
        try:
            found = distribution(str(dist), CollectContext())
        except Unread as exc:
            assert str(target) in str(exc)
            return
    assert found is None or isinstance(found[0], str)
    if which != "METADATA":
        assert found is not None and found[:2] == ("flashinfer-python", "0.2.5")


# --- the journal reader --------------------------------------------------------------------

STAMPS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.sampled_from(["", "12", "99999999999999999999", "1e30", "-1", "０１２", " 1", "NaN"]),
    st.text(max_size=30),
    st.integers(),
    st.none(),
    st.lists(st.integers(), max_size=3),
)
VALUES = st.one_of(st.text(max_size=40), st.lists(st.integers(-300, 300), max_size=20), st.none())


@st.composite
def journal_lines(draw: st.DrawFn) -> bytes:
    """A line of journalctl's JSON output, or something broken in its place."""
    kind = draw(st.sampled_from(["entry", "deep", "bytes", "not an object"]))
    if kind == "deep":
        depth = draw(st.sampled_from([10, 5000, 200_000]))
        return b"[" * depth + b"]" * draw(st.sampled_from([0, depth]))
    if kind == "bytes":
        return draw(st.binary(max_size=200)).replace(b"\n", b" ")
    if kind == "not an object":
        return json.dumps(draw(st.one_of(st.integers(), st.text(), st.lists(st.none())))).encode()
    entry: dict[str, Any] = {"__REALTIME_TIMESTAMP": draw(STAMPS)}
    for key in ("_SYSTEMD_INVOCATION_ID", "INVOCATION_ID", "_PID", "SYSLOG_IDENTIFIER"):
        if draw(st.booleans()):
            entry[key] = draw(st.one_of(st.text(max_size=40), st.integers(), st.none()))
    entry["MESSAGE"] = draw(VALUES)
    return json.dumps(entry).encode()


@FUZZ
@given(st.lists(journal_lines(), max_size=30))
def test_the_journal_reader_skips_and_counts_what_it_cannot_read(lines: list[bytes]) -> None:
    output = b"\n".join(lines)
    with bounded(output[:200]):
        entries, skipped = read_entries(output)
    assert len(entries) + skipped <= len(lines)
    for entry in entries:
        assert "\n" not in entry.line and entry.invocation


# --- the GPU parser ------------------------------------------------------------------------

TAGS = st.sampled_from(
    ["nvidia_smi_log", "gpu", "uuid", "product_name", "attached_gpus", "driver_version", "a"]
)
ENTITY = "PWNED-entity-text"


@st.composite
def gpu_outputs(draw: st.DrawFn) -> bytes:
    """nvidia-smi-shaped XML, nested, with entities or not, in one of several encodings."""
    depth = draw(st.sampled_from([1, 3, 20, 1000, 100_000]))
    tags = draw(st.lists(TAGS, min_size=1, max_size=6))
    inner = "".join(f"<{t}>" for t in tags) + "&e;" * draw(st.integers(0, 2))
    inner += "".join(f"</{t}>" for t in reversed(tags))
    body = "<a>" * depth + inner + "</a>" * depth * draw(st.sampled_from([0, 1]))
    gpus = draw(st.integers(0, 2))
    listed = "".join(
        f"<gpu><uuid>GPU-{i}</uuid><product_name>&e;</product_name></gpu>" for i in range(gpus)
    )
    declared = draw(st.booleans())
    dtd = f'<!DOCTYPE nvidia_smi_log [<!ENTITY e "{ENTITY}">]>' if declared else ""
    encoding = draw(st.sampled_from(["utf-8", "utf-16", "utf-16-le", "utf-32", "latin-1"]))
    attached = draw(st.sampled_from([str(gpus), "1", "x"]))
    text = (
        f'<?xml version="1.0" encoding="{encoding}"?>{dtd}<nvidia_smi_log>'
        f"<attached_gpus>{attached}</attached_gpus>{listed}{body}</nvidia_smi_log>"
    )
    return text.encode(encoding)


@FUZZ
@given(gpu_outputs())
def test_the_gpu_parser_never_expands_an_entity_and_is_bounded(data: bytes) -> None:
    with bounded(data[:200]):
        try:
            reading = parse_smi_xml(data)
        except GpuReadError as exc:
            assert ENTITY not in str(exc)
            return
    for item in reading_facts(reading, {"run": "nvidia-smi -q -x"}):
        if isinstance(item, Fact):
            assert ENTITY not in item.value and ENTITY not in item.subject
    assert reading.gpus  # a reading is never "no GPU" unless the tool said so by its exit
