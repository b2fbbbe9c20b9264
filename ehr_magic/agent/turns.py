"""Earlier turns and notebook variables as the agent's prompt shows them: rendered into
the user message of a question (``Agent.run(question, conversation_context=...)``). The
conversation itself (its turns, follow-ups) is ``ehr_magic.session.conversation``.

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
    answer: str = ""  # a description: shape, and values (up to ~20 rows or items) only as privacy allows
    status: str = "answered"  # answered | clarify | abstained | failed | generated
    shape: str = ""  # the result's type and shape alone (no values): what is left when the budget is short
    found: str = ""  # the stored values linked for it and what its looks showed (privacy applied)

    def text(self, number: int, *, with_code: bool = True, with_values: bool = True) -> str:
        """The turn; without its code, then with only its status and result shape, as room shrinks."""
        turn = prompts.phrase("turn", number=number, question=self.question)
        if not with_values:
            return turn + "\n" + (prompts.phrase("turn_outcome_shape", status=self.status, shape=self.shape)
                                  if self.shape else prompts.phrase("turn_outcome", status=self.status))
        lines = [turn]
        if with_code and self.code:
            lines.append(f"```python\n{self.code.strip()}\n```")
        if self.answer:
            lines.append(prompts.phrase("turn_answer", answer=self.answer) if self.status == "answered"
                         else prompts.phrase("turn_outcome_answer", status=self.status, answer=self.answer))
        elif self.status != "answered":
            lines.append(prompts.phrase("turn_outcome", status=self.status))
        if self.found:  # so that a follow-up need not look again
            lines.append(self.found)
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
            variables = "\n" + prompts.phrase("conversation_variables", names=", ".join(self.variable_names),
                                               variables="\n".join(f"- {v}" for v in self.variables)) + "\n"
        turns = fit_turns(self.turns, self.budget_tokens)
        # say only what is there: no "what came before" without turns, no variables without any listed
        opening = prompts.phrase("conversation_opening" if self.turns else "notebook_opening")
        note = " " + prompts.phrase("conversation_variables_note") if self.variables else ""
        return prompts.render("conversation", opening=opening, turns=turns, variables=variables, variables_note=note)


_FOUND_CHARS = 1500  # of what one turn's linking and looks found, at most
_LOOK_CHARS = 700  # of one look's output


def found_text(linked: str, looks: list[tuple[str, str]]) -> str:
    """What a turn found before it answered, for the turns after it: the stored values linked
    for its question (``linked``, as its prompt stated them) and each look's code and output
    (``looks``: (code, what it showed the model, privacy applied)), shortened."""
    parts = []
    lines = [line for line in linked.splitlines()[1:] if line.strip()]  # without the template's opening
    if lines:
        parts.append(prompts.phrase("turn_linked", values="\n".join(lines)))
    for code, shown in looks:
        if shown.strip():
            output = shown.strip()
            output = output if len(output) <= _LOOK_CHARS else output[:_LOOK_CHARS] + " ..."
            parts.append(prompts.phrase("turn_look", code=" ".join(code.split())[:200], output=output))
    text = "\n".join(parts)
    return text if len(text) <= _FOUND_CHARS else text[:_FOUND_CHARS] + " ..."


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (about four characters a token)."""
    return (len(text) + 3) // 4


def fit_turns(turns: tuple[TurnSummary, ...], budget_tokens: int) -> str:
    """The turns as text within the budget. Older turns lose their code first (oldest first),
    then their values, keeping their status and result shape; only then are the oldest dropped.
    The newest keeps its code and values longest."""
    count = len(turns)
    if not count:
        return ""
    with_code = [True] * count
    with_values = [True] * count
    kept = list(range(count))

    def text() -> str:
        body = "\n\n".join(turns[i].text(i + 1, with_code=with_code[i], with_values=with_values[i]) for i in kept)
        dropped = kept[0] if kept else count
        head = prompts.phrase("turns_dropped", count=dropped) + "\n" if dropped else ""
        return "\n" + prompts.phrase("turns_earlier", dropped=head, turns=body) + "\n"

    def fits() -> bool:
        return estimate_tokens(text()) <= budget_tokens

    for flags in (with_code, with_values):  # shorten the older turns, oldest first
        for i in range(count - 1):
            if fits():
                return text()
            flags[i] = False
    while len(kept) > 1 and not fits():
        kept.pop(0)
    for flags in (with_code, with_values):  # the newest turn alone, still too long
        if not fits():
            flags[kept[0]] = False
    return text()
