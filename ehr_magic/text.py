"""Text at the bottom of the house: the one place words are normalised, and times read from text.

Every layer that compares words (value lookup, table choice, reuse, memory, skills) takes
them from here, so that "Heart-Rate" and "heart rate" are the same everywhere.
"""

from __future__ import annotations

import datetime as dt
import re

NON_ALNUM = re.compile(r"[^0-9a-z]+")


def normalise(text: str) -> str:
    """Lowercase, punctuation and spacing collapsed to single spaces."""
    return NON_ALNUM.sub(" ", str(text).lower()).strip()


def parse_time(value: str | dt.datetime | dt.date) -> dt.datetime:
    """Accept a datetime, a date or an ISO-like string ('2100-12-31 23:59:00')."""
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    try:
        return dt.datetime.fromisoformat(str(value).strip())
    except ValueError:
        raise ValueError(f"Cannot read {value!r} as a time; write it like '2100-12-31 23:59:00'.") from None
