"""Owner rules, run ids, the time format and timeout limits."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lockfiles import NOW


@pytest.mark.parametrize(
    ("owner", "parts"),
    [
        ("wf:skill:run", ("wf", "skill", "run")),
        ("wf:skill:a:b:c", ("wf", "skill", "a:b:c")),
        ("wf:skill:", ("wf", "skill", "")),
        ("wf:skill", ("wf", "skill", None)),
        ("update-skill:cocoindex:a1B2c3D4", ("update-skill", "cocoindex", "a1B2c3D4")),
        ("wf:skïll:é", ("wf", "skïll", "é")),
    ],
)
def test_owner_splits_on_the_first_two_colons(
    skf: ModuleType, owner: str, parts: tuple[str, str, str | None]
) -> None:
    assert skf._split_owner(owner) == parts


@pytest.mark.parametrize(
    "owner",
    [
        "",
        "wf",
        ":skill:run",
        "wf::run",
        "wf: skill:run",
        "wf:skill:run id",
        "wf:skill:run\tid",
        "wf:skill:run\n",
        "wf:skill:\x00",
        "wf:skill:\x7f",
        "wf:skill:\u00a0",
        "w:s:" + "x" * 197,
    ],
)
def test_bad_owner_is_refused(skf: ModuleType, owner: str) -> None:
    with pytest.raises(ValueError, match="owner"):
        skf._split_owner(owner)


def test_owner_of_exactly_200_characters_is_accepted(skf: ModuleType) -> None:
    owner = "w:s:" + "x" * 196
    assert len(owner) == 200
    assert skf._split_owner(owner)[2] == "x" * 196


def test_owner_that_is_not_a_string_is_refused(skf: ModuleType) -> None:
    with pytest.raises(ValueError):
        skf._split_owner(42)


def test_added_run_id_counts_toward_the_length_limit(skf: ModuleType, lock: Path) -> None:
    fits = "w:" + "s" * (200 - 25 - 3) + ":"  # 25 characters of run id are added
    assert len(skf.acquire(lock, fits, 60.0)["owner"]) == 200
    lock.unlink()
    with pytest.raises(ValueError, match="run id"):
        skf.acquire(lock, "w:" + "s" * (200 - 25 - 2) + ":", 60.0)
    assert not lock.exists()


def test_new_run_id_has_the_time_and_8_hex_digits(skf: ModuleType) -> None:
    run_id = skf.new_run_id(NOW)
    assert skf.RUN_ID_RE.match(run_id)
    assert run_id.startswith("20260930T101500Z-")
    assert skf.new_run_id(NOW) != run_id


def test_new_run_id_converts_other_time_zones_to_utc(skf: ModuleType) -> None:
    paris = NOW.astimezone(timezone(timedelta(hours=2)))
    assert skf.new_run_id(paris).startswith("20260930T101500Z-")


def test_new_run_id_without_a_time_uses_the_clock(skf: ModuleType) -> None:
    """Stamped between two readings of the clock (which may straddle UTC midnight)."""
    before = datetime.now(UTC).replace(microsecond=0)
    run_id = skf.new_run_id()
    after = datetime.now(UTC)
    stamped = datetime.strptime(run_id[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert before <= stamped <= after


def test_run_id_re_is_the_contract_pattern(skf: ModuleType) -> None:
    assert skf.RUN_ID_RE.pattern == r"^\d{8}T\d{6}Z-[0-9a-f]{8}$"


def test_constants_have_their_contract_values(skf: ModuleType) -> None:
    assert (skf.OWNER_MAX_LEN, skf.DEFAULT_STALE_AFTER_MIN, skf.MAX_STALE_AFTER_MIN) == (
        200,
        60,
        525600,
    )
    assert skf.GUARD_WAIT_SEC == 10.0


def test_naive_now_is_refused(skf: ModuleType, lock: Path) -> None:
    with pytest.raises(ValueError, match="aware"):
        skf.acquire(lock, "wf:sk:r", 60.0, now=datetime(2026, 1, 1))
    assert not lock.parent.exists()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("2026-09-30T10:15:00Z", int(NOW.timestamp())),
        ("0001-01-01T00:00:00Z", -62135596800),
        ("9999-12-31T23:59:59Z", 253402300799),
    ],
)
def test_time_format_round_trips(skf: ModuleType, text: str, seconds: int) -> None:
    assert skf._parse_time(text) == seconds
    assert skf._format_time(seconds) == text


@pytest.mark.parametrize(
    "text",
    [
        "2026-09-30T10:15:00",
        "2026-09-30 10:15:00Z",
        "2026-09-30T10:15:00.5Z",
        "2026-09-30T10:15:00+00:00",
        "2026-02-30T10:15:00Z",
        "2026-09-30T24:00:00Z",
        "0000-01-01T00:00:00Z",
        "\uff12\uff10\uff12\uff16-09-30T10:15:00Z",  # full-width digits
        "",
    ],
)
def test_other_time_texts_do_not_parse(skf: ModuleType, text: str) -> None:
    assert skf._parse_time(text) is None


def test_format_time_rounds_down_and_clamps(skf: ModuleType) -> None:
    assert skf._format_time(0.999) == "1970-01-01T00:00:00Z"
    assert skf._format_time(-0.5) == "1969-12-31T23:59:59Z"
    assert skf._format_time(10**15) == "9999-12-31T23:59:59Z"
    assert skf._format_time(-(10**15)) == "0001-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "seconds",
    [0, -1, math.nan, math.inf, -math.inf, 31_536_000.5, 10**9, 0.002, True, "60", None],
)
def test_bad_stale_after_is_refused_before_touching_disk(
    skf: ModuleType, lock: Path, seconds: object
) -> None:
    with pytest.raises(ValueError):
        skf.acquire(lock, "wf:sk:r", seconds)
    with pytest.raises(ValueError):
        skf.status(lock, seconds)
    assert not lock.parent.exists()


@pytest.mark.parametrize(
    ("seconds", "minutes"),
    [(3600, 60), (3600.0, 60), (15.0, 0.25), (31_536_000, 525600), (20, 0.3333), (0.006, 0.0001)],
)
def test_stale_after_minutes_is_an_integer_when_whole(
    skf: ModuleType, lock: Path, seconds: float, minutes: float
) -> None:
    result = skf.acquire(lock, "wf:sk:r", seconds, now=NOW)
    assert result["stale_after_minutes"] == minutes
    assert type(result["stale_after_minutes"]) is type(minutes)


def test_owner_character_check_matches_the_rule_for_every_code_point(skf: ModuleType) -> None:
    """The rule is "no whitespace, no non-printable character"; check it char by char."""
    wrong = []
    for code in range(0x110000):
        char = chr(code)
        allowed = not char.isspace() and char.isprintable()
        try:
            skf._split_owner(f"wf:sk:{char}")
        except ValueError:
            accepted = False
        else:
            accepted = True
        if accepted != allowed and char != ":":
            wrong.append(hex(code))
    assert wrong == []


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)))
def test_time_format_agrees_with_datetime(skf: ModuleType, when: datetime) -> None:
    when = when.replace(microsecond=0, tzinfo=UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%SZ").rjust(20, "0")
    seconds = (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(seconds=1)
    assert skf._parse_time(text) == seconds
    assert skf._format_time(seconds) == text


@given(st.integers(1, 9999), st.integers(1, 12), st.integers(0, 32))
def test_parse_time_accepts_exactly_the_real_dates(
    skf: ModuleType, year: int, month: int, day: int
) -> None:
    text = f"{year:04d}-{month:02d}-{day:02d}T00:00:00Z"
    try:
        datetime(year, month, day)
    except ValueError:
        assert skf._parse_time(text) is None
    else:
        assert skf._parse_time(text) is not None


def test_every_day_of_a_400_year_cycle_is_counted_as_datetime_counts_it(skf: ModuleType) -> None:
    """The calendar is counted without datetime: each day from 1900 to 2300 (a whole
    cycle of leap years, 1900 and 2100 not leap, 2000 leap), and the first and last
    years a time may have, formats and parses as datetime says; February 29 parses
    only in a leap year."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    spans = [(1900, 146097), (1, 366), (9999, 365)]
    for year, days in spans:
        first = datetime(year, 1, 1, tzinfo=UTC)
        for n in range(days):
            when = first + timedelta(days=n, seconds=n % 86400)
            text = f"{when.year:04d}-{when.month:02d}-{when.day:02d}T{when:%H:%M:%S}Z"
            seconds = (when - epoch) // timedelta(seconds=1)
            assert skf._format_time(seconds) == text
            assert skf._parse_time(text) == seconds
    for year in range(1900, 2301):
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        assert (skf._parse_time(f"{year:04d}-02-29T00:00:00Z") is not None) == leap
