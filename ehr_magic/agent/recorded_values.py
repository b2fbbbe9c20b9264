"""The names of the codes each table records, for table choice.

A dictionary that many tables join (OMOP's concept: every ``*_concept_id`` column of every clinical
table holds its ids) says through its values what a question is about ('sinusitis' is a concept
name), but not which of the tables that join it records such codes: the question "how many
patients had sinusitis" names neither condition_occurrence nor a word of its description. So each
table joining such a dictionary on the dictionary's key gets, as a value column of its own, the
dictionary's names of the codes it holds: condition_occurrence's are the names of the conditions
it records, drug_exposure's those of the drugs. A table then scores by what the question says of
them, as it would by its own stored values.

Read once per connection: one query per joining table (several to a statement), over at most
``ROWS`` of its rows, so a table of a billion rows costs what one of a few million does. Rules of
the knowledge only: a dictionary is a described table with a key and lookup columns that joins
nothing itself; a table joins it when one of its joins reads ``<dictionary> ON <column> = <dictionary>.<key>`` (or ``ON
<key>``). Tables of the dictionary's own module (OMOP's synonyms, ancestors, relationships) describe
the dictionary rather than record its codes; one that joins only the dictionary and has lookup columns
(OMOP's concept_synonym) lends its other names of the same codes ('stroke' for a cerebrovascular
accident). A table derived from another that records them (``derived_from``: OMOP's eras) summarises
its source's codes: it is left out. A table whose codes questions name by a broader one
(``by_hierarchy``: OMOP's drug products, asked about by ingredient) gets the names of the codes above
its own in the knowledge's ``hierarchy`` too.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ehr_magic.engines import QUERY_FAILURES
from ehr_magic.identifiers import quote_identifier
from ehr_magic.knowledge.handle import Database
from ehr_magic.knowledge.model import Hierarchy
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.safety import limits

__all__ = ["ROWS", "RecordedNames", "recorded_vocabularies"]

ROWS = 5_000_000  # rows of a joining table read, at most
_QUERIES_PER_STATEMENT = 8  # value queries run as one statement (see _read_values)
_MIN_REFERRERS = 4  # a dictionary joined from fewer brings them all already (table_choice._MAX_REFERRERS)
_KEY_JOIN = re.compile(r"^\s*(\w+)\s+ON\s+(?:(\w+)|(?:\w+\.)?(\w+)\s*=\s*(\w+)\.(\w+))\s*$", re.IGNORECASE)

_found: weakref.WeakKeyDictionary[Database, list[RecordedNames]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@dataclass(frozen=True)
class RecordedNames:
    """The names of the codes ``table`` records, and with ``by_hierarchy`` of the codes above them."""

    table: str
    vocabulary: Vocabulary
    by_hierarchy: bool = False


def recorded_vocabularies(ehr: Database, described: Mapping[str, Any], hierarchy: Hierarchy | None = None
                          ) -> list[RecordedNames]:
    """For each table joining a dictionary of many referrers on its key, the dictionary's lookup
    values (and the other names of its satellite tables: OMOP's synonyms) of the codes that table
    holds, and for a table marked ``by_hierarchy`` those of the codes above them in ``hierarchy``
    too (read once per connection)."""
    with _lock:
        found = _found.get(ehr)
        if found is None:
            found = _found[ehr] = _read(ehr, described, hierarchy if hierarchy and hierarchy.table in described
                                        else None)
        return found


def _read(ehr: Database, described: Mapping[str, Any], hierarchy: Hierarchy | None) -> list[RecordedNames]:
    joins: dict[str, list[tuple[str, str]]] = {}  # dictionary -> (table, its column) joining its key
    names: dict[str, list[tuple[str, str, str]]] = {}  # dictionary -> (table, key column, name column) of other names
    for table, info in described.items():
        for join in info.joins:
            match = _KEY_JOIN.match(join)
            if match is None:
                continue
            target, same, column, side, key = match.groups()
            column, side, key = (same, target, same) if same else (column, side, key)
            dictionary = described.get(target)
            if (dictionary is not None and side.lower() == target.lower() and dictionary.key
                    and key.lower() == dictionary.key.lower() and dictionary.vocabulary
                    and not dictionary.join_targets and target != table):
                if dictionary.module is None or info.module != dictionary.module:
                    joins.setdefault(target, []).append((table, column))
                elif info.join_targets == (target,):  # OMOP's concept_synonym: more names of the same entries
                    names.setdefault(target, []).extend((table, column, name) for name in info.vocabulary)
    wanted: list[tuple[str, bool, list[int]]] = []  # (table, by hierarchy, its queries)
    queries: list[tuple[str, bool]] = []  # (query, to run alone)
    for dictionary, referrers in joins.items():
        if len({table for table, _ in referrers}) < _MIN_REFERRERS:
            continue
        info = described[dictionary]
        sources = {table for table, _ in referrers}
        for table, column in referrers:
            if described[table].derived_from in sources:
                continue  # its codes are its source's (condition_era's are condition_occurrence's): named there
            above = hierarchy if described[table].by_hierarchy else None
            reads = [(dictionary, info.key, value_column) for value_column in info.vocabulary]
            reads += [(names_table, names_key, name_column)
                      for names_table, names_key, name_column in names.get(dictionary, ())]
            mine = []
            for read_table, read_key, read_column in reads:
                query = _values_query(ehr, read_table, read_key, read_column, table, column, above)
                if query is not None:
                    mine.append(len(queries))
                    queries.append(query)
            wanted.append((table, above is not None, mine))
    read = _read_values(ehr, queries)
    found = []
    for table, by_hierarchy, mine in wanted:
        values = {value for index in mine for value in read[index]}
        if values:
            found.append(RecordedNames(table, Vocabulary.build(sorted(values)), by_hierarchy))
    return found


def _read_values(ehr: Database, queries: list[tuple[str, bool]]) -> list[list[str]]:
    """The values each query reads, ``_QUERIES_PER_STATEMENT`` queries to a statement (a
    warehouse's dictionary may be joined by thousands of tables, and each statement costs a round
    trip), those marked to run alone one to a statement. A statement that fails is read query by
    query, so that one query that cannot run (a table that cannot be read) costs only its own values."""
    read: list[list[str]] = [[] for _ in queries]
    together = [i for i, (_, alone) in enumerate(queries) if not alone]
    batches = [together[first:first + _QUERIES_PER_STATEMENT]
               for first in range(0, len(together), _QUERIES_PER_STATEMENT)]
    batches += [[i] for i, (_, alone) in enumerate(queries) if alone]
    for batch in batches:
        statement = " UNION ALL ".join(f"SELECT {i} AS q, v FROM ({queries[i][0]}) AS r{i}" for i in batch)
        try:
            with limits.row_cap(None):  # our own read for an index, not generated code's
                rows = ehr.sql(statement).rows()
        except QUERY_FAILURES:
            for i in batch if len(batch) > 1 else ():
                read[i] = _read_values(ehr, [(queries[i][0], True)])[0]
            continue
        for index, value in rows:
            read[int(index)].append(value)
    return read


def _values_query(ehr: Database, dictionary: str, key: str, value_column: str, table: str, column: str,
                  hierarchy: Hierarchy | None) -> tuple[str, bool] | None:
    """The query of the dictionary's ``value_column`` values of the codes ``table.column`` holds
    (read from at most ``ROWS`` of its rows), and whether it is to run alone: it compares text with
    numbers (an empty table exported with text placeholder columns), which most engines refuse.
    None where a column is not in this database."""
    tables = (dictionary, table, *((hierarchy.table,) if hierarchy else ()))
    types = {t: ehr.columns(t) for t in tables}
    names = {t: {c.lower(): c for c in types[t]} for t in tables}
    stored_key, stored_value = names[dictionary].get(key.lower()), names[dictionary].get(value_column.lower())
    stored_column = names[table].get(column.lower())
    if stored_key is None or stored_value is None or stored_column is None:
        return None  # not in this database (a table exported empty keeps only placeholder columns)
    key, value_column, column = stored_key, stored_value, stored_column  # as the database spells them
    compared = [(types[dictionary][key], types[table][column])]
    q = quote_identifier
    held = f"(SELECT {q(column)} FROM (SELECT {q(column)} FROM {q(table)} LIMIT {ROWS}) AS r)"
    codes = f"d.{q(key)} IN {held}"
    if hierarchy is not None:
        above = names[hierarchy.table].get(hierarchy.broader.lower())
        below = names[hierarchy.table].get(hierarchy.narrower.lower())
        if above is not None and below is not None:  # and the codes above them: ingredients of products
            codes = (f"({codes} OR d.{q(key)} IN (SELECT h.{q(above)} FROM {q(hierarchy.table)} AS h "
                     f"WHERE h.{q(below)} IN {held}))")
            compared += [(types[dictionary][key], types[hierarchy.table][above]),
                         (types[hierarchy.table][below], types[table][column])]
    alone = any(_text(one) != _text(other) for one, other in compared)
    return (f"SELECT DISTINCT CAST(d.{q(value_column)} AS VARCHAR) AS v FROM {q(dictionary)} AS d "
            f"WHERE d.{q(value_column)} IS NOT NULL AND {codes}"), alone


def _text(dtype: str) -> bool:
    return dtype.upper().startswith(("VARCHAR", "TEXT", "STRING", "CHAR"))
