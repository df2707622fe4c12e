"""drift compare: four decode hosts recording real processes into one history (an SQLite
file, and a real PostgreSQL on loopback); the one with an extra export is found first,
with its script line, and no per-host value is a finding."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from conftest import run_drift
from contract_checks import Validator
from postgres_server import postgres_server

from drift.demo import CULPRIT, IncidentSandbox

HOSTS = [f"decode-{n}" for n in range(1, 5)]
ODD = "decode-3"
HOSTILE = "export GREETING='<script>alert(1)</script></svg>'"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fleet(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, str]]:
    """Four hosts, one after another, on the same paths (as a fleet's nodes are): each
    records, is marked stable, then records again; decode-3 first gets an export line
    added to decode.sh and its decode restarted. Every host's decode script exports its
    own NODE_RANK; decode-3's has exported a hostile GREETING since before it was stable."""
    tmp = tmp_path_factory.mktemp("fleet")
    with ExitStack() as stack:
        if request.param == "postgresql":
            db = stack.enter_context(postgres_server())
        else:
            db = str(tmp / "fleet.db")
        yield record_fleet(tmp, db), db


def record_fleet(
    tmp: Path,
    db: str,
    hosts: list[str] = HOSTS,
    box: IncidentSandbox | None = None,
    ready: Callable[[], None] = lambda: None,
) -> Path:
    """`hosts` recorded one after another on `box` (built), `ready` called once its
    services are up; the fixture's history."""
    if box is None:
        box = IncidentSandbox(tmp / "node")
        box.build()
    config = box.config_path.read_text()
    script = box.script("decode").read_text()
    try:
        for rank, host in enumerate(hosts):
            box.config_path.write_text(
                config.replace('host = "gpu-node-7"', f'host = "{host}"\nrole = "decode"')
            )
            extra = f"export NODE_RANK={rank}\n" + (f"{HOSTILE}\n" if host == ODD else "")
            box.script("decode").write_text(script.replace("set -e\n", f"set -e\n{extra}"))
            box.start_all()
            ready()
            args = ["--config", str(box.config_path), "--db", str(db)]
            run_drift(["record", *args], tmp)
            run_drift(["mark", "stable", *args], tmp)
            if host == ODD:
                box.add_culprit()
                box.stop("decode")
                box.start("decode")
                ready()
            run_drift(["record", *args], tmp)
            box.stop_all()
    finally:
        box.stop_all()
    return tmp


def compare(tmp: Path, db: str, *args: str, check: bool = True) -> object:
    result = run_drift(["compare", "--db", str(db), *args], tmp, check=check)
    return result


def test_the_odd_decode_host_is_found_first_with_its_script_line(
    fleet: tuple[Path, str],
) -> None:
    tmp, db = fleet
    data = json.loads(compare(tmp, db, *HOSTS, "--format", "json").stdout)["data"]
    (group,) = data["groups"]
    assert group["role"] == "decode"
    assert [h["host"] for h in group["hosts"]] == HOSTS
    first = group["findings"][0]
    assert first["host"] == ODD
    name = CULPRIT.removeprefix("export ").split("=")[0]
    assert first["title"].startswith(f"{ODD} exports {name}=512 (")
    others = "decode-1, decode-2, decode-4 do not set it"
    assert re.search(r"decode\.sh:\d+\); " + others + "$", first["title"])
    facts = {(f["subject"].split(":")[0], f["key"]) for f in first["facts"]}
    assert ("script", f"export:{name}") in facts and ("service", f"env:{name}") in facts
    assert "changed on decode-3 since its last stable window" in first["reasons"]
    assert "in a running process" in first["reasons"]
    # Only decode-3 differs where most agree; nothing per host is a finding. Its other
    # odd export was there at its last stable window: it ranks below the new one.
    assert {f["host"] for f in group["findings"]} == {ODD}
    greeting = next(f for f in group["findings"] if "GREETING" in f["title"])
    assert greeting["rank"] > first["rank"] and greeting["score"] < first["score"]
    assert "as it was on decode-3 at its last stable window" in greeting["reasons"]
    keys = {c["key"] for f in group["findings"] for c in f["facts"]}
    assert not keys & {"pid", "started_at", "ppid", "export:NODE_RANK", "env:NODE_RANK"}
    expected = {(e["subject"].split(":")[0], e["key"]): e["why"] for e in group["expected"]}
    assert "every host holds its own value" in expected[("script", "export:NODE_RANK")]
    assert "a process or a record" in expected[("service", "pid")]
    assert group["splits"] == [] and group["same"] > 50


def test_the_json_follows_the_published_schema(fleet: tuple[Path, str]) -> None:
    tmp, db = fleet
    schema = json.loads(
        (Path(__file__).parents[1] / "docs" / "schema" / "compare.schema.json").read_text()
    )
    check = Validator(schema)
    for args in ([*HOSTS], ["decode-1", ODD], ["--fleet", "--service", "decode"]):
        document = json.loads(compare(tmp, db, *args, "--format", "json").stdout)
        assert check.errors(document) == [], args
    assert check.seen == set(schema["$defs"]), "never seen in real output"


def test_the_terminal_tells_the_same_and_the_fleet_finds_the_hosts(
    fleet: tuple[Path, str],
) -> None:
    tmp, db = fleet
    text = compare(tmp, db, "--fleet").stdout
    assert "role decode: 4 hosts" in text
    assert " 1. [" in text and f"{ODD} exports SGLANG_SM120_MMA_TARGET_CTAS=512" in text
    assert "Expected to differ:" in text and "export:NODE_RANK" in text
    by_role = compare(tmp, db, "--fleet", "--role", "decode", "--format", "json").stdout
    assert [h["host"] for h in json.loads(by_role)["data"]["groups"][0]["hosts"]] == HOSTS
    wrong = compare(tmp, db, "--fleet", "--role", "prefill", check=False)
    assert wrong.returncode == 2 and wrong.stderr == (
        'drift: no role "prefill" on record among the hosts compared; known: decode\n'
    )


def test_two_hosts_have_no_majority_and_drift_says_so(fleet: tuple[Path, str]) -> None:
    tmp, db = fleet
    data = json.loads(compare(tmp, db, "decode-1", ODD, "--format", "json").stdout)["data"]
    (group,) = data["groups"]
    assert group["findings"] == []
    split = {s["key"]: s for s in group["splits"] if s["subject"].startswith("script:")}
    assert "export:SGLANG_SM120_MMA_TARGET_CTAS" in split
    text = compare(tmp, db, "decode-1", ODD).stdout
    assert "No majority" in text and "cannot tell which side is odd" in text


def test_text_from_the_box_is_escaped_in_html_and_markdown(fleet: tuple[Path, str]) -> None:
    tmp, db = fleet
    html = compare(tmp, db, *HOSTS, "--format", "html").stdout
    assert "<script>" not in html and "</svg>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    md = compare(tmp, db, *HOSTS, "--format", "md").stdout
    # Markdown shows it as text: every `<` escaped, so no renderer reads a tag.
    assert "\\<script>alert(1)\\</script>" in md and not re.search(r"(?<!\\)<", md)
    assert "## Role decode" in md


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "name the hosts to compare, or give --fleet"),
        (["decode-1"], "has nothing to compare with"),
        (["decode-1", "decode-9"], 'no host "decode-9" on record in '),
        (["decode-1", "decode-2", "--fleet"], "either hosts or --fleet"),
        (["--fleet", "--at", "2001-01-01T00:00:00+00:00"], "no host to compare"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    fleet: tuple[Path, str], args: list[str], message: str
) -> None:
    tmp, db = fleet
    result = compare(tmp, db, *args, check=False)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("role", ["de code", "", "decode\\n2", "x" * 64])
def test_a_bad_role_in_drift_toml_is_one_line_naming_the_key(tmp_path: Path, role: str) -> None:
    config = tmp_path / "drift.toml"
    config.write_text(f'host = "decode-1"\nrole = "{role}"\n')
    result = run_drift(
        ["record", "--config", str(config), "--db", str(tmp_path / "d.db")], tmp_path, check=False
    )
    assert result.returncode == 2
    assert "role" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_latest_states_compared_in_sql_tell_what_reading_each_host_tells(
    fleet: tuple[Path, str],
) -> None:
    """Without --at the hosts' latest states are compared by an aggregate in SQL; with --at
    (here: now) each host's state is read whole. Both must say the same."""
    tmp, db = fleet
    in_sql = json.loads(compare(tmp, db, *HOSTS, "--format", "json").stdout)["data"]
    read = json.loads(compare(tmp, db, *HOSTS, "--at", "now", "--format", "json").stdout)["data"]
    assert read["at"] is not None and in_sql["at"] is None
    assert read["groups"] == in_sql["groups"]


def test_gpus_are_compared_by_index_not_by_their_uuid(tmp_path: Path) -> None:
    """Every host's GPUs have UUIDs of their own: GPU 0 is compared with the others' GPU 0,
    and a power cap set on one host's is the finding, whichever way the states are read."""
    import time

    from drift.facts import Fact
    from drift.store.urls import resolve_db_url
    from drift.store.writer import HistoryWriter

    db = tmp_path / "gpus.db"
    now = int(time.time() * 1_000_000)
    with HistoryWriter.open(resolve_db_url(str(db))) as writer:
        for n in range(1, 5):
            facts = [Fact("gpu:driver", "driver_version", "575.57.08")]
            for index in (0, 1):
                uuid = f"GPU-{n:04d}-{index}"
                capped = n == 2 and index == 1
                facts += [
                    Fact(f"gpu:{uuid}", "index", str(index)),
                    Fact(f"gpu:{uuid}", "name", "NVIDIA H100 80GB HBM3"),
                    Fact(f"gpu:{uuid}", "power.limit", "500.00 W" if capped else "700.00 W"),
                ]
            writer.write_snapshot(f"decode-{n}", now - 60_000_000, facts, [], {})
    hosts = [f"decode-{n}" for n in range(1, 5)]
    for at in ([], ["--at", "now"]):
        out = run_drift(["compare", *hosts, *at, "--db", str(db), "--format", "json"], tmp_path)
        (group,) = json.loads(out.stdout)["data"]["groups"]
        (finding,) = group["findings"]
        assert finding["host"] == "decode-2"
        assert [(f["subject"], f["key"]) for f in finding["facts"]] == [("gpu:#1", "power.limit")]
        assert finding["facts"][0]["value"] == "500.00 W"
        assert finding["facts"][0]["majority"]["value"] == "700.00 W"
        assert group["splits"] == [] and group["expected"] == []
        assert group["same"] == 6  # the driver; index, name and power of GPU 0; index, name of 1


def test_a_fact_one_hosts_config_does_not_ask_for_is_no_difference(tmp_path: Path) -> None:
    """decode-4's drift.toml has no `extra` command: that it lacks its output says nothing
    about the box. decode-3's lacks the command's output although its config asks: that is
    a finding."""
    import time

    from drift.facts import Fact
    from drift.scope import ConfigInfo, Scope
    from drift.store.urls import resolve_db_url
    from drift.store.writer import HistoryWriter

    db = tmp_path / "scope.db"
    now = int(time.time() * 1_000_000)
    full = ConfigInfo("/etc/drift/drift.toml", "a" * 64, Scope(commands=("load", "extra")))
    short = ConfigInfo("/etc/drift/drift.toml", "b" * 64, Scope(commands=("load",)))
    with HistoryWriter.open(resolve_db_url(str(db))) as writer:
        for n in range(1, 5):
            facts = [Fact("command:load", "stdout", "same")]
            if n in (1, 2):
                facts.append(Fact("command:extra", "stdout", "on"))
            config = short if n == 4 else full
            writer.write_snapshot(f"decode-{n}", now - 60_000_000, facts, [], {}, config=config)
    hosts = [f"decode-{n}" for n in range(1, 5)]
    for at in ([], ["--at", "now"]):
        out = run_drift(["compare", *hosts, *at, "--db", str(db), "--format", "json"], tmp_path)
        (group,) = json.loads(out.stdout)["data"]["groups"]
        # decode-4 is left aside; of the three that watch it, decode-3 lacks it.
        assert [e["why"] for e in group["expected"]] == [
            "not watched on decode-4: their drift.toml does not ask for it"
        ]
        (finding,) = group["findings"]
        assert finding["host"] == "decode-3"
        assert (
            finding["title"] == "decode-3 has no command:extra stdout; decode-1, decode-2 have on"
        )
        assert "decode-3 alone of 3 hosts" in finding["reasons"]
        assert group["same"] == 1  # command:load
