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
from urllib.parse import parse_qs

import duckdb
import polars as pl
import pyarrow as pa

from ehr_magic.engines.base import KNOWLEDGE_TABLE, META_TABLE
from ehr_magic.engines.base import Comments, DeclaredKeys, Engine, ForeignKey, first_line, kept_comments
from ehr_magic.engines.base import quote_identifier
from ehr_magic.errors import DatabaseError, ReadOnlyError, sentences
from ehr_magic.identifiers import text_literal
from ehr_magic.safety import limits

_SAFE_CONFIG = {"enable_external_access": False, "lock_configuration": True}


class DuckDBEngine(Engine):
    name = "DuckDB"
    dialect = "duckdb"
    remote = False

    def __init__(self, path: Path, search_path: list[str] | None = None) -> None:
        self.path = path
        self.location = str(path) + (f"?search_path={','.join(search_path)}" if search_path else "")
        _check_header(path)
        try:
            self._con = duckdb.connect(str(path), read_only=True, config={**_SAFE_CONFIG, **limits.duckdb_config()})
        except duckdb.Error as exc:
            raise DatabaseError(_open_problem(path, exc)) from None
        self._local = threading.local()
        self._cursors: list[tuple[threading.Thread, duckdb.DuckDBPyConnection]] = []
        self._cursor_lock = threading.Lock()
        self._schema_of: dict[str, str] = {}  # table -> the schema it is read from (table_columns)
        self.search_path = self._schemas(search_path)
        self._setting = "SET search_path = " + text_literal(",".join(quote_identifier(s) for s in self.search_path))
        if self.search_path != ["main"]:
            self._con.execute(self._setting)

    def _schemas(self, chosen: list[str] | None) -> list[str]:
        """The schemas whose tables analysis sees: those chosen, else ``main`` when it holds a data
        table, else every schema that does (a warehouse built by dbt, an OMOP CDM in schema cdm)."""
        held = [row[0] for row in self._con.execute(
            "SELECT schema_name FROM (SELECT database_name, schema_name, table_name FROM duckdb_tables() UNION ALL "
            "SELECT database_name, schema_name, view_name FROM duckdb_views() WHERE NOT internal) "
            "WHERE database_name = current_database() AND table_name NOT LIKE '\\_%' ESCAPE '\\' "
            "GROUP BY ALL ORDER BY schema_name").fetchall()]
        if chosen:
            existing = {row[0] for row in self._con.execute(
                "SELECT schema_name FROM duckdb_schemas() WHERE database_name = current_database()").fetchall()}
            missing = [name for name in chosen if name not in existing]
            if missing:
                self._con.close()
                raise DatabaseError(f"DuckDB database {self.path} has no schema {missing[0]}; its schemas are "
                                    f"{', '.join(sorted(existing))}. Fix search_path= after the file name.")
            return chosen
        return ["main"] if "main" in held or not held else held

    @classmethod
    def open(cls, target: str | os.PathLike[str], **options: Any) -> DuckDBEngine:
        text = str(target)
        if not Path(text).expanduser().exists() and "?" in text:  # file.duckdb?search_path=cdm,vocab, as in a URL
            text, _, query = text.partition("?")
            return cls(_database_file(text), _search_path(query, text))
        return cls(_database_file(text))

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
            "SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_catalog = current_database() AND list_contains($1, table_schema) "
            "AND table_name NOT LIKE '\\_%' ESCAPE '\\' "
            "ORDER BY list_position($1, table_schema), table_name, ordinal_position", [self.search_path]
        ).fetchall()
        tables: dict[str, dict[str, str]] = {}
        owner: dict[str, str] = {}
        for schema, table, column, dtype in rows:
            if owner.setdefault(table, schema) == schema:  # else shadowed by an earlier schema of the path
                tables.setdefault(table, {})[column] = dtype
        self._schema_of = owner
        return dict(sorted(tables.items()))

    def row_counts(self) -> dict[str, int]:
        rows = self.cursor().execute(
            "SELECT schema_name, table_name, estimated_size FROM duckdb_tables() "
            "WHERE database_name = current_database() AND list_contains($1, schema_name) "
            "ORDER BY list_position($1, schema_name)", [self.search_path]).fetchall()
        counts: dict[str, int] = {}
        for _, table, size in rows:
            if size is not None:
                counts.setdefault(table, int(size))
        return counts

    def comments(self) -> dict[str, Comments]:
        if not self._schema_of:
            self.table_columns()
        rows = self.cursor().execute(
            "SELECT schema_name, table_name, NULL, comment FROM duckdb_tables() "
            "WHERE database_name = current_database() AND comment IS NOT NULL UNION ALL "
            "SELECT schema_name, view_name, NULL, comment FROM duckdb_views() "
            "WHERE database_name = current_database() AND comment IS NOT NULL UNION ALL "
            "SELECT schema_name, table_name, column_name, comment FROM duckdb_columns() "
            "WHERE database_name = current_database() AND comment IS NOT NULL").fetchall()
        # only data tables, each from the schema it is read from (not one an earlier schema of the path shadows)
        return kept_comments((table, column, text) for schema, table, column, text in rows
                             if self._schema_of.get(table) == schema)

    def declared_keys(self) -> DeclaredKeys:
        if not self._schema_of:
            self.table_columns()
        rows = self.cursor().execute(
            "SELECT schema_name, table_name, constraint_type, constraint_column_names, referenced_table, "
            "referenced_column_names FROM duckdb_constraints() WHERE database_name = current_database() "
            "AND constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY') ORDER BY table_name, constraint_index").fetchall()
        primary: dict[str, tuple[str, ...]] = {}
        foreign = []
        for schema, table, kind, columns, target, keys in rows:
            if self._schema_of.get(table) != schema:
                continue  # not a data table read from this schema
            if kind == "PRIMARY KEY":
                primary[table] = tuple(columns)
            elif self._schema_of.get(target) == schema:  # DuckDB's references stay in their schema
                foreign.append(ForeignKey(table, tuple(columns), target, tuple(keys)))
        return DeclaredKeys(primary, tuple(foreign))

    def attach_to(self, con: Any, alias: str) -> bool:
        literal = str(self.path).replace("'", "''")
        con.execute(f"ATTACH '{literal}' AS {alias} (READ_ONLY)")
        return True

    def attached_table(self, alias: str, table: str) -> str:
        if not self._schema_of:
            self.table_columns()
        return f"{alias}.{quote_identifier(self._schema_of.get(table, 'main'))}.{quote_identifier(table)}"

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
            if self.search_path != ["main"]:
                cursor.execute(self._setting)  # a setting of each connection, allowed though they are locked
            self._local.cursor = cursor
            with self._cursor_lock:
                # Threads come and go (the executor runs each piece of code in a new one).
                for _, old in [pair for pair in self._cursors if not pair[0].is_alive()]:
                    old.close()
                self._cursors = [pair for pair in self._cursors if pair[0].is_alive()]
                self._cursors.append((threading.current_thread(), cursor))
        return cursor


def _database_file(target: str) -> Path:
    """The DuckDB file ``target`` names, or a sentence on why it is none."""
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
    return path


def _search_path(query: str, file: str) -> list[str]:
    """The schemas named by ``search_path=a,b`` (or ``schema=a``) after a DuckDB file's name."""
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - {"search_path", "schema"})
    schemas = [name.strip() for value in options.get("search_path", options.get("schema", []))
               for name in value.split(",") if name.strip()]
    if unknown or not schemas:
        raise DatabaseError(f"After the DuckDB file {file}, only ?search_path=SCHEMA[,SCHEMA...] is understood "
                            f"(got ?{query}); name the schemas that hold the tables.")
    return schemas


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
        raise DatabaseError(f"{path} is a SQLite database, not a DuckDB one; load it into one with "
                            f"`ehr-magic data load sqlite {path} --out FILE.duckdb` and connect to that.")
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
