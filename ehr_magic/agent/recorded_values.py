"""The names of the codes each table records, for table choice.

A dictionary that many tables join (OMOP's concept: every ``*_concept_id`` column of every clinical
table holds its ids) says through its values what a question is about ('sinusitis' is a concept
name), but not which of the tables that join it records such codes: the question "how many
patients had sinusitis" names neither condition_occurrence nor a word of its description. So each
table joining such a dictionary on the dictionary's key gets, as a value column of its own, the
dictionary's names of the codes it holds: condition_occurrence's are the names of the conditions
it records, drug_exposure's those of the drugs. A table then scores by what the question says of
them, as it would by its own stored values.

Read once per connection: one query per joining table, over at most ``ROWS`` of its rows, so a
table of a billion rows costs what one of a few million does. Rules of the knowledge only: a
dictionary is a described table with a key and lookup columns that joins nothing itself; a table
joins it when one of its joins reads ``<dictionary> ON <column> = <dictionary>.<key>`` (or ``ON
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
from ehr_magic.knowledge.model import Hierarchy
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.safety import limits

__all__ = ["ROWS", "RecordedNames", "recorded_vocabularies"]

ROWS = 5_000_000  # rows of a joining table read, at most
_MIN_REFERRERS = 4  # a dictionary joined from fewer brings them all already (table_choice._MAX_REFERRERS)
_KEY_JOIN = re.compile(r"^\s*(\w+)\s+ON\s+(?:(\w+)|(?:\w+\.)?(\w+)\s*=\s*(\w+)\.(\w+))\s*$", re.IGNORECASE)

_found: weakref.WeakKeyDictionary[Any, list[RecordedNames]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@dataclass(frozen=True)
class RecordedNames:
    """The names of the codes ``table`` records, and with ``by_hierarchy`` of the codes above them."""

    table: str
    vocabulary: Vocabulary
    by_hierarchy: bool = False


def recorded_vocabularies(ehr: Any, described: Mapping[str, Any], hierarchy: Hierarchy | None = None
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


def _read(ehr: Any, described: Mapping[str, Any], hierarchy: Hierarchy | None) -> list[RecordedNames]:
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
    found = []
    for dictionary, referrers in joins.items():
        if len({table for table, _ in referrers}) < _MIN_REFERRERS:
            continue
        info = described[dictionary]
        sources = {table for table, _ in referrers}
        for table, column in referrers:
            if described[table].derived_from in sources:
                continue  # its codes are its source's (condition_era's are condition_occurrence's): named there
            above = hierarchy if described[table].by_hierarchy else None
            values: set[str] = set()
            for value_column in info.vocabulary:
                values.update(_values(ehr, dictionary, info.key, value_column, table, column, above))
            for names_table, names_key, name_column in names.get(dictionary, ()):
                values.update(_values(ehr, names_table, names_key, name_column, table, column, above))
            if values:
                found.append(RecordedNames(table, Vocabulary.build(sorted(values)), above is not None))
    return found


def _values(ehr: Any, dictionary: str, key: str, value_column: str, table: str, column: str,
            hierarchy: Hierarchy | None) -> list[str]:
    tables = (dictionary, table, *((hierarchy.table,) if hierarchy else ()))
    names = {t: {c.lower(): c for c in ehr.columns(t)} for t in tables}
    stored_key, stored_value = names[dictionary].get(key.lower()), names[dictionary].get(value_column.lower())
    stored_column = names[table].get(column.lower())
    if stored_key is None or stored_value is None or stored_column is None:
        return []  # not in this database (a table exported empty keeps only placeholder columns)
    key, value_column, column = stored_key, stored_value, stored_column  # as the database spells them
    q = quote_identifier
    held = f"(SELECT {q(column)} FROM (SELECT {q(column)} FROM {q(table)} LIMIT {ROWS}) AS r)"
    codes = f"d.{q(key)} IN {held}"
    if hierarchy is not None:
        above = names[hierarchy.table].get(hierarchy.broader.lower())
        below = names[hierarchy.table].get(hierarchy.narrower.lower())
        if above is not None and below is not None:  # and the codes above them: ingredients of products
            codes = (f"({codes} OR d.{q(key)} IN (SELECT h.{q(above)} FROM {q(hierarchy.table)} AS h "
                     f"WHERE h.{q(below)} IN {held}))")
    query = (f"SELECT DISTINCT CAST(d.{q(value_column)} AS VARCHAR) AS v FROM {q(dictionary)} AS d "
             f"WHERE d.{q(value_column)} IS NOT NULL AND {codes}")
    try:
        with limits.row_cap(None):  # our own read for an index, not generated code's
            frame = ehr.sql(query)
    except QUERY_FAILURES:  # a join column of another type, a table that cannot be read: no values
        return []
    return sorted(frame["v"].to_list())
