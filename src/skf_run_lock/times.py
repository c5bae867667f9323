"""Times as the contract writes them: UTC, ``YYYY-MM-DDTHH:MM:SSZ``, whole seconds,
years 1 to 9999; and a duration as a message says it to a person."""

from __future__ import annotations

import re
from datetime import UTC as _UTC
from datetime import datetime as _datetime
from datetime import timedelta as _timedelta

_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")
_MIN_TIME = -62135596800  # 0001-01-01T00:00:00Z
_MAX_TIME = 253402300799  # 9999-12-31T23:59:59Z
_EPOCH = _datetime(1970, 1, 1, tzinfo=_UTC)


# The texts of the seconds formatted last: a take writes its time, then says it and
# when it goes stale, and the next call does so again within the same few seconds.
_FORMATTED: dict[int, str] = {}
_FORMATTED_MAX = 64


def _format_time(seconds: float) -> str:
    """POSIX ``seconds`` as ``YYYY-MM-DDTHH:MM:SSZ`` (rounded down, years 1-9999)."""
    whole = min(max(int(seconds // 1), _MIN_TIME), _MAX_TIME)
    text = _FORMATTED.get(whole)
    if text is None:
        when = _EPOCH + _timedelta(seconds=whole)
        # Not strftime: "%Y" pads years before 1000 on some platforms only.
        text = (
            f"{when.year:04d}-{when.month:02d}-{when.day:02d}"
            f"T{when.hour:02d}:{when.minute:02d}:{when.second:02d}Z"
        )
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
    try:
        year, month, day, hour, minute, second = map(int, fields.groups())
        since_epoch = _datetime(year, month, day, hour, minute, second, tzinfo=_UTC) - _EPOCH
    except ValueError:  # no such date (year 0, February 30, ...)
        return None
    return since_epoch.days * 86400 + since_epoch.seconds


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
