"""The agent loop against the fake OpenAI-compatible server: real HTTP, real DuckDB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import ehr_magic
from ehr_magic.llm import LLMAuthError
from fake_llm import FakeReply, messages_text

DEBUGGER = "rubber-duck debugger"


def fenced(code: str, knowledge: str = "- d_labitems.label names the lab test") -> str:
    return f"Knowledge:\n{knowledge}\n```python\n{code}\n```"


def is_debugger(request: dict[str, Any]) -> bool:
    return DEBUGGER in messages_text(request)


def code_requests(server) -> list:
    return [r for r in server.chat_requests() if DEBUGGER not in r.text]


@pytest.fixture()
def ehr(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


WRONG_CASE = ("answer = ehr.sql(\"\"\"SELECT l.valuenum FROM labevents l JOIN d_labitems d ON l.itemid = d.itemid\n"
              "WHERE d.label = 'RDW' AND l.subject_id = 10004235 ORDER BY l.charttime DESC LIMIT 1\"\"\")")
RIGHT_CASE = WRONG_CASE.replace("'RDW'", "'rdw'")


def test_wrong_case_is_fixed_through_value_hints_without_the_debugger(fake_llm, make_agent, ehr) -> None:
    def responder(request: dict[str, Any]) -> str:
        text = messages_text(request)
        if is_debugger(request):
            return "The label is stored in lower case: filter on 'rdw'."
        if "closest stored values: 'rdw'" in text:
            return fenced(RIGHT_CASE)
        return fenced(WRONG_CASE)

    fake_llm.responder = responder
    result = make_agent().run("What was the last RDW of patient 10004235?")
    expected = ehr.sql(RIGHT_CASE.split('"""')[1])
    assert result.status == "answered"
    assert result.answer.equals(expected) and result.answer.height == 1
    assert [s.succeeded for s in result.steps] == [False, True]
    first = result.steps[0]
    assert first.soft_failure == "`answer` is an empty DataFrame (0 rows)"
    assert any("'RDW' does not occur in d_labitems.label" in h for h in first.hints)
    # The hint names the cause of the empty result: it goes back at once, with no debugger call.
    assert sum(is_debugger(r.json) for r in fake_llm.chat_requests()) == 0
    second_prompt = code_requests(fake_llm)[1].text
    assert "closest stored values: 'rdw', 'rdw-sd'" in second_prompt
    assert [c.purpose for c in result.llm_calls] == ["code", "code"]
    assert result.prompt_tokens > 0 and result.completion_tokens > 0


def test_wrong_column_binder_error_is_fixed(fake_llm, make_agent) -> None:
    bad = "answer = ehr.sql('SELECT count(*) FROM patients WHERE sex = \\'f\\'').item()"
    good = "answer = ehr.sql(\"SELECT count(*) FROM patients WHERE gender = 'f'\").item()"

    def responder(request: dict[str, Any]) -> str:
        if is_debugger(request):
            return "The column is called gender, not sex."
        return fenced(good if "Binder Error" in messages_text(request) else bad)

    fake_llm.responder = responder
    result = make_agent().run("How many female patients are there?")
    assert result.status == "answered" and isinstance(result.answer, int) and result.answer > 0
    error = result.steps[0].error
    assert error.type == "BinderException" and error.line == 1 and "sex" in error.message
    assert "at line 1" in code_requests(fake_llm)[1].text


def test_reply_without_code_gets_one_reminder(fake_llm, make_agent) -> None:
    fake_llm.enqueue("I think you should count the patients.", fenced("answer = ehr.count('patients')"))
    result = make_agent().run("How many patients?")
    assert result.status == "answered" and result.answer == 94
    assert "had no ```python code block" in fake_llm.chat_requests()[1].last_user_message
    fake_llm.enqueue("No code here.", "Still no code.")
    failed = make_agent().run("How many patients?")
    assert failed.status == "failed" and "without code twice" in failed.message


def test_the_conversation_is_the_first_request_and_the_steps(fake_llm, make_agent) -> None:
    # a reply without code, its reminder, a failing step: each later request holds them in order
    fake_llm.enqueue("Count them, I think.", fenced("answer = ehr.sql('SELECT * FROM no_such_table')"),
                     fenced("answer = ehr.count('patients')"))
    result = make_agent(debugger=False).run("How many patients?")
    assert result.status == "answered" and result.answer == 94
    last = code_requests(fake_llm)[-1].json["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert last[2]["content"] == "Count them, I think." and "```python" in last[3]["content"]
    failed = result.steps[0]
    assert failed.reminded == "Count them, I think."
    assert last[2:] == failed.to_messages() and last[4]["content"] == failed.reply
    assert "no_such_table" in last[5]["content"]


def test_model_that_never_succeeds_stops_after_t_steps(fake_llm, make_agent) -> None:
    fake_llm.responder = lambda req: "Check the table name." if is_debugger(req) else fenced(
        "answer = ehr.sql('SELECT * FROM no_such_table')")
    result = make_agent(max_steps=3).run("Anything?")
    assert result.status == "failed" and len(result.steps) == 3
    assert "no_such_table" in result.message and "CatalogException" in result.message
    # The debugger runs between attempts, not after the last one.
    assert [c.purpose for c in result.llm_calls] == ["code", "debug", "code", "debug", "code"]


def test_an_answer_typed_in_without_reading_the_data_is_not_an_answer(fake_llm, make_agent) -> None:
    # a small local model wrote exactly this for "How many patients are there?"
    fake_llm.enqueue(fenced("answer = 3.0"), "Nothing.", fenced("answer = ehr.count('patients')"))
    result = make_agent(max_steps=3).run("How many patients are there?")
    assert result.status == "answered" and result.answer == 94 and len(result.steps) == 2
    assert "typed in, not computed from the data" in result.steps[0].soft_failure
    sent = fake_llm.chat_requests()[-1].text
    assert "never uses `ehr`" in sent  # the model was told why
    fake_llm.enqueue(fenced("answer = skills.calc.bmi(70, 175)"))  # a calculator reads no table, and may
    assert make_agent().run("What is the BMI for 70 kg and 1.75 m?").status == "answered"


def test_clarify_and_abstain(fake_llm, make_agent) -> None:
    fake_llm.enqueue("CLARIFY: Do you mean the first or the last hospital visit?")
    result = make_agent().run("What was the length of stay of patient 10004235?")
    assert result.status == "clarify" and result.message.startswith("Do you mean the first")
    fake_llm.enqueue("UNANSWERABLE: phone numbers are not recorded in this database.")
    result = make_agent().run("What is the phone number of patient 10004235?")
    assert result.status == "abstained" and "phone numbers" in result.message
    assert result.steps == []


def test_rate_limit_then_success_is_retried(fake_llm, make_agent) -> None:
    fake_llm.enqueue(FakeReply(status=429, headers={"Retry-After": "0.1"}, text="slow down"),
                     fenced("answer = ehr.sql('SELECT 1').item()"))
    result = make_agent().run("One?")
    assert result.status == "answered" and result.answer == 1
    assert len(fake_llm.chat_requests()) == 2


def test_unauthorised_is_not_retried(fake_llm, make_agent) -> None:
    fake_llm.enqueue(FakeReply(status=401, text="bad key"))
    with pytest.raises(LLMAuthError, match="401"):
        make_agent().run("One?")
    assert len(fake_llm.chat_requests()) == 1


def test_infinite_loop_and_runaway_query_are_stopped(fake_llm, make_agent) -> None:
    fake_llm.enqueue(
        fenced("while True:\n    pass"), "Avoid the endless loop.",
        fenced("answer = ehr.sql('SELECT count(*) FROM labevents a, labevents b, labevents c').item()"),
        "Avoid the cross join.",
        fenced("answer = ehr.count('labevents')"),
    )
    running = set(_executor_threads())
    result = make_agent(timeout=1.5).run("How many lab events?")
    assert result.status == "answered" and result.answer == 26426
    assert [s.error.type if s.error else None for s in result.steps] == ["Timeout", "Timeout", None]
    assert set(_executor_threads()) <= running  # both runaways were stopped, not left running


def _executor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ehr-magic-executor" and t.is_alive()]


def test_knowledge_separate_mode_makes_its_own_call(fake_llm, make_agent) -> None:
    fake_llm.enqueue("- patients table, count rows", fenced("answer = ehr.count('patients')"))
    result = make_agent(knowledge="separate").run("How many patients?")
    assert result.status == "answered" and result.knowledge == "- patients table, count rows"
    assert [c.purpose for c in result.llm_calls] == ["knowledge", "code"]
    assert "Knowledge for this question:\n- patients table" in fake_llm.chat_requests()[1].text


def test_prompt_shape_static_prefix_first(fake_llm, make_agent, ehr) -> None:
    fake_llm.enqueue(fenced("answer = ehr.now"), fenced("answer = ehr.now"))
    make_agent().run("What time is it?")
    make_agent().run("Which day is today?")
    first, second = (r.messages for r in fake_llm.chat_requests())
    assert first[0]["role"] == "system" and first[0] == second[0]  # identical, cacheable prefix
    assert "2100-12-31 23:59:00" in first[0]["content"]
    assert "What time is it?" in first[-1]["content"] and "What time" not in first[0]["content"]


def test_ask_cli_json(fake_llm, ehrsql_db: Path) -> None:
    fake_llm.enqueue(fenced("answer = ehr.sql('SELECT gender, count(*) AS n FROM patients GROUP BY 1 ORDER BY 1')"))
    done = subprocess.run([sys.executable, "-m", "ehr_magic", "ask", "Patients by gender?", "--db", str(ehrsql_db),
                           "--json"], capture_output=True, text=True, env=os.environ.copy(), timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "answered"
    with ehr_magic.connect(ehrsql_db) as ehr:
        expected = [list(row) for row in ehr.sql("SELECT gender, count(*) FROM patients GROUP BY 1 ORDER BY 1").rows()]
    assert result["answer"] == expected and len(expected) == 2
    assert result["llm_calls"] == 1 and result["prompt_tokens"] > 1000
    assert set(result) >= {"status", "answer", "code", "steps", "llm_calls", "prompt_tokens",
                           "completion_tokens", "seconds"}


def test_ask_cli_without_model_says_what_to_set(ehrsql_db: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("EHR_MAGIC_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL")}
    done = subprocess.run([sys.executable, "-m", "ehr_magic", "ask", "x", "--db", str(ehrsql_db)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "EHR_MAGIC_MODEL" in done.stderr


def test_generated_code_calls_clinical_skills(fake_llm, make_agent, ehr) -> None:
    fake_llm.enqueue(fenced("cci = skills.charlson(ehr, subject_ids=[10004235])\nanswer = cci"))
    result = make_agent().run("What is the Charlson comorbidity index of patient 10004235?")
    assert result.status == "answered"
    from ehr_magic import skills

    assert result.answer.equals(skills.charlson(ehr, subject_ids=[10004235]))
    prompt = fake_llm.chat_requests()[0].messages[-1]["content"]
    assert "skills.charlson(" in prompt  # the relevant skill is offered with the question
    fake_llm.enqueue(fenced("answer = ehr.count('patients')"))
    make_agent().run("How many patients are there?")
    assert "Verified clinical skills" not in fake_llm.chat_requests()[1].messages[-1]["content"]
