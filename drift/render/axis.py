"""The time axis of the report's drawn timeline: where a moment goes, and which ticks to label.

A window of a week with two incidents is mostly quiet: drawn to scale, its
incidents would be a few pixels each. `make_axis` keeps every stretch
around the moments that matter to scale and folds each long quiet stretch
between them into a narrow break, so one scale serves the whole plot;
`ticks` labels that scale at a readable spacing, from seconds to weeks,
aligned to the reader's zone (the one the report's times are shown in).
Pure: times in microseconds in, x in the SVG's user units out.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

from drift.timespec import from_us, to_us

SECOND_US = 1_000_000
MINUTE_US = 60 * SECOND_US
HOUR_US = 60 * MINUTE_US
DAY_US = 24 * HOUR_US

# Windows up to this long are drawn to scale; longer ones fold their quiet stretches.
FOLD_FROM_US = 6 * HOUR_US
QUIET_SHARE = 1 / 48  # a stretch with nothing in it longer than this share of the window is quiet
KEEP_SHARE = 1 / 4  # of the quiet threshold, kept to scale on each side of a fold
BREAK_WIDTH = 26.0  # what a folded stretch takes on the plot
FOLDS_SHARE = 0.3  # of the plot, at most, taken by folds
MIN_TICK_SPACING = 72.0  # between two labelled ticks: room for "Mon 07 Dec"
TICK_MARGIN = 26.0  # a label centred on a tick closer to an end would spill past it

TICK_STEPS = (
    tuple(s * SECOND_US for s in (1, 2, 5, 10, 15, 30))
    + tuple(m * MINUTE_US for m in (1, 2, 5, 10, 15, 30))
    + tuple(h * HOUR_US for h in (1, 2, 3, 6, 12))
    + tuple(d * DAY_US for d in (1, 2, 7, 14, 28))
)


@dataclass(frozen=True)
class Piece:
    """A stretch of the window and where it is drawn; `folded` when squeezed into a break."""

    t0: int
    t1: int
    x0: float
    x1: float
    folded: bool

    def x(self, t: int) -> float:
        if self.t1 == self.t0:
            return self.x0
        return self.x0 + (self.x1 - self.x0) * (t - self.t0) / (self.t1 - self.t0)


@dataclass(frozen=True)
class Axis:
    """A window [t0, t1] drawn on [x0, x1]: to scale (`scale` units a microsecond) but for
    the folded pieces, each drawn `BREAK_WIDTH` wide."""

    pieces: tuple[Piece, ...]
    scale: float

    @property
    def t0(self) -> int:
        return self.pieces[0].t0

    @property
    def t1(self) -> int:
        return self.pieces[-1].t1

    @property
    def x0(self) -> float:
        return self.pieces[0].x0

    @property
    def x1(self) -> float:
        return self.pieces[-1].x1

    def x(self, t: int) -> float:
        """Where moment `t` is drawn; a moment outside the window sits at its nearer end."""
        if t <= self.t0:
            return self.x0
        if t >= self.t1:
            return self.x1
        starts = [p.t0 for p in self.pieces]
        return self.pieces[max(bisect_right(starts, t) - 1, 0)].x(t)

    @property
    def folds(self) -> list[Piece]:
        return [p for p in self.pieces if p.folded]


def make_axis(t0: int, t1: int, moments: Iterable[int], x0: float, x1: float) -> Axis:
    """The axis of [t0, t1] on [x0, x1], folding the quiet stretches between `moments`.

    A window longer than FOLD_FROM_US folds every stretch with no moment in it
    longer than a threshold (QUIET_SHARE of the window at first, doubled
    while the folds would take more than FOLDS_SHARE of the plot), keeping
    KEEP_SHARE of that threshold to scale on each side so that no moment is
    drawn at a fold.
    """
    if t1 <= t0:
        t1 = t0 + 1
    span = t1 - t0
    points = sorted({t0, t1, *(min(max(t, t0), t1) for t in moments)})
    spans = [(t0, t1, False)]
    if span > FOLD_FROM_US:
        quiet = span * QUIET_SHARE
        while True:
            spans = _fold(points, quiet)
            folds = sum(1 for s in spans if s[2])
            if folds * BREAK_WIDTH <= FOLDS_SHARE * (x1 - x0):
                break
            quiet *= 2
    folds = sum(1 for s in spans if s[2])
    to_scale = sum(b - a for a, b, folded in spans if not folded)
    scale = (x1 - x0 - folds * BREAK_WIDTH) / to_scale
    pieces, x = [], x0
    for a, b, folded in spans:
        width = BREAK_WIDTH if folded else (b - a) * scale
        pieces.append(Piece(a, b, x, x + width, folded))
        x += width
    # The last piece ends exactly at x1, whatever the float sums did.
    last = pieces[-1]
    pieces[-1] = Piece(last.t0, last.t1, last.x0, x1, last.folded)
    return Axis(tuple(pieces), scale)


def _fold(points: list[int], quiet: float) -> list[tuple[int, int, bool]]:
    """(start, end, folded) pieces of [points[0], points[-1]]: each gap between two points
    longer than `quiet` folded but for KEEP_SHARE of `quiet` on each side."""
    keep = int(quiet * KEEP_SHARE)
    spans: list[tuple[int, int, bool]] = []
    start = points[0]
    for a, b in zip(points, points[1:], strict=False):
        if b - a > quiet:
            spans.append((start, a + keep, False))
            spans.append((a + keep, b - keep, True))
            start = b - keep
    spans.append((start, points[-1], False))
    return spans


@dataclass(frozen=True)
class Tick:
    """A labelled moment of the axis: `label` its time, `day` the date where the day changes."""

    at: int
    x: float
    label: str
    day: str | None


def tick_step(scale: float) -> int:
    """The shortest of TICK_STEPS drawn at least MIN_TICK_SPACING apart at `scale`."""
    for step in TICK_STEPS:
        if step * scale >= MIN_TICK_SPACING:
            return step
    return TICK_STEPS[-1]


def ticks(axis: Axis, tz: tzinfo) -> list[Tick]:
    """The axis's labelled ticks: every `tick_step` on the reader's clock (zone `tz`) inside the
    pieces drawn to scale, none closer than MIN_TICK_SPACING to the one before nor than
    TICK_MARGIN to an end."""
    step = tick_step(axis.scale)
    out: list[Tick] = []
    last_day: str | None = None
    for piece in axis.pieces:
        if piece.folded:
            continue
        for at in _aligned(piece.t0, piece.t1, step, tz):
            x = axis.x(at)
            if x < axis.x0 + TICK_MARGIN or x > axis.x1 - TICK_MARGIN:
                continue
            if out and x - out[-1].x < MIN_TICK_SPACING:
                continue
            local = from_us(at).astimezone(tz)
            day = local.strftime("%a %d %b")
            if step >= DAY_US:
                out.append(Tick(at, x, day, None))
                continue
            label = local.strftime("%H:%M:%S" if step < MINUTE_US else "%H:%M")
            out.append(Tick(at, x, label, day if day != last_day else None))
            last_day = day
    return out


def _aligned(t0: int, t1: int, step: int, tz: tzinfo) -> list[int]:
    """The moments of [t0, t1] on a multiple of `step` from local midnight (in zone `tz`).

    Counted on the wall clock, so hours and days fall where the reader's clock
    shows them; a wall time that a clock change skips or repeats is read once.
    """
    first = from_us(t0).astimezone(tz)
    midnight = first.replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=None)
    wall = first.replace(tzinfo=None)
    delta = timedelta(microseconds=step)
    k = int((wall - midnight) / delta)
    out: list[int] = []
    while True:
        naive = midnight + k * delta
        at = to_us(naive.replace(tzinfo=tz))
        k += 1
        if at > t1:
            # A clock change can put one wall time past t1 and the next inside: look ahead once.
            if to_us((midnight + k * delta).replace(tzinfo=tz)) > t1:
                break
            continue
        if at >= t0 and (not out or at > out[-1]):
            out.append(at)
    return out


def zone_name(tz: tzinfo, at: int) -> str:
    """The zone's abbreviation at `at` (CET, UTC), as the report's times end with."""
    return datetime.fromtimestamp(at / SECOND_US, tz=tz).strftime("%Z")
