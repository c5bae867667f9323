"""Times as the contract writes them: UTC, ``YYYY-MM-DDTHH:MM:SSZ``, whole seconds,
years 1 to 9999; and a duration as a message says it to a person."""

from __future__ import annotations

import re

_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")
_MIN_TIME = -62135596800  # 0001-01-01T00:00:00Z
_MAX_TIME = 253402300799  # 9999-12-31T23:59:59Z

# Dates are counted here, not by datetime: importing datetime cost a CLI call 1.5 ms,
# and each call formats a time or two. The Gregorian calendar repeats every 400 years
# (146,097 days); counted from March, a leap day ends its year. 1970-01-01 is day
# 719,468 from 0000-03-01.
_DAYS_IN_400_YEARS = 146097
_EPOCH_FROM_MARCH_0000 = 719468


def _date_of(days: int) -> tuple[int, int, int]:
    """The year, month and day of ``days`` after 1970-01-01 (before it if negative)."""
    era, day_of_era = divmod(days + _EPOCH_FROM_MARCH_0000, _DAYS_IN_400_YEARS)
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_from_march = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_from_march + 2) // 5 + 1
    month = month_from_march + 3 if month_from_march < 10 else month_from_march - 9
    return era * 400 + year_of_era + (month <= 2), month, day


def _days_of(year: int, month: int, day: int) -> int:
    """The days from 1970-01-01 to a date (_date_of's inverse)."""
    year -= month <= 2
    era, year_of_era = divmod(year, 400)
    day_of_year = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    day_of_era = 365 * year_of_era + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * _DAYS_IN_400_YEARS + day_of_era - _EPOCH_FROM_MARCH_0000


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


# The texts of the seconds formatted last: a take writes its time, then says it and
# when it goes stale, and the next call does so again within the same few seconds.
_FORMATTED: dict[int, str] = {}
_FORMATTED_MAX = 64


def _format_time(seconds: float) -> str:
    """POSIX ``seconds`` as ``YYYY-MM-DDTHH:MM:SSZ`` (rounded down, years 1-9999)."""
    whole = min(max(int(seconds // 1), _MIN_TIME), _MAX_TIME)
    text = _FORMATTED.get(whole)
    if text is None:
        days, second = divmod(whole, 86400)
        year, month, day = _date_of(days)
        hour, second = divmod(second, 3600)
        minute, second = divmod(second, 60)
        # Not strftime: "%Y" pads years before 1000 on some platforms only.
        text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"
        if len(_FORMATTED) >= _FORMATTED_MAX:
            _FORMATTED.clear()  # a long-lived process keeps it small
        _FORMATTED[whole] = text
    return text


def _stale_at(since: int, holder_timeout: float) -> str:
    """When a hold taken at ``since`` for ``holder_timeout`` s goes stale, as written."""
    return _format_time(-(-(since + holder_timeout) // 1))  # _format_time caps it


def _parse_time(text: str) -> int | None:
    """The POSIX seconds of a ``YYYY-MM-DDTHH:MM:SSZ`` time; None if it is not one."""
    fields = _TIME.fullmatch(text)
    if fields is None:
        return None
    year, month, day, hour, minute, second = map(int, fields.groups())
    if not (year >= 1 and 1 <= month <= 12 and 1 <= day <= _month_days(year, month)):
        return None  # no such date (year 0, February 30, ...)
    if hour > 23 or minute > 59 or second > 59:
        return None
    return _days_of(year, month, day) * 86400 + hour * 3600 + minute * 60 + second


def _duration_text(seconds: float) -> str:
    """A short human duration: ``45 s``, ``12 min 5 s``, ``3 h 20 min``, ``2 d 4 h``."""
    whole = int(abs(seconds) // 1)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"
