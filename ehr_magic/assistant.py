"""The assistant: one library call behind the magic, the side panel and scripts.

``Assistant.ask(question)`` answers from memory when an accepted cell already answers
exactly this question (no model call), otherwise runs the agent with memory as its
few-shot source. ``Assistant.accept`` stores what the analyst accepted.
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

    # -- answering ---------------------------------------------------------------------

    def ask(self, question: str, *, regenerate: bool = False, execute: bool = True, model: str | None = None,
            settings: AgentSettings | None = None, on_event: Callable[[Event], None] | None = None) -> Answer:
        started = time.perf_counter()
        if not regenerate and self.memory is not None:
            reused = self._reuse(question)
            if reused is not None:
                reused.seconds = time.perf_counter() - started
                return reused
        agent_settings = replace(settings or self.settings, execute=execute)
        agent = Agent(self.ehr, self.llm(model), examples=self._examples(), settings=agent_settings)
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
