"""The four kinds of wrong answer reuse must not give (issue 26), on the EHRSQL database.

Each test remembers cells of its own, asks a question the cell would answer wrongly
once adapted, and checks reuse declines, next to a question the same cell does answer
(so the refusal is about the difference, not the cell).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from ehr_magic.db import connect
from ehr_magic.reuse import Reuser
from ehr_magic.reuse.attributes import AttributeWords
from ehr_magic.reuse.assign import question_words
from ehr_magic.reuse.lexicon import contradicts, operators, stem
from ehr_magic.reuse.match import ReuseIndex
from ehr_magic.reuse.reuser import shape_mismatch
from ehr_magic.reuse.timeexpr import find_times, window


NO_FIT = "no remembered cell fits this question's values and words"


def cell(sql: str) -> str:
    return f'answer = ehr.sql("""{sql}""")'


def refusals(memory: Reuser, question: str) -> dict[int, str]:
    """Remembered cell -> why it was refused, for each cell the question's values fit."""
    trace: list = []
    memory.index.candidates(question, trace)
    return {entry: why for entry, _, why in trace}


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
    question = "What is the marital status of patient 10005348 during their last hospital visit?"
    result = reuser.answer(question)
    assert not result.answered and result.reason == NO_FIT
    assert refusals(reuser, question) == {
        1: "the question asks about marital_status, which the cell's code does not use"}


def test_attribute_words_come_from_the_schema_and_its_descriptions(ehr) -> None:
    words = AttributeWords(ehr)
    marital, patient, old = stem("marital"), stem("patient"), stem("old")
    assert words.columns[marital] == {"marital_status"}  # the column's name
    assert words.columns[stem("sex")] == {"gender"}  # its description ("Sex, 'm' or 'f'")
    code = frozenset({"admissions", "age", "subject_id", "admittime"})
    assert words.conflict({marital, stem("status"), patient}, {"age", patient}, code)
    # the cell's question names what its code computes; a question saying something else instead
    assert words.conflict({patient, old}, {"age", patient}, code)
    assert not words.conflict({patient}, {"age", patient}, code)  # only leaving the word out is no conflict
    assert not words.conflict({"age", patient}, {"age", patient}, code)


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
        assert result.answered or result.reason == NO_FIT, (other, result.reason)  # no cell has the window


FIRST_DISCHARGE = ("SELECT dischtime FROM admissions WHERE subject_id = {} AND dischtime IS NOT NULL "
                   "ORDER BY dischtime LIMIT 1")
FIRST_ADMISSION = "SELECT admittime FROM admissions WHERE subject_id = {} ORDER BY admittime LIMIT 1"


@pytest.fixture(scope="module")
def stays(ehr):
    """Memory where analysts asked for first discharges as "depart", and for first admissions."""
    memory = Reuser(ehr)
    cells = [(f"When did patient {p} depart hospital for the first time?", FIRST_DISCHARGE.format(p))
             for p in (10001217, 10001725, 10002428)]
    cells += [(f"When was patient {p} admitted to the hospital for the first time?", FIRST_ADMISSION.format(p))
              for p in (10001217, 10001725, 10002428)]
    memory.add_many((number, question, cell(sql), "accepted") for number, (question, sql) in enumerate(cells, 1))
    return memory


def test_a_question_without_the_word_that_announces_what_the_cell_returns_declines(stays, ehr) -> None:
    # every remembered question saying "depart" returns a discharge time: the word announces it
    discharged = ehr.sql(FIRST_DISCHARGE.format(10000032)).item()
    assert stays.answer("When did patient 10000032 depart hospital for the first time?").answer.item() == discharged
    # "come" announces nothing the discharge cells return: the wording fits, what is asked does not
    question = "When did patient 10000032 come for the first time to the hospital?"
    result = stays.answer(question)
    assert not result.answered and "asks about 'come'" in result.reason
    reasons = refusals(stays, question)
    assert all("returns 'dischtime'" in reasons[entry] for entry in (1, 2, 3))


FIRST_INPUT = ("SELECT starttime FROM inputevents WHERE stay_id IN (SELECT stay_id FROM icustays WHERE hadm_id "
               "IN (SELECT hadm_id FROM admissions WHERE subject_id = {})) ORDER BY starttime LIMIT 1")


def test_a_question_saying_nothing_of_what_the_cells_words_bring_declines(ehr) -> None:
    # memory small enough for a test: a word implies a name after 3 cells of 1 kind
    memory = Reuser(ehr, index=ReuseIndex(ehr, evidence={"min_support": 3, "min_kinds": 1}))
    patients = (10001217, 10001725, 10002428)
    cells = [(f"When did patient {p} get input for the first time?", FIRST_INPUT.format(p)) for p in patients]
    cells += [(f"When did patient {p} get admitted to the hospital for the first time?", FIRST_ADMISSION.format(p))
              for p in patients]
    memory.add_many((number, question, cell(sql), "accepted") for number, (question, sql) in enumerate(cells, 1))
    first_input = ehr.sql(FIRST_INPUT.format(10005817)).item()
    assert memory.answer("When did patient 10005817 get input for the first time?").answer.item() == first_input
    # "input" brings inputevents into the cells' code; "come to the hospital" says nothing that does
    question = "When did patient 10005817 come for the first time to the hospital?"
    result = memory.answer(question)
    assert not result.answered and "asks about 'come'" in result.reason
    assert set(refusals(memory, question)) >= {1, 2, 3}
    asked = question_words(tuple(stem(w) for w in "when did patient come for the first time to the hospital".split()))
    said = question_words(tuple(stem(w) for w in "when did patient get input for the first time".split()))
    names = memory.index.evidence._names[1]
    assert ("input", "inputevents") in memory.index.evidence.dropped_words(asked, said, names)
    assert not memory.index.evidence.dropped_words(said, said, names)


def test_a_word_the_cells_question_says_as_a_stored_value_must_be_said_again(ehr) -> None:
    memory = Reuser(ehr)
    # 'l' is a lab test of this database, too short for reuse to read it as a value of the question
    memory.add(1, "Has patient 10001217 got a l laboratory test this year?",
               cell("SELECT COUNT(*) > 0 FROM labevents WHERE labevents.itemid IN (SELECT d_labitems.itemid FROM "
                    "d_labitems WHERE d_labitems.label = 'l') AND labevents.hadm_id IN (SELECT admissions.hadm_id "
                    "FROM admissions WHERE admissions.subject_id = 10001217) AND DATE_TRUNC('YEAR', "
                    "labevents.charttime) = CAST('2100-01-01 00:00:00' AS TIMESTAMP)"))
    assert memory.answer("Has patient 10002495 got a l laboratory test this year?").answered
    question = "Has patient 10002495 received any laboratory testing in this year?"
    result = memory.answer(question)
    assert not result.answered and result.reason == NO_FIT
    assert refusals(memory, question) == {
        1: "the cell looks for 'l', which its question names and the new question does not"}


def test_wordings_are_compared_by_their_english_stems() -> None:
    assert stem("pricing") == stem("price") != stem("route")
    assert stem("prescribed") == stem("prescription") == stem("prescriptions")
    assert stem("diagnosed") == stem("diagnoses") and stem("<id>") == "<id>"


def test_how_often_and_how_much_ask_for_different_quantities() -> None:
    assert contradicts("how frequently was <v> prescribed to patient <id>".split(),
                       "how much <v> has patient <id> been prescribed".split())
    assert not contradicts("how frequently was <v> prescribed to patient <id>".split(),
                           "how often was <v> prescribed to patient <id>".split())
    # a count named before its cue counts that: "the patient count" counts people, not prescriptions
    assert contradicts("what is the count of prescriptions for <v>".split(),
                       "what is the patient count for <v> prescription".split())


def test_now_asks_for_the_current_state() -> None:
    # "hospitalized patients now" are those not yet discharged; "patients discharged" are the others
    assert operators("what is the total number of hospitalized patients now".split())["current"] == 1
    assert "current" not in operators("what were the total number of patients discharged from the hospital".split())


def test_a_question_asking_for_a_moment_needs_a_time() -> None:
    dose = pl.DataFrame({"dose": [324.0]})
    drugs = pl.DataFrame({"drug": ["heparin", "lorazepam"]})
    moment = pl.DataFrame({"starttime": [dt.datetime(2100, 8, 1, 9)]})
    asked = "What was the last time that patient 1 received a prescription for quinidine?"
    assert shape_mismatch(asked, dose) and not shape_mismatch(asked, moment)
    opening = "First time patient 1 was prescribed a drug in 08/this year?"
    assert shape_mismatch(opening, drugs) and not shape_mismatch(opening, moment)
    # "First time, what drug ..." asks for the drug
    assert not shape_mismatch("First time, what drug was prescribed for patient 1 in 07/this year?", drugs)


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
    assert not result.answered and "asks about 'colors'" in result.reason
