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
the dictionary rather than record its codes, and a table derived from another that records them
(``derived_from``: OMOP's eras) summarises its source's codes: both are left out. A table whose codes
questions name by a broader one (``by_hierarchy``: OMOP's drug products, asked about by ingredient)
gets the names of the codes above its own in the knowledge's ``hierarchy`` too.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Mapping
from typing import Any

from ehr_magic.engines import QUERY_FAILURES
from ehr_magic.knowledge.model import Hierarchy
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.safety import limits

__all__ = ["ROWS", "recorded_vocabularies"]

ROWS = 5_000_000  # rows of a joining table read, at most
_MIN_REFERRERS = 4  # a dictionary joined from fewer brings them all already (table_choice._MAX_REFERRERS)
_KEY_JOIN = re.compile(r"^\s*(\w+)\s+ON\s+(?:(\w+)|(?:\w+\.)?(\w+)\s*=\s*(\w+)\.(\w+))\s*$", re.IGNORECASE)

_found: weakref.WeakKeyDictionary[Any, list[tuple[str, Vocabulary]]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def recorded_vocabularies(ehr: Any, described: Mapping[str, Any], hierarchy: Hierarchy | None = None
                          ) -> list[tuple[str, Vocabulary]]:
    """``(table, vocabulary)``: for each table joining a dictionary of many referrers on its key,
    the dictionary's lookup values of the codes that table holds, and for a table marked
    ``by_hierarchy`` of the codes above them in ``hierarchy`` too (read once per connection)."""
    with _lock:
        found = _found.get(ehr)
        if found is None:
            found = _found[ehr] = _read(ehr, described, hierarchy if hierarchy and hierarchy.table in described
                                        else None)
        return found


def _read(ehr: Any, described: Mapping[str, Any], hierarchy: Hierarchy | None) -> list[tuple[str, Vocabulary]]:
    joins: dict[str, list[tuple[str, str]]] = {}  # dictionary -> (table, its column) joining its key
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
                    and not dictionary.join_targets and target != table
                    and (dictionary.module is None or info.module != dictionary.module)):
                joins.setdefault(target, []).append((table, column))
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
            for value_column in info.vocabulary:
                values = _values(ehr, dictionary, info.key, value_column, table, column, above)
                if values:
                    found.append((table, Vocabulary.build(values)))
    return found


def _values(ehr: Any, dictionary: str, key: str, value_column: str, table: str, column: str,
            hierarchy: Hierarchy | None) -> list[str]:
    tables = (dictionary, table, *((hierarchy.table,) if hierarchy else ()))
    names = {t: {c.lower(): c for c in ehr.columns(t)} for t in tables}
    key, value_column, column = names[dictionary].get(key.lower()), names[dictionary].get(value_column.lower()), \
        names[table].get(column.lower())
    if key is None or value_column is None or column is None:
        return []  # not in this database (a table exported empty keeps only placeholder columns)
    held = f'(SELECT "{column}" FROM (SELECT "{column}" FROM "{table}" LIMIT {ROWS}) AS r)'
    codes = f'd."{key}" IN {held}'
    if hierarchy is not None:
        broader = names[hierarchy.table].get(hierarchy.broader.lower())
        narrower = names[hierarchy.table].get(hierarchy.narrower.lower())
        if broader is not None and narrower is not None:  # and the codes above them: ingredients of products
            codes = (f'({codes} OR d."{key}" IN (SELECT h."{broader}" FROM "{hierarchy.table}" AS h '
                     f'WHERE h."{narrower}" IN {held}))')
    query = (f'SELECT DISTINCT CAST(d."{value_column}" AS VARCHAR) AS v FROM "{dictionary}" AS d '
             f'WHERE d."{value_column}" IS NOT NULL AND {codes}')
    try:
        with limits.row_cap(None):  # our own read for an index, not generated code's
            frame = ehr.sql(query)
    except QUERY_FAILURES:  # a join column of another type, a table that cannot be read: no values
        return []
    return sorted(frame["v"].to_list())
