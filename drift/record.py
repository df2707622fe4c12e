"""`drift record`: collect every configured fact, redact secrets, store what changed.

collectors -> facts -> redaction -> store. The collectors never see the
database; the store never sees a collector. Which collectors run, and in
what order, is `drift.collectors.registry`'s. Heavy imports stay out: a
collector module is imported only when the config uses it.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from itertools import chain
from pathlib import Path

from drift.config import Config
from drift.facts import CollectContext, CollectionError, Fact, FactBlock
from drift.keyfile import SecretKey
from drift.store.files import sqlite_exists, sqlite_side_files
from drift.store.statcache import ShardedStatCache
from drift.store.urls import DbUrl, default_db_path, resolve_db_url
from drift.store.writer import HistoryWriter, SnapshotResult, now_us

Item = Fact | FactBlock | CollectionError


def secret_key_path(config: Config, db: DbUrl) -> Path:
    """Where the per-install HMAC key lives: config's secret_key_file, else beside the database."""
    if config.secret_key_file:
        return Path(config.secret_key_file)
    base = db.sqlite_path.parent if db.sqlite_path is not None else default_db_path().parent
    return base / "secret.key"


def redacted_note(config: Config, db: DbUrl, note: str | None) -> str | None:
    """A mark's note as it is stored: searched as a record's texts are, so a pasted token or
    ``HF_TOKEN=...`` reaches the database masked."""
    if not note:
        return note
    from drift.keyfile import load_key
    from drift.secrets.redactor import Redactor

    key = load_key(secret_key_path(config, db))
    return Redactor(key.key, config.secrets).mask_text(note)


def excluded_paths(config: Config, db: DbUrl) -> frozenset[str]:
    """drift's own files, which it must never hash: the database, its companions, backups, key,
    and the spool a host records into while a central database is out of reach."""
    from drift.store.spool import SET_ASIDE_MARK, legacy_spool, spool_path

    paths = {str(secret_key_path(config, db))}
    for spool in (
        spool_path(db, config.spool, config.path, config.host),
        legacy_spool(db, config.spool),
    ):
        if spool is not None:
            paths.update(str(p) for p in sqlite_side_files(spool))
            paths.update(_named_after(spool, SET_ASIDE_MARK))
            paths.update(_named_after(spool, ".bak-"))  # an older drift's spool, brought up
    if db.sqlite_path is not None:
        paths.update(str(p) for p in sqlite_side_files(db.sqlite_path))
        paths.update(_named_after(db.sqlite_path, ".bak-"))
    return frozenset(paths)


def _named_after(path: Path, mark: str) -> list[str]:
    """The files beside `path` named after it with `mark` (its backups, a set-aside spool)."""
    try:
        return [
            str(path.parent / name)
            for name in os.listdir(path.parent)
            if name.startswith(f"{path.name}{mark}")
        ]
    except OSError:
        return []


def _key_errors(key: SecretKey, last_fingerprint: str | None) -> Iterator[CollectionError]:
    """What needs attention about the secret key, as errors on ``secret-key:PATH``.

    They cover no fact. As errors they reach stderr (with --quiet, once) and
    `drift since`'s trust line and blind spots, where a replaced key explains
    why every secret reads as changed at that record.
    """
    subject = f"secret-key:{key.path}"
    exposure = key.exposure()
    if exposure is not None:
        yield CollectionError(subject, None, exposure)
    if last_fingerprint is not None and last_fingerprint != key.fingerprint:
        yield CollectionError(
            subject,
            None,
            "was replaced since the last record: every secret is digested with the new key, "
            "so every secret reads as changed at this record, changed or not",
        )


def _guarded(scope: str, run: Callable[[], Iterable[Item]]) -> Iterator[Item]:
    """Run one collector; if it crashes, what it did not yield is a blind spot, not a removal."""
    try:
        yield from run()
    except Exception as exc:  # a collector bug must not cost the rest of the snapshot
        message = str(exc).splitlines()[0] if str(exc) else ""
        yield CollectionError(scope, None, f"collector failed: {type(exc).__name__}: {message}")


def collect_all(
    config: Config, ctx: CollectContext, unreachable: str | None = None
) -> Iterator[Item]:
    """Every fact and collection error the config asks for, collector by collector.

    `unreachable` says why the config's container could not be found: then
    nothing in it is read, and all it holds is a blind spot for this record.
    """
    from drift.collectors.registry import collection_order

    blind: set[str] = set()
    for collector, entry, scope in collection_order(config):
        if unreachable is None or not collector.in_container:
            yield from _guarded(scope, partial(collector.collect, entry, ctx))
            continue
        # A path kind (script, file, repo) as a whole: a file a script sources is
        # no scope of its own, and must not read as removed either.
        for kind in collector.subjects:
            subject = f"{kind.kind}:/" if kind.name == "PATH" else scope
            if kind.keys and subject not in blind:
                blind.add(subject)
                yield CollectionError(subject, None, unreachable)


def find_box(config: Config, ctx: CollectContext) -> str | None:
    """Point `ctx` at the config's container, found afresh; None, or why it cannot be read."""
    if config.container is None:
        return None
    from drift.collectors.container import ContainerNotFound, find_container

    try:
        box = find_container(config.container)
    except ContainerNotFound as exc:
        return f"{exc}: nothing in it was read"
    ctx.systemctl, ctx.proc_root, ctx.files = box.systemctl, box.proc_root, box.files()
    ctx.enter = box.enter
    return None


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector.

    A record builds a few objects per fact and frees them all at the end; the
    collector would walk them again and again (0.1 s of a 12k-file first
    record) to find no cycles. Reference counting still frees everything.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@_no_cycle_collection()
def record(
    config: Config, db: DbUrl, progress: Callable[[str], None] | None = None
) -> SnapshotResult:
    """Take one snapshot of everything in `config` and store what changed since the last one.

    `progress`, if given, receives a one-line status of long work (hashing, storing).
    With a central database (PostgreSQL) out of reach, the snapshot goes to the
    host's spool (`drift.store.push`) and the result says so; the next record
    that reaches it ships the spool first.
    """
    from drift.errors import DatabaseUnreachable
    from drift.store.push import ship
    from drift.store.spool import check_spool_place, legacy_spool, spool_path

    started = time.monotonic()
    taken = now_us()
    spool = spool_path(db, config.spool, config.path, config.host)
    if spool is not None:
        # Refused at every record, not only in the outage that needs it.
        check_spool_place(spool)
    into = partial(
        _record_into,
        config=config,
        db=db,
        key_path=secret_key_path(config, db),
        taken=taken,
        started=started,
        progress=progress,
    )
    try:
        writer = HistoryWriter.open(db)
    except DatabaseUnreachable as exc:
        if spool is None:
            raise
        return _spool_record(spool, str(exc), config.host, into, progress)
    with writer:
        with writer.record_lock(config.host):
            shipped, warnings = 0, []
            for kept in (legacy_spool(db, config.spool), spool):
                if kept is not None:
                    done = ship(kept, writer, config.host, progress)
                    shipped += done.shipped
                    warnings.append(done.warning(config.host, "shipped"))
            result = into(writer)
            return replace(result, shipped=shipped, spool_warnings=[w for w in warnings if w])


def _spool_record(
    spool: Path,
    why: str,
    host: str,
    record_into: Callable[[HistoryWriter], SnapshotResult],
    progress: Callable[[str], None] | None,
) -> SnapshotResult:
    """Record into the host's spool, the central database being out of reach. A damaged spool
    is set aside first, and what can be read of it is copied into the new one."""
    from drift.private_dirs import make_private_dirs
    from drift.store.push import Shipped, salvage
    from drift.store.spool import set_aside, spool_damage, spool_too_new

    make_private_dirs(spool.parent)
    warnings: list[str | None] = []
    damage = spool_damage(spool) if sqlite_exists(spool) else None
    aside = None if damage is None else set_aside(spool)
    newer = spool_too_new(spool) if sqlite_exists(spool) else None
    if newer is not None:
        warnings.append(Shipped(0, 0, spool, newer, set_aside(spool), newer=True).warning(host, ""))
    began = not sqlite_exists(spool)
    with HistoryWriter.open(resolve_db_url(str(spool))) as local:
        with local.record_lock(host):
            if aside is not None and damage is not None:
                saved = salvage(aside, spool, damage, local, host, progress)
                warnings.append(saved.warning(host, "kept in a new spool"))
            result = record_into(local)
    return replace(
        result,
        spooled=f"{why}; kept in {spool}",
        spool_began=began,
        spool_warnings=[w for w in warnings if w],
    )


def _record_into(
    writer: HistoryWriter,
    config: Config,
    db: DbUrl,
    key_path: Path,
    taken: int,
    started: float,
    progress: Callable[[str], None] | None,
) -> SnapshotResult:
    """Collect, redact and store one snapshot through `writer` (its record lock held)."""
    ctx = CollectContext(
        # Read a shard at a time as collectors ask: never the whole cache at once.
        file_cache=ShardedStatCache(writer.conn, writer.host_id(config.host)),
        exclude=excluded_paths(config, db),
        systemctl=config.systemctl,
        proc_root=config.proc_root,
        progress=progress,
        last_processes=writer.load_last_processes(
            config.host, [f"service:{svc.name}" for svc in config.services]
        ),
        recorded=partial(writer.open_values, config.host),
    )
    from drift.keyfile import load_key
    from drift.secrets.redactor import Redactor

    # Before collecting: a key drift cannot use fails the record at once.
    key = load_key(key_path)
    redactor = Redactor(key.key, config.secrets)
    unreachable = find_box(config, ctx)
    items = redactor.redact(
        chain(
            _key_errors(key, writer.key_fingerprint(config.host)),
            collect_all(config, ctx, unreachable),
        )
    )
    errors = [item for item in items if isinstance(item, CollectionError)]
    facts = [item for item in items if not isinstance(item, CollectionError)]
    if progress is not None:
        count = sum(len(f.subjects) * len(f.keys) if isinstance(f, FactBlock) else 1 for f in facts)
        progress(f"store: {count:,} facts, writing what changed")
    from drift.scope import ConfigInfo

    info = ConfigInfo.of(config)
    return writer.write_snapshot(
        config.host,
        taken,
        facts,
        errors,
        redactor.without_secret_entries(ctx.cache_updates),
        started=started,
        config=replace(info, scope=info.scope.masked(redactor.mask_name, redactor.mask_glob)),
        key_fingerprint=key.fingerprint,
    )
