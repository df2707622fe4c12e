"""The secret key file: read without following links or waiting on FIFOs, refused when unsafe,
warned about when exposed or replaced. drift holds its record lock while it reads the key, so a
key that blocks would make every later record exit 3."""

from __future__ import annotations

import os
import pwd
import re
import threading
from pathlib import Path

import pytest
from conftest import run_drift

from drift.errors import ConfigError
from drift.keyfile import KEY_BYTES, SecretKey, load_key
from drift.secrets.redactor import load_or_create_key


def load_within(path: Path, seconds: float = 5.0) -> SecretKey | BaseException:
    """load_key in a thread: a read that blocks or never ends fails the test instead of hanging."""
    out: list[SecretKey | BaseException] = []

    def work() -> None:
        try:
            out.append(load_key(path))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"reading {path} did not finish in {seconds}s"
    return out[0]


def refusal(path: Path) -> str:
    """The one-line message a key that cannot be used is refused with."""
    result = load_within(path)
    assert isinstance(result, ConfigError), result
    message = str(result)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return message


def test_a_key_linked_to_dev_zero_is_refused_at_once(tmp_path: Path) -> None:
    key = tmp_path / "secret.key"
    key.symlink_to("/dev/zero")
    assert refusal(key) == (
        f"{key}: cannot read secret key: it is a symlink to /dev/zero, which drift does not "
        "follow (set secret_key_file to the key file itself)"
    )


def test_a_key_linked_to_a_real_key_is_refused_too(tmp_path: Path) -> None:
    """A link is never followed, whatever it points at: the user names the file itself."""
    real = tmp_path / "real.key"
    real.write_bytes(b"k" * KEY_BYTES)
    real.chmod(0o600)
    key = tmp_path / "secret.key"
    key.symlink_to(real)
    assert "it is a symlink to" in refusal(key)
    assert load_key(real).key == b"k" * KEY_BYTES


def test_a_fifo_key_is_refused_without_blocking(tmp_path: Path) -> None:
    key = tmp_path / "secret.key"
    os.mkfifo(key, 0o600)
    assert refusal(key) == f"{key}: cannot read secret key: it is a FIFO, not a regular file"


def test_a_device_key_is_refused_unopened_for_reading(tmp_path: Path) -> None:
    assert refusal(Path("/dev/zero")) == (
        "/dev/zero: cannot read secret key: it is a character device, not a regular file"
    )


@pytest.mark.parametrize("size", [16, 33, 1 << 30])
def test_a_key_of_another_size_is_refused_without_reading_it_all(tmp_path: Path, size: int) -> None:
    key = tmp_path / "secret.key"
    with key.open("wb") as f:
        f.truncate(size)  # 1 GiB is sparse: reading it all would take seconds and the memory
    key.chmod(0o600)
    assert refusal(key) == (
        f"{key}: secret key is {size} bytes, expected 32; remove it to create a new one "
        "(every secret will show as changed once)"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the key to another user")
def test_a_key_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "secret.key"
    key.write_bytes(b"k" * KEY_BYTES)
    key.chmod(0o600)
    nobody = pwd.getpwnam("nobody").pw_uid
    os.chown(key, nobody, -1)
    assert refusal(key) == (
        f"{key}: cannot use secret key: it is owned by nobody (uid {nobody}), not by root "
        "(uid 0) who runs drift (whoever owns it chooses the key)"
    )


@pytest.mark.parametrize(
    ("mode", "exposure"),
    [
        (0o600, None),
        (0o400, None),
        (0o644, "can be read by other users (mode 0644): chmod 600 it"),
        (0o640, "can be read by other users (mode 0640): chmod 600 it"),
        (0o620, "can be written by other users (mode 0620): chmod 600 it"),
        (0o666, "can be read and written by other users (mode 0666): chmod 600 it"),
    ],
)
def test_a_key_others_may_read_or_write_is_used_and_said(
    tmp_path: Path, mode: int, exposure: str | None
) -> None:
    key = tmp_path / "secret.key"
    key.write_bytes(b"k" * KEY_BYTES)
    key.chmod(mode)
    loaded = load_key(key)
    assert loaded.key == b"k" * KEY_BYTES
    assert loaded.exposure() == exposure


def test_the_fingerprint_names_a_key_without_revealing_it(tmp_path: Path) -> None:
    first = load_key(tmp_path / "a.key")
    again = load_key(tmp_path / "a.key")
    other = load_key(tmp_path / "b.key")
    assert re.fullmatch(r"[0-9a-f]{16}", first.fingerprint)
    assert first.fingerprint == again.fingerprint != other.fingerprint
    assert first.key.hex()[:16] not in first.fingerprint
    assert first.key not in repr(first).encode()  # a traceback never shows the key


def test_a_created_key_is_private_and_the_old_entry_point_agrees(tmp_path: Path) -> None:
    path = tmp_path / "state" / "secret.key"
    key = load_key(path)
    assert key.mode == 0o600 and key.exposure() is None
    assert load_or_create_key(path) == key.key


# ---------------------------------------------------------------- drift record


def record_config(tmp_path: Path) -> list[str]:
    config = tmp_path / "drift.toml"
    config.write_text(
        f'host = "k"\ndb = "{tmp_path / "drift.db"}"\n'
        '[[commands]]\nname = "token"\n'
        'run = "echo HF_TOKEN=hf_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb"\n'
    )
    return ["--config", str(config)]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_record_with_a_fifo_or_dev_zero_key_fails_in_one_line_and_frees_the_lock(
    tmp_path: Path, kind: str
) -> None:
    cfg = record_config(tmp_path)
    run_drift(["record", *cfg], tmp_path, timeout=60)
    key = tmp_path / "secret.key"
    key.unlink()
    if kind == "fifo":
        os.mkfifo(key, 0o600)
    else:
        key.symlink_to("/dev/zero")
    for _ in range(2):  # the second would exit 3 if the first still held the lock
        result = run_drift(["record", *cfg], tmp_path, check=False, timeout=20)
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert result.stderr.startswith(f"drift: {key}: cannot read secret key: it is a ")


def test_record_says_when_the_key_is_exposed_or_replaced_and_since_warns(
    tmp_path: Path,
) -> None:
    cfg = record_config(tmp_path)
    run_drift(["record", *cfg], tmp_path, timeout=60)
    run_drift(["mark", "stable", *cfg], tmp_path, timeout=60)
    key = tmp_path / "secret.key"
    # Another key, as a restore from the wrong backup would bring, that others can read.
    key.unlink()
    key.write_bytes(os.urandom(KEY_BYTES))
    key.chmod(0o644)
    second = run_drift(["record", *cfg], tmp_path, check=False, timeout=60)
    assert second.returncode == 4
    assert f"! secret-key:{key}: was replaced since the last record: " in second.stderr
    assert f"! secret-key:{key}: can be read by other users (mode 0644)" in second.stderr
    # Replaced once: the next record compares with the new key and says nothing of it.
    quiet = run_drift(["record", "--quiet", *cfg], tmp_path, check=False, timeout=60)
    assert quiet.returncode == 4 and quiet.stderr == ""  # the mode is no news to cron
    key.chmod(0o600)
    assert run_drift(["record", *cfg], tmp_path, timeout=60).stderr == ""
    since = run_drift(["since", *cfg], tmp_path, timeout=60).stdout
    warnings = [line for line in since.splitlines() if line.startswith("warning")]
    assert len(warnings) == 2
    assert warnings[0].startswith(
        f"warning   secret key {key} can be read by other users (mode 0644): chmod 600 it (seen "
    )
    assert warnings[1].startswith(
        f"warning   secret key {key} was replaced since the last record: every secret is "
        "digested with the new key, so every secret reads as changed at this record"
    )


def test_the_database_never_holds_the_key_or_its_bytes(tmp_path: Path) -> None:
    cfg = record_config(tmp_path)
    run_drift(["record", *cfg], tmp_path, timeout=60)
    key = load_key(tmp_path / "secret.key")
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("drift.db*"))
    assert key.key not in stored and key.key.hex().encode() not in stored
    assert key.fingerprint.encode() in stored
