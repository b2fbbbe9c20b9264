"""``Answer``: what a session returns for a question, and what every front end renders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ehr_magic.agent.steps import AgentResult
from ehr_magic.session.cells import Offered

Source = Literal["memory", "agent", "session"]


@dataclass(kw_only=True)
class Answer:
    """What the front ends show: the answer, its code and where it came from. Built with
    keywords only: eleven fields in a row are too easy to shift by one."""

    question: str
    status: str  # answered | clarify | abstained | failed | generated
    answer: Any = None
    code: str = ""
    knowledge: str = ""
    message: str = ""
    source: Source = "agent"
    entry_id: int | None = None  # memory entry reused
    result: AgentResult | None = None
    namespace: dict[str, Any] = field(default_factory=dict, repr=False)
    seconds: float = 0.0
    substitutions: list[tuple[str, str]] = field(default_factory=list)  # (new, old) values written into a reused cell
    standalone: str = ""  # the question the code answers on its own (a follow-up restated); "" = question
    variables: list[str] = field(default_factory=list)  # notebook variables described to the model
    offered: Offered | None = None  # the cell offered to the notebook (``Session.ask_in_notebook``)
    notes: list[str] = field(default_factory=list)  # what the analyst should know about the context used

    @property
    def model_calls(self) -> int:
        return len(self.result.llm_calls) if self.result else 0

    @property
    def standalone_question(self) -> str:
        return self.standalone or self.question
