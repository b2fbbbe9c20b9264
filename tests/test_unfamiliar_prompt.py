"""A stranger's tables: a renamed copy of the EHRSQL-2024 database loaded as a plain CSV folder
(knowledge drafted from the data only). The prompt carries every table's columns, and table
choice finds the tables a question needs through split names and schema words."""

from __future__ import annotations

from pathlib import Path

import pytest

import ehr_magic
from datapaths import EHRSQL_SQLITE
from ehr_magic.agent import Agent, AgentSettings
from ehr_magic.agent.context import system_prompt
from ehr_magic.agent.table_choice import TablePicker, identifier_words
from ehr_magic import sources
from ehr_magic.eval import renamed
from ehr_magic.llm.window import ContextWindow
from ehr_magic.magic.command import read_marker
from test_magic import ipython_shell

QUESTION = "What was the name of the drug that was prescribed to patient 10020187 for the last time?"
CODE = ("answer = ehr.sql(\"SELECT medication FROM medication_orders WHERE patient_id = 10020187 "
        "ORDER BY started_at DESC LIMIT 1\").item()")


def loaded_copy(style: str, work: Path) -> Path:
    """The renamed copy of ``style`` as CSV files, loaded with ``data load csv``."""
    names = renamed.naming(style, renamed.source_columns(EHRSQL_SQLITE))
    renamed.build_sqlite(EHRSQL_SQLITE, names, work / "renamed.sqlite")
    renamed.write_csv_folder(work / "renamed.sqlite", names, work / "hospital_export")
    out = work / "export.duckdb"
    sources.load("csv", [work / "hospital_export"], out)
    return out


@pytest.fixture(scope="module")
def copy_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 'descriptive' copy."""
    return loaded_copy("descriptive", tmp_path_factory.mktemp("unfamiliar"))


@pytest.fixture(scope="module")
def camel_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 'camel' copy (names run together: ``medicationorder``)."""
    return loaded_copy("camel", tmp_path_factory.mktemp("camel"))


@pytest.fixture()
def ehr(copy_db: Path):
    with ehr_magic.connect(copy_db) as handle:
        yield handle


def test_the_index_carries_every_column_of_every_table(ehr) -> None:
    assert ehr.schema == "csv_hospital_export"
    for full in (True, False):  # the full index and the smallest windows' compact one
        system = system_prompt(ehr, full_index=full)
        # a column every table has (the row number) is said once, before the tables
        shared = next((line for line in system.splitlines() if line.startswith("Every table has ")), "")
        for table in ehr.tables():
            line = next(line for line in system.splitlines() if line.startswith(table))
            for column in ehr.columns(table):
                assert column in line or f" {column}" in shared, (table, column)
    assert "admitdatetime timestamp" in system_prompt(ehr)  # a time column says so


def test_names_are_split_into_words() -> None:
    assert identifier_words("LabTestKey") == ["lab", "test", "key"]
    assert identifier_words("admission_id") == ["admis"]  # stems; 'id' is too short to count
    assert identifier_words("ICUStayKey") == ["icu", "stay", "key"]


@pytest.mark.parametrize(("question", "table"), [
    ("How much does vancomycin oral liquid cost?", "billing_charges"),  # cost -> charges (schema words)
    ("Calculate how many unique drugs patient 10006580 was prescribed in 04/last year.", "medication_orders"),
    ("What was the first microbiology test of patient 10005817?", "culture_results"),
    ("What was the last input of patient 10014729 on 03/06/2100?", "icu_intake"),
])
def test_schema_words_find_the_table_whatever_it_is_called(ehr, question: str, table: str) -> None:
    # Described in full in the first prompt at 8k. (Not "in the top 3": with drafted joins the
    # tables most others join to, admissions and patients, come right after the best one.)
    choice = TablePicker(ehr).choose(question)
    assert table in choice.tables, choice.scores
    prompt = Agent(ehr, None, settings=AgentSettings()).prompt(question, window=ContextWindow(8192, "test"))
    assert table in prompt.tables[:prompt.layout.tables], prompt.tables


def test_an_unsure_choice_shows_tables_rather_than_none(ehr) -> None:
    prompt = Agent(ehr, None, settings=AgentSettings()).prompt("What is the average of it?",
                                                               window=ContextWindow(8192, "test"))
    assert prompt.layout.tables >= 1 and len(prompt.tables) >= 3


@pytest.fixture()
def ip(copy_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    yield from ipython_shell(copy_db, monkeypatch, tmp_path)


def test_magic_on_a_renamed_copy_describes_the_tables_the_question_needs(ip, fake_llm) -> None:
    expected = ip.user_ns["ehr"].sql("SELECT medication FROM medication_orders WHERE patient_id = 10020187 "
                                     "ORDER BY started_at DESC LIMIT 1").item()
    fake_llm.enqueue(f"```python\n{CODE}\n```")
    ip.run_cell_magic("ehr", "", QUESTION)
    assert ip.user_ns["answer"] == expected
    _token, question, body = read_marker(getattr(ip, "rl_next_input", "") or "")
    assert question == QUESTION and "medication_orders" in body
    first = fake_llm.chat_requests()[0].json["messages"]
    system, user = first[0]["content"], first[-1]["content"]
    assert "## medication_orders" in user  # described in full with the question
    assert "medication_orders:" in system and "administration_route" in system  # every column in the index


@pytest.mark.parametrize(("question", "dictionary", "events"), [
    ("What was the last Hb of patient 10004235?", "lab_test_types", "lab_results"),  # shorthand -> stored value
    ("What was the last hemoglobin of patient 10004235?", "lab_test_types", "lab_results"),
    ("What was the average heart rate of patient 10004235 yesterday?", "bedside_item_catalog", "bedside_observations"),
    ("What was the average HR of patient 10004235 yesterday?", "bedside_item_catalog", "bedside_observations"),
    # a whole label of two words, against words scattered over the diagnosis titles
    ("What percentile is 13.0 urea nitrogen in a patient of the same age as patient 10022017 on their last "
     "hospital encounter?", "lab_test_types", "lab_results"),
    # only part of an item name ('non invasive blood pressure diastolic'): an unsure dictionary brings
    # its events too
    ("When was the last time that patient 10018081 had the minimum value of diastolic blood pressure on "
     "12/29/this year?", "bedside_item_catalog", "bedside_observations"),
])
def test_a_stored_value_finds_its_dictionary_and_the_dictionary_its_events(ehr, question, dictionary, events) -> None:
    choice = TablePicker(ehr).choose(question)
    assert dictionary in choice.tables and events in choice.tables, choice.scores
    prompt = Agent(ehr, None, settings=AgentSettings()).prompt(question, window=ContextWindow(8192, "test"))
    assert {dictionary, events} <= set(prompt.tables[:prompt.layout.tables]), prompt.tables


def test_only_shorthand_written_as_such_is_expanded() -> None:
    from ehr_magic.agent.table_choice import shorthand_words

    assert "hemoglobin" in shorthand_words("What was the last Hb of patient 1?")
    assert {"heart", "rate"} <= shorthand_words("the average HR yesterday")
    assert shorthand_words("what was in it as of today") == set()  # English words that are also abbreviations
    assert shorthand_words("Hours after admission") == set()  # a capitalised first word is just a word
    assert {"atrial", "fibrillation"} <= shorthand_words("afib pts on warfarin?")  # shorthand in lower case
    assert shorthand_words("all tips in 24 hrs") == set()  # ... unless it is an everyday word as well


HB = "When was patient 10004235's Hb 8 or lower?"
HB_CODE = ("answer = ehr.sql(\"SELECT r.collected_at FROM lab_results r JOIN lab_test_types t ON t.lab_test_id = "
           "r.lab_test_id WHERE t.test_name = 'hemoglobin' AND r.patient_id = 10004235 AND r.numeric_result <= 8 "
           "ORDER BY r.collected_at\")")


def test_the_first_request_names_the_stored_spelling_of_a_shorthand_and_where_it_is(ip, fake_llm) -> None:
    # 'Hb' on a stranger's tables: the first request says where hemoglobin is stored and how it is spelled
    fake_llm.enqueue(f"```python\n{HB_CODE}\n```", f"```python\n{CODE}\n```")
    ip.run_cell_magic("ehr", "", HB)
    first = fake_llm.chat_requests()[0].json["messages"]
    user = first[-1]["content"]
    assert "lab_test_types.test_name = 'hemoglobin' (lab_test_id " in user
    assert user.index("lab_test_types.test_name = 'hemoglobin'") < user.index(f"Question: {HB}")
    assert "candidates" in user  # to check, not facts
    assert {"## lab_test_types", "## lab_results"} <= {line.split(":")[0] for line in user.splitlines()}
    assert len(fake_llm.chat_requests()) == 1
    ip.run_line_magic("ehr", "new")
    ip.run_cell_magic("ehr", "", QUESTION)
    second = fake_llm.chat_requests()[1].json["messages"]
    assert second[0] == first[0]  # the system message does not change with the question: a cacheable prefix


def test_a_word_is_as_rare_as_the_tables_that_use_it_in_the_questions_sense(camel_db: Path) -> None:
    # the care units' 'medical intensive care unit' shares the stem of 'medication' but not its sense: the
    # orders table, whose name runs the word together, is still needed in full
    with ehr_magic.connect(camel_db) as ehr:
        choice = TablePicker(ehr).choose("Was any medication issued to patient 10005866 on the last hospital "
                                         "encounter?")
    assert "medicationorder" in choice.tables[:choice.full], choice.scores


def test_the_drafters_advice_on_reading_a_column_is_no_word_of_what_it_holds(ehr) -> None:
    # drafted code columns say 'codes, compared as stored text': advice to the model, which 'compared to the
    # second to last value' must not take for the diagnosis and procedure tables' words
    assert "compared as stored text" in ehr.knowledge.tables["diagnosis_code_catalog"].columns["diagnosis_code"]
    question = ("How much does patient 10002495's troponin t differ from the last value measured on the last "
                "hospital visit compared to the second to last value measured on the last hospital visit?")
    prompt = Agent(ehr, None, settings=AgentSettings(timeout=5.0)).prompt(question, window=ContextWindow(8192, "test"))
    full = set(prompt.tables[:prompt.layout.tables])
    assert {"lab_results", "lab_test_types"} <= full, prompt.tables
    assert not {"diagnosis_code_catalog", "procedure_code_catalog"} & full, prompt.tables


def test_a_tables_words_leave_out_whole_names_of_the_other_tables(tmp_path: Path) -> None:
    # a description that names another table ('refers to lab_items.itemid') says what it joins, not what
    # it holds; only whole names count ('lab' is not in 'lab_items'), in any case, and names that are not
    # plain words ('lab-notes') too
    import duckdb

    path = tmp_path / "names.duckdb"
    with duckdb.connect(str(path)) as con:
        for name in ("lab", "lab_items", "Visits", "lab-notes"):
            con.execute(f'CREATE TABLE "{name}" AS SELECT range AS "{name}_id" FROM range(3)')
    with ehr_magic.connect(path) as ehr:
        picker = TablePicker(ehr)
        text = "Refers to lab_items.itemid and visits, LAB_ITEMS; see lab-notes. Lab.x and lab stay; labs too."
        assert picker._without_other_tables("lab", text) == "Refers to   and  ,  ; see  . Lab.x and lab stay; labs too."
        assert picker._without_other_tables("lab_items", text) == \
            "Refers to lab_items.itemid and  , LAB_ITEMS; see  .   and   stay; labs too."
        assert picker._without_other_tables("visits", "nothing named here") == "nothing named here"
