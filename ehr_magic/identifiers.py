"""Table and column names, and text values, written into SQL. Names are quoted by sqlglot, in
the dialect of the statement, so a name with a quote, a space or a capital stays one name ("a""b"
in DuckDB, PostgreSQL and SQLite; `a``b` in Spark SQL). SQL that ehr-magic writes quotes every
name through ``quote_identifier``; ``ehr.sql`` speaks DuckDB, the default dialect. Prompts show
names and values as the model should write them (``shown_identifier``, ``text_literal``)."""

from __future__ import annotations

import re
from functools import lru_cache

from sqlglot import exp


@lru_cache(maxsize=4096)  # reuse checks quote the same few names again and again
def quote_identifier(name: str, dialect: str = "duckdb") -> str:
    """``name`` as one quoted SQL identifier in ``dialect`` (a sqlglot dialect name)."""
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def shown_identifier(name: str) -> str:
    """``name`` as a prompt shows it: as it is when SQL reads it as one name unquoted, else quoted
    (``"weight (kg)"``, ``"lab name"``), so that the model writes it so."""
    return name if _IDENTIFIER.fullmatch(name) else quote_identifier(name)


_CONTROL = re.compile(r"([\x00-\x1f])")


def text_literal(value: str) -> str:
    """``value`` as an SQL string literal that matches it exactly, on one line: quotes doubled, a
    line break or tab written as ``chr(10)`` joined on (``'Sepsis' || chr(10) || 'with shock'``),
    so that a prompt listing it keeps one value per line and the model's query finds it."""
    parts = _CONTROL.split(value)
    pieces = [f"chr({ord(part)})" if odd else "'" + part.replace("'", "''") + "'"
              for odd, part in ((i % 2 == 1, part) for i, part in enumerate(parts)) if odd or part]
    return " || ".join(pieces) or "''"
