"""The writer side of Spark targets: a built DuckDB file -> managed tables in a database.

Rows travel as Arrow through the Spark Connect session (``createDataFrame`` on chunks
of about ``PUBLISH_CHUNK_BYTES``), so this works with a remote server, not only with a
local one that could read our files. Column types Spark has no equivalent for (DuckDB's
unsigned and 128-bit integers, TIME, UUID, INTERVAL, ENUM, JSON...) are converted in
DuckDB first: to a wider integer or DECIMAL, or to text.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from typing import Any

import duckdb
import pyarrow as pa

from ehr_magic.engines.base import Progress
from ehr_magic.identifiers import quote_identifier

PUBLISH_CHUNK_BYTES = 32 * 1024 * 1024  # gRPC caps a message at 128 MB; stay well below
_BATCH_ROWS = 50_000
_KEEP = re.compile(
    r"^(BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|FLOAT|DOUBLE|DECIMAL\(\d+,\s*\d+\)|VARCHAR|DATE|TIMESTAMP"
    r"|TIMESTAMP WITH TIME ZONE|BLOB)$")
_WIDEN = {
    "UTINYINT": "SMALLINT", "USMALLINT": "INTEGER", "UINTEGER": "BIGINT", "UBIGINT": "DECIMAL(20,0)",
    "HUGEINT": "DECIMAL(38,0)", "UHUGEINT": "DECIMAL(38,0)", "TIMESTAMP_S": "TIMESTAMP",
    "TIMESTAMP_MS": "TIMESTAMP", "TIMESTAMP_NS": "TIMESTAMP",
}


def publish_tables(spark: Any, duckdb_file: str | os.PathLike[str], database: str,
                   progress: Progress | None = None) -> list[str]:
    """Copy every table of ``duckdb_file`` into ``database``; the names of the tables written."""
    source = _open_source(duckdb_file)
    try:
        tables = [row[0] for row in source.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "ORDER BY table_name").fetchall()]
        existing = spark.sql("SHOW DATABASES").toArrow().column(0).to_pylist()
        created = database not in existing
        if created:
            spark.sql(f"CREATE DATABASE `{database}`").collect()
        run = uuid.uuid4().hex[:10]
        staged: list[tuple[str, str]] = []
        try:
            for i, table in enumerate(tables):
                if progress:
                    progress(f"publishing {table}", i, len(tables))
                staged.append((table, f"_ehr_load_{run}_{table}"))
                _copy_table(spark, source, table, f"`{database}`.`{staged[-1][1]}`")
        except BaseException:
            for _, name in staged:
                with contextlib.suppress(Exception):
                    spark.sql(f"DROP TABLE IF EXISTS `{database}`.`{name}`").collect()
            if created:
                with contextlib.suppress(Exception):
                    spark.sql(f"DROP DATABASE IF EXISTS `{database}` CASCADE").collect()
            raise
        for table, name in staged:
            spark.sql(f"DROP TABLE IF EXISTS `{database}`.`{table}`").collect()
            spark.sql(f"ALTER TABLE `{database}`.`{name}` RENAME TO `{database}`.`{table}`").collect()
        if progress:
            progress("published", len(tables), len(tables))
        return tables
    finally:
        source.close()



def _open_source(duckdb_file: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(duckdb_file), read_only=True)
    except duckdb.ConnectionException as exc:
        if "different configuration" not in str(exc):
            raise
        # An ``EHR`` in this process has the file open: DuckDB wants the same settings.
        from ehr_magic.engines.duckdb_engine import _SAFE_CONFIG
        from ehr_magic.safety import limits

        return duckdb.connect(str(duckdb_file), read_only=True, config={**_SAFE_CONFIG, **limits.duckdb_config()})


def _copy_table(spark: Any, source: duckdb.DuckDBPyConnection, table: str, destination: str) -> None:
    columns = source.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'main' "
        "AND table_name = ? ORDER BY ordinal_position", [table]).fetchall()
    select = ", ".join(_column(name, dtype) for name, dtype in columns)
    reader = source.sql(f"SELECT {select} FROM {quote_identifier(table)}").to_arrow_reader(_BATCH_ROWS)
    written = False
    chunk: list[pa.RecordBatch] = []
    size = 0
    for batch in reader:
        chunk.append(batch)
        size += batch.nbytes
        if size >= PUBLISH_CHUNK_BYTES:
            _write(spark, pa.Table.from_batches(chunk, reader.schema), destination, append=written)
            written, chunk, size = True, [], 0
    if chunk or not written:
        _write(spark, pa.Table.from_batches(chunk, reader.schema), destination, append=written)


def _write(spark: Any, rows: pa.Table, destination: str, *, append: bool) -> None:
    if rows.num_rows:
        frame = spark.createDataFrame(rows)
    else:  # Spark cannot infer a schema from no rows: give it the Arrow schema's translation
        from pyspark.sql.pandas.types import from_arrow_schema

        frame = spark.createDataFrame([], schema=from_arrow_schema(rows.schema, prefer_timestamp_ntz=True))
    frame.write.mode("append" if append else "overwrite").saveAsTable(destination)


def _column(name: str, dtype: str) -> str:
    quoted = quote_identifier(name)  # in the DuckDB query that reads the source
    upper = dtype.upper()
    if _KEEP.match(upper) or (upper.endswith("[]") and _KEEP.match(upper[:-2])):
        return quoted
    return f"CAST({quoted} AS {_WIDEN.get(upper, 'VARCHAR')}) AS {quoted}"
