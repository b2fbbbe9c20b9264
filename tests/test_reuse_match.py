"""Reusing remembered cells end to end: matching, confidence, abstention with reasons
(ehr_magic.reuse.match / reuser)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ehr_magic.db import connect
from ehr_magic.memory import MemoryStore
from ehr_magic.reuse import Reuser


def sql_cell(sql: str) -> str:
    return f'answer = ehr.sql("""\n{sql}\n""")'


LAST_LAB = sql_cell(
    "SELECT labevents.valuenum FROM labevents WHERE labevents.hadm_id IN (SELECT admissions.hadm_id FROM admissions "
    "WHERE admissions.subject_id = {patient}) AND labevents.itemid IN (SELECT d_labitems.itemid FROM d_labitems "
    "WHERE d_labitems.label = '{lab}') ORDER BY labevents.charttime DESC LIMIT 1")
FIRST_LAB = LAST_LAB.replace("DESC", "ASC")
ROUTE = sql_cell("SELECT DISTINCT prescriptions.route FROM prescriptions WHERE prescriptions.drug = '{drug}'")
NO_FIT = "no remembered cell fits this question's values and words"
COUNT_SINCE = sql_cell("SELECT COUNT(*) FROM admissions WHERE admissions.subject_id = {patient} "
                       "AND admissions.admittime >= CAST('2100-09-30 23:59:00' AS TIMESTAMP)")


@pytest.fixture(scope="module")
def ehr(ehrsql_db: Path):
    with connect(ehrsql_db) as ehr:
        yield ehr


@pytest.fixture()
def store(tmp_path: Path) -> MemoryStore:
    with MemoryStore(tmp_path / "memory.sqlite") as store:
        yield store


@pytest.fixture()
def reuser(ehr, store) -> Reuser:
    schema = ehr.schema
    store.add("What was the last RDW of patient 10004235?", LAST_LAB.format(patient=10004235, lab="rdw"),
              schema=schema)
    store.add("What was the first glucose value of patient 10004235?", FIRST_LAB.format(patient=10004235,
                                                                                       lab="glucose"), schema=schema)
    store.add("How is trazodone typically taken?", ROUTE.format(drug="trazodone"), schema=schema)
    store.add("How many times was patient 10004235 admitted since 3 months ago?",
              COUNT_SINCE.format(patient=10004235), schema=schema)
    return Reuser.from_store(ehr, store)


def test_reuse_with_substitution_answers_and_says_what_changed(ehr, reuser) -> None:
    result = reuser.answer("What was the last hemoglobin of patient 10010471?")
    assert result.answered, result.reason
    assert result.substitutions == [("hemoglobin", "rdw"), ("10010471", "10004235")]
    assert result.message.startswith(f"reused accepted cell #{result.entry_id} with: hemoglobin <- rdw, "
                                      "10010471 <- 10004235")
    expected = ehr.sql(LAST_LAB.format(patient=10010471, lab="hemoglobin").split('"""')[1])
    assert result.answer.equals(expected)


def test_paraphrase_and_spelling_are_tolerated(reuser) -> None:
    result = reuser.answer("How is Aspirin usually taken?")
    assert result.answered and result.substitutions == [("aspirin", "trazodone")]


def refusals(reuser: Reuser, question: str) -> list[str]:
    """Why each remembered cell the question's values fit was refused."""
    trace: list = []
    reuser.index.candidates(question, trace, fuzzy=True)
    return [why for _, _, why in trace]


def test_two_equally_close_drug_names_mean_no_reuse(reuser) -> None:
    result = reuser.answer("How is metoprolol typically taken?")  # metoprolol tartrate or succinate xl?
    assert not result.answered and result.reason == NO_FIT
    assert refusals(reuser, "How is metoprolol typically taken?") == []  # no drug value found, so no cell fits
    assert reuser.answer("How is metoprolol tartrate typically taken?").answered  # either one, named, is reused


def test_first_and_last_are_not_confused(reuser) -> None:
    result = reuser.answer("What was the first RDW of patient 10010471?")  # only last-RDW and first-glucose cells
    assert result.answered and "ASC" in result.code and "'rdw'" in result.code


def test_a_value_the_cell_does_not_use_blocks_reuse(reuser) -> None:
    result = reuser.answer("What was the last RDW of patient 10010471 in 2100?")  # the cell has no time filter
    assert not result.answered and result.reason == NO_FIT
    assert refusals(reuser, "What was the last RDW of patient 10010471 in 2100?") == []  # no cell has a slot for it


def test_time_values_are_substituted(reuser) -> None:
    result = reuser.answer("How many times was patient 10010471 admitted since 5 months ago?")
    assert result.answered and "CAST('2100-07-31 23:59:00' AS TIMESTAMP)" in result.code


def test_nonexistent_patient_is_unanswerable_with_the_reason(reuser) -> None:
    result = reuser.answer("What was the last RDW of patient 15257?")
    assert not result.answered and result.unanswerable
    assert "no patient 15257" in result.reason


def test_data_the_schema_does_not_hold_is_abstained_with_the_reason(reuser) -> None:
    result = reuser.answer("What is the phone number of patient 10004235?")
    assert not result.answered
    assert "asks about 'phone', which is in no remembered question and no table or column name or description" \
        in result.reason


def test_future_times_are_unanswerable(reuser) -> None:
    result = reuser.answer("How many times was patient 10010471 admitted in 2101?")
    assert result.unanswerable and "2101" in result.reason


def test_newly_accepted_cells_are_used_at_once(ehr, store, reuser) -> None:
    before = reuser.answer("How many prescriptions of insulin are there?")
    assert not before.answered and before.reason == NO_FIT
    store.add("How many prescriptions of heparin are there?",
              sql_cell("SELECT COUNT(*) FROM prescriptions WHERE prescriptions.drug = 'heparin'"), schema=ehr.schema)
    result = reuser.answer("How many prescriptions of insulin are there?")
    assert result.answered and result.substitutions == [("insulin", "heparin")]


def test_unconfirmed_cells_are_not_reused(ehr, store, reuser) -> None:
    unconfirmed = store.add("How many prescriptions of heparin are there?",
              sql_cell("SELECT COUNT(*) FROM prescriptions WHERE prescriptions.drug = 'heparin'"), schema=ehr.schema,
              origin="auto")
    result = reuser.answer("How many prescriptions of insulin are there?")
    assert not result.answered and result.reason == NO_FIT
    assert unconfirmed not in reuser.index.templates  # the unconfirmed cell is not even indexed


@pytest.fixture()
def tiny_ehr(tmp_path: Path):
    """A three-table EHR built here, with no knowledge file: everything reuse knows about
    its columns comes from the remembered cell's code."""
    from ehr_magic.db.build import building, write_metadata

    path = tmp_path / "tiny.duckdb"
    with building(path) as con:
        con.execute("CREATE TABLE patients (subject_id BIGINT)")
        con.execute("INSERT INTO patients VALUES (1), (2)")
        con.execute("CREATE TABLE prescriptions (subject_id BIGINT, drug VARCHAR, route VARCHAR)")
        con.execute("INSERT INTO prescriptions VALUES (1, 'acetaminophen 300 mg', 'po'), "
                    "(2, 'acetaminophen 500 mg', 'iv'), (1, 'heparin', 'sc')")
        write_metadata(con, schema="tiny_test", source="test", now="2100-12-31 23:59:00", dataset="tiny")
    with connect(path) as ehr:
        yield ehr


def tiny_reuser(ehr) -> Reuser:
    reuser = Reuser(ehr)
    reuser.add(1, "By which route is heparin given?",
               sql_cell("SELECT DISTINCT route FROM prescriptions WHERE prescriptions.drug = 'heparin'"))
    return reuser


def test_a_differently_spelled_value_is_found_when_one_stored_value_is_clearly_closest(tiny_ehr) -> None:
    result = tiny_reuser(tiny_ehr).answer("By which route is acetaminofen 500 mg given?")
    assert result.answered and result.substitutions == [("acetaminophen 500 mg", "heparin")]
    assert result.answer.item() == "iv"


def test_two_equally_close_stored_values_mean_no_reuse(tiny_ehr) -> None:
    # 'acetaminophen 300 mg' and 'acetaminophen 500 mg' are both one letter away
    result = tiny_reuser(tiny_ehr).answer("By which route is acetaminophen 400 mg given?")
    assert not result.answered and result.reason == NO_FIT
