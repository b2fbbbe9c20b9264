"""Table and column names written into SQL: quoted by sqlglot, in the dialect of the
statement, so a name with a quote, a space or a capital stays one name ("a""b" in DuckDB,
PostgreSQL and SQLite; `a``b` in Spark SQL). SQL that ehr-magic writes quotes every name
through ``quote_identifier``; ``ehr.sql`` speaks DuckDB, the default dialect."""

from __future__ import annotations

from functools import lru_cache

from sqlglot import exp


@lru_cache(maxsize=4096)  # reuse checks quote the same few names again and again
def quote_identifier(name: str, dialect: str = "duckdb") -> str:
    """``name`` as one quoted SQL identifier in ``dialect`` (a sqlglot dialect name)."""
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)
