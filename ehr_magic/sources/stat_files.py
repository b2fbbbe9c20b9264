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
a double). A file of more than 256 MB is read in chunks, twice: once to decide the types and
labels on all of its rows, once to write them, so that memory holds one chunk.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl

from ehr_magic.engines.base import Comments
from ehr_magic.errors import DataSourceError
from ehr_magic.sources.workbooks import at_midnight, whole_numbers

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
        folder = scratch / f"stat-{len(tables)}"
        folder.mkdir()
        # the file's name is what drafting reads the table's words from
        tables[table] = folder / f"{path.name[:path.name.rfind('.')]}.parquet"
        said = write_parquet(path, tables[table])
        if said.table or said.columns:
            comments[table] = said
    return tables, comments


def write_parquet(path: Path, out: Path) -> Comments:
    """Write the data of ``path`` to ``out`` (a parquet file, or for a file bigger than
    ``WHOLE_FILE_BYTES`` a folder of parquet parts, read in chunks of ``CHUNK_ROWS`` rows so that
    memory holds one chunk), value labels applied where every value has one; and what its labels
    say of it. Types and labels are decided on the whole file first."""
    if path.stat().st_size <= WHOLE_FILE_BYTES:
        frame, meta = _read(path)
        plan = _Plan(meta)
        plan.see(frame)
        plan.apply(frame).write_parquet(out)
        return plan.comments()
    _, meta = _read(path, metadataonly=True)
    plan = _Plan(meta)
    for chunk in _chunks(path):
        plan.see(chunk)
    out.mkdir()
    for i, chunk in enumerate(_chunks(path)):
        plan.apply(chunk).write_parquet(out / f"part-{i:05d}.parquet")
    return plan.comments()


WHOLE_FILE_BYTES = 256 << 20  # a file up to this size is read at once
CHUNK_ROWS = 500_000  # rows of a bigger file read at a time
_READERS = {".sas7bdat": "read_sas7bdat", ".xpt": "read_xport", ".dta": "read_dta", ".sav": "read_sav",
            ".zsav": "read_sav", ".por": "read_por"}


def _reader(path: Path) -> Callable[..., Any]:
    import pyreadstat

    return getattr(pyreadstat, _READERS[next(s for s in SUFFIXES if path.name.lower().endswith(s))])


def _read(path: Path, **options: Any) -> tuple[pl.DataFrame, Any]:
    with _readable(path):
        return _reader(path)(str(path), output_format="polars", **options)


def _chunks(path: Path) -> Iterator[pl.DataFrame]:
    import pyreadstat

    with _readable(path):
        for frame, _ in pyreadstat.read_file_in_chunks(_reader(path), str(path), chunksize=CHUNK_ROWS,
                                                       output_format="polars"):
            yield frame


@contextlib.contextmanager
def _readable(path: Path) -> Iterator[None]:
    """The reader's failures as one sentence for the user."""
    import pyreadstat

    try:
        yield
    except (pyreadstat.ReadstatError, pyreadstat.PyreadstatError, OSError, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split())[:300]
        raise DataSourceError(f"Cannot read {path} ({reason}); check that it opens in the program that wrote it, "
                              "or export it as a CSV file.") from None


class _Plan:
    """What a file's columns become, decided on all of its rows (``see`` each part, then ``apply``):
    blank text missing, labels in place of codes where every value has one, whole numbers as
    integers and midnight-only date-times as dates, names in lower case."""

    def __init__(self, meta: Any) -> None:
        self.meta = meta
        self.codes = {name: codes for name, codes in (meta.variable_value_labels or {}).items() if codes}
        self.filled: set[str] = set()  # columns with a value
        self.unlabelled: set[str] = set()  # labelled columns holding a value without a label
        self.not_whole: set[str] = set()  # float columns holding a fraction (or a number too big for an integer)
        self.not_midnight: set[str] = set()  # date-time columns holding a time of day

    def see(self, frame: pl.DataFrame) -> None:
        frame = _without_blank_text(frame)
        for name, dtype in frame.schema.items():
            column = frame.get_column(name).drop_nulls()
            if not len(column):
                continue
            self.filled.add(name)
            if name in self.codes:
                known = {_key(code) for code in self.codes[name]}
                if any(_key(value) not in known for value in column.unique().to_list()):
                    self.unlabelled.add(name)
            if dtype == pl.Float64 and not whole_numbers(column):
                self.not_whole.add(name)
            elif isinstance(dtype, pl.Datetime) and not at_midnight(column):
                self.not_midnight.add(name)

    def labelled(self, name: str) -> bool:
        """Whether ``name`` holds labels in place of its codes: every value has one."""
        return name in self.codes and name in self.filled and name not in self.unlabelled

    def apply(self, frame: pl.DataFrame) -> pl.DataFrame:
        frame = _without_blank_text(frame)
        changes = []
        for name, dtype in frame.schema.items():
            if self.labelled(name):
                by_key = {_key(code): label for code, label in self.codes[name].items()}
                present = frame.get_column(name).drop_nulls().unique().to_list()
                mapping = {value: by_key[_key(value)] for value in present}
                changes.append(pl.col(name).replace_strict(mapping, default=None, return_dtype=pl.String))
            elif dtype == pl.Float64 and name in self.filled and name not in self.not_whole:
                changes.append(pl.col(name).cast(pl.Int64))
            elif isinstance(dtype, pl.Datetime) and name in self.filled and name not in self.not_midnight:
                changes.append(pl.col(name).cast(pl.Date))
        frame = frame.with_columns(changes) if changes else frame
        return frame.rename(self.names(frame.columns))

    def names(self, columns: list[str]) -> dict[str, str]:
        """Column names as loading lower-cases them, a later one equal to an earlier but for case
        numbered (Stata's ``ID`` beside ``id``: ``id_1``): old name -> new name."""
        names: dict[str, str] = {}
        taken: set[str] = set()
        for name in columns:
            new, n = name.lower(), 0
            while new in taken:
                n += 1
                new = f"{name.lower()}_{n}"
            taken.add(new)
            names[name] = new
        return names

    def comments(self) -> Comments:
        """The dataset's label, and each column's label with its value labels said."""
        labels = {name: text for name, text in (self.meta.column_names_to_labels or {}).items() if text}
        for name, codes in self.codes.items():
            shown = sorted(codes.items(), key=lambda item: (isinstance(item[0], str), item[0]))
            listed = ", ".join(f"{_code(code)} {label}" for code, label in shown[:SHOWN_LABELS])
            more = f" and {len(codes) - SHOWN_LABELS} more" if len(codes) > SHOWN_LABELS else ""
            said = (f"Stored as labels; the codes: {listed}{more}." if self.labelled(name)
                    else f"Labelled codes: {listed}{more}.")
            labels[name] = f"{labels[name].rstrip('. ')}. {said}" if labels.get(name) else said
        names = self.names(list(self.meta.column_names))
        return Comments((self.meta.file_label or "").strip(), {names[n]: t for n, t in labels.items() if n in names})


def _without_blank_text(frame: pl.DataFrame) -> pl.DataFrame:
    texts = [name for name, dtype in frame.schema.items() if dtype == pl.String]
    return frame.with_columns(pl.when(pl.col(t).str.strip_chars() != "").then(pl.col(t)).alias(t) for t in texts)


def _key(code: Any) -> Any:
    """A code as one value whatever its type (1, 1.0 and '1' stay apart only as text and number)."""
    return float(code) if isinstance(code, (int, float)) and not isinstance(code, bool) else code


def _code(code: Any) -> str:
    if isinstance(code, float) and code.is_integer():
        return str(int(code))
    return repr(code) if isinstance(code, str) else str(code)
