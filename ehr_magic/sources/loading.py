"""Loading a folder of table files (CSV, gzipped CSV, parquet) into an EHR database.

Shared by the MIMIC-IV, MIMIC-III and eICU loaders: each finds its files and says
which columns need a fixed type; DuckDB's reader does the rest, scanning the whole file
to detect types (a sample can mistake a code column for numbers).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import contextlib
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ehr_magic.db.build import building, write_metadata
from ehr_magic.errors import DataSourceError
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.identifiers import text_literal
from ehr_magic.sources.written_dates import convert_written_dates, two_digit_years
from ehr_magic.table_files import (Dialect, footer, is_blank, is_parquet, parquet_reader, read_dialect,
                                   write_head, write_utf8_copy)

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]
Finish = Callable[[duckdb.DuckDBPyConnection, "LoadReport"], "dt.datetime | None"]
SUFFIXES = (".csv.gz", ".csv", ".tsv.gz", ".tsv", ".parquet")


@dataclass
class LoadReport:
    """What a load did: rows per table, tables skipped and why, the clock it recorded."""

    tables: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    empty: dict[str, str] = field(default_factory=dict)  # table -> its file, skipped: no header, no rows
    now: str = ""  # empty when the data has no dates (time_model "offset")
    time_model: str = "calendar"
    schema: str = ""  # the schema recorded: the loader's, or the packaged one the tables were found to be
    # table -> (its file, the report footer left out of it: '(299 rows affected)')
    footers: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def total_rows(self) -> int:
        return sum(self.tables.values())


def find_tables(wanted: Iterable[tuple[str, list[Path], list[str]]]) -> tuple[dict[str, Path], list[str]]:
    """``table -> file`` for each ``(table, folders, file name stems)`` whose file is found
    (``find_table_file``), and the tables not found."""
    files: dict[str, Path] = {}
    missing: list[str] = []
    for table, dirs, stems in wanted:
        path = find_table_file(dirs, stems)
        if path is None:
            missing.append(table)
        else:
            files[table] = path
    return files, missing


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
            raise name_clash(stems[0].lower(), found)
        if found:
            return found[0]
    return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def table_files(directory: Path) -> dict[str, Path]:
    """``table -> file`` of every table file in ``directory``, the table being the
    lower-cased file name without its suffix (``admissionDrug.csv.gz`` -> ``admissiondrug``).
    Two files that give one table name are refused."""
    grouped: dict[str, list[Path]] = {}
    for path in sorted(directory.iterdir()):
        suffix = next((s for s in SUFFIXES if path.name.lower().endswith(s)), None)
        if suffix is None or path.name.startswith(".") or not path.is_file():
            continue
        grouped.setdefault(path.name[: -len(suffix)].lower(), []).append(path)
    for table, paths in grouped.items():
        if len(paths) > 1:
            raise name_clash(table, paths)
    return {table: paths[0] for table, paths in grouped.items()}


def name_clash(table: str, paths: list[Path]) -> DataSourceError:
    names = " and ".join(p.name for p in paths)
    return DataSourceError(f"Both {names} in {paths[0].parent} would load table {table}; "
                           "remove or move all but one of them.")


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
    empty: dict[str, Path] | None = None,
    progress: Progress | None = None,
    finish: Finish | None = None,
    metadata: dict[str, str] | None = None,
) -> LoadReport:
    """Write every ``table -> file`` into a new database at ``out``, atomically.

    Column names are lowercased. ``type_overrides`` fixes the type of columns by name
    wherever they occur (ids as BIGINT, codes as VARCHAR...), or of one table's column
    with a ``"table.column"`` key, or of every column ending in a suffix with a
    ``"*suffix"`` key (``"*offset"``); the exact name wins. Without ``now``, the
    clock is the latest timestamp found in the data. ``empty`` are files already found to hold
    nothing, reported as skipped. ``metadata`` adds keys to the
    database's metadata; with ``time_model="offset"`` the data has no dates and no clock.
    ``finish(con, report)`` runs inside the same atomic build once every table is in
    (e.g. to draft and store knowledge); a datetime it returns is the clock unless
    ``now`` was given, and the ``report.schema`` it sets is the schema recorded.
    """
    extra = dict(metadata or {})
    report = LoadReport(missing=list(missing or []), time_model=extra.get("time_model", "calendar"), schema=schema,
                        empty={table: str(path) for table, path in (empty or {}).items()})
    if not files and not report.empty:
        raise DataSourceError("No table files found in the given folder(s); is this the right dataset folder?")
    with building(out) as con:
        for i, (table, path) in enumerate(files.items()):
            if progress:
                progress(table, i, len(files))
            if is_blank(path):
                report.empty[table] = str(path)  # no header: DuckDB would make up a column0 for it
                continue
            report.tables[table] = _load_one(con, table, path, type_overrides, out, report)
        if not report.tables:
            raise DataSourceError(f"Every table file given is empty ({', '.join(report.empty.values())}); "
                                  "nothing to load.")
        if progress:
            progress("done", len(files), len(files))
        drafted_now = finish(con, report) if finish else None
        if report.time_model == "calendar":
            anchor = now if now is not None else (drafted_now or latest_timestamp(con))
            if isinstance(anchor, dt.datetime):
                anchor = anchor.strftime("%Y-%m-%d %H:%M:%S")
            report.now = str(anchor) if anchor is not None else ""  # no dates in the data: no clock
        write_metadata(con, schema=report.schema, source=source, now=report.now, dataset=dataset,
                       missing_tables=",".join([*report.missing, *report.empty]), **extra)
    return report


@contextlib.contextmanager
def scratch_folder(out: os.PathLike[str] | str, what: str) -> Iterator[Path]:
    """A folder beside ``out`` (on its disk, which has room for the database) for copies made while
    loading, removed afterwards."""
    beside = Path(out).expanduser().resolve().parent
    if not beside.is_dir():
        raise DataSourceError(f"Folder {beside} does not exist; create it or choose another --out.")
    with tempfile.TemporaryDirectory(prefix=f".ehr-magic-{what}-", dir=beside) as folder:
        yield Path(folder)


def _load_one(con: duckdb.DuckDBPyConnection, table: str, path: Path, overrides: dict[str, str],
              out: str | os.PathLike[str], report: LoadReport) -> int:
    """Load ``path`` as ``table``. A report's footer below the last row ('(299 rows affected)') is
    left out, through a copy of the rows above it, and said in ``report``. Windows text is read
    through a UTF-8 copy beside ``out``, and so is a file that is UTF-8 only at its start (its later
    bytes that are not UTF-8 are Windows text, as a spreadsheet appending to it writes them)."""
    parquet = is_parquet(path)
    dialect = Dialect() if parquet else read_dialect(path)
    below = None if parquet else footer(path, dialect)
    if below is None:
        return _load_rows(con, table, path, dialect, overrides, out, path)
    report.footers[table] = (str(path), below.text)
    with scratch_folder(out, "rows") as folder:
        rows = folder / path.name
        try:
            write_head(path, rows, below.start)
        except OSError as exc:
            raise DataSourceError(f"Cannot load {path} as table {table}: copying its rows in {folder.parent} "
                                  f"failed ({exc.strerror or exc}); make room there and load again.") from None
        return _load_rows(con, table, rows, dialect, overrides, out, path)


def _load_rows(con: duckdb.DuckDBPyConnection, table: str, path: Path, dialect: Dialect, overrides: dict[str, str],
               out: str | os.PathLike[str], shown: Path) -> int:
    """Load the rows of ``path`` (written as ``dialect`` says), whose errors name ``shown``, the
    file the user gave."""
    parquet = is_parquet(path)
    if dialect.encoding != "windows":
        try:
            return _create_table(con, table, path, dialect, overrides)
        except duckdb.Error as exc:
            if parquet or dialect.encoding != "utf-8" or not _not_utf8(exc):
                raise DataSourceError(read_error(shown, table, _explained(con, path, dialect, exc))) from None
    with scratch_folder(out, "text") as folder:
        copy = folder / "utf8.csv"
        try:
            write_utf8_copy(path, copy, utf8_start=dialect.encoding == "utf-8")
        except OSError as exc:
            raise DataSourceError(f"Cannot load {shown} as table {table}: writing its UTF-8 copy in {folder.parent} "
                                  f"failed ({exc.strerror or exc}); make room there and load again.") from None
        utf8 = read_dialect(copy)
        try:
            return _create_table(con, table, copy, utf8, overrides)
        except duckdb.Error as exc:
            raise DataSourceError(read_error(shown, table, _explained(con, copy, utf8, exc))) from None


def _create_table(con: duckdb.DuckDBPyConnection, table: str, path: Path, dialect: Dialect,
                  overrides: dict[str, str]) -> int:
    literal = str(path).replace("'", "''")
    if is_parquet(path):
        reader = parquet_reader(path)
        columns = con.execute(f"SELECT * FROM {reader} LIMIT 0").description
    else:
        as_text = f"read_csv('{literal}', {dialect.options}, all_varchar=true, sample_size=1, nullstr=[''])"
        header = con.execute(f"SELECT * FROM {as_text} LIMIT 0").description
        types = {col[0]: dtype for col in header if (dtype := override_for(overrides, table, col[0].lower()))}
        reader = _csv_reader(literal, dialect, types)
        sniffed = con.execute(f"SELECT * FROM {reader} LIMIT 0").description
        # DuckDB takes 'F' alone, or 't'/'f', for false: a column of only 'F' (sex, in a cohort of
        # women) stays text unless its values are yes/no words or a true and a false letter both.
        as_text_too: dict[str, str] = {}
        flags = [col[0] for col in sniffed if str(col[1]) == "BOOLEAN" and col[0] not in types]
        if flags:
            found = con.execute(f"SELECT {', '.join(f'list(DISTINCT lower(trim({quote(c)})))' for c in flags)} "
                                f"FROM {as_text}").fetchone() or ()
            as_text_too |= {name: "VARCHAR" for name, values in zip(flags, found) if not _true_and_false(values)}
        # A two-digit year ('3/1/24') would be the year 24: left as text for written_dates to read.
        dated = [col[0] for col in sniffed if str(col[1]) in ("DATE", "TIMESTAMP") and col[0] not in types]
        if dated:
            head = con.execute(f"SELECT {', '.join(quote(c) for c in dated)} FROM {as_text} LIMIT 200").fetchall()
            as_text_too |= {name: "VARCHAR" for i, name in enumerate(dated)
                            if two_digit_years([row[i] for row in head])}
        columns = sniffed
        if as_text_too:  # else the types sniffed stand (sniffing a whole file again costs as much again)
            types |= as_text_too
            reader = _csv_reader(literal, dialect, types)
            columns = con.execute(f"SELECT * FROM {reader} LIMIT 0").description
    select = ", ".join(f"{quote(c[0])} AS {quote(c[0].lower())}" for c in columns)
    con.execute(f"CREATE TABLE {quote(table)} AS SELECT {select} FROM {reader}")
    fixed = {column.lower() for column in overrides} | {c[0].lower() for c in columns
                                                         if override_for(overrides, table, c[0].lower())}
    convert_written_dates(con, table, keep=fixed)
    return int(con.execute(f"SELECT count(*) FROM {quote(table)}").fetchall()[0][0])


def _csv_reader(literal: str, dialect: Dialect, types: dict[str, str]) -> str:
    """read_csv of the whole file, with ``types`` fixed by column name."""
    fixed = ", ".join(f"{text_literal(name)}: {text_literal(dtype)}" for name, dtype in types.items())
    return f"read_csv('{literal}', {dialect.options}, sample_size=-1, types={{{fixed}}}, nullstr=[''])"


_TRUE, _FALSE = {"true", "yes", "t", "y"}, {"false", "no", "f", "n"}


def _true_and_false(values: list[str | None]) -> bool:
    """Whether a column's values (lower case) are booleans: yes/no words, or a true and a false letter."""
    said = {value for value in values if value}
    return said <= {"true", "false", "yes", "no"} or (bool(said & _TRUE) and bool(said & _FALSE))


def _not_utf8(exc: duckdb.Error) -> bool:
    text = str(exc).lower()
    return "not utf-8 encoded" in text or "invalid unicode" in text


def _explained(con: duckdb.DuckDBPyConnection, path: Path, dialect: Dialect, exc: duckdb.Error) -> duckdb.Error:
    """When the sniffer gave up, the error of a strict read, which names the bad line."""
    if "sniffing" in str(exc).lower():
        return _strict_read_error(con, path, dialect) or exc
    return exc


def _strict_read_error(con: duckdb.DuckDBPyConnection, path: Path, dialect: Dialect) -> duckdb.Error | None:
    """When the sniffer gave up, a plain text read with the header's width names the bad line."""
    if not dialect.header:
        return None  # unreadable: the DuckDB error already says what is wrong with the file
    width = len(dialect.header)
    literal = str(path).replace("'", "''")
    columns = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(width))
    try:
        con.execute(f"SELECT count(*) FROM read_csv('{literal}', {dialect.options}, auto_detect=false, "
                    f"columns={{{columns}}})").fetchall()
    except duckdb.Error as exc:
        return exc
    return None


def override_for(overrides: dict[str, str], table: str, column: str) -> str | None:
    """The fixed type of ``table.column``: a "table.column" key beats "column", which beats "*suffix"."""
    exact = overrides.get(f"{table}.{column}", overrides.get(column))
    if exact:
        return exact
    suffixes = [key for key in overrides if key.startswith("*") and column.endswith(key[1:])]
    return overrides[max(suffixes, key=len)] if suffixes else None


_LINE = re.compile(r"\bline:\s*(\d+)", re.IGNORECASE)  # "CSV Error on Line: 51" (not the SQL's "LINE 1:")


def read_error(path: Path, table: str, exc: duckdb.Error) -> str:
    """One sentence on why ``path`` could not be loaded, with the line DuckDB names."""
    text = str(exc)
    lowered = text.lower()
    line = _LINE.search(text)
    at = f" at line {line.group(1)}" if line else ""
    if "expected number of columns" in lowered:
        problem = f"the row{at} has a different number of fields than the header"
    elif "gzip" in lowered or "zlib" in lowered or "inflate" in lowered:
        problem = "it is not a valid gzip file (truncated or corrupt)"
    elif "could not convert" in lowered or "conversion error" in lowered:
        problem = f"a value{at} does not fit its column's type"
    elif "parquet" in lowered or "magic bytes" in lowered:
        problem = "it is not a valid parquet file"
    elif "is not utf-" in lowered or "invalid unicode" in lowered:
        problem = f"its text{at} is not valid UTF-8 or UTF-16"
    elif "sniffing" in lowered:
        problem = "it is not a comma-separated file with a header row"
    else:
        problem = " ".join(text.strip().splitlines()[0].split()) + at
    return f"Cannot load {path} as table {table}: {problem.rstrip('.')}; fix or replace the file."


def latest_timestamp(con: duckdb.DuckDBPyConnection) -> dt.datetime | None:
    """The latest TIMESTAMP (else DATE) value in any table: the default "now" of a raw dataset;
    None when no table holds one (the dataset then has no clock, never a made-up one)."""
    for kind in ("data_type LIKE 'TIMESTAMP%'", "data_type = 'DATE'"):
        columns = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            f"WHERE table_schema='main' AND {kind} AND table_name NOT LIKE '\\_%' ESCAPE '\\'"
        ).fetchall()
        if columns:
            parts = " UNION ALL ".join(f"SELECT max({quote(c)})::TIMESTAMP AS m FROM {quote(t)}" for t, c in columns)
            value = con.execute(f"SELECT max(m) FROM ({parts})").fetchall()[0][0]
            if value is not None:
                return value
    return None
