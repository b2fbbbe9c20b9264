"""The conversation hook of the agent: earlier turns and notebook variables, rendered
into the user message of a question (``Agent.run(question, context=...)``).

The session (``ehr_magic.session``) decides what goes in and at which privacy level;
this module only fits it into a token budget and renders the ``conversation``
template. Older turns are shortened first (their code dropped), then dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ehr_magic.agent import prompts

DEFAULT_HISTORY_TOKENS = 1200  # the history slot of the prompt budget


@dataclass(frozen=True)
class TurnSummary:
    """One earlier turn as the model sees it."""

    question: str
    code: str = ""
    answer: str = ""  # a short description: type, shape, columns; values only as privacy allows

    def text(self, number: int, *, with_code: bool = True) -> str:
        lines = [f"Turn {number}: {self.question}"]
        if with_code and self.code:
            lines.append(f"```python\n{self.code.strip()}\n```")
        if self.answer:
            lines.append(f"Its answer: {self.answer}")
        return "\n".join(lines)


@dataclass(frozen=True)
class ConversationContext:
    """What the agent adds to a question: earlier turns, described variables and the
    variables' values for the executor (never sent to the model)."""

    turns: tuple[TurnSummary, ...] = ()
    variables: tuple[str, ...] = ()  # one description per variable, privacy applied
    variable_names: tuple[str, ...] = ()
    namespace: Mapping[str, Any] = field(default_factory=dict, repr=False)
    budget_tokens: int = DEFAULT_HISTORY_TOKENS

    @property
    def empty(self) -> bool:
        return not self.turns and not self.variables

    def render(self) -> str:
        """The ``conversation`` template filled, the turns fitted into ``budget_tokens``."""
        variables = ""
        if self.variables:
            variables = ("\nNotebook variables described to the model: " + ", ".join(self.variable_names) + "\n"
                         + "\n".join(f"- {v}" for v in self.variables) + "\n")
        turns = fit_turns(self.turns, self.budget_tokens)
        return prompts.render("conversation", turns=turns, variables=variables)


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (about four characters a token)."""
    return (len(text) + 3) // 4


def fit_turns(turns: tuple[TurnSummary, ...], budget_tokens: int) -> str:
    """The turns as text within the budget: the newest keeps its code longest; older
    turns lose their code first, then the oldest are dropped."""
    count = len(turns)
    if not count:
        return ""
    with_code = [True] * count
    kept = list(range(count))

    def text() -> str:
        body = "\n\n".join(turns[i].text(i + 1, with_code=with_code[i]) for i in kept)
        dropped = kept[0] if kept else count
        head = f"({dropped} earlier turns left out)\n" if dropped else ""
        return "\nEarlier in this conversation:\n" + head + body + "\n"

    for i in range(count - 1):  # shorten, oldest first; the last turn keeps its code
        if estimate_tokens(text()) <= budget_tokens:
            return text()
        with_code[i] = False
    while len(kept) > 1 and estimate_tokens(text()) > budget_tokens:
        kept.pop(0)
    if estimate_tokens(text()) > budget_tokens:
        with_code[kept[0]] = False
    return text()
