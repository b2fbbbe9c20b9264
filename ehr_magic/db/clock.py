"""The dataset's clock: "now" and relative periods anchored to it, never the wall clock.

EHR datasets are time-shifted (MIMIC-IV to the 2100s), so "last year" in a question
means the year before the dataset's own "current time". Month arithmetic clamps to
the end of the month (March 31 minus one month is February 28/29), as DuckDB does.
"""

from __future__ import annotations

import calendar
import datetime as dt
from dataclasses import dataclass
from typing import Literal

Unit = Literal["year", "month", "week", "day", "hour"]
_UNITS = ("year", "month", "week", "day", "hour")


def add_months(when: dt.datetime, months: int) -> dt.datetime:
    """``when`` shifted by whole months, clamping the day to the target month's length."""
    month_index = when.year * 12 + (when.month - 1) + months
    year, month = divmod(month_index, 12)
    day = min(when.day, calendar.monthrange(year, month + 1)[1])
    return when.replace(year=year, month=month + 1, day=day)


@dataclass(frozen=True)
class Clock:
    """Relative dates for one dataset, EHRAgent's Calendar tool anchored to ``now``."""

    now: dt.datetime
    # Where ``now`` came from, as the connect line says it: "cdm_source.source_release_date",
    # "latest date in the data: visit.visit_end_date", "given when connecting"...
    source: str = ""

    def describe(self) -> str:
        """``now 2019-05-25 (cdm_source.source_release_date)``: the time and where it came from."""
        shown = f"{self.now:%Y-%m-%d}" if self.now.time() == dt.time() else f"{self.now:%Y-%m-%d %H:%M}"
        return f"now {shown}" + (f" ({self.source})" if self.source else "")

    def ago(
        self,
        *,
        years: int = 0,
        months: int = 0,
        weeks: float = 0,
        days: float = 0,
        hours: float = 0,
        minutes: float = 0,
        seconds: float = 0,
    ) -> dt.datetime:
        """The moment that long before ``now`` (e.g. ``ago(months=1)``); negative values go forward."""
        shifted = add_months(self.now, -(years * 12 + months))
        return shifted - dt.timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)

    def start_of(self, unit: Unit, offset: int = 0) -> dt.datetime:
        """Start of the current ``unit`` (year, month, week, day, hour); ``offset=-1`` is the previous one.

        Weeks start on Monday.
        """
        now = self.now
        if unit == "year":
            return dt.datetime(now.year + offset, 1, 1)
        if unit == "month":
            return add_months(dt.datetime(now.year, now.month, 1), offset)
        if unit == "week":
            monday = dt.datetime(now.year, now.month, now.day) - dt.timedelta(days=now.weekday())
            return monday + dt.timedelta(weeks=offset)
        if unit == "day":
            return dt.datetime(now.year, now.month, now.day) + dt.timedelta(days=offset)
        if unit == "hour":
            return now.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=offset)
        raise ValueError(f"Unknown unit {unit!r}; use one of {', '.join(_UNITS)}.")

    def period(self, unit: Unit, offset: int = 0) -> tuple[dt.datetime, dt.datetime]:
        """Half-open ``[start, end)`` of a calendar period: ``period('year', -1)`` is last year."""
        start = self.start_of(unit, offset)
        end = self.start_of(unit, offset + 1)
        return start, end
