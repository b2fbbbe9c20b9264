"""Memory as the agent's few-shot source: the closest stored cases of the same
schema, topped up with the packaged seeds when memory has too few."""

from __future__ import annotations

from ehr_magic.memory.fewshot import Example, SeedExamples
from ehr_magic.memory.store import MemoryStore


class MemoryExamples:
    """``ExampleSource`` over a ``MemoryStore`` (default store when none is given)."""

    def __init__(self, store: MemoryStore | None = None, *, exclude_origins: tuple[str, ...] = ()) -> None:
        self.store = store if store is not None else MemoryStore()
        self.exclude_origins = exclude_origins
        self.seeds = SeedExamples()

    def examples(self, question: str, schema: str, k: int) -> list[Example]:
        if k <= 0:
            return []
        origins = [o for o in ("accepted", "imported", "seed", "auto") if o not in self.exclude_origins]
        found = self.store.search(question, k=k, schema=schema, origins=origins)
        chosen = [Example(f"memory:{e.id}", e.question, e.code, e.knowledge) for e in found]
        if found:
            self.store.mark_used([e.id for e in found])
        if len(chosen) < k:
            known = {e.question for e in chosen}
            seeds = [s for s in self.seeds.examples(question, schema, k) if s.question not in known]
            chosen += seeds[: k - len(chosen)]
        return chosen
