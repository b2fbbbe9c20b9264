"""Dataset knowledge: human-written descriptions of each schema's tables and columns.

Following EHRAgent, the model first names the tables, columns, codes and joins a
question needs, reading short descriptions of the tables (``Knowledge.overview``) and
then the columns of the tables it picked (``Knowledge.detail``), together with the
schema's conventions (``Knowledge.guide``): how time works, where vital signs live,
how values are spelled.

The descriptions are package data, one YAML file per schema id in
``ehr_magic/knowledge/schemas/<schema>.yaml``::

    schema: mimic_iv                # must equal the file name
    version: 1
    title: ...
    introduction: |
      A few sentences on the dataset.
    conventions:                    # optional list of short rules
      - ...
    tables:
      admissions:
        module: hosp                # optional
        row: One row per hospital admission.
        description: ...            # optional
        columns: {subject_id: ..., hadm_id: ...}
        key: hadm_id                             # optional; the column that identifies a row
        joins: [patients ON subject_id]          # optional; "<table> ON <condition>"
        vocabulary: [admission_type]             # optional; columns worth a value lookup
        confirmed: [meaning, joins]              # optional; see "Who wrote what" below
        by_hierarchy: true                       # optional; see "Hierarchies" below
        derived_from: labevents                  # optional; a table built from another's rows

Users can describe their own schema, or replace a packaged description, by putting
``<schema>.yaml`` in a directory and passing it: ``load("mimic_iv", extra_dirs=[dir])``.
Directories are searched in order and the first file found replaces the packaged one
entirely (there is no merging). Every file is validated when loaded; a malformed one
raises ``EhrMagicError`` naming the file and the problem.

Who wrote what. Knowledge drafted from the data declares ``drafted: true``; each of its
statements is then drafted unless the table (or the top level, for the clock and the
introduction) lists it under ``confirmed``: ``meaning`` (row and description), ``key``,
``joins``, ``lookup`` (the vocabulary) and ``columns.<name>``. A file without
``drafted: true`` (the packaged ones) was written by people throughout.

The clock. ``clock`` (top level, optional) says where the dataset's current time comes
from: a time (``2019-05-25``), a ``table.column`` whose latest value is the time, or a list
of these tried in order, the first that gives a time winning (a data model's own statement
first, a fallback after it)::

    clock: [cdm_source.source_release_date, observation_period.observation_period_end_date]

Table and column names in a knowledge file match the database's case-insensitively.

Hierarchies. ``hierarchy`` (top level, optional) names the table that relates each code to every code
below it, and its two columns (OMOP: ``{table: concept_ancestor, broader: ancestor_concept_id,
narrower: descendant_concept_id}``): questions asking for "any kind of X" or "any X product" need it.
A table marked ``by_hierarchy: true`` holds codes that questions usually name by a broader one (OMOP's
drug_exposure records products, asked about by ingredient), so the hierarchy table comes with it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import importlib.resources
import os
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from ehr_magic.errors import EhrMagicError
from ehr_magic.identifiers import shown_identifier
from ehr_magic.text import closest

__all__ = ["Hierarchy", "Knowledge", "TableInfo", "available", "load", "parse"]

_SUFFIXES = (".yaml", ".yml")
_TOP_REQUIRED = ("schema", "version", "title", "introduction", "tables")
_TOP_ALLOWED = frozenset((*_TOP_REQUIRED, "conventions", "drafted", "clock", "confirmed", "hierarchy"))
_TABLE_REQUIRED = ("row", "columns")
_TABLE_ALLOWED = frozenset((*_TABLE_REQUIRED, "module", "description", "key", "joins", "vocabulary", "confirmed",
                            "by_hierarchy", "derived_from"))
# The statements a person can confirm (see "Who wrote what" above); columns.<name> as well.
TABLE_STATEMENTS = ("meaning", "key", "joins", "lookup")
TOP_STATEMENTS = ("introduction", "clock")
DRAFTED, CONFIRMED = "drafted", "confirmed"
_JOIN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s+ON\s+\S")

ExtraDirs = Iterable[str | os.PathLike[str]] | None


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# "<table> ON <column>", or "<table> ON a.<column> = b.<column>" (the same column name on both sides)
_SAME_NAME = re.compile(rf"^\s*({_NAME})\s+ON\s+(?:({_NAME})|(?:({_NAME})\.)?({_NAME})\s*=\s*(?:({_NAME})\.)?\4)\s*$")


_PLACE = "<table>"  # stands for each of the tables a join template is said for


def grouped_joins(table: str, joins: Iterable[str]) -> str:
    """The joins of ``table`` as prompt text, those on a column of the same name on both sides
    said once for all their tables (``icustays, labevents ON hadm_id``; a wide table's joins are
    mostly these), in order; ``x ON t.c = x.c`` is said as ``x ON c``, as the packaged files write it.
    Joins that differ only by the joined table's name, a row of one table pointing at rows of
    several (``x ON event_id = x.row_id AND event_type = 'x'``), are said once with ``<table>``
    standing for each of them."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (kind, key) -> its (table, join) pairs
    for join in joins:
        match = _SAME_NAME.match(join)
        target = match.group(1) if match else ""
        sides = {side.lower() for side in (match.group(3), match.group(5)) if side} if match else set()
        if match and sides <= {table.lower(), target.lower()} and len(sides) != 1:
            groups.setdefault(("same", f" ON {match.group(2) or match.group(4)}"), []).append((target, join))
            continue
        whole = _WHOLE.match(join)
        template = re.sub(rf"\b{re.escape(whole.group(1))}\b", _PLACE, whole.group(2)) if whole else ""
        group = ("template", f" ON {template}") if _PLACE in template else ("whole", join)
        groups.setdefault(group, []).append((whole.group(1) if whole else "", join))
    said = []
    for (kind, condition), pairs in groups.items():
        if kind == "whole" or (kind == "template" and len(pairs) == 1):
            said += [join for _, join in pairs]
        else:
            said.append(", ".join(target for target, _ in pairs) + condition)
    return "; ".join(said)


_WHOLE = re.compile(rf"^\s*({_NAME})\s+ON\s+(.+?)\s*$")


# "<table> ON <column>", or "<table> ON [a.]<column> = [b.]<key>": a join on one pair of columns
_ONE_PAIR = re.compile(rf"^\s*({_NAME})\s+ON\s+(?:({_NAME})|"
                       rf"(?:({_NAME})\.)?({_NAME})\s*=\s*(?:({_NAME})\.)?({_NAME}))\s*$")

_FURTHER_CONDITION = re.compile(r"\s+AND\s+", re.IGNORECASE)


def _join_column(table: str, join: str) -> tuple[str, str] | None:
    """``(column of table, key of the target)`` of a join of ``table`` on one pair of columns
    (``x ON c``, ``x ON t.c = x.k``); None for any other condition."""
    match = _ONE_PAIR.match(join)
    if match is None:
        return None
    target, same, left_table, left, right_table, right = match.groups()
    if same:
        return same, same
    sides = (left_table or "").lower(), (right_table or "").lower()
    if sides[1] == target.lower() and sides[0] in ("", table.lower()):
        return left, right
    if sides[0] == target.lower() and sides[1] in ("", table.lower()):
        return right, left
    if not any(sides) and left.lower() == right.lower():
        return left, right
    return None


def join_target(join: str) -> str | None:
    """The table a join (``"<table> ON <condition>"``) joins to; None if it does not read so."""
    match = _JOIN.match(join)
    return match.group(1) if match else None


_QUOTED = re.compile(r"'(?:[^']|'')*'")
_SOME_OF_MORE = re.compile(r"\b(?:e\.g\.|for example|such as|like|including|among|and \d[\d,]* more)|\.\.\.",
                           re.IGNORECASE)
_COUNTED = re.compile(r"\b(\d+) values \(")


def quotes_every_value(meaning: str) -> bool:
    """Whether a column's meaning quotes every value the column holds (``'a', 'b' or 'c'``, or
    a drafted ``3 values ('a', 'b', 'c')``), so that looking its values up would find nothing
    new; not when it quotes some of them (``e.g.``, ``and 2 more``)."""
    quoted = _QUOTED.findall(meaning)
    if not quoted or _SOME_OF_MORE.search(meaning):
        return False
    counted = _COUNTED.search(meaning)
    if counted:
        return int(counted.group(1)) == len(quoted)
    return "' or '" in meaning


@dataclass(frozen=True)
class TableInfo:
    """What one table holds: its row, a description, its columns, joins and vocabularies."""

    name: str
    module: str | None
    row: str
    description: str
    columns: dict[str, str]
    joins: tuple[str, ...] = ()
    vocabulary: tuple[str, ...] = ()
    key: str | None = None
    confirmed: tuple[str, ...] = ()  # statements a person wrote or confirmed (only read when drafted)
    by_hierarchy: bool = False  # its codes are usually asked for by a broader one (see "Hierarchies")
    derived_from: str | None = None  # the table whose rows it summarises (OMOP's condition_era: condition_occurrence)

    @property
    def join_targets(self) -> tuple[str, ...]:
        """The tables named by ``joins``, in order, without repeats."""
        targets: list[str] = []
        for join in self.joins:
            match = _JOIN.match(join)
            if match and match.group(1) not in targets:
                targets.append(match.group(1))
        return tuple(targets)

    def child_tables(self, row_numbers: Collection[str] = ()) -> tuple[str, ...]:
        """The tables its joins name on its own key, or on one of ``row_numbers`` (the columns
        every table has, such as row_id): each of their rows belongs to one of its rows (a visit's
        parts, a note's extracted terms, an event's price), so a question about it seldom needs
        them. A join's first pair of columns says which side holds the reference; a condition
        after it (``AND cost.event_type = 'labevents'``) only picks the rows."""
        own = {c.lower() for c in (self.key, *row_numbers) if c}
        found: list[str] = []
        for join in self.joins:
            pair, target = _join_column(self.name, _FURTHER_CONDITION.split(join)[0]), join_target(join)
            if pair is not None and target is not None and pair[0].lower() in own and target not in found:
                found.append(target)
        return tuple(found)

    def summary(self) -> str:
        """One line: ``name: row description``."""
        return f"{self.name}: {_join_sentences(self.row, self.description)}"

    def brief(self, stated: Collection[str] = (), *, columns: bool = True) -> str:
        """One line: what a row is, the column names (unless ``columns`` is false: said elsewhere)
        and the joins (no column meanings). Joins to the tables in ``stated`` are left out: those
        tables' own text, earlier in the prompt, says them."""
        joins = self._joins_not_in(stated)
        said = f" Joins: {grouped_joins(self.name, joins)}." if joins else ""
        listed = f" Columns: {', '.join(map(shown_identifier, self.columns))}." if columns else ""
        return f"- {self.name}: {self.row.strip()}{listed}{said}"

    def _joins_not_in(self, stated: Collection[str]) -> list[str]:
        return [j for j in self.joins if join_target(j) not in stated]

    def said_by_column(self, join: str) -> bool:
        """Whether the meaning of the column a join is on already says it: it names the target
        table (``stay_id: ICU visit; joins to icustays``) and, when the target's key is named
        otherwise, that key (``refers to person.patientkey``)."""
        pair = _join_column(self.name, join)
        target = join_target(join)
        if pair is None or target is None:
            return False
        column, key = pair
        text = next((t for c, t in self.columns.items() if c.lower() == column.lower()), "")
        said = target if key.lower() == column.lower() else f"{target}.{key}"
        return re.search(rf"(?<![\w.]){re.escape(said)}(?![\w])", text, re.IGNORECASE) is not None

    def detail(self, stated: Collection[str] = (), said: Mapping[str, str] | None = None) -> str:
        """Columns, joins and lookup columns of this table, as compact prompt text (joins to the
        tables in ``stated`` left out, as in ``brief``). What is said elsewhere is not said again:
        a column whose meaning is the one ``said`` gives it (a row number every table has, said
        once by the index), a join on a column whose meaning names its table, a lookup column
        sent to ehr.lookup or whose meaning quotes every value it holds."""
        module = f" [{self.module}]" if self.module else ""
        lines = [f"## {self.name}{module}: {_join_sentences(self.row, self.description)}"]
        lines += [f"- {shown_identifier(column)}: {text}" for column, text in self.columns.items()
                  if not said or said.get(column) != text]
        joins = [j for j in self._joins_not_in(stated) if not self.said_by_column(j)]
        if joins:
            lines.append("joins: " + grouped_joins(self.name, joins))
        looked_up = [c for c in self.vocabulary if "ehr.lookup" not in self.columns.get(c, "")
                     and not quotes_every_value(self.columns.get(c, ""))]
        if looked_up:
            lines.append("look up values of: " + ", ".join(map(shown_identifier, looked_up)))
        return "\n".join(lines)


@dataclass(frozen=True)
class Hierarchy:
    """The table relating each code to every code below it: a row holds a ``broader`` code and a
    ``narrower`` one (see "Hierarchies")."""

    table: str
    broader: str
    narrower: str


@dataclass(frozen=True)
class Knowledge:
    """Everything written about one schema; ``load(schema)`` returns it."""

    schema: str
    version: int
    title: str
    introduction: str
    conventions: tuple[str, ...]
    tables: dict[str, TableInfo]
    source: str = field(default="", compare=False)
    absent: tuple[str, ...] = ()  # described tables this database does not have (see restricted_to)
    drafted: bool = False  # drafted from the data: statements not confirmed are marked drafted
    # Where the dataset's current time comes from, tried in order: times, or table.column whose
    # latest value is the time (a single text given here is read as a one-entry list).
    clock: tuple[str, ...] = ()
    confirmed: tuple[str, ...] = ()  # top-level statements a person wrote or confirmed
    hierarchy: Hierarchy | None = None  # the table relating each code to those below it (see "Hierarchies")

    def __post_init__(self) -> None:
        if self.clock is None or isinstance(self.clock, str):
            object.__setattr__(self, "clock", (self.clock,) if self.clock else ())
        else:
            object.__setattr__(self, "clock", tuple(self.clock))

    def mark(self, statement: str, table: str | None = None) -> str:
        """``"drafted"`` or ``"confirmed"`` (written or confirmed by a person) for one statement:
        a top-level one (``clock``, ``introduction``) or, with ``table``, one of that table's."""
        if not self.drafted:
            return CONFIRMED
        confirmed = self.tables[table].confirmed if table is not None else self.confirmed
        return CONFIRMED if statement in confirmed else DRAFTED

    def restricted_to(self, present: Iterable[str],
                      columns: Mapping[str, Iterable[str]] | None = None) -> Knowledge:
        """A copy describing only the tables in ``present`` (case-insensitive): the others
        move to ``absent`` and joins to them are dropped, so the model is never told of a
        table that is not there. With ``columns`` (table -> its columns), a kept table's
        described columns that the database lacks are dropped too: a file describing two
        versions of a data model (OMOP 5.3 and 5.4) names only the version's own columns."""
        here = {str(name).lower() for name in present}
        had = {str(t).lower(): {str(c).lower() for c in cs} for t, cs in (columns or {}).items()}
        kept = {
            name: self._columns_kept(dataclasses.replace(info, joins=tuple(
                join for join in info.joins if (m := _JOIN.match(join)) is None or m.group(1).lower() in here)),
                had.get(name.lower()))
            for name, info in self.tables.items() if name.lower() in here
        }
        absent = tuple(dict.fromkeys((*self.absent, *(name for name in self.tables if name.lower() not in here))))
        hierarchy = self.hierarchy if self.hierarchy and self.hierarchy.table in kept else None
        return dataclasses.replace(self, tables=kept, absent=absent, hierarchy=hierarchy)

    @staticmethod
    def _columns_kept(info: TableInfo, existing: set[str] | None) -> TableInfo:
        """``info`` without the columns the table lacks (all kept when its columns are unknown)."""
        if not existing:
            return info
        def has(column: str) -> bool:
            return column.lower() in existing
        return dataclasses.replace(
            info, columns={c: text for c, text in info.columns.items() if has(c)},
            vocabulary=tuple(c for c in info.vocabulary if has(c)),
            key=info.key if info.key is None or has(info.key) else None,
            confirmed=tuple(s for s in info.confirmed if not s.startswith("columns.") or has(s[len("columns."):])))

    def aligned_to(self, columns: Mapping[str, Mapping[str, str]]) -> Knowledge:
        """A copy naming tables and columns as the database spells them, matched case-insensitively
        (``columns``: table -> its columns): a file written in lower case describes a database
        that kept upper-case names, and the model is shown the names the SQL will meet."""
        table_names = {str(t).lower(): t for t in columns}
        tables = {}
        for name, info in self.tables.items():
            actual = table_names.get(name.lower(), name)
            spelled = {str(c).lower(): c for c in columns.get(actual, {})}

            def column(name: str, spelled: dict[str, str] = spelled) -> str:
                return spelled.get(name.lower(), name)

            tables[actual] = dataclasses.replace(
                info, name=actual, columns={column(c): text for c, text in info.columns.items()},
                vocabulary=tuple(column(c) for c in info.vocabulary), key=column(info.key) if info.key else None,
                confirmed=tuple(f"columns.{column(s[len('columns.'):])}" if s.startswith("columns.") else s
                                for s in info.confirmed))
        clock = []
        for entry in self.clock:
            table, dot, name = entry.partition(".")
            clock_table = table_names.get(table.lower())
            if dot and clock_table is not None:
                spelled = {str(c).lower(): c for c in columns[clock_table]}
                entry = f"{clock_table}.{spelled.get(name.lower(), name)}"
            clock.append(entry)
        return dataclasses.replace(self, tables=tables, clock=tuple(clock))

    def table(self, name: str) -> TableInfo:
        """The description of one table (exact name, else case-insensitive)."""
        info = self.tables.get(name) or self.tables.get(str(name).lower())
        if info is not None:
            return info
        if str(name).lower() in {t.lower() for t in self.absent}:
            raise EhrMagicError(f"Table {name} is not in this database, so questions that need it cannot be answered.")
        close = closest(str(name).lower(), self.tables)
        hint = f" Did you mean {close!r}?" if close else ""
        raise EhrMagicError(
            f"No table {name!r} is described for schema {self.schema}.{hint} "
            f"Described tables: {', '.join(self.tables)}."
        )

    def overview(self) -> str:
        """One line per table, ``name: row description``: the cacheable prompt prefix."""
        lines = [f"Tables of {self.title} (schema {self.schema}):"]
        lines += [info.summary() for info in self.tables.values()]
        return "\n".join(lines)

    def guide(self) -> str:
        """The introduction and the conventions, as compact prompt text."""
        text = f"{self.title}\n{self.introduction.strip()}"
        if self.absent:
            text += "\n" + self.absent_note()
        if self.conventions:
            text += "\nConventions:\n" + "\n".join(f"- {rule}" for rule in self.conventions)
        return text

    def absent_note(self) -> str:
        """One line naming the described tables this database lacks ("" when none)."""
        if not self.absent:
            return ""
        return f"Not in this database: {', '.join(self.absent)}; questions that need them cannot be answered."

    def detail(self, tables: Iterable[str], said: Mapping[str, str] | None = None) -> str:
        """Columns and joins of the named tables (in the order given, once each); a join is said
        once, by the first of its two tables, or by neither when the other's column names it
        (``itemid: ...; joins to d_items``); a column meaning ``said`` elsewhere is left out."""
        chosen = self._said_once(tables)
        shown = [info for info, _ in chosen]

        def said_by_the_other(info: TableInfo) -> set[str]:
            return {other.name for other in shown if other is not info
                    and any(join_target(j) == info.name and other.said_by_column(j) for j in other.joins)}

        return "\n\n".join(info.detail(stated | said_by_the_other(info), said) for info, stated in chosen)

    def common_meanings(self, columns: Iterable[str]) -> dict[str, str]:
        """For each of ``columns`` (those every table has), the meaning most of the described
        tables give it word for word (a row number), when at least half of them do (worked out
        once per set of columns: every question's table descriptions ask, and each answer reads
        every table, thousands in a warehouse)."""
        asked = tuple(columns)
        if asked not in self._common_meanings:
            self._common_meanings[asked] = self._count_common_meanings(asked)
        return dict(self._common_meanings[asked])

    @functools.cached_property
    def _common_meanings(self) -> dict[tuple[str, ...], dict[str, str]]:
        return {}  # a cache beside the frozen fields (cached_property writes the instance's __dict__)

    def _count_common_meanings(self, columns: tuple[str, ...]) -> dict[str, str]:
        found = {}
        for column in columns:
            texts = Counter(info.columns[column] for info in self.tables.values() if column in info.columns)
            if texts:
                text, count = texts.most_common(1)[0]
                if 2 * count >= len(self.tables):
                    found[column] = text
        return found

    def brief(self, tables: Iterable[str], described: Iterable[str] = (), *, columns: bool = True) -> str:
        """One line per named table: row, column names (unless ``columns`` is false) and joins (in
        the order given, once each). A join is said once: a line leaves out its joins to the
        ``described`` tables (described in full before these lines) and to the tables of earlier
        lines, when that table's joins name it."""
        return "\n".join(info.brief(stated, columns=columns) for info, stated in self._said_once(tables, described))

    def _said_once(self, tables: Iterable[str], before: Iterable[str] = ()) -> list[tuple[TableInfo, set[str]]]:
        """Each named table with the tables before it (``before`` first) whose joins name it."""
        earlier = [self.table(name) for name in before]
        found = []
        for info in self._each(tables):
            found.append((info, {e.name for e in earlier if info.name in e.join_targets}))
            earlier.append(info)
        return found

    def _each(self, tables: Iterable[str]) -> list[TableInfo]:
        chosen: dict[str, TableInfo] = {}
        for name in tables:
            info = self.table(name)
            chosen.setdefault(info.name, info)
        return list(chosen.values())

    def vocabulary_columns(self) -> list[tuple[str, str]]:
        """``(table, column)`` pairs whose distinct values are worth looking up."""
        return [(info.name, column) for info in self.tables.values() for column in info.vocabulary]

    def to_yaml(self) -> str:
        """This knowledge as a knowledge file (``parse(k.to_yaml(), ...) == k``)."""
        tables: dict[str, dict[str, Any]] = {}
        for info in self.tables.values():
            body: dict[str, Any] = {} if info.module is None else {"module": info.module}
            body["row"] = info.row
            if info.description:
                body["description"] = info.description
            if info.key:
                body["key"] = info.key
            body["columns"] = dict(info.columns)
            if info.joins:
                body["joins"] = list(info.joins)
            if info.vocabulary:
                body["vocabulary"] = list(info.vocabulary)
            if info.by_hierarchy:
                body["by_hierarchy"] = True
            if info.derived_from:
                body["derived_from"] = info.derived_from
            if self.drafted:
                body["confirmed"] = list(info.confirmed)
            tables[info.name] = body
        data: dict[str, Any] = {"schema": self.schema, "version": self.version, "title": self.title,
                                "introduction": self.introduction}
        if self.drafted:
            data["drafted"] = True
            data["confirmed"] = list(self.confirmed)
        if self.clock:
            data["clock"] = self.clock[0] if len(self.clock) == 1 else list(self.clock)
        if self.hierarchy:
            data["hierarchy"] = dataclasses.asdict(self.hierarchy)
        if self.conventions:
            data["conventions"] = list(self.conventions)
        data["tables"] = tables
        return yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=110)


def load(schema: str, extra_dirs: ExtraDirs = None) -> Knowledge:
    """The knowledge of ``schema``, from the first of ``extra_dirs`` holding
    ``<schema>.yaml`` (or ``.yml``), else from the packaged file. Parsed files are cached."""
    for directory in _dirs(extra_dirs):
        for suffix in _SUFFIXES:
            path = directory / f"{schema}{suffix}"
            if path.is_file():
                resolved = path.resolve()
                return _load_file(str(resolved), resolved.stat().st_mtime_ns)
    if schema in _packaged():
        return _load_packaged(schema)
    known = ", ".join(available(extra_dirs)) or "none"
    raise EhrMagicError(
        f"No knowledge file for schema {schema!r}; known: {known}. "
        f"To describe it, write {schema}.yaml (see ehr_magic/knowledge/schemas/ for examples) "
        "and pass its directory as an extra knowledge directory."
    )


def available(extra_dirs: ExtraDirs = None) -> list[str]:
    """Schema ids with a knowledge file: packaged ones plus those in ``extra_dirs``."""
    names = set(_packaged())
    for directory in _dirs(extra_dirs):
        names.update(path.stem for path in directory.iterdir() if path.suffix in _SUFFIXES and path.is_file())
    return sorted(names)


# -- reading ---------------------------------------------------------------------------------


def _schemas_dir() -> Traversable:
    return importlib.resources.files("ehr_magic.knowledge").joinpath("schemas")


@functools.cache
def _packaged() -> dict[str, str]:
    """Packaged schema id -> file name."""
    found: dict[str, str] = {}
    for entry in _schemas_dir().iterdir():
        name = entry.name
        for suffix in _SUFFIXES:
            if name.endswith(suffix) and entry.is_file():
                found[name[: -len(suffix)]] = name
    return found


@functools.cache
def _load_packaged(schema: str) -> Knowledge:
    name = _packaged()[schema]
    text = _schemas_dir().joinpath(name).read_text(encoding="utf-8")
    return _parse(text, source=f"ehr_magic/knowledge/schemas/{name}", expected_schema=schema)


@functools.lru_cache(maxsize=32)
def _load_file(path: str, mtime_ns: int) -> Knowledge:  # mtime_ns keys the cache on edits
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EhrMagicError(f"Cannot read knowledge file {path}: {exc}") from None
    return _parse(text, source=path, expected_schema=Path(path).stem)


def _dirs(extra_dirs: ExtraDirs) -> list[Path]:
    if extra_dirs is None:
        return []
    if isinstance(extra_dirs, (str, os.PathLike)):
        extra_dirs = [extra_dirs]
    directories = []
    for entry in extra_dirs:
        directory = Path(entry).expanduser()
        if not directory.is_dir():
            raise EhrMagicError(
                f"Knowledge directory {entry} does not exist or is not a directory; "
                "create it or remove it from the knowledge directories."
            )
        directories.append(directory)
    return directories


# -- validation ------------------------------------------------------------------------------


class _BlockDumper(yaml.SafeDumper):
    """Multi-line text as ``|`` blocks, so an exported file reads like a written one."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text.strip() else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_BlockDumper.add_representer(str, _represent_text)


def parse(text: str, *, source: str, expected_schema: str) -> Knowledge:
    """Knowledge from the text of a knowledge file, validated as packaged files are.

    ``source`` names where the text came from in error messages; the text must declare
    ``schema: <expected_schema>``. Raises ``EhrMagicError`` with one sentence otherwise.
    """
    return _parse(text, source=source, expected_schema=expected_schema)


class _Malformed(Exception):
    """A problem in one knowledge file; becomes an EhrMagicError naming the file."""


# libyaml's safe loader where PyYAML was built with it: the same documents, read ten times faster
# (the drafted knowledge of a warehouse of 1,500 tables is a megabyte, read on every connect)
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=8)
def _parse(text: str, *, source: str, expected_schema: str) -> Knowledge:
    # Cached on the text (Knowledge is frozen): a connect reads the kept file again, and a prompt
    # connects afresh for its system message, once per form it weighs; a warehouse's file takes
    # half a second to read. A file that fails raises each time (exceptions are not cached).
    try:
        data = yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise EhrMagicError(f"Knowledge file {source} is not valid YAML: {_yaml_problem(exc)}") from None
    try:
        return _build(data, source=source, expected_schema=expected_schema)
    except _Malformed as exc:
        raise EhrMagicError(f"Knowledge file {source} is malformed: {exc}") from None


def _build(data: Any, *, source: str, expected_schema: str) -> Knowledge:
    if not isinstance(data, dict):
        raise _Malformed("the top level must be a mapping with keys " + ", ".join(_TOP_REQUIRED) + ".")
    _check_keys(data, _TOP_REQUIRED, _TOP_ALLOWED, where="the top level")
    schema = _text(data["schema"], "schema")
    if schema != expected_schema:
        raise _Malformed(f"it declares schema {schema!r} but is named {expected_schema!r}; make them equal.")
    version = data["version"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise _Malformed(f"version must be an integer, not {version!r}.")
    conventions = data.get("conventions") or []
    if not isinstance(conventions, list):
        raise _Malformed("conventions must be a list of short rules.")
    raw_tables = data["tables"]
    if not isinstance(raw_tables, dict) or not raw_tables:
        raise _Malformed("tables must be a non-empty mapping of table name to its description.")
    tables = {str(name): _table(str(name), body) for name, body in raw_tables.items()}
    drafted = data.get("drafted", False)
    if not isinstance(drafted, bool):
        raise _Malformed(f"drafted must be true or false, not {drafted!r}.")
    for info in tables.values():
        for join in info.joins:
            match = _JOIN.match(join)
            if match is None:
                raise _Malformed(f"table {info.name!r}: join {join!r} should read '<table> ON <condition>'.")
            if match.group(1) not in tables:
                raise _Malformed(
                    f"table {info.name!r}: join {join!r} names table {match.group(1)!r}, which is not described."
                )
    for info in tables.values():
        if info.derived_from is not None and info.derived_from not in tables:
            raise _Malformed(f"table {info.name!r}: derived_from names table {info.derived_from!r}, which is not "
                             "described.")
    hierarchy = _hierarchy(data.get("hierarchy"), tables)
    return Knowledge(
        schema=schema,
        version=version,
        title=_text(data["title"], "title"),
        introduction=_text(data["introduction"], "introduction"),
        conventions=tuple(_text(rule, f"conventions item {i + 1}") for i, rule in enumerate(conventions)),
        tables=tables,
        source=source,
        drafted=drafted,
        clock=_clock(data.get("clock")),
        confirmed=_statements(data.get("confirmed"), "the top level", TOP_STATEMENTS, ()),
        hierarchy=hierarchy,
    )


def _hierarchy(value: Any, tables: dict[str, TableInfo]) -> Hierarchy | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"table", "broader", "narrower"}:
        raise _Malformed("hierarchy must be a mapping of table, broader and narrower (its two code columns).")
    hierarchy = Hierarchy(*(_text(value[key], f"hierarchy {key}") for key in ("table", "broader", "narrower")))
    described = {name.lower(): info for name, info in tables.items()}  # names match in any case
    if hierarchy.table.lower() not in described:
        raise _Malformed(f"hierarchy names table {hierarchy.table!r}, which is not described.")
    for column in (hierarchy.broader, hierarchy.narrower):
        if column.lower() not in {c.lower() for c in described[hierarchy.table.lower()].columns}:
            raise _Malformed(f"hierarchy column {column!r} is not among the columns of {hierarchy.table!r}.")
    return hierarchy


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """``line N: what is wrong``, naming the line where the broken construct starts."""
    mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
    words = [getattr(exc, "context", None), getattr(exc, "problem", None)]
    problem = ", ".join(w for w in words if w) or " ".join(str(exc).split())
    where = f"line {mark.line + 1}: " if mark is not None else ""
    return f"{where}{problem}; fix that line and import again."


def _clock(value: Any) -> tuple[str, ...]:
    """The clock as written: a time (YAML may have read it as one already), a table.column,
    or a non-empty list of these, tried in order."""
    if value is None:
        return ()
    if isinstance(value, list):
        if not value:
            raise _Malformed("clock must be a time, a table.column, or a non-empty list of them.")
        return tuple(dict.fromkeys(_clock_entry(item, f"clock item {i + 1}") for i, item in enumerate(value)))
    return (_clock_entry(value, "clock"),)


def _clock_entry(value: Any, what: str) -> str:
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dt.date):
        return value.isoformat()
    return _text(value, what).strip()


def _statements(value: Any, where: str, allowed: tuple[str, ...], columns: Iterable[str]) -> tuple[str, ...]:
    names = tuple(str(item) for item in _list(value, f"{where} confirmed"))
    known = {*allowed, *(f"columns.{column}" for column in columns)}
    for name in names:
        if name not in known:
            raise _Malformed(f"{where} confirms {name!r}, which is not one of its statements "
                             f"({', '.join(allowed)} or columns.<column>).")
    return tuple(dict.fromkeys(names))


def _table(name: str, body: Any) -> TableInfo:
    where = f"table {name!r}"
    if not isinstance(body, dict):
        raise _Malformed(f"{where} must be a mapping with at least 'row' and 'columns'.")
    _check_keys(body, _TABLE_REQUIRED, _TABLE_ALLOWED, where=where)
    columns = body["columns"]
    if not isinstance(columns, dict) or not columns:
        raise _Malformed(f"{where}: columns must be a non-empty mapping of column name to description.")
    described = {str(column): _text(text, f"{where} column {column!r}") for column, text in columns.items()}
    module = body.get("module")
    vocabulary = tuple(str(c) for c in _list(body.get("vocabulary"), f"{where} vocabulary"))
    for column in vocabulary:
        if column not in described:
            raise _Malformed(f"{where}: vocabulary column {column!r} is not among its columns.")
    by_hierarchy = body.get("by_hierarchy", False)
    if not isinstance(by_hierarchy, bool):
        raise _Malformed(f"{where}: by_hierarchy must be true or false, not {by_hierarchy!r}.")
    key = body.get("key")
    if key is not None and str(key) not in described:
        raise _Malformed(f"{where}: key {key!r} is not among its columns.")
    return TableInfo(
        name=name,
        module=None if module is None else _text(module, f"{where} module"),
        row=_text(body["row"], f"{where} row"),
        description=_text(body.get("description") or "", f"{where} description", empty_ok=True),
        columns=described,
        joins=tuple(_text(j, f"{where} join") for j in _list(body.get("joins"), f"{where} joins")),
        vocabulary=vocabulary,
        key=None if key is None else str(key),
        confirmed=_statements(body.get("confirmed"), where, TABLE_STATEMENTS, described),
        by_hierarchy=by_hierarchy,
        derived_from=None if body.get("derived_from") is None else _text(body["derived_from"], f"{where} derived_from"),
    )


def _check_keys(mapping: dict[Any, Any], required: tuple[str, ...], allowed: frozenset[str], *, where: str) -> None:
    missing = [key for key in required if key not in mapping]
    if missing:
        raise _Malformed(f"{where} lacks required key(s): {', '.join(missing)}.")
    unknown = [str(key) for key in mapping if key not in allowed]
    if unknown:
        raise _Malformed(f"{where} has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}.")


def _text(value: Any, what: str, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str) or (not empty_ok and not value.strip()):
        hint = " (quote it in YAML)" if isinstance(value, (bool, int, float)) else ""
        raise _Malformed(f"{what} must be non-empty text, not {value!r}{hint}.")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Malformed(f"{what} must be a list.")
    return value


def _join_sentences(first: str, second: str) -> str:
    return f"{first.strip()} {second.strip()}".strip()
