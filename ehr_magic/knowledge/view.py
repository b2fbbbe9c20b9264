"""What ehr-magic believes about a connected database, as the front ends show it.

``knowledge_view(ehr)`` gathers the clock and its time model and, per table, its one-line
meaning, key, joins (``table.column -> table.key``), lookup columns and columns, each
statement marked ``drafted`` (ehr-magic guessed it from the data) or ``confirmed`` (a
person wrote or confirmed it). ``%ehr knowledge`` renders it as HTML and text; the side
panel's Data tab renders ``to_dict()``. Neither adds anything of its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ehr_magic.knowledge.handle import Database
from ehr_magic.knowledge.model import CONFIRMED, Knowledge, TableInfo, join_target
from ehr_magic.knowledge.store import join_pairs
from ehr_magic.errors import EhrMagicError
from ehr_magic.text import closest

NOT_DESCRIBED = "not described"  # the mark of a table the knowledge says nothing about


@dataclass(frozen=True)
class ColumnView:
    name: str
    dtype: str
    meaning: str
    mark: str
    lookup: bool
    key: bool


@dataclass(frozen=True)
class JoinView:
    source: str  # "encounters.patient"
    target: str  # "patients.id"
    text: str  # the join as written: "patients ON encounters.patient = patients.id"

    @property
    def arrow(self) -> str:
        return f"{self.source} -> {self.target}" if self.source else self.text


@dataclass(frozen=True)
class TableView:
    name: str
    meaning: str
    meaning_mark: str
    key: str | None
    key_mark: str
    joins: tuple[JoinView, ...]
    joins_mark: str
    lookup: tuple[str, ...]
    lookup_mark: str
    columns: tuple[ColumnView, ...]


@dataclass(frozen=True)
class ClockView:
    time_model: str  # "calendar" | "offset"
    now: str | None  # "2024-02-07 23:24:16"; None for offset time
    text: str  # one sentence on how relative times are read
    mark: str


@dataclass(frozen=True)
class KnowledgeView:
    schema: str
    dataset: str
    location: str
    title: str
    origin: str  # "drafted from the data" | "stored in the database" | "packaged (...)" | "none"
    drafted: bool
    clock: ClockView
    tables: tuple[TableView, ...]

    def table(self, name: str) -> TableView:
        """One table, by name (case-insensitive); a clear sentence with "did you mean" otherwise."""
        for table in self.tables:
            if table.name.lower() == str(name).lower():
                return table
        close = closest(str(name).lower(), [t.name for t in self.tables])
        hint = f" Did you mean {close!r}?" if close else ""
        raise EhrMagicError(f"No table {name!r} in {self.dataset}.{hint} Tables: "
                            f"{', '.join(t.name for t in self.tables)}.")

    def counts(self) -> dict[str, int]:
        """How many statements are drafted and how many confirmed (meanings, keys, joins, lookups)."""
        marks = [mark for t in self.tables for mark, said in ((t.meaning_mark, t.meaning), (t.key_mark, t.key),
                                                             (t.joins_mark, t.joins), (t.lookup_mark, t.lookup))
                 if said]
        return {"drafted": marks.count("drafted"), "confirmed": marks.count(CONFIRMED)}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (lists, not tuples), with each join's ``arrow`` and the counts."""
        data = asdict(self, dict_factory=lambda items: {k: list(v) if isinstance(v, tuple) else v for k, v in items})
        for table, view in zip(data["tables"], self.tables):
            for join, joined in zip(table["joins"], view.joins):
                join["arrow"] = joined.arrow
        data["counts"] = self.counts()
        return data


def knowledge_view(ehr: Database) -> KnowledgeView:
    """The view of everything the model is told about ``ehr``'s tables, and the clock."""
    knowledge = ehr.knowledge
    tables = tuple(_table(ehr, name, knowledge) for name in _ordered(ehr, knowledge))
    attachment = getattr(ehr, "attachment", None)  # a database ehr-magic did not build: kept elsewhere
    if attachment is not None:
        origin = attachment.origin(knowledge.source if knowledge is not None else "")
    elif knowledge is None:
        origin = "none"
    elif knowledge.drafted:
        origin = "drafted from the data"
    elif ehr.stored_knowledge is not None:
        origin = "stored in the database"
    else:
        origin = f"packaged ({knowledge.source})"
    return KnowledgeView(ehr.schema, ehr.dataset, ehr.location, knowledge.title if knowledge else ehr.dataset,
                         origin, bool(knowledge and knowledge.drafted), _clock(ehr, knowledge), tables)


def _ordered(ehr: Database, knowledge: Knowledge | None) -> list[str]:
    described = list(knowledge.tables) if knowledge else []
    return described + [name for name in ehr.tables() if name not in described]


def _clock(ehr: Database, knowledge: Knowledge | None) -> ClockView:
    mark = knowledge.mark("clock") if knowledge is not None else CONFIRMED
    if ehr.clock is None and getattr(ehr, "time_model", "calendar") == "offset":
        return ClockView("offset", None, "No dates: times are offsets in minutes from the start of each stay.", mark)
    if ehr.clock is None:
        return ClockView("calendar", None, "No clock: no dates in the data, so relative times such as 'last year' "
                                           "cannot be read; write the dates themselves.", mark)
    now = f"{ehr.now:%Y-%m-%d %H:%M:%S}"
    source = getattr(ehr.clock, "source", "")
    written = f" ({source})" if source else ""
    return ClockView("calendar", now, f"Calendar time: now is {now}{written}; relative times such as 'last year' "
                                      "count back from it, never from today's date.", mark)


def _table(ehr: Database, name: str, knowledge: Knowledge | None) -> TableView:
    types = ehr.columns(name) if name in ehr.tables() else {}
    info = knowledge.tables.get(name) if knowledge is not None else None
    if knowledge is None or info is None:
        columns = tuple(ColumnView(c, t, "", NOT_DESCRIBED, False, False) for c, t in types.items())
        return TableView(name, "", NOT_DESCRIBED, None, NOT_DESCRIBED, (), NOT_DESCRIBED, (), NOT_DESCRIBED, columns)

    def mark(statement: str) -> str:
        return knowledge.mark(statement, name)

    columns = tuple(ColumnView(c, types.get(c, ""), info.columns.get(c, ""),
                               mark(f"columns.{c}") if c in info.columns else NOT_DESCRIBED,
                               c in info.vocabulary, c == info.key)
                    for c in dict.fromkeys((*info.columns, *types)))
    meaning = " ".join(part.strip() for part in (info.row, info.description) if part.strip())
    return TableView(name, meaning, mark("meaning"), info.key, mark("key"), tuple(_join(info, j) for j in info.joins),
                     mark("joins"), info.vocabulary, mark("lookup"), columns)


def _join(info: TableInfo, join: str) -> JoinView:
    """``table.column -> table.key`` for a join that compares two columns; the text otherwise."""
    target = join_target(join)
    try:
        pairs = [pair for pair in join_pairs(join, info.name) if len(pair) == 2]
    except ValueError:
        pairs = []
    if len(pairs) != 1 or target is None:
        return JoinView("", "", join)
    (a_table, a_column), (b_table, b_column) = pairs[0]
    if a_table == target:  # written target-first: show this table's column first
        (a_table, a_column), (b_table, b_column) = (b_table, b_column), (a_table, a_column)
    return JoinView(f"{a_table}.{a_column}", f"{b_table}.{b_column}", join)
