"""The four kinds of wrong answer reuse must not give (issue 26), on the EHRSQL database.

Each test remembers cells of its own, asks a question the cell would answer wrongly
once adapted, and checks reuse declines, next to a question the same cell does answer
(so the refusal is about the difference, not the cell).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ehr_magic.data import connect
from ehr_magic.reuse import Reuser
from ehr_magic.reuse.attributes import AttributeWords
from ehr_magic.reuse.timeexpr import find_times, window


def cell(sql: str) -> str:
    return f'answer = ehr.sql("""{sql}""")'


@pytest.fixture(scope="module")
def ehr(ehrsql_db: Path):
    with connect(ehrsql_db) as ehr:
        yield ehr


# Remembered cells: (question, SQL), ids from 1.
CELLS = [
    ("What is the age of patient 10004235 during their last hospital visit?",
     "SELECT age FROM admissions WHERE subject_id = 10004235 AND dischtime IS NOT NULL "
     "ORDER BY admittime DESC LIMIT 1"),
    ("What are the top three most frequently prescribed drugs?",
     "SELECT drug FROM (SELECT drug, DENSE_RANK() OVER (ORDER BY COUNT(*) DESC) AS rk FROM prescriptions "
     "GROUP BY drug) WHERE rk <= 3"),
    ("How many patients were admitted to the hospital in 2100?",
     "SELECT COUNT(DISTINCT subject_id) FROM admissions WHERE strftime(admittime, '%Y') = '2100'"),
    ("How many times did patient 10004235 have a rdw test?",
     "SELECT COUNT(*) FROM labevents WHERE hadm_id IN (SELECT hadm_id FROM admissions WHERE subject_id = "
     "10004235) AND itemid IN (SELECT itemid FROM d_labitems WHERE label = 'rdw')"),
    # the code does not carry the window (every admission of this database is since 2100): a fixed window
    ("How many patients were admitted to the hospital since 2100?",
     "SELECT COUNT(DISTINCT subject_id) FROM admissions"),
]


@pytest.fixture(scope="module")
def reuser(ehr):
    memory = Reuser(ehr)
    memory.add_many((number, question, cell(sql), "accepted") for number, (question, sql) in enumerate(CELLS, 1))
    return memory


# -- 1. an attribute swapped, only the id substituted ------------------------------------------

def test_another_attribute_of_the_patient_is_not_answered_with_the_cells(reuser) -> None:
    assert reuser.answer("What is the age of patient 10005348 during their last hospital visit?").answer.item() == 76
    result = reuser.answer("What is the marital status of patient 10005348 during their last hospital visit?")
    assert not result.answered


def test_attribute_words_come_from_the_schema_and_its_descriptions(ehr) -> None:
    words = AttributeWords(ehr)
    assert words.columns["marita"] == {"marital_status"}  # the column's name
    assert words.columns["sex"] == {"gender"}  # its description ("Sex, 'm' or 'f'")
    code = frozenset({"admissions", "age", "subject_id", "admittime"})
    assert words.conflict({"marita", "status", "patien"}, {"age", "patien"}, code)
    # the cell's question names what its code computes; a question saying something else instead
    assert words.conflict({"patien", "old"}, {"age", "patien"}, code)
    assert not words.conflict({"patien"}, {"age", "patien"}, code)  # only leaving the word out is no conflict
    assert not words.conflict({"age", "patien"}, {"age", "patien"}, code)


# -- 2. a time window read as another ---------------------------------------------------------

def test_time_windows_have_one_normal_form(ehr) -> None:
    clock = ehr.clock

    def shown(text: str):
        return [window(t, clock) for t in find_times(text)]

    assert shown("admitted since 2100") == shown("admitted in this year") == shown("admitted in 2100")
    assert shown("admitted since 1 year ago") != shown("admitted in this year")
    assert shown("since 3 months ago") != shown("since 2 months ago")


def test_a_fixed_window_is_reused_for_the_same_window_only(reuser) -> None:
    # "this year" selects what "since 2100" selects on this clock (now is 2100-12-31)
    same = reuser.answer("How many patients were admitted to the hospital this year?")
    assert same.answered and same.entry_id == 5, same.reason
    for other in ("since 1 year ago", "in the last 3 months", "last month", "before 2100"):
        result = reuser.answer(f"How many patients were admitted to the hospital {other}?")
        assert not result.answered or result.entry_id != 5, other


# -- 3. a substituted value that makes the answer 0 ---------------------------------------------

def test_a_zero_from_a_value_found_where_it_went_is_an_answer(reuser, ehr) -> None:
    # the new patient is stored in admissions.subject_id: 0 rdw tests is a true answer
    patient = ehr.sql("SELECT subject_id FROM admissions WHERE hadm_id NOT IN (SELECT hadm_id FROM labevents "
                      "WHERE itemid IN (SELECT itemid FROM d_labitems WHERE label = 'rdw')) LIMIT 1").item()
    result = reuser.answer(f"How many times did patient {patient} have a rdw test?")
    assert result.answered and result.answer.item() == 0


def test_a_zero_from_a_value_not_found_where_it_went_declines(reuser) -> None:
    # the cell's year sits inside strftime, in no column: 2099 cannot be found, the 0 is not trusted
    assert reuser.answer("How many patients were admitted to the hospital in 2100?").answer.item() > 0
    result = reuser.answer("How many patients were admitted to the hospital in 2099?")
    assert not result.answered and "returns 0" in result.reason and "'2099' is compared with no column" in result.reason


# -- 4. a question nothing records ---------------------------------------------------------------

def test_a_word_that_names_nothing_refuses_reuse(reuser) -> None:
    assert reuser.answer("What are the top four most frequently prescribed drugs?").answered
    # "color" is a word of stored lab values, but the question names no such value
    result = reuser.answer("What are the top four most frequently prescribed drug colors?")
    assert not result.answered and "colors" in result.reason
