"""PostgreSQL through ADBC (``adbc-driver-postgresql``): Arrow results, bulk ingest.

Why ADBC rather than psycopg: the driver ships its own libpq (no system library to
install), reads result sets with PostgreSQL's binary COPY straight into Arrow (what
polars takes without a copy), and writes Arrow with COPY for ``publish``. Because it
is libpq, the usual conventions hold: ``PGPASSWORD``, ``~/.pgpass``, ``PGHOST``...,
host/port defaults, ``sslmode`` and any other libpq URL parameter.

Target: ``postgresql://user[:password]@host[:port]/dbname[?param=value&...]`` with,
besides libpq's parameters, three of ours (removed before libpq sees the URL):

* ``search_path=mimiciv_hosp,mimiciv_icu`` (or ``schema=``): the schemas whose tables
  are visible by their bare names, first match wins (mimic-code's layout). libpq's own
  ``options=-csearch_path%3D...`` works too.
* ``statement_timeout=300s``: the server stops a statement after this long (default 300s).

Analysis sessions run with ``default_transaction_read_only = on``; ``EHR.sql`` refuses
anything but a query before it reaches the server, and the guard stands before both.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.compute as pc

from ehr_magic.engines.base import KNOWLEDGE_TABLE, META_TABLE
from ehr_magic.engines.base import Comments, DeclaredKeys, Engine, ForeignKey, Progress, QueryError, first_line
from ehr_magic.engines.base import kept_comments, missing_extra, redact
from ehr_magic.errors import DatabaseError, ReadOnlyError, sentences
from ehr_magic.identifiers import quote_identifier

DEFAULT_STATEMENT_TIMEOUT = "300s"
CONNECT_TIMEOUT_SECONDS = "10"
_OUR_PARAMS = {"search_path", "schema", "statement_timeout"}
_QUERY_START = re.compile(r"^\s*(?:--[^\n]*\n\s*)*(select|with|values|table|\()", re.I)

# information_schema data_type -> the DuckDB name the rest of ehr_magic tests for.
_TYPES = {
    "timestamp without time zone": "TIMESTAMP",
    "timestamp with time zone": "TIMESTAMP WITH TIME ZONE",
    "date": "DATE",
    "time without time zone": "TIME",
    "time with time zone": "TIME WITH TIME ZONE",
    "interval": "INTERVAL",
    "smallint": "SMALLINT",
    "integer": "INTEGER",
    "bigint": "BIGINT",
    "real": "FLOAT",
    "double precision": "DOUBLE",
    "boolean": "BOOLEAN",
    "text": "VARCHAR",
    "character varying": "VARCHAR",
    "character": "VARCHAR",
    "bytea": "BLOB",
    "json": "JSON",
    "jsonb": "JSON",
    "uuid": "UUID",
}


def _driver() -> Any:
    try:
        import adbc_driver_postgresql.dbapi as dbapi
    except ImportError:
        raise missing_extra("adbc-driver-postgresql", "postgres") from None
    return dbapi


class Target:
    """A parsed PostgreSQL URL: what libpq gets, plus our own settings."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        params = parse_qsl(parts.query, keep_blank_values=True)
        ours = {k: v for k, v in params if k in _OUR_PARAMS}
        libpq = [(k, v) for k, v in params if k not in _OUR_PARAMS]
        path = ours.get("search_path") or ours.get("schema") or ""
        self.search_path = [s.strip() for s in path.split(",") if s.strip()]
        self.statement_timeout = ours.get("statement_timeout", DEFAULT_STATEMENT_TIMEOUT)
        self.host = parts.hostname or os.environ.get("PGHOST", "localhost")
        self.port = parts.port or int(os.environ.get("PGPORT", "5432"))
        self.user = unquote(parts.username) if parts.username else os.environ.get("PGUSER", "")
        self.database = unquote(parts.path.lstrip("/")) or os.environ.get("PGDATABASE", "") or self.user
        if not any(k == "connect_timeout" for k, _ in libpq):
            libpq.append(("connect_timeout", CONNECT_TIMEOUT_SECONDS))
        self._parts, self._libpq = parts, libpq
        self.location = redact(urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")))
        if self.search_path:
            self.location += "?search_path=" + ",".join(self.search_path)

    def uri(self, *, read_only: bool) -> str:
        """The libpq URI, with our session settings added to ``options``."""
        settings = []
        if read_only:
            settings += ["default_transaction_read_only=on", f"statement_timeout={self.statement_timeout}"]
        if self.search_path:
            settings.append("search_path=" + ",".join(self.search_path))
        params = list(self._libpq)
        if settings:
            extra = " ".join("-c " + s.replace(" ", "\\ ") for s in settings)
            given = [v for k, v in params if k == "options"]
            params = [(k, v) for k, v in params if k != "options"] + [("options", " ".join([*given, extra]))]
        query = urlencode(params, quote_via=quote)
        return urlunsplit(("postgresql", self._parts.netloc, self._parts.path, query, ""))

    def where(self) -> str:
        return f"{self.host}:{self.port}"


class PostgresEngine(Engine):
    name = "PostgreSQL"
    dialect = "postgres"
    remote = True

    def __init__(self, target: Target) -> None:
        self.target = target
        self.location = target.location
        self._idle: list[Any] = []
        self._busy: list[Any] = []
        self._lock = threading.Lock()
        with self._connection() as con:
            self._check_schemas(con)

    @classmethod
    def open(cls, target: str, **options: Any) -> PostgresEngine:
        return cls(Target(target))

    # -- queries ---------------------------------------------------------------------------

    def query_arrow(self, sql: str, params: list[Any] | None = None, max_rows: int | None = None) -> pa.Table:
        text = sql.strip().rstrip(";")
        if max_rows is not None and _QUERY_START.match(text):
            text = f"SELECT * FROM (\n{text}\n) AS _ehr_rows LIMIT {int(max_rows)}"
        with self._connection() as con, con.cursor() as cursor:
            try:
                cursor.execute(text, params or None)
                if cursor.description is None:
                    return pa.table({})
                return _duckdb_like(cursor.fetch_arrow_table())
            except _driver().Error as exc:
                raise self._query_error(exc, sql) from None

    def table_columns(self) -> dict[str, dict[str, str]]:
        rows = self._rows(
            "SELECT c.table_name, c.column_name, c.data_type, c.numeric_precision, c.numeric_scale, "
            "array_position(current_schemas(false), c.table_schema::name) AS rank, c.ordinal_position "
            "FROM information_schema.columns c "
            "WHERE c.table_schema = ANY(current_schemas(false)) AND c.table_name NOT LIKE '\\_%' "
            f"UNION ALL {_MATERIALIZED_VIEW_COLUMNS} ORDER BY rank, 1, 7")
        tables: dict[str, dict[str, str]] = {}
        owner: dict[str, int] = {}
        for table, column, dtype, precision, scale, rank, _ in rows:
            if owner.setdefault(table, rank) != rank:
                continue  # shadowed by the same name in an earlier schema of the search_path
            tables.setdefault(table, {})[column] = _duckdb_type(dtype, precision, scale)
        return dict(sorted(tables.items()))

    def comments(self) -> dict[str, Comments]:
        # pg_table_is_visible: the table its bare name reaches through the search_path, not one it shadows
        return kept_comments(self._rows(
            "SELECT c.relname::text, a.attname::text, d.description FROM pg_description d "
            "JOIN pg_class c ON d.classoid = 'pg_class'::regclass AND d.objoid = c.oid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.objsubid AND d.objsubid > 0 "
            "WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND n.nspname = ANY(current_schemas(false)) "
            "AND pg_table_is_visible(c.oid) AND c.relname NOT LIKE '\\_%' ORDER BY 1, d.objsubid"))

    def declared_keys(self) -> DeclaredKeys:
        def names(relation: str, numbers: str) -> str:
            return (f"ARRAY(SELECT a.attname::text FROM unnest(con.{numbers}) WITH ORDINALITY k(n, i) "
                    f"JOIN pg_attribute a ON a.attrelid = con.{relation} AND a.attnum = k.n ORDER BY k.i)")

        rows = self._rows(
            f"SELECT c.relname::text, con.contype::text, {names('conrelid', 'conkey')}, r.relname::text, "
            f"{names('confrelid', 'confkey')} FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_class r ON r.oid = con.confrelid "
            "WHERE con.contype IN ('p', 'f') AND n.nspname = ANY(current_schemas(false)) "
            "AND pg_table_is_visible(c.oid) AND (r.oid IS NULL OR pg_table_is_visible(r.oid)) "
            "AND c.relname NOT LIKE '\\_%' ORDER BY 1, con.conname")
        primary = {table: tuple(columns) for table, kind, columns, _, _ in rows if kind == "p"}
        foreign = tuple(ForeignKey(table, tuple(columns), target, tuple(keys))
                        for table, kind, columns, target, keys in rows if kind == "f")
        return DeclaredKeys(primary, foreign)

    def sampled(self, table: str, percent: float) -> str:
        return f"{quote_identifier(table, 'postgres')} TABLESAMPLE SYSTEM ({percent:.4f}) REPEATABLE (7)"

    def read_meta(self) -> dict[str, str]:
        return self._pairs(META_TABLE, "key, value")

    def read_knowledge(self) -> dict[str, str]:
        return self._pairs(KNOWLEDGE_TABLE, "schema, yaml")

    def _pairs(self, table: str, columns: str) -> dict[str, str]:
        found = self._rows(f"SELECT to_regclass('{table}') IS NOT NULL")
        if not found or not found[0][0]:
            return {}
        return {key: value for key, value in self._rows(f"SELECT {columns} FROM {table}")}

    def interrupt(self) -> None:
        with self._lock:
            busy = list(self._busy)
        for con in busy:
            with contextlib.suppress(Exception):
                con.adbc_cancel()

    def close(self) -> None:
        with self._lock:
            connections, self._idle = self._idle + self._busy, []
            self._busy = []
        for con in connections:
            with contextlib.suppress(Exception):
                con.close()

    # -- publishing ------------------------------------------------------------------------

    @classmethod
    def publish(cls, duckdb_file: str | os.PathLike[str], target: str, progress: Progress | None = None) -> None:
        """Copy every table of ``duckdb_file`` into the first schema of the target's search_path.

        One transaction: the tables are ingested into a fresh staging schema, then the
        old tables of the same names are dropped and the new ones moved in; a failure
        anywhere rolls everything back, so the target never holds a half load.
        """
        import duckdb

        parsed = Target(target)
        schema = parsed.search_path[0] if parsed.search_path else "public"
        staging = f"_ehr_load_{uuid.uuid4().hex[:12]}"
        source = duckdb.connect(str(duckdb_file), read_only=True)
        try:
            tables = [row[0] for row in source.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
                "ORDER BY table_name").fetchall()]
            con = _open(parsed, read_only=False)
            try:
                with con.cursor() as cursor:
                    home, stage = quote_identifier(schema, "postgres"), quote_identifier(staging, "postgres")
                    cursor.execute(f"CREATE SCHEMA IF NOT EXISTS {home}")
                    cursor.execute(f"CREATE SCHEMA {stage}")
                    for i, table in enumerate(tables):
                        if progress:
                            progress(f"publishing {table}", i, len(tables))
                        reader = _batches(source.sql(f"SELECT * FROM {quote_identifier(table)}"))  # DuckDB
                        cursor.adbc_ingest(table, reader, mode="create", db_schema_name=staging)
                    for table in tables:
                        name = quote_identifier(table, "postgres")
                        cursor.execute(f"DROP TABLE IF EXISTS {home}.{name}")
                        cursor.execute(f"ALTER TABLE {stage}.{name} SET SCHEMA {home}")
                    cursor.execute(f"DROP SCHEMA {stage}")
                con.commit()
                if progress:
                    progress("published", len(tables), len(tables))
            except _driver().Error as exc:
                with contextlib.suppress(Exception):
                    con.rollback()
                raise DatabaseError(f"Writing to PostgreSQL at {parsed.location} failed, nothing was changed: "
                                    f"{first_line(exc)}") from None
            finally:
                con.close()
        finally:
            source.close()

    # -- internals -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        """An idle connection of the pool (one query at a time per connection; threads share the pool)."""
        with self._lock:
            con = self._idle.pop() if self._idle else None
        if con is None:
            con = _open(self.target, read_only=True)
        with self._lock:
            self._busy.append(con)
        healthy = False
        try:
            yield con
            healthy = True
        finally:
            with self._lock:
                if con in self._busy:
                    self._busy.remove(con)
                    if healthy:
                        self._idle.append(con)
                    else:
                        # A failed statement may have left the session unusable (a cancel, a lost server).
                        with contextlib.suppress(Exception):
                            con.close()

    def _rows(self, sql: str) -> list[tuple]:
        with self._connection() as con, con.cursor() as cursor:
            try:
                cursor.execute(sql)
                return cursor.fetchall()
            except _driver().Error as exc:
                raise self._query_error(exc, sql) from None

    def _check_schemas(self, con: Any) -> None:
        if not self.target.search_path:
            return
        with con.cursor() as cursor:
            cursor.execute("SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
                           "AND nspname <> 'information_schema' ORDER BY nspname")
            existing = [row[0] for row in cursor.fetchall()]
        missing = [s for s in self.target.search_path if s not in existing]
        if missing:
            raise DatabaseError(
                f"There is no schema {', '.join(missing)} in PostgreSQL database {self.target.database} at "
                f"{self.target.where()}; its schemas are: {', '.join(existing) or 'none'}. "
                "Fix search_path= in the URL.")

    def _query_error(self, exc: Exception, sql: str) -> DatabaseError:
        message = _server_message(exc)
        if getattr(exc, "sqlstate", None) == "25006" or "read-only transaction" in message:
            return ReadOnlyError(
                f"The PostgreSQL session is read-only for analysis, so this statement cannot run: {message} "
                "Use SELECT queries.")
        if getattr(exc, "sqlstate", None) == "57014" or "canceling statement" in message:
            return QueryError(self.name, f"{message} (stopped by the time limit or statement_timeout)", sql)
        return QueryError(self.name, message, sql)


def _open(target: Target, *, read_only: bool) -> Any:
    """A new libpq connection, with a one-sentence error for the usual ways connecting fails."""
    dbapi = _driver()
    try:
        return dbapi.connect(target.uri(read_only=read_only), autocommit=read_only)
    except dbapi.Error as exc:
        raise DatabaseError(_connect_problem(target, exc)) from None


def _connect_problem(target: Target, exc: Exception) -> str:
    text = str(exc)
    state = getattr(exc, "sqlstate", None) or ""
    where = f"the PostgreSQL server at {target.where()}"
    if state == "28P01" or "password authentication failed" in text:
        return (f"{where} refused the password of user {target.user or '(default)'}; check the password in the URL, "
                "PGPASSWORD or ~/.pgpass.")
    if "no password supplied" in text or "fe_sendauth" in text:
        return (f"{where} asks a password for user {target.user or '(default)'}; put it in the URL, PGPASSWORD "
                "or ~/.pgpass.")
    if state == "3D000" or ("database" in text and "does not exist" in text):
        return (f"There is no database {target.database} on {where}; create it (createdb {target.database}) "
                "or fix the database name in the URL.")
    if state == "28000" or "role" in text and "does not exist" in text:
        return f"{where} has no user {target.user}; fix the user name in the URL."
    if any(s in text for s in ("Connection refused", "could not connect", "timeout expired", "could not translate",
                               "No route to host", "Network is unreachable")):
        return f"Cannot reach {where}: {_server_message(exc)} Check that it is running and the host and port are right."
    return f"Cannot connect to {where}: {_server_message(exc)}"


def _server_message(exc: Exception) -> str:
    """The server's own words, without the driver's prefixes (``IO: [libpq] ...``, ``SQLSTATE``)."""
    text = str(exc).strip()
    text = re.sub(r"^(?:\w+: )?(?:\[libpq\] )?(?:Failed to (?:execute query|prepare query|connect)[^:]*: )?", "", text)
    text = re.sub(r"^(?:could not )?(?:connect|connection) to server at [^:]+: ", "", text)
    text = re.sub(r"^(?:ERROR|FATAL):\s+", "", text)
    text = re.sub(r"\s*\.?\s*SQLSTATE: \w+\s*$", "", text, flags=re.MULTILINE)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    keep = [line for line in lines if not line.startswith(("Query was:", "SQLSTATE"))]
    return sentences("\n".join(keep[:3])) if keep else f"{type(exc).__name__}."


def _duckdb_like(table: pa.Table) -> pa.Table:
    """Result columns as DuckDB would type them: ``numeric`` (which ADBC hands over as text,
    and which PostgreSQL returns for avg(), round(x, n), extract()) as DOUBLE, intervals as
    durations, other driver-opaque types as their text."""
    columns = []
    for field, column in zip(table.schema, table.columns):
        kind = field.type
        if isinstance(kind, pa.BaseExtensionType):
            storage = pa.chunked_array([chunk.storage for chunk in column.chunks], type=kind.storage_type)
            numeric = getattr(kind, "type_name", "") == "numeric"
            column = pc.cast(storage, pa.float64()) if numeric else storage
        elif kind == pa.month_day_nano_interval():
            column = pa.array([None if v is None else dt.timedelta(days=v.months * 30 + v.days,
                                                                      microseconds=v.nanoseconds // 1000)
                               for v in column.to_pylist()], type=pa.duration("us"))
        columns.append(column)
    return pa.table(columns, names=table.column_names)


def _batches(relation: Any) -> Any:
    """A streaming Arrow reader over a DuckDB relation (the method's name changed in DuckDB 1.4)."""
    if hasattr(relation, "to_arrow_reader"):
        return relation.to_arrow_reader(100_000)
    return relation.fetch_record_batch(100_000)


# information_schema leaves out materialized views (a warehouse's data marts are often those):
# their columns from the catalog, typed as information_schema.columns types a table's.
_MATERIALIZED_VIEW_COLUMNS = (
    "SELECT c.relname::text, a.attname::text, "
    "CASE WHEN t.typelem <> 0 AND t.typlen = -1 THEN 'ARRAY' "
    "WHEN tn.nspname = 'pg_catalog' THEN format_type(a.atttypid, NULL) ELSE 'USER-DEFINED' END, "
    "information_schema._pg_numeric_precision(a.atttypid, a.atttypmod), "
    "information_schema._pg_numeric_scale(a.atttypid, a.atttypmod), "
    "array_position(current_schemas(false), n.nspname), a.attnum::int "
    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
    "JOIN pg_type t ON t.oid = a.atttypid JOIN pg_namespace tn ON tn.oid = t.typnamespace "
    "WHERE c.relkind = 'm' AND n.nspname = ANY(current_schemas(false)) AND c.relname NOT LIKE '\\_%' "
    "AND has_table_privilege(c.oid, 'SELECT')")


def _duckdb_type(dtype: str, precision: Any, scale: Any) -> str:
    if dtype == "numeric":
        return f"DECIMAL({precision},{scale})" if precision is not None else "DECIMAL(38,10)"
    if dtype == "ARRAY":
        return "VARCHAR[]"
    return _TYPES.get(dtype, dtype.upper())
