"""Profiles of loaded tables: what each column holds, measured with DuckDB SQL.

One scan per table gives counts, approximate distinct counts (HyperLogLog) and ranges;
text shapes (letters, spaces, identifier-like tokens, numbers kept as text) are measured
on a sample of big tables, so the cost stays bounded. Exact distinct counts are taken only
where a decision rests on them: candidate keys and short value lists.

A table of more than ``PROFILE_SAMPLE`` rows is profiled on a sample of about that many
(whole blocks of rows, a fixed seed: the same rows every time), so the cost of drafting a
database does not grow with its size: counts are scaled to the table's, a column unique in
the sample is taken for a candidate key, and only the row count and the ranges (the clock
rests on the latest time) are read from the whole table, one cheap scan.

Ids stored as floating-point numbers (``DOUBLE``, as some exports type them) whose values
are all whole and whose names say "id" are ids: ``integer`` holds, and ``as_key`` compares
them as the integers they are, so they match integer keys.

Keys come from values. A unique, never-empty column is a candidate key; a row number
(a dense 0..n-1 or 1..n sequence, or a column named like one) is the key only when no
other candidate exists, and it is never a join target.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import duckdb

from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.knowledge.drafting import naming
from ehr_magic.text import split_words

VALUE_LIST_MAX = 15  # at most this many distinct values make a value list
EXAMPLES = 4  # values kept of a code column that lists none (its description shows what fits)
VOCABULARY_MAX = 5000  # distinct values of a repeated-term column worth a lookup
SHAPE_SAMPLE = 200_000  # rows of a big table on which text shapes are measured
PROFILE_SAMPLE = 200_000  # rows of a bigger table on which it is profiled (see the module docstring)
EXACT_COUNTS_PER_SCAN = 4  # exact distinct counts taken in one scan of a table (see _profile)
SAMPLE_TABLE = "_draft_sample"  # the temporary table holding that sample while its table is profiled
_TEXT = ("VARCHAR",)
_INTEGER = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")
_NUMBER = (*_INTEGER, "FLOAT", "DOUBLE", "REAL")
# Personal data: never shown as values, never offered for lookup.
_PERSONAL_PARTS = ("name", "ssn", "passport", "address", "phone", "email", "birthplace", "street", "license")
_PERSONAL_WORDS = {"first", "last", "maiden", "drivers", "zip", "zipcode", "postcode", "postal", "city", "county",
                   "lat", "lon", "latitude", "longitude", "mrn", "memberid", "fax", "ip"}
_ORDINAL_WORDS = {"first", "last"}  # a name alone ('FIRST'), or an ordinal with a thing ('first_unit')
# Row numbers by name: unique in every table and overlapping everywhere.
ROW_NUMBERS = {"row_id", "rowid", "row_num", "row_number", "rownum", "index", "idx", "column0", "column00"}
_CODE_WORDS = {"code", "icd", "snomed", "loinc", "rxnorm", "ndc", "cpt", "hcpcs", "drg"}
_LABEL_PARTS = ("name", "label", "title", "desc", "text", "term", "display")
OPAQUE = "[0-9A-Za-z._:-]{16,}"  # a long token without spaces: a UUID, an accession number...
_NUMERIC = "[-+]?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?"
_CODE_VALUE = "[0-9A-Za-z][0-9A-Za-z.|:_/-]{0,15}"  # short, no spaces: 'V4581', '401.9', 'icd9|4019'
# A unit of measure, lower-cased: SI prefixes on grams, litres, moles..., clinical units (mmHg, bpm,
# %, #/hpf) and their ratios ('mg/dL', 'mcg/kg/min', 'K/uL'). Single letters never count alone
# (sex 'M'/'F', flags 'Y'/'N'), so a value must be '%' or longer than one character.
_UNIT_ATOM = ("(?:[kmunpfdcµμ]?(?:g|gm|l|mol|eq|osm|iu|u|unit|units|m|s)|mcg|cc|%|#|mm ?hg|cm ?h2o|bpm|insp|"
              "breaths|beats|sec|min|mins|hr|hrs|h|day|days|d|wk|kg|lb|lbs|oz|°c|°f|ratio|cells|copies|hpf|lpf|"
              "x ?10e?\\^?[0-9]+|10\\^[0-9]+|k)")
UNIT_VALUE = f"{_UNIT_ATOM}(?: ?[/*.] ?[0-9]*{_UNIT_ATOM})*"
UNIT_SHARE = 0.8  # share of a text column's values that are units for it to be a unit column
_UNIT = re.compile(UNIT_VALUE)


def is_unit(value: str) -> bool:
    """Whether a stored value is a unit of measure ('mg/dL', 'units', '%'), as the profile counts
    them: a single letter is not one (sex 'M', a flag 'Y')."""
    text = value.strip().lower()
    return (len(text) > 1 or text == "%") and _UNIT.fullmatch(text) is not None


@dataclass
class Column:
    name: str
    dtype: str
    original: str = ""  # the name as the file wrote it (case kept), for reading its words
    non_null: int = 0
    distinct: int = 0  # approximate unless exact is set
    exact: bool = False
    low: object = None
    high: object = None
    avg_length: float = 0.0
    letters: float = 0.0  # share of values with a letter
    spaced: float = 0.0  # share of values with a space
    opaque: float = 0.0  # share of values that look like identifiers (long, no spaces)
    numeric: float = 0.0  # share of values that are numbers written as text
    codes: float = 0.0  # share of values shaped like codes (short, no spaces)
    units: float = 0.0  # share of values that are units of measure ('mg/dL', '%', 'bpm')
    worded: float = 0.0  # share of values with a run of three letters or more (a word, not 'J96.0')
    values: list[tuple[str, int]] = field(default_factory=list)
    whole: bool = False  # a floating-point column whose values are all whole numbers
    # a code column of more values than a list holds: a few of them, which show how its codes are written
    examples: list[str] = field(default_factory=list)
    sampled: bool = False  # distinct counted on a sample of a big table: there may be more
    day_number: bool = False  # whole numbers that are dates written as YYYYMMDD (a warehouse's date keys)

    @property
    def words(self) -> tuple[str, ...]:
        """The words of the name, abbreviations spelled out (``PAT_NM`` -> patient name)."""
        return naming.read(self.original or self.name)

    @property
    def _spelled(self) -> str:
        """The name and its spelled-out words, for matching parts of names (``DISP_NM``: a name)."""
        return f"{self.name.lower()} {' '.join(self.words)}"

    @property
    def text(self) -> bool:
        return self.dtype.startswith(_TEXT)

    @property
    def time(self) -> bool:
        return self.dtype == "DATE" or self.dtype.startswith("TIMESTAMP")

    @property
    def integer(self) -> bool:
        """Integers, or ids stored as floating-point numbers (all whole, named like an id)."""
        return self.dtype in _INTEGER or (self.whole and bool(set(self.words) & naming.GENERIC))

    def as_key(self) -> str:
        """SQL for this column's values as they are compared with a key's: integers (ids stored
        as floats included) as BIGINT, anything else as text."""
        if self.integer:
            return f"TRY_CAST({quote(self.name)} AS BIGINT)"
        return f"{quote(self.name)}::VARCHAR"

    @property
    def number(self) -> bool:
        return self.dtype.startswith(_NUMBER) or self.dtype.startswith("DECIMAL")

    @property
    def personal(self) -> bool:
        words = set(split_words(self.name)) | set(self.words)
        said = words & _PERSONAL_WORDS
        named = any(part in self._spelled for part in _PERSONAL_PARTS)
        if said or named:
            # "drug name", "test name": names of things, not of people.
            things = {w for w in self.words if naming.understood(w)} - naming.PEOPLE - naming.GENERIC
            if not named and said <= _ORDINAL_WORDS and things:
                return False  # 'first_unit', 'last_ward': the first or last of a thing, not a person's name
            return not (self.label_like and things)
        return False

    @property
    def label_like(self) -> bool:
        """Named like a name, label, title or description."""
        return any(part in self._spelled for part in _LABEL_PARTS)

    @property
    def code_like(self) -> bool:
        """Named like a code, or text holding short code-shaped values next to numbers
        (ICD '4019', 'V4581'): codes, not numbers written as text."""
        if set(self.words) & _CODE_WORDS or re.fullmatch(r"diagnosis\d*", self.name.lower()):
            return True
        # Some values carry a letter ('V4581'): dose ranges such as '1-2' carry none.
        return (self.text and self.spaced < 0.01 and self.codes >= 0.99 and 0.2 <= self.numeric < 1
                and self.letters >= 0.02)

    @property
    def identifier_like(self) -> bool:
        return self.text and self.opaque >= 0.8 and self.avg_length >= 12

    @property
    def unit_like(self) -> bool:
        """Holds units of measure ('mg/dL', 'mmol/L', '%'), whatever its name says (a 'ward/unit'
        column of ward names is not one)."""
        return self.text and self.units >= UNIT_SHARE


@dataclass
class Table:
    name: str
    file: str
    rows: int
    columns: dict[str, Column]
    original: str = ""  # the file's name without suffix, case kept
    key: str | None = None
    row_number: str | None = None  # a dense 0..n-1 / 1..n column, or one named like a row number
    unique: tuple[str, ...] = ()  # unique, never-empty columns that can be keys (no row numbers)
    composite: tuple[str, str] | None = None  # a two-column key (code + version) when no single one exists
    sequences: tuple[str, ...] = ()  # unique columns that look like row numbers (dense or so named)

    @property
    def words(self) -> tuple[str, ...]:
        return naming.read(self.original or self.name)


def sampled(table: str, rows: int, size: int) -> str:
    """``table`` as a FROM source, or about ``size`` of its rows when it has more: whole
    blocks of rows (system sampling), which reads only those blocks; a reservoir sample
    would read the whole table, and slower than a plain scan. Run a query that samples
    under ``one_thread``: only then does the seed pick the same rows every time."""
    if rows <= size:
        return quote(table)
    share = max(100 * size / rows, 0.01)
    return f"(SELECT * FROM {quote(table)} USING SAMPLE {share:.4f}% (system, 7))"


@contextlib.contextmanager
def one_thread(con: duckdb.DuckDBPyConnection, needed: bool = True) -> Iterator[None]:
    """DuckDB on one thread while the block runs (when ``needed``): a seeded system sample read by
    several threads picks different rows from run to run (the 668,862 rows of MIMIC-IV's chartevents
    sampled at 30% again and again gave 206,848 rows, then 200,704), and so would the drafted knowledge."""
    if not needed:
        yield
        return
    threads = int(con.execute("SELECT current_setting('threads')").fetchall()[0][0])
    con.execute("SET threads = 1")
    try:
        yield
    finally:
        con.execute(f"SET threads = {threads}")


def _ranges(columns: dict[str, Column]) -> list[str]:
    parts = []
    for column in columns.values():
        c = quote(column.name)
        if column.dtype in ("FLOAT", "DOUBLE", "REAL"):  # NaN is the largest float: leave it out
            parts += [f"min({c}) FILTER (WHERE NOT isnan({c}))", f"max({c}) FILTER (WHERE NOT isnan({c}))"]
        elif column.time or column.number:
            parts += [f"min({c})", f"max({c})"]
    return parts


def column_types(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    """Table -> its (column, type) pairs in order, for every table of the database's main schema,
    in one query: one per table costs milliseconds each on a catalog of thousands of tables."""
    described: dict[str, list[tuple[str, str]]] = {}
    for table, column, dtype in con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_catalog = current_database() AND table_schema = 'main' "
            "ORDER BY table_name, ordinal_position").fetchall():
        described.setdefault(table, []).append((column, dtype))
    return described


def profile(con: duckdb.DuckDBPyConnection, table: str, file: str, original: dict[str, str] | None = None,
            stem: str = "", described: list[tuple[str, str]] | None = None) -> Table:
    """Counts, ranges, text shapes, value lists and candidate keys of ``table`` (of a sample of
    it when it is big: see the module docstring); ``described``: its (column, type) pairs, when
    already read with ``column_types``."""
    if described is None:
        described = column_types(con).get(table, [])
    columns = {name: Column(name, dtype, (original or {}).get(name, name)) for name, dtype in described}
    rows = int(con.execute(f"SELECT count(*) FROM {quote(table)}").fetchall()[0][0])
    if rows <= PROFILE_SAMPLE:
        result = _profile(con, table, table, rows, columns, file, stem)
        _keys(con, result)
        return result
    with one_thread(con):
        con.execute(f"CREATE OR REPLACE TEMP TABLE {SAMPLE_TABLE} AS "
                    f"SELECT * FROM {sampled(table, rows, PROFILE_SAMPLE)}")
    try:
        scanned = int(con.execute(f"SELECT count(*) FROM {SAMPLE_TABLE}").fetchall()[0][0])
        result = _profile(con, table, SAMPLE_TABLE, scanned, columns, file, stem)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {SAMPLE_TABLE}")
    _scale(result, rows, scanned)
    ranged = _ranges(columns)
    if ranged:
        stats = list(con.execute(f"SELECT {', '.join(ranged)} FROM {quote(table)}").fetchall()[0])
        for column in columns.values():
            if column.time or column.number:
                column.low, column.high = stats.pop(0), stats.pop(0)
    _keys(con, result)
    return result


def _scale(table: Table, rows: int, scanned: int) -> None:
    """Counts of a sample of ``scanned`` rows as estimates for the table's ``rows``: a column
    unique and never empty in the sample stays so (a candidate key); another's distinct values
    are those of the sample, which the whole table may outnumber (``sampled``)."""
    factor = rows / scanned if scanned else 0.0
    for column in table.columns.values():
        unique = column.exact and column.distinct == column.non_null
        column.non_null = rows if column.non_null == scanned else round(column.non_null * factor)
        if unique:
            column.distinct = column.non_null
        else:
            column.sampled = True
        column.values = [(value, round(n * factor)) for value, n in column.values]
    table.rows = rows


def _profile(con: duckdb.DuckDBPyConnection, table: str, source: str, rows: int, columns: dict[str, Column],
             file: str, stem: str) -> Table:
    """The profile of ``table`` measured on ``source`` (the table itself, or a sample of it)."""
    parts = ["count(*)"]
    floats = [c for c in columns.values() if c.dtype in ("FLOAT", "DOUBLE", "REAL") or c.dtype.startswith("DECIMAL")]
    for column in columns.values():
        c = quote(column.name)
        parts += [f"count({c})", f"approx_count_distinct({c})"]
    parts += _ranges(columns)
    # Ids stored as floats: all values whole (NaN and infinities are not).
    parts += [f"bool_and(isfinite({quote(c.name)}::DOUBLE) AND {quote(c.name)} = floor({quote(c.name)}))"
              for c in floats]
    stats = list(con.execute(f"SELECT {', '.join(parts)} FROM {quote(source)}").fetchall()[0])
    stats.pop(0)
    for column in columns.values():
        column.non_null, column.distinct = int(stats.pop(0)), int(stats.pop(0) or 0)
    for column in columns.values():
        if column.time or column.number:
            column.low, column.high = stats.pop(0), stats.pop(0)
    for column in floats:
        column.whole = bool(stats.pop(0)) and column.non_null > 0
    _day_numbers(con, source, columns)
    _text_shapes(con, source, rows, [c for c in columns.values() if c.text and c.non_null])
    # Exact counts where the decision depends on them (keys and value lists) or the description
    # states them (codes), a few columns a scan
    # (each count holds a set of its column's values: a sample of 200,000 rows, many columns at once,
    # would crowd the drafting memory).
    counted = [c for c in columns.values() if c.non_null and (
        ((c.text or c.integer) and c.distinct >= 0.9 * c.non_null)
        or ((c.text or (c.integer and c.code_like)) and c.distinct <= VOCABULARY_MAX * 1.1))]
    for first in range(0, len(counted), EXACT_COUNTS_PER_SCAN):
        batch = counted[first:first + EXACT_COUNTS_PER_SCAN]
        exact = con.execute(f"SELECT {', '.join(f'count(DISTINCT {quote(c.name)})' for c in batch)} "
                            f"FROM {quote(source)}").fetchall()[0]
        for column, distinct in zip(batch, exact):
            column.distinct, column.exact = int(distinct), True
    for column in columns.values():
        if column.text and not column.personal and column.opaque < 0.5 and 0 < column.distinct <= VALUE_LIST_MAX:
            column.values = [(str(v), int(n)) for v, n in con.execute(
                f"SELECT {quote(column.name)}, count(*) AS n FROM {quote(source)} "
                f"WHERE {quote(column.name)} IS NOT NULL "
                f"GROUP BY 1 ORDER BY n DESC, 1 LIMIT {VALUE_LIST_MAX}").fetchall()]
    for column in columns.values():
        if needs_examples(column):
            column.examples = _examples(con, source, column)
    return Table(table, file, rows, columns, original=stem or table)


_FIRST_DAY, _LAST_DAY = 18000101, 22001231  # the dates a YYYYMMDD number may say
_DAY_WORDS = frozenset({"date", "dt", "dte", "day", "dob", "birth", "dos"})
_DAY_NUMBER_DISTINCT = 20  # that many distinct valid dates, or a name that says date, make it one


def _day_numbers(con: duckdb.DuckDBPyConnection, source: str, columns: dict[str, Column]) -> None:
    """Mark integer columns whose every value is a date written as YYYYMMDD (20240301)."""
    candidates = [c for c in columns.values() if c.dtype in _INTEGER and c.non_null and isinstance(c.low, int)
                  and isinstance(c.high, int) and _FIRST_DAY <= c.low and c.high <= _LAST_DAY
                  and (c.distinct >= _DAY_NUMBER_DISTINCT or set(c.words) & _DAY_WORDS)]
    if not candidates:
        return
    misses = con.execute("SELECT " + ", ".join(
        f"count({quote(c.name)}) FILTER (WHERE try_strptime({quote(c.name)}::VARCHAR, '%Y%m%d') IS NULL)"
        for c in candidates) + f" FROM {quote(source)}").fetchall()[0]
    for column, missed in zip(candidates, misses):
        column.day_number = missed == 0


def needs_examples(column: Column) -> bool:
    """A code column that repeats and lists no values (``Column.examples``); a key's codes are
    shown by the tables that refer to it."""
    return (column.code_like and (column.text or column.integer) and not column.values and not column.personal
            and 1 < column.distinct < column.non_null and column.opaque < 0.5)


def _examples(con: duckdb.DuckDBPyConnection, source: str, column: Column) -> list[str]:
    """The commonest value of each of the commonest leading words first, then the next of each:
    codes of several kinds in one column ('LAB//51222//g/dL', 'MEDICATION//...', 'DIAGNOSIS//ICD//10//I10')
    show one of each kind before a second of any."""
    c = quote(column.name)
    return [str(v) for (v,) in con.execute(
        f"SELECT v FROM (SELECT v, n, row_number() OVER (PARTITION BY regexp_extract(v, '^[A-Za-z]*') "
        f"ORDER BY n DESC, v) AS r, sum(n) OVER (PARTITION BY regexp_extract(v, '^[A-Za-z]*')) AS kind "
        f"FROM (SELECT {c}::VARCHAR AS v, count(*) AS n FROM {quote(source)} WHERE {c} IS NOT NULL GROUP BY 1)) "
        f"ORDER BY r, kind DESC, n DESC, v LIMIT {EXAMPLES}").fetchall()]


def _text_shapes(con: duckdb.DuckDBPyConnection, table: str, rows: int, text: list[Column]) -> None:
    """Shares of each text column's values with letters, spaces, identifier, number, code and unit
    shapes and words, and their mean length. The columns are unpivoted into one column of values, so each
    pattern is compiled once a table, not once a column: a table of a hundred text columns would
    compile seven hundred patterns. Each share is over the column's non-empty values (UNPIVOT leaves
    out empty ones, as the averages would)."""
    if not text:
        return
    source = sampled(table, rows, SHAPE_SAMPLE)
    named = ", ".join(f'{quote(column.name)} AS "{i}"' for i, column in enumerate(text))
    shapes = ("avg(length(v)), avg(regexp_matches(v, '[A-Za-z]')::INT), avg(contains(v, ' ')::INT), "
              f"avg(regexp_full_match(v, '{OPAQUE}')::INT), avg(regexp_full_match(trim(v), '{_NUMERIC}')::INT), "
              f"avg(regexp_full_match(v, '{_CODE_VALUE}')::INT), avg(((length(trim(v)) > 1 OR trim(v) = '%') "
              f"AND regexp_full_match(lower(trim(v)), '{UNIT_VALUE}'))::INT), "
              "avg(regexp_matches(v, '[A-Za-z]{3}')::INT)")
    with one_thread(con, needed=rows > SHAPE_SAMPLE):
        found = {int(k): stats for k, *stats in con.execute(
            f"SELECT k, {shapes} FROM (UNPIVOT (SELECT {named} FROM {source}) ON COLUMNS(*) INTO NAME k VALUE v) "
            "GROUP BY k").fetchall()}
    for i, column in enumerate(text):
        stats = found.get(i, [None] * 8)
        (column.avg_length, column.letters, column.spaced, column.opaque, column.numeric,
         column.codes, column.units, column.worded) = (float(value or 0) for value in stats)


def int_range(column: Column) -> tuple[int, int] | None:
    """``(low, high)`` of an integer column with values, else None."""
    if column.integer and isinstance(column.low, int) and isinstance(column.high, int):
        return column.low, column.high
    return None


def _dense(column: Column, rows: int) -> bool:
    """A 0..n-1 or 1..n sequence: what a row number looks like whatever its name."""
    bounds = int_range(column)
    return bounds is not None and bounds[0] in (0, 1) and bounds[1] - bounds[0] + 1 == rows


def _keys(con: duckdb.DuckDBPyConnection, table: Table) -> None:
    """Candidate keys, the row number, a two-column key, and the one key shown as the table's."""
    if table.rows < 2:
        return  # one row makes every column unique: nothing tells a key apart
    unique = [c for c in table.columns.values()
              if c.exact and c.non_null == table.rows and c.distinct == table.rows
              and (c.text or c.integer) and not (c.text and c.spaced > 0.5)]
    row_numbers = [c for c in unique if c.name.lower() in ROW_NUMBERS or _dense(c, table.rows)]
    others = [c for c in unique if c not in row_numbers]
    if not others and len(row_numbers) > 1:
        # Two dense sequences: the one named like a row number is the row number.
        named = [c for c in row_numbers if c.name.lower() in ROW_NUMBERS]
        if named and len(named) < len(row_numbers):
            others = [c for c in row_numbers if c not in named]
            row_numbers = named
    table.sequences = tuple(c.name for c in row_numbers)
    _settle(con, table, others)


def _settle(con: duckdb.DuckDBPyConnection, table: Table, others: list[Column]) -> None:
    table.row_number = table.sequences[0] if table.sequences else None
    table.unique = tuple(c.name for c in others)
    table.key = _preferred(table, others) or table.row_number
    table.composite = None if others else _composite(con, table)


def _preferred(table: Table, unique: list[Column]) -> str | None:
    """The key a reader expects: named like the table's thing, else like an id, else any."""
    if not unique:
        return None
    subject = naming.meaningful(table.original or table.name)

    def rank(column: Column) -> tuple[int, int, int]:
        words = set(column.words)
        about = naming.meaningful(column.original or column.name)
        named_id = bool(words & naming.GENERIC) or column.name == "id"
        return (column.name == "id" or bool(about & subject and named_id), named_id, -len(column.name))

    return max(unique, key=rank).name


def _composite(con: duckdb.DuckDBPyConnection, table: Table) -> tuple[str, str] | None:
    """A code and a small qualifier (a version, a type) that are unique together, in a table of
    things rather than events (no times): the key of a dictionary of versioned codes."""
    if any(c.time for c in table.columns.values()):
        return None
    wide = [c for c in table.columns.values() if (c.text or c.integer) and c.non_null == table.rows
            and c.distinct >= table.rows / 2 and c.name != table.row_number and not (c.text and c.spaced > 0.5)
            and not c.identifier_like]
    narrow = [c for c in table.columns.values() if (c.text or c.integer) and c.non_null == table.rows
              and 2 <= c.distinct <= 50]
    for first in wide:
        for second in narrow:
            pair = f"{quote(first.name)}, {quote(second.name)}"
            n = con.execute(f"SELECT count(*) FROM (SELECT DISTINCT {pair} FROM {quote(table.name)})").fetchall()[0][0]
            if n == table.rows:
                return first.name, second.name
    return None


def settle_row_numbers(con: duckdb.DuckDBPyConnection, tables: dict[str, Table]) -> None:
    """A dense sequence that other tables repeat under the same name is a natural key (a
    department 1..n that visits refer to), not a row number: row numbers are unique in
    every table that has them."""
    repeated = {c.name.lower() for t in tables.values() for c in t.columns.values()
                if c.non_null and (not c.exact or c.distinct < c.non_null)}
    for table in tables.values():
        natural = [name for name in table.sequences if name.lower() not in ROW_NUMBERS and name.lower() in repeated]
        if natural:
            table.sequences = tuple(name for name in table.sequences if name not in natural)
            _settle(con, table, [table.columns[name] for name in (*table.unique, *natural)])
