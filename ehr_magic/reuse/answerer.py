"""The eval's ``memory`` mode: answer benchmark questions by reuse alone (no model).

``ehr-magic eval DIR --split valid --db FILE --mode memory --memory-from train``
fills a memory store with the ``--memory-from`` split's questions and gold code (in
our DuckDB form, as the eval harness translates it), then answers each question
with ``Reuser``: adapt a remembered cell or abstain. It never falls through to a
model. With ``--grow-memory`` each correctly answered question is remembered too.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ehr_magic.memory import MemoryStore
from ehr_magic.reuse.reuser import Reuser


class MemoryAnswerer:
    """``Answerer`` for ``--mode memory`` (see the module doc)."""

    def __init__(self, context: Any) -> None:
        self.ehr = context.ehr
        self.grow = bool(getattr(context, "grow_memory", False))
        folder = Path(context.work_dir) if getattr(context, "work_dir", None) else Path(
            tempfile.mkdtemp(prefix="ehr-magic-memory-"))
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
        self.reuser = Reuser.from_store(self.ehr, self.store, **reuse_options)
        if "threshold" not in reuse_options and "margin" not in reuse_options and self.reuser.cells():
            # Thresholds from the memory alone, never from the split under evaluation.
            if self.reuser.calibration.source != "cross-validation":
                self.reuser.calibrate()
        self._lock = threading.Lock()

    def answer(self, question: str, qid: str):
        from ehr_magic.eval.answerers import Outcome

        started = time.perf_counter()
        result = self.reuser.answer(question)
        seconds = time.perf_counter() - started
        if result.answered:
            return Outcome("answered", answer=result.answer, code=result.code, seconds=seconds, note=result.message)
        return Outcome("abstained", code=result.code, seconds=seconds, note=result.reason)

    def learn(self, question: str, code: str, qid: str) -> None:
        """Remember a correctly answered question (``--grow-memory``)."""
        if self.grow:
            with self._lock:
                self.store.add(question, code, origin="imported", schema=self.ehr.schema, tags=[f"id:{qid}"])


def register() -> None:
    """Make ``--mode memory`` use this answerer."""
    from ehr_magic.eval.answerers import register_answerer

    register_answerer("memory", MemoryAnswerer)
