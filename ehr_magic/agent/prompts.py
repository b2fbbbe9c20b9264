"""Prompt templates: package data (``prompts/*.txt``), versioned, rendered strictly.

Templates use ``$name`` placeholders (``string.Template``), which leave the braces of
Python and SQL code alone; a missing variable is an error, never a silent blank.
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
NAMES = ("system", "knowledge", "question", "example", "feedback", "observation", "debugger_system", "debugger",
         "reminder", "values",
         "conversation",  # conversation: earlier turns and notebook variables (ehr_magic.agent.turns)
         # how time works: the dataset clock, offsets from each stay (eICU), or no time at all
         "time_calendar", "time_offset", "time_none")


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
    try:
        return template(name).substitute({k: str(v) for k, v in values.items()})
    except KeyError as exc:
        raise PromptError(f"prompt {name!r} needs a value for {exc.args[0]!r}") from None


def placeholders(name: str) -> set[str]:
    """The variables template ``name`` expects."""
    return set(template(name).get_identifiers())
