"""The conversation of a session: its turns, how each answer is described to the model
at the privacy level, and which questions read as follow-ups."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ehr_magic.agent.turns import TurnSummary

# A question that only makes sense after another ("now only the emergency ones",
# "plot that by month", "and for women?").
_FOLLOW_UP = re.compile(
    r"^\s*(now|and|also|then|but|instead|same|only|what about|how about|and what|break (?:it|that|them) down)\b"
    r"|\b(plot|show|chart|sort|filter|split|group|break down|repeat|redo) (that|those|it|them|this)\b"
    r"|\b(the same|same thing|the previous|the last (?:answer|result|one)|the above|those ones|that one"
    r"|that answer|that result)\b",
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
    answer: str = ""  # description at the privacy level of the turn (the message when not answered)
    source: str = "agent"
    seconds: float = 0.0
    variables: list[str] = field(default_factory=list)  # notebook variables described to the model
    shape: str = ""  # the result's type and shape, no values
    found: str = ""  # stored values linked for it and what its looks showed, privacy applied

    def summary(self) -> TurnSummary:
        asked = self.question if self.standalone == self.question else f"{self.question} (meaning: {self.standalone})"
        return TurnSummary(asked, self.code, self.answer, self.status, self.shape, self.found)


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


SHOWN_ITEMS = 20  # rows or items of an earlier answer the model may see (at the full level)
_SHOWN_CHARS = 1600  # and at most this much text of them


def answer_shape(value: Any) -> str:
    """The type and shape of an answer, never its values."""
    if isinstance(value, pl.LazyFrame):
        return f"a polars LazyFrame with columns {', '.join(value.collect_schema().names())}"
    if isinstance(value, pl.Series):
        value = value.to_frame()
    if isinstance(value, pl.DataFrame):
        return f"a table of {value.height} rows x {value.width} columns ({', '.join(value.columns[:20])})"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return f"a {type(value).__name__} of {len(value)} items"
    if value is None:
        return "nothing (None)"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return f"a {type(value).__name__}"


def describe_answer(value: Any, level: str) -> str:
    """Type and shape of an answer; its values (up to ``SHOWN_ITEMS`` rows or items) only as the
    privacy level allows: ``full`` shows them, ``aggregates`` a single number, ``schema`` none."""
    shape = answer_shape(value)
    if isinstance(value, pl.Series):
        value = value.to_frame()
    if isinstance(value, pl.DataFrame):
        if level != "full" or not value.height:
            return shape
        if value.height == 1 and value.width == 1:
            return f"{shape}; value {value.item()!r}"
        head = "rows" if value.height <= SHOWN_ITEMS else f"first {SHOWN_ITEMS} rows"
        return _capped(f"{shape}; {head}:\n" + "\n".join(f"  {row!r}" for row in value.head(SHOWN_ITEMS).rows()))
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        if level != "full" or not value:
            return shape
        items = list(value.items() if isinstance(value, dict) else value)
        more = f" (first {SHOWN_ITEMS})" if len(items) > SHOWN_ITEMS else ""
        return _capped(f"{shape}{more}: {items[:SHOWN_ITEMS]!r}")
    if value is None:
        return shape
    # A single number is an aggregate; a string or date may be a record's value.
    if level == "full" or (level == "aggregates" and shape == "a number"):
        return _capped(f"{shape}: {value!r}")
    return shape


def _capped(text: str) -> str:
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + " ..."
