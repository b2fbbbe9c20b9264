"""Refusals that keep reuse precise on questions it was never tuned on."""

from __future__ import annotations

from pathlib import Path

import pytest

from ehr_magic.db import connect
from ehr_magic.reuse import Reuser
from ehr_magic.reuse.lexicon import contradicts, count_target, operator_role_moved


NO_FIT = "no remembered cell fits this question's values and words"


def refusals(memory: Reuser, question: str) -> dict[int, str]:
    """Remembered cell -> why it was refused, for each cell the question's values fit."""
    trace: list = []
    memory.index.candidates(question, trace)
    return {entry: why for entry, _, why in trace}


def cell(sql: str) -> str:
    return f'answer = ehr.sql("""{sql}""")'


@pytest.fixture(scope="module")
def ehr(ehrsql_db: Path):
    with connect(ehrsql_db) as handle:
        yield handle


@pytest.fixture(scope="module")
def reuser(ehr):
    memory = Reuser(ehr)
    memory.add(1, "How many patients were prescribed heparin in 2100?", cell(
        "SELECT COUNT(DISTINCT subject_id) FROM prescriptions WHERE drug = 'heparin' "
        "AND strftime(starttime, '%Y') = '2100'"))
    memory.add(2, "What is the gender of patient 10004235?", cell(
        "SELECT DISTINCT gender FROM patients WHERE subject_id = 10004235"))
    memory.add(3, "When was patient 10004235 admitted to the hospital for the first time?", cell(
        "SELECT admittime FROM admissions WHERE subject_id = 10004235 ORDER BY admittime LIMIT 1"))
    return memory


def test_the_same_count_is_reused(reuser, ehr) -> None:
    result = reuser.answer("How many patients were prescribed aspirin in 2100?")
    assert result.answered, result.reason
    assert result.substitutions == [("aspirin", "heparin")]
    expected = ehr.sql("SELECT COUNT(DISTINCT subject_id) FROM prescriptions WHERE drug = 'aspirin' "
                       "AND strftime(starttime, '%Y') = '2100'").item()
    assert expected > 0 and result.answer.item() == expected


def test_a_count_of_something_else_is_not_reused(reuser) -> None:
    # the cell counts patients; the question counts prescriptions
    question = "How many aspirin prescriptions were there in 2100?"
    result = reuser.answer(question)
    assert not result.answered and result.reason == NO_FIT
    assert refusals(reuser, question)[1] == "contrasting words (how much / how many)"


def test_an_attribute_no_table_holds_is_not_answered(reuser, ehr) -> None:
    gender = reuser.answer("What is the gender of patient 10005348?")
    assert gender.answered and gender.substitutions == [("10005348", "10004235")]
    assert gender.answer.item() == ehr.sql("SELECT gender FROM patients WHERE subject_id = 10005348").item()
    blood_type = reuser.answer("What is the blood type of patient 10005348?")
    assert not blood_type.answered and blood_type.reason == NO_FIT
    assert refusals(reuser, "What is the blood type of patient 10005348?")[2] == (
        "the question also names 'blood type', which the cell does not use")
    horoscope = reuser.answer("What is the gender horoscope of patient 10005348?")
    assert not horoscope.answered and "asks about 'horoscope'" in horoscope.reason


def test_admitted_is_not_discharged(reuser) -> None:
    result = reuser.answer("When was patient 10005348 discharged from the hospital for the first time?")
    assert not result.answered and "asks about 'discharged'" in result.reason  # no remembered question says it


def test_count_targets() -> None:
    assert count_target("how many patients were given <v>".split()) == "people"
    assert count_target("how many times was <v> ordered".split()) == "events"
    assert count_target("count the number of hospital visits of patient <id>".split()) == "stays"
    assert count_target("what was the last <v> of patient <id>".split()) == ""
    assert contradicts("how many patients".split(), "how many prescriptions".split())
    assert not contradicts("how many patients".split(), "how many people".split())


def test_operator_words_may_change_but_not_trade_roles() -> None:
    assert operator_role_moved([("average", "total")]) == ""  # a new aggregate in the same role
    assert operator_role_moved([("maximum", "total"), ("total", "average")]) == "total"
    assert operator_role_moved([("first", "last"), ("last", "first")]) in ("first", "last")
    assert operator_role_moved([("10004235", "10005348")]) == ""


def test_an_unknown_word_message_claims_only_what_was_searched(tmp_path: Path, monkeypatch, capsys) -> None:
    """A word that reuse's lookup columns lack, but a free-text column holds: the refusal
    says where the word was looked for, and never that the database does not mention it."""
    import duckdb

    from ehr_magic.cli import main

    path = tmp_path / "tiny.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE patients (subject_id INTEGER, gender VARCHAR)")
        con.execute("INSERT INTO patients VALUES (1, 'female'), (2, 'male'), (3, 'female')")
        con.execute("CREATE TABLE problems (subject_id INTEGER, note VARCHAR)")  # free text, no lookup column
        con.execute("INSERT INTO problems VALUES (1, 'Diabetes mellitus type 2'), (2, 'Hypertension')")
    question = "How many patients have diabetes?"
    with connect(path) as ehr:
        assert ehr.sql("SELECT count(*) FROM problems WHERE note ILIKE '%diabetes%'").item() == 1
        reuser = Reuser(ehr)
        reuser.index.detector.vocabulary.add_column("patients", "gender")  # the one lookup column
        reuser.add(1, "How many female patients are there?",
                   cell("SELECT COUNT(*) FROM patients WHERE gender = 'female'"))
        result = reuser.answer(question)
    assert not result.answered
    assert "'diabetes', which is in no remembered question and no table or column name or description, " \
           "nor among the values of the lookup columns of patients" in result.reason
    assert "neither the database" not in result.reason

    # the reply without a model, on the same database: no claim about the database's values either
    monkeypatch.delenv("EHR_MAGIC_MODEL", raising=False)
    assert main(["ask", question, "--db", str(path)]) == 2
    error = capsys.readouterr().err
    # (attached as it is, the file gets drafted knowledge, so the lookup columns searched are named too)
    assert "Memory reuse declined: the question asks about 'diabetes', which is in no remembered question and " \
           "no table or column name or description" in error
    assert "neither the database" not in error
