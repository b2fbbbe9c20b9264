"""Issue 23: what a capable model exploring an unfamiliar schema tripped on, on real components
(the fake model server over real HTTP, real DuckDB, a real Session).

- a step that only looks (prints, describes) is an observation: its output goes back with no
  debugger call and no failure wording, under its own small cap;
- an answer of column names is a look-up for a question about the data;
- an answered run keeps no earlier step's failure message;
- the debugger sees the standalone question and the tables' columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ehr_magic
from ehr_magic.agent import AgentSettings
from ehr_magic.llm import LLMClient, resolve_settings
from ehr_magic.session import Session
from fake_llm import messages_text

DEBUGGER = "rubber-duck debugger"
COUNT = "answer = ehr.sql('SELECT count(*) FROM patients').item()"


def fenced(code: str) -> str:
    return f"Knowledge:\n- patients has one row per patient\n```python\n{code}\n```"


def looked_before(request: dict[str, Any]) -> bool:
    """A code request after a first step: the model has seen what its code showed."""
    return any(m["role"] == "assistant" for m in request["messages"])


def code_requests(server) -> list:
    return [r for r in server.chat_requests() if DEBUGGER not in r.text]


def debugger_requests(server) -> list:
    return [r for r in server.chat_requests() if DEBUGGER in r.text]


@pytest.fixture()
def ehr(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


def test_a_look_up_goes_back_to_the_model_without_debugger_or_failure(fake_llm, make_agent) -> None:
    fake_llm.responder = lambda request: fenced(COUNT) if looked_before(request) else fenced(
        "print(ehr.describe('patients'))")
    result = make_agent().run("How many patients are there?")
    assert result.status == "answered" and result.answer == 94
    assert result.message == ""
    first, second = result.steps
    assert first.observation and first.outcome == "looked up" and not first.soft_failure and not first.debugger_note
    assert first.line().startswith("step 1 looked up: ")
    assert second.outcome == "answered"
    assert len(result.llm_calls) == 2 and not debugger_requests(fake_llm)
    shown = code_requests(fake_llm)[1].json["messages"][-1]["content"]
    assert shown.startswith("Your code ran and showed:") and "gender" in shown  # a column of patients
    assert "did not set" not in shown and "fail" not in shown
    assert "You may look 2 more times" in shown


def test_the_value_of_a_last_line_is_what_a_look_up_shows(fake_llm, make_agent) -> None:
    fake_llm.responder = lambda request: fenced(COUNT) if looked_before(request) else fenced(
        "ehr.describe('patients')")
    result = make_agent().run("How many patients are there?")
    assert result.status == "answered" and result.steps[0].observation
    shown = code_requests(fake_llm)[1].json["messages"][-1]["content"]
    assert "Value of the last line:" in shown and "gender" in shown


def test_look_ups_have_their_own_cap_apart_from_the_error_budget(fake_llm, make_agent) -> None:
    fake_llm.responder = lambda request: "Answer now." if DEBUGGER in messages_text(request) else fenced(
        "print(ehr.sql('SELECT gender FROM patients LIMIT 3'))")
    result = make_agent(max_steps=2, max_observations=3).run("How many patients are there?")
    assert result.status == "failed"
    assert [s.outcome for s in result.steps] == ["looked up"] * 3 + ["failed"] * 2
    assert "look-ups allowed for one question are used up" in result.steps[3].soft_failure
    assert len(debugger_requests(fake_llm)) == 1  # after the first failure; none after the last
    last_look = code_requests(fake_llm)[3].json["messages"][-1]["content"]
    assert "That was the last look-up for this question" in last_look


def test_column_names_do_not_answer_a_question_about_the_data(fake_llm, make_agent) -> None:
    fake_llm.responder = lambda request: fenced(COUNT) if looked_before(request) else fenced(
        "answer = list(ehr.columns('patients'))")
    result = make_agent().run("How many patients are there?")
    assert [s.outcome for s in result.steps] == ["looked up", "answered"] and result.answer == 94
    shown = code_requests(fake_llm)[1].json["messages"][-1]["content"]
    assert "holds only names of columns or tables" in shown
    assert not debugger_requests(fake_llm)


def test_column_names_answer_a_question_about_the_columns(fake_llm, make_agent) -> None:
    fake_llm.enqueue(fenced("answer = list(ehr.columns('patients'))"))
    result = make_agent().run("Which columns does the patients table have?")
    assert result.status == "answered" and "gender" in result.answer and len(result.steps) == 1


def test_an_answered_run_keeps_no_earlier_failure_message(fake_llm, make_agent) -> None:
    fake_llm.responder = lambda request: "Use the table." if DEBUGGER in messages_text(request) else (
        fenced(COUNT) if looked_before(request) else fenced("answer = ehr.sql('SELECT count(*) FROM nope').item()"))
    result = make_agent().run("How many patients are there?")
    assert [s.outcome for s in result.steps] == ["failed", "answered"]
    assert result.status == "answered" and result.message == ""


def test_the_debugger_sees_the_standalone_question_and_the_tables_columns(fake_llm, ehrsql_db) -> None:
    failing = "answer = ehr.sql(f\"SELECT count(*) FROM {table} WHERE lower(gender) = 'f'\").item()"
    working = "answer = ehr.sql(\"SELECT count(*) FROM patients WHERE lower(gender) = 'f'\").item()"

    def model(request: dict[str, Any]) -> str:
        text = messages_text(request)
        if DEBUGGER in text:
            return "Name the table."
        if "Turn 1" in text:  # the follow-up: restated, then code that fails without naming a table
            return "Standalone question: How many female patients are there?\n" + fenced(
                working if looked_before(request) else failing)
        return fenced(COUNT)

    fake_llm.responder = model
    client = LLMClient(resolve_settings(), audit=False, backoff_base=0.01)
    with ehr_magic.connect(ehrsql_db) as ehr, client:
        session = Session(ehr, llm=client, settings=AgentSettings(timeout=5.0))
        assert session.ask("How many patients are there?").answer == 94
        answer = session.ask("Only the female ones.")
    assert answer.status == "answered" and answer.message == ""
    (debugged,) = debugger_requests(fake_llm)
    body = debugged.json["messages"][-1]["content"]
    assert body.startswith("Question: How many female patients are there?\n"
                           "(asked as a follow-up: Only the female ones.)")
    # the failing code names no table; the conversation's earlier code does
    assert "Columns of the tables:" in body and "\npatients: " in body and "gender" in body


def test_the_debugger_sees_the_earlier_questions_when_no_restatement_came(fake_llm, ehrsql_db) -> None:
    def model(request: dict[str, Any]) -> str:
        text = messages_text(request)
        if DEBUGGER in text:
            return "Name the table."
        if "Turn 1" in text:
            return fenced(COUNT if looked_before(request) else "answer = ehr.sql('SELECT count(*) FROM nope').item()")
        return fenced(COUNT)

    fake_llm.responder = model
    client = LLMClient(resolve_settings(), audit=False, backoff_base=0.01)
    with ehr_magic.connect(ehrsql_db) as ehr, client:
        session = Session(ehr, llm=client, settings=AgentSettings(timeout=5.0))
        session.ask("How many patients are there?")
        session.ask("Only the female ones.")
    body = debugger_requests(fake_llm)[0].json["messages"][-1]["content"]
    assert body.startswith("Question: Only the female ones.\n(the latest question of a conversation; the earlier "
                           "ones were:)\n- How many patients are there?")


def test_a_look_up_is_masked_at_the_schema_level(fake_llm, make_agent, ehr) -> None:
    subject = ehr.sql("SELECT subject_id FROM patients ORDER BY subject_id LIMIT 1").item()
    fake_llm.responder = lambda request: fenced(COUNT) if looked_before(request) else fenced(
        "print(ehr.sql('SELECT subject_id, gender FROM patients ORDER BY subject_id LIMIT 3'))")
    result = make_agent(privacy="schema").run("How many patients are there?")
    assert result.status == "answered" and str(subject) in result.steps[0].observation  # the analyst sees it
    shown = code_requests(fake_llm)[1].json["messages"][-1]["content"]
    assert shown.startswith("Your code ran and showed:") and str(subject) not in shown
