"""Long-term memory: past (question, knowledge, code) cases, retrieved as few-shot examples.

    from ehr_magic.memory import MemoryStore
    store = MemoryStore()                      # $EHR_MAGIC_MEMORY or the user data folder
    entry_id = store.add(question, code, schema=fingerprint)
    for entry in store.search(new_question, k=4, schema=fingerprint):
        print(entry.score, entry.question, entry.code)

See docs/memory.md for the file format, retrieval method and measurements.
"""

from __future__ import annotations

from ehr_magic.memory.entry import ORIGINS, MemoryEntry, MemoryStats
from ehr_magic.memory.errors import EntryNotFoundError, JsonlFormatError, MemoryStoreError
from ehr_magic.memory.similarity import METHODS
from ehr_magic.memory.store import MemoryStore, default_store_path

__all__ = [
    "METHODS",
    "ORIGINS",
    "EntryNotFoundError",
    "JsonlFormatError",
    "MemoryEntry",
    "MemoryStats",
    "MemoryStore",
    "MemoryStoreError",
    "default_store_path",
]
