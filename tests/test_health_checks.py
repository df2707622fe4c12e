"""Several health checks at once: each may pass, fail or not run at any record.

The operator's sequences run the real `drift` command on real checks; the
property tests write histories of random pass/fail/absent patterns into a
real store and read them back through `drift since`.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from conftest import run_drift
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift.facts import Fact
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter
from drift.timespec import clock, iso, local_time, to_us

HOST = "h"
MINUTE = 60_000_000
T0 = 1_780_000_000_000_000  # some morning, in microseconds


def deployment(tmp_path: Path, checks: dict[str, str]) -> list[str]:
    """drift.toml watching knob.conf, with these health checks (name: command); its options.

    Written again, it is the operator editing the checks between records.
    """
    knob = tmp_path / "knob.conf"
    if not knob.exists():
        knob.write_text("ctas = 256\n")
    lines = [f'host = "{HOST}"', "[[files]]", 'name = "knob"', f'paths = ["{knob}"]']
    for name, run in checks.items():
        lines += ["[[health]]", f'name = "{name}"', f'run = "{run}"', "timeout = 5"]
    config = tmp_path / "drift.toml"
    config.write_text("\n".join(lines) + "\n")
    return ["--config", str(config), "--db", str(tmp_path / "d.db")]


def two_checks(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """Two checks: `test -f ok` (passing until ok is removed) and `true`."""
    flag = tmp_path / "ok"
    flag.write_text("ok\n")
    cfg = deployment(tmp_path, {"has-ok": f"test -f {flag}", "always": "true"})
    return cfg, flag, tmp_path / "knob.conf"


def test_one_of_two_checks_failing_is_read_by_every_command(tmp_path: Path) -> None:
    """Two checks recorded together, one failing later: since, its JSON, diff and report
    all answer, and all name the failing check."""
    cfg, flag, knob = two_checks(tmp_path)
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)  # #2: the last healthy record
    flag.unlink()
    knob.write_text("ctas = 512\n")
    run_drift(["record", *cfg], tmp_path)  # #3: has-ok fails, always passes
    out = run_drift(["since", *cfg], tmp_path).stdout
    assert "baseline  #2 " in out and "knob.conf" in out
    data = json.loads(run_drift(["since", "--format", "json", *cfg], tmp_path).stdout)["data"]
    assert data["baseline"]["snapshot"] == 2
    assert [s["state"] for s in data["overview"]["health"]][-2:] == ["passing", "failing"]
    assert data["overview"]["health"][-1]["text"] == "failing: has-ok"
    for window in (["#1", "#2"], ["#1", "#3"], ["#2", "#3"]):
        run_drift(["diff", *window, *cfg], tmp_path)
    report = tmp_path / "report.html"
    run_drift(["report", *cfg, "-o", str(report)], tmp_path)
    assert "failing: has-ok" in report.read_text()


OUTCOME = st.sampled_from([True, False, None])  # passed, failed, did not run


def write_history(db_path: Path, records: list[list[bool | None]]) -> None:
    """One snapshot a minute; each check `cN` passing, failing or absent at each."""
    with HistoryWriter.open(resolve_db_url(str(db_path))) as writer:
        for i, outcomes in enumerate(records):
            facts = [Fact("file:/etc/knob", "content", str(i))]
            facts += [
                Fact(f"health:c{n}", "ok", "true" if ok else "false")
                for n, ok in enumerate(outcomes)
                if ok is not None
            ]
            writer.write_snapshot(HOST, T0 + i * MINUTE, facts, [], {})


def naive_state(outcomes: list[bool | None]) -> str:
    ran = [ok for ok in outcomes if ok is not None]
    if not ran:
        return "unknown"
    return "passing" if all(ran) else "failing"


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    records=st.integers(1, 4).flatmap(
        lambda checks: st.lists(
            st.lists(OUTCOME, min_size=checks, max_size=checks), min_size=2, max_size=8
        )
    )
)
def test_since_draws_what_every_check_said_at_every_record(
    tmp_path_factory, records: list[list[bool | None]]
) -> None:
    """Through the real `drift since`: never a traceback, and the drawn health at each
    record is failing where a check that ran failed, passing where all that ran passed,
    unknown where none ran."""
    tmp = tmp_path_factory.mktemp("h")
    db = tmp / "d.db"
    write_history(db, records)
    args = ["since", "--db", str(db), "--host", HOST, "--format", "json"]
    data = json.loads(run_drift([*args, "--stable", "#1"], tmp).stdout)["data"]
    stretches = data["overview"]["health"]
    for i, outcomes in enumerate(records):
        at = iso(T0 + i * MINUTE)
        [drawn] = [s for s in stretches if s["start"] <= at < s["end"]]
        assert drawn["state"] == naive_state(outcomes), (i, drawn)
    chosen = run_drift(args, tmp, check=False)
    assert chosen.returncode in (0, 2), chosen.stderr
    assert "Traceback" not in chosen.stderr
    if chosen.returncode == 2:
        assert chosen.stderr.count("\n") == 1 and "no baseline" in chosen.stderr
        return
    # The baseline is the last passing record of the last run of passing records that a
    # failing one ended.
    states = [naive_state(o) for o in records]
    ran = [i for i, s in enumerate(states) if s != "unknown"]
    ends = [a for a, b in zip(ran, ran[1:], strict=False) if states[a] == "passing" != states[b]]
    baseline = json.loads(chosen.stdout)["data"]["baseline"]
    assert baseline["snapshot"] == ends[-1] + 1
    assert baseline["unhealthy_at"] == iso(
        T0 + min(i for i in ran if i > ends[-1] and states[i] == "failing") * MINUTE
    )


def header(out: str, line: str) -> str:
    """The header line of `drift since` that starts with `line` (baseline, trust, warning)."""
    return next(s for s in out.splitlines() if s.startswith(f"{line} "))


def at_clock(data: dict, field: str = "unhealthy_at") -> str:
    """A time of the JSON report's baseline as the header shows it (a time of day here)."""
    return clock(to_us(datetime.fromisoformat(data["baseline"][field])))


def test_a_check_removed_from_drift_toml_is_not_named_for_a_window_it_never_saw(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "ok"
    flag.write_text("ok\n")
    both = deployment(tmp_path, {"has-ok": f"test -f {flag}", "router-up": "true"})
    run_drift(["record", *both], tmp_path)  # #1: both pass
    flag.unlink()
    run_drift(["record", *both], tmp_path)  # #2: has-ok fails
    flag.write_text("ok\n")
    one = deployment(tmp_path, {"has-ok": f"test -f {flag}"})  # router-up removed
    run_drift(["record", *one], tmp_path)  # #3
    run_drift(["record", *one], tmp_path)  # #4: the window #3-#4 never ran router-up
    between = datetime.now(UTC)
    flag.unlink()
    run_drift(["record", *one], tmp_path)  # #5: has-ok fails
    baseline = header(run_drift(["since", *one], tmp_path).stdout, "baseline")
    assert baseline.startswith("baseline  #4 ")
    assert "from health check has-ok)" in baseline and "router-up" not in baseline
    # A stable mark after #4 (and before the failure) says "failing from": by the check that
    # failed, never the one that no longer runs.
    run_drift(["mark", "stable", "--at", between.isoformat(), *one], tmp_path)
    baseline = header(run_drift(["since", *one], tmp_path).stdout, "baseline")
    assert "; health check has-ok failing from " in baseline and "router-up" not in baseline


def test_a_stable_mark_made_during_an_outage_is_warned_and_contested(tmp_path: Path) -> None:
    """The operator marks stable while a check fails: the mark is kept with a warning, and
    `since` still starts from the last passing check, saying so, so the change made before
    the failure stays a suspect; `--stable` at the mark takes the mark."""
    cfg, flag, knob = two_checks(tmp_path)
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)  # #2: the last healthy record
    knob.write_text("ctas = 512\n")  # the cause
    flag.unlink()
    run_drift(["record", *cfg], tmp_path)  # #3: has-ok fails from here
    run_drift(["record", *cfg], tmp_path)  # #4
    time.sleep(0.05)
    marked_at = datetime.now(UTC)
    time.sleep(0.05)
    run_drift(["record", *cfg], tmp_path)  # #5: still failing
    first = json.loads(run_drift(["since", "--format", "json", *cfg], tmp_path).stdout)["data"]
    failing_since = at_clock(first)

    mark = run_drift(["mark", "stable", "--at", marked_at.isoformat(), *cfg], tmp_path)
    assert mark.stdout.startswith("mark #1: stable at ")
    [warning] = mark.stderr.splitlines()
    assert warning.startswith("drift: warning: health check has-ok was failing ")
    assert f"(since {failing_since}) at #4," in warning
    assert "always" not in warning

    out = run_drift(["since", *cfg], tmp_path).stdout
    assert header(out, "baseline").startswith("baseline  #2 ")
    caveat = header(out, "warning")
    assert (
        f"the stable mark at {clock(to_us(marked_at))} was made while health check has-ok "
        f"was failing (since {failing_since}); the baseline is the last passing check; "
    ) in caveat
    assert "knob.conf content changed" in out  # the change before the failure: a suspect
    data = json.loads(run_drift(["since", "--format", "json", *cfg], tmp_path).stdout)["data"]
    assert data["baseline"]["snapshot"] == 2 and at_clock(data) == failing_since
    # The command the caveat gives takes the mark: the record at it, #4.
    [given] = re.findall(r"`drift since (--stable \S+)` takes the mark instead", caveat)
    taken = run_drift(["since", *given.split(), *cfg], tmp_path).stdout
    assert header(taken, "baseline").startswith("baseline  #4 ")
    assert "knob.conf content changed" not in taken


def test_the_unhealthy_line_reads_like_every_other_time(tmp_path: Path) -> None:
    """The first failing check shows on the local clock in text, Markdown and HTML; a
    baseline that was itself failing says so instead of naming a later record the first."""
    cfg, flag, _knob = two_checks(tmp_path)
    run_drift(["record", *cfg], tmp_path)
    run_drift(["record", *cfg], tmp_path)
    flag.unlink()
    run_drift(["record", *cfg], tmp_path)  # #3: has-ok fails from here
    run_drift(["record", *cfg], tmp_path)  # #4: still failing
    data = json.loads(run_drift(["since", "--format", "json", *cfg], tmp_path).stdout)["data"]
    failed_us = to_us(datetime.fromisoformat(data["baseline"]["unhealthy_at"]))
    shown = local_time(failed_us)
    assert data["baseline"]["unhealthy_local"] == shown
    assert data["baseline"]["failing_at_baseline"] is None
    line = f"unhealthy first failing health check after the baseline: {shown}"
    assert line in run_drift(["since", *cfg], tmp_path).stdout.splitlines()
    for fmt in ("md", "html"):
        out = tmp_path / f"report.{fmt}"
        run_drift(["report", *cfg, "--format", fmt, "-o", str(out)], tmp_path)
        text = out.read_text()
        assert (
            f"first failing health check after the baseline at {shown}" in text
            or (
                f"first failing health check after the baseline: <time datetime="
                f'"{data["baseline"]["unhealthy_at"]}">{shown}</time>'
            )
            in text
        )
    # #3 was failing already: #4 is not its first failure.
    out = run_drift(["diff", "#3", "#4", *cfg], tmp_path).stdout
    assert "first failing health check after the baseline" not in out
    assert (
        f"unhealthy already at the baseline: health check has-ok was failing "
        f"(since {clock(failed_us)})"
    ) in out.splitlines()
    diff = json.loads(run_drift(["diff", "#3", "#4", "--format", "json", *cfg], tmp_path).stdout)
    assert diff["data"]["baseline"]["failing_at_baseline"].startswith("health check has-ok ")
    out = tmp_path / "window.html"
    run_drift(["report", "--stable", "#3", "--until", "#4", *cfg, "-o", str(out)], tmp_path)
    assert "first failing health check after the baseline" not in out.read_text()
