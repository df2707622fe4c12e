"""The postmortem at a glance: the report's timeline as shapes with coordinates.

`picture` lays out an investigation's plain context (what the templates
read) as rows of a drawing: the marks as flags, the suspects as numbered
markers at the time of their change, the health checks as a band, one lane
per service (runs, restarts, crash loops), the baseline and the first
failing check as vertical lines, and the time axis (drift.render.axis).
report.html.j2 turns the shapes into inline SVG (autoescaped: every text here
is plain text); drift.render.glance tells the same in one line per event for
the Markdown report. Shapes too narrow to tell apart are drawn as one (`thin`),
so a check that flapped for months is not a hundred thousand rectangles.
Pure: a context in, shapes out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from drift.analysis.diff import duration_text
from drift.display import truncated
from drift.render.axis import Axis, Tick, make_axis, ticks, zone_name
from drift.timespec import local_time, local_zone, to_us

WIDTH = 1120.0
GUTTER = 128.0  # the lanes' names, left of the plot
RIGHT = 12.0
ROW = 18.0  # a row of flags or markers
BAND = 14.0  # the health band and each service's lane
LANE_GAP = 5.0
MARKER_R = 7.5
MARKER_GAP = 2.0  # between two markers' circles, whose outline is 1.5 wide
# Rows of markers at most: the ten most likely suspects always fit, even all at one moment.
MAX_MARKER_ROWS = 10
MAX_MARKER_RANK = 99  # a number of three digits does not fit in a marker
MAX_FLAG_ROWS = 3
CHAR_WIDTH = 6.2  # an 11-unit sans-serif character, on average: enough to keep labels apart
NAME_CHARS = 19  # a lane's name in the gutter
FLAG_CHARS = 30

STATUS_WORDS = {
    "live": "LIVE",
    "failing": "FAILING",
    "pending": "PENDING",
    "unsourced": "UNSOURCED",
    "launched": "LAUNCHED",
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
    undrawn: int = 0  # suspects with no room for a marker: "+N more", linked to the list


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
    markers, rows, undrawn = _markers(context["suspects"], axis, top)
    health_y = top + rows * ROW + 4.0
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
        health=thin([_rect(s, axis, health_y, BAND) for s in over["health"]])
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
        summary=_summary(context, undrawn),
        marker_rows=rows,
        undrawn=undrawn,
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
    return [root_change(s)["changed_at"] for s in suspects if s["changes"]]


def root_change(suspect: dict[str, Any]) -> dict[str, Any]:
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


def _markers(
    suspects: list[dict[str, Any]], axis: Axis, top: float
) -> tuple[list[Marker], int, int]:
    """The suspects as numbered markers, each in the first row where it overlaps none.

    Placed most likely first, so #1 is in the top row at its time and the ten most
    likely are always drawn; a marker that finds no room in MAX_MARKER_ROWS is left
    out and counted. Returned in drawing order, #1 last (on top), with the rows used
    and how many suspects are not drawn.
    """
    timed = sorted((s for s in suspects if s["changes"]), key=lambda s: s["rank"])
    xs = [axis.x(parse_us(root_change(s)["changed_at"])) for s in timed]
    rows = stack_markers(
        [x if s["rank"] <= MAX_MARKER_RANK else None for x, s in zip(xs, timed, strict=True)],
        MAX_MARKER_ROWS,
    )
    markers = []
    for x, s, row in zip(xs, timed, rows, strict=True):
        if row is None:
            continue
        status = STATUS_WORDS.get(s["status"], str(s["status"]).upper())
        when = root_change(s)["changed_local"]
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
    used = max((r for r in rows if r is not None), default=0) + 1
    return markers[::-1], used, len(timed) - len(markers)


def stack_markers(xs: list[float | None], limit: int) -> list[int | None]:
    """A row for each marker centred at x, in order of precedence: the first of `limit` rows
    where its circle stays MARKER_GAP clear of every circle already there, or None when no
    row has room (or x is None: not to be drawn). No two markers in a row overlap, so none
    hides another, whatever the number at one moment."""
    apart = 2 * MARKER_R + MARKER_GAP
    placed: list[list[float]] = []
    out: list[int | None] = []
    for x in xs:
        row = None
        if x is not None:
            row = next(
                (i for i, row_xs in enumerate(placed) if all(abs(x - p) >= apart for p in row_xs)),
                None,
            )
            if row is None and len(placed) < limit:
                placed.append([])
                row = len(placed) - 1
            if row is not None:
                placed[row].append(x)
        out.append(row)
    return out


def _lane(lane: dict[str, Any], axis: Axis, y: float) -> Lane:
    name = lane["service"]
    drawn = [_rect(s, axis, y, BAND) for s in lane["stretches"]]
    # Runs and stops follow each other; a crash loop lies over them, thinned on its own.
    failing = ("crash-loop", "failed")
    stretches = thin([r for r in drawn if r.kind not in failing]) + thin(
        [r for r in drawn if r.kind in failing]
    )
    starts: list[TickMark] = []
    many = 1
    for at, local in zip(lane["starts"], lane["starts_local"], strict=True):
        x = axis.x(parse_us(at))
        if starts and x - starts[-1].x < MIN_APART:
            # Starts closer than a stroke's width: one stroke that says how many it is.
            many += 1
            first = starts[-1].title.split(" started ", 1)[1].split(" (", 1)[0]
            starts[-1] = TickMark(
                starts[-1].x, f"{name} started {first} ({many} starts to {local})"
            )
            continue
        many = 1
        starts.append(TickMark(x, f"{name} started {local}"))
    return Lane(name, truncated(name, NAME_CHARS) or "", y, stretches, starts)


MIN_APART = 1.5  # closer than this, two shapes are one to the eye: drawn as one
# Which state a stretch too short to see on its own takes from those it is drawn with.
_WORST = ("failing", "crash-loop", "failed", "unknown", "stopped", "passing", "running")


def thin(rects: list[Rect]) -> list[Rect]:
    """`rects` (in time order, side by side) with those too narrow to tell apart drawn as one,
    in the worst state among them: a check that flapped every minute for months is a band of
    a thousand rectangles, not a hundred thousand, and every failure still shows."""
    out: list[Rect] = []
    groups: list[list[Rect]] = []
    for r in rects:
        last = out[-1] if out else None
        if last is not None and 0 <= r.x - last.x and r.x + r.width - last.x < MIN_APART:
            groups[-1].append(r)
            worst = min(groups[-1], key=lambda q: _WORST.index(q.kind) if q.kind in _WORST else 0)
            title = f"{len(groups[-1])} stretches too short to draw apart, the worst: {worst.title}"
            out[-1] = Rect(
                last.x, last.y, r.x + r.width - last.x, last.height, worst.kind, title, ""
            )
        else:
            out.append(r)
            groups.append([r])
    return [
        r
        if r.kind != "crash-loop" or r.hatch
        else Rect(r.x, r.y, r.width, r.height, r.kind, r.title, hatch(r.x, r.y, r.width, r.height))
        for r in out
    ]


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
        already = base["failing_at_baseline"]
        out.append(
            Line(
                axis.x(at),
                "unhealthy",
                f"{'still' if already else 'first'} failing check {_clock(local_time(at))}",
                f"failing already at the baseline ({already}), and at {local_time(at)}"
                if already
                else f"first failing health check after the baseline: {local_time(at)}",
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


def _summary(context: dict[str, Any], undrawn: int) -> str:
    """What the drawing shows, in words, for a reader who cannot see it."""
    base, cur = context["baseline"], context["current"]
    parts = [f"from the baseline {base['local']} to the current record {cur['local']}"]
    if base["failing_at_baseline"]:
        parts.append(f"failing already at the baseline: {base['failing_at_baseline']}")
    elif base["unhealthy_at"]:
        parts.append(f"first failing health check {local_time(parse_us(base['unhealthy_at']))}")
    n = len(context["suspects"])
    parts.append(f"{n} suspect{'' if n == 1 else 's'} at the time of their change")
    if undrawn:
        parts.append(f"{undrawn} of them not drawn for lack of room, all in the list")
    return "Timeline " + "; ".join(parts)
