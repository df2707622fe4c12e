"""Every secret shape drift knows, in every place a value can appear, searched for everywhere.

One sandbox (the incident's deployment from drift.demo, plus a service
started from a script, one started directly, a file set with content, file
names, commands and a health check) holds a secret of every shape in every
place, each one unique to its (shape, place, record). It is recorded, marked
stable, every secret is rotated (scripts rewritten, services restarted, files
renamed, the config's command lines changed), and recorded again, so the
report shows each value before and after. Then the database (the .db file and
its -wal as bytes, every blob decompressed), every output format of since,
diff, show, history and report, and what drift printed (collection errors
included) are searched for each secret: raw, JSON-escaped, URL-encoded and
base64. Each secret's marker must be in the database: it was recorded, masked.

A PostgreSQL password given with --db is checked the same way in the
regenerate lines of the reports and in connection errors.

The benign values a deployment is full of (git SHAs, UUIDs, digests, model
names, addresses, ports, device lists) go through the same places and must
read as they were written.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import shlex
import signal
import sqlite3
import string
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from conftest import run_drift
from postgres_server import postgres_server

from drift.demo import IncidentSandbox
from drift.secrets.redactor import Redactor

SLEEPER = "import time\nwhile True: time.sleep(3600)"
ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
CRYPT = ALNUM + "./"


def chars(seed: str, n: int, alphabet: str = ALNUM) -> str:
    """`n` characters from `alphabet`, the same for the same seed and different for another."""
    rng = random.Random(hashlib.sha256(seed.encode()).digest())
    return "".join(rng.choice(alphabet) for _ in range(n))


def pem(body: str) -> str:
    return f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----"


@dataclass(frozen=True)
class Shape:
    """One kind of secret: how to make one, and how it is written where it appears.

    `value` is the value of a variable or a flag holding it (named `var` and
    `flag` when the name is what makes it secret, else a neutral OPT_N /
    --opt-N); `masked` is the text whose marker replaces it.
    """

    name: str
    make: Callable[[str], str]
    value: Callable[[str], str] = lambda s: s
    masked: Callable[[str], str] = lambda s: s
    var: str | None = None
    flag: str | None = None
    by_shape: bool = True  # found by its shape alone, so also in a file name


def crypt(prefix: str, salt: str, n: int) -> Shape:
    return Shape(f"crypt {prefix}", lambda seed: f"{prefix}{salt}${chars(seed, n, CRYPT)}")


SHAPES = [
    Shape("hugging face", lambda seed: "hf_" + chars(seed, 34)),
    Shape("openai", lambda seed: "sk-proj-" + chars(seed, 32)),
    Shape("anthropic", lambda seed: "sk-ant-api03-" + chars(seed, 40, B64URL)),
    Shape("aws key id", lambda seed: "AKIA" + chars(seed, 16, string.ascii_uppercase + "234567")),
    Shape("github", lambda seed: "ghp_" + chars(seed, 36)),
    Shape("github fine", lambda seed: f"github_pat_{chars(seed, 22)}_{chars(seed + '.', 59)}"),
    Shape("slack token", lambda seed: f"xoxb-{chars(seed, 12, string.digits)}-{chars(seed, 24)}"),
    Shape(
        "jwt",
        lambda seed: f"eyJhbGciOiJIUzI1NiJ9.eyJ{chars(seed, 30, B64URL)}.{chars(seed, 43, B64URL)}",
    ),
    Shape(
        "pem private key",
        lambda seed: chars(seed, 64, ALNUM + "+/"),
        value=pem,
        masked=pem,
        by_shape=False,  # not a file name
    ),
    Shape(
        "bearer",
        lambda seed: chars(seed, 40, B64URL),
        value=lambda s: f"Authorization: Bearer {s}",
        by_shape=False,
    ),
    Shape(
        "basic",
        lambda seed: base64.b64encode(f"svc:{chars(seed, 18)}".encode()).decode(),
        value=lambda s: f"Authorization: Basic {s}",
        by_shape=False,
    ),
    Shape(
        "url password",
        lambda seed: chars(seed, 20),
        value=lambda s: f"postgresql://app:{s}@db.internal:5432/app",
        by_shape=False,
    ),
    Shape("stripe live", lambda seed: "sk_live_" + chars(seed, 24)),
    Shape("stripe restricted", lambda seed: "rk_live_" + chars(seed, 24)),
    Shape("stripe test", lambda seed: "sk_test_" + chars(seed, 24)),
    Shape("google api key", lambda seed: "AIza" + chars(seed, 35, B64URL)),
    Shape("gitlab", lambda seed: "glpat-" + chars(seed, 20, B64URL)),
    Shape("npm", lambda seed: "npm_" + chars(seed, 36)),
    Shape("pypi", lambda seed: "pypi-AgEIcHlwaS5vcmc" + chars(seed, 80, B64URL)),
    Shape(
        "slack webhook",
        lambda seed: (
            f"T{chars(seed, 9, string.ascii_uppercase)}/B{chars(seed, 11)}/{chars(seed + '.', 24)}"
        ),
        value=lambda s: f"https://hooks.slack.com/services/{s}",
        by_shape=False,  # it holds slashes: never a file name
    ),
    crypt("$y$", "j9T$F5Jx5fExrKuPp53xLKQ..1", 43),
    crypt("$6$", "rounds=5000$saltsaltsalt", 86),
    crypt("$5$", "saltsalt", 43),
    crypt("$2b$", "12", 53),
    crypt("$2a$", "10", 53),
    crypt("$2y$", "10", 53),
    crypt("$1$", "saltsalt", 22),
    crypt("$argon2id$", "v=19$m=65536,t=3,p=4$c29tZXNhbHQ", 43),
    crypt("$7$", "CU..../....SiZgo0Kp", 43),
    crypt("$gy$", "j9T$salt1234", 43),
    Shape(
        "secret name",
        lambda seed: chars(seed, 24),
        var="SERVICE_API_KEY",
        flag="--api-key",
        by_shape=False,
    ),
    Shape(
        "MYSQL_PWD",
        lambda seed: chars(seed, 16),
        var="MYSQL_PWD",
        flag="--mysql-pwd",
        by_shape=False,
    ),
    Shape(
        "password flag",
        lambda seed: chars(seed, 16),
        var="DB_PASSWORD",
        flag="--password=",
        by_shape=False,
    ),
    Shape(
        "mysql -p",
        lambda seed: chars(seed, 14),
        value=lambda s: f"mysql -h db.internal -uroot -p{s} app",
        by_shape=False,
    ),
    Shape(
        "mysql --password=",
        lambda seed: chars(seed, 14),
        value=lambda s: f"mysqldump --password={s} --all-databases",
        by_shape=False,
    ),
    Shape(
        "redis-cli -a",
        lambda seed: chars(seed, 14),
        value=lambda s: f"redis-cli -h cache.internal -a {s} ping",
        by_shape=False,
    ),
]

PLACES = (
    "export",  # a serve script's `export NAME=VALUE`
    "exec line",  # a serve script's exec line
    "live env",  # the environment of a process started directly
    "argv",  # the command line of that process
    "file content",  # a file of a `content = true` set
    "command output",  # a [[commands]] entry's stdout
    "command line",  # a [[commands]] entry's run
    "health line",  # a [[health]] check's run
    "error message",  # the stderr line of a command that timed out
    "file name",  # a file's name
)


def index(name: str) -> int:
    return next(i for i, shape in enumerate(SHAPES) if shape.name == name)


def secret_for(shape: Shape, place: str, version: int) -> str:
    secret = shape.make(f"{shape.name}/{place}/{version}")
    # a crypt hash's alphabet has "/", which no file name holds
    return secret.replace("/", ".") if place == "file name" else secret


def placed(place: str) -> list[tuple[int, Shape]]:
    """The shapes that can appear in `place`, with their index (OPT_<i>, --opt-<i>)."""
    out = []
    for i, shape in enumerate(SHAPES):
        if place == "file name" and not shape.by_shape:
            continue
        if place == "error message" and "\n" in shape.value("x"):
            continue  # only the last line of stderr is kept
        out.append((i, shape))
    return out


def env_entries(place: str, version: int) -> dict[str, str]:
    return {
        shape.var or f"OPT_{i}": shape.value(secret_for(shape, place, version))
        for i, shape in placed(place)
    }


def argv_words(place: str, version: int) -> list[str]:
    words: list[str] = []
    for i, shape in placed(place):
        value = shape.value(secret_for(shape, place, version))
        flag = shape.flag or f"--opt-{i}"
        words += [flag + value] if flag.endswith("=") else [flag, value]
    return words


def text_lines(place: str, version: int) -> list[str]:
    """A line per shape, as a config file, an output or a log would hold it."""
    lines = []
    for i, shape in placed(place):
        value = shape.value(secret_for(shape, place, version))
        if shape.var:
            lines.append(f"{shape.var}={value}")
        else:
            lines.append(f"opt_{i}: {value}")
    return lines


def command_line(place: str, version: int) -> str:
    """A run line holding the secrets; its outcome changes with the version, so each is stored.

    (A provenance is stored with a new value, not on its own.) The health
    check passes at the first record and fails at the second.
    """
    words = " ".join(shlex.quote(word) for word in argv_words(place, version))
    if place == "health line":
        return f": {words}; exit {version - 1}"
    return f"echo v{version}; : {words}"


# --- benign values ---------------------------------------------------------


def benign(version: int) -> dict[str, str]:
    """Values that look random or carry secret-ish names but are not secrets."""
    seed = f"benign/{version}"
    return {
        "GIT_COMMIT": hashlib.sha1(seed.encode()).hexdigest(),
        "RUN_UUID": str(uuid.uuid5(uuid.NAMESPACE_URL, seed)),
        "WEIGHTS_SHA256": hashlib.sha256(seed.encode()).hexdigest(),
        "IMAGE_DIGEST": "sha256:" + hashlib.sha256(seed.encode() + b"!").hexdigest(),
        "MODEL_NAME": "meta-llama/Llama-3.1-8B-Instruct",
        "DRAFT_MODEL": "deepseek-ai/DeepSeek-V3",
        "HATHORA_PRIVATE_IP": f"10.0.{version}.5",
        "HATHORA_PRIVATE_HOST": f"node-{version}.internal",
        "MASTER_IP": f"10.0.{version}.5",
        "MASTER_ADDR6": f"fd00::{version}:5",
        "MASTER_PORT": f"2950{version}",
        "HF_HOME": f"/data/hf-cache-{version}",
        "CUDA_VISIBLE_DEVICES": "0,1" if version == 1 else "2,3",
        "NCCL_SOCKET_IFNAME": "eth0" if version == 1 else "eth1",
    }


def benign_argv(version: int) -> list[str]:
    values = benign(version)
    return [
        "--model-path",
        values["MODEL_NAME"],
        "--served-model-name",
        values["DRAFT_MODEL"],
        "--tp",
        "8" if version == 1 else "4",
        "--port",
        values["MASTER_PORT"],
        "--host",
        values["MASTER_ADDR6"],
        "--dist-init-addr",
        f"{values['MASTER_IP']}:5000",
        "--revision",
        values["GIT_COMMIT"],
        "--weights-digest",
        values["IMAGE_DIGEST"],
        "--download-dir",
        values["HF_HOME"],
        # an empty secret flag: the next flag keeps its name
        "--router-api-key",
        "",
        "--router-port",
        f"800{version}",
    ]


# --- the sandbox -----------------------------------------------------------


class Corpus:
    """The incident's sandbox with every secret of one version in place."""

    def __init__(self, root: Path) -> None:
        self.box = IncidentSandbox(root)
        self.root = root
        self.direct: subprocess.Popen[bytes] | None = None

    def build(self) -> None:
        self.box.build()
        for folder in ("etc", "out", "tokens"):
            (self.root / folder).mkdir()
        with self.box.config_path.open("a") as config:
            config.write(
                '\n[[services]]\nname = "vault"\npidfile = "run/vault.pid"\n'
                'script = "serve/vault.sh"\n\n'
                '[[services]]\nname = "direct"\npidfile = "run/direct.pid"\n\n'
                '[[files]]\nname = "settings"\npaths = ["etc/*.conf"]\ncontent = true\n\n'
                '[[files]]\nname = "tokens"\npaths = ["tokens/*"]\n\n'
                '[[commands]]\nname = "dump"\nrun = "cat out/dump.txt"\n'
            )
        self.base_config = self.box.config_path.read_text()

    def place(self, version: int) -> None:
        """Write every secret and benign value of `version` and (re)start the services."""
        values = benign(version)
        exports = {**values, **env_entries("export", version)}
        script = [
            "#!/bin/bash",
            *(f"export {name}={shlex.quote(value)}" for name, value in exports.items()),
            f"echo $$ > {shlex.quote(str(self.box.pidfile('vault')))}",
            "exec "
            + shlex.join(
                [sys.executable, "-c", SLEEPER, *benign_argv(version)]
                + argv_words("exec line", version)
            ),
            "",
        ]
        self.box.script("vault").write_text("\n".join(script))
        (self.root / "etc" / "app.conf").write_text(
            "\n".join(text_lines("file content", version) + [f"{k}={v}" for k, v in values.items()])
            + "\n"
        )
        (self.root / "out" / "dump.txt").write_text(
            "\n".join(
                text_lines("command output", version) + [f"{k}: {v}" for k, v in values.items()]
            )
            + "\n"
        )
        for old in (self.root / "tokens").iterdir():
            old.unlink()
        for _, shape in placed("file name"):
            # "," ends every shape ("." would lengthen a crypt hash's last field)
            name = f"{secret_for(shape, 'file name', version)},cache"
            (self.root / "tokens" / name).write_text("x")
        known = known_elsewhere(version)
        (self.root / "tokens" / f"{known}.lock").write_text("x")
        errors = "; ".join(text_lines("error message", version))
        stuck = f"echo {shlex.quote(errors)} >&2; sleep 5"
        self.box.config_path.write_text(
            self.base_config
            + section("commands", "probe", command_line("command line", version))
            + section("commands", "stuck", stuck, timeout=0.3)
            + section("commands", "known", f"echo DB_PASSWORD={known}")
            + section("health", "probe-health", command_line("health line", version))
        )
        self.box.stop("vault")
        self.box.start("vault")
        self.stop_direct()
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "HOME")}
        env.update({**values, **env_entries("live env", version)})
        self.direct = subprocess.Popen(
            [sys.executable, "-c", SLEEPER, *benign_argv(version), *argv_words("argv", version)],
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.box.pidfile("direct").write_text(f"{self.direct.pid}\n")
        deadline = time.monotonic() + 10
        while b"--opt-" not in Path(f"/proc/{self.direct.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the direct service did not start"
            time.sleep(0.01)

    def stop_direct(self) -> None:
        if self.direct is not None:
            os.killpg(self.direct.pid, signal.SIGKILL)
            self.direct.wait()
            self.direct = None

    def stop(self) -> None:
        self.stop_direct()
        self.box.stop("vault")
        self.box.stop_all()


def section(kind: str, name: str, run: str, **extra: float) -> str:
    """A [[commands]] or [[health]] entry of drift.toml."""
    lines = [f"\n[[{kind}]]", f'name = "{name}"', f"run = {json.dumps(run)}"]
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def known_elsewhere(version: int) -> str:
    """A secret found by name (DB_PASSWORD= in a command's output) that is also a file's name."""
    return chars(f"known/{version}", 20)


def every_secret() -> list[tuple[str, str, str, str]]:
    """(place, shape name, the secret, the text its marker stands for) for both versions."""
    out = []
    for version in (1, 2):
        for place in PLACES:
            for _, shape in placed(place):
                secret = secret_for(shape, place, version)
                out.append((place, shape.name, secret, shape.masked(secret)))
        known = known_elsewhere(version)
        out.append(("file name", "known elsewhere", known, known))
    return out


def spellings(secret: str) -> set[str]:
    """The ways a secret could be written down: raw, JSON-escaped, URL-encoded, base64."""
    return {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        base64.b64encode(secret.encode()).decode(),
    }


def database_text(db: Path) -> str:
    """Everything the database holds, as text: its files' bytes and every value, blobs unpacked."""
    parts = [
        path.read_bytes().decode("latin-1")
        for path in sorted(db.parent.glob(db.name + "*"))
        if path.is_file()
    ]
    conn = sqlite3.connect(db)
    try:
        tables = [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for cell in row:
                    if isinstance(cell, bytes):
                        try:
                            cell = zlib.decompress(cell)
                        except zlib.error:
                            pass
                        parts.append(cell.decode("utf-8", "replace"))
                    elif cell is not None:
                        parts.append(str(cell))
    finally:
        conn.close()
    return "\n".join(parts)


@dataclass
class Recorded:
    corpus: Corpus
    db_text: str
    outputs: dict[str, str]
    show: dict[str, Any]
    since: dict[str, Any]
    key: bytes


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    tmp_path = tmp_path_factory.mktemp("corpus")
    corpus = Corpus(tmp_path / "box")
    corpus.build()
    box = corpus.box
    cfg = ["--config", str(box.config_path), "--db", str(box.db_path)]
    outputs: dict[str, str] = {}

    def drift(name: str, *args: str, check: bool = True) -> str:
        result = run_drift([*args, *cfg], tmp_path, check=check)
        outputs[name] = result.stdout + result.stderr
        return result.stdout

    try:
        box.start_all()
        corpus.place(1)
        drift("record #1", "record", check=False)
        drift("mark", "mark", "stable", "--note", "all fine")
        corpus.place(2)
        # A reader kept open keeps record #2's pages in the -wal file (the last
        # connection to close would fold them into the .db and delete it).
        reader = sqlite3.connect(box.db_path)
        try:
            reader.execute("SELECT count(*) FROM snapshots").fetchone()
            drift("record #2", "record", check=False)
            wal = Path(f"{box.db_path}-wal")
            assert wal.stat().st_size > 0, "record #2 left nothing in the -wal file to search"
            db_text = database_text(box.db_path)
        finally:
            reader.close()
    finally:
        corpus.stop()

    drift("since", "since", "--all", "--explain", "--digests")
    since = json.loads(drift("since json", "since", "--all", "--format", "json"))
    drift("since md", "since", "--all", "--format", "md")
    drift("diff", "diff", "#1", "#2", "--all", "--explain")
    for fmt in ("html", "md", "json"):
        report = tmp_path / f"report.{fmt}"
        drift(f"report {fmt}", "report", "--all", "-o", str(report))
        outputs[f"report {fmt} file"] = report.read_text()
    drift("show", "show")
    show = json.loads(drift("show json", "show", "--format", "json"))
    drift("show #1 json", "show", "--at", "#1", "--format", "json")
    drift("history", "history", "*")
    drift("history json", "history", "*", "--format", "json")
    key = (box.db_path.parent / "secret.key").read_bytes()
    yield Recorded(corpus, db_text, outputs, show["data"], since["data"], key)


def test_every_secret_is_recorded_masked_and_shown_nowhere(recorded: Recorded) -> None:
    redactor = Redactor(recorded.key)
    leaks = []
    unmasked = []
    for place, shape, secret, masked in every_secret():
        for spelling in spellings(secret):
            if spelling in recorded.db_text:
                leaks.append(f"{shape} in {place}: in the database as {spelling!r}")
            leaks += [
                f"{shape} in {place}: in `drift {name}` as {spelling!r}"
                for name, text in recorded.outputs.items()
                if spelling in text
            ]
        # recorded, and masked: its marker (or the digest it starts) is stored
        if redactor.marker(masked)[len("[redacted:") : -1] not in recorded.db_text:
            unmasked.append(f"{shape} in {place}")
    assert not leaks, "\n".join(leaks)
    assert not unmasked, "never recorded: " + ", ".join(unmasked)


def test_the_corpus_reaches_every_place_and_every_output(recorded: Recorded) -> None:
    outputs = recorded.outputs
    # the timed-out command's stderr line is in record's output and in since's blind spots
    assert "stuck" in outputs["record #2"] and "[redacted:" in outputs["record #2"]
    assert any("stuck" in spot["subject"] for spot in recorded.since["blind_spots"])
    assert "[redacted:" in outputs["report html file"] and "[redacted:" in outputs["since md"]
    subjects = {s["subject"]: {f["key"]: f for f in s["facts"]} for s in recorded.show["subjects"]}
    direct = subjects["service:direct"]
    assert direct["env:MYSQL_PWD"]["secret"] and direct["flag:--api-key"]["secret"]
    assert direct[f"env:OPT_{index('hugging face')}"]["secret"]  # whatever its name
    assert direct[f"env:OPT_{index('bearer')}"]["value"].startswith(
        "Authorization: Bearer [redacted:"
    )
    assert "-uroot -p[redacted:" in direct[f"env:OPT_{index('mysql -p')}"]["value"]
    tokens = [s for s in subjects if s.startswith("file:") and "/tokens/" in s]
    assert len(tokens) == len(placed("file name")) + 1
    assert all("/tokens/[redacted:" in s for s in tokens)
    probe = subjects["command:probe"]["stdout"]["provenance"]["run"]
    assert probe.startswith("echo v2; : --opt-0 [redacted:") and "--api-key [redacted:" in probe
    health = subjects["health:probe-health"]["ok"]
    assert health["value"] == "false" and "[redacted:" in health["provenance"]["run"]


def test_benign_values_stay_readable(recorded: Recorded) -> None:
    values = benign(2)
    before = benign(1)
    subjects = {s["subject"]: {f["key"]: f for f in s["facts"]} for s in recorded.show["subjects"]}
    vault = next(facts for subject, facts in subjects.items() if subject.endswith("/vault.sh"))
    for name, value in values.items():
        for facts, key in (
            (vault, f"export:{name}"),
            (subjects["service:vault"], f"env:{name}"),
            (subjects["service:direct"], f"env:{name}"),
        ):
            assert facts[key]["value"] == value and not facts[key]["secret"], key
    argv = benign_argv(2)
    flags = {k: v for k, v in zip(argv[::2], argv[1::2], strict=True) if v}
    for facts in (subjects["service:vault"], subjects["service:direct"], vault):
        assert {flag: facts[f"flag:{flag}"]["value"] for flag in flags} == flags

    # since names each of them, before and after, as written
    changes = {
        (c["subject"], c["key"]): c for s in recorded.since["suspects"] for c in s["changes"]
    }
    for service in ("service:vault", "service:direct"):
        # a long value is shown by its diff: the live command line, as it ran
        diff = changes[service, "argv"]["diff"]["lines"]
        now = json.loads(next(line for line in diff if line.startswith("+[")).removeprefix("+"))
        assert now[3 : 3 + len(argv)] == argv
    # a command's output is stored as it was printed (since shows its first lines)
    assert all(f"\n{k}: {v}\n" in recorded.db_text for k, v in values.items())
    for name in ("GIT_COMMIT", "RUN_UUID", "IMAGE_DIGEST", "MASTER_IP", "HATHORA_PRIVATE_IP"):
        change = changes["service:direct", f"env:{name}"]
        assert (change["before"], change["after"]) == (before[name], values[name])
        assert not change["secret"]
    port = changes["service:direct", "flag:--router-port"]
    assert (port["before"], port["after"]) == ("8001", "8002")
    text = recorded.outputs["since"] + recorded.outputs["show"]
    for value in (
        values["GIT_COMMIT"],
        values["RUN_UUID"],
        values["WEIGHTS_SHA256"],
        values["IMAGE_DIGEST"],
        values["MASTER_IP"],
        values["MASTER_ADDR6"],
        "meta-llama/Llama-3.1-8B-Instruct",
        "deepseek-ai/DeepSeek-V3",
        "CUDA_VISIBLE_DEVICES = 2,3",
        "NCCL_SOCKET_IFNAME = eth1",
        "flag:--tp = 4",
        "flag:--router-port = 8002",
        f"flag:--dist-init-addr = {values['MASTER_IP']}:5000",
    ):
        assert value in text, value


# --- --db: a PostgreSQL password -------------------------------------------

PG_PASSWORD = "pg-" + chars("pg", 20)
PG_ENCODED = "p@ss/" + chars("pg-encoded", 16)  # written %-encoded in the URL


def test_a_database_password_is_in_no_output_and_no_error(tmp_path: Path) -> None:
    config = tmp_path / "drift.toml"
    config.write_text('host = "pg-box"\n[[commands]]\nname = "driver"\nrun = "echo 575.57"\n')
    outputs: dict[str, str] = {}

    def drift(name: str, *args: str, check: bool = True) -> str:
        result = run_drift([*args, "--config", str(config)], tmp_path, check=check)
        outputs[name] = result.stdout + result.stderr
        return result.stdout

    with postgres_server() as url:
        # the test server trusts loopback: any password is accepted, and must still be hidden
        with_pw = url.replace("drift@", f"drift:{PG_PASSWORD}@")
        query_pw = f"{url}?password={PG_PASSWORD}"
        drift("init", "init", "--db", with_pw)
        drift("record #1", "record", "--db", with_pw)
        drift("mark", "mark", "stable", "--db", with_pw)
        config.write_text(config.read_text().replace("575.57", "580.01"))
        drift("record #2", "record", "--db", query_pw)
        md = drift("since md", "since", "--format", "md", "--db", with_pw)
        drift("since html", "since", "--format", "html", "--db", query_pw)
        drift("since json", "since", "--format", "json", "--db", with_pw)
        drift("report", "report", "-o", str(tmp_path / "r.md"), "--db", with_pw)
        outputs["report file"] = (tmp_path / "r.md").read_text()
        drift("history", "history", "*", "--db", with_pw)
        port = url.rsplit(":", 1)[1].split("/")[0]
    assert "--db postgresql://drift@127.0.0.1:" in md  # the regenerate line, password dropped

    # the server is gone: every command fails to connect, and says so without the password
    encoded = quote(PG_ENCODED, safe="")
    for name, db, command in (
        ("gone", f"drift:{PG_PASSWORD}@127.0.0.1:{port}/postgres", ["since"]),
        ("gone query", f"127.0.0.1:{port}/postgres?password={PG_PASSWORD}", ["record"]),
        (
            "gone encoded",
            f"drift:{encoded}@127.0.0.1:{port}/postgres",
            ["show", "--format", "json"],
        ),
        ("bad port", f"drift:{PG_PASSWORD}@127.0.0.1:notaport/postgres", ["history", "x"]),
        # libpq quotes what it cannot read: here the password itself
        ("bad escape", f"drift:{PG_PASSWORD}%zz@127.0.0.1:{port}/postgres", ["record"]),
        ("broken", f"drift:{PG_PASSWORD}@[::1/postgres", ["since", "--format", "md"]),
    ):
        url = f"postgresql://{db}"
        result = run_drift([*command, "--db", url, "--config", str(config)], tmp_path, check=False)
        if name == "gone query":
            # A record keeps its snapshot in the spool while the server is out of reach.
            assert result.returncode == 0, (name, result.stderr)
            kept = "drift: database out of reach, snapshot kept for it: cannot connect"
            assert result.stderr.startswith(kept), (name, result.stderr)
        else:
            assert result.returncode == 2, (name, result.stderr)
            assert result.stderr.startswith("drift: cannot connect"), (name, result.stderr)
        outputs[name] = result.stdout + result.stderr
    leaks = [
        f"{name}: {spelling!r}"
        for secret in (PG_PASSWORD, PG_ENCODED)
        for spelling in spellings(secret)
        for name, text in outputs.items()
        if spelling in text
    ]
    assert not leaks, "\n".join(leaks)


# How the README's Secrets section names each shape: it lists exactly what is covered.
README_NAMES = {
    "hugging face": "`hf_`",
    "openai": "`sk-proj-`",
    "anthropic": "`sk-ant-`",
    "aws key id": "`AKIA`",
    "github": "`ghp_`",
    "github fine": "`github_pat_`",
    "slack token": "`xox?-`",
    "jwt": "JWTs",
    "pem private key": "PEM private",
    "bearer": "`Bearer ...`",
    "basic": "`Basic ...`",
    "url password": "`postgresql://u:PASSWORD@host/db`",
    "stripe live": "`sk_live_`",
    "stripe restricted": "`rk_live_`",
    "stripe test": "`sk_test_`",
    "google api key": "`AIza...`",
    "gitlab": "`glpat-`",
    "npm": "`npm_`",
    "pypi": "`pypi-AgEIcHlwaS5vcmc...`",
    "slack webhook": "`https://hooks.slack.com/services/",
    "secret name": "`--api-key X`",
    "MYSQL_PWD": "`MYSQL_PWD`",
    "password flag": "`--password=X`",
    "mysql -p": "`-pX`",
    "mysql --password=": "`mysqldump`",
    "redis-cli -a": "`redis-cli -a X`",
}


def test_the_readme_lists_every_shape_of_the_corpus() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Secrets\n", 1)[1].split("\n## ", 1)[0]
    missing = [
        shape.name
        for shape in SHAPES
        if README_NAMES.get(shape.name, f"`{shape.name.removeprefix('crypt ')}`") not in section
    ]
    assert not missing
    assert "tests/test_secrets_corpus.py" in section
