"""Is a change applied: in the live process (live), not yet (pending), or at failing starts.

A room of the grouper (see `drift.analysis.group`): a change to what a
service starts with (its serve script, its unit, the manager's environment)
is compared with the live value where one was read; otherwise a start after
the change decides. Times are compared only as far as the records allow
(`drift.analysis.timing`); a start in no known order is "at about the same
time". A service seen failing (`drift.analysis.failures`) is told apart.
"""

from __future__ import annotations

from drift.analysis.claims import Claims, value_of
from drift.analysis.diff import Change
from drift.analysis.failures import failing_status
from drift.analysis.origins import Attribution, attribute, possibilities
from drift.analysis.story import LiveStart, Status
from drift.analysis.timing import Order, Span, parse_time_us, start_span
from drift.analysis.titles import NOT_APPLIED, about_the_same_time
from drift.store.query import StoredVersion
from drift.timespec import clock


class Applied(Claims):
    """Whether a source change shows in a service's live process, mixed into the grouper."""

    def applied(
        self, service: str | None, source: Change, live_key: str
    ) -> tuple[Status, str, Change | None]:
        """Is a source change (script or unit) in the live process? And the live change showing it.

        Values decide when the live fact is readable and the source value is
        literal; otherwise a start after the change counts as applied.
        """
        if service is None:
            return "on-disk", "no service recorded for this script", None
        subject = f"service:{service}"
        mirror = self.free(subject, live_key)
        if (subject, "running") not in self.after:
            return "on-disk", f"no process recorded for {service}", None
        failed = self.failing(service, source)
        if failed is not None:
            return *failed, None
        not_running = self.not_running(service)
        if not_running is not None:
            return "pending", f"{NOT_APPLIED} ({not_running})", None
        readable = subject in (
            self.argv_readable if live_key.startswith("flag:") else self.env_readable
        )
        live = self.after.get((subject, live_key))
        if not readable or source.kind == "removed" and live is not None and _holes(source.before):
            # Without the live value (or with a removed value that had unknown
            # parts), whether the process started since decides.
            status, label = self.launched_status(service, source)
            appeared = (mirror.after is None) == (source.after is None) if mirror else False
            return status, label, mirror if status == "live" and appeared else None
        now = self.sources.attribute(service, source.after, live) if live is not None else None
        before = self.sources.attribute(service, source.before, live) if live is not None else None
        if (
            mirror is not None
            and attribute(source.after, mirror.after) is None
            and not (source.after is None and mirror.after is None)
        ):
            mirror = None  # the live value moved elsewhere: not this source's doing
        if source.after is None:
            applied_now = live is None
        elif now is None:
            applied_now = False
        elif before is None or _exact(now) and not _exact(before):
            applied_now = True
        else:
            # Both the old and the new text can give the live value (unknown
            # parts): a start after the change decides.
            status, label = self.restarted_status(service, source)
            return status, label, mirror if status == "live" else None
        if applied_now:
            label = self.live_label(service, source, removed=source.after is None, live=mirror)
            if now is not None and now.single is not None and now.single.when:
                label += f" (branch taken: {now.single.when})"
            return "live", label, mirror
        order = self.start_order(service, source)
        if order == "before":
            return "pending", NOT_APPLIED, None
        pid = value_of(self.after.get((subject, "pid")))
        where = f"{service} (pid {pid})" if pid else service
        if order == "after":
            by = self.records.span(source).by
            return "on-disk", f"not in {where}, although it started after the change{by}", None
        return "on-disk", f"not in {where}, which started {self.about(service, source)}", None

    def not_running(self, service: str) -> str | None:
        """Why a service has no process to check against, or None if it runs."""
        running = self.after.get((f"service:{service}", "running"))
        if running is None:
            return f"no process recorded for {service}"
        if running.value != "true":
            failure = self.failures.get(service)
            if failure is not None and failure.ongoing:
                return f"{service} {failure.summary()}"
            return f"{service} is not running"
        return None

    def failing(self, service: str, source: Change) -> tuple[Status, str] | None:
        """For a change to what a failing service starts with: applied at its failing starts?"""
        failure = self.failures.get(service)
        if failure is None:
            return None
        return failing_status(failure, self.records.span(source))

    def start_order(self, service: str, source: Change) -> Order:
        """Whether the service's current process started after the change, before it, or unknown.

        Its start time against the interval the change happened in; without
        a start time, the record that first saw the process against the one
        that saw the change (the same record: unknown).
        """
        subject = f"service:{service}"
        started = self.after.get((subject, "started_at"))
        span = start_span(started)
        if span is not None:
            return span.order(self.records.span(source))
        seen = started or self.after.get((subject, "pid"))
        if seen is None or seen.first_taken_us == source.changed_us:
            return "unknown"
        return "after" if seen.first_taken_us > source.changed_us else "before"

    def about(self, service: str, source: Change) -> str:
        """A start in no known order with a change, in words, with the times that say so."""
        started = parse_time_us(value_of(self.after.get((f"service:{service}", "started_at"))))
        return about_the_same_time([] if started is None else [started], self.records.span(source))

    def launched_status(self, service: str | None, source: Change) -> tuple[Status, str]:
        """`restarted_status` of a change to how a service is launched (its script, its unit).

        Of a process that rewrote its title nothing live can confirm it: a start
        after the change is told as "as launched (unverified)", never as seen live.
        """
        status, label = self.restarted_status(service, source)
        subject = f"service:{service}"
        if status != "live" or subject not in self.retitled:
            return status, label
        pid = value_of(self.after.get((subject, "pid")))
        where = f"{service} (pid {pid})" if pid else service
        text = f"as launched (unverified) in {where}"
        restart = self.restarts.get(str(service))
        if restart is not None:
            text += f" since restart {clock(restart.at_us)}"
        _live, _sep, condition = label.partition(", if it started after the change")
        if _sep:
            text += _sep + condition
        return "launched", (
            f"{text}; pid {pid} rewrote its title: its live command line and "
            "environment cannot be read"
        )

    def restarted_status(self, service: str | None, source: Change) -> tuple[Status, str]:
        """For a source without a comparable live value: started since the change, or not."""
        if service is None:
            return "on-disk", "no service recorded for this script"
        if (f"service:{service}", "running") not in self.after:
            return "on-disk", f"no process recorded for {service}"
        failed = self.failing(service, source)
        if failed is not None:
            return failed
        not_running = self.not_running(service)
        if not_running is not None:
            return "pending", f"{NOT_APPLIED} ({not_running})"
        order = self.start_order(service, source)
        if order == "before":
            return "pending", NOT_APPLIED
        label = self.live_label(service, source)
        if order == "unknown":
            # Counted as live: an edit and a restart in the same minute usually go together.
            label += f", if it started after the change: it started {self.about(service, source)}"
        return "live", label

    def live_label(
        self, service: str, source: Change, *, removed: bool = False, live: Change | None = None
    ) -> str:
        """Live in (or gone from) the service's process, since the start that took it, and how
        it fared since.

        `live` is the service's own fact that shows the change (a variable, a flag,
        its command line), if any: the first record to read its current value
        says which start took it (`live_start`). A start the file times of
        `source` put after the edit says so.
        """
        pid = value_of(self.after.get((f"service:{service}", "pid")))
        where = f"{service} (pid {pid})" if pid else service
        text = f"gone from {where}" if removed else f"live in {where}"
        restart = self.restarts.get(service)
        start = self.live_start(service, source, live)
        self.live_starts[id(source)] = start
        if restart is not None and start is not None and self.in_window(start.at_us):
            text += f" since restart {clock(start.at_us)}"
            if start.pid and start.pid != pid:
                text += f" (pid {start.pid})"
            changed = self.records.span(source)
            if changed.by and start.span.order(changed) == "after":
                text += f", started after the edit{changed.by}"
            kept = [t for t in restart.times if t > start.span.latest_us]
            if kept:
                text += f", unchanged through the {_restarts(len(kept))} since"
        failure = self.failures.get(service)
        if failure is not None and not failure.ongoing:
            text += f"; {service} {failure.summary()}"
        return text

    def live_start(self, service: str, source: Change, live: Change | None) -> LiveStart | None:
        """The start of the process a change first ran in, across the restarts that kept it.

        With the service's live fact that shows it: the process of the first
        record that read its current value (or first missed a removed one), so
        a restart that kept the value is no new start of it and one that
        changed it is. Without: the window's first start not known to come
        before the change. None when the service did not restart.
        """
        restart = self.restarts.get(service)
        if restart is None:
            return None
        runs = self.runs.get(service)
        if live is not None and runs is not None:
            if live.after is not None:
                seen: int | None = live.after.first_snapshot_id
            else:
                assert live.before is not None
                seen = live.before.until_snapshot_id
            started = runs.at("started_at", seen) if seen is not None else None
            at, span = parse_time_us(value_of(started)), start_span(started)
            if seen is not None and at is not None and span is not None:
                return LiveStart(at, span, value_of(runs.at("pid", seen)))
        changed = self.records.span(source)
        latest = restart.started or Span.start(restart.at_us)
        for moment in restart.times:
            span = latest if moment == restart.at_us else Span.start(moment)
            if span.order(changed) != "before":
                pid = restart.after_pid if moment == restart.at_us else None
                return LiveStart(moment, span, pid)
        return LiveStart(restart.at_us, latest, restart.after_pid)

    def in_window(self, at_us: int) -> bool:
        """Whether a moment is after the baseline record (a start inside the window)."""
        snapshots = self.records.snapshots
        return not snapshots or at_us > snapshots[0].taken_us


def _restarts(count: int) -> str:
    return "restart" if count == 1 else f"{count} restarts"


def _holes(version: StoredVersion | None) -> bool:
    """True for a script value with parts drift cannot know (``$(cmd)``, the caller's value)."""
    if version is None or version.secret:
        return False
    return any(
        not all(isinstance(part, str) for part in p.get("match") or [""])
        for p in possibilities(version)
    )


def _exact(found: Attribution | None) -> bool:
    """True if the attribution rests on a literal value, not on a pattern with holes."""
    return found is not None and found.exact
