"""The EHRSQL benchmark databases (SQLite), e.g. EHRSQL-2024's time-shifted MIMIC-IV demo.

DuckDB's sqlite extension would have to be downloaded, so rows are read with Python's
sqlite3 in chunks and handed to DuckDB as Arrow tables; column types come from the
SQLite declarations (TIMESTAMP text becomes a real TIMESTAMP).
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
from pathlib import Path

import duckdb
import pyarrow as pa

from ehr_magic.db.build import building, write_metadata
from ehr_magic.sources.loading import LoadReport, Progress
from ehr_magic.errors import DataSourceError
from ehr_magic.identifiers import quote_identifier as quote

SCHEMA = "ehrsql_mimic_iv"
EHRSQL_NOW = "2100-12-31 23:59:00"  # the "current time" the EHRSQL questions assume
_CHUNK = 50_000


def duckdb_type(declared: str) -> str:
    """DuckDB type for a SQLite column declaration."""
    d = declared.upper()
    if "INT" in d:
        return "BIGINT"
    if "TIMESTAMP" in d or "DATETIME" in d:
        return "TIMESTAMP"
    if d.startswith("DATE"):
        return "DATE"
    if any(t in d for t in ("REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL")):
        return "DOUBLE"
    return "VARCHAR"


def load(
    sqlite_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    now: dt.datetime | str = EHRSQL_NOW,
    schema: str = SCHEMA,
    progress: Progress | None = None,
) -> LoadReport:
    """Copy every table of an EHRSQL SQLite file into a new DuckDB database at ``out``."""
    path = Path(sqlite_path).expanduser()
    if not path.is_file():
        raise DataSourceError(f"No file at {sqlite_path}; pass the benchmark's .sqlite database file.")
    with open(path, "rb") as handle:
        if handle.read(16) != b"SQLite format 3\x00":
            raise DataSourceError(f"{sqlite_path} is not a SQLite database file.")
    source = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in source.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
        if not tables:
            raise DataSourceError(f"{sqlite_path} holds no tables.")
        report = LoadReport()
        with building(out) as con:
            for i, table in enumerate(tables):
                if progress:
                    progress(table, i, len(tables))
                report.tables[table] = _copy_table(source, con, table)
            if progress:
                progress("done", len(tables), len(tables))
            report.now = now if isinstance(now, str) else now.strftime("%Y-%m-%d %H:%M:%S")
            write_metadata(con, schema=schema, source="ehrsql-sqlite", now=report.now, dataset=f"ehrsql-{path.stem}")
        return report
    except sqlite3.DatabaseError as exc:
        raise DataSourceError(f"Cannot read {sqlite_path}: {exc}.") from None
    finally:
        source.close()


def _copy_table(source: sqlite3.Connection, con: duckdb.DuckDBPyConnection, table: str) -> int:
    columns = [(row[1], duckdb_type(row[2] or ""))
               for row in source.execute(f"PRAGMA table_info({quote(table, 'sqlite')})")]
    ident = quote(table)
    con.execute(f"CREATE TABLE {ident} ({', '.join(f'{quote(c)} {t}' for c, t in columns)})")
    names = [c for c, _ in columns]
    cursor = source.execute(f"SELECT {', '.join(quote(c) for c in names)} FROM {ident}")
    casts = ", ".join(f"CAST({quote(c)} AS {t}) AS {quote(c)}" for c, t in columns)
    count = 0
    while rows := cursor.fetchmany(_CHUNK):
        # Hand the chunk over as text (SQLite values are loosely typed), DuckDB casts strictly.
        arrays = [pa.array([None if v is None else str(v) for v in col], type=pa.string()) for col in zip(*rows)]
        chunk = pa.Table.from_arrays(arrays, names=names)
        con.register("_chunk", chunk)
        con.execute(f"INSERT INTO {ident} SELECT {casts} FROM _chunk")
        con.unregister("_chunk")
        count += len(rows)
    return count


