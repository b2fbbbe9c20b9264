"""The engine interface: where the data of an ``EHR`` lives and how SQL reaches it.

An engine is one small module with one class. ``EHR`` (``ehr_magic.db.ehr``) talks
to every engine through this interface only; it speaks DuckDB SQL and transpiles it
with sqlglot to ``engine.dialect`` (except on DuckDB itself, where SQL runs as written).

Targets
    ``open_engine(target)`` picks the engine from the target's URL scheme through
    ``ENGINES`` (scheme -> ``"module:Class"``, imported on first use, so an engine's
    driver is only needed when it is used). A target without a registered scheme is a
    DuckDB file path. Adding an engine = one module + one line in ``ENGINES`` (or
    ``register_engine`` from a plug-in).

The interface (``Engine``), for an engine author
    ``Engine.open(target, **options) -> Engine``  (classmethod)
        Connect for analysis, read-only. Raise ``DatabaseError`` with one sentence for
        an unreachable server, bad credentials, a missing database/schema; raise
        ``missing_extra(...)`` when the driver is not installed.
    ``name``      human name of the engine ("DuckDB", "PostgreSQL", "Spark").
    ``dialect``   sqlglot dialect name ("duckdb", "postgres", "spark").
    ``location``  printable target, never a password.
    ``remote``    True when rows travel over a network (``EHR.table`` then refuses
                  to pull tables bigger than the row cap).
    ``query_arrow(sql, params=None, max_rows=None) -> pyarrow.Table``
        Run one query already in the engine's dialect (``params``: a list bound to
        ``$1, $2, ...`` placeholders in order). With ``max_rows``, return at most that
        many rows and stop the engine's work early where possible. Errors from the
        engine are raised as ``QueryError(engine message, sql)``; a write refused by
        the engine as ``ReadOnlyError``.
    ``query(sql, params=None, what=...) -> polars.DataFrame``
        Provided: ``query_arrow`` under the thread's row cap (``limits.row_cap``),
        then polars. An engine may override it with a faster native path.
    ``table_columns() -> {table: {column: type}}``
        The data tables visible to analysis (names not starting with ``_``), with
        DuckDB-style type names (``TIMESTAMP``, ``BIGINT``, ``VARCHAR``, ``DOUBLE``,
        ``DATE``, ``DECIMAL(p,s)``...), so type tests written for DuckDB keep working.
    ``read_meta() -> {key: value}``  the ``_ehr_meta`` table ({} if there is none).
    ``row_counts() -> {table: rows}``  row counts that cost nothing to read (the catalog's),
        or {} when the engine has none that stay put while the data does (optional).
    ``comments() -> {table: Comments}``  what the database's own documentation (``COMMENT ON``,
        Spark's ``COMMENT``) says of the data tables and their columns; tables without any are
        left out, and an engine without comments returns {} (optional).
    ``declared_keys() -> DeclaredKeys``  the PRIMARY KEY and FOREIGN KEY constraints among the
        data tables (optional: none by default).
    ``attach_to(con, alias) -> bool``  attach this database read-only to a local DuckDB
        connection under ``alias`` (a DuckDB file can); False when it cannot (optional).
        ``attached_table(alias, table)`` is then how that connection names one of its tables.
    ``sampled(table, percent) -> str``  ``table`` as a FROM source in the engine's dialect
        reading about ``percent`` % of its rows, the same ones every time (a fixed seed);
        ``sample_arrow`` uses it to read a bounded sample of a table (optional).
    ``read_knowledge() -> {schema: yaml}``  the ``_ehr_knowledge`` table ({} if there is none).
    ``interrupt()``  stop every query running on this engine (from another thread).
    ``close()``
    ``Engine.publish(duckdb_file, target, progress=None) -> None``  (classmethod)
        The writer side of ``ehr-magic data load/synth --out URL``: copy every table
        of a freshly built DuckDB file (data tables and ``_ehr_*`` tables) into the
        target, atomically: a failure leaves the target as it was.

Engines never write to the analysed database; only ``publish`` writes, and only
when the user asked for it with ``--out``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import duckdb
import polars as pl
import pyarrow as pa

from ehr_magic.errors import DatabaseError, EhrMagicError
from ehr_magic.safety import limits

Progress = Callable[[str, int, int], None]

# URL scheme -> "module:Class". Anything else is a DuckDB file path (FILE_ENGINE).
FILE_ENGINE = "ehr_magic.engines.duckdb_engine:DuckDBEngine"
# Tables every engine keeps beside the data: metadata (key, value) and the knowledge that
# travels with it (schema, yaml). Written by ehr_magic.db.build; read by every engine.
META_TABLE = "_ehr_meta"
KNOWLEDGE_TABLE = "_ehr_knowledge"
ENGINES: dict[str, str] = {
    "postgresql": "ehr_magic.engines.postgres:PostgresEngine",
    "postgres": "ehr_magic.engines.postgres:PostgresEngine",
    "sc": "ehr_magic.engines.spark:SparkEngine",
}

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


@dataclass(frozen=True)
class Comments:
    """What a database's own documentation says of one table: the table's comment ("" when it
    has none) and its columns' (only those that have one)."""

    table: str = ""
    columns: Mapping[str, str] = field(default_factory=dict)


def kept_comments(said: Iterable[tuple[str, str | None, str | None]]) -> dict[str, Comments]:
    """``Comments`` of the tables that have any, from (table, column or None for the table itself,
    comment) rows; comments of only white space say nothing."""
    tables: dict[str, str] = {}
    columns: dict[str, dict[str, str]] = {}
    for table, column, text in said:
        text = (text or "").strip()
        if not text:
            continue
        if column is None:
            tables[table] = text
        else:
            columns.setdefault(table, {})[column] = text
    return {table: Comments(tables.get(table, ""), columns.get(table, {}))
            for table in sorted(tables.keys() | columns.keys())}


@dataclass(frozen=True)
class ForeignKey:
    """``table(columns)`` refers to ``target(keys)``, as the database declares it."""

    table: str
    columns: tuple[str, ...]
    target: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class DeclaredKeys:
    """The keys a database declares among its data tables: primary keys (table -> columns) and
    foreign keys."""

    primary: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    foreign: tuple[ForeignKey, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.primary or self.foreign)


class QueryError(DatabaseError):
    """The engine refused or failed a query; the message is the engine's own, plus the SQL it ran."""

    def __init__(self, engine: str, message: str, sql: str, *, dialect: str = "") -> None:
        self.engine, self.engine_message, self.sql = engine, message, sql
        shown = f"{engine} SQL" if not dialect else f"{engine} SQL, translated from DuckDB SQL"
        super().__init__(f"{engine} error: {message}\nThe query ran as ({shown}):\n{sql}")


# What a query can raise about itself, on any engine: our errors (``QueryError`` from a
# server engine, an unknown table or column, a refused statement) and DuckDB's own, which
# the DuckDB engine passes on as they are (``DataError``: a value that cannot be cast;
# ``ProgrammingError``: an unknown name, a parse or binder error). Not among them: a closed
# connection or an interrupt (DuckDB's ``OperationalError``, ``InterruptException``) and our
# own bugs (``TypeError``...). Catch these where a query that fails means "not found".
QUERY_FAILURES: tuple[type[Exception], ...] = (EhrMagicError, duckdb.DataError, duckdb.ProgrammingError)


class Engine:
    """One connected database engine, read-only. See the module docstring for the contract."""

    name: ClassVar[str] = "engine"
    dialect: ClassVar[str] = "duckdb"
    remote: ClassVar[bool] = True
    location: str = ""

    @classmethod
    def open(cls, target: str, **options: Any) -> Engine:
        raise NotImplementedError

    @classmethod
    def publish(cls, duckdb_file: str | os.PathLike[str], target: str, progress: Progress | None = None) -> None:
        raise EhrMagicError(f"Writing to {cls.name} targets is not supported; write a .duckdb file instead.")

    def query_arrow(self, sql: str, params: list[Any] | None = None, max_rows: int | None = None) -> pa.Table:
        raise NotImplementedError

    def query(self, sql: str, params: list[Any] | dict[str, Any] | None = None, *,
              what: str = "the query") -> pl.DataFrame:
        """``query_arrow`` under the thread's row cap, as a polars DataFrame. Parameters by name
        (a dict) reach only DuckDB, which binds them itself; ``EHR`` numbers them for the others."""
        if isinstance(params, dict):
            raise TypeError(f"{self.name} binds parameters by position, not by name")
        cap = limits.current_row_cap()
        table = self.query_arrow(sql, params, None if cap is None else cap + 1)
        if cap is not None and table.num_rows > cap:
            raise limits.ResultTooLargeError(
                f"{what[0].upper() + what[1:]} returned more than {cap:,} rows, the limit for generated code; "
                "aggregate or filter in SQL (GROUP BY, WHERE, LIMIT) so that only the rows needed reach Python.")
        frame = pl.from_arrow(table)
        return frame if isinstance(frame, pl.DataFrame) else frame.to_frame()

    def table_columns(self) -> dict[str, dict[str, str]]:
        raise NotImplementedError

    def read_meta(self) -> dict[str, str]:
        raise NotImplementedError

    def read_knowledge(self) -> dict[str, str]:
        return {}  # an engine that cannot read the table has no stored knowledge

    def row_counts(self) -> dict[str, int]:
        return {}  # no counts that cost nothing: a server's statistics move while its data does not

    def comments(self) -> dict[str, Comments]:
        return {}  # an engine that cannot read its catalog's comments

    def declared_keys(self) -> DeclaredKeys:
        return DeclaredKeys()  # an engine whose catalog declares no keys (Spark's are not enforced)

    def attach_to(self, con: Any, alias: str) -> bool:
        return False  # read through samples (sample_arrow) instead

    def attached_table(self, alias: str, table: str) -> str:
        return f"{alias}.main.{quote_identifier(table)}"

    def sampled(self, table: str, percent: float) -> str:
        return self.table_ref(table)  # no sampling clause: the first rows (sample_arrow cuts them)

    def table_ref(self, table: str) -> str:
        """A data table's name as the dialect writes it in FROM."""
        return quote_identifier(table)

    def sample_arrow(self, table: str, size: int) -> tuple[pa.Table, int]:
        """About ``size`` rows of ``table`` (all of them when it has fewer; the same rows every
        time) and the table's row count."""
        name = self.table_ref(table)
        rows = int(self.query_arrow(f"SELECT count(*) AS n FROM {name}").column(0)[0].as_py())
        if rows <= size:
            return self.query_arrow(f"SELECT * FROM {name}"), rows
        percent = min(100.0, 120.0 * size / rows)  # a little more, then cut to size
        return self.query_arrow(f"SELECT * FROM {self.sampled(table, percent)}", max_rows=size), rows

    def interrupt(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.location}>"


# -- targets ------------------------------------------------------------------------------


def scheme_of(target: str | os.PathLike[str]) -> str | None:
    """The URL scheme of ``target`` if it is a URL of a registered engine, else None."""
    if not isinstance(target, str):
        return None
    match = _SCHEME.match(target.strip())
    if match and match.group(1).lower() in ENGINES:
        return match.group(1).lower()
    return None


def is_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names a server (a registered URL scheme) rather than a file."""
    return scheme_of(target) is not None


def engine_class(target: str | os.PathLike[str]) -> type[Engine]:
    """The engine class for ``target``, imported on first use."""
    scheme = scheme_of(target)
    spec = ENGINES[scheme] if scheme else FILE_ENGINE
    module_name, _, attribute = spec.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute)


def register_engine(scheme: str, spec: str) -> None:
    """Make ``scheme://...`` targets open with ``spec`` (``"package.module:Class"``)."""
    ENGINES[scheme.lower()] = spec


def open_engine(target: str | os.PathLike[str], **options: Any) -> Engine:
    """Connect to ``target`` (file path or URL) for analysis."""
    return engine_class(target).open(str(target), **options)


def publish(duckdb_file: str | os.PathLike[str], target: str, progress: Progress | None = None) -> None:
    """Copy a built DuckDB file into ``target`` (a URL), every table including ``_ehr_*``."""
    engine_class(target).publish(duckdb_file, target, progress)


@contextlib.contextmanager
def output(target: str | os.PathLike[str], progress: Progress | None = None) -> Iterator[str]:
    """Where a loader should build: ``target`` itself for a file, else a temporary DuckDB
    file that is published to the URL when the block succeeds (and removed either way)."""
    if not is_url(target):
        yield str(target)
        return
    engine_class(target)  # a missing driver fails now, before a long build
    with tempfile.TemporaryDirectory(prefix="ehr-magic-build-") as folder:
        path = Path(folder) / "build.duckdb"
        yield str(path)
        publish(path, str(target), progress)


def redact(url: str) -> str:
    """``url`` without its password (and without a ``token=`` parameter's value)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hostport}" if user else hostport
    text = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return re.sub(r"(token=)[^;&/]+", r"\1***", text, flags=re.I)


def missing_extra(package: str, extra: str) -> EhrMagicError:
    """The one-sentence error for an engine whose driver is not installed."""
    return EhrMagicError(f"This target needs the {package} package; install it with: pip install 'ehr-magic[{extra}]'")


def quote_identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
