"""The cells a session offers the notebook, and what becomes of them.

An answer with code becomes a cell: its first line is a marker (``# ehr-magic #TOKEN:
question``) that lets the kernel recognise it when it runs, and its body ends on a line
that shows the answer. Until it runs it waits as a ``PendingCell``; running it accepts it
into memory, and rejecting it drops it (and the automatic memory entry it made, if any).
``NotebookCells`` keeps that cycle (and the kernel's history of questions) for a session,
so the magic and the side panel offer the same cell for the same answer.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ehr_magic.safety.privacy import preview

if TYPE_CHECKING:
    from ehr_magic.knowledge.handle import Database
    from ehr_magic.session.answer import Answer

MARKER = re.compile(r"^# ehr-magic #(?P<token>[A-Za-z0-9]+): (?P<question>.*)$")


@dataclass
class PendingCell:
    """A cell offered to the notebook, waiting to be run (accepted) or rejected."""

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
    """One question asked in this kernel and how it ended (``%ehr status``)."""

    question: str
    status: str
    source: str
    seconds: float
    at: dt.datetime = field(default_factory=dt.datetime.now)


@dataclass(frozen=True)
class Offered:
    """The cell offered for an answer: what every front end shows after it."""

    token: str | None  # None: no code to offer (a refusal, a failure)
    cell: str = ""  # the marker line, then the code
    insert: bool = False  # new code (generated, or adapted to new values) goes into the notebook;
    # an accepted cell reused as it is already stands there

    def to_dict(self) -> dict[str, object]:
        return {"token": self.token, "cell": self.cell, "insert": self.insert}


def new_token() -> str:
    return uuid.uuid4().hex[:10]


def marker_line(token: str, question: str) -> str:
    one_line = " ".join(question.split())
    return f"# ehr-magic #{token}: {one_line}"


def cell_body(code: str) -> str:
    """The code as inserted: with a last ``answer`` line so running the cell shows the
    answer (unless the code already ends with an expression)."""
    code = code.rstrip()
    return code if _ends_with_expression(code) else code + "\nanswer"


def with_marker(token: str, question: str, code: str) -> str:
    """The inserted cell: the marker line, then ``code``."""
    return f"{marker_line(token, question)}\n{code.rstrip()}"


def _ends_with_expression(code: str) -> bool:
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return True  # leave code we cannot parse as it is
    return bool(body) and isinstance(body[-1], ast.Expr)


def read_marker(cell: str) -> tuple[str, str, str] | None:
    """``(token, question, code)`` of a cell that starts with our marker, else None."""
    first, _, rest = cell.lstrip("\n").partition("\n")
    match = MARKER.match(first.rstrip())
    if not match:
        return None
    return match.group("token"), match.group("question"), rest


class Connected(Protocol):
    """What the cells need from their session, read when a cell is accepted or rejected:
    the database and the memory store of that moment (either may change after an offer)."""

    @property
    def ehr(self) -> Database | None: ...

    memory: Any


class NotebookCells:
    """The cells a session offers: offered, waiting, accepted into memory or rejected, and the
    history of the kernel's questions."""

    def __init__(self, session: Connected) -> None:
        self.session = session
        self.pending: dict[str, PendingCell] = {}  # cells offered, by token
        self.history: list[HistoryItem] = []
        self.last_accepted: tuple[str, str] | None = None  # (question, code) of the last accepted cell

    def offer(self, answer: Answer) -> Offered:
        """Record ``answer`` in the history and offer its code as a cell: marked, ending on a
        line that shows the answer, and waiting to be accepted. Only new code (generated, or
        a remembered cell adapted to new values) is to be inserted; an accepted cell reused as
        it is already stands in the notebook."""
        self.history.append(HistoryItem(answer.question, answer.status, answer.source, answer.seconds))
        if answer.status not in ("answered", "generated"):
            return Offered(None)
        token = new_token()
        answer.code = cell_body(answer.code)
        self.pending[token] = PendingCell(
            token, answer.standalone_question, answer.code, answer.knowledge,
            answer.result.model if answer.result else "",
            preview(answer.answer, 500) if answer.status == "answered" else "", entry_id=answer.entry_id)
        return Offered(token, with_marker(token, answer.standalone_question, answer.code),
                       insert=answer.source == "agent" or bool(answer.substitutions))

    def offer_entry(self, entry: Any) -> Offered:
        """Offer a memory entry's code as a cell (the panel's memory list)."""
        token = new_token()
        self.pending[token] = PendingCell(token, entry.question, entry.code, entry.knowledge, entry.model or "",
                                          entry.answer_preview)
        return Offered(token, with_marker(token, entry.question, entry.code))

    def accept(self, token: str, question: str, code: str) -> int | None:
        """Store a marked cell that ran successfully (a rejected one never); returns the memory entry id."""
        pending = self.pending.get(token)
        if self.session.ehr is None or (pending is not None and pending.rejected):
            return None
        entry_id = self.remember(
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
        """Reject an offered cell: it is never stored, and the automatic memory entry its
        answer made (``store_auto``) is deleted."""
        cell = self.pending.get(token)
        if cell is None:
            return
        cell.rejected = True
        memory = self.session.memory
        if cell.entry_id is not None and memory is not None:
            if memory.get(cell.entry_id).origin == "auto":
                memory.delete(cell.entry_id)
            cell.entry_id = None

    def remember(self, question: str, code: str, *, generated_code: str | None = None, knowledge: str = "",
                 answer_preview: str = "", model: str | None = None) -> int | None:
        """Store an accepted cell (the code actually run) under its standalone question."""
        memory, ehr = self.session.memory, self.session.ehr
        if memory is None or ehr is None:  # a cell is remembered under its database's schema
            return None
        return memory.add(question, code, knowledge=knowledge, origin="accepted", schema=ehr.schema,
                          dataset=ehr.dataset, answer_preview=answer_preview, model=model,
                          generated_code=generated_code if generated_code and generated_code != code else None)
