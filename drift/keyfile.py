"""The per-install secret key that redaction's keyed digests use, read as carefully as it matters.

drift runs as root every minute and holds the record lock while it reads the
key, so the key file is opened without following a symlink (one to
/dev/zero would be read forever) and without waiting on a FIFO, and must be
a regular file of exactly KEY_BYTES owned by whoever runs drift; anything
else is a one-line ConfigError naming the file. A key other users can read
or write is still used (drift does not chmod a file it did not create) but
`exposure` says so, and its `fingerprint`, stored with the host's history,
tells a replaced key apart: with another key every secret digest changes,
so every secret would read as rotated.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import pwd
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from drift.errors import ConfigError
from drift.small_files import file_type

KEY_BYTES = 32
FINGERPRINT_LABEL = b"drift secret key fingerprint v1"


@dataclass(frozen=True)
class SecretKey:
    """The key's bytes with what drift saw of its file when it read them."""

    key: bytes = field(repr=False)
    path: Path
    mode: int  # the permission bits, as fstat gave them

    @property
    def fingerprint(self) -> str:
        """16 hex digits naming this key: an HMAC of a fixed label, which reveals nothing of it."""
        return hmac.new(self.key, FINGERPRINT_LABEL, hashlib.sha256).hexdigest()[:16]

    def exposure(self) -> str | None:
        """What is wrong with the file's mode (other users may read or replace it), or None.

        A phrase to follow the key's path: "can be read by other users (mode 0644): ..."."""
        can = [word for bits, word in ((0o044, "read"), (0o022, "written")) if self.mode & bits]
        if not can:
            return None
        return f"can be {' and '.join(can)} by other users (mode {self.mode:04o}): chmod 600 it"


def load_key(path: Path) -> SecretKey:
    """The key at `path`, created (32 random bytes, 0600, folders 0700) if there is none.

    The file is written under a temporary name and hard-linked into place, so
    a concurrent `drift record` never sees a half-written key and both end up
    with the same one. Raises ConfigError if it cannot be read or created.
    """
    path = Path(path)
    found = _read_key(path)
    if found is not None:
        return found
    try:
        from drift.private_dirs import make_private_dirs

        make_private_dirs(path.parent)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(KEY_BYTES))
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process made one first: use theirs
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot create secret key: {exc.strerror or exc}") from None
    found = _read_key(path)
    if found is None:
        raise ConfigError(f"{path}: secret key vanished while being created")
    return found


def _read_key(path: Path) -> SecretKey | None:
    """The key if the file is one drift may use; None if there is no file; else ConfigError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise ConfigError(
                f"{path}: cannot read secret key: it is a symlink to {_target(path)}, which "
                "drift does not follow (set secret_key_file to the key file itself)"
            ) from None
        raise ConfigError(f"{path}: cannot read secret key: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                f"{path}: cannot read secret key: it is {file_type(info.st_mode)}, "
                "not a regular file"
            )
        if info.st_uid != os.geteuid():
            raise ConfigError(
                f"{path}: cannot use secret key: it is owned by {_user(info.st_uid)}, not by "
                f"{_user(os.geteuid())} who runs drift (whoever owns it chooses the key)"
            )
        # One byte more than a key: a longer file is refused without reading it all.
        key = os.read(fd, KEY_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read secret key: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        size = f"{info.st_size}" if len(key) > KEY_BYTES else f"{len(key)}"
        raise ConfigError(
            f"{path}: secret key is {size} bytes, expected {KEY_BYTES}; "
            "remove it to create a new one (every secret will show as changed once)"
        )
    return SecretKey(key, path, stat.S_IMODE(info.st_mode))


def _target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"
