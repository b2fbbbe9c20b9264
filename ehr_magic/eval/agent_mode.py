"""``--mode agent`` and ``--mode memory``: benchmark questions through a ``Session``, the
same answering path as the magic, with the session's mode set to ``agent`` (every
question to the model) or ``memory`` (reuse only, never a model call).

Agent mode: few-shot examples come from a memory store of the run, the
``--memory-from`` split's questions with their gold code (in our DuckDB form) when
given, plus the packaged seeds; with ``--grow-memory`` each correctly answered question
joins it (EHRAgent's online protocol). Memory mode: a store of the ``--memory-from`` split and its reuse
engine, calibrated on that memory alone, answered through the session. Questions
are independent (no conversation), so answerers are safe with several workers.
"""

from __future__ import annotations

import json
import tempfile
import threading
from pathlib import Path

from ehr_magic.agent import AgentSettings
from ehr_magic.eval.answerers import EvalContext, Outcome, Status
from ehr_magic.memory import MemoryStore
from ehr_magic.session import Answer, Session

# A session's statuses that the evaluation keeps; any other ("abstained", "generated": code not run) abstains.
_KEPT_STATUSES: dict[str, Status] = {"answered": "answered", "clarify": "clarify", "failed": "failed"}


def outcome(answer: Answer) -> Outcome:
    """A session's ``Answer`` as the evaluation's ``Outcome``."""
    result = answer.result
    status = _KEPT_STATUSES.get(answer.status, "abstained")
    return Outcome(status, answer=answer.answer, code=answer.code,
                   llm_calls=len(result.llm_calls) if result else 0,
                   prompt_tokens=result.prompt_tokens if result else 0,
                   completion_tokens=result.completion_tokens if result else 0,
                   seconds=result.seconds if result else answer.seconds,
                   error=answer.message if status == "failed" else "",
                   note=answer.message if status in ("clarify", "abstained") or answer.source == "memory" else "")


class AgentAnswerer:
    def __init__(self, context: EvalContext) -> None:
        from ehr_magic.llm import LLMClient, resolve_settings

        self.ehr = context.ehr
        options = context.options
        self.llm = LLMClient(resolve_settings(model=options.get("model")))
        folder = context.work_dir or Path(tempfile.mkdtemp(prefix="ehr-magic-eval-"))
        self.store = MemoryStore(Path(folder) / "eval-memory.sqlite")
        for example in context.memory_examples():
            self.store.add(example.question, example.code, origin="imported", schema=self.ehr.schema,
                           dataset=self.ehr.dataset)
        settings = AgentSettings(max_steps=int(options.get("max_steps", 10)), shots=int(options.get("shots", 4)),
                                 knowledge=options.get("knowledge", "inline"), stream=False)
        self.session = Session(self.ehr, memory=self.store, llm=self.llm, settings=settings, mode="agent",
                               keep_conversation=False)
        self._lock = threading.Lock()

    def answer(self, question: str, qid: str) -> Outcome:
        return outcome(self.session.ask(question))

    def learn(self, question: str, code: str, qid: str) -> None:
        with self._lock:
            self.store.add(question, code, origin="accepted", schema=self.ehr.schema, dataset=self.ehr.dataset)


class MemoryModeAnswerer:
    """``--mode memory`` through a ``Session`` in memory mode (no model): the run's store holds the
    ``--memory-from`` split's questions and gold code; each question is answered by adapting a
    remembered cell, or abstained on. It never falls through to a model."""

    def __init__(self, context: EvalContext) -> None:
        from ehr_magic.reuse import Reuser

        self.ehr = context.ehr
        self.grow = context.grow_memory
        folder = context.work_dir or Path(tempfile.mkdtemp(prefix="ehr-magic-memory-"))
        folder.mkdir(parents=True, exist_ok=True)
        self.store = MemoryStore(folder / "memory.sqlite")
        examples = context.memory_examples()
        if examples and len(self.store) == 0:
            path = folder / "memory-from.jsonl"
            with open(path, "w", encoding="utf-8") as handle:
                for example in examples:
                    handle.write(json.dumps({"question": example.question, "code": example.code,
                                             "schema": self.ehr.schema, "origin": "imported",
                                             "tags": [f"id:{example.id}"]}, ensure_ascii=False) + "\n")
            self.store.import_(path, schema=self.ehr.schema)
        reuse_options = dict(context.options.get("reuse", {}))
        reuser = Reuser.from_store(self.ehr, self.store, **reuse_options)
        if "threshold" not in reuse_options and "margin" not in reuse_options and reuser.cells():
            # Thresholds from the memory alone, never from the split under evaluation.
            if reuser.calibration.source != "cross-validation":
                reuser.calibrate()
        self._lock = threading.Lock()
        self.session = Session(context.ehr, memory=self.store, reuser=reuser, mode="memory",
                               keep_conversation=False)

    def answer(self, question: str, qid: str) -> Outcome:
        answer = self.session.ask(question)
        if answer.status == "answered":
            return Outcome("answered", answer=answer.answer, code=answer.code, seconds=answer.seconds,
                           note=answer.message)
        return Outcome("abstained", code=answer.code, seconds=answer.seconds,
                       note=answer.message.removeprefix("Memory reuse declined: ").removesuffix("."))

    def learn(self, question: str, code: str, qid: str) -> None:
        """Remember a correctly answered question (``--grow-memory``)."""
        if self.grow:
            with self._lock:
                self.store.add(question, code, origin="imported", schema=self.ehr.schema, tags=[f"id:{qid}"])
