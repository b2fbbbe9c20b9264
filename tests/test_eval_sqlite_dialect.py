"""SQLite -> DuckDB translation, checked construct by construct against SQLite itself.

Each case runs the original query on a small SQLite table (``current_time`` replaced
by the clock, as EHRSQL's scorer does) and the translation on the same rows in
DuckDB (timestamps as real TIMESTAMPs, as our loader makes them); the normalised
results must be equal.
"""

from __future__ import annotations

import datetime as dt
import sqlite3

import duckdb
import pytest

from ehr_magic.eval.scoring import normalize_rows
from ehr_magic.eval.sqlite_dialect import TranslationError, translate

NOW = dt.datetime(2100, 12, 31, 23, 59, 0)
NOW_TEXT = "2100-12-31 23:59:00"

ROWS = [  # id, g, t, v, s
    (1, 1, "2100-12-31 23:59:00", 1.5, "10.0"),
    (2, 1, "2100-03-31 08:15:00", 2.25, "2.5"),
    (3, 2, "2100-01-31 00:00:00", -3.75, "7.0"),
    (4, 2, "2104-02-29 12:00:00", 0.125, "abc"),
    (5, 3, "2100-07-04 23:30:45", 10.0, "1"),
    (6, 3, None, None, None),
    (7, 3, "2099-12-31 00:00:00", 4.0, "0.5"),
]
SCHEMA = {"ev": {"id": "BIGINT", "g": "BIGINT", "t": "TIMESTAMP", "v": "DOUBLE", "s": "VARCHAR"}}


@pytest.fixture(scope="module")
def engines() -> tuple[sqlite3.Connection, duckdb.DuckDBPyConnection]:
    lite = sqlite3.connect(":memory:")
    lite.execute("CREATE TABLE ev (id INT, g INT, t TIMESTAMP(0), v DOUBLE PRECISION, s VARCHAR(20))")
    lite.executemany("INSERT INTO ev VALUES (?, ?, ?, ?, ?)", ROWS)
    duck = duckdb.connect()
    duck.execute("CREATE TABLE ev (id BIGINT, g BIGINT, t TIMESTAMP, v DOUBLE, s VARCHAR)")
    duck.executemany("INSERT INTO ev VALUES (?, ?, CAST(? AS TIMESTAMP), ?, ?)", ROWS)
    return lite, duck


def both(engines, sql: str) -> tuple[list[list[str]], list[list[str]], str]:
    lite, duck = engines
    expected = lite.execute(sql.replace("current_time", f"'{NOW_TEXT}'")).fetchall()
    translated = translate(sql, now=NOW, schema=SCHEMA)
    got = duck.execute(translated).fetchall()
    return normalize_rows(expected), normalize_rows(got), translated


def check(engines, sql: str) -> str:
    expected, got, translated = both(engines, sql)
    assert got == expected, f"\nSQLite: {sql}\nDuckDB: {translated}"
    return translated


# -- the clock -------------------------------------------------------------------------------


@pytest.mark.parametrize("clock", ["current_time", "current_timestamp", "datetime('now')", "datetime()"])
def test_current_time_is_the_dataset_clock(clock: str) -> None:
    duck = duckdb.connect()
    translated = translate(f"SELECT {clock}", now=NOW)
    assert "CURRENT_" not in translated.upper()
    assert duck.execute(translated).fetchall() == [(NOW,)]


def test_clock_in_comparisons(engines) -> None:
    check(engines, "SELECT id FROM ev WHERE datetime(t) >= datetime(current_time, '-1 year')")
    check(engines, "SELECT id FROM ev WHERE t <= current_time")


# -- datetime modifiers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "modifiers",
    [
        "'start of year'",
        "'start of month'",
        "'start of day'",
        "'+3 day'",
        "'-2 day'",
        "'-1 year'",
        "'+1 year'",  # 2104-02-29 + 1 year = 2105-03-01 in SQLite
        "'-1 month'",  # 2100-03-31 - 1 month = 2100-03-03 in SQLite (DuckDB would clamp)
        "'+1 month'",  # 2100-01-31 + 1 month = 2100-03-03
        "'-13 month'",
        "'start of month', '+1 month', '-1 day'",
        "'start of year', '-0 year'",
        "'+5 hour'",
        "'-30 minute'",
        "'+90 second'",
        "'+1.5 day'",
        "'weekday 0'",
        "'weekday 3'",
        "'+2 days'",
    ],
)
def test_datetime_modifiers_on_columns(engines, modifiers: str) -> None:
    check(engines, f"SELECT id, datetime(t, {modifiers}) FROM ev")


@pytest.mark.parametrize(
    "modifiers",
    ["'start of year', '-1 year'", "'-1 month'", "'-2 month'", "'start of month', '-1 month'",
     "'start of day', '-1 day'", "'-228 day'", "'weekday 1'", "'+1 year'"],
)
def test_datetime_modifiers_on_the_clock_fold_to_literals(engines, modifiers: str) -> None:
    translated = check(engines, f"SELECT datetime(current_time, {modifiers})")
    assert "INTERVAL" not in translated and "DATE_TRUNC" not in translated


def test_month_overflow_follows_sqlite() -> None:
    duck = duckdb.connect()
    assert duck.execute(translate("SELECT datetime(current_time, '-1 month')", now=NOW)).fetchone()[0] == \
        dt.datetime(2100, 12, 1, 23, 59)
    assert duck.execute(translate("SELECT datetime('2100-03-31', '-1 month')", now=NOW)).fetchone()[0] == \
        dt.datetime(2100, 3, 3)


def test_date_and_time_functions(engines) -> None:
    check(engines, "SELECT id, date(t), time(t), date(t, '+1 day'), datetime(t) FROM ev")
    check(engines, "SELECT date(current_time), time(current_time), date('2100-05-03 10:00:00', 'start of month')")


def test_invalid_time_text_is_null(engines) -> None:
    check(engines, "SELECT datetime('not a time'), datetime(NULL), strftime('%Y', NULL)")


# -- strftime --------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["%Y", "%m", "%d", "%H", "%M", "%S", "%Y-%m", "%m-%d", "%Y-%m-%d", "%j", "%w",
                                 "%W", "%Y-%m-%d %H:%M:%S", "%%"])
def test_strftime_gives_zero_padded_text(engines, fmt: str) -> None:
    check(engines, f"SELECT id, strftime('{fmt}', t), strftime('{fmt}', current_time) FROM ev")


def test_strftime_text_comparisons(engines) -> None:
    check(engines, "SELECT id FROM ev WHERE strftime('%m', t) = '07'")
    check(engines, "SELECT id FROM ev WHERE strftime('%Y', t) = '2100' AND strftime('%Y-%m', t) >= '2100-03'")
    check(engines, "SELECT id FROM ev WHERE strftime('%Y', t) >= '2100'")


def test_strftime_with_modifiers(engines) -> None:
    check(engines, "SELECT id, strftime('%Y-%m-%d', t, 'start of month', '+1 month') FROM ev")


# -- Julian days -----------------------------------------------------------------------------


def test_julian_day_differences(engines) -> None:
    check(engines, "SELECT id, 24 * (strftime('%J', current_time) - strftime('%J', t)) FROM ev")
    check(engines, "SELECT id, julianday(current_time) - julianday(t) FROM ev")
    check(engines, "SELECT id, strftime('%J', t) + 0, julianday(t) FROM ev WHERE strftime('%H', t) <> '12'")
    check(engines, "SELECT id FROM ev WHERE strftime('%J', current_time) - strftime('%J', t) >= 1 * 365/2")


def test_integral_julian_day_is_a_float(engines) -> None:
    """Known difference: SQLite's %J is text, so a whole Julian day becomes an INTEGER in
    arithmetic ('2489589'); ours is always a DOUBLE ('2489589.0'). Same number."""
    expected, got, _ = both(engines, "SELECT strftime('%J', t) + 0 FROM ev WHERE id = 4")
    assert expected == [["2489589"]] and got == [["2489589.0"]]


def test_unixepoch(engines) -> None:
    check(engines, "SELECT id, strftime('%s', t) FROM ev")


# -- arithmetic, casts, text -----------------------------------------------------------------


def test_integer_division(engines) -> None:
    translated = check(engines, "SELECT 365/2, 1 * 365/4, -7/2, 7.0/2, 7/2.0, 5/0, id/2, v/2, id/0 FROM ev")
    assert "//" in translated


def test_casts_and_round(engines) -> None:
    check(engines, "SELECT id, CAST(v AS INTEGER), CAST(v AS REAL), ROUND(v), ROUND(v, 1), ROUND(id) FROM ev")
    check(engines, "SELECT CAST(3.7 AS INTEGER), CAST(-3.7 AS INT), ROUND(3), ROUND(2.5)")


def test_sum_of_text_column(engines) -> None:
    check(engines, "SELECT SUM(s), AVG(s), TOTAL(v) FROM ev WHERE s <> 'abc'")


def test_like_ignores_case(engines) -> None:
    check(engines, "SELECT id FROM ev WHERE s LIKE 'AB%' OR s LIKE '10%'")


def test_concatenation_and_booleans(engines) -> None:
    check(engines, "SELECT id, 'a' || s, COUNT(*) > 0 FROM ev GROUP BY id")
    check(engines, "SELECT 1 - COUNT(*) > 0 FROM ev WHERE v > 100")


def test_vital_sign_placeholders_get_the_scorers_ranges(engines) -> None:
    lite, duck = engines
    sql = "SELECT id FROM ev WHERE v NOT BETWEEN {low} AND {high}"
    translated = translate(sql.format(low="heart_rate_lower", high="heart_rate_upper"), now=NOW)
    assert "60.0" in translated and "100.0" in translated
    expected = lite.execute(sql.format(low=60.0, high=100.0)).fetchall()
    assert normalize_rows(duck.execute(translated).fetchall()) == normalize_rows(expected)


def test_in_subquery_with_limit(engines) -> None:
    check(engines, "SELECT id FROM ev WHERE g IN (SELECT g FROM ev ORDER BY t DESC LIMIT 1)")
    check(engines, "SELECT id FROM ev ORDER BY t ASC LIMIT 2")  # NULL first, as in SQLite


# -- SQLite's bare columns -------------------------------------------------------------------


def test_bare_column_takes_the_min_row(engines) -> None:
    sql = "SELECT g, t FROM ev WHERE t IS NOT NULL GROUP BY g HAVING MIN(t) = t"
    translated = check(engines, sql)
    assert "ARG_MIN" in translated
    check(engines, "SELECT T1.g, T1.t FROM (" + sql + ") AS T1")  # the column keeps its name


def test_bare_column_takes_the_max_row(engines) -> None:
    check(engines, "SELECT g, id, MAX(v) FROM ev GROUP BY g")


# -- what is not supported fails clearly ------------------------------------------------------


@pytest.mark.parametrize("sql", [
    "SELECT datetime(t, 'localtime') FROM ev",
    "SELECT strftime('%f', t) FROM ev",
    "SELECT datetime(t, '+1.5 month') FROM ev",
    "SELECT FROM WHERE",
])
def test_unsupported_constructs_raise_translation_error(sql: str) -> None:
    with pytest.raises(TranslationError):
        translate(sql, now=NOW)
