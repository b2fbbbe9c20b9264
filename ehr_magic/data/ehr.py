"""The ``EHR`` object: one connected, read-only EHR database with its schema,
descriptions and clock. Everything else in ehr_magic reaches data through it.

The analysis connection is opened read-only with external file access disabled and
the configuration locked, so code cannot write to the database, nor read or write
arbitrary files through SQL (``COPY``, ``read_csv``, ``ATTACH``...).
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
from rapidfuzz import process

from ehr_magic.data.build import META_TABLE
from ehr_magic.data.clock import Clock, Unit, parse_time
from ehr_magic.data.lookup import VocabularyCache
from ehr_magic.errors import DatabaseError, EhrMagicError, ReadOnlyError
from ehr_magic.safety import limits

_SAFE_CONFIG = {"enable_external_access": False, "lock_configuration": True}


def connect(path: str | os.PathLike[str], *, now: str | dt.datetime | None = None) -> EHR:
    """Open an EHR database file for analysis (read-only). ``now`` overrides its clock."""
    return EHR(path, now=now)


class EHR:
    """A connected EHR database: ``sql``, ``table``, ``lookup``, ``describe`` and the clock."""

    def __init__(self, path: str | os.PathLike[str], *, now: str | dt.datetime | None = None) -> None:
        self.path = Path(path).expanduser().resolve()
        if not self.path.is_file():
            raise DatabaseError(
                f"No database file at {path}; build one with `ehr-magic data synth --out FILE.duckdb` "
                "or `ehr-magic data load ...`."
            )
        try:
            self._con = duckdb.connect(str(self.path), read_only=True, config={**_SAFE_CONFIG, **limits.duckdb_config()})
        except duckdb.Error as exc:
            raise DatabaseError(f"Cannot open {path} as a DuckDB database: {_first_line(exc)}") from None
        self._local = threading.local()
        self._cursors: list[tuple[threading.Thread, duckdb.DuckDBPyConnection]] = []
        self._cursor_lock = threading.Lock()
        self._frames: dict[str, pl.DataFrame] = {}
        self.meta: dict[str, str] = self._read_meta()
        self.schema: str = self.meta.get("schema", "unknown")
        self.dataset: str = self.meta.get("dataset", self.path.stem)
        anchor = now if now is not None else self.meta.get("now")
        self.clock = Clock(parse_time(anchor) if anchor else self._latest_time())
        self._vocabularies = VocabularyCache(self._distinct_values)

    # -- queries ---------------------------------------------------------------------------

    def sql(self, query: str, params: list[Any] | dict[str, Any] | None = None) -> pl.DataFrame:
        """Run a read-only SQL query (DuckDB dialect) and return a polars DataFrame."""
        cursor = self._cursor()
        try:
            relation = cursor.sql(query, params=params)
            if relation is None:  # a statement without a result set
                return pl.DataFrame()
            return limits.fetch(relation)
        except (duckdb.PermissionException, duckdb.InvalidInputException) as exc:
            raise _safety_error(exc) from None

    def table(self, name: str) -> pl.LazyFrame:
        """A whole table as a polars LazyFrame (read once, then cached in memory).

        For very large tables, filter in SQL with ``ehr.sql`` instead.
        """
        name = self._check_table(name)
        frame = self._frames.get(name)
        if frame is None:
            frame = limits.fetch(self._cursor().sql(f'SELECT * FROM "{name}"'), what=f"ehr.table({name!r})")
            self._frames[name] = frame
        return frame.lazy()

    def tables(self) -> list[str]:
        """Names of the data tables, sorted."""
        return list(self._table_columns)

    def columns(self, table: str) -> dict[str, str]:
        """Column name -> DuckDB type of one table."""
        return dict(self._table_columns[self._check_table(table)])

    def count(self, table: str) -> int:
        return int(self._cursor().execute(f'SELECT count(*) FROM "{self._check_table(table)}"').fetchall()[0][0])

    def describe(self, table: str, examples: int = 3) -> pl.DataFrame:
        """Columns of ``table`` with type, description and a few example values."""
        table = self._check_table(table)
        info = self.knowledge.tables.get(table) if self.knowledge else None
        rows = []
        for column, dtype in self._table_columns[table].items():
            values = self._cursor().execute(
                f'SELECT DISTINCT "{column}" FROM (SELECT "{column}" FROM "{table}" '
                f'WHERE "{column}" IS NOT NULL LIMIT 1000) LIMIT {int(examples)}'
            ).fetchall()
            rows.append(
                {
                    "column": column,
                    "type": dtype,
                    "description": info.columns.get(column, "") if info else "",
                    "examples": ", ".join(str(v[0]) for v in values),
                }
            )
        return pl.DataFrame(rows, schema={"column": pl.String, "type": pl.String,
                                          "description": pl.String, "examples": pl.String})

    def lookup(self, table: str, column: str, text: str, k: int = 5, *, scores: bool = False) -> list:
        """The ``k`` stored values of ``table.column`` closest to ``text``, best first.

        Tolerates case, spacing, punctuation, partial matches and word order, e.g.
        ``lookup('d_labitems', 'label', 'RDW')`` finds ``'rdw'``. With ``scores=True``
        returns ``(value, score)`` pairs (score 0-100).
        """
        table = self._check_table(table)
        if column not in self._table_columns[table]:
            raise EhrMagicError(
                f"Table {table} has no column {column!r}; its columns are: {', '.join(self._table_columns[table])}."
            )
        matches = self._vocabularies.get(table, column).match(text, k)
        return matches if scores else [value for value, _ in matches]

    def interrupt(self) -> None:
        """Stop every query running on this database (used by the executor's time limit)."""
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

    def __enter__(self) -> EHR:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<EHR {self.dataset} schema={self.schema} now={self.now:%Y-%m-%d %H:%M:%S} tables={len(self.tables())}>"

    # -- clock -----------------------------------------------------------------------------

    @property
    def now(self) -> dt.datetime:
        """The dataset's current time: the anchor of 'today', 'last year', 'N days ago'."""
        return self.clock.now

    def ago(self, **amount: float) -> dt.datetime:
        """``now`` minus an amount: ``ehr.ago(months=1)``, ``ehr.ago(years=1, days=2)``."""
        return self.clock.ago(**amount)  # type: ignore[arg-type]

    def start_of(self, unit: Unit, offset: int = 0) -> dt.datetime:
        """Start of this year/month/week/day (``offset=-1``: the previous one)."""
        return self.clock.start_of(unit, offset)

    def period(self, unit: Unit, offset: int = 0) -> tuple[dt.datetime, dt.datetime]:
        """``[start, end)`` of a calendar period: ``ehr.period('year', -1)`` is last year."""
        return self.clock.period(unit, offset)

    # -- knowledge -------------------------------------------------------------------------

    @cached_property
    def knowledge(self):  # -> Knowledge | None
        """Human descriptions of this schema's tables and columns (None if none ship)."""
        from ehr_magic.data import knowledge

        try:
            return knowledge.load(self.schema)
        except EhrMagicError:
            return None

    def info(self) -> dict[str, Any]:
        """What the database is: schema, dataset, clock and row counts."""
        return {
            "path": str(self.path),
            "schema": self.schema,
            "dataset": self.dataset,
            "source": self.meta.get("source", ""),
            "now": self.now.strftime("%Y-%m-%d %H:%M:%S"),
            "tables": {name: self.count(name) for name in self.tables()},
        }

    # -- internals -------------------------------------------------------------------------

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        # DuckDB connections are not safe across threads; each thread gets its own cursor.
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._con.cursor()
            self._local.cursor = cursor
            with self._cursor_lock:
                # Threads come and go (the executor runs each piece of code in a new one).
                for thread, old in [pair for pair in self._cursors if not pair[0].is_alive()]:
                    old.close()
                self._cursors = [pair for pair in self._cursors if pair[0].is_alive()]
                self._cursors.append((threading.current_thread(), cursor))
        return cursor

    @cached_property
    def _table_columns(self) -> dict[str, dict[str, str]]:
        rows = self._cursor().execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main' AND table_name NOT LIKE '\\_%' ESCAPE '\\' "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
        tables: dict[str, dict[str, str]] = {}
        for table, column, dtype in rows:
            tables.setdefault(table, {})[column] = dtype
        return tables

    def _check_table(self, name: str) -> str:
        if name in self._table_columns:
            return name
        lowered = str(name).lower()
        if lowered in self._table_columns:
            return lowered
        close = process.extractOne(lowered, list(self._table_columns))
        hint = f" Did you mean {close[0]!r}?" if close and close[1] >= 70 else ""
        raise EhrMagicError(f"No table {name!r} in {self.dataset}.{hint} See ehr.tables().")

    def _read_meta(self) -> dict[str, str]:
        try:
            rows = self._con.execute(f"SELECT key, value FROM {META_TABLE}").fetchall()
        except duckdb.CatalogException:
            return {}
        return {key: value for key, value in rows}

    def _latest_time(self) -> dt.datetime:
        latest: dt.datetime | None = None
        for table, columns in self._table_columns.items():
            for column, dtype in columns.items():
                if dtype.startswith("TIMESTAMP"):
                    value = self._con.execute(f'SELECT max("{column}") FROM "{table}"').fetchall()[0][0]
                    if value is not None and (latest is None or value > latest):
                        latest = value
        return parse_time(latest) if latest else dt.datetime(2000, 1, 1)

    def _distinct_values(self, table: str, column: str) -> list[str]:
        rows = self._cursor().execute(
            f'SELECT DISTINCT CAST("{column}" AS VARCHAR) FROM "{table}" WHERE "{column}" IS NOT NULL'
        ).fetchall()
        return [row[0] for row in rows]


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _safety_error(exc: duckdb.Error) -> Exception:
    message = _first_line(exc)
    if "read-only" in message:
        return ReadOnlyError(
            f"The database is open read-only for analysis, so this statement cannot run ({message}). "
            "Use SELECT queries; to change the data, rebuild it with `ehr-magic data`."
        )
    if "configuration has been locked" in message:
        return ReadOnlyError(f"Settings of the analysis connection are locked for safety ({message}).")
    if isinstance(exc, duckdb.PermissionException):
        return ReadOnlyError(
            f"File access from SQL is disabled for safety ({message}). Query the tables of the connected database."
        )
    return exc
