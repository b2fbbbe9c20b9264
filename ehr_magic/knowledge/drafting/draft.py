"""Knowledge drafted from the data: a first description of a folder nobody has described.

After ``ehr-magic data load csv`` has put each file in a table, this profiles the tables
with DuckDB SQL (``profiling``), finds keys and joins from the values (``joins``), drafts
what tables and columns mean from their names and values (``meaning``) and writes a
``Knowledge`` the model and the analyst can read:

- columns with their type, role (key, row number, reference, code), emptiness, ranges
  and, for short text value lists, the values themselves;
- one line per table: what a row is, the tables referring to it, its size; the main columns
  in words where their names run the words together (``admitDateTime``: admit date/time);
- joins as inclusion dependencies checked on values, names only ranking them;
- dictionaries and lookup columns (names and descriptions of codes, repeated terms);
- the dataset clock: the latest event time, not pushed into the future by planned ends.

Values shown to the model are chosen with privacy in mind: only columns whose values
repeat, never columns named like personal data (names, addresses, phone numbers...).
Everything is marked as drafted so the analyst checks and improves it.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

import duckdb

from ehr_magic.engines.base import Comments, DeclaredKeys, ForeignKey
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.knowledge.drafting import meaning, naming
from ehr_magic.knowledge.drafting.joins import Join, find_joins
from ehr_magic.table_files import written_header
from ehr_magic.knowledge.model import Knowledge, TableInfo
from ehr_magic.knowledge.drafting.profiling import Column, Table, column_types, profile, settle_row_numbers
from ehr_magic.text import parse_time, split_words

__all__ = ["DatasetClock", "dataset_clock", "draft", "profile_all"]

Progress = Callable[[str, int, int], None]  # (phase, done, total)
FUTURE_SLACK = dt.timedelta(days=1)  # how far an end time may run past the latest event
_END_WORDS = {"end", "stop", "until", "expiry", "expiration", "expires", "due", "to", "discharge", "dischtime"}


@dataclass(frozen=True)
class DatasetClock:
    now: dt.datetime
    source: str  # "table.column" holding the latest event
    later: tuple[tuple[str, int, object], ...] = ()  # ("table.column", rows after now, latest value)


# -- the clock ---------------------------------------------------------------------------------


def is_end_time(column: str) -> bool:
    """Whether a time column is named like an end, stop or due time (which may lie in the future)."""
    return _is_end(column)


def _is_end(column: str) -> bool:
    words = set(split_words(column))
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
        return _day_number_clock(tables)
    starts = [(t, c) for t, c in events if not _is_end(c.name)] or events
    table, column = max(starts, key=lambda pair: _as_datetime(pair[1].high))
    now, source = _as_datetime(column.high), f"{table.name}.{column.name}"
    limit = now + FUTURE_SLACK
    for t, c in events:
        if _as_datetime(c.high) > now:
            capped = con.execute(f"SELECT max({quote(c.name)}) FROM {quote(t.name)} WHERE {quote(c.name)} <= ?",
                                 [limit]).fetchall()[0][0]
            if capped is not None and _as_datetime(capped) > now:
                now, source = _as_datetime(capped), f"{t.name}.{c.name}"
    later = []
    for t, c in events:
        if _as_datetime(c.high) > now:
            n = con.execute(f"SELECT count(*) FROM {quote(t.name)} WHERE {quote(c.name)} > ?", [now]).fetchall()[0][0]
            later.append((f"{t.name}.{c.name}", int(n), c.high))
    return DatasetClock(now, source, tuple(later))


def _day_number_clock(tables: dict[str, Table]) -> DatasetClock | None:
    """Where every date is a YYYYMMDD number (a warehouse's date keys), the latest of those that
    are not end dates, as a time ("20241228" reads as one: ``text.parse_time``)."""
    days = [(t, c) for t in tables.values() for c in t.columns.values() if c.day_number and c.high is not None]
    starts = [(t, c) for t, c in days if not _is_end(c.name)]
    if not starts:
        return None
    table, column = max(starts, key=lambda pair: int(str(pair[1].high)))
    return DatasetClock(parse_time(str(column.high)), f"{table.name}.{column.name}", ())


# -- writing -----------------------------------------------------------------------------------


def original_names(path: Path) -> dict[str, str]:
    """Lower-cased column name -> the header as written (``admitDateTime``), whose case
    tells the words apart; empty when the header cannot be read."""
    header = written_header(path)
    names: dict[str, str] = {}
    for column in header:
        # DuckDB keeps both of 'Id' and 'ID', the second as 'ID_1', lower-cased to 'id_1' on loading.
        loaded, n = column.lower(), 0
        while loaded in names:
            n += 1
            loaded = f"{column.lower()}_{n}"
        names[loaded] = column
    return names


def _stem(path: Path) -> str:
    return re.sub(r"\.(csv|tsv)(\.gz)?$|\.parquet$", "", path.name, flags=re.IGNORECASE)


def profile_all(con: duckdb.DuckDBPyConnection, files: dict[str, Path | None],
                progress: Progress | None = None) -> dict[str, Table]:
    """Profiles of the loaded ``files`` (table -> file; None for a table of a database, whose
    names are as the database spells them), row numbers settled across tables."""
    tables = {}
    described = column_types(con)
    for i, (name, path) in enumerate(files.items()):
        if progress:
            progress(f"profiling {name}", i, len(files))
        if path is None:
            tables[name] = profile(con, name, name, described=described.get(name, []))
        else:
            tables[name] = profile(con, name, path.name, original_names(path), _stem(path), described.get(name, []))
    settle_row_numbers(con, tables)
    return tables


def draft(con: duckdb.DuckDBPyConnection, files: dict[str, Path | None], *, schema: str, dataset: str,
          now: dt.datetime | None = None, notes: tuple[str, ...] = (),
          comments: Mapping[str, Comments] = MappingProxyType({}), keys: DeclaredKeys | None = None,
          progress: Progress | None = None) -> tuple[Knowledge, dt.datetime | None]:
    """The drafted knowledge of the loaded ``files`` (table -> file, or None for a table of a
    database), and the clock it found.

    ``now`` (a clock the user gave) replaces the found one in the text; ``notes`` are
    conventions the loader adds (e.g. how it converted time zones); ``comments`` are what the
    database's own documentation says of its tables and columns, which the descriptions put
    first, in place of what the names suggest; ``keys`` are the primary and foreign keys it
    declares, which stand whatever the values suggest. ``progress`` hears of each table
    profiled, then of the search for joins.
    """
    keys = keys or DeclaredKeys()
    tables = profile_all(con, files, progress)
    _declare_primary_keys(tables, keys.primary)
    if progress:
        progress("finding joins", len(files), len(files))
    declared = _declared_joins(tables, keys.foreign)
    # a declared join takes the place of the one inferred on its column, else comes after them
    stated = {(join.table, join.column): join for join in declared}
    joins = [stated.pop((join.table, join.column), join) for join in find_joins(con, tables)] + list(stated.values())
    clock = dataset_clock(con, tables)
    by_table: dict[str, dict[str, Join]] = {}
    referrers: dict[str, list[str]] = {}
    for join in joins:
        by_table.setdefault(join.table, {})[join.column] = join
        if join.table not in referrers.setdefault(join.target, []):
            referrers[join.target].append(join.table)
    dictionaries = {t.name for t in tables.values()
                    if meaning.is_dictionary(t, len(referrers.get(t.name, ())), bool(by_table.get(t.name)))}
    infos: dict[str, TableInfo] = {}
    skip = naming.dataset_words([t.original or t.name for t in tables.values()], dataset)
    for table in tables.values():
        own = by_table.get(table.name, {})
        vocabulary = meaning.lookup_columns(table, table.name in dictionaries, own)
        columns: dict[str, str] = {}
        listed: list[Column] = []  # the columns whose values their descriptions list, in order
        said = _telling(table, comments.get(table.name) or Comments())
        for c in table.columns.values():
            lists = meaning.lists_values(table, c, own, c.name in vocabulary)
            source = meaning.same_values(c, listed) if lists else None
            columns[c.name] = meaning.describe_column(table, c, own, c.name in vocabulary, values_of=source,
                                                      comment=said.columns.get(c.name, ""))
            if lists and source is None:
                listed.append(c)
        for column, phrase in meaning.line_parts(table, own, dictionaries, tables).items():
            if column in columns and not said.columns.get(column):  # its comment says it better than its name
                columns[column] = meaning.with_phrase(column, columns[column], phrase)
        row = meaning.table_line(table, referrers.get(table.name, []), skip, said.table)
        identity = _identity(table, table.name in dictionaries)
        rest = meaning.after_first_sentence(said.table, meaning.TABLE_DESCRIPTION_CHARACTERS)
        if rest:  # the comment says more than the row's line holds
            identity = f"{meaning.ended(rest)} {identity}".strip()
        infos[table.name] = TableInfo(table.name, None, row, identity, columns,
                                      joins=tuple(j.text() for j in own.values()), vocabulary=tuple(vocabulary),
                                      key=table.key)
    _note_renamed_columns(infos, tables)
    anchor = now or (clock.now if clock else None)
    knowledge = Knowledge(
        schema=schema, version=1, title=f"{dataset} (a folder of tables, knowledge drafted from the data)",
        introduction=_introduction(dataset, len(files), now, clock),
        conventions=(*_conventions(joins, len(declared)), *_type_clashes(tables), *notes), tables=infos,
        source="drafted",
        drafted=True, clock=(meaning.show(anchor),) if anchor else ())
    return knowledge, anchor


def _declare_primary_keys(tables: dict[str, Table], primary: Mapping[str, tuple[str, ...]]) -> None:
    """A table whose data shows no key (no rows yet, or none unique) takes its declared primary key.
    One the data shows stays: a surrogate row number declared as the primary key (row_id) says less
    than the key profiling found beside it (the visit id)."""
    for name, columns in primary.items():
        table = tables.get(name)
        if (table is None or table.key is not None or table.composite is not None or not columns
                or not all(column in table.columns for column in columns)):
            continue
        if len(columns) == 1:
            table.key = columns[0]
            table.composite = None
        elif len(columns) == 2:
            table.key, table.composite = None, (columns[0], columns[1])


def _declared_joins(tables: dict[str, Table], foreign: tuple[ForeignKey, ...]) -> list[Join]:
    """The joins of the declared foreign keys between the drafted tables. A column declared to refer
    to several tables (an event id whose table another column names) is left to the values."""
    targets: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for key in foreign:
        targets.setdefault((key.table, key.columns), set()).add(key.target)
    joins = []
    for key in foreign:
        if len(targets[(key.table, key.columns)]) > 1:
            continue
        source, target = tables.get(key.table), tables.get(key.target)
        if (source is None or target is None or not key.columns or len(key.columns) != len(key.keys)
                or not all(c in source.columns for c in key.columns) or not all(k in target.columns for k in key.keys)):
            continue
        joins.append(Join(key.table, key.columns[0], key.target, key.keys[0], 1.0, False,
                          tuple(zip(key.columns[1:], key.keys[1:]))))
    return joins


def _telling(table: Table, comments: Comments) -> Comments:
    """The comments that say more than the name they are on: a comment that only repeats its
    column's or table's name (``ENC_ID`` on enc_id, a habit of generated documentation) is left out."""
    def says_more(name: str, comment: str) -> bool:
        return not set(split_words(comment)) <= set(split_words(name))

    columns = {c: text for c, text in comments.columns.items() if c in table.columns and says_more(c, text)}
    return Comments(comments.table if says_more(table.name, comments.table) else "", columns)


def _note_renamed_columns(infos: dict[str, TableInfo], tables: dict[str, Table]) -> None:
    """Say where a column's name is not the file's: two headers equal but for case ('Id', 'ID')."""
    for table in tables.values():
        for column in table.columns.values():
            written = column.original
            if written and written.lower() != column.name.lower():
                text = infos[table.name].columns[column.name]
                infos[table.name].columns[column.name] = (
                    f"{text} The file's column {written!r}, renamed: another header differs from it only in case.")


def _type_clashes(tables: dict[str, Table]) -> tuple[str, ...]:
    """A convention per key name that some files hold as numbers and others as text: such
    columns cannot be compared as they are, so no join was drafted between them."""
    keys = {name for table in tables.values() for name in table.unique}
    lines = []
    for name in sorted(keys):
        kinds: dict[str, list[str]] = {}
        for table in tables.values():
            column = table.columns.get(name)
            if column is not None and column.non_null and (column.text or column.number):
                kinds.setdefault("text" if column.text else "numbers", []).append(table.name)
        if len(kinds) > 1:
            held = " but ".join(f"{kind} in {', '.join(names[:4])}" for kind, names in sorted(kinds.items()))
            lines.append(f"Column {name} holds {held}: cast one side (e.g. CAST({name} AS VARCHAR)) before "
                         "comparing or joining them.")
    return tuple(lines[:10])


def _identity(table: Table, dictionary: bool) -> str:
    """What identifies a row, and whether the table is a dictionary."""
    if table.rows == 0:
        return "No rows in this data (the file has only its header), so no key is drafted and nothing joins to it."
    if table.rows < 2:
        return f"Only {table.rows} row, so no key is drafted and nothing joins to it."
    if table.key and table.key != table.row_number:
        text = ""  # the key's own line says it is the key
    elif table.composite:
        text = f"Each row has its own {table.composite[0]} and {table.composite[1]} together."
    elif table.key:
        text = ""  # the row number's own line says it
    else:
        text = "No single column identifies a row."
    return (text + (" A dictionary: look up names and descriptions here." if dictionary else "")).strip()


def _introduction(dataset: str, files: int, given: dt.datetime | None, clock: DatasetClock | None) -> str:
    lines = [(f"Tables loaded from the {files} files of folder {dataset}, one table per file. This description was "
              "drafted from the data by ehr-magic, not written by a person: check and improve it with %ehr knowledge "
              "in a notebook or ehr-magic data knowledge in a shell.")]
    if given is not None:
        lines.append(f"The dataset clock (ehr.now) was set to {meaning.show(given)} when loading.")
    elif clock is None:
        lines.append("No column holds dates or times, so there is no dataset clock (ehr.now): relative phrases such "
                     "as 'last year' cannot be read.")
    else:
        lines.append(f"The dataset clock (ehr.now) is {meaning.show(clock.now)}, the latest event time in the data "
                     f"({clock.source}).")  # that relative phrases count back from it, the prompt's time rules say
        if clock.later:
            listed = ", ".join(f"{name} ({n:,} rows, up to {meaning.show(last)})" for name, n, last in clock.later[:4])
            lines.append(f"Some end or planned times lie after it: {listed}.")
    return "\n".join(lines) + "\n"


def _conventions(joins: list[Join], declared: int = 0) -> tuple[str, ...]:
    """The drafter's conventions; ``declared`` of ``joins`` are the database's foreign keys."""
    rules = [("Column types were inferred by DuckDB from the whole file; ranges, value lists and empty shares are "
              "measured on the data as loaded.")]
    if declared and declared == len(joins):
        rules.append("The joins are the database's own FOREIGN KEY constraints.")
    elif joins:
        rules.append(("Joins not declared by the database (FOREIGN KEY) were " if declared else "Joins were ")
                     + "inferred from the values (each column's values occur in the key it refers to), names only "
                     "ranking the candidates; row numbers join nothing. Check a join before relying on it.")
    rules.append("Text is compared as stored: match case-insensitively (ILIKE) unless the exact spelling is known, and "
                 "find stored terms of the lookup columns with ehr.lookup(table, column, text).")
    return tuple(rules)
