"""Build a week, a month or a year of one host's per-minute records, on a fake clock.

The host is benchmarks/history_sandbox.py's, with real processes. Every fact
written comes from drift's real collectors: at the first minute and at each
change (a script edited and its service restarted, a file rewritten, a
commit) the change is made on the sandbox and `drift.record.record` runs for
real against a scratch database, and what it handed the writer is kept. Each
minute is then written through `HistoryWriter.write_snapshot` with those
facts, the loadavg command's output set to that minute's line, at that
minute's `taken_us`. Marks go in through `HistoryWriter.add_mark`.

Times the collectors read off the real clock are moved onto the fake one:
a service's `started_at` becomes the minute of its (re)start, and the
pidfile's and the commit's times are set to it before collecting.

`real=True` runs `drift record` for real every minute instead (real clock):
tests/test_history_gen.py compares the two databases row for row.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shlex
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from history_sandbox import HOST, HostSandbox, Shape, _export_name, loadavg_line

import drift.store.writer as writer_module
from drift.demo import SERVICES
from drift.facts import CachedStat, CollectionError, Fact, FactBlock
from drift.store.delta import Delta, PreviousState
from drift.store.digest import digest_items, state_digest
from drift.store.writer import HistoryWriter

YEAR = 525_600
DEPTHS = {"week": 10_080, "month": 43_200, "year": YEAR}
MINUTE_US = 60_000_000
# The last minute of every history: a fixed day, so the same parameters give the same rows.
END_US = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp()) * 1_000_000
KINDS = ("file", "file", "env", "export", "repo")


@dataclass
class Captured:
    """What one real record handed the writer."""

    facts: list[Fact | FactBlock]
    errors: list[CollectionError]
    cache_updates: dict[str, CachedStat]
    config: Any
    key_fingerprint: str | None
    seconds: float = 0.0


@dataclass
class Plan:
    """Which minutes change what, and where the marks go: a function of shape and depth alone."""

    minutes: int
    changes: dict[int, str] = field(default_factory=dict)  # minute -> kind
    marks: dict[int, str] = field(default_factory=dict)  # minute -> kind

    @classmethod
    def of(cls, shape: Shape, minutes: int) -> Plan:
        rng = random.Random(shape.seed)
        n_changes = min(minutes - 1, round(shape.changes_per_year * minutes / YEAR))
        n_marks = max(1, round(shape.marks_per_year * minutes / YEAR))
        at = sorted(rng.sample(range(1, minutes), n_changes))
        changes = {m: KINDS[i % len(KINDS)] for i, m in enumerate(at)}
        mark_at = sorted(rng.sample(range(1, minutes), min(n_marks, minutes - 1)))
        marks = {m: ("stable", "stable", "unstable", "note")[i % 4] for i, m in enumerate(mark_at)}
        return cls(minutes, changes, marks)


def taken_us(minute: int, minutes: int) -> int:
    """When the record of `minute` is taken: on the minute, plus the second cron starts at."""
    return END_US - (minutes - 1 - minute) * MINUTE_US + 400_000 + (minute * 7919) % 500_000


@contextmanager
def capturing() -> Iterator[list[Captured]]:
    """Keep what every `write_snapshot` in this block is handed (it still writes)."""
    seen: list[Captured] = []
    original = HistoryWriter.write_snapshot

    def capture(
        self: HistoryWriter,
        host: str,
        taken: int,
        facts: Any,
        errors: Any,
        cache_updates: Any,
        started: float | None = None,
        config: Any = None,
        key_fingerprint: str | None = None,
    ) -> Any:
        facts = list(facts)
        seconds = time.monotonic() - started if started is not None else 0.0
        seen.append(
            Captured(facts, list(errors), dict(cache_updates), config, key_fingerprint, seconds)
        )
        return original(
            self, host, taken, facts, errors, cache_updates, started, config, key_fingerprint
        )

    HistoryWriter.write_snapshot = capture  # type: ignore[method-assign,assignment]
    try:
        yield seen
    finally:
        HistoryWriter.write_snapshot = original  # type: ignore[method-assign]


class Changer:
    """Makes a plan's changes on the sandbox for real, one at a time, deterministically."""

    def __init__(self, box: HostSandbox, seed: int) -> None:
        self.box = box
        self.rng = random.Random(seed * 7 + 3)
        self.n = 0

    def apply(self, kind: str, at_us: int | None) -> None:
        self.n += 1
        getattr(self, f"_{kind}")(at_us)

    def _file(self, at_us: int | None) -> None:
        i = self.rng.randrange(self.box.shape.files)
        self.box.data_file(i).write_text(f"file {i} rev {self.n}\n" + "y" * self.rng.randrange(400))

    def _env(self, at_us: int | None) -> None:
        name = self.rng.choice(SERVICES)
        exports = self.box.exports(name)
        exports[_export_name(name, self.rng.randrange(self.box.shape.exports))] = f"v{self.n}"
        self.box.write_script(name, exports)
        self._restart(name, at_us)

    def _export(self, at_us: int | None) -> None:
        """Add an export somewhere in the script, or take one added before away."""
        name = self.rng.choice(SERVICES)
        items = list(self.box.exports(name).items())
        extra = [k for k, _ in items if "_EXTRA_" in k]
        if extra and self.rng.random() < 0.5:
            items = [(k, v) for k, v in items if k != self.rng.choice(extra)]
        else:
            items.insert(
                self.rng.randrange(len(items) + 1),
                (f"SGLANG_{name.upper()}_EXTRA_{self.n}", str(self.n)),
            )
        self.box.write_script(name, dict(items))
        self._restart(name, at_us)

    def _repo(self, at_us: int | None) -> None:
        (self.box.repo / "model.py").write_text(f"BLOCK = {64 + self.n}\n")
        self.box.commit(f"change {self.n}", at_us)

    def _restart(self, name: str, at_us: int | None) -> None:
        self.box.stop(name)
        self.box.start(name)
        if at_us is not None:  # the pidfile was written at the restart, on the fake clock
            os.utime(self.box.pidfile(name), ns=(at_us * 1000, at_us * 1000))


class ReplayWriter(HistoryWriter):
    """The history writer, told which one fact a minute changed: it reads and compares only that.

    A minute when only the loadavg line changed would otherwise read all
    6,4xx open versions and compare all facts (70 ms: ten hours for a
    year). Everything else is the writer's own: the state digest of all
    facts, the snapshot row, closing and inserting through apply_delta.
    tests/test_history_gen.py checks the rows against real records.
    """

    only: Fact | None = None  # the one fact that changed since the last write
    n_facts: int = 0  # the distinct facts of the last full write
    head: DigestHead | None = None  # the digest of the last full write's facts up to the change

    def _previous_state(
        self, host_id: int, facts: Any, config_changed: bool, fresh_blocks: bool
    ) -> PreviousState:
        if self.only is None:
            return super()._previous_state(host_id, facts, config_changed, fresh_blocks)
        # The fact's newest version, one seek of ix_versions_fact_first (filtering on
        # until_snapshot_id IS NULL would walk every version of a fact that changes each minute).
        row = self.conn.execute(
            "SELECT f.id, v.id, v.value, v.blob_sha256, v.secret, v.until_snapshot_id "
            "FROM facts f JOIN versions v ON v.fact_id = f.id WHERE f.host_id = ? "
            "AND f.subject = ? AND f.key = ? ORDER BY v.first_snapshot_id DESC LIMIT 1",
            (host_id, self.only.subject, self.only.key),
        ).fetchone()
        if row is None or row[5] is not None:
            raise AssertionError(f"{self.only.subject} {self.only.key} has no open version")
        ident = (self.only.subject, self.only.key)
        return PreviousState({ident: (row[0], row[1], row[2], row[3], bool(row[4]))})


class DigestHead:
    """`state_digest` of fact lists that differ only after their last block: the head hashed once.

    state_digest hashes runs of loose facts and blocks in order, and a run of
    blocks ends where the first loose fact after it starts, so the hash of
    everything up to the last block (drift.store.digest.digest_items) can be
    kept and copied. Checked against state_digest itself for every new state
    and every 10,000th use.
    """

    def __init__(self, facts: list[Fact | FactBlock]) -> None:
        self.cut = max((i + 1 for i, f in enumerate(facts) if isinstance(f, FactBlock)), default=0)
        self.head = hashlib.blake2b(digest_size=16)
        digest_items(self.head, facts[: self.cut])
        self.uses = 0

    def digest(self, facts: list[Fact | FactBlock]) -> bytes:
        h = self.head.copy()
        digest_items(h, facts[self.cut :])
        self.uses += 1
        if self.uses % 10_000 == 1 and h.digest() != state_digest(facts):
            raise AssertionError("DigestHead no longer hashes as drift.store.digest does")
        return h.digest()


@contextmanager
def one_fact_writes(writer: ReplayWriter) -> Iterator[None]:
    """While `writer.only` is set, the writer's delta compares that fact alone.

    The delta of one fact against its open version is the delta of all
    facts when nothing else changed, but for the counts of facts collected;
    the state digest of all facts is the writer's, its head hashed once.
    """
    # The writer's module globals: write_snapshot looks both names up there at each call.
    names = vars(writer_module)
    real_delta: Callable[..., Delta] = names["delta"]
    real_digest: Callable[[list[Fact | FactBlock]], bytes] = names["state_digest"]

    def delta(
        previous: PreviousState,
        items: Any,
        errors: Any = (),
        *,
        scopes: Any = None,
        fresh_blocks: bool = True,
    ) -> Delta:
        if writer.only is None:
            return real_delta(previous, items, errors, scopes=scopes, fresh_blocks=fresh_blocks)
        one = real_delta(previous, [writer.only], errors, scopes=scopes, fresh_blocks=fresh_blocks)
        n = writer.n_facts
        return replace(one, n_facts=n, unchanged=n - len(one.opening))

    def digest(items: list[Fact | FactBlock]) -> bytes:
        if writer.only is None or writer.head is None:
            return real_digest(items)
        return writer.head.digest(items)

    names.update(delta=delta, state_digest=digest)
    try:
        yield
    finally:
        names.update(delta=real_delta, state_digest=real_digest)


class FakeClockStarts:
    """Moves each process start the collectors read to the fake minute it happened at."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def moved(self, facts: list[Fact | FactBlock], at_us: int) -> list[Fact | FactBlock]:
        out: list[Fact | FactBlock] = []
        for item in facts:
            if isinstance(item, Fact) and item.key == "started_at":
                fake = self.seen.setdefault(item.value, _iso_like(item.value, at_us))
                item = replace(item, value=fake)
            out.append(item)
        return out


def _iso_like(real: str, at_us: int) -> str:
    """`at_us` written as the collector writes a start (ISO 8601, its zone and precision)."""
    parsed = datetime.fromisoformat(real)
    at = datetime.fromtimestamp(at_us / 1e6, tz=parsed.tzinfo or UTC)
    spec = "microseconds" if "." in real else "seconds"
    return at.isoformat(timespec=spec)


def _with_line(facts: list[Fact | FactBlock], index: int, line: str) -> list[Fact | FactBlock]:
    out = list(facts)
    fact = facts[index]
    assert isinstance(fact, Fact)
    out[index] = replace(fact, value=line)
    return out


def _loadavg_index(facts: list[Fact | FactBlock]) -> int:
    return next(
        i
        for i, f in enumerate(facts)
        if isinstance(f, Fact) and f.subject == "command:loadavg" and f.key == "stdout"
    )


def build_history(
    root: Path,
    db: Path,
    shape: Shape,
    minutes: int,
    *,
    real: bool = False,
    plan: Plan | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build the sandbox in `root` and `minutes` of history at `db`; returns build figures.

    The sandbox is left built with its processes stopped: a later `drift record` of
    it (processes started again) records the same state but for pids and starts.
    """
    from drift.config import load_config
    from drift.record import record
    from drift.store.urls import resolve_db_url

    plan = Plan.of(shape, minutes) if plan is None else plan
    box = HostSandbox(root, shape=shape)
    box.build()
    config = load_config(box.config_path)
    changer = Changer(box, shape.seed)
    starts = FakeClockStarts()
    scratch = resolve_db_url(str(root / "scratch.db"))
    target = resolve_db_url(str(db))
    figures: dict[str, Any] = {
        "minutes": minutes,
        "changes": len(plan.changes),
        "marks": len(plan.marks),
        "collect_s": 0.0,
    }
    began = time.monotonic()
    try:
        box.start_all()
        if not real:
            for name in SERVICES:
                at = taken_us(0, minutes)
                os.utime(box.pidfile(name), ns=(at * 1000, at * 1000))
        writer = cast(ReplayWriter, ReplayWriter.open(target))
        with writer, one_fact_writes(writer):
            state: Captured | None = None
            index = 0
            for minute in range(minutes):
                at = taken_us(minute, minutes)
                line = loadavg_line(minute)
                kind = plan.changes.get(minute)
                if real or state is None or kind is not None:  # a collection reads it
                    box.loadavg.write_text(line + "\n")
                if kind is not None:
                    changer.apply(kind, None if real else at)
                if real:
                    record(config, target)
                elif state is None or kind is not None:
                    t0 = time.monotonic()
                    writer.only = None  # the patched delta and digest serve this writer alone
                    with capturing() as seen:
                        record(config, scratch)
                    state = seen[0]
                    state.facts = starts.moved(state.facts, at)
                    index = _loadavg_index(state.facts)
                    writer.head = DigestHead(state.facts)
                    if index < writer.head.cut:
                        raise AssertionError("the loadavg line is hashed before the files' block")
                    figures["collect_s"] += time.monotonic() - t0
                    writer.n_facts = _write(writer, state, at, state.facts, state.cache_updates)
                else:
                    facts = _with_line(state.facts, index, line + "\n")  # as `cat` prints it
                    writer.only = cast(Fact, facts[index])
                    _write(writer, state, at, facts, {})
                mark = plan.marks.get(minute)
                if mark is not None:
                    writer.add_mark(
                        config.host, mark, at + 30_000_000, f"{mark} at minute {minute}"
                    )
                if progress is not None and minute and minute % 10_000 == 0:
                    progress(
                        f"{db.name}: {minute:,}/{minutes:,} minutes, "
                        f"{time.monotonic() - began:.0f} s"
                    )
        box.loadavg.write_text(loadavg_line(minutes - 1) + "\n")  # the host as it was last
    finally:
        box.stop_all()
    figures["build_s"] = round(time.monotonic() - began, 1)
    figures["collect_s"] = round(figures["collect_s"], 1)
    return figures


def _write(
    writer: HistoryWriter,
    state: Captured,
    at: int,
    facts: list[Fact | FactBlock],
    updates: dict[str, CachedStat],
) -> int:
    # `started` makes the stored duration the real collection's, as a record's would be.
    return writer.write_snapshot(
        HOST,
        at,
        facts,
        state.errors,
        updates,
        started=time.monotonic() - state.seconds,
        config=state.config,
        key_fingerprint=state.key_fingerprint,
    ).facts


# ---------------------------------------------------------------- the cache

CACHE = Path(os.environ.get("DRIFT_HIST_CACHE", "/var/tmp/drift-hist"))
GENERATOR_VERSION = 1  # bump when what the generator writes changes


@dataclass(frozen=True)
class CachedHistory:
    """A built history: the sandbox it was collected on, its database, how it was built."""

    folder: Path
    depth: str

    @property
    def host(self) -> Path:
        return self.folder / "host"

    @property
    def db(self) -> Path:
        return self.folder / "drift.db"

    @property
    def config(self) -> Path:
        return self.host / "drift.toml"

    @property
    def built(self) -> Path:
        return self.folder / "build.json"


def cache_key(shape: Shape, minutes: int) -> str:
    """The generator's parameters and drift's schema revision, as a folder name."""
    from drift.store.schema import HEAD_REVISION

    params = json.dumps([GENERATOR_VERSION, HEAD_REVISION, minutes, asdict(shape)], sort_keys=True)
    return f"r{HEAD_REVISION}-{hashlib.sha256(params.encode()).hexdigest()[:12]}"


def cached_history(
    depth: str,
    shape: Shape | None = None,
    *,
    minutes: int | None = None,
    cache: Path = CACHE,
    progress: Callable[[str], None] | None = None,
) -> CachedHistory:
    """The history of `depth` (week, month, year), built once and then reused.

    The folder's paths are written into the history (scripts, files, the
    config), so it is built where it stays; build.json, written last, says
    it is complete. A lock keeps two builders of the same history apart.
    """
    shape = Shape() if shape is None else shape
    minutes = DEPTHS[depth] if minutes is None else minutes
    found = CachedHistory(cache / f"{depth}-{cache_key(shape, minutes)}", depth)
    found.folder.mkdir(parents=True, exist_ok=True)
    with open(found.folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if found.built.exists():
            _check_interpreter(found)
            return found
        for stale in (found.host, found.db):
            shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(
                missing_ok=True
            )
        for side in found.folder.glob("drift.db-*"):
            side.unlink()
        figures = build_history(found.host, found.db, shape, minutes, progress=progress)
        figures.update(depth=depth, shape=asdict(shape), db_bytes=found.db.stat().st_size)
        found.built.write_text(json.dumps(figures, indent=1) + "\n")
    return found


def _check_interpreter(found: CachedHistory) -> None:
    """The sandbox's services run the Python that built the history (its path is in the
    serve scripts and in the history's facts): if it is gone (a removed checkout's venv),
    say so rather than let a service fail to start."""
    for script in sorted((found.host / "serve").glob("*.sh")):
        for line in script.read_text().splitlines():
            if line.startswith("exec "):
                python = shlex.split(line.split()[1])[0]  # the -c program spans lines
                if not os.path.exists(python):
                    raise RuntimeError(
                        f"{found.folder}: its services run {python}, which is gone; link it "
                        f"to a Python with drift installed, or delete the folder to rebuild"
                    )


def main() -> None:
    """`python benchmarks/history_gen.py week month year`: build (or find) those histories."""
    import sys

    for depth in sys.argv[1:] or ["week", "month"]:
        found = cached_history(depth, progress=lambda line: print(line, file=sys.stderr))
        print(found.folder, found.built.read_text().replace("\n", " "), flush=True)


if __name__ == "__main__":
    main()
