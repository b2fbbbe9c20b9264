"""Dates and times written the way spreadsheets and hospital systems write them.

DuckDB's CSV reader knows ISO dates and month-first slashes, but leaves as text what a
spreadsheet in the US writes for a time ('3/1/2024 14:05', '3/1/2024 2:05 PM'), what Europe
writes ('01.03.2024', '31/12/2023 09:30') and what Oracle exports write ('01-MAR-2024'); and it
reads a two-digit year ('3/1/24') as the year 24. After loading, a text column whose values are
all such dates becomes a DATE (no value with a time of day) or a TIMESTAMP, read in the one
written order that fits every value: month first unless some value's first number is above 12.
A two-digit year is in 1969-2068, as C's and DuckDB's %y read it.
"""

from __future__ import annotations

import re

import duckdb

from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.identifiers import text_literal

# The date part of every order, two-digit years before four-digit ones: '%Y' would take '24' for
# the year 24, while '%y' cannot take '2024'.
_DATE_ORDERS = ("%m/%d/%y", "%m/%d/%Y", "%d/%m/%y", "%d/%m/%Y", "%d.%m.%y", "%d.%m.%Y", "%d-%b-%y", "%d-%b-%Y",
                "%Y/%m/%d", "%m-%d-%Y", "%d-%m-%Y")
_TIMES = (" %H:%M:%S", " %H:%M", " %I:%M:%S %p", " %I:%M %p", "T%H:%M:%S", "")
# What a value must look like to be tried at all (a cheap look at a sample of rows first).
_SHAPE = re.compile(r"\d{1,4}[/.\-](\d{1,2}|[A-Za-z]{3})[/.\-]\d{2,4}([ T]\d{1,2}:\d{2}(:\d{2})?( ?[AaPp][Mm])?)?")
_TWO_DIGIT_YEAR = re.compile(r"\d{1,2}[/.\-](\d{1,2}|[A-Za-z]{3})[/.\-]\d{2}(\D.*)?")
_SAMPLE_ROWS = 200


def two_digit_years(values: list[object]) -> bool:
    """Whether text values read as dates write the year in two digits ('3/1/24')."""
    said = [str(v) for v in values if v is not None and str(v).strip()]
    return bool(said) and all(_TWO_DIGIT_YEAR.fullmatch(v.strip()) for v in said)


def convert_written_dates(con: duckdb.DuckDBPyConnection, table: str, keep: set[str]) -> list[str]:
    """Turn the text columns of ``table`` (but those in ``keep``) whose every value is a written
    date into DATE or TIMESTAMP; returns the columns converted."""
    texts = [name for name, kind in con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'main' "
        "AND table_name = ? ORDER BY ordinal_position", [table]).fetchall() if kind == "VARCHAR" and name not in keep]
    if not texts:
        return []
    sample = con.execute(f"SELECT {', '.join(quote(c) for c in texts)} FROM {quote(table)} "
                         f"LIMIT {_SAMPLE_ROWS}").fetchall()
    candidates = [column for i, column in enumerate(texts)
                  if (seen := [row[i].strip() for row in sample if row[i] is not None and row[i].strip()])
                  and all(_SHAPE.fullmatch(value) for value in seen)]
    converted = []
    for column in candidates:
        order = _order_of(con, table, column)
        if order is None:
            continue
        name, formats = quote(column), _formats(order)
        con.execute(f"ALTER TABLE {quote(table)} ALTER {name} SET DATA TYPE TIMESTAMP "
                    f"USING strptime(nullif(trim({name}), ''), {formats})")
        midnight = con.execute(f"SELECT bool_and({name} = date_trunc('day', {name})) FROM {quote(table)}").fetchone()
        if midnight and midnight[0]:
            con.execute(f"ALTER TABLE {quote(table)} ALTER {name} SET DATA TYPE DATE")
        converted.append(column)
    return converted


def _order_of(con: duckdb.DuckDBPyConnection, table: str, column: str) -> str | None:
    """The first written order (``_DATE_ORDERS``) in which every value of ``column`` reads."""
    name = quote(column)
    misses = ", ".join(f"count(*) FILTER (WHERE try_strptime(trim({name}), {_formats(order)}) IS NULL)"
                       for order in _DATE_ORDERS)
    found = con.execute(f"SELECT {misses} FROM {quote(table)} WHERE nullif(trim({name}), '') IS NOT NULL").fetchone()
    return next((order for order, missed in zip(_DATE_ORDERS, found or ()) if missed == 0), None)


def _formats(order: str) -> str:
    return "[" + ", ".join(text_literal(order + time) for time in _TIMES) + "]"
