"""Text at the bottom of the house: the one place words are normalised, times read from text,
and the closest name found for a "did you mean".

Every layer that compares words (value lookup, table choice, reuse, memory, skills) takes
them from here, so that "Heart-Rate" and "heart rate" are the same everywhere.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

from rapidfuzz import process

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


SUGGEST_MIN_SCORE = 70.0  # rapidfuzz WRatio (0-100): below it a name is too unlike to suggest


def closest(word: str, choices: Iterable[str], *, cutoff: float = SUGGEST_MIN_SCORE) -> str | None:
    """The choice most like ``word`` (rapidfuzz's WRatio), if it scores at least ``cutoff``:
    what a "did you mean" offers for a misspelt table, setting or skill. None: nothing close."""
    found = process.extract(word, list(choices), limit=1, score_cutoff=cutoff)
    return found[0][0] if found else None
