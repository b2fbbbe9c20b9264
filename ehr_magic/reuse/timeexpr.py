"""Time expressions in questions: a small English grammar, resolved on the dataset clock.

``find_times(text)`` returns the time expressions of a question with their character
spans, e.g. "since 3 months ago", "last year", "in 05/2100", "on 12/24/this year",
"within 2 days". Each ``TimeValue`` has a *type* (its shape: ``time:period:year``,
``time:ago:month``, ``time:date``...) and ``renderings(clock)``: the texts the value
takes in code (the start of the period as a timestamp, the year, the month as
``YYYY-MM``, the signed offset, the number of units...). Reuse links a remembered
cell's literals to these renderings and writes the new value in the same rendering,
so nothing here knows how any particular code spells time.

Only English and calendar knowledge lives here: month names, number words, units.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass, replace

from ehr_magic.db.clock import Clock, add_months

UNITS = ("year", "month", "week", "day", "hour", "minute")
_UNIT = r"(year|month|week|day|hour|minute)s?"
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
}
_NUM = r"(\d+|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")"
_OFFSETS = {"this": 0, "current": 0, "the current": 0, "present": 0, "last": -1, "previous": -1,
            "the previous": -1, "the last": -1, "past": -1, "the past": -1, "prior": -1, "next": 1,
            "the next": 1, "coming": 1, "the coming": 1}
_OFF = (r"(the current|the previous|the last|the past|the next|the coming|this|current|present|last|previous|past|"
        r"prior|next|coming)")
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAYWORDS = {"today": 0, "yesterday": -1, "tomorrow": 1}
_VISIT_ORDINALS = {"first": "first", "earliest": "first", "initial": "first", "last": "last", "latest": "last",
                   "most recent": "last", "final": "last", "current": "current", "this": "current",
                   "present": "current", "ongoing": "current", "same": "same"}
_VISIT = (r"\b(most recent|first|earliest|initial|last|latest|final|current|this|present|ongoing|same)\s+"
          r"(?:(hospital|icu|intensive care unit|hospital's|icu's)\s+)?"
          r"(visit|stay|encounter|admission|hospitalization|hospitalisation)s?\b")
_TS = "%Y-%m-%d %H:%M:%S"


def number_value(word: str) -> int | None:
    """The integer a digit string or an English number word stands for."""
    if word.isdigit():
        return int(word)
    return _NUMBER_WORDS.get(word)


@dataclass(frozen=True)
class TimeValue:
    """One time expression found in a question.

    ``kind``: ``period`` (this/last/next year, month, week, day; today, yesterday),
    ``ago`` (N units ago; in the last N units), ``duration`` (N units, e.g. "within
    2 days", "6-month"), ``date``, ``month``, ``year``, ``datetime``,
    ``day_of_period`` ("12/24/this year", "last month/27"), ``month_of_year``
    ("04/last year"), ``visit`` (the first/last/current/same hospital or ICU visit; the
    unit holds place and ordinal), ``same`` ("the same day/month").
    """

    kind: str
    unit: str  # the unit of period/ago/duration, the period of day_of_period/month_of_year, else ""
    start: int
    end: int
    text: str
    n: int = 0  # period offset, or the number of units of ago/duration
    year: int = 0
    month: int = 0
    day: int = 0
    hour: int = 0
    minute: int = 0
    second: int = 0
    relation: str = ""  # since | before | in | "" : the word before the expression, canonical

    @property
    def type(self) -> str:
        base = f"time:{self.kind}:{self.unit}" if self.unit else f"time:{self.kind}"
        return f"{base}:{self.relation}" if self.relation else base

    @property
    def key(self) -> tuple:
        """What the expression means, independent of its wording."""
        return (self.kind, self.unit, self.n, self.year, self.month, self.day, self.hour, self.minute, self.second)

    def describe(self) -> str:
        return self.text

    @property
    def needs_clock(self) -> bool:
        """True when the expression is relative to the dataset's now ("last year", "3 days ago")."""
        return self.kind in ("period", "ago", "day_of_period", "month_of_year")

    # -- resolution ----------------------------------------------------------------------

    def _period_start(self, clock: Clock, unit: str, offset: int) -> dt.datetime:
        return clock.start_of(unit, offset)  # type: ignore[arg-type]  # the grammar finds Clock units only

    def bounds(self, clock: Clock) -> tuple[dt.datetime, dt.datetime] | None:
        """``[start, end)`` of the moments the expression names (None for durations)."""
        if self.kind == "period":
            return clock.period(self.unit, self.n)  # type: ignore[arg-type]  # the grammar finds Clock units only
        if self.kind == "ago":
            return _ago(clock, self.n, self.unit, overflow=False), clock.now
        if self.kind == "date":
            start = dt.datetime(self.year, self.month, self.day)
            return start, start + dt.timedelta(days=1)
        if self.kind == "datetime":
            start = dt.datetime(self.year, self.month, self.day, self.hour, self.minute, self.second)
            return start, start + dt.timedelta(seconds=1)
        if self.kind == "month":
            start = dt.datetime(self.year, self.month, 1)
            return start, add_months(start, 1)
        if self.kind == "year":
            return dt.datetime(self.year, 1, 1), dt.datetime(self.year + 1, 1, 1)
        if self.kind in ("day_of_period", "month_of_year"):
            resolved = self.resolved_date(clock)
            if resolved is None:
                return None
            if self.kind == "month_of_year":
                return resolved, add_months(resolved, 1)
            return resolved, resolved + dt.timedelta(days=1)
        return None

    def resolved_date(self, clock: Clock) -> dt.datetime | None:
        """The calendar date of a ``day_of_period`` / ``month_of_year`` (None if impossible)."""
        base = self._period_start(clock, self.unit, self.n)
        try:
            if self.kind == "month_of_year":
                return dt.datetime(base.year, self.month, 1)
            if self.unit == "year":
                return dt.datetime(base.year, self.month, self.day)
            return dt.datetime(base.year, base.month, self.day)
        except ValueError:
            return None

    def is_future(self, clock: Clock) -> bool:
        """True when every moment the expression names lies after the dataset's now."""
        bounds = self.bounds(clock)
        return bounds is not None and bounds[0] > clock.now

    def renderings(self, clock: Clock) -> dict[str, str]:
        """Texts this value may take in code, by format name (see the module doc)."""
        out: dict[str, str] = {}
        if self.kind == "period":
            start, end = clock.period(self.unit, self.n)  # type: ignore[arg-type]  # the grammar finds Clock units only
            out.update(_stamp("start", start))
            out.update(_stamp("end", end))
            out["offset"] = str(self.n)
            if self.n <= 0:
                out["modifier"] = f"-{-self.n} {self.unit}"
            out.update(_calendar_parts(start, self.unit))
        elif self.kind == "ago":
            out.update(_stamp("point", _ago(clock, self.n, self.unit, overflow=False)))
            overflow = _ago(clock, self.n, self.unit, overflow=True)
            out.update(_stamp("point_overflow", overflow))
            out["n"] = str(self.n)
            out["modifier"] = f"-{self.n} {self.unit}"
        elif self.kind == "duration":
            out["n"] = str(self.n)
            out["modifier"] = f"+{self.n} {self.unit}"
        elif self.kind in ("date", "datetime"):
            when = dt.datetime(self.year, self.month, self.day, self.hour, self.minute, self.second)
            out.update(_stamp("at", when))
            out["md"] = when.strftime("%m-%d")
            out["ym"] = when.strftime("%Y-%m")
            out["y"] = str(when.year)
            out["m"] = when.strftime("%m")
            out["d"] = when.strftime("%d")
            if self.kind == "datetime":
                out["hms"] = when.strftime("%H:%M:%S")
        elif self.kind == "month":
            start = dt.datetime(self.year, self.month, 1)
            out.update(_stamp("start", start))
            out.update(_stamp("end", add_months(start, 1)))
            out["ym"] = start.strftime("%Y-%m")
            out["y"] = str(self.year)
            out["m"] = start.strftime("%m")
        elif self.kind == "year":
            start = dt.datetime(self.year, 1, 1)
            out.update(_stamp("start", start))
            out.update(_stamp("end", dt.datetime(self.year + 1, 1, 1)))
            out["y"] = str(self.year)
        elif self.kind in ("day_of_period", "month_of_year"):
            start, end = clock.period(self.unit, self.n)  # type: ignore[arg-type]  # the grammar finds Clock units only
            out.update(_stamp("start", start))
            out.update(_stamp("end", end))
            out["offset"] = str(self.n)
            if self.n <= 0:
                out["modifier"] = f"-{-self.n} {self.unit}"
            out.update(_calendar_parts(start, self.unit))
            if self.month:
                out["m"] = f"{self.month:02d}"
            if self.day:
                out["d"] = f"{self.day:02d}"
            if self.month and self.day:
                out["md"] = f"{self.month:02d}-{self.day:02d}"
            resolved = self.resolved_date(clock)
            if resolved is not None:
                out.update(_stamp("at", resolved))
                out["ym_at"] = resolved.strftime("%Y-%m")
        return out


def window(value: TimeValue, clock: Clock | None) -> tuple:
    """One normal form for what a time expression selects, whatever its wording.

    The moments it admits, as ``("window", start, end)`` on the dataset clock, cut at the
    data's now (nothing is recorded later): "since 2100", "in 2100" and "this year" are one
    window when now is in 2100, "since 1 year ago" another. "before X" admits everything up
    to X's start. Expressions that are not windows (durations, "the last hospital visit",
    "the same day") keep their meaning: ``(kind, unit, n, relation)``."""
    not_window = (value.kind, value.unit, value.key, value.relation)
    if clock is None or value.kind in ("duration", "visit", "same"):
        return not_window
    bounds = value.bounds(clock)
    if bounds is None:
        return not_window
    start, end = bounds
    if value.relation == "since":
        end = dt.datetime.max
    elif value.relation == "before":
        start, end = dt.datetime.min, start
    end = min(end, clock.now + dt.timedelta(seconds=1))  # the data ends at now: later moments select nothing
    return ("window", start, end)


def _stamp(name: str, when: dt.datetime) -> dict[str, str]:
    return {name: when.strftime(_TS), f"{name}_date": when.strftime("%Y-%m-%d")}


def _calendar_parts(start: dt.datetime, unit: str) -> dict[str, str]:
    if unit == "year":
        return {"y": str(start.year)}
    if unit == "month":
        return {"ym": start.strftime("%Y-%m")}
    return {}


def _ago(clock: Clock, n: int, unit: str, *, overflow: bool) -> dt.datetime:
    """``now`` minus ``n`` units. Month and year steps clamp the day to the month's
    length, or with ``overflow`` carry the extra days into the next month (SQLite's rule)."""
    now = clock.now
    if unit in ("year", "month"):
        months = n * 12 if unit == "year" else n
        if not overflow:
            return add_months(now, -months)
        index = now.year * 12 + now.month - 1 - months
        year, month = divmod(index, 12)
        first = dt.datetime(year, month + 1, 1, now.hour, now.minute, now.second)
        return first + dt.timedelta(days=now.day - 1)
    return now - dt.timedelta(**{f"{unit}s": n})


# -- the grammar ---------------------------------------------------------------------------

_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("datetime", re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})[ t](\d{1,2}):(\d{2})(?::(\d{2}))?\b")),
    ("day_of_year", re.compile(r"\b(\d{1,2})/(\d{1,2})/" + _OFF + r"\s+year\b")),
    ("day_of_year_of", re.compile(r"\b(\d{1,2})/(\d{1,2})\s+(?:of\s+)?" + _OFF + r"\s+year\b")),
    ("month_of_year", re.compile(r"\b(\d{1,2})/" + _OFF + r"\s+year\b")),
    ("day_of_month", re.compile(r"\b" + _OFF + r"\s+month\s*/\s*(\d{1,2})\b")),
    ("iso_date", re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")),
    ("us_date", re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b")),
    ("name_date", re.compile(r"\b" + _MONTH + r"\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")),
    ("day_name_date", re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r",?\s+(\d{4})\b")),
    ("us_month", re.compile(r"\b(\d{1,2})/(\d{4})\b")),
    ("iso_month", re.compile(r"\b(\d{4})-(\d{1,2})\b(?!-)")),
    ("name_month", re.compile(r"\b" + _MONTH + r"\s+(?:of\s+)?(\d{4})\b")),
    ("ago", re.compile(r"\b" + _NUM + r"\s+" + _UNIT + r"\s+ago\b")),
    ("last_n", re.compile(r"\b(?:the\s+)?(?:last|past|previous|prior)\s+" + _NUM + r"\s+" + _UNIT + r"\b")),
    ("period", re.compile(r"\b" + _OFF + r"\s+(year|month|week|day)\b")),
    ("day_word", re.compile(r"\b(today|yesterday|tomorrow)\b")),
    ("visit", re.compile(_VISIT)),
    ("same", re.compile(r"\bsame\s+(year|month|week|day|hour)\b")),
    ("duration", re.compile(r"\b" + _NUM + r"(?:\s+|-)" + _UNIT + r"\b")),
    ("year", re.compile(r"(?<![\d/.-])\b(1[89]\d\d|2[01]\d\d)\b(?![\d/]|-\d|\.\d)")),
]


def find_times(text: str) -> list[TimeValue]:
    """The time expressions of ``text``, left to right, none overlapping (longest wins)."""
    lowered = _lower(text)
    found: list[TimeValue] = []
    for rule, pattern in _RULES:
        for match in pattern.finditer(lowered):
            value = _build(rule, match, text)
            if value is not None:
                found.append(value)
    found.sort(key=lambda v: (v.start, -(v.end - v.start)))
    chosen: list[TimeValue] = []
    for value in sorted(found, key=lambda v: (-(v.end - v.start), v.start)):
        if all(value.end <= c.start or value.start >= c.end for c in chosen):
            chosen.append(value)
    out = []
    for value in sorted(chosen, key=lambda v: v.start):
        relation = _relation(lowered, value.start)
        if value.kind in ("visit", "same"):
            relation = ""  # which visit / "the same day": the preposition adds nothing
        elif not relation and value.kind not in ("ago", "duration"):
            relation = "in"  # "last year" alone means within last year
        out.append(replace(value, relation=relation))
    return out


# The word before a time expression says how it bounds the events: from it on
# ("since 2100"), up to it ("before 2100") or within it ("in 2100").
_RELATIONS = {"since": "since", "after": "since", "from": "since", "starting": "since", "beginning": "since",
              "before": "before", "until": "before", "till": "before", "prior to": "before", "up to": "before",
              "in": "in", "during": "in", "throughout": "in", "on": "in", "at": "in", "within": "in", "of": "in",
              "for": "in", "over": "in"}
_RELATION_BEFORE = re.compile(
    r"\b(prior to|up to|since|after|from|starting(?: from| on| in)?|beginning(?: in| on| from)?|before|until|till|"
    r"in|during|throughout|on|at|within|of|for|over)(?:\s+the)?\s*$")


def _relation(lowered: str, start: int) -> str:
    match = _RELATION_BEFORE.search(lowered[max(0, start - 30):start])
    if match is None:
        return ""
    word = match.group(1).split()[0] if match.group(1).startswith(("starting", "beginning")) else match.group(1)
    return _RELATIONS.get(word, "")


def _lower(text: str) -> str:
    """Lower case with the same length (so spans stay valid)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def _build(rule: str, m: re.Match[str], text: str) -> TimeValue | None:
    start, end = m.span()
    span = text[start:end]
    g = m.groups()
    try:
        if rule == "datetime":
            y, mo, d, h, mi = (int(x) for x in g[:5])
            s = int(g[5]) if g[5] else 0
            dt.datetime(y, mo, d, h, mi, s)
            return TimeValue("datetime", "", start, end, span, year=y, month=mo, day=d, hour=h, minute=mi, second=s)
        if rule in ("day_of_year", "day_of_year_of"):
            mo, d = int(g[0]), int(g[1])
            dt.datetime(2000, mo, d)  # validates (2000 is a leap year)
            return TimeValue("day_of_period", "year", start, end, span, n=_OFFSETS[g[2]], month=mo, day=d)
        if rule == "month_of_year":
            mo = int(g[0])
            if not 1 <= mo <= 12:
                return None
            return TimeValue("month_of_year", "year", start, end, span, n=_OFFSETS[g[1]], month=mo)
        if rule == "day_of_month":
            d = int(g[1])
            if not 1 <= d <= 31:
                return None
            return TimeValue("day_of_period", "month", start, end, span, n=_OFFSETS[g[0]], day=d)
        if rule == "iso_date":
            y, mo, d = int(g[0]), int(g[1]), int(g[2])
            dt.datetime(y, mo, d)
            return TimeValue("date", "", start, end, span, year=y, month=mo, day=d)
        if rule == "us_date":
            mo, d, y = int(g[0]), int(g[1]), int(g[2])
            dt.datetime(y, mo, d)
            return TimeValue("date", "", start, end, span, year=y, month=mo, day=d)
        if rule == "name_date":
            mo, d, y = _MONTHS[g[0]], int(g[1]), int(g[2])
            dt.datetime(y, mo, d)
            return TimeValue("date", "", start, end, span, year=y, month=mo, day=d)
        if rule == "day_name_date":
            d, mo, y = int(g[0]), _MONTHS[g[1]], int(g[2])
            dt.datetime(y, mo, d)
            return TimeValue("date", "", start, end, span, year=y, month=mo, day=d)
        if rule == "us_month":
            mo, y = int(g[0]), int(g[1])
            if not 1 <= mo <= 12:
                return None
            return TimeValue("month", "", start, end, span, year=y, month=mo)
        if rule == "iso_month":
            y, mo = int(g[0]), int(g[1])
            if not 1 <= mo <= 12:
                return None
            return TimeValue("month", "", start, end, span, year=y, month=mo)
        if rule == "name_month":
            return TimeValue("month", "", start, end, span, year=int(g[1]), month=_MONTHS[g[0]])
        if rule in ("ago", "last_n"):
            n = number_value(g[0])
            if n is None:
                return None
            return TimeValue("ago", g[1], start, end, span, n=n)
        if rule == "period":
            return TimeValue("period", g[1], start, end, span, n=_OFFSETS[g[0]])
        if rule == "day_word":
            return TimeValue("period", "day", start, end, span, n=_DAYWORDS[g[0]])
        if rule == "duration":
            n = number_value(g[0])
            if n is None or g[0] in ("a", "an"):
                return None
            return TimeValue("duration", g[1], start, end, span, n=n)
        if rule == "year":
            return TimeValue("year", "", start, end, span, year=int(g[0]))
        if rule == "visit":
            place = (g[1] or "").removesuffix("'s")
            place = "icu" if place in ("icu", "intensive care unit") else "hospital" if (
                place == "hospital" or g[2].startswith("hospitali")) else ""
            return TimeValue("visit", f"{place}:{_VISIT_ORDINALS[g[0]]}" if place else _VISIT_ORDINALS[g[0]],
                             start, end, span)
        if rule == "same":
            return TimeValue("same", g[0], start, end, span)
    except ValueError:
        return None
    return None
