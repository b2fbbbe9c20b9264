"""The clock of a database that does not carry one: read from the data, never made up.

A database ehr-magic built states its clock in its metadata. Any other database gets it
from its knowledge, where a data model says where its current time lives (OMOP:
``clock: [cdm_source.source_release_date, observation_period.observation_period_end_date]``,
the first entry with a value winning), else from the latest date or time in the data:
DATE columns count as well as timestamps, and an end, stop or due time (a validity end of
2099-12-31, a planned discharge) moves it at most a day past the latest event. With no
time in the data there is no clock, and relative times are refused in one sentence.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ehr_magic.db.clock import Clock
from ehr_magic.text import parse_time

NO_DATES = "no clock: no dates in the data"
FUTURE_SLACK = dt.timedelta(days=1)  # how far an end time may move the clock past the latest event

Query = Callable[[str, list[Any] | None], list[tuple]]  # DuckDB SQL with ? parameters -> rows


def no_dates_refusal(dataset: str, helper: str) -> str:
    """The one sentence a relative-time helper answers with when the data has no dates."""
    return (f"ehr.{helper} needs the dataset's clock, but {dataset} has no dates or times in its tables; write the "
            "time itself (such as '2019-01-01'), or connect with now='YYYY-MM-DD' or state a clock in its knowledge.")


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def stated_clock(entries: Iterable[str], columns: Mapping[str, Mapping[str, str]], query: Query, *,
                 drafted: bool = False) -> Clock | None:
    """The clock a knowledge file states: its first entry that gives a time (a time written, or
    the latest value of a ``table.column``, names matched case-insensitively). ``drafted``: the
    statement was drafted from the data, so the connect line says it is the latest date there."""
    tables = {name.lower(): name for name in columns}
    for entry in entries:
        table, dot, column = entry.partition(".")
        actual = tables.get(table.lower()) if dot else None
        if actual is None:
            try:
                return Clock(parse_time(entry), "drafted from the data" if drafted else "stated in the knowledge")
            except ValueError:
                continue  # a table.column of a table this database lacks: the next entry
        spelled = {name.lower(): name for name in columns[actual]}
        name = spelled.get(column.lower())
        if name is None:
            continue
        value = query(f"SELECT max({quote(name)}) AS latest FROM {quote(actual)}", None)[0][0]
        if value is not None:
            where = f"{actual}.{name}"
            return Clock(parse_time(value), f"latest date in the data: {where}" if drafted else where)
    return None


def latest_in_data(columns: Mapping[str, Mapping[str, str]], query: Query,
                   is_end: Callable[[str], bool]) -> Clock | None:
    """The latest event date or time in the data (DATE and TIMESTAMP columns), an end time
    (``is_end``) moving it at most ``FUTURE_SLACK`` later; None when no column holds one."""
    highs: list[tuple[dt.datetime, str, str]] = []
    for table, types in columns.items():
        times = [c for c, dtype in types.items() if dtype == "DATE" or dtype.startswith("TIMESTAMP")]
        if not times:
            continue
        parts = ", ".join(f"max({quote(c)}) AS m{i}" for i, c in enumerate(times))  # one name each, for polars
        row = query(f"SELECT {parts} FROM {quote(table)}", None)[0]
        highs += [(parse_time(value), table, c) for c, value in zip(times, row) if value is not None]
    if not highs:
        return None
    starts = [h for h in highs if not is_end(h[2])] or highs
    now, table, column = max(starts)
    limit = now + FUTURE_SLACK
    for high, t, c in highs:
        if high > now:
            capped = query(f"SELECT max({quote(c)}) AS latest FROM {quote(t)} WHERE {quote(c)} <= ?", [limit])[0][0]
            if capped is not None and parse_time(capped) > now:
                now, table, column = parse_time(capped), t, c
    return Clock(now, f"latest date in the data: {table}.{column}")
