"""Knowledge drafted from the data: a first description of a folder nobody has described.

After ``ehr-magic data load csv`` has put each file in a table, this profiles the tables
with DuckDB SQL and writes a ``Knowledge`` the model and the analyst can read:

- columns with their type, emptiness, ranges (dates, numbers) and, for short text
  value lists, the values themselves;
- a likely key per table (a unique, never-empty column named like an id);
- likely joins, from names (``patient`` -> ``patients.id``, ``claimid`` -> ``claims.id``)
  confirmed by values (most values of the column occur in the key), or from values alone
  when both sides are long opaque identifiers (UUIDs) that cannot overlap by chance;
- the dataset clock: the latest event time, not pushed into the future by planned ends.

Values shown to the model are chosen with privacy in mind: only columns whose values
repeat, never columns named like personal data (names, addresses, phone numbers...).
Everything is marked as drafted so the analyst checks and improves it.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ehr_magic.data.knowledge import Knowledge, TableInfo

VALUE_LIST_MAX = 15  # at most this many distinct values make a value list
SHOWN_VALUES = 8  # values written into a column's description
VOCABULARY_MAX = 5000  # distinct values of a term column worth a lookup
JOIN_SHARE = 0.9  # share of a column's values found in a key, for a join named like it
OPAQUE_JOIN_SHARE = 0.99  # the same for a join found from identifier values alone
FUTURE_SLACK = dt.timedelta(days=1)  # how far an end time may run past the latest event

_TEXT = ("VARCHAR",)
_INTEGER = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")
_NUMBER = (*_INTEGER, "FLOAT", "DOUBLE", "REAL")
# Personal data: never shown as values, never offered for lookup.
_PERSONAL_PARTS = ("name", "ssn", "passport", "address", "phone", "email", "birthplace", "street", "license")
_PERSONAL_WORDS = {"first", "last", "maiden", "drivers", "zip", "zipcode", "postcode", "postal", "city", "county",
                   "lat", "lon", "latitude", "longitude", "mrn", "memberid", "fax", "ip"}
_END_WORDS = {"end", "stop", "until", "expiry", "expiration", "expires", "due", "to", "discharge", "dischtime"}
_ID_NAME = re.compile(r"^(id|.*_id|.*[a-z]id)$")
# Row numbers: unique in every table and overlapping everywhere, so never a join, and a key only as a last resort.
ROW_NUMBERS = {"row_id", "rowid", "row_num", "row_number", "rownum", "index", "idx", "column0", "column00"}
_CODE_NAME = re.compile(r".*(code|icd|snomed|loinc|rxnorm|ndc|cpt|hcpcs).*|diagnosis\d*")
_OPAQUE = "[0-9A-Za-z._:-]{16,}"  # a long token without spaces: a UUID, an accession number...
_NUMERIC = "[-+]?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?"


@dataclass
class Column:
    name: str
    dtype: str
    non_null: int = 0
    distinct: int = 0  # approximate unless exact is set
    exact: bool = False
    low: object = None
    high: object = None
    avg_length: float = 0.0
    letters: float = 0.0  # share of values with a letter
    opaque: float = 0.0  # share of values that look like identifiers (long, no spaces)
    numeric: float = 0.0  # share of values that are numbers written as text
    values: list[tuple[str, int]] = field(default_factory=list)

    @property
    def text(self) -> bool:
        return self.dtype.startswith(_TEXT)

    @property
    def time(self) -> bool:
        return self.dtype == "DATE" or self.dtype.startswith("TIMESTAMP")

    @property
    def integer(self) -> bool:
        return self.dtype in _INTEGER

    @property
    def personal(self) -> bool:
        words = set(re.split(r"[^a-z0-9]+", self.name.lower()))
        return bool(words & _PERSONAL_WORDS) or any(part in self.name.lower() for part in _PERSONAL_PARTS)

    @property
    def code_like(self) -> bool:
        return bool(_CODE_NAME.fullmatch(self.name.lower()))

    @property
    def identifier_like(self) -> bool:
        return self.text and self.opaque >= 0.8 and self.avg_length >= 12


@dataclass
class Table:
    name: str
    file: str
    rows: int
    columns: dict[str, Column]
    key: str | None = None


@dataclass(frozen=True)
class Join:
    table: str
    column: str
    target: str
    key: str
    share: float
    by_name: bool

    def text(self) -> str:
        return f"{self.target} ON {self.table}.{self.column} = {self.target}.{self.key}"


@dataclass(frozen=True)
class DatasetClock:
    now: dt.datetime
    source: str  # "table.column" holding the latest event
    later: tuple[tuple[str, int, object], ...] = ()  # ("table.column", rows after now, latest value)


# -- profiling ---------------------------------------------------------------------------------


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def profile(con: duckdb.DuckDBPyConnection, table: str, file: str) -> Table:
    """Counts, ranges and value lists of every column of ``table``."""
    described = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'main' "
        "AND table_name = ? ORDER BY ordinal_position", [table]).fetchall()
    columns = {name: Column(name, dtype) for name, dtype in described}
    parts = ["count(*)"]
    for column in columns.values():
        c = quote(column.name)
        parts += [f"count({c})", f"approx_count_distinct({c})"]
        if column.dtype in ("FLOAT", "DOUBLE", "REAL"):  # NaN is the largest float: leave it out
            parts += [f"min({c}) FILTER (WHERE NOT isnan({c}))", f"max({c}) FILTER (WHERE NOT isnan({c}))"]
        elif column.time or column.dtype.startswith(_NUMBER) or column.dtype.startswith("DECIMAL"):
            parts += [f"min({c})", f"max({c})"]
        if column.text:
            parts += [f"avg(length({c}))", f"avg(regexp_matches({c}, '[A-Za-z]')::INT)",
                      f"avg(regexp_full_match({c}, '{_OPAQUE}')::INT)",
                      f"avg(regexp_full_match(trim({c}), '{_NUMERIC}')::INT)"]
    stats = list(con.execute(f"SELECT {', '.join(parts)} FROM {quote(table)}").fetchone())
    rows = int(stats.pop(0))
    for column in columns.values():
        column.non_null, column.distinct = int(stats.pop(0)), int(stats.pop(0) or 0)
        if column.time or column.dtype.startswith(_NUMBER) or column.dtype.startswith("DECIMAL"):
            column.low, column.high = stats.pop(0), stats.pop(0)
        if column.text:
            column.avg_length, column.letters, column.opaque, column.numeric = (
                float(stats.pop(0) or 0) for _ in range(4))
    for column in columns.values():
        # Exact counts where the decision depends on them: keys and value lists.
        if column.non_null and (column.distinct >= 0.9 * column.non_null or column.distinct <= VOCABULARY_MAX * 1.1):
            query = f"SELECT count(DISTINCT {quote(column.name)}) FROM {quote(table)}"
            column.distinct = int(con.execute(query).fetchone()[0])
            column.exact = True
        if column.text and not column.personal and column.opaque < 0.5 and 0 < column.distinct <= VALUE_LIST_MAX:
            column.values = [(str(v), int(n)) for v, n in con.execute(
                f"SELECT {quote(column.name)}, count(*) AS n FROM {quote(table)} "
                f"WHERE {quote(column.name)} IS NOT NULL "
                f"GROUP BY 1 ORDER BY n DESC, 1 LIMIT {VALUE_LIST_MAX}").fetchall()]
    result = Table(table, file, rows, columns)
    result.key = _key(result)
    return result


def _singulars(table: str) -> set[str]:
    forms = {table}
    if table.endswith("ies"):
        forms.add(table[:-3] + "y")
    if table.endswith("es"):
        forms.add(table[:-2])
    if table.endswith("s"):
        forms.add(table[:-1])
    return {f for f in forms if len(f) >= 3}


def _key(table: Table) -> str | None:
    """The likely key: a unique, never-empty column, preferring id-like names."""
    unique = [c for c in table.columns.values()
              if table.rows and c.exact and c.non_null == table.rows and c.distinct == table.rows
              and (c.text or c.integer)]
    names = {f"{s}{suffix}" for s in _singulars(table.name) for suffix in ("_id", "id")}
    for preferred in (lambda c: c.name == "id", lambda c: c.name in names,
                      lambda c: bool(_ID_NAME.match(c.name)) and c.name not in ROW_NUMBERS,
                      lambda c: c.name in {"code", "key"} or c.name.endswith(("_code", "_key")),
                      lambda c: c.name in ROW_NUMBERS):
        found = [c.name for c in unique if preferred(c)]
        if found:
            return found[0]
    return None


def named_like(column: str, target: Table) -> bool:
    """Whether ``column``'s name points at ``target`` (``patient``, ``patientid``, ``supervisingproviderid``)."""
    if target.key is None or target.key in ROW_NUMBERS:
        return False
    if column == target.key and column != "id":
        return True
    stem = column
    if column.endswith("id") and len(column) > 2:
        stem = column[:-2].rstrip("_")
    return any(stem == s or (len(s) >= 4 and stem.endswith(s)) for s in _singulars(target.name))


def find_joins(con: duckdb.DuckDBPyConnection, tables: dict[str, Table]) -> list[Join]:
    """Likely joins of every table to the keys of the others (see the module docstring)."""
    keyed = {t.name: t for t in tables.values() if t.key}
    text_keys = [t for t in keyed.values() if t.columns[t.key].text]
    if text_keys:
        con.execute("CREATE OR REPLACE TEMP TABLE _draft_keys AS " + " UNION ALL ".join(
            f"SELECT '{t.name}' AS tbl, {quote(t.key)}::VARCHAR AS v FROM {quote(t.name)}" for t in text_keys))
    joins: list[Join] = []
    for table in tables.values():
        for column in table.columns.values():
            if (column.non_null == 0 or column.name == table.key or column.name in ROW_NUMBERS
                    or not (column.text or column.integer)):
                continue
            shares: dict[str, float] = {}
            if column.text and column.opaque > 0 and text_keys:
                # Placeholders such as '0' for "none" are left out: only identifier-like values count.
                c = quote(column.name)
                values = (f"SELECT DISTINCT {c}::VARCHAR AS v FROM {quote(table.name)} "
                          f"WHERE regexp_full_match({c}::VARCHAR, '{_OPAQUE}')")
                total = con.execute(f"SELECT count(*) FROM ({values})").fetchone()[0]
                found = con.execute(f"SELECT k.tbl, count(*) FROM ({values}) s JOIN _draft_keys k USING (v) "
                                    "GROUP BY k.tbl").fetchall()
                shares = {name: n / total for name, n in found} if total >= 2 else {}
            candidates = []
            for target in keyed.values():
                if target.name == table.name:
                    continue
                by_name = named_like(column.name, target)
                key = target.columns[target.key]
                if by_name and target.name not in shares and (key.text == column.text):
                    shares[target.name] = _share(con, table, column, target)
                share = shares.get(target.name, 0.0)
                opaque_pair = column.text and key.identifier_like
                if (by_name and share >= JOIN_SHARE) or (opaque_pair and share >= OPAQUE_JOIN_SHARE):
                    candidates.append(Join(table.name, column.name, target.name, target.key, share, by_name))
            if candidates:
                joins.append(max(candidates, key=lambda j: (j.by_name, j.share, -tables[j.target].rows)))
    con.execute("DROP TABLE IF EXISTS _draft_keys")
    return joins


def _share(con: duckdb.DuckDBPyConnection, table: Table, column: Column, target: Table) -> float:
    c, k = quote(column.name), quote(target.key or "")
    found, total = con.execute(
        f"SELECT count(t.v), count(*) FROM (SELECT DISTINCT {c} AS v FROM {quote(table.name)} WHERE {c} IS NOT NULL) s "
        f"LEFT JOIN (SELECT {k} AS v FROM {quote(target.name)}) t ON s.v = t.v").fetchone()
    return found / total if total else 0.0


# -- the clock ---------------------------------------------------------------------------------


def _is_end(column: str) -> bool:
    words = set(re.split(r"[^a-z0-9]+", column.lower()))
    return bool(words & _END_WORDS) or column.lower().startswith(("end", "stop")) or column.lower().endswith(
        ("end", "stop", "enddate", "stopdate", "todate"))


def _as_datetime(value: object) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    assert isinstance(value, dt.date)
    return dt.datetime(value.year, value.month, value.day)


def dataset_clock(con: duckdb.DuckDBPyConnection, tables: dict[str, Table]) -> DatasetClock | None:
    """The latest event time. End times (stop, end, due...) may move it at most a day later,
    so planned ends and coverage periods running into the future do not make "now" absurd."""
    events = [(t, c) for t in tables.values() for c in t.columns.values() if c.time and c.high is not None]
    if not events:
        return None
    starts = [(t, c) for t, c in events if not _is_end(c.name)] or events
    table, column = max(starts, key=lambda pair: _as_datetime(pair[1].high))
    now, source = _as_datetime(column.high), f"{table.name}.{column.name}"
    limit = now + FUTURE_SLACK
    for t, c in events:
        if _as_datetime(c.high) > now:
            capped = con.execute(f"SELECT max({quote(c.name)}) FROM {quote(t.name)} WHERE {quote(c.name)} <= ?",
                                 [limit]).fetchone()[0]
            if capped is not None and _as_datetime(capped) > now:
                now, source = _as_datetime(capped), f"{t.name}.{c.name}"
    later = []
    for t, c in events:
        if _as_datetime(c.high) > now:
            n = con.execute(f"SELECT count(*) FROM {quote(t.name)} WHERE {quote(c.name)} > ?", [now]).fetchone()[0]
            later.append((f"{t.name}.{c.name}", int(n), c.high))
    return DatasetClock(now, source, tuple(later))


# -- writing -----------------------------------------------------------------------------------


def _show(value: object) -> str:
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") if value.time() != dt.time() else value.strftime("%Y-%m-%d")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def vocabulary_column(column: Column, rows: int) -> bool:
    """Text worth a lookup: short value lists and repeated terms (descriptions, categories),
    not identifiers, numbers kept as text, free text nor personal data."""
    if not column.text or column.personal or column.non_null == 0 or column.identifier_like:
        return False
    repeats = column.distinct * 2 <= column.non_null
    return repeats and 2 <= column.distinct <= VOCABULARY_MAX and column.letters >= 0.5 and column.avg_length <= 120


def describe_column(table: Table, column: Column, joins: dict[str, Join], vocabulary: bool) -> str:
    """One line about a column: type, role, range or values, emptiness."""
    if column.non_null == 0:
        return f"{column.dtype}, always empty in this data."
    parts = []
    if column.name == table.key:
        parts.append("the key (unique, never empty)")
    elif column.name in joins:
        join = joins[column.name]
        parts.append(f"refers to {join.target}.{join.key}")
    elif column.values and column.distinct == 1:
        parts.append(f"always {_quote(column.values[0][0])}")
    elif column.values and vocabulary:
        shown = ", ".join(_quote(v) for v, _ in column.values[:SHOWN_VALUES])
        more = f" and {column.distinct - SHOWN_VALUES} more" if column.distinct > SHOWN_VALUES else ""
        parts.append(f"{_count(column.distinct, 'value')} ({shown}{more})")
    elif vocabulary:
        parts.append(f"{_count(column.distinct, 'distinct term')}, find them with ehr.lookup")
    elif column.code_like:
        parts.append(f"{_count(column.distinct, 'distinct code')}")
    elif column.low is not None and not column.personal:
        same = column.low == column.high
        parts.append(f"always {_show(column.low)}" if same else f"{_show(column.low)} to {_show(column.high)}")
    elif column.text and not column.personal:
        parts.append(_count(column.distinct, "distinct value"))
    if column.text and not column.personal and 0.2 <= column.numeric < 1:
        parts.append(f"{_percent(column.numeric, 1)} of values are numbers written as text (use TRY_CAST)")
    empty = table.rows - column.non_null
    if empty:
        parts.append(f"empty in {_percent(empty, table.rows)} of rows")
    return f"{column.dtype}, " + "; ".join(parts) + "." if parts else f"{column.dtype}."


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _percent(part: int, whole: int) -> str:
    share = 100 * part / whole
    return f"{share:.0f}%" if share >= 1 else "<1%"


def draft(con: duckdb.DuckDBPyConnection, files: dict[str, Path], *, schema: str, dataset: str,
          now: dt.datetime | None = None, notes: tuple[str, ...] = ()) -> tuple[Knowledge, dt.datetime | None]:
    """The drafted knowledge of the loaded ``files`` (table -> file), and the clock it found.

    ``now`` (a clock the user gave) replaces the found one in the text; ``notes`` are
    conventions the loader adds (e.g. how it converted time zones).
    """
    tables = {name: profile(con, name, path.name) for name, path in files.items()}
    joins = find_joins(con, tables)
    clock = dataset_clock(con, tables)
    by_table: dict[str, dict[str, Join]] = {}
    for join in joins:
        by_table.setdefault(join.table, {})[join.column] = join
    infos: dict[str, TableInfo] = {}
    for table in tables.values():
        vocabulary = [c.name for c in table.columns.values() if vocabulary_column(c, table.rows)]
        own = by_table.get(table.name, {})
        columns = {c.name: describe_column(table, c, own, c.name in vocabulary) for c in table.columns.values()}
        row = f"{_count(table.rows, 'row')} from {table.file}."
        description = (f"Each row has its own {table.key}." if table.key else "No single column identifies a row.")
        infos[table.name] = TableInfo(table.name, None, row, description, columns,
                                      joins=tuple(j.text() for j in own.values()), vocabulary=tuple(vocabulary),
                                      key=table.key)
    anchor = now or (clock.now if clock else None)
    knowledge = Knowledge(
        schema=schema, version=1, title=f"{dataset} (a folder of tables, knowledge drafted from the data)",
        introduction=_introduction(dataset, len(files), now, clock),
        conventions=(*_conventions(joins), *notes), tables=infos, source="drafted", drafted=True,
        clock=_show(anchor) if anchor else None)
    return knowledge, anchor


def _introduction(dataset: str, files: int, given: dt.datetime | None, clock: DatasetClock | None) -> str:
    lines = [(f"Tables loaded from the {files} files of folder {dataset}, one table per file. This description was "
              "drafted from the data by ehr-magic, not written by a person: check and improve it (ehr-magic data "
              "knowledge TARGET --export FILE.yaml, edit, then --import FILE.yaml).")]
    if given is not None:
        lines.append(f"The dataset clock (ehr.now) was set to {_show(given)} when loading.")
    elif clock is None:
        lines.append("No column holds dates or times, so the dataset clock (ehr.now) is a placeholder.")
    else:
        lines.append(f"The dataset clock (ehr.now) is {_show(clock.now)}, the latest event time in the data "
                     f"({clock.source}); relative phrases such as 'last year' count back from it.")
        if clock.later:
            listed = ", ".join(f"{name} ({n:,} rows, up to {_show(last)})" for name, n, last in clock.later[:4])
            lines.append(f"Some end or planned times lie after it: {listed}.")
    return "\n".join(lines) + "\n"


def _conventions(joins: list[Join]) -> tuple[str, ...]:
    rules = [("Column types were inferred by DuckDB from the whole file; ranges, value lists and empty shares are "
              "measured on the data as loaded.")]
    if joins:
        rules.append("Joins were inferred from column names and overlapping values (each column's values occur in "
                      "the key it refers to); check a join before relying on it.")
    rules.append("Text is compared as stored: match case-insensitively (ILIKE) unless the exact spelling is known, and "
                 "find stored terms of the lookup columns with ehr.lookup(table, column, text).")
    return tuple(rules)
