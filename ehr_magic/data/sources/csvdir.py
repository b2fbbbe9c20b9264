"""Loading a folder of table files (CSV, gzipped CSV, parquet) into an EHR database.

Shared by the MIMIC-IV, MIMIC-III and eICU loaders: each finds its files and says
which columns need a fixed type; DuckDB's reader does the rest, scanning the whole file
to detect types (a sample can mistake a code column for numbers).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ehr_magic.data.build import building, write_metadata
from ehr_magic.errors import DataSourceError

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]
SUFFIXES = (".csv.gz", ".csv", ".parquet")


@dataclass
class LoadReport:
    """What a load did: rows per table, tables skipped and why, the clock it recorded."""

    tables: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    now: str = ""

    @property
    def total_rows(self) -> int:
        return sum(self.tables.values())


def find_table_file(dirs: Iterable[Path], stem_candidates: Iterable[str]) -> Path | None:
    """The file named like one of ``stem_candidates`` (with a known suffix) in the first of
    ``dirs`` that has one. Two such files in one folder (``ADMISSIONS.csv`` beside
    ``ADMISSIONS.csv.gz``) are refused: picking one silently could load stale data."""
    stems = list(stem_candidates)
    for directory in dirs:
        found: list[Path] = []
        for stem in stems:
            for suffix in SUFFIXES:
                path = directory / f"{stem}{suffix}"
                # On a case-insensitive file system two spellings can name the same file.
                if path.is_file() and not any(_same_file(path, other) for other in found):
                    found.append(path)
        if len(found) > 1:
            raise DataSourceError(
                f"{directory} holds {' and '.join(p.name for p in found)} for the same table; "
                "remove all but one of them and load again."
            )
        if found:
            return found[0]
    return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_dirs(dirs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    paths = [Path(d).expanduser() for d in dirs]
    if not paths:
        raise DataSourceError("No input folder given; pass the folder that holds the dataset's files.")
    for path in paths:
        if not path.exists():
            raise DataSourceError(f"Folder {path} does not exist; check the path.")
        if not path.is_dir():
            raise DataSourceError(f"{path} is not a folder; pass the folder that holds the dataset's files.")
    return paths


def load_tables(
    files: dict[str, Path],
    out: str | os.PathLike[str],
    *,
    schema: str,
    source: str,
    dataset: str,
    type_overrides: dict[str, str],
    now: dt.datetime | str | None = None,
    missing: list[str] | None = None,
    progress: Progress | None = None,
) -> LoadReport:
    """Write every ``table -> file`` into a new database at ``out``, atomically.

    Column names are lowercased. ``type_overrides`` fixes the type of columns by name
    wherever they occur (ids as BIGINT, codes as VARCHAR...), or of one table's column
    with a ``"table.column"`` key. Without ``now``, the
    clock is the latest timestamp found in the data.
    """
    report = LoadReport(missing=list(missing or []))
    if not files:
        raise DataSourceError("No table files found in the given folder(s); is this the right dataset folder?")
    with building(out) as con:
        for i, (table, path) in enumerate(files.items()):
            if progress:
                progress(table, i, len(files))
            report.tables[table] = _load_one(con, table, path, type_overrides)
        if progress:
            progress("done", len(files), len(files))
        anchor = now if now is not None else latest_timestamp(con)
        if isinstance(anchor, dt.datetime):
            anchor = anchor.strftime("%Y-%m-%d %H:%M:%S")
        report.now = str(anchor)
        write_metadata(con, schema=schema, source=source, now=report.now, dataset=dataset,
                       missing_tables=",".join(report.missing))
    return report


def _load_one(con: duckdb.DuckDBPyConnection, table: str, path: Path, overrides: dict[str, str]) -> int:
    literal = str(path).replace("'", "''")
    try:
        if path.name.endswith(".parquet"):
            reader = f"read_parquet('{literal}')"
        else:
            header = con.execute(
                f"SELECT * FROM read_csv('{literal}', header=true, all_varchar=true) LIMIT 0"
            ).description
            types = {}
            for col in header:
                name = col[0].lower()
                dtype = overrides.get(f"{table}.{name}", overrides.get(name))  # "table.column" beats "column"
                if dtype:
                    types[col[0]] = dtype
            type_sql = ", ".join(f"'{name}': '{dtype}'" for name, dtype in types.items())
            reader = (
                f"read_csv('{literal}', header=true, sample_size=-1, "
                f"types={{{type_sql}}}, nullstr=[''])"
            )
        columns = con.execute(f"SELECT * FROM {reader} LIMIT 0").description
        select = ", ".join(f'"{c[0]}" AS "{c[0].lower()}"' for c in columns)
        con.execute(f'CREATE TABLE "{table}" AS SELECT {select} FROM {reader}')
    except duckdb.Error as exc:
        message = str(exc).strip().splitlines()[0]
        raise DataSourceError(f"Cannot read {path} for table {table}: {message}") from None
    return int(con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0])


def latest_timestamp(con: duckdb.DuckDBPyConnection) -> dt.datetime:
    """The latest TIMESTAMP value in any table: the default "now" of a raw dataset."""
    columns = con.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema='main' AND data_type LIKE 'TIMESTAMP%' AND table_name NOT LIKE '\\_%' ESCAPE '\\'"
    ).fetchall()
    if not columns:
        return dt.datetime(2000, 1, 1)
    parts = " UNION ALL ".join(f'SELECT max("{c}") AS m FROM "{t}"' for t, c in columns)
    value = con.execute(f"SELECT max(m) FROM ({parts})").fetchall()[0][0]
    return value or dt.datetime(2000, 1, 1)
