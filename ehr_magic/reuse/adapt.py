"""Adapting a remembered cell to a new question: write the new values into its code.

For every literal that carries a slot, the new value is written in the same
rendering the old one had (the stored drug name, the start of the period as a
timestamp, the number of months...), quoted for where the literal sits (an SQL
string inside a Python string, a Python string, a number). A literal that carries
two slots must come out the same from both, else the adaptation is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ehr_magic.engines import QUERY_FAILURES
from ehr_magic.engines.base import first_line
from ehr_magic.errors import EhrMagicError
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.knowledge.handle import Database
from ehr_magic.reuse.literals import Literal, can_write, replace_literals, sql_strings, write_literal
from ehr_magic.reuse.template import Link, Template
from ehr_magic.reuse.values import Value, VocabularyIndex, split_vocab_type


class AdaptationError(EhrMagicError):
    """The new values cannot be written into the remembered code (reason in the message)."""


@dataclass
class Adaptation:
    """The adapted code and what changed: ``substitutions`` lists ``(new, old)`` texts."""

    code: str
    substitutions: list[tuple[str, str]] = field(default_factory=list)
    changed_literals: int = 0


def adapt(template: Template, values: list[Value], vocabulary: VocabularyIndex | None = None) -> Adaptation:
    """``template``'s code with ``values`` (one per slot, in slot order) written in."""
    if len(values) != len(template.slots):
        raise AdaptationError("the question's values do not fill the remembered cell's slots")
    replacements: dict[Literal, str] = {}
    for index, literal in enumerate(template.literals):
        links = template.links_of(index)
        if not links:
            continue
        texts = set()
        for link in links:
            new = values[link.slot]
            old = template.slots[link.slot].value
            texts.add(_new_text(literal, link.format, link.mode, new, old))
        if len(texts) != 1:
            raise AdaptationError(f"the literal {literal.value!r} would get two different values "
                                  f"({', '.join(sorted(texts))})")
        text = texts.pop()
        if text != literal.value:
            if not can_write(literal, text, template.code):
                raise AdaptationError(f"cannot write {text!r} into the code safely")
            _check_stored(text, links, values, vocabulary)
            replacements[literal] = text
    code = replace_literals(template.code, replacements)
    changed = [(new.start, _shown(new), _shown(slot.value)) for slot, new in zip(template.slots, values)
               if (new.type, new.key) != (slot.value.type, slot.value.key)]
    substitutions = [(new, old) for _, new, old in sorted(changed)]  # in the new question's order
    return Adaptation(code, substitutions, len(replacements))


def _new_text(literal: Literal, fmt: str, mode: str, new: Value, old: Value) -> str:
    """The new value as the literal's rendering ``fmt`` (inside the old pattern for ``contains``)."""
    rendering = new.renderings.get(fmt)
    if rendering is None:
        raise AdaptationError(f"{new.text!r} cannot be written as the {fmt} the remembered code uses")
    if literal.kind == "function":
        return write_literal(literal, rendering)
    if mode == "contains":
        old_text = old.renderings.get(fmt, "")
        if not old_text or old_text not in literal.value:
            raise AdaptationError(f"cannot find {old_text!r} inside {literal.value!r}")
        return literal.value.replace(old_text, rendering)
    return rendering


def _check_stored(text: str, links: list[Link], values: list[Value], vocabulary: VocabularyIndex | None) -> None:
    """A new vocabulary value must be stored in the column the code compares it with."""
    if vocabulary is None:
        return
    for link in links:
        new = values[link.slot]
        if new.kind != "vocab" or link.mode != "exact":
            continue
        table, column = split_vocab_type(new.type)
        if not vocabulary.exists(table, column, text):
            raise AdaptationError(f"{text!r} is not a stored value of {table}.{column}")


def _shown(value: Value) -> str:
    if value.kind == "vocab":
        return value.value
    return value.text


def check_context(ehr: Database, adaptation: Adaptation, template: Template, values: list[Value]) -> None:
    """Each new vocabulary value must exist where the code uses it: with the other
    constant conditions the code puts on the same table (``d_items.label = 'foley'``
    next to ``d_items.linksto = 'inputevents'`` must find a row). A check whose query
    fails declines the adaptation too: a check that cannot run proves nothing."""
    changed = {new.value for slot, new in zip(template.slots, values)
               if new.kind == "vocab" and new.key != slot.value.key}
    if not changed:
        return
    for sql in sql_strings(adaptation.code):
        for query, shown in _context_queries(sql, changed):
            try:
                found = ehr.sql(query).height
            except QUERY_FAILURES as exc:
                raise AdaptationError(f"the check that {shown} finds a row cannot run: {first_line(exc)}") from exc
            if not found:
                raise AdaptationError(f"{shown} finds no row")


def _context_queries(sql: str, values: set[str]) -> list[tuple[str, str]]:
    """``SELECT 1 FROM t WHERE t.col = 'new' AND <t's other constant conditions>`` per
    new value that the SQL compares with a column next to other constant conditions.
    A piece of SQL that cannot be read (a part of an f-string, whose whole text exists only
    when the cell runs) has no constant conditions known here, so no check."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except SqlglotError:
        return []
    out = []
    for literal in tree.find_all(exp.Literal):
        if not literal.is_string or literal.this not in values:
            continue
        own = literal.parent
        if isinstance(own, exp.In):
            column = own.this
        elif isinstance(own, exp.EQ):
            column = own.left if own.right is literal else own.right
        else:
            continue
        select = literal.find_ancestor(exp.Select)
        if not isinstance(column, exp.Column) or select is None or select.args.get("where") is None:
            continue
        tables = [t for t in select.find_all(exp.Table) if t.find_ancestor(exp.Select) is select]
        qualifier = column.table
        table = next((t for t in tables if qualifier in (t.alias_or_name, t.name)), None) if qualifier else (
            tables[0] if len(tables) == 1 else None)
        if table is None:
            continue
        conditions: list[exp.Expr] = [own]
        for condition in _conjuncts(select.args["where"].this):
            if condition is own or condition.find(exp.Select) is not None:
                continue
            if _constant_condition(condition, column.table):
                conditions.append(condition)
        if len(conditions) < 2:
            continue
        where = " AND ".join(c.sql(dialect="duckdb") for c in conditions)
        out.append((f"SELECT 1 FROM {table.sql(dialect='duckdb')} WHERE {where} LIMIT 1",
                    " and ".join(c.sql(dialect="duckdb") for c in conditions)))
    return out


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    if isinstance(condition, exp.And):
        return _conjuncts(condition.left) + _conjuncts(condition.right)
    if isinstance(condition, exp.Paren):
        return _conjuncts(condition.this)
    return [condition]


def _constant_condition(condition: exp.Expr, qualifier: str) -> bool:
    """``t.col = 'text'`` / ``t.col IN ('a', 'b')`` on the same table."""
    if isinstance(condition, exp.EQ):
        sides = [condition.left, condition.right]
        columns = [s for s in sides if isinstance(s, exp.Column)]
        literals = [s for s in sides if isinstance(s, exp.Literal) and s.is_string]
        return len(columns) == 1 and len(literals) == 1 and columns[0].table == qualifier
    if isinstance(condition, exp.In):
        return (isinstance(condition.this, exp.Column) and condition.this.table == qualifier
                and bool(condition.expressions)
                and all(isinstance(e, exp.Literal) and e.is_string for e in condition.expressions))
    return False


def unfound_values(ehr: Database, template: Template, values: list[Value]) -> list[str]:
    """The substituted values not found in the column the code puts them into (a value
    compared with no column, like a year inside ``strftime``, or one the column does not
    hold), each as a sentence. Empty when every substitution is found where it went."""
    missing = []
    for index, (slot, new) in enumerate(zip(template.slots, values)):
        if (new.type, new.key) == (slot.value.type, slot.value.key):
            continue
        for link in (k for k in template.links if k.slot == index):
            literal = template.literals[link.literal]
            try:
                text = _new_text(literal, link.format, link.mode, new, slot.value)
            except AdaptationError:
                text = ""
            if not literal.column_name:
                missing.append(f"{_shown(new)!r} is compared with no column")
                break
            if not text or not _stored_in_column(ehr, literal, text, link.mode == "contains"):
                missing.append(f"{_shown(new)!r} is not stored in {literal.column}")
                break
    return missing


def _stored_in_column(ehr: Database, literal: Literal, text: str, pattern: bool) -> bool:
    """True when a table with ``literal``'s column holds ``text`` there (as a pattern for LIKE)."""
    column = literal.column_name
    if not column:
        return False
    tables = [literal.table] if literal.table in ehr.tables() else [
        t for t in ehr.tables() if column in ehr.columns(t)]
    pattern = pattern or (literal.op or "").lower() in ("like", "ilike")
    test = "ILIKE" if pattern else "="
    for table in tables:
        try:
            if ehr.sql(f"SELECT 1 FROM {quote(table)} WHERE CAST({quote(column)} AS VARCHAR) {test} ? LIMIT 1",
                       [text]).height:
                return True
        except QUERY_FAILURES:  # a column we cannot search does not hold the value (the reuse abstains)
            continue
    return False
