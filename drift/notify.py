"""`[[notify]]`: after a record that saw a live or pending change, tell someone.

record (stored) -> the `since` report of that record's own interval -> the
suspects a running service has (or takes at its next restart) -> each
notifier once, bounded by its timeout, never retried: a notifier that is down
gets one try per changed record, not a storm. A notifier that fails is a blind
spot of that record (stored with its collection errors) and a warning, never a
failed record.

What is sent was read from the database, where secrets are already masked;
a notifier's URL (a Slack webhook holds its token) never appears in a message.
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from drift.config import Config, NotifySpec
from drift.facts import CollectionError
from drift.store.urls import DbUrl
from drift.store.writer import SnapshotResult

# What a running service has, or takes at its next restart (drift.analysis.story).
TOLD_STATUSES = frozenset({"live", "launched", "failing", "pending", "unsourced"})
MAX_TITLES = 5


@dataclass(frozen=True)
class Message:
    """What every notifier of one record gets: a line of text and the JSON envelope."""

    host: str
    text: str
    payload: dict[str, Any]


def notify(config: Config, db: DbUrl, result: SnapshotResult) -> list[CollectionError]:
    """Tell each [[notify]] entry about `result`'s live or pending changes; return the failures.

    Nothing is sent for a record that changed nothing, one kept in the spool
    (the central history does not have it yet) or a host's first record
    (everything in it is new). The failures are stored as the record's blind spots.
    """
    if not config.notify or not result.changed or result.spooled is not None:
        return []
    message = _message(config, db, result.snapshot_id)
    if message is None:
        return []
    failures = [
        CollectionError(subject=f"notify:{spec.name}", key="sent", message=why)
        for spec in config.notify
        if (why := send(spec, message)) is not None
    ]
    if failures:
        from drift.store.writer import HistoryWriter

        with HistoryWriter.open(db, create=False) as writer:
            writer.add_errors(result.snapshot_id, failures)
    return failures


def _message(config: Config, db: DbUrl, snapshot_id: int) -> Message | None:
    """The `since` envelope from the record before `snapshot_id` to it, kept to what is told."""
    from drift.analysis.investigate import InvestigateOptions, investigate
    from drift.analysis.plain import plain
    from drift.render.envelope import envelope
    from drift.store.query import History
    from drift.timespec import When

    with History.open(db, config.host) as history:
        before = [s for s in history.recent_snapshots(2) if s.id < snapshot_id]
        if not before:
            return None
        investigation = investigate(
            history,
            When(snapshot=before[-1].id, text=f"#{before[-1].id}"),
            When(snapshot=snapshot_id, text=f"#{snapshot_id}"),
            InvestigateOptions(command="since", top=None),
        )
    data = plain(investigation)
    told = [s for s in data["suspects"] if s["status"] in TOLD_STATUSES]
    if not told:
        return None
    data["suspects"] = told
    titles = "; ".join(f"#{s['rank']} {s['title']} ({s['label']})" for s in told[:MAX_TITLES])
    more = f"; and {len(told) - MAX_TITLES} more" if len(told) > MAX_TITLES else ""
    text = f"drift on {config.host}: {len(told)} live or pending change(s): {titles}{more}"
    return Message(host=config.host, text=text, payload=envelope("since", data))


def send(spec: NotifySpec, message: Message) -> str | None:
    """Send `message` through one notifier; None when it went, else why not (one line)."""
    body = json.dumps(message.payload, ensure_ascii=False).encode()
    if spec.url is not None:
        return _post(spec, body)
    return _run(spec, message, body)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a second request: a webhook that moved says so."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _post(spec: NotifySpec, body: bytes) -> str | None:
    assert spec.url is not None
    request = urllib.request.Request(
        spec.url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=spec.timeout) as answer:
            answer.read(65536)
    except urllib.error.HTTPError as exc:
        return f"the webhook answered HTTP {exc.code} (not sent)"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            why = f"timed out after {spec.timeout:g}s"
        elif isinstance(reason, OSError) and reason.strerror:
            why = reason.strerror.lower()
        else:
            why = type(reason).__name__
        return f"the webhook could not be reached ({why}; not sent)"
    return None


def _run(spec: NotifySpec, message: Message, body: bytes) -> str | None:
    """Run the notifier's command with the JSON in $DRIFT_NOTIFY_JSON (a private file)."""
    from drift.collectors.commands import run_bounded

    assert spec.run is not None
    with tempfile.NamedTemporaryFile(prefix="drift-notify-", suffix=".json") as payload:
        payload.write(body)
        payload.flush()
        env = {
            **os.environ,
            "DRIFT_NOTIFY_JSON": payload.name,
            "DRIFT_NOTIFY_TEXT": message.text,
            "DRIFT_NOTIFY_HOST": message.host,
        }
        run = run_bounded(spec.run, spec.timeout, cwd=spec.cwd, env=env)
    if run.timed_out:
        return f"the command timed out after {spec.timeout:g}s"
    if run.error is not None:
        return f"the command could not run: {run.error}"
    if run.exit_code != 0:
        return f"the command exited {run.exit_code}"
    return None
