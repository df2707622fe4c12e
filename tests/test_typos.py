"""A mistyped name is refused, never read as "no change".

An operator types `--service decoder` (the service is `decode`) during an
incident: a filter by a name nothing on record has leaves nothing, and
"No change since the baseline." would be a false all-clear. Every command
that takes a service, host, role or PATTERN refuses such a name in one line
naming the known ones (and the closest), exit 2; a known service with
genuinely no change still says so, exit 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import run_drift

KNOWN = "known: decode, prefill, router"


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """The incident recorded for two hosts of role decode: a stable morning, then the export
    line added to decode.sh and decode (only it) restarted."""
    from drift.demo import IncidentSandbox

    tmp = tmp_path_factory.mktemp("typos")
    box = IncidentSandbox(tmp / "box")
    box.build()
    text = box.config_path.read_text()
    box.config_path.write_text(
        text.replace('host = "gpu-node-7"\n', 'host = "gpu-node-7"\nrole = "decode"\n')
    )
    cfg = ["--config", str(box.config_path), "--db", str(box.db_path)]
    box.start_all()
    try:
        for host in ("gpu-node-7", "gpu-node-8"):
            run_drift(["record", *cfg, "--host", host], tmp)
            run_drift(["record", *cfg, "--host", host], tmp)
            run_drift(["mark", "stable", *cfg, "--host", host], tmp)
        box.add_culprit()
        box.stop("decode")
        box.start("decode")
        for host in ("gpu-node-7", "gpu-node-8"):
            run_drift(["record", *cfg, "--host", host], tmp)
        yield tmp, cfg
    finally:
        box.stop_all()


def refused(incident: tuple[Path, list[str]], *args: str) -> str:
    """drift's stderr for a command that must be refused: one line, exit 2, nothing on stdout."""
    tmp, cfg = incident
    result = run_drift([*args, *cfg], tmp, check=False)
    assert (result.returncode, result.stdout) == (2, ""), (result.stdout, result.stderr)
    assert result.stderr.startswith("drift: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    return result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["since", "--service", "decoder"],
        ["since", "--stable", "#1", "--service", "decoder", "--format", "md"],
        ["diff", "#1", "#5", "--service", "decoder"],
    ],
)
def test_a_mistyped_service_names_the_known_ones(
    incident: tuple[Path, list[str]], args: list[str]
) -> None:
    message = refused(incident, *args)
    assert message == (
        'drift: no service "decoder" on record for host gpu-node-7 (did you mean "decode"?); '
        f"{KNOWN}\n"
    )


def test_report_with_a_mistyped_service_writes_nothing(
    incident: tuple[Path, list[str]],
) -> None:
    tmp, _cfg = incident
    out = tmp / "postmortem.html"
    message = refused(incident, "report", "--service", "decoder", "-o", str(out))
    assert 'no service "decoder" on record' in message and KNOWN in message
    assert not out.exists()
    as_json = run_drift(
        ["report", "--service", "decoder", "-o", str(tmp / "pm.json"), *incident[1]],
        tmp,
        check=False,
    )
    assert as_json.returncode == 2
    envelope = json.loads(as_json.stdout)
    assert envelope["data"] is None and envelope["errors"][0]["exit_code"] == 2
    assert not (tmp / "pm.json").exists()


def test_a_known_service_with_no_change_still_says_no_change(
    incident: tuple[Path, list[str]],
) -> None:
    tmp, cfg = incident
    quiet = run_drift(["since", "--service", "router", *cfg], tmp)
    # Known, so no typo; but the host did change: say none of it touches router, not
    # "no change since the baseline", which would read as a quiet box.
    assert "No suspect touches service router (of " in quiet.stdout
    assert "No change since the baseline." not in quiet.stdout
    found = run_drift(["since", "--service", "decode", *cfg], tmp)
    assert "SGLANG_SM120_MMA_TARGET_CTAS" in found.stdout


def test_a_pattern_that_matches_no_fact_says_how_to_list_them(
    incident: tuple[Path, list[str]],
) -> None:
    tmp, cfg = incident
    for command in ("history", "show"):
        message = refused(incident, command, "SGLANG_SM120_MMA_TARGET_CTAZ")
        assert message.startswith(
            'drift: no recorded fact of host gpu-node-7 matches "SGLANG_SM120_MMA_TARGET_CTAZ" '
            '(did you mean "'
        )
        assert "`drift show` lists every fact" in message
    as_json = run_drift(["history", "NOPE", "--format", "json", *cfg], tmp, check=False)
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["data"] is None
    # A fact on record that the snapshot asked for does not hold yet is no typo: exit 0.
    before = run_drift(["show", "--at", "#1", "SGLANG_SM120_MMA_TARGET_CTAS", *cfg], tmp)
    assert "no fact matches SGLANG_SM120_MMA_TARGET_CTAS in this snapshot" in before.stdout
    assert "SGLANG_SM120_MMA_TARGET_CTAS" in run_drift(["history", "CTAS", *cfg], tmp).stdout


@pytest.mark.parametrize("host", ["gpu-node-77", "typo"])
@pytest.mark.parametrize(
    "args",
    [
        ["show"],
        ["show", "--at", "#1"],
        ["history", "CTAS"],
        ["since"],
        ["since", "--format", "json"],
        ["diff", "#1", "#2"],
        ["report", "-o", "pm.md"],
        ["mark", "stable"],
        ["mark", "note", "--note", "checked"],
    ],
)
def test_a_mistyped_host_names_the_recorded_ones(
    incident: tuple[Path, list[str]], args: list[str], host: str
) -> None:
    # A --host that names none of the recorded hosts is a typo: never "run `drift record`
    # first", which would start a second history under the typo.
    tmp, cfg = incident
    db = cfg[cfg.index("--db") + 1]
    close = ' (did you mean "gpu-node-7"?)' if host == "gpu-node-77" else ""
    expected = f'no host "{host}" on record in {db}{close}; known: gpu-node-7, gpu-node-8'
    if "json" in args:
        result = run_drift([*args, "--host", host, *cfg], tmp, check=False)
        assert result.returncode == 2
        assert json.loads(result.stdout)["errors"][0]["message"] == expected
        return
    assert refused(incident, *args, "--host", host) == f"drift: {expected}\n"
    assert not (tmp / "pm.md").exists()


def test_a_host_never_recorded_in_a_history_of_others_says_to_record_it(
    incident: tuple[Path, list[str]],
) -> None:
    # The config's own host, not recorded yet in a database other hosts share: that is no
    # typo, so drift says to record it (and which hosts the database holds).
    tmp, cfg = incident
    config = tmp / "other.toml"
    config.write_text('host = "spare"\n')
    db = cfg[cfg.index("--db") + 1]
    result = run_drift(["since", "--config", str(config), "--db", db], tmp, check=False)
    assert result.returncode == 2
    assert result.stderr == (
        f"drift: no history for host 'spare' in {db} (recorded hosts: gpu-node-7, "
        "gpu-node-8; pick one with --host): run `drift record` first\n"
    )


def test_a_mistyped_host_in_an_empty_database_says_to_record(tmp_path: Path) -> None:
    db = str(tmp_path / "d.db")
    run_drift(["init", "--db", db], tmp_path)
    result = run_drift(["show", "--db", db, "--host", "typo"], tmp_path, check=False)
    assert result.returncode == 2
    assert result.stderr == (
        f"drift: no history for host 'typo' in {db}: run `drift record` first\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["compare", "gpu-node-7", "gpu-node-8", "--service", "decoder"],
            'no service "decoder" on record for the hosts compared (did you mean "decode"?); '
            + KNOWN,
        ),
        (
            ["compare", "--fleet", "--role", "decoder"],
            'no role "decoder" on record among the hosts compared (did you mean "decode"?); '
            "known: decode",
        ),
        (
            ["compare", "gpu-node-7", "gpu-node-77"],
            'no host "gpu-node-77" on record in {db} (did you mean "gpu-node-7"?); '
            "known: gpu-node-7, gpu-node-8",
        ),
        (
            ["since", "--fleet", "--role", "decoder"],
            'no role "decoder" on record among the hosts recorded in the hour before '
            '(did you mean "decode"?); known: decode',
        ),
        (
            ["since", "--fleet", "--service", "decoder"],
            'no service "decoder" on record for the hosts recorded in the hour before '
            f'(did you mean "decode"?); {KNOWN}',
        ),
    ],
)
def test_the_fleet_commands_refuse_a_mistyped_name(
    incident: tuple[Path, list[str]], args: list[str], message: str
) -> None:
    db = incident[1][incident[1].index("--db") + 1]
    assert refused(incident, *args) == f"drift: {message.replace('{db}', db)}\n"


def test_the_fleet_commands_still_filter_by_a_known_name(
    incident: tuple[Path, list[str]],
) -> None:
    tmp, cfg = incident
    found = run_drift(["since", "--fleet", "--service", "decode", *cfg], tmp).stdout
    assert "SGLANG_SM120_MMA_TARGET_CTAS" in found
    run_drift(["compare", "--fleet", "--role", "decode", "--service", "router", *cfg], tmp)


def test_prune_with_a_mistyped_host_drops_nothing_and_says_why(
    incident: tuple[Path, list[str]],
) -> None:
    tmp, cfg = incident
    for dry in ([], ["--dry-run"]):
        message = refused(incident, "prune", "--keep", "1h", "--host", "gpu-node-77", *dry)
        assert message == (
            'drift: no host "gpu-node-77" on record in this database (did you mean '
            '"gpu-node-7"?); known: gpu-node-7, gpu-node-8\n'
        )


names = st.text(alphabet="abcdefghij-_0123456789", min_size=1, max_size=12)


@given(name=names, known=st.sets(names, max_size=30))
def test_an_unknown_name_is_refused_in_one_line_naming_the_known_ones(
    name: str, known: set[str]
) -> None:
    from drift.errors import UnknownNameError
    from drift.names import KNOWN_SHOWN, check_known

    if name in known:
        check_known("service", name, known, "for host h")  # a known name passes
        return
    with pytest.raises(UnknownNameError) as caught:
        check_known("service", name, known, "for host h")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f'no service "{name}" on record')
    listed = message.rsplit("; known: ", 1)[1]
    shown = sorted(known)[:KNOWN_SHOWN]
    assert listed.startswith(", ".join(shown) or "none")
    if '(did you mean "' in message:
        guess = message.split('(did you mean "', 1)[1].split('"?)', 1)[0]
        assert guess in known and guess != name
