"""The kernel-side state of ehr-magic: connected database, the answering ``Session``
(``self.assistant``), memory, history and the cells inserted but not yet accepted.
One per shell, no module globals."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ehr_magic.session import Answer, Session
from ehr_magic.data import EHR, connect


@dataclass
class PendingCell:
    """A cell inserted by %%ehr, waiting to be run (accepted) or rejected."""

    token: str
    question: str
    code: str
    knowledge: str = ""
    model: str = ""
    answer_preview: str = ""
    rejected: bool = False
    entry_id: int | None = None


@dataclass
class HistoryItem:
    question: str
    status: str
    source: str
    seconds: float
    at: dt.datetime = field(default_factory=dt.datetime.now)


class EhrSession:
    def __init__(self) -> None:
        self.ehr: EHR | None = None
        self.description = ""
        self.memory: Any = None
        self.memory_path: Path | None = None
        self.assistant: Session | None = None  # the one answering path
        self.pending: dict[str, PendingCell] = {}
        self.history: list[HistoryItem] = []
        self.last_accepted: tuple[str, str] | None = None  # (question, code) of the last accepted cell

    # -- database ------------------------------------------------------------------------

    def connect(self, target: str, *, patients: int = 100, progress: Any = None,
                say: Callable[[str], None] = print) -> str:
        """Connect to ``demo``, ``synthetic`` or a database file; returns a one-line description.
        ``say`` shows what the demo had to do on the way (a download, a fallback)."""
        from ehr_magic.data.demo import resolve_database

        path, what = resolve_database(target, patients=patients, progress=progress, say=say)
        ehr = connect(path)  # a file path or a server URL; connect() expands ~
        if self.ehr is not None:
            self.ehr.close()
        self.ehr = ehr
        clock = f"now {ehr.clock.now:%Y-%m-%d %H:%M}" if ehr.clock else "times are offsets (no dates)"
        self.description = f"ehr = {what or ehr.dataset}: {len(ehr.tables())} tables, schema {ehr.schema}, {clock}"
        self._rebuild_assistant()
        return self.description

    def import_knowledge(self, path: str | None) -> str:
        """Import a knowledge file through the answering session, which reconnects; the
        notebook's ``ehr`` follows (the caller rebinds it)."""
        message = self.assistant.import_knowledge(path)
        self.ehr = self.assistant.ehr
        return message

    def use_memory(self, path: str | None) -> None:
        from ehr_magic.memory import MemoryStore

        store = MemoryStore(path or None)
        if self.memory is not None and hasattr(self.memory, "close"):
            self.memory.close()
        self.memory = store
        self.memory_path = Path(store.path) if hasattr(store, "path") else None
        self._rebuild_assistant()

    def _rebuild_assistant(self) -> None:
        if self.ehr is None:
            return
        previous = self.assistant
        self.assistant = Session(self.ehr, memory=self.memory)
        if previous is not None:
            previous.close()
            self.assistant.conversation = previous.conversation if previous.ehr is self.ehr else self.assistant.conversation
            self.assistant.llm_overrides = previous.llm_overrides
            self.assistant.settings = previous.settings
            self.assistant.store_auto = previous.store_auto

    # -- cells ---------------------------------------------------------------------------

    def remember_inserted(self, token: str, answer: Answer, model: str, preview: str) -> PendingCell:
        cell = PendingCell(token, answer.standalone_question, answer.code, answer.knowledge, model, preview,
                           entry_id=answer.entry_id)
        self.pending[token] = cell
        return cell

    def accept_cell(self, token: str, question: str, code: str) -> int | None:
        """Store a marked cell that ran successfully; returns the memory entry id."""
        if self.assistant is None:
            return None
        pending = self.pending.get(token)
        if pending is not None and pending.rejected:
            return None
        entry_id = self.assistant.accept(
            question, code.strip(),
            generated_code=pending.code.strip() if pending else None,
            knowledge=pending.knowledge if pending else "",
            answer_preview=pending.answer_preview if pending else "",
            model=pending.model if pending else None)
        if pending is not None:
            pending.entry_id = entry_id
        self.last_accepted = (question, code.strip())
        return entry_id

    def reject(self, token: str) -> None:
        cell = self.pending.get(token)
        if cell is not None:
            cell.rejected = True
            if cell.entry_id is not None and self.memory is not None:
                entry = self.memory.get(cell.entry_id)
                if entry.origin == "auto":
                    self.memory.delete(cell.entry_id)
                cell.entry_id = None
