"""Generated operator sequences through an incident: `since` stays right whatever they do.

Hypothesis draws what an on-call operator does around one bad change: records,
stable marks before it, unstable and note marks after it (at now or back-dated
with --at), restarts of the wedged service with and without a change (another
value of the same knob among them), and
typos in --service. Everything is real: the incident's services as processes,
a health command that fails while decode's live environment has the bad
variable, and the `drift` command run as the operator runs it. Whatever the
sequence, `drift since` never answers "No change" and never says the bad
export "cannot have caused it" (it was live before the first failing check),
and each command exits with the code the README gives.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import run_drift
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drift.demo import IncidentSandbox

CULPRIT_KEY = "export:SGLANG_SM120_MMA_TARGET_CTAS"
RECORD_EXITS = {0}  # a failing health check is a fact recorded, not a failed record

# What the operator may do before the break, and after it.
BEFORE = st.sampled_from(["record", "mark stable", "mark stable --at last", "note", "restart"])
AFTER = st.sampled_from(
    [
        "record",
        "restart",
        "restart changed",
        "restart new value",
        "mark unstable",
        "mark unstable --at last",
        "note",
        "typo",
    ]
)


def health_check(box: IncidentSandbox) -> str:
    pidfile = box.pidfile("decode")
    probe = f"! tr '\\\\0' '\\\\n' < /proc/$(cat {pidfile})/environ | grep -q ^SGLANG_SM120_MMA"
    return f'\n[[health]]\nname = "decode-answers"\nrun = "{probe}"\ntimeout = 5\n'


class Operator:
    """The operator's hands on one deployment, each move the command they would type."""

    def __init__(self, box: IncidentSandbox, tmp: Path) -> None:
        self.box, self.tmp = box, tmp
        self.cfg = ["--config", str(box.config_path), "--db", str(box.db_path)]
        self.last_record = 0

    def drift(self, *args: str):  # type: ignore[no-untyped-def]
        return run_drift([*args, *self.cfg], self.tmp, check=False)

    def do(self, move: str) -> None:
        box = self.box
        if move == "record":
            result = self.drift("record")
            assert result.returncode in RECORD_EXITS, result.stderr
            assert result.stdout.startswith("snapshot #"), result.stdout
            self.last_record = int(result.stdout.split()[1].strip("#:"))
        elif move.startswith("mark"):
            kind = move.split()[1]
            at = ["--at", f"#{self.last_record}"] if move.endswith("--at last") else []
            result = self.drift("mark", kind, *at, "--note", "operator")
            assert result.returncode == 0, result.stderr
        elif move == "note":
            assert self.drift("mark", "note", "--note", "looking").returncode == 0
        elif move == "restart":
            box.stop("decode")
            box.start("decode")
        elif move == "restart changed":
            # a second, unrelated edit picked up by the next restart
            script = box.script("decode")
            script.write_text(script.read_text() + f"# tried at {time.time()}\n")
            box.stop("decode")
            box.start("decode")
        elif move == "restart new value":
            # the operator tries another value of the same knob
            script = box.script("decode")
            text = script.read_text()
            value = "256" if "CTAS=512" in text else "512"
            script.write_text(
                text.replace("CTAS=512", f"CTAS={value}").replace("CTAS=256", f"CTAS={value}")
            )
            box.stop("decode")
            box.start("decode")
        elif move == "typo":
            result = self.drift("since", "--service", "decoder")
            assert result.returncode == 2, (result.stdout, result.stderr)
            assert "decode" in result.stderr and len(result.stderr.strip().splitlines()) == 1
        else:  # pragma: no cover - the strategies name every move
            raise AssertionError(move)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    with_health=st.booleans(),
    before=st.lists(BEFORE, max_size=3),
    after=st.lists(AFTER, max_size=5),
)
def test_since_never_loses_the_cause_whatever_the_operator_does(
    tmp_path_factory, with_health: bool, before: list[str], after: list[str]
) -> None:
    tmp = tmp_path_factory.mktemp("operator")
    box = IncidentSandbox(tmp / "box")
    box.build()
    if with_health:
        box.config_path.write_text(box.config_path.read_text() + health_check(box))
    box.start_all()
    try:
        op = Operator(box, tmp)
        # whatever else happens, it worked once and someone said so
        for move in ["record", "mark stable", *before, "record"]:
            op.do(move)
        box.add_culprit()
        box.stop("decode")
        box.start("decode")
        op.do("record")  # the break is on record
        for move in [*after, "record"]:
            op.do(move)

        text = op.drift("since")
        assert text.returncode == 0, text.stderr
        assert "No change" not in text.stdout
        result = op.drift("since", "--all", "--format", "json")
        assert result.returncode == 0, result.stderr
        suspects = json.loads(result.stdout)["data"]["suspects"]
        culprit = [s for s in suspects if any(c["key"] == CULPRIT_KEY for c in s["changes"])]
        assert culprit, [s["title"] for s in suspects]
        for reason in culprit[0]["reasons"]:
            assert "cannot have caused it" not in reason, reason
        typo = op.drift("since", "--service", "decodr")
        assert typo.returncode == 2 and "Traceback" not in typo.stderr
    finally:
        box.stop_all()
