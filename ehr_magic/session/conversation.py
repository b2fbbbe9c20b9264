"""The conversation of a session: its turns, how each answer is described to the model
at the privacy level, and which questions read as follow-ups."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ehr_magic.agent.conversation import TurnSummary

# A question that only makes sense after another ("now only the emergency ones",
# "plot that by month", "and for women?").
_FOLLOW_UP = re.compile(
    r"^\s*(now|and|also|then|but|instead|same|only|what about|how about|and what|break (?:it|that|them) down)\b"
    r"|\b(plot|show|chart|sort|filter|split|group|break down|repeat|redo) (that|those|it|them|this)\b"
    r"|\b(the same|same thing|the previous|the last (?:answer|result|one)|the above|those ones|that one|that answer|that result)\b",
    re.IGNORECASE)


def looks_like_follow_up(question: str) -> bool:
    """True when the question may refer to an earlier one. A cheap signal, used only to skip
    reuse inside a conversation: many standalone questions match it ("patients of the same
    age", "heparin and nitroglycerin on the same day"), so it never refuses a question."""
    return bool(_FOLLOW_UP.search(question))


@dataclass
class Turn:
    """One question of the conversation and what answered it."""

    question: str  # as asked
    standalone: str  # as the model restated it (the asked question when it did not)
    status: str
    code: str = ""
    answer: str = ""  # description at the privacy level of the turn
    source: str = "agent"
    seconds: float = 0.0
    variables: list[str] = field(default_factory=list)  # notebook variables described to the model

    def summary(self) -> TurnSummary:
        asked = self.question if self.standalone == self.question else f"{self.question} (meaning: {self.standalone})"
        outcome = self.answer if self.status == "answered" else f"({self.status}) {self.answer}".strip()
        return TurnSummary(asked, self.code, outcome)


@dataclass
class Conversation:
    turns: list[Turn] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.turns)

    def add(self, turn: Turn) -> None:
        self.turns.append(turn)

    def clear(self) -> None:
        self.turns.clear()

    def summaries(self) -> tuple[TurnSummary, ...]:
        return tuple(turn.summary() for turn in self.turns)

    def text(self) -> str:
        """The conversation for the analyst (``%ehr history``, ``/history``)."""
        if not self.turns:
            return "No questions yet in this conversation."
        lines = []
        for number, turn in enumerate(self.turns, start=1):
            lines.append(f"{number}. {turn.question}  [{turn.status}, {turn.source}, {turn.seconds:.1f} s]")
            if turn.standalone != turn.question:
                lines.append(f"   meaning: {turn.standalone}")
            if turn.answer:
                lines.append(f"   answer: {turn.answer}")
            if turn.variables:
                lines.append(f"   variables described to the model: {', '.join(turn.variables)}")
        return "\n".join(lines)


def describe_answer(value: Any, level: str) -> str:
    """Type and shape of an answer; its values only as the privacy level allows."""
    if isinstance(value, pl.LazyFrame):
        return f"a polars LazyFrame with columns {', '.join(value.collect_schema().names())}"
    if isinstance(value, pl.Series):
        value = value.to_frame()
    if isinstance(value, pl.DataFrame):
        text = f"a table of {value.height} rows x {value.width} columns ({', '.join(value.columns[:20])})"
        if level == "full" and value.height:
            text += f"; first rows: {value.head(3).rows()}"[:400]
        elif level == "full" and value.height == 1 and value.width == 1:
            text += f"; value {value.item()!r}"
        return text
    if isinstance(value, (list, tuple, set)):
        text = f"a {type(value).__name__} of {len(value)} items"
        return text + (f": {list(value)[:5]!r}"[:300] if level == "full" else "")
    if value is None:
        return "nothing (None)"
    kind = "a number" if isinstance(value, (int, float)) and not isinstance(value, bool) else f"a {type(value).__name__}"
    # A single number is an aggregate; a string or date may be a record's value.
    if level == "full" or (level == "aggregates" and kind == "a number"):
        return f"{kind}: {value!r}"[:300]
    return kind
