"""Reading, checking and replacing the knowledge stored with a database.

One set of functions behind every front end (``ehr-magic data knowledge``, ``%ehr
knowledge``, the side panel's Data tab, through ``Session``):

- ``write_for_edit`` / ``export_knowledge`` write the knowledge an ``Database`` uses (stored in
  the database, else the packaged file of its schema) as a knowledge file to edit;
- ``prepare_import`` reads an edited file and checks it against the database: every
  table, column, join and lookup column it names exists, joined columns have the same
  kind of type, a declared key is unique and never empty, the clock is a time. Every
  problem is one sentence naming the table and column (``KnowledgeRefused.problems``);
- ``store`` then replaces the stored knowledge (and the clock) in one transaction: on a
  DuckDB file directly, on a server through the engine's publish path (atomic there);
- ``settle_marks`` and ``keep_confirmed`` keep who wrote what: a statement changed in
  an imported file becomes confirmed, and a re-draft keeps every confirmed statement.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from ehr_magic import files
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.knowledge import model as knowledge_files
from ehr_magic.text import closest, parse_time
from ehr_magic.knowledge.handle import Database
from ehr_magic.knowledge.model import CONFIRMED, TOP_STATEMENTS, Knowledge, TableInfo, join_target
from ehr_magic.engines import is_url, publish
from ehr_magic.engines.base import KNOWLEDGE_TABLE, META_TABLE, first_line
from ehr_magic.errors import DataSourceError, EhrMagicError, sentences

Latest = Callable[[str, str], Any]  # (table, column) -> its latest value


class KnowledgeRefused(EhrMagicError):
    """A knowledge file that cannot be stored; ``problems`` holds one sentence each."""

    def __init__(self, where: str, problems: Iterable[str]) -> None:
        self.where, self.problems = where, list(problems)
        if len(self.problems) == 1 and self.problems[0].startswith(f"Knowledge file {where} "):
            text = f"{self.problems[0]} Nothing was imported."  # it names the file already
        elif len(self.problems) == 1:
            text = f"Knowledge file {where}: {self.problems[0]} Nothing was imported."
        else:
            text = (f"Knowledge file {where} has {len(self.problems)} problems; nothing was imported:\n"
                    + "\n".join(f"- {problem}" for problem in self.problems))
        super().__init__(text)


@dataclass(frozen=True)
class Prepared:
    """A checked knowledge file, ready to be stored: its text and the clock it sets."""

    knowledge: Knowledge
    now: dt.datetime | None  # the dataset clock the file sets (None: unchanged)
    path: Path

    @property
    def text(self) -> str:
        return self.knowledge.to_yaml()


@dataclass(frozen=True)
class EditFile:
    path: Path
    written: bool  # False: the file was there with other text (edits in progress) and is kept

    def message(self, import_hint: str) -> str:
        if self.written:
            return f"Wrote {self.path}: edit it, then {import_hint}"
        return (f"Kept {self.path}, which differs from the stored knowledge (your edits?); edit it, then "
                f"{import_hint} To start again from the stored knowledge, delete it first.")


# -- writing a file to edit --------------------------------------------------------------------


def default_edit_path(ehr: Database, folder: str | os.PathLike[str] = ".") -> Path:
    """``<schema>.knowledge.yaml`` in ``folder`` (the notebook's folder for the kernel)."""
    return Path(folder) / f"{ehr.schema}.knowledge.yaml"


def write_for_edit(ehr: Database, out: str | os.PathLike[str] | None = None,
                   knowledge: Knowledge | None = None) -> EditFile:
    """Write ``knowledge`` (default: the knowledge of ``ehr``) to ``out`` (default
    ``default_edit_path``); a file already there with other text is kept, so a second Edit
    never loses edits."""
    path = Path(out).expanduser() if out else default_edit_path(ehr)
    text = (knowledge or knowledge_of(ehr)).to_yaml()
    if path.is_file():
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if path.read_text(encoding="utf-8") != text:
                return EditFile(path, written=False)
    files.write_text(path, text)
    return EditFile(path, written=True)


def knowledge_of(ehr: Database) -> Knowledge:
    if ehr.knowledge is None:
        raise EhrMagicError(f"{ehr.location} (schema {ehr.schema}) has no knowledge to export; "
                            "write one and import it.")
    return ehr.knowledge


# -- importing ---------------------------------------------------------------------------------


def prepare_import(ehr: Database, source: str | os.PathLike[str]) -> Prepared:
    """Read ``source`` and check it against the connected ``ehr``; raises ``KnowledgeRefused``
    with every problem. Statements changed from the stored knowledge become confirmed."""
    path = Path(source).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KnowledgeRefused(str(path), [f"it cannot be read ({first_line(exc)})."]) from None
    declared = _declared_schema(text)
    if declared is not None and declared != ehr.schema:
        raise KnowledgeRefused(str(path), [f"it describes schema {declared!r} but {ehr.location} has schema "
                                           f"{ehr.schema!r}; write 'schema: {ehr.schema}' in the file."])
    try:
        parsed = knowledge_files.parse(text, source=str(path), expected_schema=ehr.schema)
    except EhrMagicError as exc:
        raise KnowledgeRefused(str(path), [str(exc)]) from None
    parsed = parsed.aligned_to({name: ehr.columns(name) for name in ehr.tables()})
    # What the knowledge in use already says wrongly (a packaged file describes every version of a
    # data model, a sample may break its keys) is not the edited file's fault: only new problems count.
    inherited = set(problems(ehr.knowledge, ehr)) if ehr.knowledge is not None else set()
    found = [problem for problem in problems(parsed, ehr) if problem not in inherited]
    now = None
    attached = getattr(ehr, "attachment", None) is not None  # its clock is read from the knowledge on connect
    if parsed.clock and not any(p.startswith("The clock") for p in found):
        now = clock_time(parsed.clock, lambda t, c: ehr.sql(f"SELECT max({quote(c)}) FROM {quote(t)}").item())
        if is_url(ehr.path) and not attached and ehr.clock is not None and now is not None and now != ehr.now:
            found.append(f"The clock {parsed.clock!r} differs from the clock of the server's database "
                         f"({ehr.now:%Y-%m-%d %H:%M:%S}), which only a new load can change "
                         "(ehr-magic data load ... --now); keep the clock as it is.")
    if found:
        raise KnowledgeRefused(str(path), found)
    knowledge = settle_marks(parsed, ehr.knowledge)
    changed = now is not None and not attached and (ehr.clock is None or now != ehr.now)
    return Prepared(knowledge, now if changed else None, path)


def store(target: str | os.PathLike[str] | Path, prepared: Prepared) -> None:
    """Replace the stored knowledge of ``target`` (and its clock) in one transaction."""
    schema = prepared.knowledge.schema
    if is_url(target):
        _publish_knowledge(str(target), schema, prepared.text)
    else:
        _write_file(Path(target).expanduser(), schema, prepared.text, prepared.now)


def check_against(knowledge: Knowledge, ehr: Database, where: str) -> None:
    """Raise ``KnowledgeRefused`` unless ``knowledge`` fits the data of ``ehr``."""
    found = problems(knowledge, ehr)
    if found:
        raise KnowledgeRefused(where, found)


def problems(knowledge: Knowledge, ehr: Database) -> list[str]:
    """Every way ``knowledge`` contradicts the data of ``ehr``, one sentence each naming
    the table and the column: unknown names (with "did you mean"), joins between columns
    of different kinds, a key that is not unique, a clock that is not a time."""
    tables = {name: ehr.columns(name) for name in ehr.tables()}
    knowledge = knowledge.aligned_to(tables)  # names match case-insensitively
    found: list[str] = []
    for info in knowledge.tables.values():
        if info.name not in tables:
            found.append(f"The file describes table {info.name!r}, which is not in the database"
                         f"{_hint(info.name, tables)}.")
            continue
        columns = tables[info.name]
        for column in dict.fromkeys((*info.columns, *info.vocabulary)):
            if column not in columns:
                found.append(f"The description of {info.name} names column {info.name}.{column}, which {info.name} "
                             f"does not have{_hint(column, columns)}.")
        found += _join_problems(info, tables)
        if info.key and info.key in columns:
            found += _key_problems(ehr, info.name, info.key)
    for entry in knowledge.clock:
        found += _clock_problems(entry, tables, ehr)
    return found


def _join_problems(info: TableInfo, tables: dict[str, dict[str, str]]) -> list[str]:
    found = []
    for join in info.joins:
        target = join.split()[0]
        if target not in tables:
            found.append(f"Join {join!r} of {info.name} names table {target!r}, which is not in the "
                         f"database{_hint(target, tables)}.")
            continue
        try:
            pairs = join_pairs(join, info.name)
        except ValueError:
            found.append(f"The condition of join {join!r} of {info.name} is not SQL; write it like "
                         "'patients ON encounters.patient = patients.id'.")
            continue
        for pair in pairs:
            sides = []
            for table, column in pair:
                table = next((name for name in (info.name, target) if name.lower() == table.lower()), table)
                known = tables.get(table, {})
                spelled = {name.lower(): name for name in known}  # names match case-insensitively
                column = spelled.get(column.lower(), column)
                if table not in (info.name, target):
                    found.append(f"Join {join!r} of {info.name} names table {table!r}, which the join does not "
                                 f"involve{_hint(table, [info.name, target])}.")
                elif column not in known:
                    found.append(f"Join {join!r} of {info.name} names column '{column}' of {table}, which {table} "
                                 f"does not have{_hint(column, known)}.")
                else:
                    sides.append((f"{table}.{column}", known[column]))
            if len(sides) == 2 and _kind(sides[0][1]) != _kind(sides[1][1]):
                (left, left_type), (right, right_type) = sides
                found.append(f"Join {join!r} of {info.name} compares {left} ({left_type}) with {right} "
                             f"({right_type}), columns of different types whose values never match; join "
                             "columns of the same type.")
    return found


def join_pairs(join: str, table: str) -> list[tuple[tuple[str, str], ...]]:
    """The columns a join compares, as ``((table, column), (table, column))`` pairs; a bare
    column (``patients ON subject_id``) pairs that column of both tables. A column named
    without its table belongs to ``table``. Raises ``ValueError`` if the condition is not SQL."""
    target = join_target(join)
    parts = join.split(None, 2)
    if target is None or len(parts) < 3:
        raise ValueError(join)
    try:
        tree = sqlglot.parse_one(f"SELECT 1 FROM {table} JOIN {target} ON {parts[2]}", read="duckdb")
    except sqlglot.errors.SqlglotError:
        raise ValueError(join) from None
    joined = tree.find(exp.Join)
    condition = joined.args.get("on") if joined is not None else None
    if isinstance(condition, exp.Column):
        return [((table, condition.name.lower()), (target, condition.name.lower()))]
    pairs: list[tuple[tuple[str, str], ...]] = []
    for node in tree.find_all(exp.Column):
        if isinstance(node.parent, exp.EQ):
            continue
        pairs.append(((node.table.lower() or table, node.name.lower()),))
    for eq in tree.find_all(exp.EQ):
        sides = [eq.left, eq.right]
        named = tuple((side.table.lower() or table, side.name.lower())
                      for side in sides if isinstance(side, exp.Column))
        if named:
            pairs.append(named)
    return pairs


def _kind(dtype: str) -> str:
    """A column type's kind: values of two columns can match only within one kind."""
    lowered = dtype.lower()
    for kind, words in (("time", ("date", "time")), ("text", ("char", "text", "string", "uuid")),
                        ("number", ("int", "decimal", "numeric", "float", "double", "real")),
                        ("boolean", ("bool",))):
        if any(word in lowered for word in words):
            return kind
    return lowered


def _key_problems(ehr: Database, table: str, key: str) -> list[str]:
    repeated, empty = ehr.sql(f"SELECT count({quote(key)}) - count(DISTINCT {quote(key)}) AS repeated, "
                              f"count(*) - count({quote(key)}) AS empty FROM {quote(table)}").row(0)
    if not repeated and not empty:
        return []
    what = [f"{repeated:,} rows repeat a value" if repeated else "", f"{empty:,} rows have none" if empty else ""]
    return [f"The key {table}.{key} does not identify each row of {table} ({' and '.join(w for w in what if w)}); "
            "name a unique, never empty column or remove the key."]


def _clock_problems(clock: str, tables: dict[str, dict[str, str]], ehr: Database) -> list[str]:
    if getattr(ehr, "time_model", "calendar") == "offset":
        return [f"The clock {clock!r} cannot be set: {ehr.dataset} has no dates (times are offsets), so remove "
                "the clock from the file."]
    column = _clock_column(clock)
    if column is None:
        try:
            parse_time(clock)
        except ValueError:
            return [f"The clock {clock!r} is not a time; write it like '2100-12-31 23:59:00', or name a date or "
                    "time column such as encounters.start."]
        return []
    table, name = column
    if table not in tables:
        return [f"The clock {clock!r} names table {table!r}, which is not in the database{_hint(table, tables)}."]
    if name not in tables[table]:
        return [f"The clock {clock!r} names column {table}.{name}, which {table} does not "
                f"have{_hint(name, tables[table])}."]
    if _kind(tables[table][name]) != "time":
        return [f"The clock {clock!r} names column {table}.{name} of type {tables[table][name]}, which is not "
                "a time; name a date or time column, or write the time itself."]
    return []


def _clock_column(clock: str) -> tuple[str, str] | None:
    table, dot, column = clock.partition(".")
    if dot and table.isidentifier() and column.isidentifier():
        return table, column
    return None


def clock_time(clock: str | Iterable[str], latest: Latest) -> dt.datetime | None:
    """The time a (checked) clock statement sets: the first of its entries that gives one, an
    entry being a time written or a ``table.column`` whose latest value is the time (None
    when every column it names is empty)."""
    for entry in ((clock,) if isinstance(clock, str) else clock):
        column = _clock_column(entry)
        value = latest(*column) if column else entry
        if value is not None:
            return parse_time(value)
    return None


def _hint(name: str, choices: Iterable[str]) -> str:
    close = closest(name, choices)
    return f" (did you mean {close!r}?)" if close else ""


def _declared_schema(text: str) -> str | None:
    import yaml

    with contextlib.suppress(yaml.YAMLError):
        data = yaml.safe_load(text)
        if isinstance(data, dict) and isinstance(data.get("schema"), str):
            return data["schema"]
    return None


# -- who wrote what ----------------------------------------------------------------------------


def statements(info: TableInfo) -> dict[str, Any]:
    """Statement name -> what it says, for one table (the names ``confirmed`` lists)."""
    said: dict[str, Any] = {"meaning": (info.row.strip(), info.description.strip()), "key": info.key,
                            "joins": info.joins, "lookup": info.vocabulary}
    said.update({f"columns.{column}": text for column, text in info.columns.items()})
    return said


def settle_marks(imported: Knowledge, stored: Knowledge | None) -> Knowledge:
    """``imported`` with every statement that differs from ``stored`` marked confirmed: a
    person wrote it. A file that is not marked drafted was written by a person throughout."""
    if not imported.drafted or stored is None:
        return imported
    top = list(imported.confirmed)
    if imported.clock != stored.clock:
        top.append("clock")
    if (imported.title, imported.introduction, imported.conventions) != (
            stored.title, stored.introduction, stored.conventions):
        top.append("introduction")
    tables = {}
    for name, info in imported.tables.items():
        before = stored.tables.get(name)
        earlier = statements(before) if before is not None else {}
        changed = [s for s, said in statements(info).items() if s not in earlier or earlier[s] != said]
        tables[name] = dataclasses.replace(info, confirmed=tuple(dict.fromkeys((*info.confirmed, *changed))))
    return dataclasses.replace(imported, tables=tables, confirmed=tuple(dict.fromkeys(top)))


def with_drafted_tables(base: Knowledge, fill: Knowledge | None) -> Knowledge:
    """``base`` (a packaged or imported file) with the drafted tables of ``fill`` added; every
    statement of a file people wrote counts as confirmed, the added ones as drafted."""
    if fill is None or not fill.tables:
        return base
    tables = {name: info if base.drafted else dataclasses.replace(info, confirmed=tuple(statements(info)))
              for name, info in base.tables.items()}
    tables.update({name: info for name, info in fill.tables.items() if name not in tables})
    confirmed = base.confirmed if base.drafted else TOP_STATEMENTS
    return dataclasses.replace(base, tables=tables, drafted=True, confirmed=tuple(confirmed))


def keep_confirmed(draft: Knowledge, previous: Knowledge | None, *, keep_clock: bool = True) -> Knowledge:
    """A re-draft that keeps what a person wrote: every statement ``previous`` marks confirmed
    replaces the drafted one, where it still fits the new data (its columns and join targets
    exist); everything else is the new draft."""
    if previous is None:
        return draft
    tables = {}
    for name, info in draft.tables.items():
        before = previous.tables.get(name)
        if before is None:
            tables[name] = info
            continue
        kept: list[str] = []
        for statement in statements(before):
            if previous.mark(statement, name) == CONFIRMED:
                updated = _with_statement(info, before, statement, draft.tables)
                if updated is not None:
                    info = updated
                    kept.append(statement)
        tables[name] = dataclasses.replace(info, confirmed=tuple(kept))
    top = [s for s in ("introduction", "clock") if previous.mark(s) == CONFIRMED and (s != "clock" or keep_clock)]
    result = dataclasses.replace(draft, tables=tables, confirmed=tuple(top))
    if "introduction" in top:
        result = dataclasses.replace(result, title=previous.title, introduction=previous.introduction,
                                     conventions=previous.conventions)
    if "clock" in top and previous.clock:
        result = dataclasses.replace(result, clock=previous.clock)
    return dataclasses.replace(result, drafted=True)


def _with_statement(info: TableInfo, before: TableInfo, statement: str,
                    tables: dict[str, TableInfo]) -> TableInfo | None:
    """``info`` saying what ``before`` says in ``statement``; None if that no longer fits."""
    if statement == "meaning":
        return dataclasses.replace(info, row=before.row, description=before.description)
    if statement == "key":
        return dataclasses.replace(info, key=before.key) if before.key in (None, *info.columns) else None
    if statement == "joins":
        joins = tuple(j for j in before.joins if join_target(j) in tables)
        return dataclasses.replace(info, joins=joins)
    if statement == "lookup":
        return dataclasses.replace(info, vocabulary=tuple(c for c in before.vocabulary if c in info.columns))
    column = statement.removeprefix("columns.")
    if column in info.columns:
        return dataclasses.replace(info, columns={**info.columns, column: before.columns[column]})
    return None


def write_knowledge(con: duckdb.DuckDBPyConnection, schema: str, text: str) -> None:
    """Store a knowledge file's text in the database, replacing any stored before.

    ``EHR.knowledge`` prefers it to a packaged file; publishing to a server copies it
    with the data tables, like ``_ehr_meta``.
    """
    con.execute(f"CREATE OR REPLACE TABLE {KNOWLEDGE_TABLE} (schema VARCHAR PRIMARY KEY, yaml VARCHAR NOT NULL)")
    con.execute(f"INSERT INTO {KNOWLEDGE_TABLE} VALUES (?, ?)", [schema, text])


# -- storing -----------------------------------------------------------------------------------


def _write_file(path: Path, schema: str, text: str, now: dt.datetime | None) -> None:
    try:
        con = duckdb.connect(str(path))
    except duckdb.Error as exc:
        raise DataSourceError(f"Cannot open {path} for writing: {sentences(first_line(exc))} Close the notebooks "
                              "and programs that have it open, then import again.") from None
    try:
        con.execute("BEGIN TRANSACTION")
        write_knowledge(con, schema, text)
        if now is not None:
            con.execute(f"UPDATE {META_TABLE} SET value = ? WHERE key = 'now'", [now.strftime("%Y-%m-%d %H:%M:%S")])
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
    except duckdb.Error as exc:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise DataSourceError(f"Writing the knowledge into {path} failed, nothing was changed: "
                              f"{first_line(exc)}") from None
    finally:
        con.close()


def _publish_knowledge(target: str, schema: str, text: str) -> None:
    """Replace the server's knowledge table with the engine's publish path (atomic there)."""
    with tempfile.TemporaryDirectory(prefix="ehr-magic-knowledge-") as folder:
        path = Path(folder) / "knowledge.duckdb"
        con = duckdb.connect(str(path))
        try:
            write_knowledge(con, schema, text)
        finally:
            con.close()
        publish(path, target)
