"""Any folder of CSV or TSV (gzipped or not), parquet, spreadsheet, statistics-package or JSON
files: one table per file, knowledge drafted.

The table name is the file name without its suffix, lower-cased and made a plain SQL
identifier (``Lab Results.csv`` -> ``lab_results``); a workbook gives a table per sheet
(``workbooks``), a SAS, Stata or SPSS file brings its labels as the drafter's comments
(``stat_files``), JSON files are flattened and a FHIR export's are tables of their resource
types (``json_files``), and a subfolder of parquet parts with the same columns is one table,
named for the subfolder (``table_files.is_parquet_dataset``). Types are inferred by DuckDB from
the whole file; only columns that look numeric but are labels (zip codes, phone
numbers) are kept as text. Timestamps with a time zone become plain UTC timestamps, so
they compare with the dataset clock and with polars datetimes.

Each folder gets its own schema id, ``csv_<folder name>``, so that remembered cells of
one folder never answer on another; ``--schema`` chooses another. The knowledge drafted
from the data (``ehr_magic.knowledge.drafting.draft``) is stored in the database, in the same atomic
build, and travels with it to a server target. Re-loading into the same database file keeps
every statement a person wrote or confirmed there (``knowledge_store.keep_confirmed``).
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import os
import re
from collections.abc import Iterable
from pathlib import Path

import duckdb

from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.knowledge.drafting import draft as drafting
from ehr_magic.knowledge import store as knowledge_store
from ehr_magic.db import knowledge_io
from ehr_magic.knowledge.store import write_knowledge
from ehr_magic.text import NON_ALNUM, parse_time
from ehr_magic.knowledge import model as knowledge_files
from ehr_magic.knowledge.model import CONFIRMED
from ehr_magic.sources.loading import SUFFIXES, LoadReport, Progress, check_dirs, load_tables, scratch_folder
from ehr_magic.engines.base import Comments, DeclaredKeys
from ehr_magic.sources import json_files, stat_files, workbooks
from ehr_magic.table_files import header_row, is_parquet, is_parquet_dataset
from ehr_magic.errors import DataSourceError

SOURCE = "csv-folder"
# Labels that look like numbers: read as text so leading zeros survive ('02703').
TYPE_OVERRIDES = {name: "VARCHAR" for name in (
    "zip", "zipcode", "zip_code", "postcode", "postal_code", "phone", "telephone", "fax", "ssn")}
_SCHEMA_ID = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


def table_name(stem: str) -> str:
    """A file stem as a plain SQL identifier: lower case, letters, digits and underscores."""
    name = NON_ALNUM.sub("_", stem.lower()).strip("_")  # no leading '_': those tables are hidden
    if not name or name[0].isdigit():
        name = f"t_{name}"
    if name in _reserved_words():
        name = f"{name}_table"
    return name


def _reserved_words() -> frozenset[str]:
    rows = duckdb.execute("SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category = 'reserved'").fetchall()
    return frozenset(row[0] for row in rows)


def schema_id(folder: Path) -> str:
    """``csv_<folder name>``: one schema (knowledge, memory) per dataset folder."""
    slug = NON_ALNUM.sub("_", folder.resolve().name.lower()).strip("_") or "data"
    return f"csv_{slug}"[:63]


def check_schema(name: str) -> str:
    from ehr_magic.knowledge import model as knowledge

    if not _SCHEMA_ID.match(name):
        raise DataSourceError(f"Schema name {name!r} should be lower-case letters, digits and underscores, "
                              "starting with a letter, e.g. csv_clinic_2024.")
    if name in knowledge.available():
        raise DataSourceError(f"Schema name {name!r} is the packaged description of another dataset; "
                              "choose a name of your own, e.g. csv_" + name + "_copy.")
    return name


_FILE_SUFFIXES = SUFFIXES + workbooks.SUFFIXES + stat_files.SUFFIXES + json_files.SUFFIXES


def find_files(dirs: Iterable[os.PathLike[str] | str]) -> dict[str, Path]:
    """``table -> file`` for every table file (or workbook) directly in ``dirs``; refuses two
    files for one table."""
    files: dict[str, Path] = {}
    for folder in check_dirs(dirs):
        found = sorted(p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(_FILE_SUFFIXES)
                       and not p.name.startswith("~$"))  # a spreadsheet program's lock file
        for path in found + _parquet_datasets(folder):
            suffix = next((s for s in _FILE_SUFFIXES if path.name.lower().endswith(s)), "")
            table = table_name(path.name[: len(path.name) - len(suffix)])
            if table in files:
                raise DataSourceError(
                    f"Files {files[table]} and {path} would both become table {table}; remove or rename one of them.")
            files[table] = path
    if not files:
        folders = check_dirs(dirs)
        below = sorted({p.parent.name for f in folders for p in f.glob("*/*")
                        if p.is_file() and p.name.lower().endswith(_FILE_SUFFIXES)})
        hint = f" Its subfolders {', '.join(below)} hold some: pass those instead." if below else ""
        raise DataSourceError(f"No .csv, .tsv (or gzipped), .parquet, spreadsheet (.xlsx, .xls, .ods), SAS "
                              f"(.sas7bdat, .xpt), Stata (.dta), SPSS (.sav) or JSON (.ndjson, .json) files in "
                              f"{', '.join(map(str, folders))}.{hint}")
    return files


def _parquet_datasets(folder: Path) -> list[Path]:
    """The subfolders of ``folder`` that are one table each, as a folder of parquet parts (Spark's,
    Hive's, a partitioned pyarrow or polars dataset's). A Delta table's parts include rows it has
    since deleted or replaced, so it is refused rather than read wrong."""
    subfolders = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    delta = [sub for sub in subfolders if (sub / "_delta_log").is_dir()]
    if delta:
        raise DataSourceError(f"{delta[0]} is a Delta table, whose parquet files hold rows it has since deleted or "
                              "replaced; export it as plain parquet (Spark: df.write.parquet) or CSV and load that.")
    return [sub for sub in subfolders if is_parquet_dataset(sub)]


def load(
    dirs: Iterable[os.PathLike[str] | str],
    out: os.PathLike[str] | str,
    *,
    now: dt.datetime | str | None = None,
    progress: Progress | None = None,
    schema: str | None = None,
) -> LoadReport:
    """Build ``out`` from the table files of ``dirs``, with knowledge drafted from the data."""
    dirs = list(dirs)
    found = find_files(dirs)
    first = check_dirs(dirs)[0]
    dataset, default_schema = first.resolve().name, schema_id(first)
    if not any(_converted(path) for path in found.values()):
        return load_files(found, {}, out, dataset=dataset, default_schema=default_schema, schema=schema, now=now,
                          progress=progress)
    said = (lambda step: progress(step, 0, len(found))) if progress else None
    with scratch_folder(out, "converted") as folder:
        files, empty = workbooks.sheet_files(found, folder, table_name, said)
        files, comments = stat_files.converted_files(files, folder, said)
        files, notes = json_files.converted_files(files, folder, table_name, said)
        return load_files(files, empty, out, dataset=dataset, default_schema=default_schema, schema=schema, now=now,
                          progress=progress, comments=comments, notes=notes)


def _converted(path: Path) -> bool:
    """Whether a file is read into parquet before loading (a workbook, a statistics package's file,
    a JSON file)."""
    return workbooks.is_workbook(path) or stat_files.is_stat_file(path) or json_files.is_json_file(path)


def load_files(files: dict[str, Path], empty: dict[str, Path], out: os.PathLike[str] | str, *, dataset: str,
               default_schema: str, schema: str | None, now: dt.datetime | str | None = None,
               progress: Progress | None = None, comments: dict[str, Comments] | None = None,
               notes: tuple[str, ...] = (), keys: DeclaredKeys | None = None) -> LoadReport:
    """Build ``out`` from table files (table -> file; ``empty`` ones are reported as skipped), with
    knowledge drafted from the data (and from ``comments``, what the files' own labels say of their
    tables, and ``keys``, the keys their database declared; ``notes`` are conventions of how the
    files were read), or a packaged schema's when the tables are one. The schema id is ``schema``
    if given (then always drafted), else ``default_schema``."""
    chosen = schema is not None
    schema = check_schema(schema) if schema else default_schema
    given = parse_time(now) if now is not None else None

    def finish(con: duckdb.DuckDBPyConnection, report: LoadReport) -> dt.datetime | None:
        loaded = {table: path for table, path in files.items() if table in report.tables}  # not empty files
        for table, path in loaded.items():
            _check_shape(con, table, path)
        if progress:
            progress("drafting knowledge", len(loaded), len(loaded))
        said = notes + _drop_time_zones(con, loaded) + tuple(
            f"The last lines of file {Path(file).name} ({text!r}) are a report's footer, not rows; they were not "
            "loaded." for file, text in report.footers.values()) + tuple(
            f"File {Path(file).name} was empty (not even a header row), so it was not loaded."
            for file in report.empty.values())
        packaged = None if chosen else _packaged_schema(con, loaded)
        if packaged is not None:
            report.schema = packaged
            return _as_packaged(con, packaged, loaded, out, dataset=dataset, given=given, notes=said,
                                comments=comments or {}, keys=keys)
        drafted_files: dict[str, Path | None] = dict(loaded)  # draft also takes tables with no file (None)
        knowledge, anchor = drafting.draft(con, drafted_files, schema=schema, dataset=dataset, now=given,
                                           notes=said, comments=comments or {}, keys=keys)
        # A re-load keeps what a person wrote or confirmed; a clock given now wins over a kept one.
        knowledge = knowledge_store.keep_confirmed(knowledge, previous, keep_clock=given is None)
        if given is None and knowledge.clock and knowledge.mark("clock") == CONFIRMED:
            anchor = knowledge_store.clock_time(knowledge.clock, lambda t, c: _latest(con, t, c))
        write_knowledge(con, schema, knowledge.to_yaml())
        return anchor

    previous = knowledge_io.stored_at(out, schema)

    return load_tables(files, out, schema=schema, source=SOURCE, dataset=dataset, type_overrides=TYPE_OVERRIDES,
                       now=now, empty=empty, progress=progress, finish=finish)


def files_schema(dirs: Iterable[os.PathLike[str] | str]) -> str | None:
    """The packaged schema the table files of ``dirs`` are, by their header rows alone (MIMIC-III's
    files, an OMOP CDM's), if any."""
    from ehr_magic.db import schemas

    found = schemas.recognise({table: dict.fromkeys(header_row(path), "VARCHAR")
                               for table, path in find_files(dirs).items() if not _converted(path)})
    return None if found == schemas.UNKNOWN else found


def _packaged_schema(con: duckdb.DuckDBPyConnection, tables: Iterable[str]) -> str | None:
    """The packaged schema the loaded ``tables`` are, by the rule that recognises a database
    ehr-magic did not build (an OMOP CDM exported as CSV files), if any."""
    from ehr_magic.db import schemas
    from ehr_magic.knowledge.drafting.profiling import column_types

    described = column_types(con)
    found = schemas.recognise({table: dict(described.get(table, [])) for table in tables})
    return None if found == schemas.UNKNOWN else found


def _as_packaged(con: duckdb.DuckDBPyConnection, schema: str, loaded: dict[str, Path], out: os.PathLike[str] | str,
                 *, dataset: str, given: dt.datetime | None, notes: tuple[str, ...],
                 comments: dict[str, Comments], keys: DeclaredKeys | None) -> dt.datetime | None:
    """Files that are a packaged schema's tables use its knowledge, as an attached database of it
    does: only the tables it does not describe are drafted and stored with it, and the clock is
    the one it states. Knowledge stored by an earlier load of the same schema (an analyst's import)
    is the base instead, so a re-load keeps it."""
    stored = knowledge_io.stored_at(out, schema)
    base = stored or knowledge_files.load(schema)
    described = {table.lower() for table in base.tables}
    extra: dict[str, Path | None] = {table: path for table, path in loaded.items() if table.lower() not in described}
    fill = drafting.draft(con, extra, schema=schema, dataset=dataset, notes=notes, comments=comments,
                          keys=keys)[0] if extra else None
    knowledge = knowledge_store.with_drafted_tables(base, fill)
    if stored is not None or fill is not None:  # else the packaged file is read as it ships, a newer one too
        write_knowledge(con, schema, knowledge.to_yaml())
    if given is not None or not knowledge.clock:
        return None

    def latest(table: str, column: str) -> object:
        try:
            return _latest(con, table, column)
        except duckdb.Error:  # a table or column the clock names is not among the files
            return None

    return knowledge_store.clock_time(knowledge.clock, latest)


def _latest(con: duckdb.DuckDBPyConnection, table: str, column: str) -> object:
    """The largest value of ``table.column`` (None when it is empty)."""
    row = con.execute(f"SELECT max({quote(column)}) FROM {quote(table)}").fetchone()
    return row[0] if row is not None else None  # an aggregate always gives one row


def _check_shape(con: duckdb.DuckDBPyConnection, table: str, path: Path) -> None:
    """Refuse a CSV that DuckDB could only read as one column of whole lines: a row with a
    different number of fields makes its sniffer give up on the delimiter."""
    if is_parquet(path):
        return
    columns = con.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' "
                          "AND table_name = ?", [table]).fetchall()
    if len(columns) != 1 or not any(mark in columns[0][0] for mark in ",;\t|"):
        return
    header = columns[0][0]
    delimiter = max(",;\t|", key=header.count)
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter)
        width = len(next(reader, []))
        for row in reader:
            if len(row) != width:
                raise DataSourceError(
                    f"Cannot read {path} as a table: line {reader.line_num} has {len(row)} fields where the header "
                    f"has {width}; fix that row (or quote its {delimiter!r} characters) and load again.")
    raise DataSourceError(f"Cannot read {path} as a table: DuckDB found no consistent delimiter; check that every "
                          "row has as many fields as the header.")


def _drop_time_zones(con: duckdb.DuckDBPyConnection, files: dict[str, Path]) -> tuple[str, ...]:
    """TIMESTAMP WITH TIME ZONE columns -> TIMESTAMP in UTC; a convention saying so, if any."""
    zoned = con.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main' "
        "AND data_type = 'TIMESTAMP WITH TIME ZONE' ORDER BY table_name, ordinal_position").fetchall()
    for table, column in zoned:
        if table in files:
            name = quote(column)
            con.execute(f"ALTER TABLE {quote(table)} ALTER {name} SET DATA TYPE TIMESTAMP "
                        f"USING timezone('UTC', {name})")
    if not zoned:
        return ()
    return (("Times written with a time zone in the files (e.g. '2023-01-27T16:17:47Z') are stored as UTC times "
             "without a zone."),)
