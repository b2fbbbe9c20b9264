"""``%ehr knowledge``: what ehr-magic believes about the connected data, and correcting it.

    %ehr knowledge                 the clock and every table (meaning, key, joins, lookup columns)
    %ehr knowledge TABLE           one table with its columns
    %ehr knowledge edit [PATH]     write the knowledge file to edit (default beside the notebook)
    %ehr knowledge import FILE     check it against the database, store it, reconnect

Only rendering lives here: the view, the file and the import come from the session
(``Session.knowledge_view``, ``edit_knowledge``, ``import_knowledge``), as in the side panel.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING

from IPython.display import display

from ehr_magic.knowledge.view import KnowledgeView, TableView
from ehr_magic.magic.command import CommandError

if TYPE_CHECKING:  # pragma: no cover - magics imports this module
    from ehr_magic.magic.magics import EhrMagics

USAGE = "Usage: %ehr knowledge [TABLE] | edit [PATH] | import FILE"
IMPORT_HINT = "import it with %ehr knowledge import {path}."

_MARK_STYLE = {"drafted": "background:#fff3cd;color:#7a5b00", "confirmed": "background:#d7f5dd;color:#11612a",
               "not described": "background:#eee;color:#555"}


@dataclass(frozen=True)
class KnowledgeCommand:
    action: str  # show | table | edit | import
    argument: str | None = None


def parse(args: list[str]) -> KnowledgeCommand:
    """``%ehr knowledge`` words -> ``KnowledgeCommand``."""
    if not args:
        return KnowledgeCommand("show")
    first, rest = args[0], args[1:]
    if first == "edit" and len(rest) <= 1:
        return KnowledgeCommand("edit", rest[0] if rest else None)
    if first == "import":
        if len(rest) != 1:
            raise CommandError("Name the file to import: %ehr knowledge import FILE.yaml")
        return KnowledgeCommand("import", rest[0])
    if len(args) == 1:
        return KnowledgeCommand("table", first)
    raise CommandError(USAGE)


def run(magics: EhrMagics, args: list[str]) -> None:
    """Serve one ``%ehr knowledge`` command for the ``EhrMagics`` instance."""
    cmd = parse(args)
    session = magics._ready()
    if cmd.action == "edit":
        edited = session.edit_knowledge(cmd.argument)
        print(edited.message(IMPORT_HINT.format(path=edited.path)))
    elif cmd.action == "import":
        print(magics.import_knowledge(cmd.argument))
    elif cmd.action == "table":
        assert cmd.argument is not None, "parse names the table"
        table = session.knowledge_view().table(cmd.argument)
        display({"text/plain": table_text(table, columns=True), "text/html": table_html(table)}, raw=True)
    else:
        view = session.knowledge_view()
        display({"text/plain": view_text(view), "text/html": view_html(view)}, raw=True)


# -- text --------------------------------------------------------------------------------------


def view_text(view: KnowledgeView) -> str:
    counts = view.counts()
    lines = [f"Knowledge of {view.dataset} (schema {view.schema}, {view.origin}): {counts['drafted']} statements "
             f"drafted by ehr-magic, {counts['confirmed']} written or confirmed by a person.",
             f"Clock [{view.clock.mark}]: {view.clock.text}", "Tables:"]
    lines += [table_text(table) for table in view.tables]
    lines.append("Correct it: %ehr knowledge edit, then %ehr knowledge import FILE. One table with its columns: "
                 "%ehr knowledge TABLE.")
    return "\n".join(lines)


def table_text(table: TableView, *, columns: bool = False) -> str:
    lines = [f"  {table.name} [{table.meaning_mark}]: {table.meaning or 'not described'}"]
    if table.key:
        lines.append(f"      key [{table.key_mark}]: {table.key}")
    if table.joins:
        lines.append(f"      joins [{table.joins_mark}]: " + "; ".join(j.arrow for j in table.joins))
    if table.lookup:
        lines.append(f"      lookup columns [{table.lookup_mark}]: " + ", ".join(table.lookup))
    if columns:
        width = max((len(c.name) for c in table.columns), default=0)
        for column in table.columns:
            role = " (key)" if column.key else " (lookup)" if column.lookup else ""
            lines.append(f"      {column.name:<{width}}  {column.dtype:<10} [{column.mark}] {column.meaning}{role}")
    return "\n".join(lines)


# -- HTML --------------------------------------------------------------------------------------


def _mark(mark: str) -> str:
    style = _MARK_STYLE.get(mark, "")
    return (f'<span class="ehr-mark ehr-mark-{html.escape(mark.replace(" ", "-"))}" style="{style};'
            f'border-radius:3px;padding:0 4px;font-size:85%">{html.escape(mark)}</span>')


def _cell(text: str, mark: str) -> str:
    return f"{html.escape(text)} {_mark(mark)}" if text else ""


def _row(table: TableView) -> str:
    joins = "<br>".join(html.escape(j.arrow) for j in table.joins)
    return ("<tr>"
            f"<td><b>{html.escape(table.name)}</b></td>"
            f"<td>{_cell(table.meaning, table.meaning_mark) or _mark(table.meaning_mark)}</td>"
            f"<td>{_cell(table.key or '', table.key_mark)}</td>"
            f"<td>{joins + ' ' + _mark(table.joins_mark) if joins else ''}</td>"
            f"<td>{_cell(', '.join(table.lookup), table.lookup_mark)}</td>"
            "</tr>")


_HEAD = ("<tr><th>table</th><th>meaning</th><th>key</th><th>joins</th><th>lookup columns</th></tr>")
_TABLE = '<table class="ehr-knowledge" style="border-collapse:collapse;text-align:left">'


def view_html(view: KnowledgeView) -> str:
    counts = view.counts()
    return (f'<div class="ehr-knowledge-view"><p><b>Knowledge of {html.escape(view.dataset)}</b> '
            f"(schema {html.escape(view.schema)}, {html.escape(view.origin)}): "
            f"{counts['drafted']} statements {_mark('drafted')} by ehr-magic, "
            f"{counts['confirmed']} {_mark('confirmed')} by a person.</p>"
            f"<p><b>Clock</b> {_mark(view.clock.mark)}: {html.escape(view.clock.text)}</p>"
            f"{_TABLE}{_HEAD}{''.join(_row(t) for t in view.tables)}</table>"
            "<p>Correct it: <code>%ehr knowledge edit</code>, then <code>%ehr knowledge import FILE</code>. "
            "One table with its columns: <code>%ehr knowledge TABLE</code>.</p></div>")


def table_html(table: TableView) -> str:
    columns = "".join(
        f"<tr><td>{html.escape(c.name)}{' (key)' if c.key else ''}{' (lookup)' if c.lookup else ''}</td>"
        f"<td>{html.escape(c.dtype)}</td><td>{_cell(c.meaning, c.mark) or _mark(c.mark)}</td></tr>"
        for c in table.columns)
    return (f'<div class="ehr-knowledge-view">{_TABLE}{_HEAD}{_row(table)}</table>'
            f"{_TABLE}<tr><th>column</th><th>type</th><th>meaning</th></tr>{columns}</table></div>")
