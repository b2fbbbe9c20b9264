"""Tables whose only row repeats their header: an export's mistake, treated as empty.

A table exported empty to CSV and loaded with "no header" holds one row, its own header,
under placeholder names (``column0``, ``column1``... or ``column00``...), every column
text. Such a table is empty: ``EHR`` shows it with its real column names (read from that
row) and no rows, and every query that names it reads an empty table of those columns.
A recovered column takes the type of a column of the same name elsewhere in the database
(``person_id`` is BIGINT where it has values), so joins to it still bind; else text.

Only a table whose every column is a text placeholder, with exactly one row whose values
all read as distinct column names, is taken for one: a real one-row table keeps its row.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

_PLACEHOLDER = re.compile(r"^column\d+$", re.IGNORECASE)
_COLUMN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

FirstRows = Callable[[str], list[tuple]]  # table -> its first (at most two) rows


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def find(columns: Mapping[str, Mapping[str, str]], first_rows: FirstRows) -> dict[str, dict[str, str]]:
    """``table -> {recovered column: type}`` of every table holding only its header row."""
    candidates = [table for table, types in columns.items()
                  if types and all(_PLACEHOLDER.match(c) and dtype.startswith("VARCHAR") for c, dtype in types.items())]
    if not candidates:
        return {}
    known: dict[str, Counter[str]] = {}
    for table, types in columns.items():
        if table not in candidates:
            for column, dtype in types.items():
                known.setdefault(column.lower(), Counter())[dtype] += 1
    found: dict[str, dict[str, str]] = {}
    for table in candidates:
        rows = first_rows(table)
        if len(rows) != 1:
            continue
        stripped = [value.strip() if isinstance(value, str) else None for value in rows[0]]
        names = [name for name in stripped if name and _COLUMN_NAME.match(name)]
        if len(names) != len(stripped):  # a cell that is empty, not text, or no column name
            continue
        if len({name.lower() for name in names}) != len(names) or all(_PLACEHOLDER.match(n) for n in names):
            continue
        found[table] = {name: (known[name.lower()].most_common(1)[0][0] if name.lower() in known else "VARCHAR")
                        for name in names}
    return found


def empty_select(columns: Mapping[str, str]) -> str:
    """DuckDB SQL of an empty table with these columns and types."""
    parts = ", ".join(f"CAST(NULL AS {dtype}) AS {_quote(name)}" for name, dtype in columns.items())
    return f"SELECT {parts} WHERE false"


class EmptyTables:
    """Reads of the header-only tables, rewritten to read empty tables of their real columns."""

    def __init__(self, tables: Mapping[str, Mapping[str, str]]) -> None:
        self.tables = {name: dict(columns) for name, columns in tables.items()}
        self._lower = {name.lower(): name for name in self.tables}
        self._mentions = (re.compile(r"\b(" + "|".join(re.escape(n) for n in self.tables) + r")\b", re.IGNORECASE)
                          if self.tables else None)

    def __bool__(self) -> bool:
        return bool(self.tables)

    def rewrite(self, sql: str) -> str:
        """``sql`` (DuckDB) with each header-only table it reads replaced by an empty one;
        unchanged when it names none of them (or cannot be parsed: the engine then says why)."""
        if self._mentions is None or not self._mentions.search(sql):
            return sql
        try:
            tree = sqlglot.parse_one(sql, read="duckdb")
        except SqlglotError:
            return sql
        if tree is None:
            return sql
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        changed = False

        def swap(node: exp.Expression) -> exp.Expression:
            nonlocal changed
            if not isinstance(node, exp.Table) or node.args.get("db") or not isinstance(node.this, exp.Identifier):
                return node
            table = self._lower.get(node.name.lower())
            if table is None or node.name.lower() in ctes:
                return node
            changed = True
            alias = node.alias or node.name
            empty = sqlglot.parse_one(empty_select(self.tables[table]), read="duckdb")
            return exp.Subquery(this=empty, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))

        tree = tree.transform(swap)
        return tree.sql(dialect="duckdb") if changed else sql

    def report(self) -> str:
        """One sentence for the connect report ("" when there are none)."""
        if not self.tables:
            return ""
        names = sorted(self.tables)
        n = len(names)
        held = "holds only its header row" if n == 1 else "hold only their header row"
        table = "table" if n == 1 else "tables"
        return f"{n} {table} {held}; treated as empty: {', '.join(names)}."
