"""Crash loops from systemd's words at each record: since when, how many restarts, how it ended.

Each case is a window of records, as systemd 252 answers `systemctl show`
(tests/test_crash_loop.py checks the same on a real systemd): between runs
SubState is auto-restart, Result says why the run failed and ExecMainStatus
how; the next start resets them to success.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from drift.analysis.failures import Failure, exit_words, failing_status, find_failures
from drift.analysis.timing import Span
from drift.analysis.unit_history import service_runs
from drift.store.query import SnapshotInfo, StoredVersion
from drift.timespec import from_us, local_zone

SEC = 1_000_000
MIN = 60 * SEC
T0 = 1_796_320_800 * SEC  # the baseline record


def iso(us: int) -> str:
    return from_us(us).isoformat(timespec="microseconds")


def clock(us: int) -> str:
    return from_us(us).astimezone(local_zone()).strftime("%H:%M:%S")


@dataclass
class Window:
    """Records a minute apart (#1 the baseline), and what systemd said about decode at each."""

    said: list[dict[str, str]] = field(default_factory=list)

    def record(self, **facts: str) -> None:
        self.said.append(facts)

    def snapshots(self) -> list[SnapshotInfo]:
        return [SnapshotInfo(i + 1, T0 + i * MIN, 100, 0, 0, 0) for i in range(len(self.said))]

    def failures(self) -> dict[str, Failure]:
        versions: list[StoredVersion] = []
        keys = {k for facts in self.said for k in facts}
        for key in sorted(keys):
            start = None
            for i, facts in enumerate([*self.said, {}]):
                value = facts.get(key)
                previous = self.said[start].get(key) if start is not None else None
                if start is not None and value != previous:
                    versions.append(self._version(key, previous or "", start + 1, i + 1))
                    start = None
                if value is not None and start is None and i < len(self.said):
                    start = i
        before = {(v.subject, v.key): v for v in versions if v.first_snapshot_id == 1}
        inside = [v for v in versions if v.first_snapshot_id > 1]
        return find_failures(service_runs(before, inside), self.snapshots())

    def _version(self, key: str, value: str, first: int, until: int) -> StoredVersion:
        return StoredVersion(
            subject="service:decode",
            key=key,
            value=value,
            blob_sha256=None,
            secret=False,
            first_snapshot_id=first,
            first_taken_us=T0 + (first - 1) * MIN,
            until_snapshot_id=None if until > len(self.said) else until,
            until_taken_us=None if until > len(self.said) else T0 + (until - 1) * MIN,
            provenance={"unit": "decode.service"},
        )


def running(pid: int, started: int, restarts: int) -> dict[str, str]:
    return {
        "running": "true",
        "pid": str(pid),
        "started_at": iso(started),
        "unit:sub_state": "running",
        "unit:result": "success",
        "unit:n_restarts": str(restarts),
        "unit:exec_main_start": iso(started),
    }


def between_runs(started: int, restarts: int, how: str = "exited 1", **more: str) -> dict[str, str]:
    return {
        "running": "false",
        "unit:sub_state": "auto-restart",
        "unit:result": "exit-code" if how.startswith("exited") else "signal",
        "unit:n_restarts": str(restarts),
        "unit:exec_main_status": how,
        "unit:exec_main_start": iso(started),
        **more,
    }


def test_a_loop_is_crash_looping_since_its_first_failing_run() -> None:
    w = Window()
    w.record(**running(100, T0 - MIN, 0))
    w.record(**between_runs(T0 + MIN - 20 * SEC, 4))
    w.record(**between_runs(T0 + 2 * MIN - 10 * SEC, 9))
    (failure,) = w.failures().values()
    assert failure.summary() == (
        f"crash-looping since {clock(T0 + MIN - 20 * SEC)} (9 restarts, exit 1)"
    )
    assert failure.ongoing and failure.loop and failure.restarts == 9


def test_a_signal_is_told_in_words() -> None:
    assert exit_words("killed SIGSEGV") == "killed by SIGSEGV"
    assert exit_words("dumped SIGABRT") == "killed by SIGABRT, core dumped"
    assert exit_words("exited 137") == "exit 137"
    w = Window()
    w.record(**running(100, T0 - MIN, 0))
    w.record(**between_runs(T0 + 30 * SEC, 2, how="dumped SIGSEGV"))
    (failure,) = w.failures().values()
    assert "(2 restarts, killed by SIGSEGV, core dumped)" in failure.summary()


def test_a_loop_that_ended_is_told_as_one() -> None:
    w = Window()
    w.record(**running(100, T0 - MIN, 0))
    w.record(**between_runs(T0 + 30 * SEC, 3))
    w.record(**running(140, T0 + 2 * MIN - 30 * SEC, 4))
    w.record(**running(140, T0 + 2 * MIN - 30 * SEC, 4))
    (failure,) = w.failures().values()
    assert not failure.ongoing and failure.state == "running again"
    assert failure.summary() == (
        f"crash-looped from {clock(T0 + 30 * SEC)} to {clock(T0 + 30 * SEC)} (3 restarts, "
        f"exit 1); running again since {clock(T0 + 2 * MIN - 30 * SEC)} (pid 140)"
    )
    # Seen running by the latest record only: it may fail again, and the words say so.
    w.said.pop()
    (failure,) = w.failures().values()
    assert failure.state == "restarted" and "it may fail again" in failure.summary()


def test_a_unit_systemd_gave_up_on_and_a_single_failed_start() -> None:
    w = Window()
    w.record(**running(100, T0 - MIN, 0))
    w.record(**between_runs(T0 + 30 * SEC, 5))
    w.record(**{**between_runs(T0 + 90 * SEC, 5), "unit:sub_state": "failed"})
    (failure,) = w.failures().values()
    assert failure.state == "gave up" and failure.ongoing
    assert failure.summary() == (
        f"crash-looped from {clock(T0 + 30 * SEC)} to {clock(T0 + 90 * SEC)} (5 restarts, "
        "exit 1); systemd stopped restarting it"
    )

    once = Window()
    once.record(**running(100, T0 - MIN, 0))
    once.record(**{**between_runs(T0 + 30 * SEC, 0), "unit:sub_state": "failed"})
    (failure,) = once.failures().values()
    assert not failure.loop
    assert failure.summary() == f"failed at {clock(T0 + 30 * SEC)} (exit 1); not restarted"


def test_restarts_without_a_failure_seen_are_no_failure() -> None:
    """systemd restarted it (NRestarts grew), but no record saw a run fail: restarts, not a loop."""
    w = Window()
    w.record(**running(100, T0 - MIN, 0))
    w.record(**running(120, T0 + 30 * SEC, 3))
    assert w.failures() == {}


def test_the_journal_keeps_the_failing_runs_first_and_latest_once() -> None:
    def lines(*runs: tuple[str, int]) -> str:
        return "\n".join(
            f"{iso(at).replace('+00:00', 'Z')} {run} bash[7]: {what} {run}"
            for run, at in runs
            for what in ("starting", "CUDA error")
        )

    w = Window()
    w.record(**running(100, T0 - MIN, 0))
    # The record's journal also holds the healthy run before the failing began (r0).
    w.record(
        **between_runs(
            T0 + 30 * SEC,
            2,
            **{
                "unit:journal": lines(
                    ("r0", T0 - MIN), ("r1", T0 + 10 * SEC), ("r2", T0 + 30 * SEC)
                )
            },
        )
    )
    w.record(
        **between_runs(
            T0 + 90 * SEC,
            5,
            **{
                "unit:journal": lines(
                    ("r3", T0 + 70 * SEC), ("r4", T0 + 80 * SEC), ("r5", T0 + 90 * SEC)
                )
            },
        )
    )
    (failure,) = w.failures().values()
    runs = [line.split(" ")[1] for line in failure.journal]
    assert runs == ["r1", "r1", "r4", "r4", "r5", "r5"]
    assert failure.journal[0].endswith("starting r1") and failure.journal[1].endswith("error r1")


def test_a_change_is_applied_at_the_failing_starts_that_came_after_it() -> None:
    w = Window()
    w.record(**running(100, T0 - MIN, 0))
    w.record(**between_runs(T0 + 30 * SEC, 1))
    w.record(**between_runs(T0 + 90 * SEC, 3))
    (failure,) = w.failures().values()
    before = Span(T0 + SEC, T0 + 2 * SEC)
    status, label = failing_status(failure, before) or ("", "")
    assert status == "failing"
    assert label.startswith(f"applied at every start of decode since {clock(T0 + 30 * SEC)}: ")
    # Made after every failing run seen: not in them, it waits for the next start.
    after = Span(T0 + 100 * SEC, T0 + 110 * SEC)
    status, label = failing_status(failure, after) or ("", "")
    assert status == "pending" and label.startswith("not applied yet")


def test_a_unit_failing_since_before_the_baseline_was_not_caused_inside_the_window() -> None:
    w = Window()
    w.record(**between_runs(T0 - 30 * SEC, 7))
    w.record(**between_runs(T0 + 30 * SEC, 8))
    (failure,) = w.failures().values()
    assert failure.before_baseline and failure.since_us == T0 - 30 * SEC
    assert failure.summary().startswith("crash-looping since before the baseline (1 restart,")
    # A change of the window reached the later failing runs, and the label says the
    # failing began before the baseline (the ranking's failure signal: no cause).
    status, label = failing_status(failure, Span(T0 + SEC, T0 + 2 * SEC)) or ("", "")
    assert status == "failing" and "crash-looping since before the baseline" in label
