"""Masking patient-level values in text that goes back to the model.

Two strengths, both keeping the structure of the text:

* ``loose`` (error messages from libraries): quoted strings, numbers, dates and times are
  replaced by ``'<value>'``, ``<n>`` and ``<date>``; words stay, because library messages
  are mostly fixed English and their data values are quoted.
* ``strict`` (printed output, and errors the generated code raised itself with ``raise``
  or ``assert``): every word is masked too, unless the model could already know it.

What the model already knows is never masked: tokens of the code it wrote (a filter value,
an alias, a number in the SQL), table and column names, type names, and in quoted form
the values of dictionary columns (lab, drug and diagnosis names). Rendered polars tables
and series are reduced to their shape, column names and types; at the ``aggregates``
level, tables with a count column are shown with counts under 11 suppressed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

SMALL_CELL = 11
HIDDEN = "<value>"
_DATE = r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?|\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"
_NUMBER = r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])"
_QUOTED = r"'[^'\n]{0,300}'|\"[^\"\n]{0,300}\""
_WORD = r"[^\W\d][\w-]*"
_LOOSE = re.compile(f"(?P<date>{_DATE})|(?P<quoted>{_QUOTED})|(?P<number>{_NUMBER})")
_STRICT = re.compile(f"(?P<date>{_DATE})|(?P<quoted>{_QUOTED})|(?P<number>{_NUMBER})|(?P<word>{_WORD})")
_STRUCTURAL_BEFORE = re.compile(r"\b(line|column|Col:|position)\s*$", re.IGNORECASE)
_TYPE_WORDS = frozenset("""
str string utf8 i8 i16 i32 i64 i128 u8 u16 u32 u64 f16 f32 f64 bool boolean date datetime time duration null object
list array struct categorical enum decimal binary int float complex bytes none nan inf true false dict tuple set
varchar bigint integer smallint tinyint hugeint ubigint uinteger double real timestamp timestamp_ns timestamp_ms
timestamp_s timestamptz interval blob uuid json int8 int16 int32 int64 int128 uint8 uint16 uint32 uint64 float32 float64
dataframe lazyframe series expr ns us ms μs
""".split())
_STRUCTURAL = frozenset("""
shape rows row columns column value values the a an of in to and or not is are was were no none null nan inf true false
len count literal index sum mean min max median std var first last answer error printed output type dtype schema
description examples example
""".split())
ROWS_HIDDEN = "[rows not shown: the privacy level keeps patient-level values from the model]"
_RUN = re.compile(r"(?P<item>'<value>'|\"<value>\"|<value>|<n>|<date>|\('<value>',\)|\(<n>,\))(?:, (?P=item)){3,}")
_TABLE_TOP, _TABLE_HEAD_END, _TABLE_BOTTOM = "┌", "╞", "└"
_COUNT_NAME = re.compile(r"^(n|cnt|count|counts|num|number|total|freq|frequency|len|size|n_\w+|num_\w+|number_of_\w+|"
                         r"count_\w+|\w+_count|\w+_counts|\w+_cnt|\w+_n|\w+_num|total_\w+|\w+_total|count\(.*\)|"
                         r"count_star\(\))$", re.IGNORECASE)
_INTEGER_TYPE = re.compile(r"^(i|u)(8|16|32|64|128)$|^(u?int\d*|bigint|integer|smallint|tinyint|hugeint|ubigint)$",
                           re.IGNORECASE)


@dataclass
class Known:
    """What the model may see unmasked: its own code's tokens, names, types, vocabulary."""

    code: str = ""
    names: frozenset[str] = frozenset()
    vocabulary: Callable[[], frozenset[str]] | None = None

    def __post_init__(self) -> None:
        self.code_tokens = set(re.findall(r"[^\W\d][\w-]*|\d+(?:\.\d+)?", self.code))
        self._vocabulary: frozenset[str] | None = None

    def word(self, word: str) -> bool:
        lowered = word.lower()
        return (word in self.code_tokens or lowered in self.names or lowered in _TYPE_WORDS
                or lowered in _STRUCTURAL)

    def column(self, name: str) -> bool:
        """A column name of a result: a known name, a count (n, count...) or an SQL expression
        such as ``count_star()``; other names may be data values (a pivot) and are hidden."""
        return self.text(name) or self.word(name) or bool(_COUNT_NAME.match(name)) or "(" in name

    def number(self, number: str) -> bool:
        return number.lstrip("+-") in self.code_tokens

    def text(self, value: str) -> bool:
        """A quoted string, or a whole cell: in the code, a name, a type or a vocabulary value."""
        if value.strip() == "" or value.lower() in self.names or value.lower() in _TYPE_WORDS:
            return True
        if self.code and re.search(r"(?<![\w])" + re.escape(value) + r"(?![\w])", self.code):
            return True
        return value in self.vocabulary_values()

    def vocabulary_values(self) -> frozenset[str]:
        if self._vocabulary is None:
            self._vocabulary = self.vocabulary() if self.vocabulary else frozenset()
        return self._vocabulary


def mask_text(text: str, known: Known, *, strict: bool, aggregates: bool = False) -> str:
    """Mask ``text``; rendered tables and series are summarised first."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(_TABLE_TOP):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(_TABLE_BOTTOM)), None)
            if end is not None:
                out.extend(_table(lines[i:end + 1], known, aggregates))
                i = end + 1
                continue
        if stripped.startswith("Series: ") and i + 1 < len(lines) and lines[i + 1].strip() == "[":
            end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "]"), len(lines) - 1)
            out.append(_line(line, known, strict=True))
            out.append(ROWS_HIDDEN)
            i = end + 1
            continue
        echo = re.match(r"^(\s*LINE \d+:)(.*)$", line)  # DuckDB repeats the failing query line
        if echo:
            out.append(echo.group(1) + _line(echo.group(2), known, strict=True, code_numbers=True))
        else:
            out.append(_line(line, known, strict=strict))
        i += 1
    result = "\n".join(out)
    return result + ("\n" if text.endswith("\n") else "")


def _line(line: str, known: Known, *, strict: bool, code_numbers: bool | None = None) -> str:
    """Mask one line. Numbers that occur in the code stay when ``code_numbers`` (default: in
    loose mode, and in DuckDB's echo of the query, which repeats the code)."""
    code_numbers = not strict if code_numbers is None else code_numbers
    if line.lstrip().startswith("shape: ("):
        return line
    pattern = _STRICT if strict else _LOOSE
    pieces: list[str] = []
    last = 0
    for match in pattern.finditer(line):
        pieces.append(line[last:match.start()])
        pieces.append(_replace(match, line, known, strict, code_numbers))
        last = match.end()
    pieces.append(line[last:])
    masked = "".join(pieces)
    # "<value> <value> <value>" -> "<value>": the number of hidden words is itself information
    masked = re.sub(rf"{re.escape(HIDDEN)}(?:[ \t;.-]+{re.escape(HIDDEN)})+", HIDDEN, masked)
    # "[<n>, <n>, <n>, ...]" -> "[<n> (x90)]"
    return _RUN.sub(lambda m: f"{m.group('item')} (x{m.group(0).count(m.group('item'))})", masked)


def _replace(match: re.Match[str], line: str, known: Known, strict: bool, code_numbers: bool) -> str:
    value = match.group(0)
    kind = match.lastgroup
    if kind == "date":
        return value if value in known.code else "<date>"
    if kind == "quoted":
        inner = value[1:-1]
        return value if known.text(inner) else f"{value[0]}{HIDDEN}{value[-1]}"
    if kind == "number":
        # Error messages echo the code (LINE 1: ... LIMIT 10): its numbers stay. Printed output does not,
        # and a small number from the code would otherwise let the same number in the data through.
        if code_numbers and known.number(value) or not strict and _STRUCTURAL_BEFORE.search(line[:match.start()]):
            return value
        return "<n>"
    return value if known.word(value) else HIDDEN


# -- rendered polars tables ----------------------------------------------------------------------


def _cells(row: str) -> list[str]:
    body = row.strip()
    if body.startswith("│"):
        body = body[1:]
    if body.endswith("│"):
        body = body[:-1]
    return [c.strip() for c in body.split("┆")]


def _table(block: list[str], known: Known, aggregates: bool) -> list[str]:
    head_end = next((k for k, line in enumerate(block) if line.strip().startswith(_TABLE_HEAD_END)), None)
    if head_end is None:
        return ["[a table, not shown]"]
    header_rows = [_cells(line) for line in block[1:head_end] if line.strip().startswith("│")]
    dashes = next((k for k, cells in enumerate(header_rows) if cells and all(set(c) <= {"-"} for c in cells)), None)
    if dashes is None:
        names, types = header_rows[0] if header_rows else [], []
    else:
        names = [" ".join(parts).strip() for parts in zip(*header_rows[:dashes])] if dashes else []
        types = [" ".join(parts).strip() for parts in zip(*header_rows[dashes + 1:])]
    rows = [_cells(line) for line in block[head_end + 1:-1] if line.strip().startswith("│")]
    shown_names = [n if known.column(n) else HIDDEN for n in names]
    if aggregates and any(is_count_column(n, t) for n, t in zip(names, types)):
        return aggregate_rows(names, types, rows, known)
    columns = ", ".join(f"{n} ({t})" if t else n for n, t in zip(shown_names, types or [""] * len(names)))
    return [f"columns: {columns}", ROWS_HIDDEN]


def is_count_column(name: str, dtype: str) -> bool:
    """A column holding counts: an integer column named n, count, *_count, len..."""
    return bool(_COUNT_NAME.match(name.strip())) and bool(_INTEGER_TYPE.match(dtype.strip().lower()))


def is_identifier_column(name: str) -> bool:
    lowered = name.lower()
    return lowered.endswith(("_id", "stayid", "pid")) and lowered not in ("itemid",)


def suppress(names: list[str], types: list[str], rows: Iterable[list[Any]], known: Known) -> list[list[str]]:
    """Small-cell suppression of an aggregated table given as cell values.

    Count cells from 1 to 10 become ``<11`` and every other cell of such a row is hidden
    (unless it is a dictionary value); identifier and timestamp columns are always hidden.
    """
    counts = [k for k, (n, t) in enumerate(zip(names, types)) if is_count_column(n, t)]
    out = []
    for row in rows:
        cells = ["null" if v is None else str(v) for v in row]
        small = False
        for k in counts:
            try:
                value = int(cells[k])
            except (ValueError, IndexError):
                continue
            if 0 < value < SMALL_CELL:
                small = True
                cells[k] = f"<{SMALL_CELL}"
        for k, cell in enumerate(cells):
            if k in counts or cell in ("null", "…"):
                continue
            name, dtype = names[k] if k < len(names) else "", types[k] if k < len(types) else ""
            always_hidden = is_identifier_column(name) or dtype.lower().startswith(
                ("datetime", "timestamp", "list", "struct", "array", "object"))
            if always_hidden or small and not _dictionary_cell(cell, known):
                cells[k] = HIDDEN
        out.append(cells)
    return out


def _dictionary_cell(cell: str, known: Known) -> bool:
    value = cell[1:-1] if len(cell) >= 2 and cell[0] == cell[-1] == '"' else cell
    return value in known.vocabulary_values()


def aggregate_rows(names: list[str], types: list[str], rows: list[list[Any]], known: Known,
                   limit: int = 50) -> list[str]:
    shown_names = [n if known.column(n) else HIDDEN for n in names]
    lines = [" | ".join(shown_names), " | ".join(types)]
    lines += [" | ".join(cells) for cells in suppress(names, types, rows[:limit], known)]
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more rows")
    lines.append(f"(counts under {SMALL_CELL} are suppressed)")
    return lines
