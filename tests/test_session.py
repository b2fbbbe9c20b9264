"""The one Session: layout, follow-ups, notebook variables, controls (without a kernel)."""

from __future__ import annotations

import ast
from pathlib import Path

import polars as pl
import pytest

import ehr_magic
from ehr_magic.agent.turns import ConversationContext, TurnSummary, fit_turns
from ehr_magic.agent.replies import parse_reply
from ehr_magic.session import variables as notebook
from ehr_magic.session.conversation import describe_answer, looks_like_follow_up

PACKAGE = Path(ehr_magic.__file__).parent


def test_only_the_session_constructs_an_agent() -> None:
    builders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name == "Agent":
                    builders.append(path.relative_to(PACKAGE).as_posix())
    assert builders == ["session/strategies.py"]


def test_each_mode_is_an_ordered_list_of_strategies_and_the_first_answer_wins() -> None:
    from ehr_magic.session import Answer, Session
    from ehr_magic.session.strategies import AdaptedReuse, AgentAnswer, ExactReuse, MemoryAbstains

    def kinds(session: Session) -> list[type]:
        return [type(strategy) for strategy in session.strategies]

    assert kinds(Session()) == [ExactReuse, AdaptedReuse, AgentAnswer]
    assert kinds(Session(mode="agent")) == [AgentAnswer]
    session = Session(mode="memory")
    assert kinds(session) == [ExactReuse, AdaptedReuse, MemoryAbstains]
    answer = session.ask("How many patients are there?")  # no memory, no model: memory mode abstains
    assert (answer.status, answer.source) == ("abstained", "memory")
    assert answer.message == "Memory mode answers without a model, and this follow-up needs one."

    class Fixed:
        def answer(self, question: str, context) -> Answer | None:
            return Answer(question=question, status="answered", answer=42, source="session")

    session.strategies.insert(0, Fixed())
    answer = session.ask("How many patients are there?")
    assert (answer.status, answer.answer) == ("answered", 42)
    assert session.conversation.turns[-1].status == "answered"  # the session finishes what a strategy returns
    session.mode = "agent"
    assert kinds(session) == [AgentAnswer]
    with pytest.raises(ValueError, match="mode must be one of"):
        Session(mode="model")
    with pytest.raises(TypeError):
        Answer("How many?", "answered")  # keywords only


def test_standalone_question_line_is_parsed_and_optional() -> None:
    reply = parse_reply("Standalone question: How many emergency admissions are there?\n"
                        "```python\nanswer = 1\n```")
    assert reply.kind == "code" and reply.standalone == "How many emergency admissions are there?"
    assert parse_reply("```python\nanswer = 1\n```").standalone == ""


def test_history_budget_shortens_older_turns_then_drops_them() -> None:
    turns = tuple(TurnSummary(f"question {i}", "x = 1\n" * 40, "a number") for i in range(1, 7))
    roomy = fit_turns(turns, 10_000)
    assert roomy.count("```python") == 6
    tight = fit_turns(turns, 120)
    assert "question 6" in tight and "```python" in tight  # the newest keeps its code
    assert "question 1" not in tight and "earlier turns left out" in tight
    middle = fit_turns(turns, 250)
    assert middle.count("```python") < 6 and "question 6" in middle


def test_follow_up_detection() -> None:
    assert looks_like_follow_up("now only the emergency ones")
    assert looks_like_follow_up("plot that by month")
    assert looks_like_follow_up("and for women?")
    assert not looks_like_follow_up("How many patients are there?")
    assert not looks_like_follow_up("Patients that had a potassium above 5")


def test_variables_named_or_pointed_at() -> None:
    cohort, other = pl.DataFrame({"subject_id": [1]}), pl.DataFrame({"x": [1]})
    variables = {"cohort": cohort, "n": 3, "other": other}
    assert notebook.referenced("age of the patients in cohort", variables) == (["cohort"], [])
    assert notebook.referenced("how old are them", variables) == (["other"], [])
    assert notebook.referenced("how old are the people in `gone`", variables) == ([], ["gone"])


def test_variable_descriptions_follow_the_privacy_level() -> None:
    frame = pl.DataFrame({"subject_id": [10004235, 10001217], "note": ["MARKER-7c1", "x"]})
    schema = notebook.describe("cohort", frame, "schema").text
    assert "cohort" in schema and "subject_id" in schema and "2 rows" in schema
    assert "10004235" not in schema and "MARKER" not in schema
    aggregates = notebook.describe("cohort", frame, "aggregates").text
    assert "10001217..10004235" in aggregates and "MARKER" not in aggregates
    assert "MARKER-7c1" in notebook.describe("cohort", frame, "full").text
    assert "= 3" not in notebook.describe("n", 3, "schema").text
    assert "= 3" in notebook.describe("n", 3, "aggregates").text


def test_lazy_and_unknown_variables_are_described_without_materialising() -> None:
    class Boom:
        pass

    lazy = pl.LazyFrame({"a": [1]}).map_batches(lambda _: (_ for _ in ()).throw(AssertionError("collected")))
    text = notebook.describe("big", lazy, "full").text
    assert "LazyFrame" in text and "not collected" in text
    many = pl.DataFrame({"i": range(notebook.HUGE_ROWS + 1)})
    huge = notebook.describe("many", many, "full")
    assert "huge" in huge.note and "ranges" not in huge.text and "first rows" not in huge.text
    unknown = notebook.describe("thing", Boom(), "full")
    assert not unknown.known and "does not describe" in unknown.text


def test_answer_description_values_only_as_privacy_allows() -> None:
    frame = pl.DataFrame({"admission_type": ["EW EMER."], "n": [41]})
    assert "EW EMER." not in describe_answer(frame, "schema") and "admission_type" in describe_answer(frame, "schema")
    assert "EW EMER." in describe_answer(frame, "full")
    assert describe_answer(94, "schema") == "a number" and "94" in describe_answer(94, "aggregates")


def test_conversation_context_names_the_variables_it_describes() -> None:
    text = ConversationContext(turns=(TurnSummary("q1", "answer = 1", "a number"),),
                               variables=("`cohort`: polars DataFrame",), variable_names=("cohort",)).render()
    assert "Notebook variables described to the model: cohort" in text
    assert "Turn 1: q1" in text and "Standalone question:" in text


def test_follow_up_examples_are_retrieved_with_the_earlier_question(fake_llm, ehrsql_db, tmp_path) -> None:
    """A follow-up ("now only the emergency ones") retrieves its few-shot example as the
    question it follows: seen in the prompt the model gets, with one example shot."""
    from ehr_magic.agent import AgentSettings
    from ehr_magic.db import connect
    from ehr_magic.memory import MemoryStore
    from ehr_magic.session import Session

    admissions = "answer = 'example about admissions per year'"
    emergency = "answer = 'example about emergency contacts'"
    with connect(ehrsql_db) as ehr, MemoryStore(tmp_path / "memory.sqlite") as memory:
        for question, code in (("How many admissions were there per year?", admissions),
                               ("Which emergency contacts are on file now?", emergency)):
            memory.add(question, code, origin="accepted", schema=ehr.schema, dataset=ehr.dataset)
        session = Session(ehr, memory=memory, mode="agent", settings=AgentSettings(shots=1))
        fake_llm.enqueue("```python\nanswer = ehr.sql('SELECT 2').item()\n```",
                         "Standalone question: How many emergency admissions were there?\n"
                         "```python\nanswer = ehr.sql('SELECT 3').item()\n```",
                         "```python\nanswer = ehr.sql('SELECT 4').item()\n```")
        session.ask("How many admissions were there?")
        answer = session.ask("now only the emergency ones")
        session.new_conversation()
        session.ask("now only the emergency ones")  # asked first, it stands alone
    first, follow_up, alone = (request.text for request in fake_llm.chat_requests())
    assert answer.standalone_question == "How many emergency admissions were there?"
    assert admissions in first and emergency not in first
    assert admissions in follow_up and emergency not in follow_up
    assert emergency in alone and admissions not in alone


class _ReachedTheAgent(Exception):
    """Raised at the agent's first event: the question was not refused before it."""


def _stop_at_the_agent(event) -> None:
    raise _ReachedTheAgent(event.phase)


@pytest.mark.parametrize("mode", ["agent", "auto"])
def test_every_ehrsql_question_asked_first_reaches_the_agent(fake_llm, ehrsql_db, mode) -> None:
    """No first question is refused for its wording ("patients of the same age", "on the same
    day", "then"...): all EHRSQL-2024 train and valid questions, each asked first, reach the agent
    (eval's agent mode is ``keep_conversation=False``; the magic, panel and CLI keep it)."""
    import json

    from datapaths import EHRSQL_DIR
    from ehr_magic.db import connect
    from ehr_magic.llm import LLMClient, resolve_settings
    from ehr_magic.session import Session

    questions = [item["question"] for split in ("train", "valid")
                 for item in json.loads((EHRSQL_DIR / split / "data.json").read_text())["data"]]
    assert len(questions) == 6287
    llm = LLMClient(resolve_settings(model="fake-model"))
    refused = []
    with connect(ehrsql_db) as ehr:
        for keep in (False, True):
            session = Session(ehr, llm=llm, mode=mode, keep_conversation=keep)  # no memory: reuse never answers
            for question in questions if keep is False else questions[:500]:
                session.new_conversation()
                try:
                    answer = session.ask(question, on_event=_stop_at_the_agent)
                except _ReachedTheAgent:
                    continue
                refused.append((question, answer.status, answer.message))
    llm.close()
    assert refused == []
    assert fake_llm.chat_requests() == []  # stopped before the model was called


def test_a_same_day_question_asked_first_is_answered(fake_llm, ehrsql_db) -> None:
    from ehr_magic.db import connect
    from ehr_magic.session import Session

    fake_llm.enqueue("```python\nanswer = ehr.sql('SELECT count(DISTINCT subject_id) FROM prescriptions').item()\n```")
    with connect(ehrsql_db) as ehr:
        answer = Session(ehr).ask("How many patients had heparin and nitroglycerin on the same day?")
    assert answer.status == "answered" and answer.source == "agent" and isinstance(answer.answer, int)
    assert "heparin and nitroglycerin on the same day" in fake_llm.chat_requests()[0].last_user_message


def test_a_session_with_no_database_says_to_connect_one_and_remembers_nothing() -> None:
    from ehr_magic.errors import DatabaseError
    from ehr_magic.session.core import Session

    session = Session()
    for use in (session.knowledge_view, session.code_names, session.edit_knowledge, session.tools):
        with pytest.raises(DatabaseError, match=r"^No database is open: connect one first \(%ehr connect PATH"):
            use()
    assert session.cells.remember("How many patients are there?", "answer = 1") is None
