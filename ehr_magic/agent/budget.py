"""Fitting the prompt into the model's context window.

The system message depends on the database and the window only, never on the question, so
that a provider's prompt cache (or a local server's KV cache) reuses it for every question:
it indexes every table with its column names, or, when that index would take more than
``SYSTEM_SHARE`` of the window, with the table names alone; when even that is too long (a
dataset with pages of conventions in a small window), the conventions that speak of a table go
with the question that shows it instead; and when the names alone are too many (a warehouse of
thousands of tables), it names as many as fit, those the most tables join to first
(``system_form``, ``context.index_order``).

The question's message is laid out in full (the chosen tables described, best first, within
``SCHEMA_SHARE`` of the window, and the chosen tables past that share in one line each, every
example, the skills that apply, the conversation so far) and, while it is longer than the
window allows, shrunk in this order:

1. the conversation's earlier turns (older ones lose their code, then drop);
2. the few-shot examples, least similar first;
3. the clinical skills block;
4. the described tables, lowest score first, from a full description to one line
   (column names and joins), down to the best one;
5. the one-line tables, lowest score first;
6. only then the system message's index, to table names (the one change that costs the cache).

What is left is the schema the question cannot do without. If even that does not fit,
``PromptTooLongError`` says how many tokens it needs and how to give the model more.
Later steps append code and feedback; ``trim_steps`` drops the oldest of those first.
Token counts are estimates (``ehr_magic.llm.tokens``) that err on the high side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ehr_magic.llm.errors import LLMContextError
from ehr_magic.llm.tokens import estimate_prompt_tokens
from ehr_magic.llm.window import ContextWindow

__all__ = ["Layout", "PromptTooLongError", "fit", "reply_reserve", "system_form", "tables_within", "trim_steps"]

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
    full_index: bool = False  # each table's row and description too in the system index (not used to fit)
    index_columns: bool = True  # each table's column names in the system index; else table names only
    brief: int = 0  # how many of the next chosen tables get one line each (column names, joins)
    all_conventions: bool = True  # every convention in the system message; else those of a table with the question
    index_tables: int | None = None  # how many tables the system index names, the most joined first; None: all


Messages = list[dict[str, str]]


SCHEMA_SHARE = 0.35  # of the window, at most, for the chosen tables' descriptions (full and one-line)
SYSTEM_SHARE = 0.4  # of the window, at most, for a system message whose index names every column


def system_form(system_tokens: Callable[[bool, bool, int | None], int], window: int,
                name_tokens: Sequence[int] = ()) -> tuple[bool, bool, int | None]:
    """``(index_columns, all_conventions, index_tables)`` for ``window``: whether the system index
    names each table's columns (else only the tables) and holds every convention (else only those
    that speak of no table), and how many tables it names (None: all), given
    ``system_tokens(index_columns, all_conventions, index_tables)`` and the tokens of each table's
    name in the order a bounded index lists them (``name_tokens``). Decided per database and window,
    never per question, so the system message stays the same: the columns go first, the conventions
    move to the questions only when even the bare index leaves no room, and only then does the
    index name fewer tables (a warehouse of thousands), as many as fit."""
    share = SYSTEM_SHARE * window
    if system_tokens(True, True, None) <= share:
        return True, True, None
    if system_tokens(False, True, None) <= share:
        return False, True, None
    if system_tokens(True, False, None) <= share:
        return True, False, None
    if system_tokens(False, False, None) <= share or not name_tokens:
        return False, False, None
    room = share - system_tokens(False, False, 0)
    listed = 0
    while listed < len(name_tokens) and name_tokens[listed] <= room:
        room -= name_tokens[listed]
        listed += 1
    # the names' tokens, estimated one by one, add up to a little less than the list's
    step = max(1, listed // 20)
    while listed and system_tokens(False, False, listed) > share:
        listed = max(0, listed - step)
    return False, False, listed

MIN_FULL = 4  # the best tables described in full, when they fit the share, before any more in one line


def tables_within(full_tokens: list[int], brief_tokens: list[int], window: int,
                  needed: int = MIN_FULL) -> tuple[int, int]:
    """How many of the chosen tables (best first) to describe in full and how many more in one
    line each, within the schema's share of the window: first as many tables as fit in one
    line, then the best of them in full while that still fits, the last one-line tables giving
    way until ``MIN_FULL`` are in full, or the ``needed`` ones (those the question needs in full,
    ``TableChoice.needed``); at least one table in full."""
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
        elif full < max(MIN_FULL, needed) and kept > full + 1:
            # the tables needed in full come before less likely ones in one line (wide tables: OMOP's)
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


def _shrinking(full: Layout) -> Iterator[Layout]:
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
    chosen = full.tables + full.brief
    for count in range(full.tables - 1, 0, -1):
        layout = dataclasses.replace(layout, tables=count, brief=chosen - count)
        yield layout
    for count in range(layout.brief - 1, -1, -1):
        layout = dataclasses.replace(layout, brief=count)
        yield layout
    if layout.full_index:
        layout = dataclasses.replace(layout, full_index=False)
        yield layout
    if layout.index_columns:
        layout = dataclasses.replace(layout, index_columns=False)
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
