"""Value linking before the first model call (ehr_magic.linking.question) on real DuckDB files:
what a question's words may name, its bounds, and how the prompt states it."""

from __future__ import annotations

from pathlib import Path

import pytest

import ehr_magic
from ehr_magic.agent import Agent, AgentSettings
from ehr_magic.agent.context import linked_values
from ehr_magic.linking.question import MAX_VALUES, PER_TERM, QuestionLinker, link_question
from ehr_magic.llm.window import ContextWindow


@pytest.fixture()
def ehr(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


def pairs(linking) -> set[tuple[str, str, str]]:
    return {(v.table, v.column, v.value) for v in linking.values()}


def test_whole_values_runs_inside_values_and_shorthand_are_linked_with_their_keys(ehr) -> None:
    linking = link_question(ehr, "What was the maximum SpO2 and the mean blood pressure of patient 10019568 "
                                 "given potassium chloride?")
    found = pairs(linking)
    assert ("d_items", "label", "potassium chloride") in found  # said whole
    assert ("prescriptions", "drug", "potassium chloride (powder)") in found  # said inside a longer value
    assert ("d_items", "label", "arterial blood pressure mean") in found  # the words inside a longer value
    assert ("d_items", "label", "o2 saturation pulseoxymetry") in found  # shorthand, through its meaning
    spo2 = next(t for t in linking.terms if t.text == "SpO2")
    assert spo2.meaning and all(v.score < 100 for v in spo2.values)
    pressure = next(v for v in linking.values() if v.value == "arterial blood pressure mean")
    assert pressure.key == "itemid" and pressure.rows[0] == (("itemid", "220052"), ("linksto", "chartevents"))
    # a word inside a longer term that was found gives way to it: no lab 'potassium, ...' for the drug
    assert not any(v.value.startswith("potassium,") for v in linking.values())


def test_shorthand_written_in_lower_case_is_linked_but_everyday_words_are_not(ehr) -> None:
    linking = link_question(ehr, "how many afib patients got hgb checked?")
    meanings = {t.text: t.meaning for t in linking.terms}
    assert meanings["afib"] == "atrial fibrillation" and meanings["hgb"] == "hemoglobin"
    assert ("d_icd_diagnoses", "long_title", "atrial fibrillation") in pairs(linking)
    # 'hit' (heparin-induced thrombocytopenia) and 'hrs' (hepatorenal syndrome) are plain words here
    assert link_question(ehr, "list all hit counts in the last 24 hrs").empty
    assert {t.text for t in link_question(ehr, "any HIT in the last 24 hrs?").terms} == {"HIT"}


def test_a_period_that_groups_the_answer_is_not_a_stored_value(ehr) -> None:
    # 'daily' of 'daily maximum' asks for one figure per day, not the chart item 'daily weight'
    linking = link_question(ehr, "Tell me patient 10019172's daily maximum kcl (bolus) input on their last visit.")
    assert {t.text for t in linking.terms} == {"kcl (bolus"}, linking.terms
    assert not any(t.text.lower() == "monthly" for t in
                   link_question(ehr, "What was the monthly average weight of patient 10036156?").terms)
    # said as a name, the same word is the stored value
    linking = link_question(ehr, "What was the daily weight of patient 10036156?")
    assert ("d_items", "label", "daily weight") in pairs(linking)
    assert next(t for t in linking.terms if t.text == "daily weight").values[0].score == 100


def test_a_span_of_time_asked_for_is_not_a_stored_item(ehr) -> None:
    # 'length of stay' is worked out from the stay's times, not the chart items 'impaired skin length #3'
    for question in ("What was the length of stay of patient 10021487's last ICU stay?",
                     "What was the duration of the last infusion of patient 10021487?"):
        linking = link_question(ehr, question)
        assert not any(word in v.value for v in linking.values() for word in ("length", "duration")), linking.terms
    # said whole, a stored name with the same words is still the value
    linking = link_question(ehr, "What was the length of urine collection of patient 10021487?")
    assert ("d_labitems", "label", "length of urine collection") in pairs(linking)


def test_a_count_written_as_a_word_is_not_a_stored_term(ehr) -> None:
    # 'five' is a word of 'open fracture of five ribs', but here it says how many diagnoses to list
    assert link_question(ehr, "What are the top five most frequent diagnoses?").empty
    linking = link_question(ehr, "How many patients had an open fracture of five ribs?")
    assert ("d_icd_diagnoses", "long_title", "open fracture of five ribs") in pairs(linking)


def test_a_word_that_starts_a_table_name_run_together_asks_for_the_table(ehr) -> None:
    # 'output' is the start of outputevents: the question asks for output events, not the chart item
    # 'ostomy (output)' that holds the word
    assert link_question(ehr, "What was the total output of patient 10021487 today?").empty
    assert link_question(ehr, "Which were the five most frequent output events since 1 year ago?").empty
    # a stored value said whole is still linked: 'foley' is an output item
    assert ("d_items", "label", "foley") in pairs(link_question(ehr, "What was the total foley output today?"))


def test_a_rate_is_a_kind_of_figure_like_a_level_not_a_stored_term(ehr) -> None:
    # the chart item 'rate' is stored whole, but a mortality rate is a figure the question computes
    assert link_question(ehr, "Which four diagnoses had the highest 3-month mortality rate?").empty
    # said with what it measures, it is still linked whole, and through a shorthand's meaning too
    assert ("d_items", "label", "heart rate") in pairs(link_question(ehr, "What was the last heart rate today?"))
    assert ("d_labitems", "label", "sedimentation rate") in pairs(link_question(ehr, "What was the last ESR?"))


def test_a_care_unit_written_as_its_abbreviation_links_the_names_that_spell_it(ehr) -> None:
    # stored as 'medical intensive care unit (micu)': the meaning and the abbreviation are both in it, where
    # the meaning's last word alone ('unit', a dose unit) is not what the question means
    linking = link_question(ehr, "How many patients were in the MICU?")
    micu = next(t for t in linking.terms if t.text == "MICU")
    assert micu.meaning == "medical intensive care unit"
    assert micu.values[0].value == "medical intensive care unit (micu)" and micu.values[0].score >= 95
    assert {v.table for v in micu.values} <= {"icustays", "transfers"}, micu.values
    assert all(v.value != "unit" for v in linking.values())


def test_a_question_with_no_stored_word_links_nothing_and_the_prompt_says_nothing(ehr) -> None:
    question = "How many patients are there?"
    linking = link_question(ehr, question)
    assert linking.empty and linked_values(linking) == ""
    prompt = Agent(ehr, None, settings=AgentSettings()).prompt(question, window=ContextWindow(8192, "test"))
    assert "Stored values" not in prompt.messages[-1]["content"] and prompt.linked == ""


def test_a_term_stored_in_many_places_lists_the_best_few_and_says_there_are_more(ehr) -> None:
    linking = link_question(ehr, "When did patient 10021487 last have a temperature taken?")
    term = next(t for t in linking.terms if t.text == "temperature")
    assert len(term.values) == PER_TERM and term.more > 0
    assert term.values[0].value == "temperature" and term.values[0].score == 100.0  # the whole word first
    text = linked_values(linking)
    # some of the others are stored in other columns: one column's lookup would not show them
    assert term.more_elsewhere
    assert f"and {term.more} more, in other columns too: ehr.find('temperature')" in text and "candidates" in text
    # all of them in the column of the first: its lookup shows them
    saline = next(t for t in link_question(ehr, "Was patient 10021487 given sodium chloride?").terms
                  if t.text == "sodium chloride")
    assert saline.more > 0 and not saline.more_elsewhere
    assert (f"and {saline.more} more: ehr.lookup('prescriptions', 'drug', 'sodium chloride', "
            f"k={len(saline.values) + saline.more})") in linked_values(link_question(
                ehr, "Was patient 10021487 given sodium chloride?"))


def test_a_value_stored_in_many_tables_is_listed_first_where_the_question_names_the_table(tmp_path: Path) -> None:
    """A warehouse where 'final' is a status of many tables: the question speaks of lab results, so
    the lab result tables' status comes first (their abbreviated names read as words), before the
    tables whose names come first in the alphabet."""
    import duckdb

    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as con:
        for n, subject in enumerate(["adt_evnt", "alg_pat", "img_rslt", "ord_med", "lab_rslt", "note_enc"] * 2):
            con.execute(f"CREATE TABLE {subject}_{n:02d} AS SELECT range AS {subject}_id, "
                        "(['final', 'preliminary', 'cancelled'])[range % 3 + 1] AS status_c FROM range(30)")
    with ehr_magic.connect(path) as ehr:
        linking = link_question(ehr, "How many lab results were final?")
        term = next(t for t in linking.terms if t.text == "final")
        assert [v.table for v in term.values[:2]] == ["lab_rslt_04", "lab_rslt_10"]
        assert term.more > 0 and term.more_elsewhere
        other = next(t for t in link_question(ehr, "How many medication orders were final?").terms
                     if t.text == "final")
        assert [v.table for v in other.values[:2]] == ["ord_med_03", "ord_med_09"]


def test_a_table_whose_name_runs_its_words_together_is_named_by_them_too(ehr) -> None:
    # 'hemoglobin' is both a lab test (d_labitems) and a chart item (d_items); a question about a lab
    # test reads 'lab' in d_labitems, whose words run together, and lists the lab test first
    for question in ("Count the number of times that patient 10039831 had received a hemoglobin lab test.",
                     "What is the count of times that patient 10038999 had received a lipase lab test?"):
        term = next(t for t in link_question(ehr, question).terms if t.text in ("hemoglobin", "lipase"))
        first, second = term.values[:2]
        assert (first.table, first.value) == ("d_labitems", term.text), term.values
        assert (second.table, second.value) == ("d_items", term.text), term.values
    # without a word of either table, the alphabet decides, as before
    term = next(t for t in link_question(ehr, "When was patient 10039831's hemoglobin last measured?").terms
                if t.text == "hemoglobin")
    assert [v.table for v in term.values[:2]] == ["d_items", "d_labitems"], term.values


def test_a_value_stored_alike_in_many_tables_is_listed_first_where_most_rows_are(tmp_path: Path) -> None:
    """'VANCOMYCIN' is a drug given (many rows), a drug on admission and an allergy (few): with no
    word of the question naming a table, the bigger tables come first, not the alphabet's."""
    import duckdb

    path = tmp_path / "drugs.duckdb"
    drugs = "(['VANCOMYCIN', 'HEPARIN', 'INSULIN', 'FUROSEMIDE'])[range % 4 + 1]"
    with duckdb.connect(str(path)) as con:
        for table, rows in (("allergy", 40), ("admission_drug", 200), ("medication", 3000), ("med_audit", 20),
                            ("antibiotic_log", 60)):
            con.execute(f"CREATE TABLE {table} AS SELECT range % 25 AS patient_id, {drugs} AS drug_name "
                        f"FROM range({rows})")
    with ehr_magic.connect(path) as ehr:
        term = next(t for t in link_question(ehr, "Which patients received vancomycin?").terms
                    if t.text == "vancomycin")
    assert [v.table for v in term.values] == ["medication", "admission_drug", "antibiotic_log", "allergy"]
    assert term.more == 1 and term.more_elsewhere


def test_a_column_of_more_values_than_the_bound_is_skipped_and_named(tmp_path: Path) -> None:
    from ehr_magic.db.build import building, write_metadata

    path = tmp_path / "big.duckdb"
    with building(path) as con:  # built by ehr-magic: its dictionary tables' text columns are looked up
        con.execute(f"CREATE TABLE d_terms AS SELECT 'term number ' || i AS label FROM range({MAX_VALUES + 1}) t(i)")
        con.execute("CREATE TABLE d_units AS SELECT * FROM (VALUES ('milligram'), ('millilitre')) v(label)")
        write_metadata(con, schema="terms", source="test", now="2024-01-01 00:00:00", dataset="terms")
    with ehr_magic.connect(path) as big:
        assert {("d_terms", "label"), ("d_units", "label")} <= set(big.lookup_columns())
        linking = QuestionLinker(big).link("How many millilitre of term number 7?")
        assert ("d_units", "label", "millilitre") in pairs(linking)  # the small column is still searched
        assert linking.skipped == (("d_terms", "label", MAX_VALUES + 1),)
        assert f"not searched, too many values ({MAX_VALUES + 1:,}): d_terms.label" in linked_values(linking)
        linker = QuestionLinker(big, max_values=1)
        assert {c for _, c, _ in linker.link("millilitre").skipped} == {"label"}  # the bound is the limit


def test_linked_values_steer_table_choice_to_the_events_the_rows_name(ehr) -> None:
    prompt = Agent(ehr, None, settings=AgentSettings()).prompt(
        "What was the last heart rate of patient 10004235?", window=ContextWindow(8192, "test"))
    full = prompt.tables[:prompt.layout.tables]
    assert {"d_items", "chartevents"} <= set(full)  # the item, and the table its linksto names
    assert "inputevents" not in full and "outputevents" not in full
    assert "d_items.label = 'heart rate' (itemid 220045, linksto 'chartevents')" in prompt.linked
