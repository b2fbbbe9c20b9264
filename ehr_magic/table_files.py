"""How a table file is written: its text encoding, delimiter, decimal mark, quoting and header row.

Loading states these to DuckDB's CSV reader rather than letting it sniff them, and drafting reads
the header as written (``admitDateTime``, whose case tells its words apart).
"""

from __future__ import annotations

import codecs
import csv
import gzip
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from ehr_magic.identifiers import text_literal

# CSV, stated rather than sniffed: the sniffer can take a ragged file for a one-column one (or a
# header further down) and load it silently. The delimiter, the decimal mark, the quoting and the
# header's line are read from the file (``read_dialect``).
_OTHER_DELIMITERS = ";\t|"
_SAMPLE_BYTES = 1 << 16  # read to tell the text encoding, the delimiter and the decimal mark
_SAMPLE_LINES = 200
_PREAMBLE_LINES = 10  # lines a report's title and notes may take above its header row
_FOOTER_LINES = 5  # lines a report's footer may take below its last row ('(299 rows affected)')
_TAIL_BYTES = 1 << 13  # read from a file's end to find its footer
_NUMBER = re.compile(r"[-+]?\d+([.,]\d+)?")
_DECIMAL_COMMA = re.compile(r"[-+]?\d+,\d+")
_DECIMAL_POINT = re.compile(r"[-+]?\d+\.\d+")


# Windows "ANSI" text (code page 1252) is Latin-1 except for 0x80-0x9F, where it has the euro sign,
# curly quotes and dashes rather than control characters; the five bytes it leaves undefined keep
# their Latin-1 meaning. DuckDB reads neither, so such a file is read through a UTF-8 copy.
_UNDEFINED_IN_WINDOWS = "ehr-magic-latin-1"
_NOT_UTF8 = "ehr-magic-windows"


def _as_latin_1(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error  # only ever named for decoding
    return error.object[error.start:error.end].decode("latin-1"), error.end


def _as_windows_text(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error  # only ever named for decoding
    return windows_text(error.object[error.start:error.end]), error.end


codecs.register_error(_UNDEFINED_IN_WINDOWS, _as_latin_1)
codecs.register_error(_NOT_UTF8, _as_windows_text)
_COPY_CHUNK = 1 << 22


def windows_text(raw: bytes) -> str:
    """``raw`` read as Windows text (code page 1252, of which Latin-1 text is a part)."""
    return raw.decode("cp1252", errors=_UNDEFINED_IN_WINDOWS)


@dataclass(frozen=True)
class Dialect:
    """How a CSV file is written, as ``read_dialect`` finds it."""

    delimiter: str = ","
    decimal_comma: bool = False
    encoding: str = "utf-8"  # utf-8 or utf-16, which DuckDB reads, or windows (read through a UTF-8 copy)
    quoted: bool = True  # '"' may enclose a field; not in a file whose fields hold bare quotes
    header: tuple[str, ...] = ()  # the column names as the header row writes them (none: unreadable)
    skip: int = 0  # lines above the header row: a report's title and notes

    @property
    def options(self) -> str:
        """As read_csv options (of the UTF-8 copy, for Windows text)."""
        delimiter = "\\t" if self.delimiter == "\t" else self.delimiter
        quote = "quote='\"', escape='\"'" if self.quoted else "quote='', escape=''"
        decimal = ", decimal_separator=','" if self.decimal_comma else ""
        encoding = ", encoding='utf-16'" if self.encoding == "utf-16" else ""
        return (f"header=true, delim='{delimiter}', {quote}, skip={self.skip}, strict_mode=true, "
                f"null_padding=false{decimal}{encoding}")


def read_dialect(path: Path) -> Dialect:
    """How ``path`` is written. Its text is UTF-8, or UTF-16 after that encoding's byte order mark
    (a spreadsheet's "Unicode text"), or else Windows text (an older export's 'Müller' or '€ 5').
    Fields are separated by commas unless its header row has none, then by whichever of ';', tab or
    '|' splits it most (spreadsheet exports in many countries use ';' with decimal commas); where
    fields are not separated by commas, numbers written with a decimal comma ('70,5') are read as
    numbers, and a field that starts with a quote it does not close ('"Elderly" patient' in a
    tab-separated vocabulary export) means the file does not quote its fields."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read(_SAMPLE_BYTES)
    except (OSError, EOFError, zlib.error):
        return Dialect()  # unreadable: DuckDB's read says why
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding, text = "utf-16", raw[:len(raw) // 2 * 2].decode("utf-16", errors="replace")
    else:
        try:  # a character cut at the sample's end is no error
            text = codecs.getincrementaldecoder("utf-8-sig")().decode(raw, final=False)
            encoding = "utf-8"
        except UnicodeDecodeError:
            encoding, text = "windows", windows_text(raw)
    numbered = [(i, line) for i, line in enumerate(text.splitlines(keepends=True)[:_SAMPLE_LINES]) if line.strip()]
    if len(raw) == _SAMPLE_BYTES:
        numbered = numbered[:-1]  # cut off by the sample
    lines = [line for _, line in numbered]
    first = _dialect_of(lines, encoding)
    if _fits_rows(first, lines) and _filled(first.header) > 1:
        return first
    # A report's title and notes above its header row (a spreadsheet pads them with delimiters: 'Ward
    # census;;'): the header is the first line as wide as the rows under it, with no number in it,
    # below lines with fewer fields filled.
    for start in range(1, min(_PREAMBLE_LINES, len(lines) - 1)):
        found = _dialect_of(lines[start:], encoding)
        above = [_filled(_fields(found, line)) for line in lines[:start]]
        if (_fits_rows(found, lines[start:]) and max(above) < len(found.header)
                and _filled(found.header) > 1 and not any(_NUMBER.fullmatch(name.strip()) for name in found.header)):
            return replace(found, skip=numbered[start][0])
    return first


def _dialect_of(lines: list[str], encoding: str) -> Dialect:
    """The dialect of ``lines``, whose first is the header row."""
    header = tuple(next(csv.reader(lines[:1]), []))
    if len(header) != 1:
        return Dialect(encoding=encoding, header=header)
    headers = {d: tuple(next(csv.reader(lines[:1], delimiter=d), [])) for d in _OTHER_DELIMITERS}
    delimiter = max(_OTHER_DELIMITERS, key=lambda d: len(headers[d]))
    if len(headers[delimiter]) == 1:
        return Dialect(encoding=encoding, header=header)  # one column
    bare = [line.rstrip("\r\n").split(delimiter) for line in lines]
    quoted = not (all(len(row) == len(headers[delimiter]) for row in bare)
                  and any(f.startswith('"') and not (len(f) > 1 and f.endswith('"')) for row in bare for f in row))
    rows = csv.reader(lines[1:], delimiter=delimiter) if quoted else bare[1:]
    fields = [f.strip() for row in rows for f in row]
    comma = any(_DECIMAL_COMMA.fullmatch(f) for f in fields) and not any(_DECIMAL_POINT.fullmatch(f) for f in fields)
    return Dialect(delimiter, comma, encoding, quoted, headers[delimiter] if quoted else tuple(bare[0]))


def _fits_rows(dialect: Dialect, lines: list[str]) -> bool:
    """Whether the rows under the header (``lines[0]``) mostly have as many fields as it has (two or more)."""
    width = len(dialect.header)
    if width < 2:
        return False
    if dialect.quoted:
        counts = [len(row) for row in csv.reader(lines[1:], delimiter=dialect.delimiter) if row]
    else:
        counts = [len(_fields(dialect, line)) for line in lines[1:]]
    return not counts or Counter(counts).most_common(1)[0][0] == width


def _fields(dialect: Dialect, line: str) -> list[str]:
    if dialect.quoted:
        return next(csv.reader([line], delimiter=dialect.delimiter), [])
    return line.rstrip("\r\n").split(dialect.delimiter)


def _filled(fields: Sequence[str]) -> int:
    return sum(1 for field in fields if field.strip())


@dataclass(frozen=True)
class Footer:
    """A report's lines below its last row: where they start (a byte offset) and what they say."""

    start: int
    text: str


def footer(path: Path, dialect: Dialect) -> Footer | None:
    """The footer of a plain (not gzipped) UTF-8 or Windows-text file: its last few lines with at
    most half as many fields as the header (no more than one for a narrow header), blank lines
    among them, and words in them, such as a query tool's '(299 rows affected)' or a report's
    'Total: 299'. A last row with as many fields as the header is data, whatever it holds."""
    width = len(dialect.header)
    if width < 2 or dialect.encoding == "utf-16" or path.name.lower().endswith(".gz"):
        return None
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read()
    except OSError:
        return None
    lines = tail.split(b"\n")
    if size > len(tail):
        lines = lines[1:]  # the first is cut by where the tail starts
    start, found, said = size, 0, []
    for line in reversed(lines):
        text = windows_text(line) if dialect.encoding == "windows" else line.decode("utf-8", errors="replace")
        if text.strip():
            if len(_fields(dialect, text)) > max(1, width // 2) or found == _FOOTER_LINES:
                break
            found += 1
            said.append(text.strip())
        start -= len(line) + 1
    if not found or start <= 0 or not any(re.search(r"[^\W\d_]", line) for line in said):
        return None  # a lone number is a ragged row, not a report's words
    return Footer(start + 1, " / ".join(reversed(said)))  # + 1: the last row keeps its line break


def write_head(path: Path, copy: Path, end: int) -> None:
    """Write the first ``end`` bytes of ``path`` to ``copy``."""
    with open(path, "rb") as source, open(copy, "wb") as target:
        left = end
        while left > 0 and (block := source.read(min(_COPY_CHUNK, left))):
            target.write(block)
            left -= len(block)


def is_parquet(path: Path) -> bool:
    """A parquet file, or a folder of parquet parts (``is_parquet_dataset``)."""
    return path.name.lower().endswith(".parquet") or path.is_dir()


def parquet_parts(folder: Path) -> list[Path]:
    """The parquet files anywhere below ``folder``, as Spark, Hive, pyarrow or polars write one
    table's parts (``year=2020/part-0.parquet``); not under a name starting with '_' or '.', which
    is their bookkeeping (``_SUCCESS``, ``_temporary``, ``.part-0.parquet.crc``)."""
    return sorted(path for path in folder.rglob("*.parquet")
                  if path.is_file() and not any(part.startswith(("_", "."))
                                                for part in path.relative_to(folder).parts))


def parquet_reader(path: Path) -> str:
    """The DuckDB table function that reads a parquet file or a folder of parts (the folder names
    of a partitioned table, ``year=2020``, as columns)."""
    if not path.is_dir():
        return "read_parquet(" + text_literal(str(path)) + ")"
    files = ", ".join(text_literal(str(part)) for part in parquet_parts(path))
    return f"read_parquet([{files}], hive_partitioning=true, union_by_name=true)"


_OTHER_TABLE_FILES = (".csv", ".csv.gz", ".tsv", ".tsv.gz")


def is_parquet_dataset(folder: Path) -> bool:
    """Whether ``folder`` holds the parts of one table: parquet files (and no other table files)
    with the same columns. A folder of different tables (MIMIC-IV's hosp/ in parquet) is not one."""
    parts = parquet_parts(folder)
    if not parts or (folder / "_delta_log").is_dir() or any(
            path.name.lower().endswith(_OTHER_TABLE_FILES) for path in folder.iterdir()):
        return False
    listed = ", ".join(text_literal(str(part)) for part in parts)
    try:
        shapes = duckdb.execute(f"SELECT count(DISTINCT columns) FROM (SELECT file_name, list(name ORDER BY name) "
                                f"AS columns FROM parquet_schema([{listed}]) GROUP BY file_name)").fetchall()
    except duckdb.Error:
        return False  # an unreadable part: not taken for a table
    return shapes[0][0] == 1


def written_header(path: Path) -> list[str]:
    """The column names of a table file as its header row writes them (``admitDateTime``); none
    for a file that cannot be read (loading it says why)."""
    if is_parquet(path):
        try:
            described = duckdb.execute(f"SELECT * FROM {parquet_reader(path)} LIMIT 0").description or []
        except duckdb.Error:
            return []
        return [str(column[0]) for column in described]
    return [name.strip() for name in read_dialect(path).header]


def header_row(path: Path) -> list[str]:
    """The column names of a table file, lower case, as loading names them."""
    return [name.lower() for name in written_header(path)]


def is_blank(path: Path) -> bool:
    """Whether a CSV file holds nothing at all, not even a header row (a parquet file always
    has its columns)."""
    if is_parquet(path):
        return False
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as handle:
            return not any(line.strip() for line in handle)
    except (OSError, EOFError, zlib.error):
        return False  # unreadable: loading it says why


def write_utf8_copy(path: Path, copy: Path, *, utf8_start: bool) -> None:
    """Write the text of ``path`` to ``copy`` as UTF-8, line for line (so the line numbers of
    errors stay true). Text that is not UTF-8 is read as Windows text; after a UTF-8 start only
    the bytes that are not UTF-8 are, since that part was written as UTF-8."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as source, open(copy, "wb") as target:
        while block := source.read(_COPY_CHUNK):
            if utf8_start:
                block += source.readline()  # a character is never cut in two
                target.write(block.decode("utf-8", errors=_NOT_UTF8).encode())
            else:
                target.write(windows_text(block).encode())  # one byte a character: no cut to mind
