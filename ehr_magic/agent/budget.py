"""Fitting the prompt into the model's context window.

The first request of a question is laid out in full (the chosen tables described, best
first, within ``SCHEMA_SHARE`` of the window, and the chosen tables past that share in one
line each, every example, the skills that apply, the conversation so far) and, while it is longer
than the window allows, shrunk in this order:

1. the conversation's earlier turns (older ones lose their code, then drop);
2. the few-shot examples, least similar first;
3. the clinical skills block;
4. the system prompt's table index, to each table's column names, then to table names only;
5. the described tables, lowest score first, from a full description to one line
   (column names and joins), down to the best one;
6. the one-line tables, lowest score first.

What is left is the schema the question cannot do without. If even that does not fit,
``PromptTooLongError`` says how many tokens it needs and how to give the model more.
Later steps append code and feedback; ``trim_steps`` drops the oldest of those first.
Token counts are estimates (``ehr_magic.llm.tokens``) that err on the high side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from ehr_magic.llm.errors import LLMContextError
from ehr_magic.llm.tokens import estimate_prompt_tokens
from ehr_magic.llm.window import ContextWindow

__all__ = ["Layout", "PromptTooLongError", "fit", "reply_reserve", "tables_within", "trim_steps"]

_HISTORY_STEPS = (600, 300, 0)  # conversation token budgets tried after the full one


class PromptTooLongError(LLMContextError):
    """Even the smallest prompt for this question is longer than the model's window."""


@dataclass(frozen=True)
class Layout:
    """How much of each part goes into the prompt."""

    tables: int  # how many of the chosen tables are described in full (best first)
    examples: int
    skills: bool = True
    history_tokens: int | None = None  # None: the conversation's own budget
    full_index: bool = True  # one line per table in the system prompt (row, columns); else columns only
    index_columns: bool = True  # when not full_index: each table's column names; else table names only
    brief: int = 0  # how many of the next chosen tables get one line each (column names, joins)


Messages = list[dict[str, str]]


SCHEMA_SHARE = 0.35  # of the window, at most, for the chosen tables' descriptions (full and one-line)
MIN_FULL = 4  # the best tables described in full, when they fit the share, before any more in one line


def tables_within(full_tokens: list[int], brief_tokens: list[int], window: int) -> tuple[int, int]:
    """How many of the chosen tables (best first) to describe in full and how many more in one
    line each, within the schema's share of the window: first as many tables as fit in one
    line, then the best of them in full while that still fits, the last one-line tables giving
    way until ``MIN_FULL`` are in full; at least one table in full."""
    share = SCHEMA_SHARE * window
    kept = len(brief_tokens)
    while kept > 1 and sum(brief_tokens[:kept]) > share:
        kept -= 1
    full = 0
    total = sum(brief_tokens[:kept])
    while full < kept:
        if total - brief_tokens[full] + full_tokens[full] <= share:
            total += full_tokens[full] - brief_tokens[full]
            full += 1
        elif full < MIN_FULL and kept > full + 1:
            # the best few tables in full come before more tables in one line (wide tables: OMOP's)
            kept -= 1
            total -= brief_tokens[kept]
        else:
            break
    if kept and not full:
        full = 1
    return full, kept - full


def reply_reserve(window: int) -> int:
    """Tokens kept free for the model's reply."""
    return min(1024, window // 8)  # a code reply is a few hundred tokens


def fit(full: Layout, render: Callable[[Layout], Messages], window: ContextWindow) -> tuple[Layout, Messages]:
    """The largest layout (shrunk in the documented order) whose messages fit ``window``,
    leaving room for the reply and for one more exchange (a step's code and its feedback)."""
    limit = window.tokens - 2 * reply_reserve(window.tokens)
    layout = full
    messages = render(layout)
    for step in _shrinking(full):
        if estimate_prompt_tokens(messages) <= limit:
            return layout, messages
        layout = step
        messages = render(layout)
    needed = estimate_prompt_tokens(messages)
    if needed <= limit:
        return layout, messages
    raise PromptTooLongError(too_long(needed + 2 * reply_reserve(window.tokens), window))


def too_long(needed: int, window: ContextWindow) -> str:
    return (f"The prompt needs about {needed:,} tokens (with room for the reply) but the model's window is "
            f"{window}: start the server with a larger context (llama.cpp --ctx-size, llama-cpp-python --n_ctx, "
            "Ollama num_ctx, vLLM --max-model-len) and set context_window to match, or use a model with a "
            "larger window.")


def _shrinking(full: Layout):
    layout = full
    for tokens in _HISTORY_STEPS:
        layout = dataclasses.replace(layout, history_tokens=tokens)
        yield layout
    for count in range(full.examples - 1, -1, -1):
        layout = dataclasses.replace(layout, examples=count)
        yield layout
    if layout.skills:
        layout = dataclasses.replace(layout, skills=False)
        yield layout
    layout = dataclasses.replace(layout, full_index=False)
    yield layout
    layout = dataclasses.replace(layout, index_columns=False)
    yield layout
    chosen = full.tables + full.brief
    for count in range(full.tables - 1, 0, -1):
        layout = dataclasses.replace(layout, tables=count, brief=chosen - count)
        yield layout
    for count in range(layout.brief - 1, -1, -1):
        layout = dataclasses.replace(layout, brief=count)
        yield layout


def trim_steps(messages: Messages, window: ContextWindow, *, head: int = 2) -> Messages | None:
    """``messages`` within the window: the first ``head`` (system and question) kept, then the
    oldest later exchanges dropped, the latest kept. ``None`` if even that is too long."""
    limit = window.tokens - reply_reserve(window.tokens)
    if estimate_prompt_tokens(messages) <= limit:
        return messages
    start, tail = messages[:head], messages[head:]
    while len(tail) > 2 and estimate_prompt_tokens(start + tail) > limit:
        tail = tail[2:]  # one assistant reply and the feedback on it
    trimmed = start + tail
    return trimmed if estimate_prompt_tokens(trimmed) <= limit else None
