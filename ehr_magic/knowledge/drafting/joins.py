"""Joins found as inclusion dependencies: the values of a column lie inside a key of another table.

Every unique column (and two-column key, such as a code with its version) of every table
is a candidate target; every id-, code- or text-typed column elsewhere is a candidate
source. The values of each source are sketched by a bottom-k sample of their hashes (the
same values are picked whatever the table's order, as in MinHash) and looked up in a
temporary table of the keys' hashes, so one query tests every column against all keys at
once. Only the key hashes that some sketch (or chance probe) holds are kept, so the cost
is one scan of each key column and the memory that of the sketches, however big the keys;
the sketches of a big table come from a sample of its rows (a fixed seed).

Names only rank and vouch for candidates: a column named like the key or its table
(``subject_id`` -> ``patients.subject_id``, ``patient`` -> ``patients.id``) joins when
most of its values are found; integers named only in part (``claimtypeid`` -> a claim's
``chargeid``) also need chance ruled out. Without a name, the values must all be found, and be such
that chance cannot explain it: long identifiers or codes, or integers where numbers
evenly spread over the column's range are rarely keys (small integers 1..20 are found in
any 1..n key). Among the keys that hold a column's values, a table named for what the column
names wins (``person_id`` -> ``person``, though ``observation_period`` holds more person ids);
then a key of the column's own name (``IcuStayKey``) over one that shares a word with it; then
the one that holds the others (the patients table, not a one-row-per-patient score table).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import SupportsInt, cast

import duckdb

from ehr_magic.knowledge.drafting import naming
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.knowledge.drafting.profiling import (OPAQUE, ROW_NUMBERS, Column, Table, int_range, one_thread,
                                                     sampled)

NAMED_SHARE = 0.9  # share of a named column's values found in the key
VALUE_SHARE = 0.98  # the same for a column joined on its values alone
CHANCE_SHARE = 0.05  # most evenly spread integers that may be keys for values alone to count
SAME_NAME = 2.0  # the name score of a column named exactly like the key
SKETCH = 4000  # distinct values of a column sampled (bottom-k of their hashes)
BIG_TABLE = 500_000  # rows of a column's table past which its values are read from a sample
CHANCE_PROBES = 2000  # evenly spread integers over a column's range, to rule out chance
BIG_KEY = 1_000_000  # keys with more values are tried only for columns named like them
SCANS_PER_QUERY = 8  # column scans in one query (keys, sketches): each holds buffers of its own


@dataclass(frozen=True)
class Join:
    table: str
    column: str
    target: str
    key: str
    share: float
    by_name: bool
    also: tuple[tuple[str, str], ...] = ()  # further (column, key) pairs of a two-column key

    def text(self) -> str:
        """``target ON table.column = target.key``, a name that is not a plain identifier quoted
        (``enc_2023 ON labs.enc = enc_2023."visit#"``), so the condition runs as it reads."""
        pairs = [(self.column, self.key), *self.also]
        condition = " AND ".join(f"{self.table}.{sql_name(c)} = {self.target}.{sql_name(k)}" for c, k in pairs)
        return f"{self.target} ON {condition}"


def sql_name(name: str) -> str:
    """``name`` as SQL writes it: plain, or quoted when it is not a plain identifier (``"visit#"``)."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else quote(name)


@dataclass(frozen=True)
class _Key:
    kid: int
    table: Table
    columns: tuple[str, ...]

    @property
    def column(self) -> Column:
        return self.table.columns[self.columns[0]]


def name_score(source: Table, column: Column, key: _Key) -> float:
    """How much the names say ``column`` refers to ``key``: the same name, words shared with the
    key or its table (``patientKey`` -> ``Patients``), and a little for related table names."""
    return _score(_NameWords.of_column(source, column), _NameWords.of_key(key))


@dataclass(frozen=True)
class _NameWords:
    """What ``name_score`` reads of a name: the column's (or key's) name in lower case, its
    meaningful words and those of its table."""
    name: str
    words: frozenset[str]
    table_words: frozenset[str]

    @classmethod
    def of_column(cls, table: Table, column: Column) -> _NameWords:
        return cls(column.name.lower(), naming.meaningful(column.original or column.name),
                   naming.meaningful(table.original or table.name))

    @classmethod
    def of_key(cls, key: _Key) -> _NameWords:
        return cls.of_column(key.table, key.column)


def _score(source: _NameWords, key: _NameWords) -> float:
    # The key's own name, or it after a role (spec_itemid, supervising_provider_id -> provider_id).
    own, theirs = source.name, key.name  # names match in any case
    same = own == theirs or (own.endswith(theirs) and len(theirs) >= 4)
    score = SAME_NAME if same and key.words else 0.0
    score += len(source.words & (key.words | key.table_words))
    if score:
        score += 0.5 * len(source.table_words & key.table_words)
    return score


def _sourceable(table: Table, column: Column) -> bool:
    return (column.non_null > 0 and (column.text or column.integer) and column.name != table.row_number
            and column.name.lower() not in ROW_NUMBERS and not (column.text and column.spaced > 0.5)
            and not (column.personal and not column.identifier_like))


_Shape = tuple[bool, bool, tuple[int, int] | None]  # text, integer, (low, high) of integers


def _shape(column: Column) -> _Shape:
    return column.text, column.integer, int_range(column)


def _shapes_fit(ours: _Shape, theirs: _Shape) -> bool:
    """Values of one shape could be values of the other: the same type and, for integers, ranges
    that meet."""
    if ours[:2] != theirs[:2]:
        return False
    if ours[2] is not None and theirs[2] is not None:
        return ours[2][0] <= theirs[2][1] and ours[2][1] >= theirs[2][0]
    return True


def _compatible(column: Column, target: Column) -> bool:
    return _shapes_fit(_shape(column), _shape(target))


def _by_values_possible(column: Column, target: Column) -> bool:
    """Whether values alone could show the join (no name vouches for it), of a column and a key of
    the same type."""
    if column.distinct < 3:
        return False
    return _values_target(target) and (not column.text or column.spaced < 0.01)


def _values_target(target: Column) -> bool:
    """The key's side of ``_by_values_possible``: text keys of identifiers or codes (ten or more), any integer key."""
    if target.text:
        return (target.identifier_like or (target.codes >= 0.99 and target.spaced < 0.01)) and target.distinct >= 10
    return True


@dataclass
class _Plan:
    """Whether a source column is tried at all: some key's names vouch for it, or values alone may
    show a join to a key of its type. Which keys are tried is settled once the sketches have been
    looked up (``_tried``): only a key holding some of its values can be accepted, and on a
    warehouse of 1,500 tables every ``pat_id`` shares a word with hundreds of keys (1.3 million
    (column, key) pairs, growing with the square of the tables) that hold none of them."""
    named: bool
    by_values: bool


def _own_names(column: Column) -> list[str]:
    """The names a key may have for ``column`` to be named like it: its own, or it after a role
    (see ``name_score``): every suffix of 4 letters or more."""
    own = column.name.lower()
    return [own[start:] for start in range(len(own)) if start == 0 or len(own) - start >= 4]


class _KeyIndex:
    """The single-column keys found by the words and names that can vouch for them, and by type
    for joins on values alone, so that planning a column looks at the keys it could join, not all,
    and stops at the first (each key's shape measured once: a warehouse's columns share their words
    with hundreds of keys)."""

    def __init__(self, keys: list[_Key]) -> None:
        self.keys = {k.kid: k for k in keys}
        self.shapes = {k.kid: _shape(k.column) for k in keys}
        self.names = {k.kid: _NameWords.of_key(k) for k in keys}
        self.by_word: dict[str, list[_Key]] = defaultdict(list)
        self.by_name: dict[str, list[_Key]] = defaultdict(list)
        self.valued: dict[tuple[bool, bool], list[_Key]] = defaultdict(list)
        for key in keys:
            target = key.column
            own = naming.meaningful(target.original or target.name)
            for word in own | naming.meaningful(key.table.original or key.table.name):
                self.by_word[word].append(key)
            if own:
                self.by_name[target.name.lower()].append(key)
            if key.table.rows <= BIG_KEY and _values_target(target):
                self.valued[(target.text, target.integer)].append(key)

    def plannable(self, table: Table, column: Column, shape: _Shape, key: _Key) -> bool:
        """Whether ``column`` (of ``shape``) could hold values of ``key`` at all: another table's key of
        its type and range, with not many more values than the key."""
        return (key.table is not table and column.distinct <= 1.2 * key.column.distinct + 5
                and _shapes_fit(shape, self.shapes[key.kid]))

    def candidates(self, column: Column) -> Iterator[_Key]:
        """The keys sharing a meaningful word with ``column``, or named as it is (see ``name_score``),
        a key once for each word or name it shares."""
        for word in naming.meaningful(column.original or column.name):
            yield from self.by_word.get(word, ())
        for name in _own_names(column):
            yield from self.by_name.get(name, ())

    def named(self, table: Table, column: Column) -> bool:
        """Whether the names of some key vouch for ``column`` (``name_score`` above 0)."""
        shape, words = _shape(column), _NameWords.of_column(table, column)
        return any(self.plannable(table, column, shape, key) and _score(words, self.names[key.kid])
                   for key in self.candidates(column))

    def vouched(self, columns: Iterable[Column]) -> set[int]:
        """The keys whose names may vouch for some of ``columns``: one pass over their words and
        names, not over every (column, key) pair. A few keys that no column can hold are scanned
        too, at no cost to the result: they hold values of no column tried against them."""
        words: set[str] = set()
        names: set[str] = set()
        for column in columns:
            words |= naming.meaningful(column.original or column.name)
            names.update(_own_names(column))
        found = [*(self.by_word.get(w, ()) for w in words), *(self.by_name.get(n, ()) for n in names)]
        return {key.kid for keys in found for key in keys}

    def by_values(self, table: Table, column: Column) -> bool:
        """Whether values alone may join ``column`` to some key (see ``_by_values_possible``)."""
        shape = _shape(column)
        return any(self.plannable(table, column, shape, key) and _by_values_possible(column, key.column)
                   for key in self.valued.get((column.text, column.integer), ()))


def find_joins(con: duckdb.DuckDBPyConnection, tables: dict[str, Table]) -> list[Join]:
    """Likely joins of every table to the keys of the others (see the module docstring)."""
    keys = [_Key(0, t, (name,)) for t in tables.values() for name in t.unique]
    keys += [_Key(0, t, t.composite) for t in tables.values() if t.composite]
    keys = [_Key(i, k.table, k.columns) for i, k in enumerate(keys)]
    index = _KeyIndex([k for k in keys if len(k.columns) == 1])
    plans: dict[tuple[str, str], _Plan] = {}
    for table in tables.values():
        for column in table.columns.values():
            if not _sourceable(table, column):
                continue
            plan = _Plan(index.named(table, column), index.by_values(table, column))
            if plan.named or plan.by_values:
                plans[(table.name, column.name)] = plan
    if not plans:
        return _composite_joins(con, tables, keys)
    used = index.vouched(tables[t].columns[c] for (t, c), plan in plans.items() if plan.named)
    valued_types = {(tables[t].columns[c].text, tables[t].columns[c].integer) for (t, c), plan in plans.items()
                    if plan.by_values}
    used |= {key.kid for kind in valued_types for key in index.valued.get(kind, ())}
    try:
        _store_sketches(con, tables, plans)
        _store_keys(con, [index.keys[kid] for kid in sorted(used)])
        return _value_joins(con, tables, plans, index) + _composite_joins(con, tables, keys)
    finally:
        con.execute("DROP TABLE IF EXISTS _draft_keys")
        con.execute("DROP TABLE IF EXISTS _draft_sketches")


def _tried(table: Table, column: Column, plan: _Plan, found: dict[int, float],
           index: _KeyIndex) -> list[tuple[_Key, float]]:
    """The keys ``column`` is tried against, with their name scores, in key order: among the keys
    holding some of its values (no other can be accepted), those whose names vouch for it, and
    those that values alone may show it joins."""
    tried = []
    shape, words = _shape(column), _NameWords.of_column(table, column)
    for kid in found:
        key = index.keys.get(kid)
        if key is None or not index.plannable(table, column, shape, key):
            continue
        named = _score(words, index.names[kid]) if plan.named else 0.0
        if named:
            tried.append((key, named))
        elif plan.by_values and key.table.rows <= BIG_KEY and _by_values_possible(column, key.column):
            tried.append((key, 0.0))
    return sorted(tried, key=lambda pair: pair[0].kid)


def _value_joins(con: duckdb.DuckDBPyConnection, tables: dict[str, Table], plans: dict[tuple[str, str], _Plan],
                 index: _KeyIndex) -> list[Join]:
    """The best accepted key of each planned column (see the module docstring)."""
    found = _found(con)
    tried = {(table_name, column_name): _tried(tables[table_name], tables[table_name].columns[column_name], plan,
                                              found.get(sid, {}), index)
             for sid, ((table_name, column_name), plan) in enumerate(plans.items())}
    shares: dict[tuple[str, str, int], float] = {}
    chance: dict[tuple[str, str, int], float] = {}
    for sid, (table_name, column_name) in enumerate(plans):
        column = tables[table_name].columns[column_name]
        plan = tried[(table_name, column_name)]
        planned = {k.kid for k, _ in plan}
        for kid, share in found.get(sid, {}).items():
            if kid in planned:
                shares[(table_name, column_name, kid)] = share
        # Integers need chance ruled out unless the key has the very same name (hospitalid 1..n), or
        # its names explain every word of the column's and the column names most of its values
        # (visit numbers 1..n in enc -> enc_2023."visit#"; not a visit_number 1..3 -> visits.id).
        unsure = {k.kid for k, named in plan
                  if named < SAME_NAME and shares.get((table_name, column_name, k.kid), 0) >= NAMED_SHARE
                  and not (named and _explained(column, k) and 2 * column.distinct >= k.column.distinct)}
        if column.integer and unsure:
            for kid, share in found.get(-sid - 1, {}).items():
                if kid in unsure:
                    chance[(table_name, column_name, kid)] = share
    joins = []
    for (table_name, column_name), plan in tried.items():
        table, column = tables[table_name], tables[table_name].columns[column_name]
        accepted = []
        for key, named in plan:
            share = shares.get((table_name, column_name, key.kid), 0.0)
            by_chance = chance.get((table_name, column_name, key.kid), 0.0) >= CHANCE_SHARE
            by_values = not named and share >= VALUE_SHARE and not by_chance
            if (named and share >= NAMED_SHARE and not by_chance) or by_values:
                if _direction_holds(table, column, key, named):
                    accepted.append((key, named, share))
        if any(named for _, named, _ in accepted):
            accepted = [a for a in accepted if a[1]]  # a name that vouches beats values alone
        accepted = _entity_tables(column, accepted)
        if any(named >= SAME_NAME for _, named, _ in accepted):
            accepted = [a for a in accepted if a[1] >= SAME_NAME]  # the key's own name beats shared words
        accepted = _outermost(accepted, shares)
        if accepted:
            key, named, share = max(accepted, key=lambda a: (round(a[2], 2), a[1], a[0].column.distinct))
            joins.append(Join(table_name, column_name, key.table.name, key.columns[0], share, named > 0))
    return joins


def named_for(table: Table, column: Column) -> int | None:
    """How many words the name of ``table`` has beyond what ``column`` names (``person`` for
    ``person_id``: 0; ``patient_demographics`` for ``patient_id``: 1), or None when the table is
    not named for it: the table whose rows are the things the column identifies."""
    said = naming.meaningful(column.original or column.name)
    own = naming.meaningful(table.original or table.name)
    return len(own - said) if said and said <= own else None


def _entity_tables(column: Column, accepted: list[tuple[_Key, float, float]]) -> list[tuple[_Key, float, float]]:
    """The accepted keys in the tables most closely named for what ``column`` names, if any is;
    else all: values found in ``person`` make ``person_id`` refer to ``person``, even where the
    observation periods hold more person ids."""
    extra = {key.kid: named_for(key.table, column) for key, _, _ in accepted}
    closest = min((n for n in extra.values() if n is not None), default=None)
    return accepted if closest is None else [a for a in accepted if extra[a[0].kid] == closest]


def _direction_holds(table: Table, column: Column, key: _Key, named: float) -> bool:
    """A key refers to another key only if that one holds more (a one-row-per-stay score table
    refers to the stays), or the names say which side is the source. The key of a table named
    for what it identifies (``person.person_id``) refers only to a table named for it too."""
    if column.name not in table.unique:
        return True
    if named_for(table, column) is not None and named_for(key.table, key.column) is None:
        return False
    if column.name == table.key and named < SAME_NAME and not _explained(column, key):
        return False  # a table's own key joins others only where the names say so
    if key.column.distinct > column.distinct:
        return True
    own = naming.meaningful(table.original or table.name) & naming.meaningful(column.original or column.name)
    return named > 0 and not own


def _explained(column: Column, key: _Key) -> bool:
    """Whether every word ``column`` names is a word of ``key`` or of its table (``patient_key``
    -> ``patients.id``), not merely one of them (``IcuStayKey``, an intensive care unit stay, is
    no unit transfer)."""
    said = naming.meaningful(column.original or column.name)
    target = naming.meaningful(key.column.original or key.column.name)
    return bool(said) and said <= target | naming.meaningful(key.table.original or key.table.name)


def _outermost(accepted: list[tuple[_Key, float, float]],
               shares: dict[tuple[str, str, int], float]) -> list[tuple[_Key, float, float]]:
    """Drop a key whose own values lie inside another accepted key: the outer one is the entity."""
    kept = []
    for key, named, share in accepted:
        inner = any(other is not key and other.column.distinct > key.column.distinct
                    and shares.get((key.table.name, key.columns[0], other.kid), 0.0) >= NAMED_SHARE
                    for other, _, _ in accepted)
        if not inner:
            kept.append((key, named, share))
    return kept


def _store_sketches(con: duckdb.DuckDBPyConnection, tables: dict[str, Table],
                    plans: dict[tuple[str, str], _Plan]) -> None:
    """The sketch of each planned column (``sid`` its position in ``plans``) and, for an integer
    column, evenly spread integers over its range (``-sid - 1``): what the keys are probed with.
    A batch of columns per query, as for the keys (one statement per column costs more than its
    scan on a warehouse of small tables)."""
    con.execute("CREATE OR REPLACE TEMP TABLE _draft_sketches (sid INTEGER, h UBIGINT)")
    parts, sampling = [], []  # the statements' parts, and whether each samples its table
    for sid, (table_name, column_name) in enumerate(plans):
        table = tables[table_name]
        column = table.columns[column_name]
        parts.append(f"SELECT {sid} AS sid, h FROM ({_sample(table, column, column.as_key())})")
        sampling.append(table.rows > BIG_TABLE)
        if column.integer and column.low is not None and column.high is not None:
            low, high = int(cast(SupportsInt, column.low)), int(cast(SupportsInt, column.high))
            parts.append(f"SELECT DISTINCT {-sid - 1} AS sid, "
                         f"hash(({low} + (i * ({high} - {low})) // {CHANCE_PROBES - 1})::BIGINT) AS h "
                         f"FROM range({CHANCE_PROBES}) t(i)")
            sampling.append(False)
    for first in range(0, len(parts), SCANS_PER_QUERY):
        with one_thread(con, needed=any(sampling[first:first + SCANS_PER_QUERY])):
            con.execute("INSERT INTO _draft_sketches " + " UNION ALL ".join(parts[first:first + SCANS_PER_QUERY]))


def _store_keys(con: duckdb.DuckDBPyConnection, keys: list[_Key]) -> None:
    """The hashes of the keys' values that some sketch holds (one scan of each key column), a batch
    of keys per query: one union of thousands of scans (a warehouse of 1,500 tables) holds a buffer
    per scan and runs out of the drafting memory."""
    con.execute("CREATE OR REPLACE TEMP TABLE _draft_keys (kid INTEGER, h UBIGINT)")
    for first in range(0, len(keys), SCANS_PER_QUERY):
        parts = [f"SELECT {k.kid} AS kid, hash({k.column.as_key()}) AS h FROM {quote(k.table.name)}"
                 for k in keys[first:first + SCANS_PER_QUERY]]
        con.execute("INSERT INTO _draft_keys SELECT DISTINCT kid, h "
                    f"FROM ({' UNION ALL '.join(parts)}) WHERE h IN (SELECT h FROM _draft_sketches)")


def _found(con: duckdb.DuckDBPyConnection) -> dict[int, dict[int, float]]:
    """Sketch id -> key id -> the share of the sketch's values found in the key."""
    rows = con.execute(
        "WITH totals AS (SELECT sid, count(*) AS n FROM _draft_sketches GROUP BY sid) "
        "SELECT s.sid, k.kid, count(*) / any_value(t.n) FROM _draft_sketches s JOIN _draft_keys k ON s.h = k.h "
        "JOIN totals t ON t.sid = s.sid GROUP BY s.sid, k.kid").fetchall()
    found: dict[int, dict[int, float]] = {}
    for sid, kid, share in rows:
        found.setdefault(int(sid), {})[int(kid)] = float(share)
    return found


def _sample(table: Table, column: Column, expression: str) -> str:
    """Distinct hashes of a column's values, the SKETCH smallest (a bottom-k sketch)."""
    c = quote(column.name)
    source = sampled(table.name, table.rows, BIG_TABLE)
    where = f"{c} IS NOT NULL"
    if column.text and 0 < column.opaque < 0.99 and column.opaque >= 0.1:
        # Placeholders such as '0' for "none" are left out: only identifier-like values count.
        where += f" AND regexp_full_match({c}::VARCHAR, '{OPAQUE}')"
    return (f"SELECT h FROM (SELECT DISTINCT hash({expression}) AS h FROM {source} WHERE {where}) "
            f"ORDER BY h LIMIT {SKETCH}")


def _composite_joins(con: duckdb.DuckDBPyConnection, tables: dict[str, Table], keys: list[_Key]) -> list[Join]:
    """Joins to two-column keys: a code named like the key's code and a qualifier whose few
    values are the key's qualifier values, together found in the key."""
    joins = []
    for key in (k for k in keys if len(k.columns) == 2):
        code, qualifier = (key.table.columns[c] for c in key.columns)
        allowed = _values(con, key.table.name, qualifier.name)
        pairs = f"hash({code.as_key()}, {qualifier.as_key()})"
        for table in tables.values():
            if table is key.table:
                continue
            codes = [c for c in table.columns.values() if _sourceable(table, c) and _compatible(c, code)
                     and name_score(table, c, _Key(key.kid, key.table, (code.name,)))]
            qualifiers = [c for c in table.columns.values() if (c.text or c.integer)
                          and c.non_null and c.distinct <= 50 and c.text == qualifier.text
                          and (c.name == qualifier.name or set(_values(con, table.name, c.name)) <= allowed)]
            best = None
            for first in codes:
                for second in qualifiers:
                    if second is first:
                        continue
                    expression = f"{first.as_key()}, {second.as_key()}"
                    sample = _sample(table, first, expression)
                    with one_thread(con, needed=table.rows > BIG_TABLE):
                        found, total = con.execute(
                            f"WITH s AS ({sample}) SELECT count(k.h), count(*) FROM s LEFT JOIN "
                            f"(SELECT DISTINCT {pairs} AS h FROM {quote(key.table.name)}) k ON s.h = k.h"
                        ).fetchall()[0]
                    share = found / total if total else 0.0
                    if share >= NAMED_SHARE and (best is None or share > best.share):
                        best = Join(table.name, first.name, key.table.name, code.name, share, True,
                                    also=((second.name, qualifier.name),))
            if best:
                joins.append(best)
    return joins


def _values(con: duckdb.DuckDBPyConnection, table: str, column: str) -> set[str]:
    rows = con.execute(f"SELECT DISTINCT {quote(column)}::VARCHAR FROM {quote(table)} "
                       f"WHERE {quote(column)} IS NOT NULL LIMIT 51").fetchall()
    return {row[0] for row in rows}
