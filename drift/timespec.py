"""Parse the WHEN argument of drift's commands: ``12:00``, ``2h ago``, ``#57``, ISO 8601 ...

Times come back timezone-aware in UTC (drift's inside time); local time is only
used to read what the user typed. A local time the clock shows twice (DST ends)
or never (DST starts) is refused rather than guessed: during an incident a
baseline silently off by an hour is worse than a one-line error.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from drift.errors import TimeSpecError

__all__ = [
    "When",
    "clock",
    "clock_span",
    "describe_when",
    "human_time",
    "iso_shown",
    "from_us",
    "iso",
    "local_time",
    "local_zone",
    "parse_when",
    "quote_when",
    "to_us",
    "typed_shown",
]

ACCEPTED_FORMS = "use 12:00, noon, yesterday 12:00, 2h ago, an ISO 8601 time, or #57"

_TIME_OF_DAY = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")
_DAY_WORD = re.compile(r"(yesterday|today)(?:\s+(.+))?")
_SNAPSHOT = re.compile(r"#(\S*)")
_RELATIVE = re.compile(r"((?:\d+\s*[a-z]+\s*)+)ago")
_RELATIVE_PART = re.compile(r"(\d+)\s*([a-z]+)")

_UNIT_SECONDS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "week", "weeks"), 7 * 86400),
    **dict.fromkeys(("mo", "month", "months"), 30 * 86400),
}
# In a WHEN (`90m ago`) `m` is minutes, as documented; in a length of history to keep it is
# refused: `--keep 6m` meant six months as often as six minutes, and minutes drop it all.
_AMBIGUOUS_IN_SPAN = "m"

# Snapshot ids are SQLite / PostgreSQL BIGINTs: a larger #N names none, and cannot be queried.
MAX_SNAPSHOT = 2**63 - 1
_MAX_AMOUNT_DIGITS = 20

_ZONEINFO_DIRS = ("/usr/share/zoneinfo/", "/usr/lib/zoneinfo/", "/usr/share/lib/zoneinfo/")


@dataclass(frozen=True)
class When:
    """Either a moment (aware UTC datetime) or a snapshot number (#57)."""

    at: datetime | None = None  # timezone-aware, UTC
    snapshot: int | None = None
    text: str = ""  # what the user typed, for messages
    # How a form that could mean two days was read ("read as yesterday 12:00"), so a
    # report or an error can say which day it took; empty when there was no choice.
    reading: str = ""

    def __post_init__(self) -> None:
        # Callers branch on which field is set; a When with both or neither is a bug upstream.
        if (self.at is None) == (self.snapshot is None):
            raise ValueError("When needs exactly one of `at` and `snapshot`")
        if self.at is not None:
            if self.at.utcoffset() is None:
                raise ValueError("When.at must be timezone-aware")
            object.__setattr__(self, "at", self.at.astimezone(UTC))


def from_us(us: int) -> datetime:
    """Microseconds since the epoch (how the store keeps times) as an aware UTC datetime."""
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


def to_us(moment: datetime) -> int:
    """An aware datetime as microseconds since the epoch."""
    return int(moment.timestamp() * 1_000_000)


@lru_cache(maxsize=4096)
def iso(us: int) -> str:
    """A stored time as ISO 8601 UTC with microseconds, as JSON and reports carry it.

    Cached: a report gives the same few times to thousands of facts (most began
    with the first record)."""
    return from_us(us).isoformat(timespec="microseconds")


HUMAN_FORMAT = "%Y-%m-%d %H:%M:%S %Z"
"""The one form of a moment in every human output (terminal, Markdown, HTML); JSON keeps ISO."""


def human_time(moment: datetime, tz: tzinfo | None = None) -> str:
    """An aware moment as people read it: `2026-12-03 12:00:00 CET`, in `tz` (default local)."""
    local = moment.astimezone(tz if tz is not None else local_zone())
    return local.strftime(HUMAN_FORMAT).rstrip()


def local_time(us: int) -> str:
    """A stored time as people read it on this box: `2026-12-03 12:00:00 CET`."""
    return human_time(from_us(us))


def iso_shown(text: str | None) -> str:
    """An ISO 8601 time (as JSON carries it) in the human form; other text as it is."""
    moment = parse_stored_time(text)
    return human_time(moment) if moment is not None else (text or "")


def clock(us: int) -> str:
    """A stored time as a time of day on this box: `12:00:00`."""
    return from_us(us).astimezone(local_zone()).strftime("%H:%M:%S")


def clock_span(first_us: int, last_us: int) -> tuple[str, str]:
    """Both ends of a range on this box's clock: `12:00:00`, `12:05:00` within one day; each
    with its date (`2026-12-03 23:59:00`, `2026-12-04 00:01:00`) when the range spans two,
    so a window over midnight never reads as running backwards."""
    zone = local_zone()
    first, last = from_us(first_us).astimezone(zone), from_us(last_us).astimezone(zone)
    shape = "%H:%M:%S" if first.date() == last.date() else "%Y-%m-%d %H:%M:%S"
    return first.strftime(shape), last.strftime(shape)


def local_zone() -> tzinfo:
    """The local zone for reading and showing times: $TZ if set, else /etc/localtime, else UTC.

    Resolved once per $TZ and /etc/localtime (the link and the file it names):
    a report shows thousands of times, and reading the zone file for each
    was most of `drift history`'s time.
    """
    return _zone(os.environ.get("TZ"), _file_signature(LOCALTIME))


LOCALTIME = Path("/etc/localtime")


def _file_signature(path: Path) -> tuple[int, ...] | None:
    try:
        link, target = path.lstat(), path.stat()
    except OSError:
        return None
    return (link.st_ino, link.st_mtime_ns, target.st_ino, target.st_mtime_ns, target.st_size)


@lru_cache(maxsize=8)
def _zone(env: str | None, localtime_signature: tuple[int, ...] | None) -> tzinfo:
    if env is not None:
        return _zone_from_tz_variable(env)
    if localtime_signature is not None and LOCALTIME.exists():
        key = _zone_key_for_file(LOCALTIME)
        if key is not None:
            try:
                return ZoneInfo(key)
            except (ZoneInfoNotFoundError, ValueError):
                pass
        with LOCALTIME.open("rb") as f:
            return ZoneInfo.from_file(f, key=key or "localtime")
    return UTC


def parse_when(text: str, *, now: datetime | None = None, tz: tzinfo | None = None) -> When:
    """Read a WHEN argument; raise TimeSpecError with a one-line message if it makes no sense.

    `now` (aware, default the current time) anchors relative forms; `tz` (default
    `local_zone()`) is the zone of times of day and of ISO times without an offset.
    """
    if now is None:
        now = datetime.now(UTC)
    elif now.utcoffset() is None:
        raise ValueError("parse_when: `now` must be timezone-aware")
    now = now.astimezone(UTC)
    if tz is None:
        tz = local_zone()

    typed = text.strip()
    spec = " ".join(typed.lower().split())
    if not spec:
        raise TimeSpecError(f"no time given: {ACCEPTED_FORMS}")
    if spec == "now":
        return When(at=now, text=typed)
    if match := _SNAPSHOT.fullmatch(spec):
        return When(snapshot=_snapshot_number(typed, match.group(1)), text=typed)
    if match := _RELATIVE.fullmatch(spec):
        try:
            return When(at=now - _duration(typed, match.group(1)), text=typed)
        except OverflowError:
            raise _not_understood(typed, "that is too long ago") from None
    return _on_the_clock(typed, spec, now, tz)


def _snapshot_number(typed: str, digits: str) -> int:
    """The N of `#N`, or a TimeSpecError saying why it names no snapshot."""
    if not digits.isascii() or not digits.isdigit():
        raise _not_understood(typed, "a snapshot is # followed by a positive number")
    # Leading zeros dropped and the length checked before int(), which refuses to read
    # a number of over 4,300 digits.
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(MAX_SNAPSHOT)) or int(significant) > MAX_SNAPSHOT:
        raise _not_understood(typed, "no snapshot has a number that large")
    if int(significant) < 1:
        raise _not_understood(typed, "snapshot numbers start at #1")
    return int(significant)


def _on_the_clock(typed: str, spec: str, now: datetime, tz: tzinfo) -> When:
    """A WHEN read on the local clock and calendar: `yesterday 12:00`, `midnight`, `12:00`,
    or an ISO 8601 time."""
    today = now.astimezone(tz).date()

    if match := _DAY_WORD.fullmatch(spec):
        day = today - timedelta(days=1) if match.group(1) == "yesterday" else today
        rest = match.group(2)
        if rest is None or rest == "midnight":
            return When(at=_start_of_day(day, tz), text=typed)
        clock = _clock_time(typed, rest)
        if clock is None:
            raise _not_understood(typed)
        return When(at=_resolve_exactly(datetime.combine(day, clock), tz), text=typed)

    if spec == "midnight":
        return When(at=_start_of_day(today, tz), text=typed)

    clock = _clock_time(typed, spec)
    if clock is not None:
        at = _most_recent(clock, now, tz)
        if at.astimezone(tz).date() < today:
            # Later than now today: the user means yesterday, and should be told so.
            return When(at=at, text=typed, reading=f"read as yesterday {typed}")
        return When(at=at, text=typed)

    return When(at=_parse_iso(typed, tz), text=typed)


def describe_when(w: When, tz: tzinfo | None = None) -> str:
    """A short human form: ``2026-12-02 12:00:00 CET`` in local time, or ``snapshot #57``."""
    if w.snapshot is not None:
        return f"snapshot #{w.snapshot}"
    assert w.at is not None  # guaranteed by When.__post_init__
    return human_time(w.at, tz)


def typed_shown(w: When, tz: tzinfo | None = None) -> str:
    """What the user typed, as a header repeats it: `12:00`, `2h ago`, `#57` as typed; an ISO
    8601 time (often pasted from JSON) in the one human form, `2026-12-02 12:00:00 CET`."""
    if not w.text or w.at is None:
        return w.text or describe_when(w, tz)
    try:
        datetime.fromisoformat(w.text.strip().upper())
    except ValueError:
        return w.text
    return describe_when(w, tz)


def quote_when(w: When, tz: tzinfo | None = None) -> str:
    """What was typed and what it was read as: ``12:00 (read as yesterday 12:00, 2026-12-01
    12:00:00 CET)``; a snapshot number stays as typed."""
    if w.snapshot is not None:
        return w.text or f"#{w.snapshot}"
    parts = [p for p in (w.reading, describe_when(w, tz)) if p]
    return f"{w.text} ({', '.join(parts)})" if w.text else describe_when(w, tz)


CLOCK_SKEW = timedelta(minutes=1)
"""How far ahead of this machine's clock a time may be and still count as now."""


def refuse_future(w: When | None, label: str, *, now: datetime | None = None) -> None:
    """Raise a TimeSpecError when `w` names a time that has not happened yet.

    A mark or a state "at" a future time is almost always a mistyped date;
    taken at its word it would mark, or show, the latest record as that time.
    """
    if w is None or w.at is None:
        return
    current = now if now is not None else datetime.now(UTC)
    if w.at > current + CLOCK_SKEW:
        shown = describe_when(When(at=current))
        raise TimeSpecError(f"{label} {quote_when(w)} is in the future (now is {shown})")


# --- helpers -----------------------------------------------------------------


def parse_stored_time(text: str | None) -> datetime | None:
    """A time as facts store it (ISO 8601 with its zone, ``started_at``), else None.

    None for no text, text that is not ISO 8601, and a time without a zone,
    which cannot be placed on the timeline.
    """
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _not_understood(typed: str, reason: str = "") -> TimeSpecError:
    """The one error message shape: quote the input (escaped, so it stays on one line)."""
    shown = typed if len(typed) <= 60 else typed[:57] + "..."
    middle = f"{reason}; " if reason else ""
    return TimeSpecError(f"cannot understand time {shown!r}: {middle}{ACCEPTED_FORMS}")


def _clock_time(typed: str, spec: str) -> time | None:
    """`12:00`, `9:05`, `12:00:30`, `noon` as a time of day; None if it is not one."""
    if spec == "noon":
        return time(12, 0)
    match = _TIME_OF_DAY.fullmatch(spec)
    if match is None:
        return None
    hour, minute = int(match.group(1)), int(match.group(2))
    second = int(match.group(3) or 0)
    if hour > 23:
        raise _not_understood(typed, "hours run from 0 to 23")
    if minute > 59 or second > 59:
        raise _not_understood(typed, "minutes and seconds run from 0 to 59")
    return time(hour, minute, second)


def _duration(typed: str, parts: str) -> timedelta:
    """Sum `1h30m` / `2 hours` / `10 min` into one timedelta."""
    seconds = 0
    for amount, unit in _RELATIVE_PART.findall(parts):
        if unit not in _UNIT_SECONDS:
            raise _not_understood(typed, f"unknown unit {unit!r} (use s, m, h, d, w or mo)")
        amount = amount.lstrip("0") or "0"
        if len(amount) > _MAX_AMOUNT_DIGITS:  # past any timedelta; int() refuses 4,300 digits
            raise OverflowError(amount)
        seconds += int(amount) * _UNIT_SECONDS[unit]
    return timedelta(seconds=seconds)  # may raise OverflowError; the caller words it


def _local_instants(wall: datetime, tz: tzinfo) -> list[datetime]:
    """Every UTC instant at which the clock in `tz` shows `wall` (naive): 1 normally,
    2 when DST ends (the hour happens twice), 0 when DST starts (the hour is skipped)."""
    instants: list[datetime] = []
    for fold in (0, 1):
        # OverflowError at the ends of datetime's range: the caller says "out of range".
        instant = wall.replace(tzinfo=tz, fold=fold).astimezone(UTC)
        # In a gap neither fold survives the round trip: the clock never shows `wall`.
        if instant.astimezone(tz).replace(tzinfo=None) == wall and instant not in instants:
            instants.append(instant)
    return instants


def _zone_name(tz: tzinfo, wall: datetime) -> str:
    key = getattr(tz, "key", None)
    return key if key else (wall.replace(tzinfo=tz).tzname() or str(tz))


def _iso_with_offset(wall: datetime, offset: timedelta | None) -> str:
    """`2026-03-29T02:30+01:00`: the wall time (no seconds if zero) with an explicit offset."""
    clock = wall.strftime("%H:%M:%S" if wall.second else "%H:%M")
    total = int((offset or timedelta(0)).total_seconds())
    sign = "-" if total < 0 else "+"
    hours, minutes = divmod(abs(total) // 60, 60)
    return f"{wall.date().isoformat()}T{clock}{sign}{hours:02d}:{minutes:02d}"


def _dst_error(wall: datetime, tz: tzinfo, instants: list[datetime]) -> TimeSpecError:
    shown = wall.strftime("%Y-%m-%d %H:%M:%S" if wall.second else "%Y-%m-%d %H:%M")
    zone = _zone_name(tz, wall)
    if not instants:
        example = _iso_with_offset(wall, wall.replace(tzinfo=tz, fold=0).utcoffset())
        return TimeSpecError(
            f"{shown} does not exist in {zone} (DST gap); give an explicit offset, e.g. {example}"
        )
    examples = " or ".join(_iso_with_offset(wall, i.astimezone(tz).utcoffset()) for i in instants)
    return TimeSpecError(
        f"{shown} happens twice in {zone} (DST ends); give an explicit offset: {examples}"
    )


def _resolve_exactly(wall: datetime, tz: tzinfo) -> datetime:
    """The one instant the local clock showed `wall`, or a TimeSpecError naming the DST problem."""
    instants = _local_instants(wall, tz)
    if len(instants) != 1:
        raise _dst_error(wall, tz, instants)
    return instants[0]


def _start_of_day(day: date, tz: tzinfo) -> datetime:
    """The first instant of `day` in `tz`.

    Not a DST error when midnight is skipped or repeated (some zones switch at
    00:00): the user named a day, and its start is well defined. fold=0 is the
    earlier of a repeated midnight, and for a skipped one it maps to the
    transition itself, which is where that day begins.
    """
    return datetime.combine(day, time(0), tzinfo=tz).replace(fold=0).astimezone(UTC)


def _most_recent(clock: time, now: datetime, tz: tzinfo) -> datetime:
    """The last time the local clock showed `clock`: today, or yesterday if that is still ahead."""
    now_local = now.astimezone(tz)
    today = datetime.combine(now_local.date(), clock)
    instants = _local_instants(today, tz)
    if instants:
        if all(i > now for i in instants):
            return _resolve_exactly(today - timedelta(days=1), tz)
        if len(instants) == 1:
            return instants[0]
        raise _dst_error(today, tz, instants)
    # Skipped today: if the clock has not reached it yet the user means yesterday.
    if clock > now_local.time():
        return _resolve_exactly(today - timedelta(days=1), tz)
    raise _dst_error(today, tz, instants)


def _parse_iso(typed: str, tz: tzinfo) -> datetime:
    """ISO 8601 date or date-time; without an offset it is local time in `tz`."""
    iso = typed.upper()  # fromisoformat wants the `T` and `Z` in capitals
    try:
        day = date.fromisoformat(iso)
    except ValueError:
        day = None
    try:
        if day is not None:
            return _start_of_day(day, tz)
        try:
            parsed = datetime.fromisoformat(iso)
        except ValueError:
            raise _not_understood(typed) from None
        if parsed.utcoffset() is None:
            return _resolve_exactly(parsed, tz)
        return parsed.astimezone(UTC)
    except OverflowError:
        # 0001-01-01 east of UTC, 9999-12-31 west of it: before or after any UTC datetime.
        raise _not_understood(typed, "out of range") from None


def _zone_from_tz_variable(value: str) -> tzinfo:
    """$TZ as glibc reads it: a zone name, or a file path; a leading ':' is allowed."""
    name = value[1:] if value.startswith(":") else value
    if not name:
        return UTC  # an empty TZ means UTC to the C library too
    try:
        if name.startswith("/"):
            path = Path(name)
            with path.open("rb") as f:
                return ZoneInfo.from_file(f, key=_zone_key_for_file(path) or name)
        return ZoneInfo(name)
    except (OSError, ValueError, ZoneInfoNotFoundError):
        # A POSIX rule string ("CET-1CEST,M3.5.0,M10.5.0/3") or a bad name: take the
        # offset the C library derived from it now, without DST detection.
        return datetime.now().astimezone().tzinfo or UTC


def _zone_key_for_file(path: Path) -> str | None:
    """`Europe/Berlin` for a zone file under a zoneinfo directory (following symlinks)."""
    try:
        target = str(path.resolve())
    except OSError:
        return None
    for base in _ZONEINFO_DIRS:
        if target.startswith(base):
            return target[len(base) :]
    if path == Path("/etc/localtime"):
        try:
            key = Path("/etc/timezone").read_text().strip()  # Debian keeps the name here
        except OSError:
            return None
        return key or None
    return None


_SPAN = re.compile(r"\s*((?:\d+\s*[a-z]+\s*)+)")


def parse_span(text: str) -> timedelta:
    """A length of time to keep: `90d`, `12w`, `36h`, `6mo`, `30min`, `1w 3d` (no `ago`: it
    is a length, not a moment); TimeSpecError for anything else, zero included, and for `m`,
    which could be minutes or months."""
    found = _SPAN.fullmatch(text.lower())
    if found is None:
        raise TimeSpecError(f"{text!r} is not a length of time: use a number and a unit, like 90d")
    for amount, unit in _RELATIVE_PART.findall(found[1]):
        if unit == _AMBIGUOUS_IN_SPAN:
            raise TimeSpecError(
                f"{text!r} is ambiguous: say {amount}min for minutes or {amount}mo for months"
            )
    try:
        span = _duration(text, found[1])
    except TimeSpecError:
        raise TimeSpecError(
            f"{text!r} is not a length of time: units are s, min, h, d, w and mo, like 90d"
        ) from None
    except OverflowError:
        raise TimeSpecError(f"{text!r} is longer than any history") from None
    if span <= timedelta(0):
        raise TimeSpecError(f"{text!r} keeps nothing: give a length greater than 0")
    return span
