"""Issue 23, items 4 and 5, and the magic's view of a look-up (item 2), on real components:
a real IPython shell, a real Session, the fake model over real HTTP, real DuckDB.

- earlier answers reach the next turn with up to 20 rows or items, and every earlier turn
  keeps its status and result shape when the history budget is short;
- templates say only what is there (no notebook variables promised when none is listed, no
  "what came before" without earlier turns, no tables promised when none was matched);
- the magic shows a look-up as "looked up", not "failed".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

import ehr_magic
from ehr_magic.agent import AgentSettings, context
from ehr_magic.agent.turns import TurnSummary, fit_turns
from ehr_magic.llm import LLMClient, resolve_settings
from ehr_magic.session import Session
from ehr_magic.session.conversation import describe_answer
from test_magic import ipython_shell

IDS = "answer = ehr.sql('SELECT subject_id FROM patients ORDER BY subject_id LIMIT 25')['subject_id'].to_list()"


def fenced(code: str) -> str:
    return f"Knowledge:\n- patients has one row per patient\n```python\n{code}\n```"


@pytest.fixture()
def session(fake_llm, ehrsql_db: Path) -> Iterator[Session]:
    with ehr_magic.connect(ehrsql_db) as ehr, LLMClient(resolve_settings(), audit=False) as client:
        yield Session(ehr, llm=client, settings=AgentSettings(timeout=10.0))


def last_user_message(fake_llm) -> str:
    return fake_llm.chat_requests()[-1].json["messages"][-1]["content"]


def history(fake_llm) -> str:
    """The earlier turns of the last request (examples below them may quote ids of their own)."""
    return last_user_message(fake_llm).split("Start your reply with")[0]


def test_earlier_answers_show_up_to_20_items_and_each_turns_status(fake_llm, session: Session) -> None:
    ids = session.ehr.sql("SELECT subject_id FROM patients ORDER BY subject_id LIMIT 25")["subject_id"].to_list()
    fake_llm.enqueue(fenced(IDS), "UNANSWERABLE: heights are not recorded here.",
                     "Standalone question: How many patients are there?\n"
                     + fenced("answer = ehr.sql('SELECT count(*) FROM patients').item()"))
    assert session.privacy_level() == "full"  # the open EHRSQL demo
    session.ask("Which are the first 25 patients?")
    assert session.ask("How tall are they?").status == "abstained"
    session.ask("How many are there in all?")
    sent = history(fake_llm)
    assert "a list of 25 items (first 20): [" in sent
    assert str(ids[19]) in sent and str(ids[20]) not in sent
    assert "Its outcome (abstained): heights are not recorded here." in sent


def test_a_short_history_budget_keeps_every_turns_status_and_shape(fake_llm, ehrsql_db: Path) -> None:
    fake_llm.responder = lambda request: fenced(IDS)
    with ehr_magic.connect(ehrsql_db) as ehr, LLMClient(resolve_settings(), audit=False) as client:
        session = Session(ehr, llm=client, settings=AgentSettings(timeout=10.0), history_tokens=150)
        for question in ("Which are the first 25 patients?", "And again?", "Once more?", "The last time?"):
            session.ask(question)
    sent = history(fake_llm)
    assert "left out" not in sent
    assert sent.count("Its outcome: answered, a list of 25 items") == 2  # the two oldest: shape only
    assert "Turn 3: Once more?" in sent and "(first 20)" in sent  # the newest keeps its values


def test_describe_answer_shows_rows_only_at_the_full_level() -> None:
    import polars as pl

    frame = pl.DataFrame({"subject_id": list(range(30)), "n": [1] * 30})
    full = describe_answer(frame, "full")
    assert full.startswith("a table of 30 rows x 2 columns (subject_id, n); first 20 rows:")
    assert "(19, 1)" in full and "(20, 1)" not in full
    assert describe_answer(frame, "schema") == describe_answer(frame, "aggregates") == \
        "a table of 30 rows x 2 columns (subject_id, n)"
    assert describe_answer(94, "aggregates") == "a number: 94" and describe_answer("f", "aggregates") == "a str"


def test_fit_turns_drops_turns_only_after_their_values() -> None:
    turns = tuple(TurnSummary(f"question {i}", "answer = 1", "a number: 1", "answered", "a number") for i in range(40))
    text = fit_turns(turns, 300)
    assert "earlier turns left out" in text and "Turn 40: question 39" in text
    assert "Its outcome: answered, a number" in text


def test_templates_promise_no_variables_and_no_turns_that_are_not_there(fake_llm, session: Session) -> None:
    import polars as pl

    fake_llm.enqueue(fenced("answer = cohort.height"),
                     fenced("answer = ehr.sql('SELECT count(*) FROM patients').item()"))
    session.ask("How many rows has `cohort`?", variables={"cohort": pl.DataFrame({"a": [1, 2]})})
    first = last_user_message(fake_llm)
    assert "The analyst asks this question in a notebook." in first and "continues a conversation" not in first
    assert "It may use the notebook variables listed above" in first
    session.ask("And how many patients are there?")
    second = last_user_message(fake_llm)
    assert "continues a conversation" in second
    assert "notebook variables listed above" not in second


def test_no_tables_are_promised_when_none_was_matched(ehrsql_db: Path) -> None:
    with_tables = context.question_message("How many?", [], "", tables="patients(subject_id INTEGER)")
    assert with_tables.startswith("Tables for this question:")
    without = context.question_message("How many?", [], "")
    assert "Tables for this question" not in without and without.startswith("No table was matched to this question")
    with ehr_magic.connect(ehrsql_db) as ehr:
        system = context.system_prompt(ehr)
    assert "The tables a question needs are described in full" not in system
    assert "look first" in system and "when any are found" in system


@pytest.fixture()
def ip(ehrsql_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    yield from ipython_shell(ehrsql_db, monkeypatch, tmp_path)


def test_the_magic_shows_a_look_up_as_looked_up(ip, fake_llm, capsys) -> None:
    def model(request: dict[str, Any]) -> str:
        looked = any(m["role"] == "assistant" for m in request["messages"])
        return fenced("answer = ehr.sql('SELECT count(*) FROM patients').item()" if looked
                      else "print(ehr.describe('patients'))")

    fake_llm.responder = model
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    out = capsys.readouterr().out
    assert ip.user_ns["answer"] == 94
    assert "2 steps, 2 model calls" in out and "step 1 looked up: " in out
    assert "failed" not in out and "did not set" not in out
