"""Building the messages the model sees, from the dataset's knowledge and the steps.

The system prompt depends only on the dataset (its introduction, conventions, tables
and clock), so it is identical for every question on the same database and sits first,
where providers' prompt caching can reuse it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ehr_magic.agent import prompts
from ehr_magic.agent.executor import ErrorInfo
from ehr_magic.agent.fewshot import Example


def system_prompt(ehr: Any) -> str:
    return _system_prompt_for(ehr.path, ehr.schema, ehr.clock.now if ehr.clock else None)


@lru_cache(maxsize=16)
def _system_prompt_for(path: Any, schema: str, now: Any) -> str:
    from ehr_magic.data import connect

    # Keyed on (path, schema, now) so an EHR reconnected to the same file reuses it.
    with connect(path, now=now) as ehr:
        knowledge = ehr.knowledge
        tables = ehr.tables()
        if knowledge is not None:
            described = [t for t in tables if t in knowledge.tables]
            undescribed = [t for t in tables if t not in knowledge.tables]
            table_text = knowledge.detail(described)
            if undescribed:
                table_text += "\n" + _plain_tables(ehr, undescribed)
            introduction = knowledge.introduction.strip()
            conventions = "\n".join(f"- {c}" for c in knowledge.conventions)
        else:
            table_text = _plain_tables(ehr, tables)
            introduction = f"A database of schema {ehr.schema} ({ehr.dataset})."
            conventions = ""
        return prompts.render("system", introduction=introduction, conventions=conventions,
                              tables=table_text,
                              now=ehr.clock.now.strftime("%Y-%m-%d %H:%M:%S") if ehr.clock else "(none: no dates here)")


def _plain_tables(ehr: Any, tables: list[str]) -> str:
    return "\n".join(f"{t}({', '.join(f'{c} {d}' for c, d in ehr.columns(t).items())})" for t in tables)


def question_message(question: str, examples: list[Example], knowledge: str, skills: str = "") -> str:
    shown = "".join(prompts.render("example", question=e.question, knowledge=e.knowledge.strip() or "-",
                                   code=e.code.strip()) for e in examples)
    if shown:
        shown = "Solved examples from this database:\n\n" + shown + "Now the new question.\n"
    knowledge_block = f"\nKnowledge for this question:\n{knowledge.strip()}\n" if knowledge.strip() else ""
    skills_block = f"{skills.strip()}\n" if skills.strip() else ""
    return prompts.render("question", examples=shown, skills=skills_block, knowledge=knowledge_block,
                          question=question.strip())


def numbered(code: str) -> str:
    return "\n".join(f"{i:>3}| {line}" for i, line in enumerate(code.splitlines(), start=1))


def trace_text(error: ErrorInfo | None, soft_failure: str, stdout: str) -> str:
    """What went wrong, for the feedback message and the debugger."""
    if error is not None:
        where = f" at line {error.line}: `{error.line_text}`" if error.line else ""
        call = f" (raised inside {error.call})" if error.call else ""
        text = f"The code failed with {error.type}{where}{call}:\n{error.message}"
    else:
        text = f"The code ran without an error, but {soft_failure}."
    if stdout.strip():
        text += f"\nPrinted output:\n{stdout.strip()}"
    return text


def tables_in_code(ehr: Any, code: str) -> list[str]:
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code.lower()))
    return [t for t in ehr.tables() if t in words]
