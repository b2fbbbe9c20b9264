"""The ways a session answers a question, tried in order; the first that answers wins.

Each strategy is a small object with one method, ``answer(question, context)``, that
returns an ``Answer`` or None (not mine: try the next). ``STRATEGIES`` lists them for each
run mode:

- ``ExactReuse``: an accepted cell for exactly this question, run as it is (no model call);
- ``AdaptedReuse``: reuse with substitution (``ehr_magic.reuse``), a remembered cell of the
  same kind of question adapted to the new values (no model call); a question reuse finds
  certainly unanswerable is abstained on here;
- ``AgentAnswer``: the agent, with the closest memory entries as its examples and the
  conversation in its prompt;
- ``MemoryAbstains``: memory mode's last word, as it never calls a model.

Memory strategies never answer a follow-up, a regenerated question, or without memory
(``AskContext.may_reuse``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ehr_magic import skills
from ehr_magic.agent import Agent, AgentSettings, Event, Example, ExampleSource
from ehr_magic.agent.turns import ConversationContext
from ehr_magic.errors import ConfigError
from ehr_magic.memory import EntryNotFoundError
from ehr_magic.memory.examples import MemoryExamples
from ehr_magic.runtime.executor import Executor, code_namespace, is_empty_answer
from ehr_magic.safety.privacy import preview
from ehr_magic.session import variables as notebook
from ehr_magic.session.answer import Answer
from ehr_magic.text import normalise

if TYPE_CHECKING:
    from ehr_magic.session.core import Session


@dataclass
class AskContext:
    """One question being answered: what the session worked out before trying the strategies."""

    session: Session
    variables: dict[str, Any]  # the notebook's user variables (name -> value)
    present: list[str]  # the variables the question refers to
    settings: AgentSettings  # for this question (``execute`` included)
    level: str  # the privacy level
    follow_up: bool  # worded like a follow-up, after an earlier turn
    regenerate: bool = False
    model: str | None = None
    on_event: Callable[[Event], None] | None = None
    declined: str | None = None  # why reuse with substitution did not answer

    @property
    def may_reuse(self) -> bool:
        """Whether memory may answer: not a follow-up, not regenerated, and a memory to answer from."""
        return not self.regenerate and self.session.memory is not None and not self.follow_up


class Strategy(Protocol):
    def answer(self, question: str, context: AskContext) -> Answer | None: ...


def accepted_entry(session: Session, question: str) -> Any:
    """The accepted memory entry for exactly this question on this schema, if any."""
    if session.memory is None:
        return None
    wanted = normalise(question)
    for entry in session.memory.search(question, k=5, schema=session.database.schema, origins=["accepted", "imported"]):
        if normalise(entry.question) == wanted:
            return entry
    return None


class ExactReuse:
    """An accepted cell for exactly this question, run as it is (no model call)."""

    def answer(self, question: str, context: AskContext) -> Answer | None:
        if not context.may_reuse:
            return None
        session = context.session
        entry = accepted_entry(session, question)
        if entry is None:
            return None
        # a cell may use notebook variables
        namespace, shared = code_namespace(session.database, context.variables, session.tools())
        execution = Executor(session.database, timeout=session.settings.timeout).run(entry.code, namespace)
        if not execution.ok or not execution.has_answer or is_empty_answer(execution.answer):
            return None  # the stored code no longer works here: generate anew
        session.memory.mark_used([entry.id])
        return Answer(question=question, status="answered", answer=execution.answer, code=entry.code,
                      knowledge=entry.knowledge, message=f"reused accepted cell #{entry.id} (no model call)",
                      source="memory", entry_id=entry.id,
                      namespace={k: v for k, v in namespace.items()
                                 if not k.startswith("__") and not (k in shared and shared[k] is v)})


class AdaptedReuse:
    """Reuse with substitution; a question reuse finds unanswerable comes back abstained.
    When reuse declines, why is kept in ``context.declined``."""

    def answer(self, question: str, context: AskContext) -> Answer | None:
        if not context.may_reuse or not context.settings.execute:
            return None
        session = context.session
        result = session.reuser().answer(question)
        if result.answered:
            session.memory.mark_used([result.entry_id])
            entry_knowledge = ""
            try:
                entry_knowledge = session.memory.get(result.entry_id).knowledge
            except EntryNotFoundError:  # deleted meanwhile: the answer stands without its knowledge
                pass
            return Answer(question=question, status="answered", answer=result.answer, code=result.code,
                          knowledge=entry_knowledge, message=result.message, source="memory",
                          entry_id=result.entry_id, namespace=result.namespace,
                          substitutions=list(result.substitutions))
        if result.unanswerable:
            return Answer(question=question, status="abstained", source="memory",
                          message=f"This database cannot answer that: {result.reason}.")
        context.declined = f"Memory reuse declined: {result.reason}."
        return None


class AgentAnswer:
    """The agent: the model writes and runs code, with memory's closest entries as examples."""

    def answer(self, question: str, context: AskContext) -> Answer | None:
        session = context.session
        try:
            llm = session.llm(context.model)
        except ConfigError as exc:
            if context.declined is None:
                raise
            # what to set first, then why memory could not answer
            raise ConfigError(f"{exc} {context.declined}") from None
        variables = context.variables
        described = [notebook.describe(name, variables[name], context.level) for name in context.present]
        conversation = ConversationContext(
            turns=session.conversation.summaries() if session.keep_conversation else (),
            variables=tuple(d.text for d in described), variable_names=tuple(d.name for d in described),
            namespace=variables, budget_tokens=session.history_tokens)
        examples: ExampleSource | None = memory_examples(session.memory)
        if context.follow_up and examples is not None:  # "now only the women" retrieves like the question it follows
            examples = _AlongWith(examples, session.conversation.turns[-1].standalone)
        agent = Agent(session.database, llm, examples=examples, settings=context.settings, tools=session.tools(),
                      skill_cards=skills.prompt_section)
        result = agent.run(question, on_event=context.on_event, conversation_context=conversation)
        standalone = result.standalone_question if not conversation.empty and result.standalone_question else question
        answer = Answer(question=question, status=result.status, answer=result.answer, code=result.code,
                        knowledge=result.knowledge, message=result.message, source="agent", entry_id=None,
                        result=result, namespace=result.namespace, standalone=standalone,
                        variables=[d.name for d in described],
                        notes=[d.note for d in described if d.note])
        if session.store_auto and result.status == "answered" and session.memory is not None:
            answer.entry_id = session.memory.add(standalone, result.code, knowledge=result.knowledge, origin="auto",
                                                 schema=session.database.schema, dataset=session.database.dataset,
                                                 answer_preview=preview(result.answer, 500), model=result.model)
        return answer


class MemoryAbstains:
    """Memory mode never calls a model: what memory did not answer is abstained on, saying why."""

    def answer(self, question: str, context: AskContext) -> Answer | None:
        if context.may_reuse:
            message = context.declined or "Nothing in memory answers this."
        else:
            message = "Memory mode answers without a model, and this follow-up needs one."
        return Answer(question=question, status="abstained", source="memory", message=message)


STRATEGIES: Mapping[str, tuple[Strategy, ...]] = {
    "auto": (ExactReuse(), AdaptedReuse(), AgentAnswer()),
    "agent": (AgentAnswer(),),
    "memory": (ExactReuse(), AdaptedReuse(), MemoryAbstains()),
}


def memory_examples(memory: Any) -> MemoryExamples | None:
    """The agent's few-shot source: memory's closest entries (None without memory)."""
    return MemoryExamples(memory) if memory is not None else None


class _AlongWith:
    """Few-shot retrieval for a follow-up: the earlier standalone question joins the query."""

    def __init__(self, inner: ExampleSource, earlier: str) -> None:
        self.inner, self.earlier = inner, earlier

    def examples(self, question: str, schema: str, k: int) -> list[Example]:
        return self.inner.examples(f"{self.earlier} {question}", schema, k)
