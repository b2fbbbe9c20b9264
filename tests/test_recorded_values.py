"""The names of the codes each table records (``agent.recorded_values``), read several queries to a
statement: the same names as read one query at a time, on Eunomia (whose empty tables keep text
placeholder columns that cannot be compared with the concept ids), and a statement holding a query
that cannot run still gives the other queries' values."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import ehr_magic
from ehr_magic.agent import recorded_values


def _names(ehr) -> dict[str, tuple[bool, tuple[str, ...]]]:
    knowledge = ehr.knowledge
    return {found.table: (found.by_hierarchy, found.vocabulary.values)
            for found in recorded_values._read(ehr, knowledge.tables, knowledge.hierarchy)}


def test_names_read_in_batches_are_those_read_one_query_at_a_time(eunomia_db: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with ehr_magic.connect(eunomia_db) as ehr:
        batched = _names(ehr)
        monkeypatch.setattr(recorded_values, "_QUERIES_PER_STATEMENT", 1)
        one_by_one = _names(ehr)
    assert batched == one_by_one
    assert {"condition_occurrence", "drug_exposure", "measurement"} <= set(batched)
    assert "Acute viral pharyngitis" in batched["condition_occurrence"][1]
    assert batched["drug_exposure"][0]  # products are asked about by their ingredients too


def test_a_statement_with_a_query_that_cannot_run_keeps_the_others_values(tmp_path: Path) -> None:
    path = tmp_path / "codes.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE dictionary AS SELECT * FROM (VALUES (1, 'fever'), (2, 'cough'), (3, 'rash')) "
                    "AS t(code, name)")
        con.execute("CREATE TABLE visits AS SELECT * FROM (VALUES (1), (3)) AS t(code)")
    good = ("SELECT DISTINCT CAST(d.name AS VARCHAR) AS v FROM dictionary AS d "
            "WHERE d.code IN (SELECT code FROM visits)")
    broken = good.replace("SELECT code FROM visits", "SELECT nope FROM visits")
    with ehr_magic.connect(path) as ehr:
        read = recorded_values._read_values(ehr, [(good, False), (broken, False), (good, False), (broken, True)])
    assert [sorted(values) for values in read] == [["fever", "rash"], [], ["fever", "rash"], []]
