"""The drawn timeline told as text: one line per event, for the Markdown report.

The same events as the HTML report's drawing (drift.render.timeline), in time
order, each on the reader's clock; a kind of event that repeats (a check
flapping, a service restarted all week) is a few lines and one that counts
the rest. Pure: a context in, lines out.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any

from drift.render.axis import DAY_US, zone_name
from drift.render.timeline import STATUS_WORDS, parse_us, root_change
from drift.timespec import from_us, human_time, local_zone


def glance_lines(context: dict[str, Any], tz: tzinfo | None = None) -> list[str]:
    """The drawn timeline as text, one line per event in time order (the Markdown report's).

    A crash loop is one line (its starts are in its words), a start outside one is a line.
    """
    tz = tz or local_zone()
    over = context["overview"]
    events: list[tuple[int, int, str]] = []
    base, cur = context["baseline"], context["current"]
    events.append((parse_us(base["time"]), 0, f"baseline: snapshot #{base['snapshot']}"))
    for m in over["marks"]:
        note = f": {m['note']}" if m["note"] else ""
        events.append((parse_us(m["at"]), 1, f"marked {m['kind']}{note}"))
    # Before the first stretch nothing was known: "no check ran" there is not an event.
    before, health = "unknown", []
    for s in over["health"]:
        if s["state"] != before:
            health.append((parse_us(s["start"]), 2, f"health {s['text']}"))
        before = s["state"]
    events += _at_most(health, "health changes")
    for lane in over["services"]:
        loops = []
        for s in lane["stretches"]:
            if s["state"] in ("crash-loop", "failed"):
                loops.append((parse_us(s["start"]), parse_us(s["end"])))
                events.append((loops[-1][0], 3, s["text"]))
            elif s["state"] == "stopped":
                events.append((parse_us(s["start"]), 3, f"{lane['service']} not running"))
        starts = [
            (at, 3, f"{lane['service']} started")
            for at in map(parse_us, lane["starts"])
            if not any(a <= at <= b for a, b in loops)
        ]
        events += _at_most(starts, f"starts of {lane['service']}")
    for s in context["suspects"]:
        if s["changes"]:
            status = STATUS_WORDS.get(s["status"], str(s["status"]).upper())
            at = parse_us(root_change(s)["changed_at"])
            events.append((at, 4, f"suspect #{s['rank']} {status}: {s['title']}"))
    for b in context["blind_spots"]:
        if b["kind"] == "gap":
            events.append((parse_us(b["first_seen"]), 5, f"recording gap: {b['message']}"))
    if base["unhealthy_at"]:
        first = "still" if base["failing_at_baseline"] else "first"
        events.append((parse_us(base["unhealthy_at"]), 6, f"{first} failing health check"))
    events.append((parse_us(cur["time"]), 7, f"current: snapshot #{cur['snapshot']}"))
    events.sort(key=lambda e: (e[0], e[1]))
    days = events[-1][0] - events[0][0] >= DAY_US or _day(events[0][0], tz) != _day(
        events[-1][0], tz
    )
    if days:  # the one form of a moment, each with its own zone (a week may cross DST)
        return [f"{human_time(from_us(at), tz)}  {text}" for at, _o, text in events]
    zone = zone_name(tz, events[-1][0])
    return [
        f"{from_us(at).astimezone(tz).strftime('%H:%M:%S')} {zone}  {text}"
        for at, _o, text in events
    ]


GLANCE_LIMIT = 12  # lines of one kind (health changes, a service's starts) before a summary


def _at_most(events: list[tuple[int, int, str]], what: str) -> list[tuple[int, int, str]]:
    """`events`, or the first GLANCE_LIMIT of them and one line for the rest: a check that
    flapped all week is one line of text, not thousands."""
    if len(events) <= GLANCE_LIMIT:
        return events
    rest = events[GLANCE_LIMIT:]
    last = rest[-1]
    return [*events[:GLANCE_LIMIT], (last[0], last[1], f"{len(rest):,} more {what} up to here")]


def _day(us: int, tz: tzinfo) -> str:
    return from_us(us).astimezone(tz).strftime("%Y-%m-%d")
