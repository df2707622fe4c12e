"""The benchmark histories are what real records write, row for row.

benchmarks/history_gen.py writes a year of minutes through the history
writer without running the collectors each minute (it reuses the facts of
the last real collection, with that minute's loadavg line). Here a short
replay with every kind of change is built both ways on the same host shape:
by the generator, and by a real `drift record` every minute. The two
databases must hold the same rows but for what cannot be the same: times,
pids, commit ids, the sandbox's folder, digests of those.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from history_gen import Plan, build_history  # noqa: E402
from history_sandbox import Shape  # noqa: E402

from drift.store.delta import PROVENANCE_SQL  # noqa: E402
from drift.store.statcache import load_shard  # noqa: E402

SHAPE = Shape(exports=6, files=30)
PLAN = Plan(
    14,
    changes={2: "file", 4: "env", 6: "export", 8: "repo", 9: "export", 10: "file", 12: "env"},
    marks={3: "stable", 11: "note"},
)
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")
HEX = re.compile(r"\b[0-9a-f]{40}\b")
PROC_PID = re.compile(r'("pid": |/proc/)(\d+)')


class Normaliser:
    """Rewrites what must differ between two builds of one history, the same way in both.

    Commit ids and other digests become their rank of first appearance, so
    the structure (which rows share one) is still compared.
    """

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.ranks: dict[str, dict[str, int]] = {}

    def rank(self, kind: str, value: str) -> str:
        seen = self.ranks.setdefault(kind, {})
        return f"<{kind}{seen.setdefault(value, len(seen))}>"

    def text(self, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.replace(self.root, "<root>")
        value = ISO.sub("<time>", value)
        value = HEX.sub(lambda m: self.rank("commit", m.group()), value)
        return PROC_PID.sub(lambda m: m.group(1) + "<pid>", value)


def rows(db: Path, root: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table a record writes, normalised."""
    norm = Normaliser(root)
    conn = sqlite3.connect(db)
    blobs = {
        sha: norm.text(zlib.decompress(content).decode("utf-8", "surrogateescape"))
        for sha, content in conn.execute("SELECT sha256, content FROM blobs")
    }
    keys = dict((r[0], (r[1], r[2])) for r in conn.execute("SELECT id, subject, key FROM facts"))

    def value(fact_id: int, text: str | None) -> str | None:
        if keys[fact_id][1] in ("pid", "ppid") or keys[fact_id][1].startswith("env:_"):
            return "<pid>" if keys[fact_id][1] != "env:_" else text
        if keys[fact_id] == ("repo:repo", "head"):
            return norm.rank("commit", text or "")
        return norm.text(text)

    out: dict[str, list[tuple[Any, ...]]] = {
        "hosts": [(r[0], r[1], r[2] is not None) for r in conn.execute("SELECT * FROM hosts")],
        "configs": [
            (r[0], norm.text(r[1]), norm.rank("config", r[2]), norm.text(r[3]))
            for r in conn.execute("SELECT id, path, digest, scope FROM configs")
        ],
        "snapshots": [
            (*r[:6], norm.rank("state", bytes(r[6]).hex()))
            for r in conn.execute(
                "SELECT id, host_id, n_facts, n_changed, n_errors, config_id, state_digest "
                "FROM snapshots ORDER BY id"
            )
        ],
        "facts": [
            (r[0], r[1], norm.text(r[2]), r[3])
            for r in conn.execute("SELECT id, host_id, subject, key FROM facts")
        ],
        "versions": [
            (r[0], r[1], value(r[1], r[2]), r[3] and blobs[r[3]], r[4], r[5], r[6], norm.text(r[7]))
            for r in conn.execute(
                "SELECT v.id, v.fact_id, v.value, v.blob_sha256, v.secret, v.first_snapshot_id, "
                f"v.until_snapshot_id, {PROVENANCE_SQL} FROM versions v ORDER BY v.id"
            )
        ],
        "blobs": [(text,) for text in sorted(text or "" for text in blobs.values())],
        "marks": [tuple(r) for r in conn.execute("SELECT id, host_id, kind, note FROM marks")],
        # The stat cache: which files it vouches for, with their size and digest (times,
        # inodes, and the shard a path hashes to are the sandbox's own).
        "stat_cache": sorted(
            (norm.text(path), cached[0], cached[-1])
            for (entries,) in conn.execute("SELECT entries FROM stat_cache")
            for path, cached in load_shard(entries).items()
        ),
    }
    conn.close()
    return out


@pytest.mark.slow
def test_replayed_minutes_write_what_real_records_write(tmp_path: Path) -> None:
    built: dict[str, Path] = {}
    for mode in ("replay", "real"):
        root = tmp_path / mode
        build_history(
            root, tmp_path / f"{mode}.db", SHAPE, PLAN.minutes, real=mode == "real", plan=PLAN
        )
        built[mode] = root
    replay = rows(tmp_path / "replay.db", built["replay"])
    real = rows(tmp_path / "real.db", built["real"])
    for table in real:
        differ = [(a, b) for a, b in zip(replay[table], real[table], strict=False) if a != b]
        assert not differ, (table, differ[:3])
        assert len(replay[table]) == len(real[table]), table
    # What the replay is for: most minutes only the loadavg line changed.
    changed = [n_changed for _id, _h, _n, n_changed, *_ in real["snapshots"]]
    assert changed.count(1) >= PLAN.minutes - len(PLAN.changes) - 1
    assert len(real["marks"]) == 2
