"""One host of a fleet writing records as fast as it can: what each record holds, and a
process that writes them (`python tests/fleet_writer.py DB HOST RECORDS shared|own START TICK`).

Record `i` of a host is a pure function of (host, i, shared), so a test can
check the state at every snapshot without being told what was written. With
`shared`, hosts write facts-shaped data that a fleet shares: the same
subjects, values, provenances and long outputs (blobs) on every host, changing
at the same records, so concurrent writers insert the same provenance and
blob rows at the same moment. The host's own pid changes at every record, so
every record takes the changed path.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import nullcontext

from drift.facts import Fact, FactBlock

MINUTE = 60_000_000
START = 1_790_000_000_000_000


def facts_of(host: str, i: int, shared: bool) -> list[Fact | FactBlock]:
    """What `host` records at its record `i`."""
    own = "" if shared else f"{host}/"
    files = [f"file:/etc/{own}serve/{j}.conf" for j in range(12)]
    block = FactBlock(
        ("sha256", "size"),
        files,
        [[f"{(j + i // 10):064x}" for j in range(12)], [str(100 + j + i // 25) for j in range(12)]],
        [{"glob": f"/etc/{own}serve/*.conf"}] * len(files),
    )
    driver = f"driver {i // 7}\n" + "nvidia-smi output line\n" * 40  # past 512: a blob
    return [
        block,
        Fact(f"command:{own}driver", "stdout", driver, {"run": "nvidia-smi"}),
        Fact(
            f"script:/opt/{own}serve/decode.sh",
            "export:CTAS",
            str(256 * (1 + i // 13 % 3)),
            {"file": f"/opt/{own}serve/decode.sh", "line": 3 + i // 20, "text": "export CTAS"},
        ),
        Fact("service:decode", "pid", f"{host}-{i}", {"source": "/proc/PID/environ"}),
        Fact("command:uptime", "stdout", f"{host} up {i} minutes\n" + "." * 600),
    ]


def expected_state(host: str, i: int, shared: bool) -> dict[tuple[str, str], str]:
    """(subject, key) -> value of every fact after record `i`."""
    out: dict[tuple[str, str], str] = {}
    for item in facts_of(host, i, shared):
        for fact in item if isinstance(item, FactBlock) else [item]:
            out[(fact.subject, fact.key)] = fact.value
    return out


def main(db_text: str, host: str, records: int, shared: bool, start: float, tick: float) -> None:
    """Write `records` records, record i at wall time `start` + i * `tick` (or at once if
    late): every host's cron fires at the same minute, so a fleet-wide change (a driver
    upgrade) is written by every host at the same moment."""
    from drift.store.urls import resolve_db_url
    from drift.store.writer import HistoryWriter

    ids = []
    db = resolve_db_url(db_text)
    with HistoryWriter.open(db) as writer:
        for i in range(records):
            time.sleep(max(0.0, start + i * tick - time.time()))
            # `drift record`'s lock of an SQLite file is one for the file (a second record
            # exits 3): without it, SQLite's own locks and busy timeout decide.
            with nullcontext() if db.is_sqlite else writer.record_lock(host):
                result = writer.write_snapshot(
                    host, START + i * MINUTE, facts_of(host, i, shared), [], {}
                )
            ids.append(result.snapshot_id)
    json.dump(ids, sys.stdout)


if __name__ == "__main__":
    db, host, records, kind, start, tick = sys.argv[1:]
    main(db, host, int(records), kind == "shared", float(start), float(tick))
