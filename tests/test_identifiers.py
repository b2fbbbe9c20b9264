"""SQL names quoted by sqlglot (``ehr_magic.identifiers.quote_identifier``)."""

from __future__ import annotations

import sqlite3

import duckdb
import pytest

from ehr_magic.identifiers import quote_identifier

ODD_NAMES = ["patients", "Admission Type", 'rx "orders"', "x`y", "select", "naïve"]


@pytest.mark.parametrize(("dialect", "expected"), [
    ("duckdb", '"a""b"'), ("postgres", '"a""b"'), ("sqlite", '"a""b"'), ("spark", '`a"b`'),
])
def test_each_dialect_quotes_its_own_way(dialect: str, expected: str) -> None:
    assert quote_identifier('a"b', dialect) == expected
    assert quote_identifier("x`y", "spark") == "`x``y`"


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_quoted_name_is_one_name_to_duckdb_and_sqlite(name: str) -> None:
    quoted = quote_identifier(name)
    con = duckdb.connect()
    con.execute(f"CREATE TABLE {quoted} ({quoted} INTEGER)")
    con.execute(f"INSERT INTO {quoted} VALUES (1)")
    assert con.execute(f"SELECT {quoted} FROM {quoted}").fetchall() == [(1,)]
    assert [row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()] == [name]
    lite = sqlite3.connect(":memory:")
    lite.execute(f"CREATE TABLE {quote_identifier(name, 'sqlite')} (x)")
    assert lite.execute("SELECT name FROM sqlite_master").fetchone() == (name,)
