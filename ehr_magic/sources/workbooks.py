"""Spreadsheet workbooks (.xlsx, .xlsm, .xls, .ods) in a folder of table files.

Each sheet that holds data is a table, read with fastexcel (calamine, in Rust) and written as a
parquet file beside the output, which the folder loader then loads and drafts like any other
file. A workbook with one such sheet is a table named for the file, as a CSV file would be; a
workbook with several gives one table per sheet, named for the sheet.

A sheet's header is its first row as wide as its data, so a title or a note above the header
('Extract of 2024-03-01') is not taken for the column names. Whole numbers are integers (a
spreadsheet stores every number as a float), and date-times that are all at midnight are dates.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from ehr_magic.errors import DataSourceError

if TYPE_CHECKING:
    from fastexcel import ExcelReader

SUFFIXES = (".xlsx", ".xlsm", ".xls", ".ods")
_HEADER_SEARCH_ROWS = 20  # rows read to find the header under any title lines
_LARGEST_EXACT_INTEGER = 2 ** 53  # a float64 holds every whole number up to here exactly


def is_workbook(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES)


def sheet_files(files: dict[str, Path], scratch: Path, name_of: Callable[[str], str],
                progress: Callable[[str], None] | None = None) -> tuple[dict[str, Path], dict[str, Path]]:
    """``files`` with each workbook replaced by its sheets' parquet files, written in ``scratch``
    (table -> file, in the same order), and the workbooks without any data (table -> workbook).
    ``name_of`` makes a sheet's name a table name."""
    tables: dict[str, Path] = {}
    empty: dict[str, Path] = {}
    for table, path in files.items():
        if not is_workbook(path):
            tables[table] = path
            continue
        if progress:
            progress(f"reading {path.name}")
        sheets = _read_sheets(path)
        if not sheets:
            empty[table] = path
            continue
        folder = scratch / f"{len(tables) + len(empty)}"
        folder.mkdir()
        for sheet, frame in sheets.items():
            name = table if len(sheets) == 1 else _sheet_table(sheet, path, table, name_of, files, tables)
            # The file's name is what drafting reads the table's words from ("Lab Results").
            written = folder / f"{path.name[:path.name.rfind('.')] if len(sheets) == 1 else sheet}.parquet"
            frame.write_parquet(written)
            tables[name] = written
    return tables, empty


def _sheet_table(sheet: str, path: Path, book: str, name_of: Callable[[str], str],
                 files: dict[str, Path], taken: dict[str, Path]) -> str:
    for name in (name_of(sheet), name_of(f"{book}_{sheet}")):
        if name not in taken and (name not in files or files[name] == path):
            return name
    raise DataSourceError(f"Sheet {sheet!r} of {path} would become table {name_of(sheet)}, which another "
                          "file or sheet already is; rename the sheet or the other file.")


def _read_sheets(path: Path) -> dict[str, pl.DataFrame]:
    """The sheets of ``path`` that hold data, as frames with the header as written."""
    import fastexcel

    try:
        reader = fastexcel.read_excel(path)
        sheets = {}
        for sheet in reader.sheet_names:
            header = _header_row(reader, sheet)
            if header is None:
                continue  # nothing in it
            frame = reader.load_sheet(sheet, header_row=header, schema_sample_rows=None).to_polars()
            sheets[sheet] = typed(_without_blank_columns(frame))
    except (fastexcel.FastExcelError, OSError, ValueError) as exc:
        reason = " ".join(str(exc).split())[:300]
        raise DataSourceError(f"Cannot read workbook {path} ({reason}); check that it opens in a spreadsheet "
                              "program, or export its sheets as CSV files.") from None
    return sheets


def _header_row(reader: ExcelReader, sheet: str) -> int | None:
    """The first row (0-based) as wide as the widest of the sheet's first rows; None when empty."""
    top = reader.load_sheet(sheet, header_row=None, n_rows=_HEADER_SEARCH_ROWS, dtypes="string").to_polars()
    if top.width == 0 or top.height == 0:
        return None
    filled = top.select(pl.sum_horizontal(pl.all().is_not_null() & (pl.all().str.strip_chars() != "")))
    widths = filled.to_series().to_list()
    widest = max(widths)
    return None if widest == 0 else widths.index(widest)


def _without_blank_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """Drop columns with neither a name nor a value (a sheet's formatting reaching past its data)."""
    blank = [name for name in frame.columns
             if name.startswith("__UNNAMED__") and frame.get_column(name).null_count() == frame.height]
    return frame.drop(blank)


def typed(frame: pl.DataFrame) -> pl.DataFrame:
    """Whole-number float columns as integers, midnight-only date-times as dates."""
    casts = []
    for name, dtype in frame.schema.items():
        column = frame.get_column(name).drop_nulls()
        if dtype == pl.Float64 and len(column) and whole_numbers(column):
            casts.append(pl.col(name).cast(pl.Int64))
        elif isinstance(dtype, pl.Datetime) and len(column) and at_midnight(column):
            casts.append(pl.col(name).cast(pl.Date))
    return frame.with_columns(casts) if casts else frame


def whole_numbers(column: pl.Series) -> bool:
    """Whether every value of a float column (without nulls) is a whole number a float holds exactly."""
    return bool(((column == column.round(0)) & (column.abs() < _LARGEST_EXACT_INTEGER)).all())


def at_midnight(column: pl.Series) -> bool:
    """Whether every value of a date-time column (without nulls) is at midnight: a date."""
    return bool((column == column.dt.truncate("1d")).all())
