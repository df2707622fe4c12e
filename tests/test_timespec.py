"""WHEN parsing: every accepted form, the DST refusals, and the one-line errors.

Every test passes `now` and `tz` explicitly so the machine's clock and zone do
not matter; only test_local_zone_honours_tz touches $TZ.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drift.errors import TimeSpecError
from drift.timespec import When, describe_when, local_zone, parse_when, quote_when

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")

# 15:00 in Berlin (CET), 09:00 in New York (EST), 14:00 UTC.
NOW = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "tz", "expected"),
    [
        # times of day, today when already past
        ("12:00", BERLIN, utc(2026, 12, 2, 11, 0)),
        ("12:00:30", BERLIN, utc(2026, 12, 2, 11, 0, 30)),
        ("9:05", BERLIN, utc(2026, 12, 2, 8, 5)),
        ("09:05", BERLIN, utc(2026, 12, 2, 8, 5)),
        ("15:00", BERLIN, utc(2026, 12, 2, 14, 0)),  # exactly now is still today
        ("8:00", NEW_YORK, utc(2026, 12, 2, 13, 0)),
        ("12:00", UTC, utc(2026, 12, 2, 12, 0)),
        # ... and yesterday when later than now
        ("15:00:01", BERLIN, utc(2026, 12, 1, 14, 0, 1)),
        ("16:00", BERLIN, utc(2026, 12, 1, 15, 0)),
        ("12:00", NEW_YORK, utc(2026, 12, 1, 17, 0)),
        ("9:05", NEW_YORK, utc(2026, 12, 1, 14, 5)),
        ("14:30", UTC, utc(2026, 12, 1, 14, 30)),
        # words
        ("noon", BERLIN, utc(2026, 12, 2, 11, 0)),
        ("noon", NEW_YORK, utc(2026, 12, 1, 17, 0)),
        ("midnight", BERLIN, utc(2026, 12, 1, 23, 0)),
        ("midnight", NEW_YORK, utc(2026, 12, 2, 5, 0)),
        ("yesterday", BERLIN, utc(2026, 11, 30, 23, 0)),
        ("yesterday", NEW_YORK, utc(2026, 12, 1, 5, 0)),
        ("yesterday", UTC, utc(2026, 12, 1, 0, 0)),
        ("yesterday 12:00", BERLIN, utc(2026, 12, 1, 11, 0)),
        ("yesterday noon", BERLIN, utc(2026, 12, 1, 11, 0)),
        ("yesterday midnight", BERLIN, utc(2026, 11, 30, 23, 0)),
        ("yesterday 23:59:59", NEW_YORK, utc(2026, 12, 2, 4, 59, 59)),
        ("today 12:00", BERLIN, utc(2026, 12, 2, 11, 0)),
        ("today", BERLIN, utc(2026, 12, 1, 23, 0)),
        ("now", BERLIN, NOW),
        # case and spacing do not matter
        ("  Yesterday   NOON ", BERLIN, utc(2026, 12, 1, 11, 0)),
        ("NOW", UTC, NOW),
        # ISO 8601: without an offset it is local time
        ("2026-12-02T12:00", BERLIN, utc(2026, 12, 2, 11, 0)),
        ("2026-12-02 12:00:00", BERLIN, utc(2026, 12, 2, 11, 0)),
        ("2026-12-02T12:00", NEW_YORK, utc(2026, 12, 2, 17, 0)),
        ("2026-12-02T12:00:00Z", BERLIN, utc(2026, 12, 2, 12, 0)),
        ("2026-12-02t12:00:00z", BERLIN, utc(2026, 12, 2, 12, 0)),
        ("2026-12-02T12:00:00+02:00", BERLIN, utc(2026, 12, 2, 10, 0)),
        ("2026-12-02T12:00:00-05:00", UTC, utc(2026, 12, 2, 17, 0)),
        ("2026-12-02", BERLIN, utc(2026, 12, 1, 23, 0)),
        ("2026-12-02", NEW_YORK, utc(2026, 12, 2, 5, 0)),
        ("2026-07-01T12:00", BERLIN, utc(2026, 7, 1, 10, 0)),  # summer time, +02:00
        # relative
        ("2h ago", BERLIN, utc(2026, 12, 2, 12, 0)),
        ("90m ago", BERLIN, utc(2026, 12, 2, 12, 30)),
        ("30s ago", BERLIN, utc(2026, 12, 2, 13, 59, 30)),
        ("1d ago", BERLIN, utc(2026, 12, 1, 14, 0)),
        ("1h30m ago", BERLIN, utc(2026, 12, 2, 12, 30)),
        ("2 hours ago", BERLIN, utc(2026, 12, 2, 12, 0)),
        ("5 minutes ago", BERLIN, utc(2026, 12, 2, 13, 55)),
        ("10 min ago", NEW_YORK, utc(2026, 12, 2, 13, 50)),
        ("1 hour 30 minutes ago", UTC, utc(2026, 12, 2, 12, 30)),
        ("2H AGO", UTC, utc(2026, 12, 2, 12, 0)),
    ],
)
def test_moments(text: str, tz: ZoneInfo, expected: datetime) -> None:
    when = parse_when(text, now=NOW, tz=tz)
    assert when.at == expected
    assert when.at is not None and when.at.tzinfo is UTC
    assert when.snapshot is None
    assert when.text == text.strip()


@pytest.mark.parametrize(("text", "number"), [("#57", 57), ("#1", 1), (" #0012 ", 12)])
def test_snapshot_numbers(text: str, number: int) -> None:
    assert parse_when(text, now=NOW, tz=UTC) == When(snapshot=number, text=text.strip())


def test_today_is_the_local_date_not_the_utc_date() -> None:
    # 00:30 in Berlin is still the previous day in UTC.
    just_after_midnight = datetime(2026, 12, 2, 0, 30, tzinfo=BERLIN)
    assert parse_when("yesterday", now=just_after_midnight, tz=BERLIN).at == utc(2026, 11, 30, 23)
    assert parse_when("midnight", now=just_after_midnight, tz=BERLIN).at == utc(2026, 12, 1, 23)
    assert parse_when("23:00", now=just_after_midnight, tz=BERLIN).at == utc(2026, 12, 1, 22)
    assert parse_when("0:15", now=just_after_midnight, tz=BERLIN).at == utc(2026, 12, 1, 23, 15)


def test_default_now_is_the_current_time() -> None:
    before = datetime.now(UTC)
    when = parse_when("2h ago", tz=UTC)
    after = datetime.now(UTC)
    assert when.at is not None
    assert before - timedelta(hours=2) <= when.at <= after - timedelta(hours=2)


# --- DST: refuse to guess --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tz", "now", "words"),
    [
        ("2026-03-29 02:30", BERLIN, NOW, ["does not exist", "Europe/Berlin", "+01:00"]),
        ("2026-03-29T02:30", BERLIN, NOW, ["does not exist", "2026-03-29T02:30+01:00"]),
        ("2026-10-25 02:30", BERLIN, NOW, ["twice", "Europe/Berlin", "+02:00", "+01:00"]),
        ("2026-03-08 02:30", NEW_YORK, NOW, ["does not exist", "America/New_York", "-05:00"]),
        ("2026-11-01 01:30", NEW_YORK, NOW, ["twice", "America/New_York", "-04:00", "-05:00"]),
        # bare times of day on the day of the change
        ("02:30", BERLIN, datetime(2026, 3, 29, 10, 0, tzinfo=BERLIN), ["does not exist"]),
        ("02:30", BERLIN, datetime(2026, 10, 25, 12, 0, tzinfo=BERLIN), ["twice"]),
        ("2:30", NEW_YORK, datetime(2026, 3, 8, 12, 0, tzinfo=NEW_YORK), ["does not exist"]),
        ("1:30", NEW_YORK, datetime(2026, 11, 1, 12, 0, tzinfo=NEW_YORK), ["twice"]),
        # ... and the day after, through "yesterday"
        ("yesterday 02:30", BERLIN, datetime(2026, 3, 30, 9, 0, tzinfo=BERLIN), ["not exist"]),
        ("yesterday 02:30", BERLIN, datetime(2026, 10, 26, 9, 0, tzinfo=BERLIN), ["twice"]),
    ],
)
def test_dst_gaps_and_repeats_ask_for_an_offset(
    text: str, tz: ZoneInfo, now: datetime, words: list[str]
) -> None:
    with pytest.raises(TimeSpecError) as caught:
        parse_when(text, now=now, tz=tz)
    message = str(caught.value)
    assert "\n" not in message
    assert "explicit offset" in message
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    ("text", "tz", "now", "expected"),
    [
        # the explicit offsets the error messages suggest are accepted
        ("2026-10-25T02:30+02:00", BERLIN, NOW, utc(2026, 10, 25, 0, 30)),
        ("2026-10-25T02:30+01:00", BERLIN, NOW, utc(2026, 10, 25, 1, 30)),
        ("2026-11-01T01:30-05:00", NEW_YORK, NOW, utc(2026, 11, 1, 6, 30)),
        # just around the change the wall clock is unambiguous
        ("2026-03-29 03:00", BERLIN, NOW, utc(2026, 3, 29, 1, 0)),
        ("2026-03-29 01:59:59", BERLIN, NOW, utc(2026, 3, 29, 0, 59, 59)),
        ("2026-10-25 03:00", BERLIN, NOW, utc(2026, 10, 25, 2, 0)),
        ("2026-03-29", BERLIN, NOW, utc(2026, 3, 28, 23, 0)),
        # before the skipped hour has come round, 02:30 means yesterday's
        ("02:30", BERLIN, datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN), utc(2026, 3, 28, 1, 30)),
        # before the repeated hour, too
        ("02:30", BERLIN, datetime(2026, 10, 25, 1, 0, tzinfo=BERLIN), utc(2026, 10, 24, 0, 30)),
        ("2h ago", BERLIN, datetime(2026, 3, 29, 3, 30, tzinfo=BERLIN), utc(2026, 3, 28, 23, 30)),
    ],
)
def test_around_dst_changes(text: str, tz: ZoneInfo, now: datetime, expected: datetime) -> None:
    assert parse_when(text, now=now, tz=tz).at == expected


def test_a_day_whose_midnight_is_skipped_starts_when_the_clock_jumps() -> None:
    # Brazil moved its clocks at 00:00 (2018-11-04 00:00 -03 became 01:00 -02).
    sao_paulo = ZoneInfo("America/Sao_Paulo")
    assert parse_when("2018-11-04", now=NOW, tz=sao_paulo).at == utc(2018, 11, 4, 3, 0)
    with pytest.raises(TimeSpecError, match="does not exist"):
        parse_when("2018-11-04 00:30", now=NOW, tz=sao_paulo)


# --- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "25:00",
        "24:00",
        "12:60",
        "12:00:60",
        "#0",
        "#x",
        "#",
        "#-3",
        "tea time",
        "-5m ago",
        "5m",
        "ago",
        "5 parsecs ago",
        "yesterday tea",
        "today 25:00",
        "2026-13-01",
        "2026-12-02T12:00+25:00",
        "12:00\nrm -rf /",
        "9" * 40 + "d ago",
        "1000000d ago",
        "x" * 500,
        # Found by tests/test_fuzz.py: each raised a Python error, not drift's.
        "9" * 5000 + "m ago",  # more digits than int() reads
        "#" + "0" * 5000,
        "#9223372036854775808",  # past any snapshot id the database can hold
        "0001-01-01",  # its midnight in Berlin is before any UTC datetime
        "0001-01-01T00:30",
    ],
)
def test_bad_input_is_a_one_line_error(text: str) -> None:
    with pytest.raises(TimeSpecError) as caught:
        parse_when(text, now=NOW, tz=BERLIN)
    message = str(caught.value)
    assert "\n" not in message
    assert len(message) < 300
    assert "12:00, noon, yesterday 12:00, 2h ago, an ISO 8601 time, or #57" in message
    if text.strip() and len(text) < 50 and "\n" not in text:
        assert repr(text.strip()) in message


def test_error_message_reads_well() -> None:
    with pytest.raises(TimeSpecError) as caught:
        parse_when("tea time", now=NOW, tz=BERLIN)
    assert str(caught.value) == (
        "cannot understand time 'tea time': "
        "use 12:00, noon, yesterday 12:00, 2h ago, an ISO 8601 time, or #57"
    )


def test_when_holds_exactly_one_of_moment_and_snapshot() -> None:
    with pytest.raises(ValueError):
        When()
    with pytest.raises(ValueError):
        When(at=NOW, snapshot=3)
    with pytest.raises(ValueError):
        When(at=datetime(2026, 12, 2, 12, 0))  # naive
    assert When(at=datetime(2026, 12, 2, 12, 0, tzinfo=BERLIN)).at == utc(2026, 12, 2, 11, 0)


# --- describe_when ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("when", "tz", "expected"),
    [
        (When(at=utc(2026, 12, 2, 11, 0)), BERLIN, "2026-12-02 12:00:00 CET"),
        (When(at=utc(2026, 7, 1, 10, 0)), BERLIN, "2026-07-01 12:00:00 CEST"),
        (When(at=utc(2026, 12, 2, 17, 0)), NEW_YORK, "2026-12-02 12:00:00 EST"),
        (When(at=utc(2026, 12, 2, 12, 0)), UTC, "2026-12-02 12:00:00 UTC"),
        (When(snapshot=57, text="#57"), BERLIN, "snapshot #57"),
    ],
)
def test_describe_when(when: When, tz: ZoneInfo, expected: str) -> None:
    assert describe_when(when, tz) == expected


# --- the local zone --------------------------------------------------------------------


def test_local_zone_honours_tz(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, key in [
        ("America/New_York", "America/New_York"),
        (":Europe/Berlin", "Europe/Berlin"),
        ("/usr/share/zoneinfo/Europe/Berlin", "Europe/Berlin"),
    ]:
        monkeypatch.setenv("TZ", value)
        assert getattr(local_zone(), "key", None) == key
    monkeypatch.setenv("TZ", "")
    assert local_zone().utcoffset(NOW) == timedelta(0)

    # With no tz argument, parse_when and describe_when read times in $TZ.
    monkeypatch.setenv("TZ", "America/New_York")
    when = parse_when("8:00", now=NOW)
    assert when.at == utc(2026, 12, 2, 13, 0)
    assert describe_when(when) == "2026-12-02 08:00:00 EST"


# --- properties ------------------------------------------------------------------------

# Whole minutes: an ISO 8601 offset is +hh:mm (a sub-second offset has no meaning).
fixed_offsets = st.builds(
    lambda minutes: timezone(timedelta(minutes=minutes)),
    st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59),
)
aware_datetimes = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=fixed_offsets
)
zones = st.sampled_from([BERLIN, NEW_YORK, UTC])
nows = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@given(d=aware_datetimes, tz=zones)
def test_iso_round_trip(d: datetime, tz: ZoneInfo) -> None:
    assert parse_when(d.isoformat(), now=NOW, tz=tz).at == d
    assert parse_when(d.isoformat(sep=" "), now=NOW, tz=tz).at == d


@given(minutes=st.integers(min_value=0, max_value=10**7), now=nows)
def test_minutes_ago_is_that_many_minutes_before_now(minutes: int, now: datetime) -> None:
    when = parse_when(f"{minutes}m ago", now=now, tz=BERLIN)
    assert when.at is not None
    assert now - when.at == timedelta(minutes=minutes)


@given(hour=st.integers(0, 23), minute=st.integers(0, 59), now=nows, tz=zones)
def test_time_of_day_is_the_latest_past_moment_the_clock_showed_it(
    hour: int, minute: int, now: datetime, tz: ZoneInfo
) -> None:
    try:
        when = parse_when(f"{hour}:{minute:02d}", now=now, tz=tz)
    except TimeSpecError as error:
        assert "explicit offset" in str(error)  # only DST may refuse a valid clock time
        return
    assert when.at is not None
    assert when.at <= now
    assert now - when.at < timedelta(hours=25)  # a day, plus an hour across a DST change
    local = when.at.astimezone(tz)
    assert (local.hour, local.minute) == (hour, minute)
    # Latest: the clock's next showing of that time, a day later, is still ahead.
    next_day = datetime.combine(local.date() + timedelta(days=1), local.time(), tzinfo=tz)
    assert next_day.astimezone(UTC) > now


@pytest.mark.parametrize(
    ("text", "tz", "reading"),
    [
        ("16:00", BERLIN, "read as yesterday 16:00"),  # 15:00 in Berlin now
        ("noon", NEW_YORK, "read as yesterday noon"),  # 09:00 in New York now
        ("12:00", BERLIN, ""),  # already past today: no choice was made
        ("yesterday 16:00", BERLIN, ""),  # the day was typed
        ("2026-12-02T16:00", BERLIN, ""),
    ],
)
def test_a_time_of_day_later_than_now_says_it_was_read_as_yesterday(
    text: str, tz: ZoneInfo, reading: str
) -> None:
    when = parse_when(text, now=NOW, tz=tz)
    assert when.reading == reading
    if reading:
        # What an error or a header quotes: what was typed, the day it was read as, the time.
        assert quote_when(when, tz).startswith(f"{text} ({reading}, 2026-12-01 ")
