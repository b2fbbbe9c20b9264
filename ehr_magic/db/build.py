"""Writing an EHR database file: atomically, with its metadata.

Every source (loader or generator) writes through ``building()``: a writable DuckDB
connection on a temporary file beside the target, renamed over the target only when
the whole build succeeded, so a failed or interrupted build never leaves a half file.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb

from ehr_magic import files
from ehr_magic.engines.base import META_TABLE
from ehr_magic.errors import DataSourceError
from ehr_magic.version import __version__


def write_metadata(
    con: duckdb.DuckDBPyConnection,
    *,
    schema: str,
    source: str,
    now: dt.datetime | str,
    dataset: str,
    **extra: str,
) -> None:
    """Record what the database is: its schema id, where it came from and its clock.

    ``schema`` names the table layout (e.g. ``mimic_iv``, ``ehrsql_mimic_iv``); the
    knowledge files and memory entries are keyed on it. ``now`` is the dataset's
    "current time", the anchor of every relative date.
    """
    if isinstance(now, dt.datetime):
        now = now.strftime("%Y-%m-%d %H:%M:%S")

    values = {
        "schema": schema,
        "source": source,
        "now": now,
        "dataset": dataset,
        "ehr_magic_version": __version__,
        **extra,
    }
    con.execute(f"CREATE OR REPLACE TABLE {META_TABLE} (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.executemany(f"INSERT INTO {META_TABLE} VALUES (?, ?)", list(values.items()))


@contextlib.contextmanager
def building(out: str | os.PathLike[str], *, overwrite: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
    """Yield a writable connection whose file replaces ``out`` only on success."""
    out_path = Path(out).expanduser().resolve()
    if out_path.suffix.lower() not in {".duckdb", ".db", ".ddb"}:
        raise DataSourceError(f"Output file {out} should end in .duckdb; choose a name like data.duckdb.")
    if out_path.exists() and not overwrite:
        raise DataSourceError(f"{out} already exists; remove it or choose another --out.")
    if not out_path.parent.exists():
        raise DataSourceError(f"Folder {out_path.parent} does not exist; create it or choose another --out.")
    with files.replacing(out_path) as tmp:
        con = duckdb.connect(str(tmp))
        try:
            yield con
            con.execute("CHECKPOINT")
            con.close()
        except BaseException:
            with contextlib.suppress(Exception):
                con.close()
            _remove_db_files(tmp)  # its write-ahead log too
            raise
    # A stale write-ahead log of an older file would be replayed onto the new one.
    with contextlib.suppress(FileNotFoundError):
        os.remove(f"{out_path}.wal")


def _remove_db_files(path: Path) -> None:
    for p in (path, Path(f"{path}.wal")):
        with contextlib.suppress(FileNotFoundError):
            os.remove(p)
