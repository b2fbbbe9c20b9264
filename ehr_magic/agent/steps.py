"""Step objects of an agent run: what was asked, generated, run and learned, with costs.

Each step can render itself as chat messages (``to_messages``): the conversation the
loop sends to the model is its first request followed by the messages of the steps
(``_Run.messages`` in ``loop.py``), never a list kept on the side.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

from ehr_magic.agent import prompts
from ehr_magic.runtime.executor import ErrorInfo

Status = Literal["answered", "clarify", "abstained", "failed", "generated"]


@dataclass
class LLMCall:
    purpose: str  # knowledge | code | debug | reminder
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    call_id: int | None = None


@dataclass
class ActionStep:
    """One attempt: the model's reply, the code run, and the feedback it produced."""

    index: int
    reply: str
    code: str = ""
    knowledge: str = ""
    error: ErrorInfo | None = None
    soft_failure: str = ""  # ran, but the answer is unusable: why
    observation: str = ""  # the code only looked (printed, described): what it showed the model
    hints: list[str] = field(default_factory=list)
    debugger_note: str = ""
    stdout: str = ""
    answer_preview: str = ""
    run_seconds: float = 0.0
    feedback: str = ""
    note: str = ""  # for the analyst, about an answer that found nothing: "None found: the code searched ..."
    shown: str = ""  # what a look-up showed the model, at the privacy level in force
    reminded: str = ""  # a reply without code that came first, answered with the reminder to write code

    @property
    def succeeded(self) -> bool:
        return bool(self.code) and self.error is None and not self.soft_failure and not self.observation

    @property
    def outcome(self) -> Literal["answered", "looked up", "failed"]:
        """How front ends name the step: a look-up is progress, not a failure."""
        return "looked up" if self.observation else "answered" if self.succeeded else "failed"

    def line(self, limit: int = 160) -> str:
        """One line for front ends: "step 2 looked up: ...", "step 1 failed: ...", "step 3: answered"."""
        if self.succeeded:
            return f"step {self.index}: answered"
        if self.observation:  # its first line of output, past headings such as "Printed output:"
            lines = [line.strip() for line in self.observation.splitlines() if line.strip() and not line.endswith(":")]
        else:
            lines = (self.error.describe() if self.error else self.soft_failure).splitlines()
        return f"step {self.index} {self.outcome}: {(lines or [''])[0][:limit]}"

    def to_messages(self) -> list[dict[str, str]]:
        """The step's exchange with the model: (the reply without code and the reminder,) the reply,
        and the feedback on it."""
        messages = reminder_exchange(self.reminded) if self.reminded else []
        messages.append({"role": "assistant", "content": self.reply})
        if self.feedback:
            messages.append({"role": "user", "content": self.feedback})
        return messages

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "code": self.code, "knowledge": self.knowledge,
            "error": self.error.describe() if self.error else None, "soft_failure": self.soft_failure or None,
            "observation": self.observation or None, "outcome": self.outcome,
            "hints": self.hints, "debugger_note": self.debugger_note or None, "stdout": self.stdout,
            "answer_preview": self.answer_preview, "run_seconds": round(self.run_seconds, 4),
        }


def reminder_exchange(reply: str) -> list[dict[str, str]]:
    """A reply without code and the reminder that answered it."""
    return [{"role": "assistant", "content": reply}, {"role": "user", "content": prompts.render("reminder")}]


@dataclass
class AgentResult:
    """Everything about one question: status, answer, final code, steps and costs."""

    question: str
    status: Status
    answer: Any = None
    code: str = ""
    knowledge: str = ""
    message: str = ""  # clarifying question, abstention reason, or the last error
    steps: list[ActionStep] = field(default_factory=list)
    llm_calls: list[LLMCall] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)  # ids of the few-shot examples used
    model: str = ""
    model_seconds: float = 0.0
    own_seconds: float = 0.0
    namespace: dict[str, Any] = field(default_factory=dict, repr=False)
    standalone_question: str = ""  # stated by the model for a follow-up ("" when it stated none)
    tables: list[str] = field(default_factory=list)  # described in full in the prompt, best first
    context_window: int = 0  # the model's window the prompt was fitted into (tokens)
    linked: str = ""  # the stored values the first prompt stated for the question's words

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.llm_calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.llm_calls)

    @property
    def seconds(self) -> float:
        return self.model_seconds + self.own_seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question, "status": self.status, "answer": to_json_value(self.answer),
            "code": self.code, "knowledge": self.knowledge, "message": self.message,
            "steps": [s.to_dict() for s in self.steps], "llm_calls": len(self.llm_calls),
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 4), "model_seconds": round(self.model_seconds, 4),
            "own_seconds": round(self.own_seconds, 4), "model": self.model, "examples": self.examples,
            "standalone_question": self.standalone_question,
        }


def to_json_value(value: Any) -> Any:
    """Plain JSON for an answer: numbers, strings, lists of rows."""
    if isinstance(value, pl.LazyFrame):
        value = value.collect()
    if isinstance(value, pl.DataFrame):
        return [[to_json_value(v) for v in row] for row in value.iter_rows()]
    if isinstance(value, pl.Series):
        return [to_json_value(v) for v in value.to_list()]
    if isinstance(value, (list, tuple, set)):
        return [to_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):  # numpy scalars
        try:
            return to_json_value(value.item())
        except (TypeError, ValueError):
            pass
    return str(value)
