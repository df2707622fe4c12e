"""drift since --fleet: one change on several hosts of a role is one line, "3 of 4 decode
hosts", with when it landed on each; a host whose history has a gap is named."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import run_drift
from contract_checks import Validator

from drift.facts import Fact
from drift.store.urls import resolve_db_url
from drift.store.writer import HistoryWriter, add_mark

MINUTE = 60_000_000
HOSTS = [f"decode-{n}" for n in range(1, 5)]
ROUTER = "router-1"


def facts(host: str, minute: int) -> list[Fact]:
    """A decode host's facts at a minute: flashinfer goes 0.2.5 -> 0.2.6 on decode-1..3,
    a minute apart from minute 30 on; decode-4 alone gets a new export at minute 40."""
    n = int(host.rsplit("-", 1)[1]) if host != ROUTER else 0
    role = "router" if host == ROUTER else "decode"
    upgraded = host != ROUTER and n <= 3 and minute >= 30 + n
    out = [
        Fact("host:drift.toml", "role", role),
        Fact("service:decode", "pid", str(1000 + n)),
        Fact("service:decode", "package:flashinfer", "0.2.6" if upgraded else "0.2.5"),
        Fact("service:decode", "env:NODE_RANK", str(n)),
    ]
    if host == "decode-4" and minute >= 40:
        out.append(Fact("service:decode", "env:SGLANG_EXTRA", "1"))
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("fleet-since")
    db = tmp / "fleet.db"
    url = resolve_db_url(str(db))
    start = int(time.time() * 1_000_000) - 50 * MINUTE
    with HistoryWriter.open(url) as writer:
        for minute in range(50):
            for host in [*HOSTS, ROUTER]:
                if host == "decode-2" and 20 <= minute < 26:
                    continue  # a recording gap inside its window
                writer.write_snapshot(host, start + minute * MINUTE, facts(host, minute), [], {})
    for host in [*HOSTS, ROUTER]:
        add_mark(url, host, "stable", start + 10 * MINUTE + 1, "worked")
    return tmp, db


def since_fleet(tmp: Path, db: Path, *args: str, check: bool = True):  # type: ignore[no-untyped-def]
    return run_drift(["since", "--fleet", "--db", str(db), *args], tmp, check=check)


def test_a_change_on_three_of_four_hosts_is_one_line(fleet: tuple[Path, Path]) -> None:
    tmp, db = fleet
    data = json.loads(since_fleet(tmp, db, "--format", "json").stdout)["data"]
    assert data["command"] == "since --fleet"
    roles = {r["role"]: r for r in data["roles"]}
    assert set(roles) == {"decode", "router"}
    decode = roles["decode"]
    assert [h["host"] for h in decode["hosts"]] == HOSTS
    by_key = {c["key"]: c for c in decode["changes"]}
    upgrade = by_key["package:flashinfer"]
    assert upgrade["hosts"] == ["decode-1", "decode-2", "decode-3"] and upgrade["of"] == 4
    assert (upgrade["before"], upgrade["after"]) == ("0.2.5", "0.2.6")
    assert upgrade["first_local"] < upgrade["last_local"]  # it landed a minute apart
    extra = by_key["env:SGLANG_EXTRA"]
    assert extra["hosts"] == ["decode-4"]
    # Nothing changed on the router since its stable mark.
    assert roles["router"]["changes"] == []
    # decode-2's window has a gap: the warnings name it.
    assert any(w.startswith("decode-2: ") and "gap" in w for w in data["warnings"])
    schema = json.loads(
        (Path(__file__).parents[1] / "docs" / "schema" / "since-fleet.schema.json").read_text()
    )
    check = Validator(schema)
    assert check.errors(json.loads(since_fleet(tmp, db, "--format", "json").stdout)) == []


def test_the_terminal_reads_by_change_and_by_role(fleet: tuple[Path, Path]) -> None:
    tmp, db = fleet
    result = since_fleet(tmp, db, "--role", "decode")
    text = result.stdout
    assert "role decode: 4 hosts" in text and "role router" not in text
    assert "3 of 4 decode hosts:" in text and "1 of 4 decode hosts:" in text
    assert "drift: warning: decode-2:" in result.stderr
    for fmt, marker in (("md", "## Role decode"), ("html", "<h2>Role <code>decode</code>")):
        assert marker in since_fleet(tmp, db, "--role", "decode", "--format", fmt).stdout


def test_role_without_fleet_and_an_unknown_role_are_refused(fleet: tuple[Path, Path]) -> None:
    tmp, db = fleet
    alone = run_drift(["since", "--role", "decode", "--db", str(db)], tmp, check=False)
    assert alone.returncode == 2 and "--role needs --fleet" in alone.stderr
    unknown = since_fleet(tmp, db, "--role", "prefill", check=False)
    assert unknown.returncode == 2 and "prefill" in unknown.stderr
