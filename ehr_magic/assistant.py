"""The assistant: one library call behind the magic, the side panel and scripts.

``Assistant.ask(question)`` tries, in order:

1. an accepted cell for exactly this question: run it as it is (no model call);
2. reuse with substitution (``ehr_magic.reuse``): a remembered cell of the same kind
   of question, its code adapted to the new values ("reused accepted cell #12 with:
   potassium <- rdw, 10010471 <- 10004235"; no model call);
3. the agent, with the closest memory entries as its examples, when a model is
   configured. Without one, the ``ConfigError`` also says why reuse declined.

A question reuse finds certainly unanswerable (a patient id the database does not
hold, a time after the data's "now") is abstained on at step 2 without a model call.
``Assistant.accept`` stores what the analyst accepted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ehr_magic.agent import Agent, AgentSettings, Event
from ehr_magic.agent.executor import Executor, base_namespace, is_empty_answer
from ehr_magic.agent.steps import AgentResult, preview
from ehr_magic.data.lookup import normalise
from ehr_magic.errors import ConfigError

Source = Literal["memory", "agent"]


@dataclass
class Answer:
    """What the front ends show: the answer, its code and where it came from."""

    question: str
    status: str  # answered | clarify | abstained | failed | generated
    answer: Any = None
    code: str = ""
    knowledge: str = ""
    message: str = ""
    source: Source = "agent"
    entry_id: int | None = None  # memory entry reused
    result: AgentResult | None = None
    namespace: dict[str, Any] = field(default_factory=dict, repr=False)
    seconds: float = 0.0
    substitutions: list[tuple[str, str]] = field(default_factory=list)  # (new, old) values written into a reused cell

    @property
    def model_calls(self) -> int:
        return len(self.result.llm_calls) if self.result else 0


class Assistant:
    """Answers questions on one ``EHR`` with a memory store and (lazily) a model."""

    def __init__(self, ehr: Any, *, memory: Any = None, llm_overrides: dict[str, Any] | None = None,
                 settings: AgentSettings | None = None, store_auto: bool = False) -> None:
        self.ehr = ehr
        self.memory = memory
        self.llm_overrides = dict(llm_overrides or {})  # e.g. %config EhrMagics.model
        self.settings = settings or AgentSettings()
        self.store_auto = store_auto
        self._llm = None
        self._llm_key: tuple | None = None
        self._reuser = None

    # -- answering ---------------------------------------------------------------------

    def ask(self, question: str, *, regenerate: bool = False, execute: bool = True, model: str | None = None,
            settings: AgentSettings | None = None, on_event: Callable[[Event], None] | None = None) -> Answer:
        started = time.perf_counter()
        declined = None  # why reuse with substitution did not answer
        if not regenerate and self.memory is not None:
            reused = self._reuse(question)
            if reused is None and execute:
                reused, declined = self._adapt(question)
            if reused is not None:
                reused.seconds = time.perf_counter() - started
                return reused
        try:
            llm = self.llm(model)
        except ConfigError as exc:
            if declined is None:
                raise
            raise ConfigError(f"{declined} To let the agent try: {exc}") from None
        agent_settings = replace(settings or self.settings, execute=execute)
        agent = Agent(self.ehr, llm, examples=self._examples(), settings=agent_settings)
        result = agent.run(question, on_event=on_event)
        answer = Answer(question, result.status, result.answer, result.code, result.knowledge, result.message,
                        "agent", None, result, result.namespace, time.perf_counter() - started)
        if self.store_auto and result.status == "answered" and self.memory is not None:
            answer.entry_id = self.memory.add(question, result.code, knowledge=result.knowledge, origin="auto",
                                              schema=self.ehr.schema, dataset=self.ehr.dataset,
                                              answer_preview=preview(result.answer, 500), model=result.model)
        return answer

    def accepted_entry(self, question: str):
        """The accepted memory entry for exactly this question on this schema, if any."""
        if self.memory is None:
            return None
        wanted = normalise(question)
        for entry in self.memory.search(question, k=5, schema=self.ehr.schema, origins=["accepted", "imported"]):
            if normalise(entry.question) == wanted:
                return entry
        return None

    def _reuse(self, question: str) -> Answer | None:
        entry = self.accepted_entry(question)
        if entry is None:
            return None
        namespace = base_namespace(self.ehr)
        execution = Executor(self.ehr, timeout=self.settings.timeout).run(entry.code, namespace)
        if not execution.ok or not execution.has_answer or is_empty_answer(execution.answer):
            return None  # the stored code no longer works here: generate anew
        self.memory.mark_used([entry.id])
        return Answer(question, "answered", execution.answer, entry.code, entry.knowledge,
                      f"reused accepted cell #{entry.id} (no model call)", "memory", entry.id,
                      namespace={k: v for k, v in namespace.items() if not k.startswith("__")})

    def reuser(self):
        """The reuse engine over this assistant's memory (built on first use)."""
        if self._reuser is None:
            from ehr_magic.reuse import Reuser

            self._reuser = Reuser.from_store(self.ehr, self.memory, timeout=self.settings.timeout)
        return self._reuser

    def _adapt(self, question: str) -> tuple[Answer | None, str | None]:
        """Reuse with substitution: ``(answer, None)``, or ``(None, why not)``. A question
        reuse finds unanswerable comes back as an abstained answer."""
        result = self.reuser().answer(question)
        if result.answered:
            self.memory.mark_used([result.entry_id])
            entry_knowledge = ""
            try:
                entry_knowledge = self.memory.get(result.entry_id).knowledge
            except Exception:  # noqa: BLE001 - the entry may have been deleted meanwhile
                pass
            return Answer(question, "answered", result.answer, result.code, entry_knowledge, result.message,
                          "memory", result.entry_id, namespace=result.namespace,
                          substitutions=list(result.substitutions)), None
        if result.unanswerable:
            return Answer(question, "abstained", message=f"This database cannot answer that: {result.reason}.",
                          source="memory"), None
        return None, f"Memory reuse declined: {result.reason}."

    # -- memory ------------------------------------------------------------------------

    def accept(self, question: str, code: str, *, generated_code: str | None = None, knowledge: str = "",
               answer_preview: str = "", model: str | None = None) -> int | None:
        """Store an accepted cell (the code actually run); returns the entry id."""
        if self.memory is None:
            return None
        return self.memory.add(question, code, knowledge=knowledge, origin="accepted", schema=self.ehr.schema,
                               dataset=self.ehr.dataset, answer_preview=answer_preview, model=model,
                               generated_code=generated_code if generated_code and generated_code != code else None)

    # -- model -------------------------------------------------------------------------

    def llm(self, model: str | None = None):
        """The LLM client for the current settings (re-created when they change).

        Raises ``ConfigError`` naming what to set when no model is configured.
        """
        from ehr_magic.llm import LLMClient, resolve_settings

        overrides = {k: v for k, v in self.llm_overrides.items() if v not in (None, "")}
        settings = resolve_settings(overrides=overrides, model=model)
        key = (settings.provider, settings.model, settings.endpoint, settings.api_key, settings.temperature,
               settings.timeout, settings.stream)
        if self._llm is None or key != self._llm_key:
            if self._llm is not None:
                self._llm.close()
            self._llm, self._llm_key = LLMClient(settings), key
        return self._llm

    def _examples(self):
        if self.memory is None:
            return None
        from ehr_magic.memory.examples import MemoryExamples

        return MemoryExamples(self.memory)
