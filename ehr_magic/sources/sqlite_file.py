"""Any SQLite database file: one table per table (and per view), knowledge drafted from the data.

SQLite's column types are declarations that values need not follow (a column declared INTEGER may
hold text, one declared nothing holds anything), so each table is written as a CSV file beside the
output and loaded as a folder's file is: DuckDB reads the types from the whole of the values
(timestamps written as text become TIMESTAMP), the knowledge is drafted (with the primary and
foreign keys the file declares), and a database that is a packaged schema's tables (an OMOP CDM)
is recognised. DuckDB's own sqlite extension would have to
be downloaded, so the rows are read with Python's sqlite3.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ehr_magic.engines.base import DeclaredKeys, ForeignKey
from ehr_magic.errors import DataSourceError
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.sources import folder as table_folder
from ehr_magic.sources.loading import LoadReport, Progress, scratch_folder
from ehr_magic.table_files import windows_text
from ehr_magic.text import NON_ALNUM

_HEADER = b"SQLite format 3\x00"
_CHUNK = 20_000


def schema_id(path: Path) -> str:
    """``sqlite_<file name>``: one schema (knowledge, memory) per database file."""
    slug = NON_ALNUM.sub("_", path.stem.lower()).strip("_") or "data"
    return f"sqlite_{slug}"[:63]


def load(inputs: Sequence[str], out: str | os.PathLike[str], *, now: dt.datetime | str | None = None,
         progress: Progress | None = None, schema: str | None = None) -> LoadReport:
    """Build ``out`` from every table and view of one SQLite file."""
    if len(inputs) != 1:
        raise DataSourceError("The sqlite source takes one SQLite database file.")
    path = Path(inputs[0]).expanduser()
    if not path.is_file():
        raise DataSourceError(f"No file at {inputs[0]}; pass a SQLite database file (.sqlite, .db).")
    with open(path, "rb") as handle:
        if handle.read(16) != _HEADER:
            raise DataSourceError(f"{inputs[0]} is not a SQLite database file.")
    with scratch_folder(out, "sqlite") as scratch:
        files, keys = _write_tables(path, scratch, progress)
        return table_folder.load_files(files, {}, out, dataset=path.stem, default_schema=schema_id(path),
                                       schema=schema, now=now, progress=progress, keys=keys)


def _write_tables(path: Path, scratch: Path, progress: Progress | None) -> tuple[dict[str, Path], DeclaredKeys]:
    """Each table and view of the SQLite file at ``path`` as a CSV file in ``scratch`` (table -> file),
    and the keys its tables declare."""
    source = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    source.text_factory = _text_of  # SQLite never checks that text is UTF-8
    try:
        names = [row[0] for row in source.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' "
            "ESCAPE '\\' ORDER BY type, name")]
        if not names:
            raise DataSourceError(f"{path} holds no tables.")
        files: dict[str, Path] = {}
        for i, name in enumerate(names):
            if progress:
                progress(f"reading {name}", i, len(names))
            table = table_folder.table_name(name)
            if table in files:
                raise DataSourceError(f"Tables {files[table].stem} and {name} of {path} would both become table "
                                      f"{table}; rename one of them.")
            files[table] = scratch / f"{name}.csv"  # its name as written: drafting reads its words from it
            _write_table(source, name, files[table])
        return files, _declared_keys(source, names)
    except sqlite3.DatabaseError as exc:
        raise DataSourceError(f"Cannot read {path}: {exc}; check that it is a whole SQLite database "
                              "(sqlite3 FILE 'PRAGMA integrity_check').") from None
    finally:
        source.close()


def _declared_keys(source: sqlite3.Connection, names: list[str]) -> DeclaredKeys:
    """The PRIMARY KEY and FOREIGN KEY clauses of the tables ``names``, named as loading names them
    (tables as ``folder.table_name`` makes them, columns in lower case)."""
    loaded = {name.lower(): table_folder.table_name(name) for name in names}
    primary: dict[str, tuple[str, ...]] = {}
    own: dict[str, tuple[str, ...]] = {}  # sqlite name -> its primary key, as declared
    for name in names:
        info = source.execute(f"PRAGMA table_info({quote(name, 'sqlite')})").fetchall()
        own[name.lower()] = tuple(row[1] for row in sorted(info, key=lambda row: row[5]) if row[5])
        if own[name.lower()]:
            primary[loaded[name.lower()]] = tuple(c.lower() for c in own[name.lower()])
    foreign = []
    for name in names:
        clauses: dict[int, list[tuple]] = {}
        for row in source.execute(f"PRAGMA foreign_key_list({quote(name, 'sqlite')})").fetchall():
            clauses.setdefault(row[0], []).append(row)  # id, seq, table, from, to, ...
        for rows in clauses.values():
            rows.sort(key=lambda row: row[1])
            target = str(rows[0][2]).lower()
            if target not in loaded:
                continue  # refers to a table the file does not hold
            # a clause without its target's columns refers to the target's primary key
            keys = [row[4] for row in rows] if all(row[4] for row in rows) else list(own.get(target, ()))
            if len(keys) == len(rows):
                foreign.append(ForeignKey(loaded[name.lower()], tuple(str(row[3]).lower() for row in rows),
                                          loaded[target], tuple(str(k).lower() for k in keys)))
    return DeclaredKeys(primary, tuple(foreign))


def _write_table(source: sqlite3.Connection, name: str, target: Path) -> None:
    cursor = source.execute(f"SELECT * FROM {quote(name, 'sqlite')}")
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([column[0] for column in cursor.description])
        while rows := cursor.fetchmany(_CHUNK):
            writer.writerows([_text(value) for value in row] for row in rows)


def _text_of(raw: bytes) -> str:
    """A TEXT value: UTF-8, or else Windows text, as a CSV file's (``table_files.windows_text``)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return windows_text(raw)


def _text(value: object) -> object:
    if isinstance(value, bytes):
        return value.hex()  # a BLOB: its bytes as hex text
    return "" if value is None else value
