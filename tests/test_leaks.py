"""No secret reaches the database, a report or the terminal, in whole or in part.

A box is seeded with known secrets where each collector reads: a running
service's environment and command line, a file's content and name, a
command's output, an endpoint's answer (in the shapes only its structure
names: a flag before it, a "name" beside it, JSON inside a JSON string, a
signed URL, a redirect, a body that is not JSON), and a Python
distribution's direct_url.json (a URL's password, a token as a URL's user).
The real `drift` records each collector on its own; the database file's
bytes (its blobs decompressed) are then searched for every secret and every
10-character piece of one, as are `drift show` and `drift since`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_drift
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_server import JsonServer, json_server
from python_dists import make_venv

from drift.collectors.endpoints import leaf_text
from drift.collectors.env_file import parse_env_file
from drift.collectors.journal import LINE_CHARS
from drift.facts import Fact
from drift.json_pointer import leaves
from drift.secrets.redactor import Redactor

KEY = b"k" * 32
PIECE = 10  # a secret's piece this long is a leak too

# Each is random-looking and unique, so any 10 characters of one name it alone.
ENV_SECRET = "EnvQz7Kp2Wm9Xv4Lr8Tn"
ARGV_SECRET = "ArgvHt5Bd8Jc3Ng6Fs1Y"
FILE_SECRET = "FileRw2Pz9Kq7Lm4Vx8C"
OUTPUT_SECRET = "OutpMn3Xb6Qw1Ej9Zk5H"
FLAG_SECRET = "FlagVs8Nd2Ly5Gt7Cr4P"
K8S_SECRET = "KubeJp4Wf9Hx2Ra6Um3D"
NESTED_SECRET = "NestZc7Lq1Tb5Ko8Yd2G"
SHORT_NESTED = "Vq8w"  # a secret under six characters, masked where its structure names it
AMZ_SECRET = "AmzsGk9Vp3Rw7Fh2Ms6J"
REDIRECT_SECRET = "RedrXn4Cj8Pe1Wq5Lb9T"
HYPHEN_SECRET = "HyphBt6Mz2Vk8Dg4Qr7N"
DOT_SECRET = "DotsPw3Yc9Fn5Hj1Xs6K"
BODY_TOKEN = "hf_" + "BodyQa8Wz3Ex7Rc2Tv6Yb1Un5Im9Ok4Pl"
URL_PASSWORD = "PkgpLs5Dk9Fj3Gh7Hw2Z"
URL_TOKEN = "PkgtQm8Vn2Xb6Cz4Lk7R"
BRANCH_TOKEN = "ghp_" + "BranchRv3Nx8Kq2Zm7Wt4Yc9"
HEALTH_SECRET = "HlthYp6Ds1Mv9Kb4Tq7X"
CACHE_TOKEN = "hf_" + "CacheWe2Rt7Yu4Io9Pa5Sd3Fg8Hj6Kl1Zx"
SECRETS = [
    ENV_SECRET,
    ARGV_SECRET,
    FILE_SECRET,
    OUTPUT_SECRET,
    FLAG_SECRET,
    K8S_SECRET,
    NESTED_SECRET,
    AMZ_SECRET,
    REDIRECT_SECRET,
    HYPHEN_SECRET,
    DOT_SECRET,
    BODY_TOKEN,
    URL_PASSWORD,
    URL_TOKEN,
    BRANCH_TOKEN,
    HEALTH_SECRET,
    CACHE_TOKEN,
]


def pieces(secret: str) -> set[str]:
    """The secret and every PIECE-long piece of it."""
    return {secret[i : i + PIECE] for i in range(max(1, len(secret) - PIECE + 1))} | {secret}


def leaked(data: bytes | str, secrets: list[str] = SECRETS) -> list[str]:
    """The pieces of `secrets` found in `data`."""
    text = data if isinstance(data, str) else data.decode("utf-8", "surrogateescape")
    return sorted(p for s in secrets for p in pieces(s) if p in text)


def stored_bytes(db: Path) -> bytes:
    """The database file's bytes, its journal's, and every blob decompressed."""
    data = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    with sqlite3.connect(db) as conn:
        for (content,) in conn.execute("SELECT content FROM blobs"):
            data += zlib.decompress(content)
    return data


ENDPOINT_DOC = {
    "server_args": {
        "args": ["serve", "--model", "m", "--api-key", FLAG_SECRET, "--port", "8000"],
        "env": [
            {"name": "OMP_NUM_THREADS", "value": "8"},
            {"name": "HF_HUB_TOKEN", "value": K8S_SECRET},
        ],
        "extra": json.dumps({"cfg": {"api_key": NESTED_SECRET, "db_password": SHORT_NESTED}}),
        "weights": f"https://bucket.s3.amazonaws.com/w.bin?X-Amz-Date=1&X-Amz-Signature={AMZ_SECRET}",
        "notes": f"db-password={HYPHEN_SECRET} and DB.PASSWORD={DOT_SECRET}",
        "deep": [[{"x": [{"name": "db-password", "value": {"v": [K8S_SECRET]}}]}]],
    }
}


@pytest.fixture
def server() -> Iterator[JsonServer]:
    with json_server() as s:
        yield s


class Box:
    """A seeded box: one running service, a file, a command, an endpoint, a venv's package."""

    def __init__(self, tmp_path: Path, server: JsonServer) -> None:
        self.tmp = tmp_path
        self.server = server
        self.db = tmp_path / "d.db"
        venv = tmp_path / "venv"
        self.python = make_venv(venv)
        (site,) = (venv / "lib").glob("python3*/site-packages")
        for name, url in (
            ("pwpkg", f"https://deploy:{URL_PASSWORD}@pypi.example/pwpkg-1.0.tar.gz"),
            ("tokpkg", f"https://{URL_TOKEN}@git.example/tokpkg.git"),
        ):
            (site / name).mkdir()
            (site / name / "__init__.py").write_text("")
            info = site / f"{name}-1.0.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n")
            (info / "INSTALLER").write_text("pip\n")
            vcs = {"vcs": "git", "commit_id": "0" * 40} if name == "tokpkg" else None
            direct = {"url": url, **({"vcs_info": vcs} if vcs else {"archive_info": {}})}
            (info / "direct_url.json").write_text(json.dumps(direct))
        script = tmp_path / "serve.py"
        script.write_text("import time, pwpkg, tokpkg\nwhile True:\n    time.sleep(60)\n")
        env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": ENV_SECRET}
        self.proc = subprocess.Popen(
            [str(self.python), str(script), "--db-password", ARGV_SECRET],
            env=env,
            cwd=tmp_path,
        )
        self.pidfile = tmp_path / "serve.pid"
        self.pidfile.write_text(f"{self.proc.pid}\n")
        conf = tmp_path / "conf"
        conf.mkdir()
        (conf / "app.env").write_text(f"API_TOKEN={FILE_SECRET}\n")
        repo = tmp_path / "checkout"
        repo.mkdir()
        git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q", "-b", f"deploy/{BRANCH_TOKEN}"], check=True)
        (repo / "README").write_text("x\n")
        subprocess.run([*git, "add", "README"], check=True)
        subprocess.run([*git, "commit", "-qm", "first"], check=True)
        cache = tmp_path / "cache"
        cache.mkdir()
        (cache / f"kernel-{CACHE_TOKEN}.bin").write_bytes(b"k")
        self.sections = {
            "repos": f'[[repos]]\npath = "{repo}"\n',
            "health": (f'[[health]]\nname = "ready"\nrun = "echo token={HEALTH_SECRET}; exit 1"\n'),
            "caches": f'[[caches]]\nname = "jit"\npaths = ["{cache}"]\n',
            "services": f'[[services]]\nname = "decode"\npidfile = "{self.pidfile}"\n',
            "files": f'[[files]]\nname = "conf"\npaths = ["{conf}/*"]\ncontent = true\n',
            "commands": (
                f'[[commands]]\nname = "creds"\n'
                f'run = "echo login ok; echo password: {OUTPUT_SECRET}"\n'
            ),
            "endpoints": (
                f'[[endpoints]]\nname = "engine"\nurl = "{server.url}/get_server_info"\n'
            ),
        }
        time.sleep(0.3)  # METADATA older than a timestamp's tick: its reading is cached

    def record(self, section: str) -> str:
        config = self.tmp / f"{section}.toml"
        config.write_text(f'host = "leaky"\n{self.sections[section]}')
        args = ["--config", str(config), "--db", str(self.db)]
        done = run_drift(["record", *args], self.tmp, check=False)
        assert done.returncode in (0, 4), done.stderr  # 4: a blind spot, said
        out = done.stdout + done.stderr
        out += run_drift(["show", *args], self.tmp).stdout
        out += run_drift(["show", "--format", "json", *args], self.tmp).stdout
        return out

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def box(tmp_path: Path, server: JsonServer) -> Iterator[Box]:
    server.serve(ENDPOINT_DOC)
    b = Box(tmp_path, server)
    try:
        yield b
    finally:
        b.stop()


@pytest.mark.parametrize(
    "section", ["services", "files", "commands", "endpoints", "repos", "health", "caches"]
)
def test_no_piece_of_a_seeded_secret_is_in_the_database_file_after_each_collector(
    box: Box, section: str
) -> None:
    shown = box.record(section)
    shown += box.record(section)  # the second record reads through the stat cache
    assert leaked(stored_bytes(box.db)) == []
    assert leaked(shown) == []


def test_a_mark_s_note_is_stored_with_its_secrets_masked(box: Box) -> None:
    """An operator pastes what they saw into a note: the note reaches the database masked."""
    box.record("files")
    config = ["--config", str(box.tmp / "files.toml"), "--db", str(box.db)]
    note = f"rotated: HF_TOKEN={ENV_SECRET}, new one {BODY_TOKEN}"
    said = run_drift(["mark", "stable", "--note", note, *config], box.tmp).stdout
    time.sleep(1.1)  # the next record a second after the mark
    said += box.record("files")
    shown = said + run_drift(["since", "--format", "json", *config], box.tmp).stdout
    assert "rotated: HF_TOKEN=[redacted:" in shown
    assert "rotated: HF_TOKEN=[redacted:" in stored_bytes(box.db).decode("utf-8", "replace")
    assert leaked(stored_bytes(box.db)) == []
    assert leaked(shown) == []


def test_a_package_source_url_s_password_or_token_user_is_nowhere_stat_cache_included(
    box: Box,
) -> None:
    """direct_url.json of a running service's distributions: a URL with a password and a
    URL whose user is a token (https://TOKEN@host); the stat cache row of METADATA is where
    the first one was kept in plain text."""
    shown = box.record("services")
    assert "package_source:pwpkg" in shown and "package_source:tokpkg" in shown
    assert "pypi.example" in shown and "git.example" in shown
    shown += box.record("services")
    assert leaked(stored_bytes(box.db), [URL_PASSWORD, URL_TOKEN]) == []
    assert leaked(shown, [URL_PASSWORD, URL_TOKEN]) == []


def test_an_endpoint_s_secrets_named_by_structure_redirect_and_excerpt_are_never_stored(
    box: Box,
) -> None:
    shown = box.record("endpoints")
    # the leaves beside them stay readable
    assert "OMP_NUM_THREADS" in shown and '"--api-key"' in shown and "X-Amz-Date=1" in shown
    # a redirect to another host, signed: a blind spot whose message names the URL
    box.server.redirect = f"http://other.example/x?X-Amz-Signature={REDIRECT_SECRET}&a=1"
    shown += box.record("endpoints")
    assert "other.example" in shown
    # a body that is not JSON, a token across its first 40 bytes
    box.server.redirect = None
    box.server.body = f"error from upstream: {BODY_TOKEN} trailing".encode()
    shown += box.record("endpoints")
    assert "not JSON" in shown and "starts 'error from upstream: " in shown
    assert leaked(stored_bytes(box.db)) == []
    assert leaked(shown) == []
    assert SHORT_NESTED.encode() not in stored_bytes(box.db) and SHORT_NESTED not in shown


def envfile_items(path: Path) -> list:
    """What the unit collector reads from `path` as a unit's one EnvironmentFile=."""
    from drift.collectors.systemd import UnitState
    from drift.collectors.unit_sources import _envfiles
    from drift.rooted import HOST

    state = UnitState(
        "app.service",
        "loaded",
        "active",
        1,
        None,
        None,
        {},
        ((str(path), False),),
        (),
        "",
        (),
        False,
    )
    return list(_envfiles("service:app", state, HOST, ("systemctl",)))


def test_an_env_file_line_systemd_ignores_and_a_multi_line_value_keep_no_secret(
    tmp_path: Path,
) -> None:
    """A unit's EnvironmentFile read by the collector from a real file, then redacted:
    what systemd drops (DB-PASSWORD=, db.password=) keeps its name only, and the first
    line of a secret's quoted multi-line value is masked in its provenance text."""

    path = tmp_path / "app.env"
    path.write_text(
        f"DB-PASSWORD={HYPHEN_SECRET}\n"
        f"db.password = {DOT_SECRET} and more\n"
        f'DB_PASSWORD="{NESTED_SECRET}\nsecond line"\n'
        "export PLAIN=1\n"
    )
    found = envfile_items(path)
    stored = Redactor(KEY).redact(found)
    assert leaked(repr(stored), [HYPHEN_SECRET, DOT_SECRET, NESTED_SECRET]) == []
    ignored = next(f for f in stored if isinstance(f, Fact) and f.key == "unit:envfile_ignored")
    lines = ignored.value.split("\n")
    assert [line.split(": ", 1)[1].split("=")[0] for line in lines] == [
        "DB-PASSWORD",
        "db.password",
        "export PLAIN",
    ]
    assert lines[2] == f"{path}:5: export PLAIN=…"


def journal_line(message: str) -> str:
    """A journal entry as journalctl -o json writes it, read as the journal collector reads it."""
    from drift.collectors.journal import _entry

    raw = {
        "_SYSTEMD_INVOCATION_ID": "0123456789abcdef0123456789abcdef",
        "__REALTIME_TIMESTAMP": "1700000000000000",
        "SYSLOG_IDENTIFIER": "python3",
        "_PID": "42",
        "MESSAGE": message,
    }
    entry = _entry(json.dumps(raw).encode())
    assert entry is not None
    return entry.line


@settings(max_examples=200, deadline=2000)
@given(
    st.integers(0, 40),
    st.sampled_from([BODY_TOKEN, f"password={ENV_SECRET}", f"https://u:{URL_PASSWORD}@h/"]),
)
def test_fuzz_a_journal_line_cut_at_its_limit_keeps_no_part_of_a_secret(
    before_cut: int, secret_text: str
) -> None:
    """A secret written across the journal line's cut (at LINE_CHARS): what is stored of the
    line, once redacted as the record redacts it, holds no piece of it."""
    message = "x" * (LINE_CHARS - before_cut) + " " + secret_text + " tail"
    line = journal_line(message)
    message_kept = line.split(": ", 1)[1]
    assert len(message_kept) <= LINE_CHARS  # the line is still cut at its limit
    fact = Fact("service:decode", "unit:journal", line, {})
    (stored,) = Redactor(KEY).redact([fact])
    assert leaked(repr(stored)) == []


def test_cut_never_keeps_part_of_a_token() -> None:
    from drift.secrets.shapes import cut

    line = "x" * (LINE_CHARS - 20) + " token " + BODY_TOKEN
    kept = cut(line, LINE_CHARS)
    assert len(kept) <= LINE_CHARS and leaked(kept, [BODY_TOKEN]) == []
    assert kept.endswith(" token [redacted]...")
    assert cut("short", 40) == "short"
    assert cut("hello world configuration " * 4, 30).startswith("hello world configuration")


# --- fuzz: hostile documents and environment files --------------------------

NAMES = st.sampled_from(["api_key", "HF_HUB_TOKEN", "db-password", "DB.PASSWORD", "secret"])
SECRET_VALUES = st.text(
    alphabet="ABCDEFGHJKMNPQRSTVWXYZabcdefghjkmnpqrstvwxyz23456789", min_size=12, max_size=30
)
SCALARS = st.one_of(
    st.integers(), st.booleans(), st.none(), st.text(alphabet='abc xyz-/:.={}[]\\"', max_size=12)
)
FILLER = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["name", "key", "value", "args", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def hostile_documents(draw: st.DrawFn) -> tuple[object, str]:
    """A document with one secret placed where only its structure names it, at any depth."""
    secret = draw(SECRET_VALUES)
    name = draw(NAMES)
    shape = draw(st.sampled_from(["flag", "k8s", "key", "nested", "text"]))
    if shape == "flag":
        held: object = [draw(FILLER), f"--{name}", secret, draw(FILLER)]
    elif shape == "k8s":
        held = [{"name": name, "value": secret, "other": draw(FILLER)}]
    elif shape == "key":
        held = {name: {"deeper": [secret]}}
    elif shape == "nested":
        held = json.dumps({"outer": json.dumps({name: secret})})
    else:
        held = f"{draw(FILLER)} {name}={secret} {draw(FILLER)}"
    for _ in range(draw(st.integers(0, 6)) + draw(st.sampled_from([0, 0, 0, 200]))):
        wrap = draw(st.sampled_from(["list", "dict"]))
        held = [draw(FILLER), held] if wrap == "list" else {"k": held, "f": draw(FILLER)}
    return held, secret


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_documents())
def test_fuzz_no_secret_a_document_s_structure_names_survives_its_flattening(
    case: tuple[object, str],
) -> None:
    document, secret = case
    facts = [
        Fact("endpoint:e", "json:" + pointer, leaf_text(leaf), {"url": "http://127.0.0.1/"})
        for pointer, leaf in leaves(document)
    ]
    stored = Redactor(KEY).redact(facts)
    assert all(secret not in repr(item) for item in stored), stored


ENV_NAMES = st.sampled_from(["DB-PASSWORD", "db.password", "API_TOKEN", "export DB_PASS", "my key"])


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(
    ENV_NAMES,
    SECRET_VALUES,
    st.sampled_from(["{}", '"{}"', "'{}'", '"first\n{}"', "'{}\nlast'", "{} more words"]),
    st.text(alphabet="AB_ =#\n'\"\\x", max_size=30),
)
def test_fuzz_no_secret_of_an_env_file_survives_its_reading(
    name: str, secret: str, quoting: str, noise: str
) -> None:
    text = f"{noise}\n{name}={quoting.format(secret)}\n"
    parsed = parse_env_file(text.encode(), "/etc/app.env")
    facts = [
        Fact("service:x", f"unit:envfile:{a.name}", a.value, {"file": a.file, "text": a.text})
        for a in parsed.assignments
    ]
    from drift.collectors.unit_sources import ignored_lines

    if parsed.dropped:
        facts.append(Fact("service:x", "unit:envfile_ignored", ignored_lines(parsed.dropped), {}))
    stored = Redactor(KEY).redact(facts)
    for item in stored:
        for piece in pieces(secret) if len(secret) > PIECE else {secret}:
            assert piece not in repr(item), (text, stored)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=st.text(alphabet="abcdXYZ09 _-.", min_size=1, max_size=5).filter(
        lambda v: v.strip() == v and v.strip()
    ),
    name=st.sampled_from(["DB_PASSWORD", "API_TOKEN", "PASSWORD", "HF_TOKEN"]),
)
def test_a_short_secret_is_masked_whole_on_the_line_that_assigned_it(
    tmp_path: Path, value: str, name: str
) -> None:
    """`DB_PASSWORD=ab cd` in an EnvironmentFile: a value too short to search for elsewhere
    is masked whole in its own line's text, blanks and all, not up to its first blank."""

    path = tmp_path / "short.env"
    path.write_text(f"# the service's password\n{name}={value}\n")
    stored = Redactor(KEY).redact(envfile_items(path))
    [fact] = [f for f in stored if isinstance(f, Fact) and f.key == f"unit:envfile:{name}"]
    assert fact.secret
    text = fact.provenance["text"]
    assert re.fullmatch(rf"{name}=\[redacted:[0-9a-f]{{8}}\]", text), text
