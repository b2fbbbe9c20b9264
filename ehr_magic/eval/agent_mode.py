"""``--mode agent``: every question through the full agent, with any configured model.

Few-shot examples come from a memory store of the run: the ``--memory-from`` split's
questions with their gold code (in our DuckDB form) when given, plus the packaged
seeds; with ``--grow-memory`` each correctly answered question joins it (EHRAgent's
online protocol).
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from ehr_magic.agent import Agent, AgentSettings
from ehr_magic.eval.answerers import EvalContext, Outcome
from ehr_magic.llm import LLMClient, resolve_settings
from ehr_magic.memory import MemoryStore
from ehr_magic.memory.examples import MemoryExamples


class AgentAnswerer:
    def __init__(self, context: EvalContext) -> None:
        self.ehr = context.ehr
        options = context.options
        self.llm = LLMClient(resolve_settings(model=options.get("model")))
        folder = context.work_dir or Path(tempfile.mkdtemp(prefix="ehr-magic-eval-"))
        self.store = MemoryStore(Path(folder) / "eval-memory.sqlite")
        examples = context.memory_examples()
        for example in examples:
            self.store.add(example.question, example.code, origin="imported", schema=self.ehr.schema,
                           dataset=self.ehr.dataset)
        self.settings = AgentSettings(max_steps=int(options.get("max_steps", 10)), shots=int(options.get("shots", 4)),
                                      knowledge=options.get("knowledge", "inline"), stream=False)
        self._lock = threading.Lock()

    def answer(self, question: str, qid: str) -> Outcome:
        agent = Agent(self.ehr, self.llm, examples=MemoryExamples(self.store), settings=self.settings)
        result = agent.run(question)
        status = result.status if result.status in ("answered", "clarify", "failed") else "abstained"
        error = result.message if result.status == "failed" else ""
        note = result.message if result.status in ("clarify", "abstained") else ""
        return Outcome(status, answer=result.answer, code=result.code, llm_calls=len(result.llm_calls),
                       prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                       seconds=result.seconds, error=error, note=note)

    def learn(self, question: str, code: str, qid: str) -> None:
        with self._lock:
            self.store.add(question, code, origin="accepted", schema=self.ehr.schema, dataset=self.ehr.dataset)
