"""Offset time: datasets without dates, where every time is minutes from a stay's start.

In eICU each event carries an ``*offset`` column: whole minutes since the admission of
its ICU stay (``patientunitstayid``), negative before it. There is no calendar and no
"now", so the dataset clock (``ehr.now``, ``ehr.ago``...) does not exist; instead these
helpers turn the usual phrasings into plain values and SQL conditions that run on
every engine (see docs/time.md):

- ``minutes(hours=24)`` -> ``1440``: a duration in the offsets' unit;
- ``in_first(column, hours=24)``: the first 24 hours of the ICU stay;
- ``during_stay(column, "icu" | "hospital")``: within the ICU stay, or the hospital stay
  that contains it (the stay table joined under the alias ``p``);
- ``chronological(column)``: an ORDER BY list that puts the events of all of a patient's
  stays in time order, for "the first/last measurement" across stays.

Where the windows live (the stay table and its columns) comes from the database's
metadata key ``offset_stays``, written by the loader; the defaults are eICU's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import Literal

from ehr_magic.errors import EhrMagicError

StayKind = Literal["icu", "hospital"]

_NAME = re.compile(r'^(?:[A-Za-z_][A-Za-z0-9_]*|"[^"]+")(?:\.(?:[A-Za-z_][A-Za-z0-9_]*|"[^"]+"))?$')
_ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

NO_CLOCK = ("This database has no dates: times are offsets in minutes from each ICU admission (columns ending in "
            "'offset'), so use ehr.minutes(hours=24), ehr.in_first(column, hours=24), ehr.during_stay(column, "
            "'icu' or 'hospital') or ehr.chronological(column) instead of ehr.now, ehr.ago, ehr.start_of and "
            "ehr.period.")


def minutes(*, days: float = 0, hours: float = 0, minutes: float = 0) -> int:
    """A duration in whole minutes, the unit of offsets: ``minutes(hours=24)`` is 1440."""
    total = days * 1440 + hours * 60 + minutes
    if total != int(total):
        raise EhrMagicError(f"{total} minutes is not a whole number of minutes; offsets count whole minutes.")
    return int(total)


@dataclass(frozen=True)
class OffsetStays:
    """The table with one row per stay and the columns that bound its windows."""

    table: str = "patient"
    key: str = "patientunitstayid"
    icu_end: str = "unitdischargeoffset"  # the ICU stay runs from offset 0 to this
    hospital_start: str = "hospitaladmitoffset"
    hospital_end: str = "hospitaldischargeoffset"
    hospital_stay: str = "patienthealthsystemstayid"
    year: str = "hospitaldischargeyear"  # the only calendar information: orders hospital stays

    @classmethod
    def from_meta(cls, text: str | None) -> OffsetStays:
        """From the ``offset_stays`` metadata (JSON); unknown keys are ignored, missing ones default."""
        if not text:
            return cls()
        try:
            given = json.loads(text)
        except ValueError:
            raise EhrMagicError("The database's offset_stays metadata is not valid JSON; rebuild the database "
                                "with ehr-magic data load.") from None
        known = {f.name for f in fields(cls)}
        return cls(**{k: str(v) for k, v in given.items() if k in known})


@dataclass(frozen=True)
class OffsetTime:
    """The offset-time helpers of one database (``EHR.in_first`` etc. delegate here)."""

    stays: OffsetStays = OffsetStays()

    def in_first(self, column: str, *, days: float = 0, hours: float = 0, minutes: float = 0) -> str:
        """SQL condition: ``column`` lies in the first ``days``/``hours``/``minutes`` of its ICU stay,
        the half-open window ``[0, N)`` minutes (as a calendar period is half-open)."""
        amount = _positive(days=days, hours=hours, minutes=minutes)
        column = _column(column)
        return f"({column} >= 0 AND {column} < {amount})"

    def during_stay(self, column: str, stay: StayKind = "icu", *, patient: str = "p") -> str:
        """SQL condition: ``column`` lies within the ICU stay (0 to its discharge) or within the
        hospital stay containing it, both ends included. The stay table (eICU: ``patient``)
        must be joined under the alias ``patient``."""
        column, alias = _column(column), _alias(patient)
        s = self.stays
        if stay == "icu":
            return f"({column} BETWEEN 0 AND {alias}.{s.icu_end})"
        if stay == "hospital":
            return f"({column} BETWEEN {alias}.{s.hospital_start} AND {alias}.{s.hospital_end})"
        raise EhrMagicError(f"Unknown stay {stay!r}; use 'icu' or 'hospital'.")

    def chronological(self, column: str, *, patient: str = "p", latest_first: bool = False) -> str:
        """ORDER BY list putting events of all of a patient's stays in time order: by hospital
        discharge year, then hospital stay, then minutes since that hospital admission
        (``column - hospital_start``), which orders the ICU stays of one visit correctly.
        Visits of one patient in the same year have no known order; the hospital stay id
        breaks the tie so the result is at least stable."""
        column, alias = _column(column), _alias(patient)
        s = self.stays
        direction = " DESC" if latest_first else ""
        keys = [f"{alias}.{s.year}", f"{alias}.{s.hospital_stay}", f"{column} - {alias}.{s.hospital_start}"]
        return ", ".join(f"{key}{direction}" for key in keys)


def _positive(**amount: float) -> int:
    total = minutes(**amount)
    if total <= 0:
        raise EhrMagicError("Give the window a positive length, e.g. ehr.in_first(column, hours=24).")
    return total


def _column(column: str) -> str:
    text = str(column).strip()
    if not _NAME.match(text):
        raise EhrMagicError(f"{column!r} is not a column name; pass one like 'observationoffset' or "
                            "'v.observationoffset'.")
    return text


def _alias(alias: str) -> str:
    if not _ALIAS.match(str(alias)):
        raise EhrMagicError(f"{alias!r} is not a table alias; pass the alias the stay table has in your query, "
                            "e.g. 'p'.")
    return str(alias)
