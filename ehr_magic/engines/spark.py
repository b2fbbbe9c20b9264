"""Spark through Spark Connect (``pip install 'ehr-magic[spark]'``): Arrow results,
managed tables for ``publish``.

Target: the standard Spark Connect URL, ``sc://host[:port][/;param=value;...]``
(port 15002 by default), with pyspark's own parameters (``token=``, ``use_ssl=``,
``user_id=``...) and one of ours, removed before pyspark sees the URL:

* ``database=NAME``: the database (schema) of the catalog whose tables are analysed,
  e.g. ``sc://localhost:15002/;database=mimic``. ``connect(url, database="mimic")``
  does the same; without either, Spark's ``default`` database.

Read-only: Spark has no read-only session, so this engine refuses, before the server
sees it, anything that is not one query (parsed with sqlglot), and the functions and
file paths through which a query could reach outside the catalog (``reflect``,
``java_method``, ``parquet.`/path```); ``EHR.sql`` and the guard stand in front.
Each engine has its own Spark Connect session, set to UTC and ``TIMESTAMP_NTZ`` so
that timestamps mean what they mean in DuckDB (wall-clock times, no time zone).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import socket
import warnings
import weakref
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ehr_magic.engines.base import KNOWLEDGE_TABLE, META_TABLE
from ehr_magic.engines.base import Comments, Engine, Progress, QueryError, kept_comments, missing_extra, redact
from ehr_magic.errors import DatabaseError, ReadOnlyError, sentences

DEFAULT_PORT = 15002
CONNECT_TIMEOUT_SECONDS = 5.0
_OUR_PARAMS = {"database"}
_SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.timestampType": "TIMESTAMP_NTZ",
}
# Functions that run arbitrary Java on the server.
_FORBIDDEN_FUNCTIONS = {"reflect", "java_method", "try_reflect"}
# ``SELECT * FROM parquet.`/some/path``` reads files directly.
_FILE_FORMATS = {"parquet", "csv", "json", "orc", "text", "avro", "binaryfile", "delta", "xml"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Spark's simple type names -> the DuckDB names the rest of ehr_magic tests for.
_TYPES = {
    "bigint": "BIGINT", "int": "INTEGER", "smallint": "SMALLINT", "tinyint": "TINYINT",
    "double": "DOUBLE", "float": "FLOAT", "string": "VARCHAR", "boolean": "BOOLEAN",
    "date": "DATE", "timestamp_ntz": "TIMESTAMP", "timestamp": "TIMESTAMP WITH TIME ZONE",
    "binary": "BLOB", "void": "NULL",
}


def _pyspark() -> Any:
    """pyspark's Spark Connect session class, or the one-sentence install hint."""
    try:
        with warnings.catch_warnings():
            # pyspark warns about pandas versions at import; we never use its pandas side.
            warnings.simplefilter("ignore")
            from pyspark.sql.connect.session import SparkSession
    except ImportError:
        raise missing_extra("pyspark (with its Spark Connect client)", "spark") from None
    return SparkSession


def spark_errors() -> tuple[type[BaseException], ...]:
    """What a query or the server can raise through pyspark: its own errors (analysis, parse,
    execution, a lost session), gRPC's (a retried call that gave up raises the last one as it
    is, or pyspark's retry marker) and Arrow's (a result that cannot be converted). Only these
    become one of our errors; anything else is a bug and keeps its traceback."""
    import grpc
    from pyspark.errors import PySparkException
    from pyspark.sql.connect.client.retries import RetryException

    return (PySparkException, grpc.RpcError, RetryException, pa.ArrowException)


def _quiet_pyspark() -> None:
    """pyspark logs each failed query as JSON on stderr; we report it as one sentence instead."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True


class Target:
    """A parsed ``sc://`` URL: what pyspark gets, plus the database to analyse."""

    def __init__(self, url: str, database: str | None = None) -> None:
        rest = url.strip()[len("sc://"):]
        hostport, _, path = rest.partition("/")
        params: list[tuple[str, str]] = []
        for part in path.split(";"):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise DatabaseError(f"Cannot read {redact(url)}: parameters after the slash look like "
                                    "/;key=value;key=value (e.g. sc://localhost:15002/;database=mimic).")
            params.append((key.strip(), value.strip()))
        ours = {k: v for k, v in params if k in _OUR_PARAMS}
        self.params = [(k, v) for k, v in params if k not in _OUR_PARAMS]
        host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
        self.host = host or "localhost"
        if port and not port.isdigit():
            raise DatabaseError(f"Cannot read {redact(url)}: the port should be a number, e.g. sc://localhost:15002.")
        self.port = int(port) if port else DEFAULT_PORT
        self.database = database or ours.get("database") or "default"
        if not _NAME.match(self.database):
            raise DatabaseError(f"{self.database!r} is not a Spark database name; use letters, digits and _.")
        suffix = "".join(f";{k}={v}" for k, v in self.params)
        self.url = f"sc://{self.host}:{self.port}" + (f"/{suffix}" if suffix else "")
        self.location = redact(f"{self.url}{'/' if not suffix else ''};database={self.database}")

    def where(self) -> str:
        return f"{self.host}:{self.port}"


class SparkEngine(Engine):
    name = "Spark"
    dialect = "spark"
    remote = True

    def __init__(self, target: Target) -> None:
        self.target = target
        self.location = target.location
        self._spark = _session(target)
        self.database = target.database
        try:
            databases = self._spark.sql("SHOW DATABASES").toArrow().column(0).to_pylist()
        except spark_errors() as exc:  # the server's failure is one sentence for the user
            self._stop()
            raise self._error(exc, "SHOW DATABASES") from None
        if self.database not in databases:
            self._stop()
            raise DatabaseError(
                f"There is no database {self.database} on the Spark server at {target.where()}; its databases are: "
                f"{', '.join(databases) or 'none'}. Fix database= in the URL, or load one with "
                f"`ehr-magic data load ... --out '{target.url}/;database=NAME'`.")
        self._spark.catalog.setCurrentDatabase(self.database)
        self._column_comments: dict[str, dict[str, str]] = {}  # table -> column -> comment (table_columns)

    @classmethod
    def open(cls, target: str, database: str | None = None, **options: Any) -> SparkEngine:
        return cls(Target(target, database))

    # -- queries ---------------------------------------------------------------------------

    def query_arrow(self, sql: str, params: list[Any] | None = None, max_rows: int | None = None) -> pa.Table:
        check_query(sql)
        args = {f"p{i}": value for i, value in enumerate(params, 1)} if params else None
        try:
            frame = self._spark.sql(sql, args=args)
            if max_rows is not None:
                frame = frame.limit(int(max_rows))
            return frame.toArrow()
        except spark_errors() as exc:  # pyspark raises many kinds; each becomes one of ours
            raise self._error(exc, sql) from None

    def table_columns(self) -> dict[str, dict[str, str]]:
        tables: dict[str, dict[str, str]] = {}
        for name in self._table_names():
            if name.startswith("_"):
                continue
            try:
                schema = self._spark.table(f"`{self.database}`.`{name}`").schema
            except spark_errors() as exc:
                raise self._error(exc, f"DESCRIBE {name}") from None
            tables[name] = {field.name: duckdb_type(field.dataType.simpleString()) for field in schema.fields}
            self._column_comments[name] = {field.name: str(field.metadata.get("comment") or "")
                                           for field in schema.fields}
        return dict(sorted(tables.items()))

    def comments(self) -> dict[str, Comments]:
        if not self._column_comments:
            self.table_columns()
        try:
            described = {table.name: table.description or "" for table in self._spark.catalog.listTables(self.database)}
        except spark_errors() as exc:
            raise self._error(exc, f"SHOW TABLES IN {self.database}") from None
        return kept_comments([(name, None, described.get(name)) for name in self._column_comments]
                             + [(name, column, text) for name, columns in self._column_comments.items()
                                for column, text in columns.items()])

    def table_ref(self, table: str) -> str:
        return f"`{self.database}`.`{table}`"

    def sampled(self, table: str, percent: float) -> str:
        return f"{self.table_ref(table)} TABLESAMPLE ({percent:.4f} PERCENT) REPEATABLE (7)"

    def read_meta(self) -> dict[str, str]:
        return self._pairs(META_TABLE, "key", "value")

    def read_knowledge(self) -> dict[str, str]:
        return self._pairs(KNOWLEDGE_TABLE, "schema", "yaml")

    def _pairs(self, table: str, key: str, value: str) -> dict[str, str]:
        if table not in self._table_names():
            return {}
        rows = self.query_arrow(f"SELECT `{key}`, `{value}` FROM `{self.database}`.`{table}`")
        return dict(zip(rows.column(key).to_pylist(), rows.column(value).to_pylist()))

    def interrupt(self) -> None:
        with contextlib.suppress(Exception):
            self._spark.interruptAll()

    def close(self) -> None:
        self._stop()

    # -- publishing ------------------------------------------------------------------------

    @classmethod
    def publish(cls, duckdb_file: str | os.PathLike[str], target: str, progress: Progress | None = None) -> None:
        """Copy every table of ``duckdb_file`` into the target's database as managed tables.

        Each table is first written under a hidden staging name beside its final one
        (Spark cannot move a table between databases). Only when all of them are in are
        the old tables of the same names dropped and the staged ones renamed; a failure
        before that drops the staged tables (and the database, if this call created it),
        so the target never holds a half load.
        """
        from ehr_magic.engines.spark_publish import publish_tables

        parsed = Target(target)
        spark = _session(parsed)
        failures: tuple[type[BaseException], ...] = (*spark_errors(), duckdb.Error, OSError)  # server, file, disk
        try:
            publish_tables(spark, duckdb_file, parsed.database, progress=progress)
        except DatabaseError:
            raise
        except failures as exc:
            raise DatabaseError(f"Writing to Spark at {parsed.location} failed, nothing was changed: "
                                f"{_describe(exc, parsed)}") from None
        finally:
            with contextlib.suppress(Exception):
                spark.stop()

    # -- internals -------------------------------------------------------------------------

    def _table_names(self) -> list[str]:
        try:
            table = self._spark.sql(f"SHOW TABLES IN `{self.database}`").toArrow()
        except spark_errors() as exc:
            raise self._error(exc, f"SHOW TABLES IN {self.database}") from None
        temporary = table.column("isTemporary").to_pylist()
        return [name for name, temp in zip(table.column("tableName").to_pylist(), temporary) if not temp]

    def _error(self, exc: BaseException, sql: str) -> DatabaseError:
        if _unreachable(exc):
            return DatabaseError(_describe(exc, self.target))
        return QueryError(self.name, server_message(exc), sql)

    def _stop(self) -> None:
        with contextlib.suppress(Exception):
            self._spark.stop()


def check_query(sql: str) -> None:
    """Refuse what is not one plain query, before the server sees it (Spark has no read-only mode)."""
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except SqlglotError:
        return  # sqlglot cannot read it: Spark's parser will refuse it with its own words
    if len(statements) != 1 or not isinstance(statements[0], (exp.Query, exp.Describe)):
        kind = statements[0].key.upper() if len(statements) == 1 else f"{len(statements)} statements"
        raise ReadOnlyError(f"Only one query at a time runs on a Spark target, which is read-only for analysis; "
                            f"this is {kind}.")
    tree = statements[0]
    for call in tree.find_all(exp.Anonymous, exp.Func):
        name = call.name.lower() if isinstance(call, exp.Anonymous) else call.sql_name().lower()
        if name in _FORBIDDEN_FUNCTIONS:
            raise ReadOnlyError(f"{name}() runs code on the Spark server and is refused for analysis; "
                                "use SQL functions.")
    for table in tree.find_all(exp.Table):
        if table.db.lower() in _FILE_FORMATS and ("/" in table.name or ":" in table.name):
            raise ReadOnlyError("Reading files by path is refused for analysis; query the tables of the database.")


def duckdb_type(spark_type: str) -> str:
    """A Spark type name (``simpleString``) as DuckDB would name it."""
    name = spark_type.lower()
    if name in _TYPES:
        return _TYPES[name]
    if name.startswith("decimal"):
        return name.upper().replace(" ", "")
    if name.startswith("array<") and name.endswith(">"):
        return duckdb_type(name[6:-1]) + "[]"
    if name.startswith(("varchar", "char")):
        return "VARCHAR"
    return name.upper()


def server_message(exc: BaseException) -> str:
    """Spark's own words: the error condition and its message, without the JVM stack trace."""
    getter = getattr(exc, "getMessage", None)
    text = getter() if callable(getter) else str(exc)
    text = (text or str(exc)).strip()
    text = text.split("\n\nJVM stacktrace:", 1)[0].split("\n== SQL", 1)[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    keep = [line for line in lines if not line.startswith(("Search path", "If you did not qualify", "To tolerate"))]
    message = " ".join(keep[:3]) if keep else type(exc).__name__
    return re.sub(r"\s*SQLSTATE: \w+", "", message)


def _session(target: Target) -> Any:
    """A new Spark Connect session for ``target``, failing fast if the server is unreachable."""
    session_class = _pyspark()
    _quiet_pyspark()
    try:
        with socket.create_connection((target.host, target.port), timeout=CONNECT_TIMEOUT_SECONDS):
            pass
    except OSError as exc:
        raise DatabaseError(f"Cannot reach the Spark Connect server at {target.where()}: "
                            f"{sentences(exc.strerror or exc)} Check that it is running and the host and port "
                            "are right.") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spark = session_class.builder.remote(target.url).create()
    _LIVE_SESSIONS.add(spark)
    _bounded_retries(spark)
    try:
        for key, value in _SESSION_CONF.items():
            spark.conf.set(key, value)
    except spark_errors() as exc:
        with contextlib.suppress(Exception):
            spark.stop()
        raise DatabaseError(_describe(exc, target)) from None
    return spark


# Sessions not closed by their owner: stopped at exit, while gRPC's threads still run
# (pyspark's own cleanup in __del__ at interpreter shutdown can wait forever).
_LIVE_SESSIONS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _stop_live_sessions() -> None:
    for spark in list(_LIVE_SESSIONS):
        with contextlib.suppress(Exception):
            spark.stop()


def _bounded_retries(spark: Any) -> None:
    """pyspark retries a lost server for 10 minutes; a notebook should hear of it in seconds."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark.client.set_retry_policies([DefaultPolicy(max_retries=3, initial_backoff=200, max_backoff=1000)])


def _unreachable(exc: BaseException) -> bool:
    text = str(exc)
    return any(s in text for s in ("StatusCode.UNAVAILABLE", "failed to connect to all addresses",
                                   "Connection refused", "Socket closed", "Broken pipe", "RetriesExceeded",
                                   "INVALID_HANDLE.SESSION_CLOSED", "NO_ACTIVE_SESSION",
                                   # a server shutting down answers the running query with this before it goes
                                   "stopped SparkContext", "SparkContext was shut down"))


def _describe(exc: BaseException, target: Target) -> str:
    if _unreachable(exc):
        return (f"The Spark Connect server at {target.where()} stopped answering (it went away or restarted); "
                "check that it is running, then reconnect.")
    return server_message(exc)

