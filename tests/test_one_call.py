"""One model call per question: what the first prompt holds, what follow-ups keep, and an empty
answer taken as one. A real IPython shell, the fake model server (real HTTP) and real DuckDB."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import ehr_magic
from ehr_magic.agent.hints import searched_for, value_hints
from ehr_magic.runtime.executor import SHOWN_ROWS, Executor
from fake_llm import messages_text
from test_magic import ip  # noqa: F401  (the real IPython shell fixture)

DEBUGGER = "rubber-duck debugger"


def fenced(code: str, standalone: str = "") -> str:
    head = f"Standalone question: {standalone}\n" if standalone else ""
    return f"{head}Knowledge:\n- prescriptions holds the drug orders\n```python\n{code}\n```"


@pytest.fixture()
def ehr(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


def test_a_true_empty_answer_is_one_call_and_tells_the_analyst_what_was_searched(ip, fake_llm, ehr, capsys) -> None:
    # a patient who was never given vancomycin, though others were
    patient = ehr.sql("SELECT min(subject_id) FROM admissions WHERE subject_id NOT IN "
                      "(SELECT subject_id FROM prescriptions WHERE drug = 'vancomycin')").item()
    assert ehr.sql("SELECT count(*) FROM prescriptions WHERE drug = 'vancomycin'").item() > 0
    code = (f"answer = ehr.sql(\"SELECT DISTINCT hadm_id FROM prescriptions WHERE subject_id = {patient} "
            "AND drug = 'vancomycin'\")")
    fake_llm.responder = lambda request: "Check the filters." if DEBUGGER in messages_text(request) else fenced(code)
    capsys.readouterr()
    ip.run_cell_magic("ehr", "", f"In which admissions was patient {patient} given vancomycin?")
    out = capsys.readouterr().out
    assert isinstance(ip.user_ns["answer"], pl.DataFrame) and ip.user_ns["answer"].height == 0
    requests = fake_llm.chat_requests()
    assert len(requests) == 1 and not any(DEBUGGER in r.text for r in requests)  # one call, no debugger
    assert f"None found: the code searched prescriptions: subject_id = {patient}, drug = 'vancomycin'." in out


def test_an_empty_result_of_a_value_stored_nowhere_goes_back_with_its_hint_not_to_the_debugger(fake_llm, ehr) -> None:
    from ehr_magic.agent import Agent, AgentSettings
    from ehr_magic.llm import LLMClient, resolve_settings

    wrong = "answer = ehr.sql(\"SELECT DISTINCT subject_id FROM prescriptions WHERE drug = 'Vancomycin HCL'\")"
    right = "answer = ehr.sql(\"SELECT DISTINCT subject_id FROM prescriptions WHERE drug = 'vancomycin'\")"
    fake_llm.responder = lambda request: fenced(right if "does not occur in" in messages_text(request) else wrong)
    with LLMClient(resolve_settings(), audit=False) as llm:
        result = Agent(ehr, llm, settings=AgentSettings(stream=False)).run("Who was given Vancomycin HCL?")
    assert result.status == "answered" and result.answer.height > 0 and result.message == ""
    assert [c.purpose for c in result.llm_calls] == ["code", "code"]
    assert "'Vancomycin HCL' does not occur in prescriptions.drug" in result.steps[0].hints[0]


def test_the_second_turn_holds_what_the_first_turns_look_found(ip, fake_llm) -> None:
    look = "print(ehr.lookup('prescriptions', 'drug', 'benazepril'))"
    count = ("answer = ehr.sql(\"SELECT count(DISTINCT subject_id) FROM prescriptions "
             "WHERE drug = 'enalapril maleate'\").item()")
    fake_llm.enqueue(fenced(look), fenced(count),
                     fenced(count.replace("count(DISTINCT subject_id)", "count(*)"),
                            "How many prescriptions of enalapril maleate were there?"))
    ip.run_cell_magic("ehr", "", "How many patients were given benazepril?")
    assert ip.user_ns["answer"] > 0
    first_look = fake_llm.chat_requests()[1].last_user_message
    assert "'benazepril' itself is not stored in prescriptions.drug" in first_look  # the lookup says so
    ip.run_cell_magic("ehr", "", "And how many prescriptions were there?")
    second = fake_llm.chat_requests()[2].last_user_message
    assert f"Its look `{look}` showed:" in second
    assert "'enalapril maleate'" in second and "'benazepril' itself is not stored in prescriptions.drug" in second


def test_lookup_says_when_the_text_itself_is_not_stored(ehr) -> None:
    absent = ehr.lookup("prescriptions", "drug", "benazepril")
    assert not absent.exact and absent and "benazepril" not in absent
    assert "'benazepril' itself is not stored in prescriptions.drug" in repr(absent)
    stored = ehr.lookup("prescriptions", "drug", "Vancomycin", scores=True)
    assert stored.exact and stored[0] == ("vancomycin", 100.0) and repr(stored) == repr(list(stored))
    assert not ehr.lookup("d_labitems", "label", "Hb").exact  # its meaning is stored, the text is not


def test_a_value_hint_names_the_table_behind_each_alias(ehr) -> None:
    # one alias, two tables: 'p' is the procedure titles outside the subquery, the diagnosis titles in it
    scoped = ("answer = ehr.sql(\"\"\"SELECT p.long_title FROM procedures_icd x JOIN d_icd_procedures p ON "
              "p.icd_code = x.icd_code WHERE p.long_title = 'Alcohol Detoxification' AND x.hadm_id IN (SELECT "
              "d.hadm_id FROM diagnoses_icd d JOIN d_icd_diagnoses p ON p.icd_code = d.icd_code "
              "WHERE p.long_title = 'Splenomegaly')\"\"\")")
    hints = {h.literal: h.table for h in value_hints(scoped, ehr)}
    assert hints == {"Alcohol Detoxification": "d_icd_procedures", "Splenomegaly": "d_icd_diagnoses"}
    # one table twice, under two aliases, next to another table under one of its names
    twice = ("answer = ehr.sql(\"SELECT a.label FROM d_items a JOIN d_items b ON a.itemid = b.itemid "
             "JOIN d_labitems c ON c.itemid = a.itemid WHERE b.label = 'Heart Rate' AND c.label = 'RDW'\")")
    assert {(h.literal, h.table) for h in value_hints(twice, ehr)} == {("Heart Rate", "d_items"),
                                                                       ("RDW", "d_labitems")}
    assert searched_for(twice, ehr) == "d_items: label = 'Heart Rate'; d_labitems: label = 'RDW'"


def test_printed_tables_are_whole_up_to_the_stated_rows_and_say_when_cut(ehr) -> None:
    long_name = "x" * 80
    run = Executor(ehr).run(
        f"print(pl.DataFrame({{'n': list(range({SHOWN_ROWS})), 'name': ['{long_name}'] * {SHOWN_ROWS}}}))\n"
        f"print(pl.DataFrame({{'n': list(range({SHOWN_ROWS + 60}))}}))")
    whole, cut = run.stdout.split("shape: ")[1:]
    assert "…" not in whole and all(f"│ {i} " in whole for i in range(SHOWN_ROWS)) and long_name in whole
    assert "…" in cut and f"[{SHOWN_ROWS + 60} rows: the first {SHOWN_ROWS // 2} and the last " in cut


def test_what_a_look_found_reaches_the_next_turn_masked_at_the_privacy_level(fake_llm, ehrsql_db) -> None:
    from ehr_magic.agent import AgentSettings
    from ehr_magic.llm import LLMClient, resolve_settings
    from ehr_magic.session import Session

    look = "print(ehr.sql('SELECT subject_id, dob FROM patients ORDER BY subject_id LIMIT 3'))"
    answer = "answer = ehr.sql('SELECT count(*) FROM patients').item()"
    fake_llm.enqueue(fenced(look), fenced(answer), fenced(answer, "How many patients are there in all?"))
    with ehr_magic.connect(ehrsql_db) as ehr, LLMClient(resolve_settings(), audit=False) as llm:
        first = ehr.sql("SELECT subject_id, dob FROM patients ORDER BY subject_id LIMIT 1").row(0)
        session = Session(ehr, llm=llm, settings=AgentSettings(stream=False, privacy="schema"))
        assert session.ask("How many patients are there?").answer == 94
        session.ask("And in all?")
    second = fake_llm.chat_requests()[2].last_user_message
    assert f"Its look `{look}` showed:" in second  # the look is carried ...
    assert str(first[0]) not in second and str(first[1])[:10] not in second  # ... without its patient values
