"""Prompt templates: package data (``prompts/*.txt``), versioned, rendered strictly.

Templates use ``$name`` placeholders (``string.Template``), which leave the braces of
Python and SQL code alone; a missing variable is an error, never a silent blank. A template
that is a sentence or a few lines, laid out among others by the code, is filled with ``phrase``:
its file's closing newline left out.
What does not change between questions comes first (the system prompt), so providers'
prompt caching applies to it.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template

PROMPT_VERSION = 9  # 3: a table index in the system prompt, the chosen tables in full with the question;
# 4: chosen tables past the schema share in one line each ("Maybe needed too");
# 5: looking before answering (observation steps); templates say only what is there;
# 6: the index gives every table's columns (time columns with their type);
# 7: each join said once (tables joined on a same-named column grouped, "x ON t.c = x.c" as "x ON c";
# a table leaves out the joins a table described before it already says);
# 8: the stored values a question's words may name, linked before the first call ("values");
# 9: the same facts in fewer tokens: API list, rules, time, values and "Maybe needed too" headings; a column
# every table has said once in the index; a join a column's line says, or one differing only by its table's
# name, not said again; drafted knowledge without repeats (ehr_magic.knowledge.drafting)
NAMES = (
    # the system prompt; its table index (bounded, for a warehouse of thousands of tables); how time works:
    # the dataset clock, offsets from each stay (eICU), or no time at all
    "system", "introduction_plain",
    "index_listed", "index_unlisted", "index_shared", "index_described", "index_described_shared", "index_absent",
    "time_calendar", "time_offset", "time_none",
    # the question's message: its tables, conventions, examples, knowledge and the stored values its words may name
    "question", "tables", "tables_unmatched", "tables_brief", "tables_brief_indexed", "question_conventions",
    "examples", "example", "question_knowledge", "knowledge",
    "values", "values_more", "values_more_elsewhere", "values_more_rows", "values_skipped",
    # earlier turns and notebook variables (ehr_magic.agent.turns)
    "conversation", "conversation_opening", "notebook_opening", "conversation_variables", "conversation_variables_note",
    "turns_earlier", "turns_dropped",
    "turn", "turn_answer", "turn_outcome", "turn_outcome_shape", "turn_outcome_answer", "turn_linked", "turn_look",
    # a step's outcome: what went wrong (an error, or code that ran but did not answer), what a look showed,
    # the looks left, an answer that found nothing
    "feedback", "feedback_hints", "feedback_debugger", "reminder",
    "trace_error", "trace_line", "trace_call", "trace_soft", "printed",
    "soft_unset", "soft_unset_looked", "soft_typed_in",
    "observation", "shown_answer", "shown_last_value", "looks_left", "looks_last",
    "none_found", "none_found_searched", "result_zero",
    # the rubber-duck debugger
    "debugger_system", "debugger", "debugger_followup", "debugger_conversation", "debugger_columns",
)


class PromptError(KeyError):
    """A template was rendered without one of its variables (a bug in our code)."""


@cache
def template(name: str) -> Template:
    if name not in NAMES:
        raise PromptError(f"unknown prompt template {name!r}")
    text = resources.files("ehr_magic.agent").joinpath("prompts").joinpath(f"{name}.txt").read_text(encoding="utf-8")
    return Template(text)


def render(name: str, **values: object) -> str:
    """Fill template ``name``; every ``$placeholder`` must be given."""
    return _fill(template(name), name, values)


def phrase(name: str, **values: object) -> str:
    """Fill template ``name``, a sentence or a few lines that the code lays out among others: its
    file's text without the newline that ends it (a value's own last newline stays)."""
    return _fill(_phrase_template(name), name, values)


@cache
def _phrase_template(name: str) -> Template:
    return Template(template(name).template.removesuffix("\n"))


def _fill(text: Template, name: str, values: dict[str, object]) -> str:
    try:
        return text.substitute({k: str(v) for k, v in values.items()})
    except KeyError as exc:
        raise PromptError(f"prompt {name!r} needs a value for {exc.args[0]!r}") from None


def placeholders(name: str) -> set[str]:
    """The variables template ``name`` expects."""
    return set(template(name).get_identifiers())
