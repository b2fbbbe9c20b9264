"""The records the memory store hands out: ``MemoryEntry`` and ``MemoryStats``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Where an entry comes from, most trusted first.
#   accepted  the user accepted the cell (possibly after editing the code)
#   seed      shipped with ehr_magic, verified by its test suite
#   imported  read from a JSONL file (e.g. a teammate's accepted entries)
#   auto      ran successfully but nobody confirmed the answer
ORIGINS: tuple[str, ...] = ("accepted", "seed", "imported", "auto")
ORIGIN_PRIORITY: dict[str, int] = {"accepted": 3, "seed": 2, "imported": 1, "auto": 0}
TRUSTED_ORIGINS: frozenset[str] = frozenset({"accepted", "seed", "imported"})


@dataclass
class MemoryEntry:
    """One remembered case: a question and the code that answered it."""

    id: int
    question: str
    knowledge: str
    code: str
    generated_code: str | None
    answer_preview: str
    schema: str | None
    dataset: str | None
    origin: str
    model: str | None
    created_at: str
    updated_at: str
    use_count: int
    tags: tuple[str, ...] = ()
    note: str = ""
    score: float | None = None  # set by search(): similarity plus origin bonus
    last_used_at: str | None = None

    @property
    def edited(self) -> bool:
        """True when the user changed the generated code before accepting it."""
        return self.generated_code is not None and self.generated_code != self.code

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tags"] = list(self.tags)
        return data


@dataclass
class MemoryStats:
    """Counts describing a store (``MemoryStore.stats()``)."""

    path: str
    total: int
    by_origin: dict[str, int]
    by_schema: dict[str, int]  # schema None is reported under the key ""
    file_bytes: int
    schema_version: int
    first_created_at: str | None
    last_updated_at: str | None
    most_used: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
