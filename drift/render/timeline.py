"""The postmortem at a glance: the report's timeline as shapes with coordinates.

`picture` lays out an investigation's plain context (what the templates
read) as rows of a drawing: the marks as flags, the suspects as numbered
markers at the time of their change, the health checks as a band, one lane
per service (runs, restarts, crash loops), the baseline and the first
failing check as vertical lines, and the time axis (drift.render.axis).
report.html.j2 turns the shapes into inline SVG (autoescaped: every text here
is plain text); `glance_lines` tells the same in one line per event for the
Markdown report. Pure: a context in, shapes out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from drift.analysis.diff import duration_text
from drift.display import truncated
from drift.render.axis import DAY_US, Axis, Tick, make_axis, ticks, zone_name
from drift.timespec import from_us, local_time, local_zone, to_us

WIDTH = 1120.0
GUTTER = 128.0  # the lanes' names, left of the plot
RIGHT = 12.0
ROW = 18.0  # a row of flags or markers
BAND = 14.0  # the health band and each service's lane
LANE_GAP = 5.0
MARKER_R = 7.5
MAX_MARKER_ROWS = 3
MAX_FLAG_ROWS = 3
CHAR_WIDTH = 6.2  # an 11-unit sans-serif character, on average: enough to keep labels apart
NAME_CHARS = 19  # a lane's name in the gutter
FLAG_CHARS = 30

STATUS_WORDS = {
    "live": "LIVE",
    "failing": "FAILING",
    "pending": "PENDING",
    "unsourced": "UNSOURCED",
    "on-disk": "ON DISK",
    "changed": "CHANGED",
}


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    kind: str  # the CSS class's suffix: passing, failing, unknown, gap, running, crash-loop ...
    title: str
    hatch: str = ""  # SVG path data of diagonal strokes inside it (a crash loop), if any


@dataclass(frozen=True)
class Flag:
    """A mark: a pole from the top of the plot, its label in row `row` (anchored `anchor`)."""

    x: float
    y: float
    kind: str
    label: str
    title: str
    anchor: str


@dataclass(frozen=True)
class Marker:
    """A suspect: its number in a circle at the time of its change, linked to its card."""

    x: float
    y: float
    rank: int
    status: str
    href: str
    title: str


@dataclass(frozen=True)
class TickMark:
    """A service's start: a short stroke across its lane."""

    x: float
    title: str


@dataclass(frozen=True)
class Lane:
    service: str
    label: str
    y: float
    stretches: list[Rect]
    starts: list[TickMark]


@dataclass(frozen=True)
class Line:
    """A vertical line across the plot (baseline, first failing check, current record)."""

    x: float
    kind: str
    label: str
    title: str
    anchor: str


@dataclass(frozen=True)
class Picture:
    """Everything report.html.j2 draws, in SVG user units (`width` x `height`)."""

    width: float
    height: float
    plot_x0: float
    plot_x1: float
    top: float  # where the plot (poles and lines) begins
    health_y: float
    axis_y: float
    zone: str
    flags: list[Flag]
    markers: list[Marker]
    health: list[Rect]
    gaps: list[Rect]
    lanes: list[Lane]
    lines: list[Line]
    ticks: list[Tick]
    folds: list[Rect]
    summary: str
    marker_rows: int = field(default=1)


def parse_us(text: str) -> int:
    """An ISO 8601 time of the context as microseconds."""
    return to_us(datetime.fromisoformat(text))


def picture(context: dict[str, Any], tz: tzinfo | None = None) -> Picture:
    """The drawn timeline of a report's context, in the reader's zone `tz` (default: local)."""
    tz = tz or local_zone()
    over = context["overview"]
    t0, t1 = parse_us(over["start"]), parse_us(over["end"])
    axis = make_axis(t0, t1, _moments(context), GUTTER, WIDTH - RIGHT)
    flags, flag_rows = _flags(over["marks"], axis)
    top = 4.0 + flag_rows * ROW
    markers, marker_rows = _markers(context["suspects"], axis, top)
    health_y = top + marker_rows * ROW + 4.0
    y = health_y + BAND + LANE_GAP * 2
    lanes = []
    for lane in over["services"]:
        lanes.append(_lane(lane, axis, y))
        y += BAND + LANE_GAP
    axis_y = y + 2.0
    band_end = axis.x(parse_us(context["current"]["time"]))
    return Picture(
        width=WIDTH,
        height=axis_y + 44.0,
        plot_x0=axis.x0,
        plot_x1=axis.x1,
        top=top,
        health_y=health_y,
        axis_y=axis_y,
        zone=zone_name(tz, t1),
        flags=flags,
        markers=markers,
        health=[_rect(s, axis, health_y, BAND) for s in over["health"]]
        or [Rect(axis.x0, health_y, band_end - axis.x0, BAND, "unknown", "no health check")],
        gaps=[
            _span(
                parse_us(b["first_seen"]),
                parse_us(b["last_seen"]),
                axis,
                health_y,
                axis_y - health_y,
                "gap",
                b["message"],
            )
            for b in context["blind_spots"]
            if b["kind"] == "gap"
        ],
        lanes=lanes,
        lines=_lines(context, axis),
        ticks=ticks(axis, tz),
        folds=[
            Rect(
                p.x0,
                top,
                p.x1 - p.x0,
                axis_y - top,
                "fold",
                f"{duration_text(p.t1 - p.t0)} in which nothing changed, folded",
            )
            for p in axis.folds
        ],
        summary=_summary(context),
        marker_rows=marker_rows,
    )


def _moments(context: dict[str, Any]) -> list[int]:
    """The moments whose surroundings the axis keeps to scale."""
    over = context["overview"]
    out = [parse_us(context["baseline"]["time"]), parse_us(context["current"]["time"])]
    if context["baseline"]["unhealthy_at"]:
        out.append(parse_us(context["baseline"]["unhealthy_at"]))
    out += [parse_us(t) for t in _root_times(context["suspects"])]
    out += [parse_us(m["at"]) for m in over["marks"]]
    for part in (over["health"], *(lane["stretches"] for lane in over["services"])):
        out += [parse_us(s["start"]) for s in part] + [parse_us(s["end"]) for s in part]
    out += [parse_us(t) for lane in over["services"] for t in lane["starts"]]
    gaps = [b for b in context["blind_spots"] if b["kind"] == "gap"]
    out += [parse_us(b[k]) for b in gaps for k in ("first_seen", "last_seen")]
    return out


def _root_times(suspects: list[dict[str, Any]]) -> list[str]:
    return [_root(s)["changed_at"] for s in suspects if s["changes"]]


def _root(suspect: dict[str, Any]) -> dict[str, Any]:
    """A suspect's root change (its first, when none is marked root)."""
    changes = suspect["changes"]
    return next((c for c in changes if c["role"] == "root"), changes[0])


def _rows(xs: Iterable[tuple[float, float]], limit: int) -> list[int]:
    """A row for each (left, right) extent, left to right: the first row where it does not
    overlap what is already there; past `limit` rows, the row that frees soonest."""
    ends: list[float] = []
    out = []
    for left, right in xs:
        row = next((i for i, end in enumerate(ends) if end <= left), None)
        if row is None:
            if len(ends) < limit:
                ends.append(right)
                out.append(len(ends) - 1)
                continue
            row = min(range(len(ends)), key=lambda i: ends[i])
        ends[row] = right
        out.append(row)
    return out


def _flags(marks: list[dict[str, Any]], axis: Axis) -> tuple[list[Flag], int]:
    """The marks as flags, their labels in rows that keep them apart."""
    placed = []
    for m in marks:
        x = axis.x(parse_us(m["at"]))
        text = m["kind"] + (f": {m['note']}" if m["note"] else "")
        label = truncated(text, FLAG_CHARS) or ""
        width = len(label) * CHAR_WIDTH + 8
        anchor = "start" if x + width <= axis.x1 else "end"
        extent = (x, x + width) if anchor == "start" else (x - width, x)
        placed.append((x, m, label, anchor, extent))
    rows = _rows((p[4] for p in placed), MAX_FLAG_ROWS)
    flags = [
        Flag(
            x=x,
            y=4.0 + row * ROW + 12.0,
            kind=m["kind"],
            label=label,
            title=f"marked {m['kind']} at {m['local']}" + (f": {m['note']}" if m["note"] else ""),
            anchor=anchor,
        )
        for (x, m, label, anchor, _extent), row in zip(placed, rows, strict=True)
    ]
    return flags, max(rows, default=-1) + 1


def _markers(suspects: list[dict[str, Any]], axis: Axis, top: float) -> tuple[list[Marker], int]:
    """The suspects as numbered markers, stacked in rows where they would overlap."""
    shown = sorted(
        ((axis.x(parse_us(_root(s)["changed_at"])), s) for s in suspects if s["changes"]),
        key=lambda p: (p[0], p[1]["rank"]),
    )
    rows = _rows(((x - MARKER_R - 1, x + MARKER_R + 1) for x, _s in shown), MAX_MARKER_ROWS)
    markers = []
    for (x, s), row in zip(shown, rows, strict=True):
        status = STATUS_WORDS.get(s["status"], str(s["status"]).upper())
        when = _root(s)["changed_local"]
        markers.append(
            Marker(
                x=x,
                y=top + row * ROW + ROW / 2,
                rank=s["rank"],
                status=s["status"],
                href=f"#suspect-{s['rank']}",
                title=f"#{s['rank']} {status}: {s['title']} (changed {when})",
            )
        )
    return markers, max(max(rows, default=0) + 1, 1)


def _lane(lane: dict[str, Any], axis: Axis, y: float) -> Lane:
    name = lane["service"]
    stretches = [_rect(s, axis, y, BAND) for s in lane["stretches"]]
    starts = [
        TickMark(axis.x(parse_us(at)), f"{name} started {local}")
        for at, local in zip(lane["starts"], lane["starts_local"], strict=True)
    ]
    return Lane(name, truncated(name, NAME_CHARS) or "", y, stretches, starts)


def _rect(stretch: dict[str, Any], axis: Axis, y: float, height: float) -> Rect:
    title = f"{stretch['text']}: {stretch['start_local']} to {stretch['end_local']}"
    return _span(
        parse_us(stretch["start"]),
        parse_us(stretch["end"]),
        axis,
        y,
        height,
        stretch["state"],
        title,
    )


def _span(a: int, b: int, axis: Axis, y: float, height: float, kind: str, title: str) -> Rect:
    x0, x1 = axis.x(a), axis.x(b)
    width = max(x1 - x0, 1.0)
    strokes = hatch(x0, y, width, height) if kind == "crash-loop" else ""
    return Rect(x0, y, width, height, kind, title, strokes)


HATCH_STEP = 4.0


def hatch(x: float, y: float, width: float, height: float, step: float = HATCH_STEP) -> str:
    """Diagonal strokes filling a rectangle, `step` apart, as SVG path data.

    Drawn as strokes rather than an SVG pattern: a pattern is filled through
    `url(#id)`, which the report's rule of no url() anywhere keeps out.
    """
    parts = []
    c = x + step
    while c < x + width + height:
        # The line X + (y + height - Y) = c, cut to the rectangle.
        lo, hi = max(0.0, c - (x + width)), min(height, c - x)
        if lo < hi:
            parts.append(f"M{c - lo:.1f} {y + height - lo:.1f}L{c - hi:.1f} {y + height - hi:.1f}")
        c += step
    return "".join(parts)


def _lines(context: dict[str, Any], axis: Axis) -> list[Line]:
    """The baseline (its label left of it) and the first failing check (right of it)."""
    base = context["baseline"]
    out = [
        Line(
            axis.x(parse_us(base["time"])),
            "baseline",
            f"baseline {_clock(base['local'])}",
            f"baseline: snapshot #{base['snapshot']}, {base['local']}",
            "end",
        )
    ]
    if base["unhealthy_at"]:
        at = parse_us(base["unhealthy_at"])
        out.append(
            Line(
                axis.x(at),
                "unhealthy",
                f"first failing check {_clock(local_time(at))}",
                f"first failing health check after the baseline: {local_time(at)}",
                "start",
            )
        )
    cur = context["current"]
    out.append(
        Line(
            axis.x(parse_us(cur["time"])),
            "current",
            "",
            f"current: snapshot #{cur['snapshot']}, {cur['local']}",
            "start",
        )
    )
    return out


def _clock(local: str) -> str:
    """`12:00:05` of `2026-12-03 12:00:05 CET`."""
    parts = local.split()
    return parts[1] if len(parts) > 1 else local


def _summary(context: dict[str, Any]) -> str:
    """What the drawing shows, in words, for a reader who cannot see it."""
    base, cur = context["baseline"], context["current"]
    parts = [f"from the baseline {base['local']} to the current record {cur['local']}"]
    if base["unhealthy_at"]:
        parts.append(f"first failing health check {local_time(parse_us(base['unhealthy_at']))}")
    n = len(context["suspects"])
    parts.append(f"{n} suspect{'' if n == 1 else 's'} at the time of their change")
    return "Timeline " + "; ".join(parts)


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
    before = "unknown"
    for s in over["health"]:
        if s["state"] != before:
            events.append((parse_us(s["start"]), 2, f"health {s['text']}"))
        before = s["state"]
    for lane in over["services"]:
        loops = []
        for s in lane["stretches"]:
            if s["state"] in ("crash-loop", "failed"):
                loops.append((parse_us(s["start"]), parse_us(s["end"])))
                events.append((loops[-1][0], 3, s["text"]))
            elif s["state"] == "stopped":
                events.append((parse_us(s["start"]), 3, f"{lane['service']} not running"))
        for at in map(parse_us, lane["starts"]):
            if not any(a <= at <= b for a, b in loops):
                events.append((at, 3, f"{lane['service']} started"))
    for s in context["suspects"]:
        if s["changes"]:
            status = STATUS_WORDS.get(s["status"], str(s["status"]).upper())
            at = parse_us(_root(s)["changed_at"])
            events.append((at, 4, f"suspect #{s['rank']} {status}: {s['title']}"))
    for b in context["blind_spots"]:
        if b["kind"] == "gap":
            events.append((parse_us(b["first_seen"]), 5, f"recording gap: {b['message']}"))
    if base["unhealthy_at"]:
        events.append((parse_us(base["unhealthy_at"]), 6, "first failing health check"))
    events.append((parse_us(cur["time"]), 7, f"current: snapshot #{cur['snapshot']}"))
    events.sort(key=lambda e: (e[0], e[1]))
    days = events[-1][0] - events[0][0] >= DAY_US or _day(events[0][0], tz) != _day(
        events[-1][0], tz
    )
    shape = "%a %d %b %H:%M:%S" if days else "%H:%M:%S"
    zone = zone_name(tz, events[-1][0])
    return [
        f"{from_us(at).astimezone(tz).strftime(shape)} {zone}  {text}" for at, _o, text in events
    ]


def _day(us: int, tz: tzinfo) -> str:
    return from_us(us).astimezone(tz).strftime("%Y-%m-%d")
