"""The collector registry: every collector writes only what it declares, and says it right.

The collectors run against the real things (the incident sandbox's processes,
scripts, files and git checkout, plus a process found by regex, a richer serve
script, special files and health checks); each fact must have a subject kind
and a key its collector declared. The analysis (category) and redaction
(secrecy) read the same declarations (`drift.subjects`), so a collector
declared there and in the registry, and nowhere else, is ranked, grouped and
redacted as declared; docs/collectors.md lists them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from collector_contract import facts_of, run_collector, undeclared
from conftest import drift_env
from json_server import JsonServer, json_server
from privileges import as_nobody
from shared_libs import other_bytes, system_libz

from drift.analysis.kinds import category
from drift.collectors.registry import COLLECTORS, collection_order
from drift.config import (
    CacheSpec,
    CommandSpec,
    Config,
    EndpointSpec,
    FileSpec,
    GpuSpec,
    HealthSpec,
    RepoSpec,
    ServiceSpec,
    load_config,
)
from drift.declaration import FactKey, SubjectKind
from drift.demo import IncidentSandbox
from drift.facts import CollectContext, CollectionError, Fact
from drift.secrets.redactor import Redactor
from drift.subjects import DECLARED, SUBJECT_KINDS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "collectors.md"
SECRECY = {"never": "never", "name": "by name or value", "value": "by value"}
TOKEN = "hf_" + "RegistryTokenShapedNotReal0123456789"

RICH_SCRIPT = """\
#!/bin/bash
source {common}
if [ "$MODE" = decode ]; then
  KNOB=8
else
  KNOB=4
fi
if [ -n "$VERBOSE" ]; then
  export LOG_LEVEL=debug
fi
PORT=30001
export PORT
export HF_HOME
export CUDA_VISIBLE_DEVICES=4,5,6,7
exec {python} -c 'import time; time.sleep(600)' --knob "$KNOB" --port "$PORT" --tp "$TP"
"""

BACKGROUND_SCRIPT = """\
#!/bin/bash
export LOG_LEVEL=info
python3 -m sglang.launch_server --router &
wait
"""

UNIT_PROVENANCE = {"unit", "fragment", "drop_ins", "invocations", "root", "unsure"}
"""What only a service found by systemd unit has (tests/test_record_systemd.py)."""

CONTAINER_PROVENANCE = {"container"}
"""What only a value read in a [container] has (tests/test_container.py)."""


def declared_keys() -> Iterator[tuple[SubjectKind, FactKey]]:
    for collector in COLLECTORS:
        for kind in collector.subjects:
            for key in kind.keys:
                yield kind, key


def example(key: FactKey, name: str = "EXAMPLE_KNOB") -> str:
    """A concrete key the declaration covers: the key itself, or its prefix and a name."""
    if not key.placeholder:
        return key.key
    return key.key + ("--" + name.lower().replace("_", "-") if key.key == "flag:" else name)


def doc_block(marker: str) -> str:
    text = DOC.read_text()
    start, end = f"<!-- {marker}:start -->\n", f"<!-- {marker}:end -->"
    return text[text.index(start) + len(start) : text.index(end)].strip()


@pytest.fixture
def matched(tmp_path: Path) -> Iterator[str]:
    """A process to find by regex: yields the marker its command line holds."""
    marker = f"drift-registry-{uuid.uuid4().hex}"
    # It maps a library that is then replaced under it: lib_disk:PATH has a value.
    lib = tmp_path / "libregistry.so.1"
    shutil.copyfile(system_libz(), lib)
    # psutil: a shared object a wheel installed, so its lib:PATH names a package.
    load = f"import ctypes, psutil, time; ctypes.CDLL({str(lib)!r}); time.sleep(600)"
    proc = subprocess.Popen(
        [sys.executable, "-c", load, "--marker", marker, "-v"],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", ""), "MODE": "decode", "API_TOKEN": TOKEN},
    )
    try:
        deadline = time.monotonic() + 20
        while str(lib) not in Path(f"/proc/{proc.pid}/maps").read_text():
            assert time.monotonic() < deadline, "the library was not loaded"
            time.sleep(0.02)
        other_bytes(system_libz(), lib)
        yield marker
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture
def engine() -> Iterator[JsonServer]:
    """A server answering [[endpoints]] with a small config document."""
    with json_server() as server:
        server.serve({"chunked_prefill_size": 8192, "served_model_names": ["m"], "api_key": TOKEN})
        yield server


def everything(box: IncidentSandbox, tmp_path: Path, marker: str, engine: str) -> Config:
    """The sandbox's config and more: every collector, and most ways each can answer."""
    config = load_config(box.config_path)
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    common = scripts / "common.sh"
    common.write_text("TP=8\nMODEL=deepseek\n")
    rich = scripts / "rich.sh"
    python = shlex.quote(sys.executable)
    rich.write_text(RICH_SCRIPT.format(common=common, python=python))
    background = scripts / "background.sh"
    background.write_text(BACKGROUND_SCRIPT)
    (scripts / "linked.sh").symlink_to(rich)

    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "app.json").write_text(json.dumps({"workers": 4, "token": TOKEN}))
    (conf / "current").symlink_to("app.json")
    os.mkfifo(conf / "pipe")
    (conf / "big.bin").write_bytes(b"\0" * 4096)

    # Dirty and untracked, so the repository's every key has a value worth having.
    box.kernel.write_text(box.kernel.read_text() + "# edited\n")
    (box.repo / "notes.txt").write_text("untracked\n")

    no_process = f"no process runs this {uuid.uuid4().hex}"
    return replace(
        config,
        role="decode",
        services=(
            *config.services,
            ServiceSpec("matched", match=re.escape(marker), script=str(rich)),
            ServiceSpec("stopped", match=re.escape(no_process), script=str(background)),
            ServiceSpec("linked", match=re.escape(no_process), script=str(scripts / "linked.sh")),
        ),
        files=(
            *config.files,
            FileSpec("conf", (f"{conf}/*.json", f"{conf}/current", f"{conf}/pipe"), True, "json"),
            FileSpec("blobs", (f"{conf}/*.bin", f"{tmp_path}/missing/*"), max_size=1024),
        ),
        repos=(*config.repos, RepoSpec(str(box.repo))),
        commands=(*config.commands, CommandSpec("failing", "echo oops; exit 3")),
        caches=(*config.caches, CacheSpec("kernels", (str(conf),))),
        health=(HealthSpec("fine", "true"), HealthSpec("down", "exit 1")),
        # GPUs in nvidia-smi's XML, as tests/test_gpu.py serves them (no GPU here)
        gpu=GpuSpec(enabled=True, command=("cat", str(ROOT / "tests" / "gpu_xml" / "h100x4.xml"))),
        endpoints=(
            EndpointSpec("engine", engine, service="matched"),
            EndpointSpec("refused", "http://127.0.0.1:9/", timeout=1),
        ),
    )


@pytest.fixture
def retitled(tmp_path: Path) -> Iterator[Path]:
    """A process that rewrites its title (setproctitle), as sglang-router does: its pidfile."""
    pidfile = tmp_path / "retitled.pid"
    run = (
        "import setproctitle, time; setproctitle.setproctitle('registry::router'); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", run], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"registry::"):
            assert time.monotonic() < deadline, "the title was not rewritten"
            time.sleep(0.02)
        pidfile.write_text(f"{proc.pid}\n")
        yield pidfile
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_every_fact_is_declared_by_its_collector(
    sandbox: IncidentSandbox, tmp_path: Path, matched: str, engine: JsonServer, retitled: Path
) -> None:
    config = everything(sandbox, tmp_path, matched, engine.url)
    # title: a process that rewrote it
    config = replace(
        config, services=(*config.services, ServiceSpec("retitled", pidfile=str(retitled)))
    )
    ctx = CollectContext()
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    provenance_keys: set[str] = set()
    for collector, entry, _scope in collection_order(config):
        items = run_collector(collector, entry, ctx)
        problems += undeclared(collector, items)
        for fact in facts_of(items):
            kind = collector.subject_kind(fact.subject)
            declared = None if kind is None else kind.key(fact.key)
            if kind is not None and declared is not None:
                seen.add((kind.kind, declared.shown))
            provenance_keys.update(fact.provenance)
    assert problems == []
    # Every declared key was written at least once, so none is declared for nothing;
    # the unit:* keys and the manager's need systemd (tests/test_record_systemd.py).
    everything_declared = {
        (kind.kind, key.shown)
        for kind, key in declared_keys()
        if not key.key.startswith("unit:") and kind.kind != "systemd"
    }
    assert everything_declared - seen == set()
    rows = doc_block("provenance").split("\n")[2:]
    documented = {row.split("|")[1].strip().strip("`") for row in rows}
    assert provenance_keys - documented == set(), "provenance keys missing from docs/collectors.md"
    # `unsure` is a unit's and also python:path's when a .pth file runs code (most venvs)
    optional = UNIT_PROVENANCE | CONTAINER_PROVENANCE
    assert documented - provenance_keys == optional - provenance_keys, (
        "documented but never written"
    )


def test_a_wrong_key_or_kind_is_caught() -> None:
    (services, scripts) = COLLECTORS[:2]
    items: list[Any] = [
        Fact("service:a", "env:PATH", "/bin"),
        Fact("service:a", "colour", "blue"),
        Fact("script:/a.sh", "content", "x"),
        CollectionError("service:a", "reading", "not a note of services"),
        CollectionError("service:a", "env:", "fine"),
    ]
    assert undeclared(services, items) == [
        "services: undeclared key: service:a colour",
        "services: undeclared subject kind: script:/a.sh",
        "services: undeclared error key: service:a reading",
    ]
    assert undeclared(scripts, [CollectionError("script:/a.sh", "reading", "a note")]) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_what_drift_may_not_read_of_a_process_is_declared(matched: str) -> None:
    spec = ServiceSpec("matched", match=re.escape(matched))
    services = COLLECTORS[0]

    def work() -> list[list[Any]]:
        return [
            [type(item).__name__, item.subject, item.key, getattr(item, "value", "")]
            for item in services.collect(spec, CollectContext())
        ]

    items = [
        Fact(subject, key, value) if kind == "Fact" else CollectionError(subject, key, value)
        for kind, subject, key, value in as_nobody(work)
    ]
    errors = {item.key for item in items if isinstance(item, CollectionError)}
    assert {"exe", "cwd", "env:"} <= errors  # what a process of another user hides
    assert undeclared(services, items) == []


def test_every_declared_category_is_the_analysis_category() -> None:
    disagree = [
        f"{kind.shown} {key.shown}: declared {key.category!r}, "
        f"analysis {category(f'{kind.kind}:x', example(key))!r}"
        for kind, key in declared_keys()
        if category(f"{kind.kind}:x", example(key)) != key.category
    ]
    assert disagree == []


def test_every_declared_secrecy_is_what_redaction_does() -> None:
    redactor = Redactor(b"k" * 32)

    def redacted(kind: SubjectKind, key: str, value: str) -> bool:
        (fact,) = redactor.redact_facts([Fact(f"{kind.kind}:x", key, value)])
        return fact.secret

    wrong = []
    for kind, key in declared_keys():
        plain = example(key, "PLAIN_KNOB")
        by_value = redacted(kind, plain, TOKEN)
        by_name = key.placeholder != "" and redacted(kind, example(key, "API_TOKEN"), "plain")
        does = "never" if not by_value else "name" if by_name else "value"
        if does != key.secret:
            wrong.append(f"{kind.shown} {key.shown}: declared {key.secret}, redaction: {does}")
        assert not redacted(kind, plain, "plain words")
    assert wrong == []


def test_the_documentation_lists_every_subject_and_key() -> None:
    subjects = ["| subject | collector | what it is |", "| --- | --- | --- |"]
    keys = ["| subject | key | meaning | category | secret |", "| --- | --- | --- | --- | --- |"]
    for collector in COLLECTORS:
        for kind in collector.subjects:
            subjects.append(f"| `{kind.shown}` | {collector.name} | {kind.meaning} |")
            keys += [
                f"| `{kind.shown}` | `{key.shown}` | {key.meaning} | {key.category} "
                f"| {SECRECY[key.secret]} |"
                for key in kind.keys
            ]
    assert doc_block("subjects") == "\n".join(subjects), "docs/collectors.md: the subjects table"
    assert doc_block("keys") == "\n".join(keys), (
        "docs/collectors.md: the keys table:\n" + "\n".join(keys)
    )


def test_collectors_run_section_by_section_and_entry_by_entry() -> None:
    config = Config(
        path=None,
        host="h",
        services=(ServiceSpec("a", pidfile="/a.pid", script="/a.sh"), ServiceSpec("b", match="b")),
        files=(FileSpec("f", ("/f/*",)), FileSpec("g", ("/g",))),
        repos=(RepoSpec("/r"),),
        commands=(CommandSpec("c", "true"),),
        health=(HealthSpec("h", "true"),),
        gpu=GpuSpec(enabled=True),
    )
    assert [(c.name, scope) for c, _entry, scope in collection_order(config)] == [
        ("services", "service:a"),
        ("scripts", "script:/a.sh"),
        ("services", "service:b"),
        ("files", "file:/"),
        ("files", "file:/"),
        ("repos", "repo:/r"),
        ("commands", "command:c"),
        ("health", "health:h"),
        ("gpu", "gpu:"),
    ]


def test_a_record_imports_only_the_collectors_its_config_uses(tmp_path: Path) -> None:
    config = tmp_path / "drift.toml"
    config.write_text('host = "h"\n[[commands]]\nname = "hello"\nrun = "echo hello"\n')
    code = textwrap.dedent(
        """
        import json, sys
        from drift.config import load_config
        from drift.record import record
        from drift.store.urls import resolve_db_url
        record(load_config(sys.argv[1]), resolve_db_url(sys.argv[2]))
        print(json.dumps(sorted(
            name for name in sys.modules
            if name.startswith("drift.collectors") or name.split(".")[0] in ("psutil", "git")
        )))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(config), str(tmp_path / "d.db")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path)},
    ).stdout
    assert json.loads(out) == [
        "drift.collectors",
        "drift.collectors.base",
        "drift.collectors.commands",
        "drift.collectors.registry",
    ]


def test_the_analysis_and_redaction_read_the_kinds_the_collectors_write() -> None:
    """Nothing left to keep in step: one list of kinds, which the analysis and redaction read."""
    written = [kind for collector in COLLECTORS for kind in collector.subjects]
    assert len({kind.kind for kind in written}) == len(written) == len(SUBJECT_KINDS)
    assert set(written) == set(SUBJECT_KINDS)
    assert category == DECLARED.category


ACCEL_KIND = """
ACCEL = SubjectKind(
    "accel",
    "INDEX",
    "an accelerator, as its state file says",
    (
        FactKey("clock", "its clock in MHz", "accel clock", "value"),
        FactKey("serial", "its serial number", "accel", "never"),
        FactKey("driver", "its driver's version", "accel", "value"),
        FactKey("setting:", "one of its settings", "accel setting", "name", "NAME"),
    ),
)
"""

ACCEL_COLLECTOR = '''
class AccelCollector(Collector[str]):
    """An accelerator's state (`drift.collectors.accel`)."""

    name = "accel"
    section = "accel"
    subjects = (ACCEL,)

    def entries(self, config: Config) -> tuple[str, ...]:
        return ("0",)

    def scope(self, entry: str) -> str:
        return f"accel:{entry}"

    def collect(self, entry: str, ctx: CollectContext) -> Iterable[Item]:
        from drift.collectors.accel import collect_accel

        return collect_accel(entry, ctx)

'''

ACCEL_MODULE = '''"""An accelerator's state, as the JSON file $ACCEL_STATE says."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

from drift.facts import CollectContext, Fact


def collect_accel(index: str, ctx: CollectContext) -> Iterator[Fact]:
    """One fact per entry of the state file."""
    path = os.environ["ACCEL_STATE"]
    with open(path, encoding="utf-8") as f:
        state = json.load(f)
    for key, value in sorted(state.items()):
        yield Fact(f"accel:{index}", key, value, {"file": path})
'''


def add_to_source(path: Path, anchor: str, text: str) -> None:
    """Put `text` in place of `anchor`, which `path` must hold once."""
    source = path.read_text()
    assert source.count(anchor) == 1, f"{path.name} no longer holds {anchor!r}: update this test"
    path.write_text(source.replace(anchor, text))


def test_a_collector_declared_only_in_the_registry_is_ranked_and_redacted(tmp_path: Path) -> None:
    """A made-up collector, with nothing but its module, its kind and its registry entry.

    drift is copied and given a made-up accelerator collector as CONTRIBUTING.md says to add
    one; `drift since` files its changes under the declared categories, and
    redaction reads its keys as declared (``setting:`` by name, ``serial``
    never).
    """
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "drift", copy / "drift", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("migrations", "templates"):
        (copy / folder).symlink_to(ROOT / folder)
    package = copy / "drift"
    add_to_source(
        package / "subjects.py", "\nSUBJECT_KINDS = (", f"{ACCEL_KIND}\nSUBJECT_KINDS = (ACCEL, "
    )
    registry = package / "collectors" / "registry.py"
    add_to_source(
        registry,
        "\nfrom drift.subjects import ",
        "\nfrom drift.subjects import ACCEL\nfrom drift.subjects import ",
    )
    anchor = "\nCOLLECTORS: tuple[Collector[Any], ...] = (\n"
    add_to_source(registry, anchor, f"{ACCEL_COLLECTOR}{anchor}    AccelCollector(),\n")
    (package / "collectors" / "accel.py").write_text(ACCEL_MODULE)

    state = tmp_path / "accel.json"
    config = tmp_path / "drift.toml"
    config.write_text('host = "h"\n')
    env = {**drift_env(tmp_path), "PYTHONPATH": str(copy), "ACCEL_STATE": str(state)}
    common = ["--config", str(config), "--db", str(tmp_path / "d.db")]

    def drift(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "drift", *args, *common],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)["data"] if "--format" in args else None

    serial = "hf_" + "SerialShapedLikeATokenNotReal0123"
    for clock, words, power in (("1410", "plain words", "300"), ("1800", "other words", "350")):
        settings = {"setting:API_TOKEN": words, "setting:POWER_LIMIT": power}
        facts = {"clock": clock, "serial": serial, "driver": TOKEN, **settings}
        state.write_text(json.dumps(facts))
        drift("record", "--quiet")

    since = drift("since", "--stable", "#1", "--all", "--format", "json")
    filed = {(c["key"], c["category"]) for s in since["suspects"] for c in s["changes"]}
    assert filed == {
        ("clock", "accel clock"),
        ("setting:API_TOKEN", "accel setting"),
        ("setting:POWER_LIMIT", "accel setting"),
    }
    assert since["unchanged"]["by_kind"] == {"accel": 2}
    shown = drift("show", "--format", "json")["subjects"]
    assert {f["key"]: f["secret"] for s in shown for f in s["facts"]} == {
        "clock": False,
        "driver": True,  # a token's shape: by value
        "serial": False,  # never read, whatever it looks like
        "setting:API_TOKEN": True,  # by name
        "setting:POWER_LIMIT": False,
    }
