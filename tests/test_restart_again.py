"""A service restarted again with the same script: its value keeps the start that first took it.

The operator's sequence, with real processes and a real health check that
fails while decode's environment holds the variable: stable records, the
export added, decode restarted and recorded (unhealthy), then restarted
again, and again, with the same script. The export stays the first suspect,
live since the first restart, never "after the first unhealthy record", and
each value names the process it was read from and the one it is in now. A
restart that changed the value is a new start of the new value.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from conftest import run_drift
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift.demo import CULPRIT, IncidentSandbox
from drift.facts import Fact
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter
from drift.timespec import clock, from_us, parse_stored_time, to_us

TARGET = "SGLANG_SM120_MMA_TARGET_CTAS"
ENV = ("service:decode", f"env:{TARGET}")


def with_health_check(box: IncidentSandbox) -> list[str]:
    """A check that fails while decode's process has the variable; the config's options."""
    check = box.root / "decode-answers.sh"
    check.write_text(
        "#!/bin/sh\n"
        f"pid=$(cat {box.pidfile('decode')})\n"
        f"! tr '\\0' '\\n' < /proc/$pid/environ | grep -q '^{TARGET}='\n"
    )
    check.chmod(0o755)
    with box.config_path.open("a") as fh:
        fh.write(f'\n[[health]]\nname = "decode-answers"\nrun = "{check}"\ntimeout = 5\n')
    return ["--config", str(box.config_path)]


def record(cfg: list[str], tmp_path: Path) -> None:
    run_drift(["record", *cfg], tmp_path)
    time.sleep(0.5)  # the next step a moment later, as a person at a terminal


def restart_decode(box: IncidentSandbox) -> int:
    box.stop("decode")
    return box.start("decode")


def started(pid: int, cfg: list[str], tmp_path: Path) -> str:
    """When drift recorded that decode process starting, as reports show it (local clock)."""
    out = run_drift(["history", "service:decode started_at", "--format", "json", *cfg], tmp_path)
    (fact,) = json.loads(out.stdout)["data"]["facts"]
    (value,) = [v["value"] for v in fact["versions"] if v["provenance"]["pid"] == pid]
    moment = parse_stored_time(value)
    assert moment is not None
    return clock(to_us(moment))


def since(cfg: list[str], tmp_path: Path) -> dict:
    return json.loads(run_drift(["since", "--format", "json", *cfg], tmp_path).stdout)["data"]


def the_export_breaks_decode(box: IncidentSandbox, cfg: list[str], tmp_path: Path) -> int:
    """Two healthy records, the export added, decode restarted and the first unhealthy
    record: the pid decode runs with it."""
    record(cfg, tmp_path)
    record(cfg, tmp_path)
    box.add_culprit()
    pid = restart_decode(box)
    record(cfg, tmp_path)
    return pid


def change_of(suspect: dict, subject: str, key: str) -> dict:
    (found,) = [c for c in suspect["changes"] if (c["subject"], c["key"]) == (subject, key)]
    return found


def test_restarting_again_keeps_the_export_first_and_live_since_the_first_restart(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    cfg = with_health_check(sandbox)
    first = the_export_breaks_decode(sandbox, cfg, tmp_path)
    second = restart_decode(sandbox)
    record(cfg, tmp_path)
    third = restart_decode(sandbox)
    record(cfg, tmp_path)

    data = since(cfg, tmp_path)
    assert data["baseline"]["source"] == "health"
    top = data["suspects"][0]
    assert top["title"].startswith(CULPRIT + " added"), top["title"]
    assert not any("cannot have caused" in r for r in top["reasons"]), top["reasons"]
    at = started(first, cfg, tmp_path)
    assert f"live in decode (pid {third}) since restart {at} (pid {first})" in top["label"]
    assert "unchanged through the 2 restarts since" in top["label"]
    env = change_of(top, *ENV)
    assert env["where"].startswith(f"read from pid {first} at "), env["where"]
    assert f"unchanged in pid {third} (/proc/{first}/environ)" in env["where"]
    restart = top["restarts"][0]
    assert restart["after_pid"] == str(third)

    text = run_drift(["since", *cfg], tmp_path).stdout
    block = text.split("\n 1. ")[1].split("\n 2. ")[0]
    assert "cannot have caused it" not in block
    assert f"read from pid {first} at " in block and f"unchanged in pid {third}" in block
    assert f"at pid {first}" not in block and f"pid {second}" not in block

    # `running` and the rest of what carried over name the process they are in now.
    shown = run_drift(["show", "service:decode", *cfg], tmp_path).stdout
    running = next(line for line in shown.splitlines() if line.lstrip().startswith("running ="))
    assert f"unchanged in pid {third}" in running, running
    told = run_drift(["history", "service:decode running", *cfg], tmp_path).stdout
    assert f"unchanged in pid {third}" in told and "from read from" not in told
    report = tmp_path / "r.md"
    run_drift(["report", "-o", str(report), *cfg], tmp_path)
    assert f"read from pid {first} at " in report.read_text()


def test_a_restart_that_changed_the_value_is_a_new_start_of_the_new_value(
    sandbox: IncidentSandbox, tmp_path: Path
) -> None:
    cfg = with_health_check(sandbox)
    the_export_breaks_decode(sandbox, cfg, tmp_path)
    script = sandbox.script("decode")
    script.write_text(script.read_text().replace(f"{TARGET}=512", f"{TARGET}=256"))
    second = restart_decode(sandbox)
    record(cfg, tmp_path)
    third = restart_decode(sandbox)
    record(cfg, tmp_path)

    (story,) = [
        s
        for s in since(cfg, tmp_path)["suspects"]
        if any(c["key"] == f"export:{TARGET}" for c in s["changes"])
    ]
    # 512 live before the failure, then 256: the title tells both, in order
    assert ", then 256 at " in story["title"] and ": 512 at " in story["title"], story["title"]
    at = started(second, cfg, tmp_path)
    assert f"live in decode (pid {third}) since restart {at} (pid {second})" in story["label"]
    assert "unchanged through the restart since" in story["label"]
    env = change_of(story, *ENV)
    assert env["after"] == "256"
    assert env["where"].startswith(f"read from pid {second} at ")
    assert f"unchanged in pid {third}" in env["where"]
    # 512 was live before the first failure: the knob's change began then, whatever its
    # value now, so 256 is never "after the first unhealthy record"
    assert not any("cannot have caused it" in r for r in story["reasons"]), story["reasons"]
    assert any("first live with a new value" in r for r in story["reasons"]), story["reasons"]


# ---------------------------------------------------------------- any sequence of restarts

HOST = "gpu-node-7"
MINUTE = 60_000_000
T0 = 1_780_000_000_000_000
SCRIPT = "script:/srv/serve/decode.sh"

# (restart before this record?, the variable's value in the process then)
Step = tuple[bool, str | None]


@st.composite
def steps(draw: st.DrawFn) -> list[Step]:
    """Records after the baseline: a value only changes with a restart, as in /proc."""
    out: list[Step] = []
    value: str | None = None
    for _ in range(draw(st.integers(1, 6))):
        restart = draw(st.booleans())
        if restart:
            value = draw(st.sampled_from([None, "512", "256"]))
        out.append((restart, value))
    return out


def _facts(pid: int, started_us: int, value: str | None) -> list[Fact]:
    found = {"pid": pid, "found_by": "pidfile /srv/run/decode.pid"}
    environ = {"pid": pid, "source": f"/proc/{pid}/environ"}
    facts = [
        Fact("service:decode", "running", "true", dict(found)),
        Fact("service:decode", "pid", str(pid), dict(found)),
        Fact(
            "service:decode",
            "started_at",
            from_us(started_us).isoformat(timespec="microseconds"),
            {**found, "uncertainty_ms": 10},
        ),
        Fact("service:decode", "env:HOME", "/root", dict(environ)),
    ]
    if value is not None:
        line = {"file": "/srv/serve/decode.sh", "line": 4, "service": "decode"}
        text = f"export {TARGET}={value}"
        facts += [
            Fact("service:decode", f"env:{TARGET}", value, dict(environ)),
            Fact(SCRIPT, f"export:{TARGET}", value, {**line, "text": text}),
        ]
    return facts


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps())
def test_live_since_is_the_first_record_of_the_value_kept_to_the_end(
    tmp_path: Path, sequence: list[Step]
) -> None:
    """Over any restarts, with or without a new value: "live since" is the start of the
    process of the first record from which on the current value was live without a break,
    and the variable's evidence names that process and the one it is in now."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
        db = resolve_db_url(str(Path(folder) / "d.db"))
        writer = HistoryWriter.open(db)
        pid, started_us = 100, T0 - 3600 * 1_000_000
        seen: list[tuple[int, int, int, str | None]] = []  # pid, start, record time, value
        try:
            for minute in range(2):  # the baseline: decode without the variable
                writer.write_snapshot(
                    HOST, T0 + minute * MINUTE, _facts(pid, started_us, None), [], {}
                )
            for i, (restart, value) in enumerate(sequence, 2):
                at = T0 + i * MINUTE
                if restart:
                    pid, started_us = pid + 7, at - 20_000_000
                writer.write_snapshot(HOST, at, _facts(pid, started_us, value), [], {})
                seen.append((pid, started_us, at, value))
        finally:
            writer.close()
        final = seen[-1][3]
        if final is None:
            return
        first = len(seen) - 1
        while first > 0 and seen[first - 1][3] == final:
            first -= 1
        first_pid, first_start, first_at, _value = seen[first]
        later = sum(1 for restart, _v in sequence[first + 1 :] if restart)

        out = run_drift(
            [
                "since",
                "--stable",
                "#2",
                "--format",
                "json",
                "--db",
                str(Path(folder) / "d.db"),
                "--host",
                HOST,
            ],
            Path(folder),
        )
        (story,) = [
            s
            for s in json.loads(out.stdout)["data"]["suspects"]
            if s["changes"][0]["key"] == f"export:{TARGET}"
        ]
        label = story["label"]
        assert f"since restart {clock(first_start)}" in label, (sequence, label)
        named = f"since restart {clock(first_start)} (pid {first_pid})" in label
        assert named == (first_pid != pid), (sequence, label)
        if later:
            count = "restart" if later == 1 else f"{later} restarts"
            assert f"unchanged through the {count} since" in label, (sequence, label)
        else:
            assert "unchanged through" not in label, (sequence, label)
        env = change_of(story, *ENV)
        if first_pid == pid:
            assert env["where"] == f"pid {pid} (/proc/{pid}/environ)"
        else:
            assert env["where"] == (
                f"read from pid {first_pid} at {clock(first_at)}, unchanged in pid {pid} "
                f"(/proc/{first_pid}/environ)"
            )
