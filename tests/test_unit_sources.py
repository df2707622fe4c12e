"""Every systemd source of a service's environment, replayed on a real systemd as a user would.

Each incident is a change an operator makes to a box drift watches (a drop-in,
an EnvironmentFile, a unit file edited without daemon-reload, the manager's
environment), among noise (another service restarted, an unrelated config
file edited), then `drift since --format json` as the on-call engineer runs
it. systemd is the oracle: what the unit's process really got
(/proc/MAINPID/environ) decides what drift must say, and the EnvironmentFile
reader is checked against systemd on generated files.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from systemd_container import SCRIPT as CONTAINER_SCRIPT
from systemd_container import SystemdContainer, systemd_container_fixture

from drift.analysis.titles import NOT_APPLIED
from drift.collectors.env_file import parse_env_file

pytestmark = pytest.mark.systemd

systemd_container = systemd_container_fixture()

TOKEN = "hf_" + "EnvironmentFileTokenNeverStored42"

SERVE = """#!/bin/bash
export SERVE_SCRIPT_KNOB=1
exec /usr/bin/sleep infinity
"""


def unit(script: str, extra: str = "") -> str:
    return f"[Unit]\nDescription=test\n\n[Service]\nExecStart=/bin/bash {script}\n{extra}"


class Incident:
    """A box under drift: a unit service with a serve script, a noise service and a noise file."""

    def __init__(self, box: SystemdContainer, tmp_path: Path, name: str, extra: str = "") -> None:
        self.box, self.tmp_path, self.name = box, tmp_path, name
        self.unit = f"{name}.service"
        self.script = f"/opt/serve/{name}.sh"
        self.noise_unit = f"{name}-router.service"
        self.noise_file = f"/opt/conf-{name}/app.json"
        box.write_file(self.script, SERVE)
        box.write_file(self.noise_file, '{"workers": 4}\n')
        box.write_unit(self.unit, unit(self.script, extra))
        box.write_unit(self.noise_unit, "[Service]\nExecStart=/usr/bin/sleep infinity\n")
        box.daemon_reload()
        box.start(self.unit)
        box.start(self.noise_unit)
        self.watched: list[str] = [self.noise_file]
        self.as_container = False

    def watch(self, path: str) -> None:
        """Also list a file (or glob) of the box in [[files]]."""
        self.watched.append(path)

    @property
    def cfg(self) -> list[str]:
        """The config: the box seen from the host through `proc_root`, or as a [container]."""
        config = self.tmp_path / "drift.toml"
        inside = "" if self.as_container else str(self.box.root)
        paths = ", ".join(json.dumps(inside + p) for p in self.watched)
        if self.as_container:
            leader = [str(CONTAINER_SCRIPT), "leader", str(self.box.directory), self.box.name]
            reach = f'[container]\nname = "sglang"\nleader_command = {json.dumps(leader)}\n'
        else:
            reach = (
                f"systemctl = {json.dumps(self.box.systemctl)}\n"
                f'proc_root = "{self.box.proc_root}"\n'
            )
        config.write_text(
            f'host = "ctr"\n{reach}'
            f'[[services]]\nname = "{self.name}"\nunit = "{self.unit}"\n'
            f'script = "{inside}{self.script}"\n'
            f'[[services]]\nname = "router"\nunit = "{self.noise_unit}"\n'
            f'[[files]]\nname = "watched"\npaths = [{paths}]\n'
        )
        return ["--config", str(config), "--db", str(self.tmp_path / "drift.db")]

    def record(self) -> str:
        """Record, as cron does every minute; the snapshot's ``#N``."""
        out = run_drift(["record", *self.cfg], self.tmp_path).stdout
        assert ", 0 errors," in out, out
        return out.split(":", 1)[0].removeprefix("snapshot ")

    def noise(self) -> None:
        """What else happened meanwhile, a minute apart: the router restarted, a config edited."""
        self.box.restart(self.noise_unit)
        self.record()
        self.box.write_file(self.noise_file, '{"workers": 8}\n')

    def since(self, baseline: str) -> dict:
        args = ["since", "--stable", baseline, "--all", "--format", "json", *self.cfg]
        return json.loads(run_drift(args, self.tmp_path).stdout)["data"]

    def live(self) -> dict[str, str]:
        """What the unit's process really runs with: the oracle."""
        pid = self.box.run_systemctl("show", "-p", "MainPID", "--value", self.unit).stdout
        return self.box.environ(int(pid))

    def with_envfile(self, suffix: str, text: str) -> str:
        """Give the unit an EnvironmentFile (a drop-in names it), reloaded and restarted."""
        envfile = f"/etc/serve/{self.name}{suffix}.env"
        self.box.write_file(envfile, text)
        self.box.write_unit(f"{self.unit}.d/env.conf", f"[Service]\nEnvironmentFile={envfile}\n")
        self.box.daemon_reload()
        self.box.restart(self.unit)
        return envfile

    def shown(self) -> dict[str, dict]:
        """`drift show` of the service, fact by key."""
        args = ["show", f"service:{self.name}", "--format", "json", *self.cfg]
        data = json.loads(run_drift(args, self.tmp_path).stdout)["data"]
        return {f["key"]: f for f in data["subjects"][0]["facts"]}

    def stop(self) -> None:
        for name in (self.unit, self.noise_unit):
            self.box.run_systemctl("stop", name, check=False)


@pytest.fixture
def incident(systemd_container: SystemdContainer, tmp_path: Path) -> Iterator[Incident]:
    name = tmp_path.name.replace("_", "-").lower()[-24:].strip("-")
    case = Incident(systemd_container, tmp_path, f"svc-{name}")
    try:
        yield case
    finally:
        case.stop()


def root(suspect: dict) -> dict:
    (found,) = [c for c in suspect["changes"] if c["role"] == "root"]
    return found


def rank_one(data: dict, key: str, where: str) -> dict:
    """The first suspect, checked to be rooted at `key`, named at `where`."""
    first = data["suspects"][0]
    assert (root(first)["key"], root(first)["where"]) == (key, where)
    return first


def facts_of(suspect: dict) -> set[tuple[str, str]]:
    return {(c["subject"], c["key"]) for c in suspect["changes"]}


def touching(data: dict, text: str) -> list[int]:
    """The ranks of every suspect with a change whose subject or key names `text`."""
    return sorted(
        {
            s["rank"]
            for s in data["suspects"]
            for c in s["changes"]
            if text in c["subject"] or text in c["key"]
        }
    )


# ------------------------------------------------------------------ a drop-in


@pytest.mark.parametrize("as_container", [False, True], ids=["proc_root", "container"])
def test_a_drop_in_s_environment_is_one_story_named_by_its_file_and_line(
    incident: Incident, as_container: bool
) -> None:
    box = incident.box
    incident.as_container = as_container
    seen_as = "" if as_container else str(box.root)  # a [container]'s own paths
    dropin = f"/etc/systemd/system/{incident.unit}.d/override.conf"
    box.write_unit(f"{incident.unit}.d/00-base.conf", "[Service]\nRestart=no\n")
    box.daemon_reload()
    # The drop-ins are watched as files too: the same edit, one story.
    incident.watch(f"/etc/systemd/system/{incident.unit}.d/*.conf")
    incident.record()

    box.write_unit(f"{incident.unit}.d/override.conf", "[Service]\nEnvironment=SGLANG_X=512\n")
    incident.noise()
    box.daemon_reload()
    box.restart(incident.unit)
    incident.record()

    assert incident.live()["SGLANG_X"] == "512"
    data = incident.since("#1")
    inside = " in container sglang" if as_container else ""
    first = rank_one(data, "unit:environment:SGLANG_X", f"{dropin}:2{inside}")
    assert first["title"] == f"Environment=SGLANG_X=512 added to {dropin}:2"
    assert first["status"] == "live"
    assert [r["service"] for r in first["restarts"]] == [incident.name]
    # The live value, the drop-in's text and the [[files]] entry are its evidence,
    # not suspects of their own.
    keys = facts_of(first)
    assert (f"service:{incident.name}", "env:SGLANG_X") in keys
    assert (f"service:{incident.name}", f"unit:file:{dropin}") in keys
    assert (f"file:{seen_as}{dropin}", "sha256") in keys
    assert touching(data, "override.conf") == [1]
    assert touching(data, "SGLANG_X") == [1]
    # The noise is there, ranked below.
    assert touching(data, incident.noise_file)[0] > 1


# ------------------------------------------------------------------ an EnvironmentFile


def test_an_edited_environment_file_is_pending_then_live_with_its_line(
    incident: Incident,
) -> None:
    box = incident.box
    envfile = f"/etc/serve/{incident.name}.env"
    secrets = f"HF_TOKEN={TOKEN}\nexport API_KEY=short1\n"  # the second, systemd drops
    box.write_file(envfile, f"# decode knobs\nTARGET_CTAS=256\nHF_HOME=/data/hf\n{secrets}")
    box.write_unit(
        f"{incident.unit}.d/env.conf",
        f"[Service]\nEnvironmentFile={envfile}\nEnvironmentFile=-/etc/serve/absent.env\n",
    )
    box.daemon_reload()
    box.restart(incident.unit)
    incident.record()  # the EnvironmentFile is not in [[files]]: drift reads it all the same

    incident.noise()
    box.write_file(envfile, f"# decode knobs\nTARGET_CTAS=512\nHF_HOME=/data/hf\n{secrets}")
    incident.record()

    assert incident.live()["TARGET_CTAS"] == "256"  # systemd never re-reads it on its own
    data = incident.since("#1")
    first = rank_one(data, "unit:envfile:TARGET_CTAS", f"{envfile}:2")
    assert first["title"] == f"TARGET_CTAS=512 at EnvironmentFile {envfile}:2 (was 256)"
    assert (first["status"], first["label"]) == ("pending", NOT_APPLIED)

    box.restart(incident.unit)
    incident.record()

    assert incident.live()["TARGET_CTAS"] == "512"
    data = incident.since("#1")
    first = rank_one(data, "unit:envfile:TARGET_CTAS", f"{envfile}:2")
    assert first["status"] == "live"
    assert (f"service:{incident.name}", "env:TARGET_CTAS") in facts_of(first)
    assert touching(data, "TARGET_CTAS") == [1]
    assert incident.live()["HF_TOKEN"] == TOKEN and "API_KEY" not in incident.live()
    stored = b"".join(p.read_bytes() for p in incident.tmp_path.glob("drift.db*"))
    assert TOKEN.encode() not in stored and b"short1" not in stored


def test_a_missing_required_environment_file_is_a_blind_spot_saying_the_unit_will_not_start(
    incident: Incident,
) -> None:
    box = incident.box
    envfile = incident.with_envfile("-required", "KEPT=1\n")
    incident.record()

    (box.root / envfile.lstrip("/")).unlink()
    out = run_drift(["record", *incident.cfg], incident.tmp_path, check=False)
    assert out.returncode == 4  # stored, with a blind spot
    assert f"EnvironmentFile={envfile} does not exist" in out.stderr
    # systemd agrees: the unit does not start without it.
    failed = box.run_systemctl("restart", incident.unit, check=False)
    assert failed.returncode != 0
    data = incident.since("#1")
    assert touching(data, "KEPT") == []  # not read as removed


# ------------------------------------------------------------------ no daemon-reload


def test_a_unit_file_edited_without_daemon_reload_says_what_changed_and_is_pending(
    incident: Incident,
) -> None:
    box = incident.box
    dropin = f"/etc/systemd/system/{incident.unit}.d/override.conf"
    box.write_unit(f"{incident.unit}.d/override.conf", "[Service]\nEnvironment=KEPT=1\n")
    box.daemon_reload()
    box.restart(incident.unit)
    incident.record()

    box.write_unit(
        f"{incident.unit}.d/override.conf",
        "[Service]\nEnvironment=KEPT=1\nEnvironment=NEW_KNOB=1\n",
    )
    new = f"/etc/systemd/system/{incident.unit}.d/20-new.conf"
    box.write_unit(f"{incident.unit}.d/20-new.conf", "[Service]\nEnvironment=OTHER=2\n")
    incident.noise()
    incident.record()

    shown = box.run_systemctl("show", "-p", "NeedDaemonReload", "--value", incident.unit)
    assert shown.stdout.strip() == "yes"
    data = incident.since("#1")
    stories = {root(s)["key"]: s for s in data["suspects"]}
    knob = stories["unit:disk_environment:NEW_KNOB"]
    assert knob["rank"] == 1
    assert knob["title"] == (
        f"Environment=NEW_KNOB=1 added to {dropin}:3, not loaded: run systemctl daemon-reload"
    )
    assert root(knob)["where"] == f"{dropin}:3"
    assert knob["status"] == "pending" and "daemon-reload" in knob["label"]
    # systemd's bare "NeedDaemonReload=yes" is its evidence, not a suspect of its own.
    assert touching(data, "need_daemon_reload") == [knob["rank"]]
    other = stories["unit:disk_environment:OTHER"]  # a drop-in systemd has not seen at all
    assert root(other)["where"] == f"{new}:2" and other["status"] == "pending"

    box.daemon_reload()
    incident.record()
    data = incident.since("#1")
    stories = {root(s)["key"]: s for s in data["suspects"]}
    knob = stories["unit:environment:NEW_KNOB"]
    assert (knob["status"], knob["label"]) == ("pending", NOT_APPLIED)
    assert root(knob)["where"] == f"{dropin}:3"
    assert touching(data, "need_daemon_reload") == []

    box.restart(incident.unit)
    incident.record()
    assert incident.live()["NEW_KNOB"] == "1"
    knob = {root(s)["key"]: s for s in incident.since("#1")["suspects"]}[
        "unit:environment:NEW_KNOB"
    ]
    assert knob["status"] == "live" and knob["rank"] <= 2  # OTHER ties with it


# ------------------------------------------------------------------ the manager


def test_a_variable_set_in_the_manager_environment_is_named_as_its_source(
    incident: Incident,
) -> None:
    box = incident.box
    incident.noise()
    baseline = incident.record()
    box.run_systemctl("set-environment", "MGR_KNOB=1")
    try:
        box.restart(incident.unit)
        incident.record()
        assert incident.live()["MGR_KNOB"] == "1"
        data = incident.since(baseline)
        first = data["suspects"][0]
        assert root(first)["subject"] == "systemd:manager"
        assert first["title"] == "MGR_KNOB=1 set in the systemd manager environment"
        assert first["status"] == "live" and first["services"] == [incident.name]
        assert (f"service:{incident.name}", "env:MGR_KNOB") in facts_of(first)
        assert [r["service"] for r in first["restarts"]] == [incident.name]
        # The router, started before, does not have it: one story all the same.
        assert touching(data, "MGR_KNOB") == [1]

        # Set before the baseline, picked up by a restart after it: the live value's
        # source is the manager, not "source unknown".
        box.run_systemctl("set-environment", "MGR_LATER=yes")
        baseline = incident.record()
        box.restart(incident.unit)
        incident.record()
        data = incident.since(baseline)
        (story,) = [s for s in data["suspects"] if root(s)["key"] == "env:MGR_LATER"]
        assert story["status"] == "unsourced"
        assert story["label"].startswith("from the systemd manager environment")
    finally:
        box.run_systemctl("unset-environment", "MGR_KNOB", "MGR_LATER")


# ------------------------------------------------------------------ systemd's order


def test_the_strongest_source_is_named_in_systemd_s_order(incident: Incident) -> None:
    """Manager < PassEnvironment < Environment= < EnvironmentFile (later files last).

    Every source is in place before the baseline and the unit restarts after
    it: each live variable's source is the one systemd's process shows won.
    """
    box = incident.box
    box.write_file("/etc/serve/order-a.env", "IN_FILES=a\nFILE_OVER_UNIT=file\n")
    box.write_file("/etc/serve/order-b.env", "IN_FILES=b\n")
    box.write_unit(
        f"{incident.unit}.d/order.conf",
        "[Service]\nEnvironment=UNIT_OVER_MANAGER=unit FILE_OVER_UNIT=unit\n"
        "EnvironmentFile=/etc/serve/order-a.env\nEnvironmentFile=/etc/serve/order-b.env\n"
        "PassEnvironment=TERM\n",
    )
    box.run_systemctl("set-environment", "UNIT_OVER_MANAGER=mgr", "TERM=mgr", "MANAGER_ONLY=m")
    try:
        box.daemon_reload()
        incident.record()
        box.restart(incident.unit)
        incident.record()
        live = incident.live()
        data = incident.since("#1")
    finally:
        box.run_systemctl("unset-environment", "UNIT_OVER_MANAGER", "TERM", "MANAGER_ONLY")
    labels = {root(s)["key"].removeprefix("env:"): s["label"] for s in data["suspects"]}
    expected = {
        "MANAGER_ONLY": ("m", "from the systemd manager environment"),
        "TERM": ("xterm", f"from PassEnvironment= of {incident.unit}"),
        "UNIT_OVER_MANAGER": ("unit", "from unit Environment= (/etc/systemd/system/"),
        "FILE_OVER_UNIT": ("file", "from EnvironmentFile /etc/serve/order-a.env:2"),
        "IN_FILES": ("b", "from EnvironmentFile /etc/serve/order-b.env:1"),
    }
    for name, (value, label) in expected.items():
        assert live[name] == value  # systemd's own verdict
        assert labels[name].startswith(label), (name, labels[name])


# ------------------------------------------------------------------ the reader, against systemd

PROBE = """[Service]
ExecStart=/usr/bin/sleep infinity
EnvironmentFile=/etc/probe-env/%i.env
"""

TRICKY = [
    "K1=plain\n",
    "K1 = spaced key \n K2=\ttabbed\t\n",
    'K1="double \\" \\$ \\n \\\\ quoted"\nK2=\'single "x" \\n\'\n',
    "K1=a\\\n  b\nK2=c\\ \n",
    "# comment\n; also\nK1=v # not a comment\n",
    "export K1=1\nK-2=2\nK3\n2K=4\nK4=ok\n",
    "K1=\"multi\nline\"\nK2='a\nb'\n",
    "K1=first\nK1=second\n",
    'K1="a"b \'c\'\nK2=x "y" z\n',
    "K1=end-of-file-no-newline",
    'K1="unterminated\n',
    "K1=crlf\r\nK2=next\r\n",
    "K1=before\0K2=after-nul\n",
    'K1=\\"escaped\\" \\#\\\'\n',
    "# comment ending in a backslash \\\nK1=swallowed-before-254\nK2=after\n",
    "K1=ümlaut ☃\n",
]

_ALPHABET = string.ascii_letters[:6] + "K_=#;'\"\\ \t\n$`é" + "0"


class Probes:
    """Template instances, one per EnvironmentFile: systemd reads each, drift compares."""

    def __init__(self, box: SystemdContainer) -> None:
        self.box = box
        box.write_unit("probe-env@.service", PROBE)
        box.daemon_reload()

    def systemd_reads(self, texts: list[bytes]) -> list[dict[str, str] | None]:
        """What each file gives a started unit (None: the unit would not start)."""
        names = [f"probe-env@{i}.service" for i in range(len(texts))]
        for i, text in enumerate(texts):
            target = self.box.root / f"etc/probe-env/{i}.env"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text)
        self.box.run_systemctl("restart", *names, check=False)
        out: list[dict[str, str] | None] = []
        for name in names:
            pid = int(self.box.run_systemctl("show", "-p", "MainPID", "--value", name).stdout)
            out.append(None if pid == 0 else self.box.environ(pid))
        self.box.run_systemctl("stop", *names, check=False)
        return out


def drift_reads(text: bytes) -> dict[str, str] | None:
    parsed = parse_env_file(text, "/etc/probe-env/x.env", comment_continues=True)
    if parsed.failure is not None:
        return None
    return {a.name: a.value for a in parsed.assignments}


def only_probed(environ: dict[str, str] | None) -> dict[str, str] | None:
    """The variables the file gave: every name the files use starts with K (or a letter a-f)."""
    if environ is None:
        return None
    systemd_own = {"LANG", "PATH", "INVOCATION_ID", "JOURNAL_STREAM", "SYSTEMD_EXEC_PID"}
    return {k: v for k, v in environ.items() if k not in systemd_own}


@pytest.fixture(scope="module")
def probes(systemd_container: SystemdContainer) -> Probes:
    return Probes(systemd_container)


def test_the_environment_file_reader_agrees_with_systemd_on_tricky_files(probes: Probes) -> None:
    texts = [t.encode() for t in TRICKY] + [b"K1=\xff invalid utf-8\n", b"K1=ok\nK2=\x01ctl\n"]
    for text, got in zip(texts, probes.systemd_reads(texts), strict=True):
        assert drift_reads(text) == only_probed(got), text


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["K", "Ka", "Kb", "K_1", "Kc", " K", "Kd ", "export K"]),
                st.text(alphabet=_ALPHABET, max_size=14),
            ),
            max_size=5,
        ),
        min_size=10,
        max_size=10,
    )
)
def test_the_environment_file_reader_agrees_with_systemd_on_generated_files(
    probes: Probes, files: list[list[tuple[str, str]]]
) -> None:
    texts = ["".join(f"{key}={rest}\n" for key, rest in lines).encode() for lines in files]
    for text, got in zip(texts, probes.systemd_reads(texts), strict=True):
        assert drift_reads(text) == only_probed(got), text


def test_a_drop_in_written_through_a_symlink_is_read_inside_the_container(
    incident: Incident,
) -> None:
    """An absolute symlink in the container points into the container, not at the host."""
    box = incident.box
    box.write_file("/opt/shared/env.conf", "[Service]\nEnvironment=VIA_LINK=1\n")
    link = box.root / f"etc/systemd/system/{incident.unit}.d/10-link.conf"
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink("/opt/shared/env.conf", link)
    box.daemon_reload()
    box.restart(incident.unit)
    incident.record()
    facts = incident.shown()
    assert incident.live()["VIA_LINK"] == "1"
    assert facts["unit:environment:VIA_LINK"]["value"] == "1"
    assert facts["unit:environment:VIA_LINK"]["where"].endswith("10-link.conf:2")


def test_a_line_moved_in_an_environment_file_is_named_where_it_is_now(
    incident: Incident,
) -> None:
    envfile = incident.with_envfile("-moved", "KNOB=1\n")
    incident.record()

    incident.box.write_file(envfile, "# tuned for the H200 nodes\nKNOB=1\n")  # the value stays
    incident.record()

    assert incident.shown()["unit:envfile:KNOB"]["where"] == f"{envfile}:2"
    data = incident.since("#1")
    assert touching(data, "KNOB") == []  # no value changed
    (edit,) = [s for s in data["suspects"] if envfile in root(s)["key"]]
    assert edit["title"] == f"EnvironmentFile {envfile} changed"
    assert edit["label"] == "no variable it gives changed"


def test_a_comment_ending_in_a_backslash_is_read_as_this_systemd_reads_it(
    incident: Incident,
) -> None:
    """Before systemd 254 the line after it is part of the comment; drift asks the version."""
    incident.with_envfile("-comment", "# old setting \\\nSWALLOWED=1\nAFTER=2\n")
    incident.record()
    version = incident.box.run_systemctl("show", "-p", "Version", "--value").stdout
    live, facts = incident.live(), incident.shown()
    assert ("SWALLOWED" in live) == (int(version.split(".")[0]) >= 254)
    assert ("unit:envfile:SWALLOWED" in facts) == ("SWALLOWED" in live)
    assert facts["unit:envfile:AFTER"]["value"] == live["AFTER"] == "2"
    assert "unsure" not in facts["unit:envfile:AFTER"]["provenance"]


# ------------------------------------------------------------------ a line that moved


def test_an_environment_line_that_moved_is_no_change_and_no_churn(incident: Incident) -> None:
    """Comments added above `Environment=KNOB=1` move its line twice, its value never; then
    the value changes once. drift names the line where it is now, and counts one change."""
    box = incident.box
    unit_path = f"/etc/systemd/system/{incident.unit}"
    lines = "Environment=KNOB=1\nEnvironment=OTHER=x\n"
    box.write_unit(incident.unit, unit(incident.script, lines))
    box.daemon_reload()
    box.restart(incident.unit)
    incident.record()  # 1
    line = 6  # [Unit], Description, blank, [Service], ExecStart, then KNOB

    comments = ""
    for tuned in ("# tuned for the H200 nodes\n", "# see the runbook\n"):
        comments += tuned
        box.write_unit(incident.unit, unit(incident.script, comments + lines))
        box.daemon_reload()
        incident.record()  # 2, 3: the line moved, the value did not
        line += 1
        assert incident.shown()["unit:environment:KNOB"]["where"] == f"{unit_path}:{line}"
    out = run_drift(
        ["history", "unit:environment:KNOB", "--format", "json", *incident.cfg], incident.tmp_path
    ).stdout
    (fact,) = json.loads(out)["data"]["facts"]
    assert [v["where"] for v in fact["versions"]] == [
        f"{unit_path}:{n}" for n in (line, line - 1, line - 2)
    ]

    incident.noise()  # 4, then the noise file changes
    incident.record()  # 5
    data = incident.since("#1")
    # The variable kept its value: neither a change nor one that "changed and changed back".
    assert touching(data, "KNOB") == []
    assert [e["text"] for e in data["timeline"] if "KNOB" in e["text"]] == []

    box.write_unit(incident.unit, unit(incident.script, comments + lines.replace("=1", "=2")))
    box.daemon_reload()
    box.restart(incident.unit)
    incident.record()  # 6
    data = incident.since("#5")
    knob = {root(s)["key"]: s for s in data["suspects"]}["unit:environment:KNOB"]
    reasons = " ".join(r["text"] if isinstance(r, dict) else r for r in knob["reasons"])
    assert "never changed in the 5 records before the baseline" in reasons, reasons
