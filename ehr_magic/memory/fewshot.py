"""Few-shot examples: (question, knowledge, code) cases shown to the model.

``ExampleSource`` is the interface the loop needs; the long-term memory implements it,
and the packaged seed examples (``ehr_magic/seeds/<schema>.jsonl``, each verified by a
test that runs it) serve when memory has nothing for the schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Protocol

from rapidfuzz import fuzz, process

from ehr_magic.memory.similarity import default_tokens


@dataclass(frozen=True)
class Example:
    id: str
    question: str
    code: str
    knowledge: str = ""


class ExampleSource(Protocol):
    def examples(self, question: str, schema: str, k: int) -> list[Example]:
        """The ``k`` cases most useful for ``question`` on ``schema``, best first."""
        ...


@cache
def seed_examples(schema: str) -> tuple[Example, ...]:
    """The packaged seed cases of ``schema`` (empty when none ship)."""
    path = resources.files("ehr_magic").joinpath("seeds").joinpath(f"{schema}.jsonl")
    if not path.is_file():
        return ()
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            item = json.loads(line)
            cases.append(Example(f"seed:{schema}:{number}", item["question"], item["code"], item.get("knowledge", "")))
    return tuple(cases)


class SeedExamples:
    """Examples from the packaged seeds, ranked by token similarity to the question."""

    def examples(self, question: str, schema: str, k: int) -> list[Example]:
        cases = seed_examples(schema)
        if not cases or k <= 0:
            return []
        # The same measure as memory retrieval: values masked, word order ignored.
        ranked = process.extract(default_tokens(question), [default_tokens(c.question) for c in cases],
                                 scorer=fuzz.ratio, processor=None, limit=k)
        return [cases[i] for _, _, i in ranked]
