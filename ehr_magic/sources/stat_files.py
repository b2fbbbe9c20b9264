"""Files of statistics packages in a folder of table files: SAS (.sas7bdat, .xpt), Stata (.dta)
and SPSS (.sav, .zsav, .por).

Research extracts, registries and trial data often come this way. Each file is a table, read
with pyreadstat (the ReadStat C library) and written as a parquet file beside the output, which
the folder loader then loads and drafts like any other file. Their labels are the documentation
such data carries, and become the table's and columns' comments for the drafter
(``engines.base.Comments``, as a database's ``COMMENT ON`` does):

- the dataset's label describes its table, each variable's label its column;
- a column whose every value has a value label holds the labels ('Female', not 2), its codes
  said in its description; a column only some of whose values have one (an age with 777
  Refused) keeps its numbers, the labelled codes said in its description. (SAS keeps value
  labels apart, in a format catalog, which is not read: its columns keep their codes.)

Text left blank (how SAS and Stata store a missing text) is missing. Whole numbers are integers
and date-times all at midnight are dates, as in a workbook (these packages store every number as
a double).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from ehr_magic.engines.base import Comments
from ehr_magic.errors import DataSourceError
from ehr_magic.sources.workbooks import typed

SUFFIXES = (".sas7bdat", ".xpt", ".dta", ".sav", ".zsav", ".por")
SHOWN_LABELS = 12  # value labels written into a column's description, at most


def is_stat_file(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES)


def converted_files(files: dict[str, Path], scratch: Path, progress: Callable[[str], None] | None = None
                    ) -> tuple[dict[str, Path], dict[str, Comments]]:
    """``files`` with each statistics-package file replaced by a parquet copy written in
    ``scratch`` (table -> file, in the same order), and the comments its labels give (table ->
    ``Comments``, with the columns named as loading names them: lower case)."""
    tables: dict[str, Path] = {}
    comments: dict[str, Comments] = {}
    for table, path in files.items():
        if not is_stat_file(path):
            tables[table] = path
            continue
        if progress:
            progress(f"reading {path.name}")
        frame, said = read_stat_file(path)
        folder = scratch / f"stat-{len(tables)}"
        folder.mkdir()
        # the file's name is what drafting reads the table's words from
        written = folder / f"{path.name[:path.name.rfind('.')]}.parquet"
        frame.write_parquet(written)
        tables[table] = written
        if said.table or said.columns:
            comments[table] = said
    return tables, comments


def read_stat_file(path: Path) -> tuple[pl.DataFrame, Comments]:
    """The data of ``path`` with value labels applied where every value has one, and what its labels
    say of it."""
    import pyreadstat

    reader = _READERS[next(s for s in SUFFIXES if path.name.lower().endswith(s))]
    try:
        frame, meta = getattr(pyreadstat, reader)(str(path), output_format="polars")
    except (pyreadstat.ReadstatError, pyreadstat.PyreadstatError, OSError, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split())[:300]
        raise DataSourceError(f"Cannot read {path} ({reason}); check that it opens in the program that wrote it, "
                              "or export it as a CSV file.") from None
    frame = _without_blank_text(frame)
    labels = {name: text for name, text in (meta.column_names_to_labels or {}).items() if text}
    for name, codes in (meta.variable_value_labels or {}).items():
        if name not in frame.columns or not codes:
            continue
        frame, said = _labelled(frame, name, codes)
        labels[name] = f"{labels[name].rstrip('. ')}. {said}" if labels.get(name) else said
    frame, names = _distinct_lower_names(typed(frame))
    return frame, Comments((meta.file_label or "").strip(), {names[n]: t for n, t in labels.items() if n in names})


_READERS = {".sas7bdat": "read_sas7bdat", ".xpt": "read_xport", ".dta": "read_dta", ".sav": "read_sav",
            ".zsav": "read_sav", ".por": "read_por"}


def _without_blank_text(frame: pl.DataFrame) -> pl.DataFrame:
    texts = [name for name, dtype in frame.schema.items() if dtype == pl.String]
    return frame.with_columns(pl.when(pl.col(t).str.strip_chars() != "").then(pl.col(t)).alias(t) for t in texts)


def _labelled(frame: pl.DataFrame, name: str, codes: dict[Any, str]) -> tuple[pl.DataFrame, str]:
    """``frame`` with ``name``'s codes replaced by their labels when every value has one, and the
    sentence saying the codes."""
    column = frame.get_column(name)
    present = column.drop_nulls().unique().to_list()
    known = {_key(code) for code in codes}
    shown = sorted(codes.items(), key=lambda item: (isinstance(item[0], str), item[0]))
    listed = ", ".join(f"{_code(code)} {label}" for code, label in shown[:SHOWN_LABELS])
    more = f" and {len(codes) - SHOWN_LABELS} more" if len(codes) > SHOWN_LABELS else ""
    if present and all(_key(value) in known for value in present):
        by_key = {_key(code): label for code, label in codes.items()}
        mapping = {value: by_key[_key(value)] for value in present}
        frame = frame.with_columns(column.replace_strict(mapping, return_dtype=pl.String).alias(name))
        return frame, f"Stored as labels; the codes: {listed}{more}."
    return frame, f"Labelled codes: {listed}{more}."


def _key(code: Any) -> Any:
    """A code as one value whatever its type (1, 1.0 and '1' stay apart only as text and number)."""
    return float(code) if isinstance(code, (int, float)) and not isinstance(code, bool) else code


def _code(code: Any) -> str:
    if isinstance(code, float) and code.is_integer():
        return str(int(code))
    return repr(code) if isinstance(code, str) else str(code)


def _distinct_lower_names(frame: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, str]]:
    """Column names as loading lower-cases them, a later one equal to an earlier but for case
    numbered (Stata's ``ID`` beside ``id``: ``id_1``), and the old name -> new name."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for name in frame.columns:
        new, n = name.lower(), 0
        while new in taken:
            n += 1
            new = f"{name.lower()}_{n}"
        taken.add(new)
        names[name] = new
    return frame.rename(names), names
