"""The cells a session offers the notebook, and what becomes of them.

An answer with code becomes a cell: its first line is a marker (``# ehr-magic #TOKEN:
question``) that lets the kernel recognise it when it runs, and its body ends on a line
that shows the answer. Until it runs it waits as a ``PendingCell``; running it accepts it
into memory, and rejecting it drops it (and the automatic memory entry it made, if any).
These rules are the session's, so the magic and the side panel offer the same cell for
the same answer.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
import uuid
from dataclasses import dataclass, field

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
