"""What every EHR skill shares: which rows to compute (ids), up to when (``as_of``),
the checks that the database has what a skill reads, and small SQL helpers.

No look-ahead: a skill given ``as_of`` reads only data charted at or before it
(``charttime``/``starttime`` <= as_of; diagnosis codes only once known, see
``codes_known_sql``), and ICU stays or admissions that start after it are left out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.text import parse_time
from ehr_magic.errors import sentences
from ehr_magic.skills.errors import SkillError
from ehr_magic.skills.items import Concept, SchemaItems, schema_items

FAR_FUTURE = dt.datetime(9999, 12, 31)
LOOKBACK_HOURS = 6  # labs drawn shortly before ICU (or hospital) admission count for it
WHICH = ("all", "first", "last", "min", "max", "worst", "summary")

Ids = Sequence[int] | int | None


def ts(value: dt.datetime) -> str:
    """A SQL timestamp literal."""
    return f"TIMESTAMP '{value:%Y-%m-%d %H:%M:%S}'"


def in_list(column: str, ids: Sequence[int] | None) -> str:
    """``column IN (...)`` for integer ids (TRUE when ids is None)."""
    if ids is None:
        return "TRUE"
    if not ids:
        return "FALSE"
    return f"{column} IN ({', '.join(str(int(i)) for i in ids)})"


def _ids(name: str, value: Ids) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return (int(value),)
    if isinstance(value, pl.Series):
        value = value.to_list()
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise SkillError(f"{name} must be a list of integer ids (got {type(value).__name__}).")
    try:
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise SkillError(f"{name} must be a list of integer ids.") from None


@dataclass(frozen=True)
class Scope:
    """The rows a skill is asked for and the time it is computed at."""

    stay_ids: tuple[int, ...] | None = None
    hadm_ids: tuple[int, ...] | None = None
    subject_ids: tuple[int, ...] | None = None
    as_of: dt.datetime | None = None

    @property
    def cutoff(self) -> str:
        """SQL literal of the as_of time (far future when none)."""
        return ts(self.as_of or FAR_FUTURE)


def scope(stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None) -> Scope:
    when = None
    if as_of is not None:
        try:
            when = parse_time(as_of)
        except ValueError as exc:  # an unreadable time is the caller's mistake
            raise SkillError(f"as_of must be a datetime or 'YYYY-MM-DD HH:MM:SS': {sentences(exc)}") from None
    return Scope(_ids("stay_ids", stay_ids), _ids("hadm_ids", hadm_ids), _ids("subject_ids", subject_ids), when)


class Context:
    """One skill run: the database, its schema items, the scope, and checks."""

    def __init__(self, ehr: Database, sc: Scope, skill: str) -> None:
        if not hasattr(ehr, "sql") or not hasattr(ehr, "tables"):
            raise SkillError(f"{skill} needs the connected EHR as first argument: skills.{skill}(ehr, ...).")
        self.ehr = ehr
        self.scope = sc
        self.skill = skill
        self.items: SchemaItems = schema_items(ehr)
        self._tables = set(ehr.tables())

    # -- what the database has ---------------------------------------------------------

    def has(self, table: str, *columns: str) -> bool:
        if table not in self._tables:
            return False
        return set(columns) <= set(self.ehr.columns(table))

    def require(self, table: str, *columns: str, why: str = "") -> None:
        if table not in self._tables:
            raise SkillError(f"{self.skill} needs the table {table}{f' ({why})' if why else ''}, which "
                             f"{getattr(self.ehr, 'dataset', 'this dataset')} does not have.")
        missing = [c for c in columns if c not in self.ehr.columns(table)]
        if missing:
            raise SkillError(f"{self.skill} needs column(s) {', '.join(missing)} of {table}"
                             f"{f' ({why})' if why else ''}, which this dataset lacks.")

    def capability(self, name: str) -> None:
        self.items.require(name, self.skill)

    def can(self, name: str) -> bool:
        return self.items.has(name)

    def sql(self, query: str) -> pl.DataFrame:
        return self.ehr.sql(query)

    # -- cohorts -----------------------------------------------------------------------

    @property
    def cutoff(self) -> str:
        return self.scope.cutoff

    @property
    def now(self) -> str:
        """SQL literal of the dataset's current time (the end of stays still open)."""
        clock = getattr(self.ehr, "clock", None)  # None on a database without dates (offset time)
        now = clock.now if clock is not None else None
        return ts(now) if isinstance(now, dt.datetime) else ts(FAR_FUTURE)

    def stays_sql(self) -> str:
        """ICU stays in scope: subject_id, hadm_id, stay_id, intime, outtime (started by as_of)."""
        self.require("icustays", "subject_id", "hadm_id", "stay_id", "intime", "outtime")
        s = self.scope
        # A stay still open (no outtime) lasts until the dataset's now.
        return (f"SELECT subject_id, hadm_id, stay_id, intime, coalesce(outtime, {self.now}) AS outtime FROM icustays "
                f"WHERE {in_list('stay_id', s.stay_ids)} AND {in_list('hadm_id', s.hadm_ids)} "
                f"AND {in_list('subject_id', s.subject_ids)} AND intime <= {self.cutoff}")

    def admissions_sql(self) -> str:
        """Admissions in scope: subject_id, hadm_id, admittime, dischtime (admitted by as_of)."""
        self.require("admissions", "subject_id", "hadm_id", "admittime", "dischtime")
        s = self.scope
        stays = ("TRUE" if s.stay_ids is None else
                 f"hadm_id IN (SELECT hadm_id FROM icustays WHERE {in_list('stay_id', s.stay_ids)})")
        return (f"SELECT subject_id, hadm_id, admittime, coalesce(dischtime, {self.now}) AS dischtime FROM admissions "
                f"WHERE {in_list('hadm_id', s.hadm_ids)} AND {in_list('subject_id', s.subject_ids)} "
                f"AND {stays} AND admittime <= {self.cutoff}")

    def age_sql(self) -> str:
        """hadm_id, age (years, at admission) and gender ('F'/'M') of every admission."""
        if self.items.age == "admission":
            self.require("admissions", "hadm_id", "age")
            self.require("patients", "subject_id", "gender")
            return ("SELECT a.hadm_id, a.age::DOUBLE AS age, upper(p.gender) AS gender FROM admissions a "
                    "JOIN patients p USING (subject_id)")
        self.require("patients", "subject_id", "gender", "anchor_age", "anchor_year")
        return ("SELECT a.hadm_id, (p.anchor_age + year(a.admittime) - p.anchor_year)::DOUBLE AS age, "
                "upper(p.gender) AS gender FROM admissions a JOIN patients p USING (subject_id)")

    # -- measurements ------------------------------------------------------------------

    def values_sql(self, c: Concept, cohort: str, key: str, start: str, end: str) -> str:
        """``key, charttime, value`` of concept ``c`` for the rows of CTE ``cohort``, charted in
        [start, end] (SQL expressions over the cohort's columns) and by as_of."""
        table = c.table
        self.require(table, "itemid", "charttime", "valuenum", why=c.label)
        value = "valuenum"
        if c.convert:
            cases = " ".join(f"WHEN e.itemid = {i} THEN {expr.replace('v', 'e.valuenum')}"
                             for i, expr in c.convert.items())
            value = f"CASE {cases} ELSE e.valuenum END"
        else:
            value = "e.valuenum"
        if table == "chartevents" and key == "stay_id":
            join = "e.stay_id = k.stay_id"
        elif table == "chartevents":
            join = "e.hadm_id = k.hadm_id"
        else:  # labs: by patient and time, so labs drawn before admission can count
            join = "e.subject_id = k.subject_id"
        return (f"SELECT k.{key} AS key, e.charttime, {value} AS value, e.itemid FROM {table} e "
                f"JOIN {cohort} k ON {join} "
                f"WHERE {in_list('e.itemid', c.itemids)} AND e.valuenum IS NOT NULL "
                f"AND e.charttime >= {start} AND e.charttime <= {end} AND e.charttime <= {self.cutoff}")

    def valid(self, c: Concept, column: str = "value") -> str:
        return f"{column} BETWEEN {c.low} AND {c.high}"


def pick(frame: pl.DataFrame, keys: list[str], value: str, which: str, worst: str | None,
         time: str = "charttime") -> pl.DataFrame:
    """Reduce a timeline (one row per key and time) to what ``which`` asks for."""
    if which not in WHICH:
        raise SkillError(f"which must be one of {', '.join(WHICH)} (got {which!r}).")
    frame = frame.sort([*keys, time])
    if which == "all":
        return frame
    if which == "summary":
        valued = frame.filter(pl.col(value).is_not_null())
        return valued.group_by(keys, maintain_order=True).agg(
            pl.col(value).first().alias("first"), pl.col(time).first().alias("first_time"),
            pl.col(value).last().alias("last"), pl.col(time).last().alias("last_time"),
            pl.col(value).min().alias("min"), pl.col(value).max().alias("max"),
            pl.col(value).mean().alias("mean"), pl.len().alias("n"),
        )
    if which == "worst":
        if worst is None:
            raise SkillError(f"'worst' is ambiguous for {value}; use which='min' or which='max'.")
        which = worst
    valued = frame.filter(pl.col(value).is_not_null())
    if which == "first":
        return valued.group_by(keys, maintain_order=True).first()
    if which == "last":
        return valued.group_by(keys, maintain_order=True).last()
    order = valued.sort([*keys, value, time], descending=[False] * len(keys) + [which == "max", False])
    return order.group_by(keys, maintain_order=True).first().sort(keys)
