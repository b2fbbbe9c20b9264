"""Building the messages the model sees, from the dataset's knowledge and the steps.

The system prompt depends only on the dataset (its introduction, conventions, a
one-line index of its tables and its clock), so it is identical for every question on
the same database and sits first, where providers' prompt caching can reuse it. The
full descriptions of the tables a question needs (``table_choice``) go with the question.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Sequence
from functools import lru_cache
from typing import Any

from ehr_magic.agent import prompts, table_choice
from ehr_magic.identifiers import shown_identifier, text_literal
from ehr_magic.knowledge.handle import Database
from ehr_magic.linking.question import Linking, StoredValue
from ehr_magic.runtime.executor import SHOWN_ROWS, ErrorInfo
from ehr_magic.memory.fewshot import Example


def system_prompt(ehr: Database, *, full_index: bool = False, columns: bool = True, conventions: bool = True,
                  listed: int | None = None) -> str:
    """The dataset's prompt: rules, introduction, conventions, time, and a one-line index of
    every table: its column names (with ``full_index``, its row and description too; with
    ``columns`` false, for the smallest windows, only the table names). With ``conventions``
    false, only the conventions that speak of no table: the others go with the question that
    shows their tables (``question_conventions``). With ``listed``, the names of that many tables
    only, the most joined to first (``index_order``): a warehouse of thousands of tables."""
    return _system_prompt_for(_Unkeyed(ehr), ehr.path, ehr.schema, ehr.clock.now if ehr.clock else None, full_index,
                              columns, conventions, listed, ehr.stored_knowledge)


class _Unkeyed:
    """The database a system prompt is rendered from, passed through its cache without being part of
    the key (the key says what the text depends on) and held weakly, so the cache keeps no connection
    alive."""

    __slots__ = ("database",)

    def __init__(self, ehr: Database) -> None:
        self.database = weakref.ref(ehr)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unkeyed)

    def __hash__(self) -> int:
        return 0


def question_conventions(ehr: Database, shown: Collection[str], question: str) -> str:
    """The conventions that a system prompt without them leaves to the question: those that speak
    of a table shown with it, or say a word of the question few others say, as bullets."""
    knowledge = ehr.knowledge
    if knowledge is None:
        return ""
    tables = ehr.tables()
    chosen = table_choice.conventions_for(tables, shown, question, knowledge.conventions,
                                          {t: ehr.columns(t) for t in tables})
    return "\n".join(f"- {rule}" for rule in chosen)


@lru_cache(maxsize=16)
def _system_prompt_for(source: _Unkeyed, path: Any, schema: str, now: Any, full_index: bool, columns: bool,
                       all_conventions: bool, listed: int | None, stored_knowledge: str | None) -> str:
    # Keyed on (path, schema, now) so an EHR reconnected to the same file reuses it, and on the
    # knowledge stored there, so a reconnect after ``data knowledge --import`` sees the new text;
    # rendered from the calling database (alive during the call), never a new connection: a budget
    # weighs up to seven forms, and connecting cost 0.1 s each on a warehouse of 1,500 tables.
    ehr = source.database()
    assert ehr is not None, "the calling database holds a reference for the call"
    knowledge = ehr.knowledge
    if knowledge is not None:
        introduction = knowledge.introduction.strip()
        tables = ehr.tables()
        conventions = "\n".join(f"- {c}" for c in knowledge.conventions
                                if all_conventions or not table_choice.convention_tables(tables, c))
    else:
        introduction = prompts.phrase("introduction_plain", schema=ehr.schema, dataset=ehr.dataset)
        conventions = ""
    return prompts.render("system", introduction=introduction, conventions=conventions,
                          table_index=table_index(ehr, full=full_index, columns=columns, listed=listed),
                          time_rules=_time_rules(ehr), shown_rows=SHOWN_ROWS)


def _time_rules(ehr: Database) -> str:
    """How time works here: the dataset clock, or minutes from each stay's start (eICU)."""
    if ehr.time_model == "offset":
        return prompts.render("time_offset")
    if ehr.clock is None:  # calendar data without a single date: no clock, never a made-up one
        return prompts.render("time_none")
    return prompts.render("time_calendar", now=ehr.clock.now.strftime("%Y-%m-%d %H:%M:%S"))


def table_index(ehr: Database, *, full: bool = False, columns: bool = True, listed: int | None = None) -> str:
    """One line per table with every column, so that no column name is ever unknown to the model
    (with ``full``, each table's row and description first; a column every table has, such as a
    row number, said once first); for the smallest windows, with ``columns`` false, only the
    table names, and with ``listed``, only the names of that many, the most joined to first, and
    where to find the others. Absent tables are named last."""
    knowledge = ehr.knowledge
    shared = table_choice.shared_columns(ehr)
    if listed is not None and listed < len(ehr.tables()):
        names = index_order(ehr)[:listed]
        # the index of a warehouse whose table names alone would crowd the model's window out
        lines = [prompts.phrase("index_listed" if names else "index_unlisted", listed=len(names),
                                total=len(ehr.tables()), names=", ".join(names))]
        lines += [_every_table_has(ehr, shared)] if shared else []
    elif full or columns:
        lines = [_every_table_has(ehr, shared)] if shared else []
        for t in ehr.tables():
            own = index_columns(ehr, t, shared)
            if full and knowledge is not None and t in knowledge.tables:
                summary = knowledge.tables[t].summary()
                lines.append(prompts.phrase("index_described", summary=summary, columns=own) if own
                             else prompts.phrase("index_described_shared", summary=summary))
            else:
                lines.append(f"{t}: {own}" if own else t)
    else:
        lines = [", ".join(ehr.tables())] + ([_every_table_has(ehr, shared)] if shared else [])
    absent = knowledge.absent if knowledge is not None else ()
    if absent:
        lines.append(prompts.phrase("index_absent", tables=", ".join(absent)))
    return "\n".join(lines)


def index_order(ehr: Database) -> list[str]:
    """The tables, those the most tables join to first (a warehouse's patients and encounters),
    then by name: what a bounded index lists, the same for every question."""
    knowledge = ehr.knowledge
    tables = ehr.tables()
    referrers: dict[str, int] = dict.fromkeys(tables, 0)
    for info in knowledge.tables.values() if knowledge is not None else ():
        for target in set(info.join_targets):
            if target in referrers and target != info.name:
                referrers[target] += 1
    return sorted(tables, key=lambda t: (-referrers[t], t))


def _every_table_has(ehr: Database, shared: Collection[str]) -> str:
    """``Every table has row_id (Row number).``: the columns every table has, with the meaning most
    tables give them, which their full descriptions then leave out (``said_meanings``)."""
    meanings = said_meanings(ehr)
    named = [f"{name} ({meanings[name].rstrip('.')})" if name in meanings else name
             for name in index_columns(ehr, ehr.tables()[0], only=shared).split(", ")]
    return prompts.phrase("index_shared", columns=", ".join(named))


def said_meanings(ehr: Database) -> dict[str, str]:
    """The meanings the index gives the columns every table has (``Knowledge.common_meanings``)."""
    knowledge = ehr.knowledge
    shared = table_choice.shared_columns(ehr)
    return knowledge.common_meanings(shared) if knowledge is not None and shared else {}


_TIME_TYPES = ("TIMESTAMP", "DATE", "TIME")


def index_columns(ehr: Database, table: str, shared: Collection[str] = (), *,
                  only: Collection[str] | None = None) -> str:
    """The column names of ``table``, with the type of time columns only (a name seldom says it
    holds a time, and dates are where code goes wrong; other types cost tokens and help little),
    leaving out the ``shared`` ones the index states once (or giving ``only`` those)."""
    return ", ".join(f"{shown_identifier(name)} {kind.split('(')[0].split(' ')[0].lower()}"
                     if kind.upper().startswith(_TIME_TYPES) else shown_identifier(name)
                     for name, kind in ehr.columns(table).items()
                     if name not in shared and (only is None or name in only))


def table_details(ehr: Database, tables: Sequence[str], brief: Sequence[str] = (), *,
                  brief_columns: bool = True) -> str:
    """The full description of ``tables`` (columns with their meanings, joins, the columns
    worth a lookup), then one line for each of the ``brief`` tables (row, column names unless
    ``brief_columns`` is false because the system index names them, and the joins not already
    said by a table before it)."""
    knowledge = ehr.knowledge
    described = [t for t in tables if knowledge is not None and t in knowledge.tables]
    text = knowledge.detail(described, said_meanings(ehr)) if knowledge is not None and described else ""
    plain = [t for t in tables if t not in described]
    if plain:
        text = (text + "\n" if text else "") + _plain_tables(ehr, plain, types=True)
    if brief:
        named = [t for t in brief if knowledge is not None and t in knowledge.tables]
        lines = ([knowledge.brief(named, described=described, columns=brief_columns)]
                 if knowledge is not None and named else [])
        unnamed = [t for t in brief if t not in named]
        if brief_columns:
            lines += [_plain_tables(ehr, unnamed, types=False)]
        elif unnamed:
            lines += [f"- {t}" for t in unnamed]
        text += ("\n\n" if text else "") + prompts.phrase("tables_brief" if brief_columns else "tables_brief_indexed",
                                                          tables="\n".join(line for line in lines if line))
    return text


def _plain_tables(ehr: Database, tables: Sequence[str], *, types: bool) -> str:
    def column(name: str, kind: str) -> str:
        return f"{name} {kind}" if types else name

    return "\n".join(f"{t}({', '.join(column(c, d) for c, d in ehr.columns(t).items())})" for t in tables)


def linked_values(linking: Linking | None) -> str:
    """The stored values a question's words may name (``ehr_magic.linking.question``), one line
    each with its ``table.column`` and, for a dictionary row, its key and short columns; "" when
    nothing was linked."""
    if linking is None or linking.empty:
        return ""
    lines = []
    for term in linking.terms:
        lines.append(f'- "{term.text}"' + (f" ({term.meaning})" if term.meaning else "") + ":")
        lines += [f"  {v.table}.{shown_identifier(v.column)} = {text_literal(v.value)}{_rows(v)}" for v in term.values]
        if term.more and term.more_elsewhere:  # one column's lookup would not show them all
            lines.append("  " + prompts.phrase("values_more_elsewhere", more=term.more, term=repr(term.text)))
        elif term.more:
            best = term.values[0]
            lines.append("  " + prompts.phrase("values_more", more=term.more, table=repr(best.table),
                                               column=repr(best.column), term=repr(term.text),
                                               k=len(term.values) + term.more))
    for table, column, count in linking.skipped:
        lines.append("- " + prompts.phrase("values_skipped", count=f"{count:,}", table=table, column=column))
    return prompts.render("values", terms="\n".join(lines)) + "\n"


def _rows(value: StoredValue) -> str:
    """`` (itemid 220045, linksto 'chartevents')``: the key and short columns of the value's rows."""
    if not value.rows:
        return ""

    def cell(column: str, text: str) -> str:
        return f"{column} {text}" if column == value.key and text.lstrip("-").isdigit() else \
            f"{column} {text_literal(text)}"

    if all(len(row) == 1 for row in value.rows) and len({row[0][0] for row in value.rows}) == 1:
        column = value.rows[0][0][0]  # keys only: "itemid 50811, 51222"
        texts = [cell(column, row[0][1]).split(" ", 1)[1] for row in value.rows]
        shown = f"{column} {', '.join(texts)}"
    else:
        shown = "; ".join(", ".join(cell(c, t) for c, t in row) for row in value.rows)
    more = "; " + prompts.phrase("values_more_rows", count=value.more_rows) if value.more_rows else ""
    return f" ({shown}{more})"


def question_message(question: str, examples: list[Example], knowledge: str, skills: str = "",
                     tables: str = "", values: str = "", conventions: str = "") -> str:
    # say only what is true: with no table matched, the model chooses from the index itself
    tables_block = (prompts.phrase("tables", tables=tables.strip()) if tables.strip()
                    else prompts.phrase("tables_unmatched")) + "\n\n"
    if conventions.strip():
        tables_block += prompts.phrase("question_conventions", conventions=conventions.strip()) + "\n\n"
    shown = "".join(prompts.render("example", question=e.question, knowledge=e.knowledge.strip() or "-",
                                   code=e.code.strip()) for e in examples)
    if shown:
        shown = prompts.phrase("examples", examples=shown) + "\n"
    knowledge_block = "\n" + prompts.phrase("question_knowledge", knowledge=knowledge.strip()) + "\n" \
        if knowledge.strip() else ""
    skills_block = f"{skills.strip()}\n" if skills.strip() else ""
    values_block = f"\n{values.strip()}\n" if values.strip() else ""
    return prompts.render("question", tables=tables_block, examples=shown, skills=skills_block,
                          knowledge=knowledge_block, values=values_block, question=question.strip())


def numbered(code: str) -> str:
    return "\n".join(f"{i:>3}| {line}" for i, line in enumerate(code.splitlines(), start=1))


def trace_text(error: ErrorInfo | None, soft_failure: str, stdout: str) -> str:
    """What went wrong, for the feedback message and the debugger."""
    if error is not None:
        where = " " + prompts.phrase("trace_line", line=error.line, text=error.line_text) if error.line else ""
        call = " " + prompts.phrase("trace_call", call=error.call) if error.call else ""
        text = prompts.phrase("trace_error", type=error.type, line=where, call=call, message=error.message)
    else:
        text = prompts.phrase("trace_soft", failure=soft_failure)
    if stdout.strip():
        text += "\n" + prompts.phrase("printed", output=stdout.strip())
    return text


def tables_in_code(ehr: Database, code: str) -> list[str]:
    return table_choice.tables_in_code(ehr.tables(), code)
