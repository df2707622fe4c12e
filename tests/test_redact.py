"""Secrets never reach the database, the terminal or a report in plain text."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from drift.config import SecretsSpec
from drift.errors import ConfigError
from drift.facts import Fact
from drift.secrets.markers import ALREADY_REDACTED, shown_secret
from drift.secrets.redactor import Redactor, load_or_create_key
from drift.secrets.shapes import context_spans, looks_like_token, scan_shapes, tool_passwords

KEY = b"k" * 32
HF = "hf_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb"
OPENAI = "sk-proj-" + "T3stKeyF0rDr1ftRedact10nX"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZWNvZGUifQ.c2lnbmF0dXJlLWJ5dGVz"
DB_PASSWORD = "pg-S3cret!pw"
MARKER = re.compile(r"\[redacted:[0-9a-f]{8}\]")
DIGEST = re.compile(r"hmac-sha256:[0-9a-f]{32}")


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(KEY)


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "hf_token",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "PASSWORD",
        "DB_PASS",
        "PASSPHRASE",
        "MYSQL_PASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "AUTHORIZATION",
        "SESSION_COOKIE",
        "WEBHOOK_SIGNATURE",
        "PRIVATE_KEY_PATH",
        "SENTRY_DSN",
        "API_TOKENS",
        "apiKey",
        "--api-key",
        "--token",
        "--password",
        "--hf-token",
        "--db-dsn",
        "-token",
        "MYSQL_PWD",
        "DB_PWD",
        "PRIVATE_KEY",
        "SSH_PRIVATEKEY",
        "CLIENT_SECRET",
        "GITLAB_PRIVATE_TOKEN",
        "AWS_CREDS",
        "OAUTH_CLIENT",
        "--router-api-key",
    ],
)
def test_secret_names(redactor: Redactor, name: str) -> None:
    assert redactor.is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "PATH",
        "HOME",
        "PWD",
        "OLDPWD",
        "CUDA_VISIBLE_DEVICES",
        "SGLANG_SM120_MMA_TARGET_CTAS",
        "--cuda-graph-max-bs",
        "--tp-size",
        "--disaggregation-mode",
        "--model-path",
        # documented choices: not secrets although they contain a secret word
        "KEYBOARD",
        "XKB_KEYMAP",
        "GIT_AUTHOR_NAME",
        "TOKENIZERS_PARALLELISM",
        "--tokenizer-path",
        "--max-total-tokens",
        "--max-prefill-tokens",
        "SSH_AUTH_SOCK",
        "PROXY_BYPASS",
        # a secret word must be a word: PRIVATE beside IP or HOST names an address
        "HATHORA_PRIVATE_IP",
        "HATHORA_PRIVATE_HOST",
        "--private-ip",
        "MASTER_IP",
        "--dist-init-addr",
        "MONKEYPATCH_ALL",
        "CERT_AUTHORITY",
        "PASSENGER_APP_ENV",
    ],
)
def test_names_that_stay_visible(redactor: Redactor, name: str) -> None:
    assert not redactor.is_secret_name(name)


@pytest.mark.parametrize(
    "value",
    [
        HF,
        OPENAI,
        "sk-ant-api03-" + "a1B2c3D4e5F6g7H8i9J0",
        "sk-" + "x" * 20,
        "AKIAIOSFODNN7EXAMPLE",
        "ASIAIOSFODNN7EXAMPLE",
        "ghp_" + "a1" * 18,
        "gho_" + "b2" * 18,
        "github_pat_11ABCDEFG0123456789_abcdefghij",
        "xoxb-123456789012-abcdefghij",
        JWT,
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n"
        "-----END OPENSSH PRIVATE KEY-----\n",
        "Bearer abc123def456",
        "Basic dXNlcjpwYXNzd29yZA==",
        f"  {HF}\n",
        "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
        "rk_live_" + "51HbQq2eZvKYlo2C0aBcDeFg",
        "sk_test_" + "26PHem9AhJZvU623DfE1x4sd",
        "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "glpat-" + "xYz12AbC34dEf56GhI78",
        "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "pypi-AgEIcHlwaS5vcmc" + "CJGQ2Y2E5ZDk0LTJiNTItNDk1Ni1iMWQ4",
        "$6$rounds=5000$saltsaltsalt$" + "Ab1./" * 17 + "x",
        "$y$j9T$F5Jx5fExrKuPp53xLKQ..1$" + "X" * 43,
        "$5$saltsalt$" + "k" * 43,
        "$2b$12$" + "R9h/cIPz0gi.URNNX3kh2O" + "PST9/PgBkqquzi.Ss7KIUgO2t0jWMUW",
        "$2a$10$" + "N9qo8uLOickgx2ZMRZoMye" + "IjZAgcfl7p92ldGxad68LJZdL17lhWy",
        "$2y$10$" + "abcdefghijklmnopqrstuv" + "wxyz0123456789./ABCDEFGHIJKLMN",
        "$1$saltsalt$" + "qjXMvbEw8oaL.CzflDugX/",
        "$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$" + "RdescudvJCsgt3ub+b+dWRWJTmaaJObG",
        "$7$CU..../....$" + "SiZgo0KpNnlu3kxYF7rHAS5NaT1G6Oy86h9d0UsVkC8",
        "$gy$j9T$salt1234$" + "Q" * 43,
    ],
)
def test_values_in_token_formats(redactor: Redactor, value: str) -> None:
    assert redactor.looks_like_secret_value(value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "512",
        "/usr/local/bin:/usr/bin",
        "hf_short",
        "sk-short",
        "task-queue-name-for-a-long-run",
        "AKIAshort",
        "Basic configuration",
        "bearer",
        "0123456789abcdef0123456789abcdef01234567",
        "postgres://app@db/app",
        "prefix " + HF,  # inside text: masked, but not a whole secret
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        "$1$2",
        "$1$HOME/.config/drift/settings.toml",
        "$HOME/$USER",
        "https://hooks.slack.com/services/",
        "disk_live_abcdefghijklmnopqrstu",
    ],
)
def test_values_that_are_not_whole_tokens(redactor: Redactor, value: str) -> None:
    assert not redactor.looks_like_secret_value(value)


def serve_script_facts() -> list[Fact]:
    """What the collectors record for a decode service started by a serve script."""
    script = (
        "#!/bin/bash\n"
        f"export HF_TOKEN={HF}\n"
        "export SGLANG_SM120_MMA_TARGET_CTAS=512\n"
        f"export DATABASE_URL=postgres://sglang:{DB_PASSWORD}@db.internal:5432/runs\n"
        "export DB_PASS=hunter\n"
        "python3 -m sglang.launch_server --model-path /models/dsv4 --tp-size 8 \\\n"
        f"  --api-key {OPENAI} --disaggregation-mode decode --cuda-graph-max-bs 64\n"
    )
    argv = [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/dsv4",
        "--tp-size",
        "8",
        "--api-key",
        OPENAI,
        "--disaggregation-mode",
        "decode",
        "--cuda-graph-max-bs",
        "64",
        "--password=abc",
    ]
    environ = {"source": "/proc/4242/environ"}
    sha = "9f" * 32
    return [
        Fact("script:/opt/serve/decode.sh", "content", script, {"file": "/opt/serve/decode.sh"}),
        Fact(
            "script:/opt/serve/decode.sh",
            "export:HF_TOKEN",
            HF,
            {"file": "/opt/serve/decode.sh", "line": 2, "text": f"export HF_TOKEN={HF}"},
        ),
        Fact(
            "script:/opt/serve/decode.sh",
            "export:SGLANG_SM120_MMA_TARGET_CTAS",
            "512",
            {
                "file": "/opt/serve/decode.sh",
                "line": 3,
                "text": "export SGLANG_SM120_MMA_TARGET_CTAS=512",
            },
        ),
        Fact(
            "script:/opt/serve/decode.sh",
            "export:DB_PASS",
            "hunter",
            {"file": "/opt/serve/decode.sh", "line": 5, "text": "export DB_PASS=hunter"},
        ),
        Fact("service:decode", "env:HF_TOKEN", HF, environ),
        Fact("service:decode", "env:SGLANG_SM120_MMA_TARGET_CTAS", "512", environ),
        Fact("service:decode", "env:PATH", "/usr/local/bin:/usr/bin", environ),
        Fact(
            "service:decode",
            "env:DATABASE_URL",
            f"postgres://sglang:{DB_PASSWORD}@db.internal:5432/runs",
            environ,
        ),
        Fact("service:decode", "argv", json.dumps(argv)),
        Fact("service:decode", "flag:--api-key", OPENAI),
        Fact("service:decode", "flag:--password", "abc"),
        Fact("service:decode", "flag:--tp-size", "8"),
        Fact("service:decode", "flag:--cuda-graph-max-bs", "64"),
        Fact("service:decode", "flag:--disaggregation-mode", "decode"),
        Fact("service:decode", "exe", "/usr/bin/python3.11"),
        Fact(
            "service:decode",
            "unit:environment:WANDB_API_KEY",
            "wandb-0123456789",
            {"command": "systemctl show sglang-decode.service -p Environment"},
        ),
        Fact("service:decode", "unit:environment:CUDA_VISIBLE_DEVICES", "0,1,2,3"),
        Fact(
            "command:whoami-api",
            "stdout",
            f'{{"user": "decode", "session": "{JWT}"}}\n',
            {"command": "curl -s http://127.0.0.1:30000/whoami"},
        ),
        Fact("file:/opt/sglang/attn.py", "sha256", sha, {"path": "/opt/sglang/attn.py"}),
        Fact("file:/opt/sglang/attn.py", "size", "48213"),
    ]


def test_no_secret_survives_redaction(redactor: Redactor) -> None:
    out = redactor.redact_facts(serve_script_facts())
    text = repr(out)
    for secret in (HF, OPENAI, JWT, DB_PASSWORD, "hunter", 'abc"', "=abc", "wandb-0123456789"):
        assert secret not in text, secret
    by_key = {(f.subject, f.key): f for f in out}
    content = by_key["script:/opt/serve/decode.sh", "content"].value
    assert "export HF_TOKEN=[redacted:" in content
    assert "export DB_PASS=[redacted:" in content
    assert "--api-key [redacted:" in content
    assert "postgres://sglang:[redacted:" in content and "@db.internal:5432/runs" in content
    argv = json.loads(by_key["service:decode", "argv"].value)
    assert argv[8] != OPENAI and MARKER.fullmatch(argv[8])
    assert MARKER.fullmatch(argv[-1].removeprefix("--password="))
    stdout = by_key["command:whoami-api", "stdout"].value
    assert stdout.startswith('{"user": "decode", "session": "[redacted:')


def test_secret_facts_become_digests_and_the_rest_is_untouched(redactor: Redactor) -> None:
    facts = serve_script_facts()
    out = redactor.redact_facts(facts)
    secret = {(f.subject, f.key) for f in out if f.secret}
    assert secret == {
        ("script:/opt/serve/decode.sh", "export:HF_TOKEN"),
        ("script:/opt/serve/decode.sh", "export:DB_PASS"),
        ("service:decode", "env:HF_TOKEN"),
        ("service:decode", "flag:--api-key"),
        ("service:decode", "flag:--password"),
        ("service:decode", "unit:environment:WANDB_API_KEY"),
    }
    for before, after in zip(facts, out, strict=True):
        assert (after.subject, after.key) == (before.subject, before.key)
        if after.secret:
            assert DIGEST.fullmatch(after.value)
        elif before.key in {
            "export:SGLANG_SM120_MMA_TARGET_CTAS",
            "env:PATH",
            "exe",
            "sha256",
            "size",
            "unit:environment:CUDA_VISIBLE_DEVICES",
        } or before.key.startswith("flag:"):
            assert after == before and after.provenance == before.provenance
    by_key = {(f.subject, f.key): f for f in out}
    assert by_key["service:decode", "env:SGLANG_SM120_MMA_TARGET_CTAS"].value == "512"
    url = by_key["service:decode", "env:DATABASE_URL"]
    assert not url.secret and url.value.startswith("postgres://sglang:[redacted:")
    assert (
        "export SGLANG_SM120_MMA_TARGET_CTAS=512\n"
        in by_key["script:/opt/serve/decode.sh", "content"].value
    )
    export = by_key["script:/opt/serve/decode.sh", "export:HF_TOKEN"]
    assert export.provenance["line"] == 2
    assert MARKER.fullmatch(export.provenance["text"].removeprefix("export HF_TOKEN="))


def test_same_secret_reads_the_same_everywhere_and_keys_differ(redactor: Redactor) -> None:
    out = redactor.redact_facts(serve_script_facts())
    by_key = {(f.subject, f.key): f for f in out}
    assert (
        by_key["service:decode", "env:HF_TOKEN"].value
        == by_key["script:/opt/serve/decode.sh", "export:HF_TOKEN"].value
        == redactor.digest(HF)
    )
    marker = redactor.marker(OPENAI)
    assert marker in by_key["service:decode", "argv"].value
    assert marker in by_key["script:/opt/serve/decode.sh", "content"].value
    assert redactor.marker(HF) != marker

    other = Redactor(b"o" * 32).redact_facts(serve_script_facts())
    other_by_key = {(f.subject, f.key): f for f in other}
    assert (
        other_by_key["service:decode", "env:HF_TOKEN"].value
        != by_key["service:decode", "env:HF_TOKEN"].value
    )


def test_a_changed_secret_shows_as_changed_without_showing_it(redactor: Redactor) -> None:
    before = redactor.redact_facts([Fact("service:decode", "env:HF_TOKEN", HF)])
    after = redactor.redact_facts([Fact("service:decode", "env:HF_TOKEN", HF[:-1] + "Q")])
    again = redactor.redact_facts([Fact("service:decode", "env:HF_TOKEN", HF)])
    assert before[0].value != after[0].value
    assert before[0].value == again[0].value


def test_redaction_is_idempotent(redactor: Redactor) -> None:
    once = redactor.redact_facts(serve_script_facts())
    twice = Redactor(KEY).redact_facts(once)
    assert [(f.value, f.provenance, f.secret) for f in twice] == [
        (f.value, f.provenance, f.secret) for f in once
    ]


def test_a_secret_learned_from_one_fact_is_masked_in_any_text(redactor: Redactor) -> None:
    redactor.redact_facts([Fact("service:decode", "env:MY_SERVICE_PASSWORD", "correct-horse")])
    shown = redactor.mask_text("login failed for correct-horse at 12:00")
    assert shown == f"login failed for {redactor.marker('correct-horse')} at 12:00"
    # too short to mask everywhere: "1" would hide every 1 in every text
    redactor.redact_facts([Fact("service:decode", "env:SHORT_TOKEN", "1")])
    assert redactor.mask_text("port 1") == "port 1"


def test_file_hashes_are_never_masked_even_if_a_secret_matches_inside(redactor: Redactor) -> None:
    sha = "0" * 20 + "123456" + "f" * 38
    facts = [
        Fact("service:db", "env:DB_PASSWORD", "123456"),
        Fact("file:/opt/model/config.json", "sha256", sha),
    ]
    out = redactor.redact_facts(facts)
    assert out[0].secret and out[1] is facts[1]


def test_shell_references_and_bare_flags_stay_readable(redactor: Redactor) -> None:
    text = 'python3 serve.py --api-key "$API_KEY" --no-auth \\\n  --port 30000'
    assert redactor.mask_text(text) == text
    out = redactor.redact_facts([Fact("service:decode", "flag:--no-auth", "")])
    assert out[0].secret and DIGEST.fullmatch(out[0].value)


def test_config_redact_and_allow_lists() -> None:
    spec = SecretsSpec(
        redact=["INTERNAL_*_URL", "--db-url", "DB_PWD"],
        allow=["SESSION_NAME", "--ssl-keyfile", "api_key_id"],
    )
    redactor = Redactor(KEY, spec)
    assert redactor.is_secret_name("internal_billing_url")
    assert redactor.is_secret_name("--db-url") and redactor.is_secret_name("DB_PWD")
    assert not redactor.is_secret_name("SESSION_NAME")
    assert not redactor.is_secret_name("--ssl-keyfile")
    assert not redactor.is_secret_name("API_KEY_ID")
    out = redactor.redact_facts(
        [
            Fact("service:x", "env:INTERNAL_BILLING_URL", "https://billing.internal/v1"),
            Fact("service:x", "env:SESSION_NAME", "decode-7"),
            Fact("service:x", "env:API_KEY_ID", HF),  # allowed name, but a token: still hidden
            Fact("service:x", "argv", "serve --db-url mysql-host-7 --ssl-keyfile /etc/k.pem"),
        ]
    )
    assert [f.secret for f in out] == [True, False, True, False]
    assert out[1].value == "decode-7"
    assert out[3].value.startswith("serve --db-url [redacted:")
    assert out[3].value.endswith(" --ssl-keyfile /etc/k.pem")
    assert "mysql-host-7" not in repr(out)
    assert Redactor(KEY).is_secret_name("--ssl-keyfile")  # the allow list made the difference


SECRET_ALPHABET = st.characters(
    codec="utf-8", exclude_characters="[]:", exclude_categories=("Cs", "Cc")
)


@settings(max_examples=150, deadline=None)
@given(
    secret=st.text(SECRET_ALPHABET, min_size=8, max_size=40),
    before=st.text(max_size=60),
    after=st.text(max_size=60),
    repeat=st.booleans(),
)
def test_a_known_secret_never_survives_mask_text(
    secret: str, before: str, after: str, repeat: bool
) -> None:
    assume("redacted" not in secret)
    redactor = Redactor(KEY)
    redactor.redact_facts([Fact("service:x", "env:SERVICE_TOKEN", secret)])
    text = before + secret + after + (secret if repeat else "")
    assert secret not in redactor.mask_text(text)


def test_key_file_is_created_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "state" / "drift" / "secret.key"
    key = load_or_create_key(path)
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    assert load_or_create_key(path) == key
    assert load_or_create_key(tmp_path / "other.key") != key
    assert [p.name for p in path.parent.iterdir()] == ["secret.key"]  # no temp file left


def test_concurrent_first_use_agrees_on_one_key(tmp_path: Path) -> None:
    path = tmp_path / "secret.key"
    keys: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: keys.append(load_or_create_key(path))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 8 and len(set(keys)) == 1


def test_existing_key_with_loose_permissions_is_used_as_is(tmp_path: Path) -> None:
    path = tmp_path / "secret.key"
    path.write_bytes(b"x" * 32)
    path.chmod(0o644)
    assert load_or_create_key(path) == b"x" * 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_unusable_key_file_is_a_one_line_config_error(tmp_path: Path) -> None:
    folder = tmp_path / "secret.key"
    folder.mkdir()
    with pytest.raises(ConfigError, match=r"secret\.key: cannot read secret key") as exc:
        load_or_create_key(folder)
    assert "\n" not in str(exc.value)
    short = tmp_path / "short.key"
    short.write_bytes(b"")
    with pytest.raises(ConfigError, match="0 bytes, expected 32"):
        load_or_create_key(short)


def test_a_fact_block_with_keys_redaction_reads_is_redacted_fact_by_fact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blocks skip redaction only for hashes, sizes and modes; a block of any
    # other keys (a future collector's) must not carry a secret into the store.
    import drift.record
    from drift.config import load_config
    from drift.facts import FactBlock
    from drift.store.urls import resolve_db_url

    token = "hf_" + "q" * 34
    block = FactBlock(("env:HF_TOKEN", "env:MODE"), ["service:decode"], [[token], ["fast"]], [{}])
    monkeypatch.setattr(drift.record, "collect_all", lambda config, ctx, unreachable: iter([block]))
    path = tmp_path / "drift.toml"
    path.write_text(f'host = "h"\nsecret_key_file = "{tmp_path}/secret.key"\n')
    db = tmp_path / "d.db"
    result = drift.record.record(load_config(path), resolve_db_url(str(db)))
    assert result.facts == 2
    data = b"".join(p.read_bytes() for p in tmp_path.glob("d.db*"))
    assert token.encode() not in data and b"fast" in data


def test_an_empty_secret_flag_hides_nothing_else(redactor: Redactor) -> None:
    # `--router-api-key "$EMPTY" --router-port 8000` runs as two flags in a row
    argv = ["sglang_router", "--router-api-key", "--router-port", "8000", "--api-key", ""]
    facts = [
        Fact("service:router", "argv", json.dumps(argv)),
        Fact("service:router", "flag:--router-api-key", ""),
        Fact("service:router", "flag:--router-port", "8000"),
        Fact("script:/s.sh", "content", "ROUTER_API_KEY= exec sglang_router --port 8000\n"),
    ]
    out = redactor.redact_facts(facts)
    assert json.loads(out[0].value) == argv
    assert out[1].secret and out[2] == facts[2]
    assert out[3].value == facts[3].value
    assert redactor.mask_text("--router-port 8000") == "--router-port 8000"


def test_private_ip_stays_readable_wherever_it_is_copied(redactor: Redactor) -> None:
    ip = "10.42.7.19"
    facts = [
        Fact("service:decode", "env:HATHORA_PRIVATE_IP", ip),
        Fact("service:decode", "env:MASTER_IP", ip),
        Fact("service:decode", "argv", json.dumps(["sglang", "--dist-init-addr", f"{ip}:5000"])),
        Fact("service:decode", "flag:--dist-init-addr", f"{ip}:5000"),
    ]
    assert redactor.redact_facts(facts) == facts


@pytest.mark.parametrize("key", ["exit", "ok", "stdout"])
def test_command_lines_in_provenance_are_masked_for_every_fact(
    redactor: Redactor, key: str
) -> None:
    slack = "xoxb-" + "2048-4096-aBcDeFgHiJkLmNoP"
    bearer = "b3ar3rT0kenValue9f8e7d6c5b4a"
    run = (
        f"curl -s -H 'Authorization: Bearer {bearer}' "
        f"'http://127.0.0.1:30000/v1/models?token={HF}' --token {slack}"
    )
    provenance = {"run": run, "outcome": "exit 0"}
    out = redactor.redact_facts([Fact("command:models", key, "0", provenance)])
    shown = out[0].provenance["run"]
    for secret in (slack, bearer, HF):
        assert secret not in shown
    assert shown.startswith("curl -s -H 'Authorization: Bearer [redacted:")
    assert "--token [redacted:" in shown and "?token=[redacted:" in shown
    assert out[0].provenance["outcome"] == "exit 0"


def test_a_shared_provenance_is_masked_once_and_stays_shared(redactor: Redactor) -> None:
    from drift.facts import FactBlock

    glob = {"glob": f"/srv/tokens/{HF}/*.json", "set": "tokens"}
    block = FactBlock(
        ("sha256", "size"),
        ["file:/srv/a.json", "file:/srv/b.json"],
        [["ab" * 32, "cd" * 32], ["1", "2"]],
        [glob, glob],
    )
    (out,) = redactor.redact([block])
    assert isinstance(out, FactBlock)
    assert out.provenances[0] is out.provenances[1]
    assert HF not in out.provenances[0]["glob"] and out.columns is block.columns
    untouched = FactBlock(("sha256",), ["file:/srv/c"], [["ef" * 32]], [{"glob": "/srv/*"}])
    assert redactor.redact([untouched]) == [untouched]


def test_a_secret_in_a_file_name_is_masked_in_every_subject_and_key(redactor: Redactor) -> None:
    from drift.facts import CollectionError, FactBlock

    npm = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    block = FactBlock(
        ("sha256",), [f"file:/srv/tokens/{npm}.txt", "file:/srv/x"], [["ab" * 32, "cd" * 32]], [{}]
    )
    items = [
        block,
        Fact(f"file:/srv/tokens/{npm}.txt", "content", "cached credential"),
        Fact("command:ls", "stdout", f"{npm}.txt\n"),
        CollectionError(f"file:/srv/old/{npm}/", None, f"cannot read /srv/old/{npm}"),
    ]
    out = redactor.redact(items)
    assert npm not in repr(out)
    marked = f"file:/srv/tokens/{redactor.marker(npm)}.txt"
    assert out[0].subjects == [marked, "file:/srv/x"]  # type: ignore[union-attr]
    assert out[1].subject == marked  # type: ignore[union-attr]
    # the same name each record, so the file's history goes on
    assert Redactor(KEY).redact(items)[1].subject == marked  # type: ignore[union-attr]
    entry = (1, 0, 0, 0, "0" * 64)
    assert redactor.without_secret_entries({f"/srv/tokens/{npm}.txt": entry, "/srv/x": entry}) == {
        "/srv/x": entry
    }
    pattern = redactor.mask_glob(f"/srv/tokens/{npm}.txt")
    from drift.scope import glob_matches

    assert glob_matches(pattern, marked.removeprefix("file:"))


@pytest.mark.parametrize(
    ("argv", "secret"),
    [
        (["mysql", "-h", "db", "-uroot", "-pS3cr3tPw", "app"], "S3cr3tPw"),
        (["/usr/bin/mysqldump", "-pZq9", "--all-databases"], "Zq9"),
        (["mariadb-admin", "--password=S3cr3tPw", "status"], "S3cr3tPw"),
        (["redis-cli", "-h", "cache", "-a", "r3d1sPw", "ping"], "r3d1sPw"),
        (["sshpass", "-p", "sshPw42", "ssh", "box"], "sshPw42"),
    ],
)
def test_tools_whose_short_option_is_a_password(
    redactor: Redactor, argv: list[str], secret: str
) -> None:
    from drift.collectors.flags import parse_flags

    facts = [Fact("service:db", "argv", json.dumps(argv))]
    facts += [Fact("service:db", f"flag:{k}", v) for k, v in parse_flags(argv).items()]
    line = " ".join(argv)
    facts.append(Fact("script:/backup.sh", "content", f"#!/bin/sh\n{line} > /tmp/out\n"))
    out = redactor.redact_facts(facts)
    assert secret not in repr(out)
    mark = redactor.marker(secret)
    assert json.loads(out[0].value) == [word.replace(secret, mark) for word in argv]
    assert f"{line.replace(secret, mark)} > /tmp/out" in out[-1].value
    assert not any(
        f.secret for f in out if f.key in ("flag:-h", "flag:-uroot", "flag:--all-databases")
    )
    # a separate word after mysql's -p is the database, not a password; a $VAR names one
    assert redactor.mask_text("mysql -p app") == "mysql -p app"
    assert redactor.mask_text("mysqldump -p$DB_PASS app") == "mysqldump -p$DB_PASS app"


def test_a_password_hash_line_is_masked_in_a_file(redactor: Redactor) -> None:
    hashed = "$6$saltsaltsalt$" + "Ab1./" * 17 + "x"
    shadow = f"root:{hashed}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"
    (out,) = redactor.redact_facts([Fact("file:/etc/shadow", "content", shadow)])
    assert (
        out.value
        == f"root:{redactor.marker(hashed)}:19000:0:99999:7:::\n" + shadow.split("\n", 1)[1]
    )
    assert redactor.mask_text('echo "$1$2" "$6$HOME"') == 'echo "$1$2" "$6$HOME"'


def test_a_value_equal_to_a_secret_found_elsewhere_is_a_secret(redactor: Redactor) -> None:
    secret = "plain-looking-s3cret"
    facts = [
        Fact("service:decode", "env:UPSTREAM", secret),  # a name that says nothing
        Fact("command:cfg", "stdout", f"api_key: {secret}\n"),
        Fact("service:decode", "flag:--upstream", "plain-looking"),
    ]
    out = redactor.redact_facts(facts)
    assert out[0].secret and out[0].value == redactor.digest(secret)
    assert out[1].value == f"api_key: {redactor.marker(secret)}\n"
    assert out[2] == facts[2]


def test_a_secret_fact_is_shown_with_the_marker_a_text_gets(redactor: Redactor) -> None:
    """The report shows a stored digest with the marker the same secret has inside a text."""
    secret = "hf_" + "a" * 34
    (out,) = redactor.redact_facts([Fact("service:s", "env:HF_TOKEN", secret)])
    assert shown_secret(out.value) == redactor.marker(secret)
    assert redactor.mask_text(f"HF_TOKEN={secret}") == f"HF_TOKEN={shown_secret(out.value)}"
    assert ALREADY_REDACTED.fullmatch(out.value) and ALREADY_REDACTED.fullmatch(
        shown_secret(out.value)
    )
    assert shown_secret(None) == "[redacted]"


def test_showing_a_secret_needs_neither_the_redactor_nor_the_facts() -> None:
    """The report and the analysis import the markers alone: no key, no collectors' types."""
    code = (
        "import sys, drift.secrets.markers; print(sorted(m for m in sys.modules if 'drift' in m))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "['drift', 'drift.secrets', 'drift.secrets.markers']"


def test_the_catalogue_scans_without_a_redactor() -> None:
    text = (
        'API_KEY=abc123 PORT=8000 --db-pass "p4ss w0rd" mysql -pTOPSECRET app; redis-cli -a r3d1s'
    )
    found = context_spans(text, lambda name: name in ("API_KEY", "--db-pass"))
    assert [value for _, _, value in found] == ["abc123", "p4ss w0rd"]
    assert all(text[start:end] == value for start, end, value in found)
    passwords = [(p.flag, p.value, p.attached) for p in tool_passwords(text)]
    assert passwords == [("-p", "TOPSECRET", True), ("-a", "r3d1s", False)]
    url = "postgres://app:pw-1234@db/app"
    assert [value for _, _, value in scan_shapes(url)] == ["pw-1234"]
    assert looks_like_token("Bearer " + "Ab1" * 6) and not looks_like_token("Basic configuration")


# One secret, one tag: whatever quoting or encoding it arrived in. Each spelling is
# read by a fresh Redactor, so no spelling borrows what another taught it.
ENCODABLE = st.text(
    st.characters(
        codec="utf-8",
        exclude_characters="[]'`",
        exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp"),
    ),
    min_size=8,
    max_size=30,
).filter(lambda s: s[0] not in '-$\\"' and "redacted" not in s)


def _tags(secret: str) -> dict[str, str]:
    """The tag each way of writing `secret` gives it, by the way's name."""
    from urllib.parse import quote

    def fact(key: str, value: str) -> str:
        (done,) = Redactor(KEY).redact_facts([Fact("service:x", key, value)])
        assert done.secret
        return shown_secret(done.value)

    def text(written: str) -> str:
        masked = Redactor(KEY).mask_text(written)
        found = MARKER.findall(masked)
        assert len(found) == 1, (written, masked)
        return found[0]

    jsoned = json.dumps(secret)
    shell = re.sub(r'([\\"$])', r"\\\1", secret)  # as bash reads it, in "..." or bare
    bare = {} if '"' in secret else {"script, bare": text(f"exec serve --api-key {shell}")}
    return {
        **bare,
        "argv word": fact("flag:--api-key", secret),
        "JSON leaf": fact("json:/api_key", jsoned),
        "JSON leaf, ascii": fact("json:/api_key", json.dumps(secret, ensure_ascii=True)),
        "JSON leaf, \\/": fact("json:/api_key", jsoned.replace("/", "\\/")),
        "with white space": fact("env:API_KEY", f"  {secret}\n"),
        "Bearer header": fact("env:AUTH_HEADER", f"Bearer {secret}"),
        "script, 'single'": text(f"exec serve --api-key '{secret}'"),
        'script, "double"': text(f'export API_KEY="{shell}"'),
        "JSON text": text('{"api_key": ' + json.dumps(secret, ensure_ascii=True) + "}"),
        "JSON argv": text(json.dumps(["serve", "--api-key", secret])),
        "URL query": text(f"GET http://127.0.0.1/v1?token={quote(secret, safe='')}&x=1"),
        "URL password": text(f"postgresql://app:{quote(secret, safe='')}@db/app"),
    }


@settings(max_examples=120, deadline=None)
@given(secret=ENCODABLE, other=ENCODABLE)
def test_one_secret_reads_as_one_tag_whatever_its_encoding(secret: str, other: str) -> None:
    tags = _tags(secret)
    assert set(tags.values()) == {tags["argv word"]}, tags
    if other != secret:
        assert tags["argv word"] not in set(_tags(other).values())
