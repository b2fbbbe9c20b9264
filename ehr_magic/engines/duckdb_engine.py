"""DuckDB files: the embedded default engine.

The analysis connection is opened read-only with external file access disabled and
the configuration locked, so code cannot write to the database, nor read or write
arbitrary files through SQL (``COPY``, ``read_csv``, ``ATTACH``...). SQL runs as
written (DuckDB is the dialect the model writes), through ``limits.fetch`` so the
row cap stops DuckDB early.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from ehr_magic.engines.base import KNOWLEDGE_TABLE, META_TABLE
from ehr_magic.engines.base import Engine, first_line, quote_identifier
from ehr_magic.errors import DatabaseError, ReadOnlyError, sentences
from ehr_magic.safety import limits

_SAFE_CONFIG = {"enable_external_access": False, "lock_configuration": True}


class DuckDBEngine(Engine):
    name = "DuckDB"
    dialect = "duckdb"
    remote = False

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)
        _check_header(path)
        try:
            self._con = duckdb.connect(str(path), read_only=True, config={**_SAFE_CONFIG, **limits.duckdb_config()})
        except duckdb.Error as exc:
            raise DatabaseError(_open_problem(path, exc)) from None
        self._local = threading.local()
        self._cursors: list[tuple[threading.Thread, duckdb.DuckDBPyConnection]] = []
        self._cursor_lock = threading.Lock()

    @classmethod
    def open(cls, target: str | os.PathLike[str], **options: Any) -> DuckDBEngine:
        path = Path(target).expanduser().resolve()
        if path.is_dir():
            raise DatabaseError(
                f"{target} is a folder, not a database file; load its table files into one with "
                f"`ehr-magic data load csv {target} --out FILE.duckdb` (CSV, TSV, parquet or spreadsheets), "
                "then connect to FILE."
            )
        if not path.is_file():
            raise DatabaseError(
                f"No database file at {target}; build one with `ehr-magic data synth --out FILE.duckdb` "
                "or `ehr-magic data load ...`, or connect to a server URL (postgresql://..., sc://...)."
            )
        return cls(path)

    # -- queries ---------------------------------------------------------------------------

    def query(self, sql: str, params: list[Any] | dict[str, Any] | None = None, *,
              what: str = "the query") -> pl.DataFrame:
        try:
            relation = self.cursor().sql(sql, params=params)
            if relation is None:  # a statement without a result set
                return pl.DataFrame()
            return limits.fetch(relation, what=what)
        except (duckdb.PermissionException, duckdb.InvalidInputException) as exc:
            raise safety_error(exc) from None

    def query_arrow(self, sql: str, params: list[Any] | None = None, max_rows: int | None = None) -> pa.Table:
        try:
            relation = self.cursor().sql(sql, params=params)
            if relation is None:
                return pa.table({})
            if max_rows is not None:
                relation = relation.limit(max_rows)
            return _arrow_table(relation)
        except (duckdb.PermissionException, duckdb.InvalidInputException) as exc:
            raise safety_error(exc) from None

    def table_columns(self) -> dict[str, dict[str, str]]:
        rows = self.cursor().execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main' AND table_name NOT LIKE '\\_%' ESCAPE '\\' "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
        tables: dict[str, dict[str, str]] = {}
        for table, column, dtype in rows:
            tables.setdefault(table, {})[column] = dtype
        return tables

    def row_counts(self) -> dict[str, int]:
        rows = self.cursor().execute(
            "SELECT table_name, estimated_size FROM duckdb_tables() WHERE database_name = current_database() "
            "AND schema_name = 'main'").fetchall()
        return {table: int(size) for table, size in rows if size is not None}

    def attach_to(self, con: Any, alias: str) -> bool:
        literal = str(self.path).replace("'", "''")
        con.execute(f"ATTACH '{literal}' AS {alias} (READ_ONLY)")
        return True

    def sampled(self, table: str, percent: float) -> str:
        return f'(SELECT * FROM {quote_identifier(table)} USING SAMPLE {percent:.4f}% (system, 7))'

    def read_meta(self) -> dict[str, str]:
        return self._pairs(f"SELECT key, value FROM {META_TABLE}")

    def read_knowledge(self) -> dict[str, str]:
        return self._pairs(f"SELECT schema, yaml FROM {KNOWLEDGE_TABLE}")

    def _pairs(self, sql: str) -> dict[str, str]:
        try:
            rows = self._con.execute(sql).fetchall()
        except duckdb.CatalogException:  # a database built without that table
            return {}
        return {key: value for key, value in rows}

    def interrupt(self) -> None:
        with self._cursor_lock:
            for _, cursor in self._cursors:
                try:
                    cursor.interrupt()
                except duckdb.Error:
                    pass

    def close(self) -> None:
        with self._cursor_lock:
            for _, cursor in self._cursors:
                cursor.close()
            self._cursors.clear()
        self._con.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor (DuckDB connections are not safe across threads)."""
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._con.cursor()
            self._local.cursor = cursor
            with self._cursor_lock:
                # Threads come and go (the executor runs each piece of code in a new one).
                for _, old in [pair for pair in self._cursors if not pair[0].is_alive()]:
                    old.close()
                self._cursors = [pair for pair in self._cursors if pair[0].is_alive()]
                self._cursors.append((threading.current_thread(), cursor))
        return cursor


_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file
_LOCK_HOLDER = re.compile(r"lock is held in (.+?) \(PID (\d+)\)")


def _check_header(path: Path) -> None:
    """Refuse a file that is not a DuckDB database before DuckDB tries to read it (it would try to
    download a reader for a SQLite file)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError as exc:
        raise DatabaseError(f"Cannot read {path}: {exc.strerror or exc}.") from None
    if head.startswith(b"SQLite format 3"):
        raise DatabaseError(f"{path} is a SQLite database, not a DuckDB one; copy its tables into a DuckDB file "
                            "(ehr-magic data load, or DuckDB's sqlite extension) and connect to that.")
    if head[8:12] != _MAGIC:
        raise DatabaseError(f"{path} is not a DuckDB database file; connect to a .duckdb file or a server URL, or "
                            "load table files with ehr-magic data load csv.")


def _open_problem(path: Path, exc: duckdb.Error) -> str:
    """One sentence on why a DuckDB file cannot be opened for reading."""
    message = first_line(exc)
    holder = _LOCK_HOLDER.search(str(exc))
    if holder or "Could not set lock" in message:
        who = f" (process {holder.group(2)}, {Path(holder.group(1)).name})" if holder else ""
        return (f"{path} is open for writing in another program{who}; close it there, or connect to a copy of the "
                "file, then connect again.")
    return f"Cannot open {path} as a DuckDB database: {message}"


def safety_error(exc: duckdb.Error) -> Exception:
    message = first_line(exc)
    if "read-only" in message:
        return ReadOnlyError(
            f"The database is open read-only for analysis, so this statement cannot run: {sentences(message)} "
            "Use SELECT queries; to change the data, rebuild it with `ehr-magic data`."
        )
    if "configuration has been locked" in message:
        return ReadOnlyError(f"Settings of the analysis connection are locked for safety: {sentences(message)}")
    if isinstance(exc, duckdb.PermissionException):
        return ReadOnlyError(
            f"File access from SQL is disabled for safety: {sentences(message)} Query the tables of the connected "
            "database."
        )
    return exc


def _arrow_table(relation: duckdb.DuckDBPyRelation) -> pa.Table:
    """The relation's rows as an Arrow table: ``to_arrow_table`` where DuckDB has it (1.4 on
    deprecates ``fetch_arrow_table``, with a warning in the analyst's notebook), else the old name."""
    to_arrow = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
    return to_arrow()
