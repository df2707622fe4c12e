"""The contract between the analysis and what shows it: field names, templates, JSON schema.

The typed contexts (`Investigation` for since/diff/report, `StateView` for
show, `FactHistory` for history) are published twice: as the `data` of
`--format json`, and as what templates (drift's and the users' own) read.
Renaming or removing a field breaks both, so it must be a decision: these
tests pin every field, check that every path a shipped template reads exists,
and check that docs/schema/*.schema.json is current and that real output
validates against it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
from conftest import run_drift
from contract_checks import Shape, TemplateReads, Validator, unwrap

from drift.analysis.comparison import Comparison
from drift.analysis.fleet_since import FleetSince
from drift.analysis.history_log import HistoryLog, MarkList
from drift.analysis.investigation import Investigation
from drift.analysis.plain import field_key, plain
from drift.analysis.views import FactHistory, StateView
from drift.resources import resource_dir

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "docs" / "schema"
REGENERATE = "python -m drift.render.schema docs/schema"

# Every part of every context, and its keys in order (the JSON output's order).
CONTRACT: dict[str, str] = {
    "Investigation": (
        "command host baseline current trust scope window total_suspects suspects "
        "changes_by_subject timeline unchanged blind_spots overview service elsewhere"
    ),
    "BaselineRef": (
        "snapshot time local asked why facts source unhealthy_at unhealthy_local "
        "failing_at_baseline"
    ),
    "SnapshotRef": "snapshot time local asked why facts",
    "Trust": (
        "window_snapshots after_baseline gaps errors baseline_errors clock_steps warnings summary"
    ),
    "Scope": "changes untracked_facts tracked_facts untracked tracked",
    "ScopeSwitch": "snapshot at local before_path after_path sections text detail",
    "ScopeSubject": "subject facts since since_local",
    "Window": "snapshots with_errors",
    "Suspect": (
        "rank score title status label category services reasons signals changes restarts failure "
        "undone_at undone_local"
    ),
    "Signal": "name value weight contribution reason",
    "SuspectChange": (
        "subject key kind category before after secret changed_at changed_local where "
        "provenance diff role"
    ),
    "ValueDiff": "format keys parse_error lines",
    "KeyChange": "path kind before after",
    "ServiceRestart": (
        "service before_pid after_pid at at_local count counted_by first first_local"
    ),
    "ServiceFailure": "service summary state since since_local restarts exit result journal",
    "SubjectChanges": "subject changes",
    "SubjectChange": (
        "subject key kind category before after secret changed_at changed_local where "
        "provenance diff role suspect_rank"
    ),
    "TimelineEntry": "at local kind text",
    "Overview": "start end health services marks",
    "Stretch": "start end start_local end_local state text",
    "ServiceLane": "service starts starts_local stretches",
    "MarkPoint": "at local kind note",
    "Unchanged": "count by_kind subjects whole_subjects facts",
    "UnchangedFact": "subject key value since",
    "BlindSpotEntry": (
        "kind subject key message first_seen last_seen first_local last_local count current "
        "keeps_value"
    ),
    "StateView": "host snapshot pattern service subjects errors",
    "SubjectState": "subject facts",
    "StateFact": "key value secret since since_local where provenance",
    "FactHistory": "host pattern limit facts begins_snapshot",
    "FactVersions": "subject key versions older",
    "FactVersion": (
        "value secret from from_local from_snapshot until until_local until_snapshot "
        "untracked where provenance patch"
    ),
    "HistoryLog": "host since with_marks entries",
    "LogEntry": "time local record facts changed errors gap mark",
    "MarkEntry": "mark kind time local note undone undone_local",
    "MarkList": "host marks",
    "Comparison": "command at groups warnings",
    "RoleGroup": "role hosts findings total_findings splits expected same notes",
    "HostRef": "host snapshot taken_at taken_local role baseline",
    "Finding": "rank score host role title reasons facts",
    "OddFact": "subject key kind value where majority among changed_since_stable",
    "HostValue": "hosts value where",
    "Split": "subject key values",
    "Expected": "subject key why values",
    "FleetSince": "command roles warnings",
    "FleetRole": "role hosts changes",
    "HostWindow": (
        "host baseline baseline_local baseline_why current current_local suspects trust"
    ),
    "FleetChange": (
        "rank score title subject key before after where hosts of statuses first_local "
        "last_local reasons"
    ),
    "StatusHosts": "status hosts",
}

# What the HTML and Markdown reports add next to the investigation when they render it.
REPORT_EXTRAS = ("regenerate", "generated_at", "explain", "digests", "picture", "glance")
TEMPLATES = {
    # evidence_shown: how many of a story's changes the terminal lists (None: all)
    "since.txt.j2": (Investigation, ("explain", "digests", "evidence_shown")),
    "report.html.j2": (Investigation, REPORT_EXTRAS),
    "report.md.j2": (Investigation, REPORT_EXTRAS),
    "show.txt.j2": (StateView, ()),
    "history.txt.j2": (FactHistory, ()),
    "log.txt.j2": (HistoryLog, ()),
    "marks.txt.j2": (MarkList, ()),
    "compare.txt.j2": (Comparison, ()),
    "compare.md.j2": (Comparison, ()),
    "compare.html.j2": (Comparison, ()),
    "since_fleet.txt.j2": (FleetSince, ()),
    "since_fleet.md.j2": (FleetSince, ()),
    "since_fleet.html.j2": (FleetSince, ()),
}


def parts(root: type) -> dict[str, tuple[str, ...]]:
    """Every dataclass reachable from `root`, by name, with its keys (dataclasses.fields)."""
    found: dict[str, tuple[str, ...]] = {}
    todo: list[Any] = [root]
    while todo:
        tp = unwrap(todo.pop())
        if is_dataclass(tp) and isinstance(tp, type):
            if tp.__name__ in found:
                continue
            found[tp.__name__] = tuple(field_key(f.name) for f in fields(tp))
            todo.extend(get_type_hints(tp).values())
        else:
            todo.extend(get_args(tp))
    return found


def test_every_part_of_every_context_keeps_its_keys() -> None:
    """A field renamed, removed, added or moved changes the JSON output: pin each one."""
    found = {
        **parts(Investigation),
        **parts(StateView),
        **parts(FactHistory),
        **parts(Comparison),
        **parts(FleetSince),
        **parts(HistoryLog),
        **parts(MarkList),
    }
    pinned = {name: tuple(keys.split()) for name, keys in CONTRACT.items()}
    assert found == pinned, (
        "a context's fields changed: if that is meant, update CONTRACT here, the templates "
        f"that read it, and the schema ({REGENERATE})"
    )


# --- what the templates read ---------------------------------------------------------------


def template_problems(name: str, context: type, extras: tuple[str, ...]) -> list[str]:
    source = (resource_dir("templates") / name).read_text(encoding="utf-8")
    shape = Shape(context, extras)
    assert shape.fields is not None
    return TemplateReads(source, set(shape.fields)).problems(shape)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_path_a_template_reads_is_in_its_context(name: str) -> None:
    context, extras = TEMPLATES[name]
    assert template_problems(name, context, extras) == []


def test_every_shipped_template_is_checked() -> None:
    assert sorted(p.name for p in resource_dir("templates").glob("*.j2")) == sorted(TEMPLATES)


def test_a_field_a_template_reads_cannot_go_unnoticed() -> None:
    """The template check bites: without a field the templates read, it names that field."""
    source = (resource_dir("templates") / "report.html.j2").read_text(encoding="utf-8")
    shape = Shape(Investigation, REPORT_EXTRAS)
    assert shape.fields is not None
    suspect = shape.fields["suspects"].item
    assert suspect is not None and suspect.fields is not None
    del suspect.fields["label"]
    change = suspect.fields["changes"].item
    assert change is not None and change.fields is not None
    del change.fields["where"]  # read in a macro that changes_by_subject's changes pass too
    del shape.fields["generated_at"]
    problems = TemplateReads(source, set(shape.fields)).problems(shape)
    assert problems == ["generated_at (not in the context)", "suspects[].label"]
    sub = shape.fields["changes_by_subject"].item
    assert sub is not None and sub.fields is not None
    del sub.fields["changes"].item.fields["where"]  # type: ignore[union-attr]
    problems = TemplateReads(source, set(shape.fields)).problems(shape)
    assert "changes_by_subject[].changes[].where or suspects[].changes[].where" in problems


# --- the JSON schema ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["since", "show", "history", "compare", "since-fleet", "log", "marks"]
)
def test_the_published_schema_is_current(name: str) -> None:
    from drift.render.schema import schema_text

    path = SCHEMAS / f"{name}.schema.json"
    assert path.is_file(), f"{path} is missing: run `{REGENERATE}`"
    assert path.read_text(encoding="utf-8") == schema_text(name), (
        f"{path} is out of date with the dataclasses: run `{REGENERATE}` and commit it"
    )


def test_the_validator_refuses_what_the_schema_does_not_allow() -> None:
    from drift.render.schema import json_schema

    check = Validator(json_schema("history"))
    good = {"drift_result_version": 1, "command": "history", "data": None, "errors": []}
    version = {
        "value": "512",
        "secret": False,
        "from": "2026-12-02T12:00:00.000000+00:00",
        "from_local": "2026-12-02 12:00:00 UTC",
        "from_snapshot": 2,
        "until": None,
        "until_local": None,
        "until_snapshot": None,
        "untracked": False,
        "where": "",
        "provenance": {},
        "patch": None,
    }
    facts = [{"subject": "service:decode", "key": "env:A", "versions": [version], "older": 0}]
    good["data"] = {
        "host": "h",
        "pattern": "A",
        "limit": 20,
        "facts": facts,
        "begins_snapshot": 1,
    }
    assert check.errors(good) == []
    assert check.errors({**good, "command": "show"}) == [".command: 'show' is not 'history'"]
    bad = json.loads(json.dumps(good))
    del bad["data"]["facts"][0]["versions"][0]["from"]
    bad["data"]["facts"][0]["versions"][0]["from_"] = "x"
    bad["data"]["facts"][0]["versions"][0]["until_snapshot"] = "3"
    bad["data"]["host"] = None
    errors = check.errors(bad)
    # data may also be null (an error envelope): the validator says it is not that either
    assert [e for e in errors if e.startswith(".data: ")] == [f".data: {bad['data']!r} is not null"]
    assert sorted(e for e in errors if not e.startswith(".data: ")) == sorted(
        [
            ".data.facts[0].versions[0]: 'from_' is not in the schema",
            ".data.facts[0].versions[0]: no 'from'",
            ".data.facts[0].versions[0].until_snapshot: '3' is not integer or null",
            ".data.host: None is not string",
        ]
    )
    stopped = {
        **good,
        "data": None,
        "errors": [{"level": "error", "message": "no", "exit_code": 2}],
    }
    assert check.errors(stopped) == []
    assert check.errors({**stopped, "errors": ["no"]}) == [".errors[0]: 'no' is not object"]


# --- real output ----------------------------------------------------------------------------


@dataclass
class Recorded:
    """A history recorded by `drift record` from the incident's sandbox, and its options."""

    root: Path
    args: list[str]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """The incident, plus a JSON config kept whole, a glob that matches nothing (a blind
    spot), a health check that starts failing, and a config change (a scope switch)."""
    from drift.demo import IncidentSandbox

    root = tmp_path_factory.mktemp("contract")
    box = IncidentSandbox(root / "box")
    box.build()
    settings = box.root / "etc" / "serve.json"
    settings.parent.mkdir()
    settings.write_text('{"port": 8000, "workers": ["a", "b"]}\n')
    healthy = root / "healthy"
    healthy.touch()
    config = box.config_path.read_text()
    box.config_path.write_text(
        f'{config}\n[[files]]\nname = "serve-config"\npaths = ["{settings}"]\n'
        'content = true\nformat = "json"\n'
        f'\n[[files]]\nname = "not-there"\npaths = ["{root}/none/*.conf"]\n'
        f'\n[[health]]\nname = "decode"\nrun = "test -e {healthy}"\n'
    )
    args = ["--config", str(box.config_path), "--db", str(box.db_path)]

    def record() -> None:
        result = run_drift(["record", *args], root, check=False)
        assert result.returncode in (0, 4), result.stderr  # 4: the glob's collection error

    box.start_all()
    try:
        record()
        record()
        run_drift(["mark", "stable", "--note", "p99 fine", *args], root)
        box.add_culprit()
        box.touch_kernel()
        settings.write_text('{"port": 8001, "workers": ["a", "b"], "debug": true}\n')
        box.restart_all()
        healthy.unlink()
        record()
        loadavg = '[[commands]]\nname = "loadavg"\nrun = "cat /proc/loadavg"\n'
        assert loadavg in box.config_path.read_text()
        box.config_path.write_text(box.config_path.read_text().replace(loadavg, ""))
        record()
    finally:
        box.stop_all()
    yield Recorded(root, args)
    shutil.rmtree(root, ignore_errors=True)


def drift_json(recorded: Recorded, *command: str) -> dict[str, Any]:
    out = run_drift([*command, "--format", "json", *recorded.args], recorded.root).stdout
    return dict(json.loads(out))


def test_real_output_validates_against_the_published_schemas(recorded: Recorded) -> None:
    """Every --format json output of a real history is valid, and together they use every
    part of each schema: nothing in it is only ever checked against an empty list."""
    report = recorded.root / "postmortem.json"
    run_drift(["report", "-o", str(report), *recorded.args], recorded.root)
    outputs = {
        "since": [
            drift_json(recorded, "since"),
            drift_json(recorded, "since", "--all", "--explain"),
            drift_json(recorded, "diff", "#1", "#4"),
            json.loads(report.read_text()),
        ],
        "show": [drift_json(recorded, "show"), drift_json(recorded, "show", "--at", "#1")],
        "history": [
            drift_json(recorded, "history", "SGLANG"),
            drift_json(recorded, "history", "loadavg"),
            drift_json(recorded, "history", "serve.json", "-p"),
        ],
        "log": [drift_json(recorded, "log", "--marks")],
        "marks": [drift_json(recorded, "mark", "--list")],
    }
    for name, documents in outputs.items():
        schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
        check = Validator(schema)
        for document in documents:
            assert check.errors(document) == [], (name, document["command"])
        assert check.seen == set(schema["$defs"]), f"{name}: never seen in real output"
    since = outputs["since"][0]["data"]
    assert {t["kind"] for t in since["timeline"]} >= {
        "restart",
        "change",
        "config",
        "health",
        "mark",
    }
    versions = [v for f in outputs["history"][1]["data"]["facts"] for v in f["versions"]]
    assert any(v["untracked"] for v in versions) and all("from" in v for v in versions)


def test_json_output_is_the_investigation_as_plain_data(recorded: Recorded) -> None:
    """`data` is plain(investigate(...)), which is dataclasses.asdict of it."""
    from drift.analysis.investigate import InvestigateOptions, investigate
    from drift.analysis.views import fact_history, state_view
    from drift.store.query import History
    from drift.store.urls import resolve_db_url

    history = History.open(resolve_db_url(recorded.args[3]), "gpu-node-7")
    try:
        found = investigate(history, None, None, InvestigateOptions())
        state = state_view(history, None, "decode")
        versions = fact_history(history, "SGLANG")
    finally:
        history.close()
    assert plain(found) == asdict(found)
    assert drift_json(recorded, "since")["data"] == plain(found)
    assert drift_json(recorded, "show", "decode")["data"] == plain(state) == asdict(state)
    assert drift_json(recorded, "history", "SGLANG")["data"] == plain(versions)
    renamed = json.loads(json.dumps(asdict(versions)).replace('"from_":', '"from":'))
    assert plain(versions) == renamed
