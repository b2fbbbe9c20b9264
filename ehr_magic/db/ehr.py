"""The ``EHR`` object: one connected, read-only EHR database with its schema,
descriptions and clock. Everything else in ehr_magic reaches data through it.

The data lives in an engine (``ehr_magic.engines``): a DuckDB file (embedded, the
default), a PostgreSQL database or a Spark Connect server. ``EHR`` speaks DuckDB SQL
on all of them: on other engines each query is transpiled with sqlglot first, and an
engine's error comes back in its own words with the SQL it ran. Every engine is opened
read-only (see each engine module for how).
"""

from __future__ import annotations

import datetime as dt
import os
from functools import cached_property
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from ehr_magic.linking.clinical_vocabulary import clinical_vocabulary
from ehr_magic.db import attach, data_clock, header_rows
from ehr_magic.db.attach import Attachment, Progress
from ehr_magic.db.clock import Clock, Unit
from ehr_magic.db.header_rows import EmptyTables
from ehr_magic.text import closest, parse_time
from ehr_magic.linking.found import Found, Lookup
from ehr_magic.linking.large_vocabulary import ColumnIndexes, LargeVocabulary
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.db import schemas as schema_plugins
from ehr_magic.db.offsets import NO_CLOCK, OffsetStays, OffsetTime, StayKind
from ehr_magic.db.offsets import minutes as _minutes
from ehr_magic.engines import QUERY_FAILURES, Engine, is_url, open_engine, to_dialect
from ehr_magic.engines.duckdb_engine import _SAFE_CONFIG  # noqa: F401 (tests open DuckDB the same way)
from ehr_magic.errors import EhrMagicError
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.safety import limits, privacy
from ehr_magic.safety import sql as sqlcheck

if TYPE_CHECKING:
    from ehr_magic.knowledge.handle import Database
    from ehr_magic.knowledge.model import Knowledge

_READS_PER_STATEMENT = 16  # tables counted in one statement when columns are indexed together


def connect(target: str | os.PathLike[str], *, now: str | dt.datetime | None = None,
            progress: Progress | None = None, **options: Any) -> EHR:
    """Open an EHR database for analysis (read-only). ``now`` overrides its clock.

    ``target`` is a DuckDB file path, ``postgresql://user@host:port/dbname[?search_path=a,b]``
    or ``sc://host:port`` (Spark Connect); ``options`` go to the engine. A database ehr-magic
    did not build gets knowledge drafted on first connect (``ehr_magic.db.attach``), which
    ``progress(phase, done, total)`` hears of.
    """
    return EHR(target, now=now, progress=progress, **options)


class EHR:
    """A connected EHR database: ``sql``, ``table``, ``lookup``, ``describe`` and the clock."""

    def __init__(self, target: str | os.PathLike[str], *, now: str | dt.datetime | None = None,
                 progress: Progress | None = None, **options: Any) -> None:
        # Private, so the code guard keeps generated code off the engine's raw connection.
        self._engine: Engine = open_engine(target, **options)
        self.engine_name: str = self._engine.name
        # ``path`` reopens the same database (``connect(ehr.path)``); ``location`` is for display.
        self.path: Path | str = str(target) if is_url(target) else Path(self._engine.location)
        self.location: str = self._engine.location
        self._frames: dict[str, pl.DataFrame] = {}
        # Tables holding only their header row read as empty tables of their real columns.
        self._empty = EmptyTables({})
        # A database ehr-magic did not build (no _ehr_meta): its knowledge, kept outside it.
        self.attachment: Attachment | None = None
        try:
            stored = self._engine.table_columns()  # as the engine has them (read once: Spark asks per table)
            self._empty = EmptyTables(header_rows.find(stored, self._first_rows))
            self.__dict__["_table_columns"] = {table: dict(self._empty.tables.get(table, types))
                                               for table, types in stored.items()}
            self.meta: dict[str, str] = self._engine.read_meta()
            if self.meta:
                self.schema: str = self.meta.get("schema") or self._recognised_schema()
            else:
                recognised = self._recognised_schema()
                self.attachment = attach.attach(self._engine, stored, self._table_columns, self._empty.tables,
                                                recognised=None if recognised == "unknown" else recognised,
                                                progress=progress)
                self.schema = self.attachment.schema
            default_name = attach.display_name(self._engine.location, False) if not self._engine.remote \
                else self._engine.location
            self.dataset: str = self.meta.get("dataset", default_name)
            # "calendar": real (shifted) dates and a dataset clock; "offset": minutes from each stay's start.
            self.time_model: str = self.meta.get("time_model") or "calendar"
            if self.time_model not in ("calendar", "offset"):
                raise EhrMagicError(f"{self.dataset} declares an unknown time model {self.time_model!r}; rebuild it "
                                    "with this version of ehr-magic (ehr-magic data load).")
            self.clock: Clock | None = None
            self.offsets: OffsetTime | None = None
            if self.time_model == "offset":
                if now is not None:
                    raise EhrMagicError(f"{self.dataset} has no dates (times are offsets in minutes), so it has no "
                                        "clock to set; connect without now=.")
                self.offsets = OffsetTime(OffsetStays.from_meta(self.meta.get("offset_stays")))
            else:
                self.clock = self._resolve_clock(now)
        except BaseException:
            self._engine.close()
            raise
        # a vocabulary of millions of values (OMOP concepts) is indexed compactly and kept on disk
        self._vocabularies = ColumnIndexes(self._distinct_series, self.count, identity=self._identity(),
                                           keep=lambda table, column: (table, column) in self.lookup_columns(),
                                           many_values=self._distinct_series_of, many_rows=self._counts_of)
        self._lookup_columns: list[tuple[str, str]] | None = None

    # -- queries ---------------------------------------------------------------------------

    def sql(self, query: str, params: list[Any] | dict[str, Any] | None = None) -> pl.DataFrame:
        """Run a read-only SQL query (DuckDB dialect) and return a polars DataFrame."""
        sqlcheck.check_generated(query)  # model-written code: the SQL as it runs must be a read
        return self._run(query, params)

    def table(self, name: str) -> pl.LazyFrame:
        """A whole table as a polars LazyFrame (read once, then cached in memory).

        For very large tables, filter in SQL with ``ehr.sql`` instead. On a remote engine
        (PostgreSQL, Spark) a table of more rows than the row cap is refused.
        """
        name = self._check_table(name)
        frame = self._frames.get(name)
        if frame is None:
            if self._engine.remote:
                self._refuse_big_table(name)
            frame = self._run(f"SELECT * FROM {quote(name)}", what=f"ehr.table({name!r})")
            self._frames[name] = frame
        return frame.lazy()

    def tables(self) -> list[str]:
        """Names of the data tables, sorted."""
        return list(self._table_columns)

    def columns(self, table: str) -> dict[str, str]:
        """Column name -> DuckDB type of one table."""
        return dict(self._table_columns[self._check_table(table)])

    def empty_tables(self) -> frozenset[str]:
        """The tables that hold no rows: those whose only row repeats their header, and those the
        engine's catalog counts as empty where it keeps counts that cost nothing to read (DuckDB's)."""
        counts = self._engine.row_counts()
        return frozenset(self._empty.tables) | {t for t in self._table_columns if counts.get(t) == 0}

    def count(self, table: str) -> int:
        """Number of rows of ``table``."""
        return int(self._run(f"SELECT count(*) AS n FROM {quote(self._check_table(table))}").item())

    def describe(self, table: str, examples: int = 3) -> pl.DataFrame:
        """Columns of ``table`` with type, description and a few example values."""
        table = self._check_table(table)
        info = self.knowledge.tables.get(table) if self.knowledge else None
        meanings = {column.lower(): text for column, text in info.columns.items()} if info else {}
        rows = []
        for column, dtype in self._table_columns[table].items():
            values = self._run(
                f"SELECT DISTINCT {quote(column)} FROM (SELECT {quote(column)} FROM {quote(table)} "
                f"WHERE {quote(column)} IS NOT NULL LIMIT 1000) AS sample LIMIT {int(examples)}"
            ).rows()
            rows.append(
                {
                    "column": column,
                    "type": dtype,
                    "description": meanings.get(column.lower(), ""),
                    "examples": ", ".join(str(v[0]) for v in values),
                }
            )
        return pl.DataFrame(rows, schema={"column": pl.String, "type": pl.String,
                                          "description": pl.String, "examples": pl.String})

    def lookup(self, table: str, column: str, text: str, k: int = 5, *, scores: bool = False) -> Lookup:
        """The ``k`` stored values of ``table.column`` closest to ``text``, best first.

        Tolerates case, spacing, punctuation, partial matches and word order, e.g.
        ``lookup('d_labitems', 'label', 'RDW')`` finds ``'rdw'``, and knows clinical
        abbreviations, brand names and synonyms: 'Hb' finds 'hemoglobin', 'Lasix'
        'furosemide', 'COPD' 'chronic obstructive pulmonary disease'. With ``scores=True``
        returns ``(value, score)`` pairs (score 0-100, 100 for the text itself). The list's
        ``exact`` says whether the text itself is stored; printed, a list without it says so.
        """
        table = self._check_table(table)
        column = self._check_column(table, column)
        matches = self._vocabularies.get(table, column).match(text, k, clinical_vocabulary().alternatives(text))
        exact = any(score >= 100 for _, score in matches)
        return Lookup(matches if scores else [value for value, _ in matches], text=text, table=table, column=column,
                      exact=exact)

    def find(self, text: str, k: int = 10, *, min_score: float = 80.0) -> Found:
        """Where ``text`` is stored and how it is spelled there: the ``k`` closest values
        of every lookup column (the dictionary columns: names of labs, drugs, diagnoses,
        procedures, units), as a table of ``table, column, value, score``, best first.

        ``ehr.find('Hb')`` shows ``d_labitems.label = 'hemoglobin'``; pass the table and
        column it names to ``ehr.lookup`` or use the value in a query. Patient-level
        columns are never searched.
        """
        alternatives = clinical_vocabulary().alternatives(text)
        rows = []
        for table, column in self.lookup_columns():
            for value, score in self._vocabularies.get(table, column).match(text, k, alternatives, exhaustive=False):
                if score >= min_score:
                    rows.append((table, column, value, score))
        rows.sort(key=lambda row: (-row[3], len(row[2]), row[0], row[1], row[2]))
        frame = pl.DataFrame(rows[:k], schema=Found.SCHEMA, orient="row")
        return Found(frame, query=text, searched=len(self.lookup_columns()))

    def lookup_columns(self) -> list[tuple[str, str]]:
        """The ``(table, column)`` text columns worth a value lookup: the knowledge's
        vocabulary columns (packaged, drafted or imported), else the text columns of
        dictionary tables; only those that privacy counts as vocabulary, never patient data."""
        if self._lookup_columns is None:
            candidates = self.knowledge.vocabulary_columns() if self.knowledge else privacy.dictionary_columns(self)
            self._lookup_columns = []
            for table, column in candidates:
                # the knowledge writes names as the schema does; the database may spell them in upper case
                columns = {name.lower(): name for name in self._table_columns.get(table, {})}
                real = columns.get(column.lower(), column)
                if self._table_columns.get(table, {}).get(real, "").startswith("VARCHAR"):
                    self._lookup_columns.append((table, real))
        return list(self._lookup_columns)

    def vocabulary(self, table: str, column: str) -> Vocabulary | LargeVocabulary:
        """The indexed distinct values of ``table.column`` (read once, then cached)."""
        table = self._check_table(table)
        return self._vocabularies.get(table, self._check_column(table, column))

    def index_columns(self, columns: Sequence[tuple[str, str]]) -> None:
        """Index the distinct values of these ``(table, column)`` pairs now, many to a query: the
        first question on a warehouse reads thousands of lookup columns (``vocabulary`` then
        returns them at once; a large column is still read on its own when first asked for)."""
        checked = []
        for table, column in columns:
            table = self._check_table(table)
            checked.append((table, self._check_column(table, column)))
        self._vocabularies.prefetch(checked)

    def indexed_rows(self, table: str) -> int:
        """The rows of ``table`` as its value indexes counted them, once per connection
        (``count`` counts anew)."""
        return self._vocabularies.rows(self._check_table(table))

    def __getattr__(self, name: str) -> Any:
        # A schema's own helpers (an OMOP CDM's ehr.concepts) come from its plug-in (ehr_magic/db/schemas).
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return schema_plugins.helper(self, name)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *schema_plugins.helper_names(vars(self).get("schema", "unknown"))})

    def interrupt(self) -> None:
        """Stop every query running on this database (used by the executor's time limit)."""
        self._engine.interrupt()

    def close(self) -> None:
        self._engine.close()

    def __enter__(self) -> EHR:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        clock = f"now={self.clock.now:%Y-%m-%d %H:%M:%S}" if self.clock else (
            "time=offset" if self.time_model == "offset" else "clock=none")
        source = f" ({self.clock.source})" if self.clock and self.clock.source else ""
        return f"<EHR {self.dataset} schema={self.schema} {clock}{source} tables={len(self.tables())}>"

    @property
    def clock_text(self) -> str:
        """The clock as the connect line says it: ``now 2019-05-25 (cdm_source.source_release_date)``."""
        if self.clock is not None:
            return self.clock.describe()
        return "times are offsets (no dates)" if self.time_model == "offset" else data_clock.NO_DATES

    def connect_notes(self) -> list[str]:
        """What connecting found worth saying, one sentence each: header-only tables, knowledge
        drafted (and where it is kept), tables that could not be read."""
        notes = [self._empty.report()] if self._empty else []
        attached = self.attachment
        if attached is not None:
            if attached.drafted_seconds is not None and attached.text is not None:
                notes.append(f"Knowledge drafted from the data in {attached.drafted_seconds:.0f} s; kept in "
                             f"{attached.path} (the database is not written to). Check it with %ehr knowledge.")
            elif attached.drafted_seconds is not None:
                notes.append("Knowledge drafted from the data, but not kept, since part of it could not be read.")
            notes += attached.notes
        return notes

    # -- clock -----------------------------------------------------------------------------

    @property
    def now(self) -> dt.datetime:
        """The dataset's current time: the anchor of 'today', 'last year', 'N days ago'."""
        return self._calendar("now").now

    def ago(self, **amount: float) -> dt.datetime:
        """``now`` minus an amount: ``ehr.ago(months=1)``, ``ehr.ago(years=1, days=2)``."""
        return self._calendar("ago").ago(**amount)  # type: ignore[arg-type]

    def start_of(self, unit: Unit, offset: int = 0) -> dt.datetime:
        """Start of this year/month/week/day (``offset=-1``: the previous one)."""
        return self._calendar("start_of").start_of(unit, offset)

    def period(self, unit: Unit, offset: int = 0) -> tuple[dt.datetime, dt.datetime]:
        """``[start, end)`` of a calendar period: ``ehr.period('year', -1)`` is last year."""
        return self._calendar("period").period(unit, offset)

    # -- offset time (time_model "offset", e.g. eICU; see ehr_magic/db/offsets.py) -----------

    @staticmethod
    def minutes(*, days: float = 0, hours: float = 0, minutes: float = 0) -> int:
        """A duration in whole minutes, the unit of offsets: ``ehr.minutes(hours=24)`` is 1440."""
        return _minutes(days=days, hours=hours, minutes=minutes)

    def in_first(self, column: str, *, days: float = 0, hours: float = 0, minutes: float = 0) -> str:
        """SQL condition for "in the first 24 hours of the ICU stay": ``ehr.in_first('observationoffset',
        hours=24)`` is ``(observationoffset >= 0 AND observationoffset < 1440)``."""
        return self._offset_time("in_first").in_first(column, days=days, hours=hours, minutes=minutes)

    def during_stay(self, column: str, stay: StayKind = "icu", *, patient: str = "p") -> str:
        """SQL condition for "during the ICU stay" (``'icu'``) or "during the hospital stay"
        (``'hospital'``); the stay table (eICU: patient) is joined as ``patient`` (default ``p``)."""
        return self._offset_time("during_stay").during_stay(column, stay, patient=patient)

    def chronological(self, column: str, *, patient: str = "p", latest_first: bool = False) -> str:
        """ORDER BY list putting a patient's events of all stays in time order (``latest_first``
        for "the last measurement"); the stay table is joined as ``patient`` (default ``p``)."""
        return self._offset_time("chronological").chronological(column, patient=patient, latest_first=latest_first)

    def _calendar(self, helper: str) -> Clock:
        if self.clock is None:
            raise EhrMagicError(NO_CLOCK if self.time_model == "offset" else
                                data_clock.no_dates_refusal(self.dataset, helper))
        return self.clock

    def _resolve_clock(self, now: str | dt.datetime | None) -> Clock | None:
        """The clock: ``now`` given, else the one the database was built with, else the one its
        knowledge states, else the latest date in the data; None without any time in the data."""
        if now is not None:
            return Clock(parse_time(now), "given when connecting")
        if self.meta.get("now"):
            return Clock(parse_time(self.meta["now"]), "set when the database was built")
        from ehr_magic.knowledge.drafting.draft import is_end_time
        from ehr_magic.knowledge.model import DRAFTED

        def query(sql: str, params: list[Any] | None) -> list[tuple]:
            return self._run(sql, params).rows()

        knowledge = self.knowledge
        if knowledge is not None and knowledge.clock:
            stated = data_clock.stated_clock(knowledge.clock, self._table_columns, query,
                                             drafted=knowledge.mark("clock") == DRAFTED)
            if stated is not None:
                return stated
        return data_clock.latest_in_data(self._table_columns, query, is_end_time)

    def _offset_time(self, helper: str) -> OffsetTime:
        if self.offsets is None:
            raise EhrMagicError(f"ehr.{helper} is for databases whose times are offsets (such as eICU); "
                                f"{self.dataset} has calendar dates, so use ehr.now, ehr.ago, ehr.start_of or "
                                "ehr.period.")
        return self.offsets

    # -- knowledge -------------------------------------------------------------------------

    @cached_property
    def knowledge(self) -> Knowledge | None:
        """Human descriptions of this schema's tables and columns (None if none ship),
        restricted to the tables this database has (the others are listed as ``absent``).

        Knowledge stored in the database (drafted by ``data load csv`` or imported with
        ``data knowledge --import``) comes before the packaged file of the schema.
        """
        from ehr_magic.knowledge import model as knowledge

        try:
            if self.attachment is not None:
                found = self.attachment.knowledge
                if found is None:
                    return None
            elif self.stored_knowledge is not None:
                found = knowledge.parse(self.stored_knowledge, source=f"{self.location} (stored knowledge)",
                                        expected_schema=self.schema)
            else:
                found = knowledge.load(self.schema)
            # Names as the database spells them: a lower-case file describes upper-case columns.
            return found.aligned_to(self._table_columns).restricted_to(self.tables(), self._table_columns)
        except EhrMagicError:
            return None

    @cached_property
    def stored_knowledge(self) -> str | None:
        """The knowledge file text stored for this database: in the database for one ehr-magic
        built, in the user's data folder for any other; None if there is none."""
        if self.attachment is not None:
            return self.attachment.text
        return self._engine.read_knowledge().get(self.schema)

    def draft_knowledge(self, progress: Progress | None = None) -> Any:  # -> Knowledge
        """Knowledge drafted from the data now, for every table, kept nowhere: the template a
        database without knowledge exports (``ehr-magic data knowledge --export``)."""
        drafted, _ = attach.draft_tables(self._engine, self._table_columns, self._empty.tables, self.tables(),
                                         schema=self.schema, name=self.dataset if not self._engine.remote else
                                         attach.display_name(self.location, True), progress=progress)
        return drafted.aligned_to(self._table_columns)

    def info(self) -> dict[str, Any]:
        """What the database is: schema, dataset, clock and row counts."""
        return {
            "path": self.location,
            "engine": self._engine.name,
            "schema": self.schema,
            "dataset": self.dataset,
            "source": self.meta.get("source", ""),
            "now": self.clock.now.strftime("%Y-%m-%d %H:%M:%S") if self.clock else "",
            "clock": self.clock_text,
            "time_model": self.time_model,
            "tables": {name: self.count(name) for name in self.tables()},
        }

    # -- internals -------------------------------------------------------------------------

    def _run(self, query: str, params: list[Any] | dict[str, Any] | None = None, *,
             what: str = "the query") -> pl.DataFrame:
        """DuckDB SQL on the engine: as written on DuckDB, transpiled elsewhere (header-only
        tables read as empty ones either way)."""
        query = self._empty.rewrite(query)
        if self._engine.dialect == "duckdb":
            return self._engine.query(query, params, what=what)
        translated, positional = to_dialect(query, self._engine.dialect, params, schema=self._table_columns)
        return self._engine.query(translated, positional, what=what)

    @cached_property
    def _table_columns(self) -> dict[str, dict[str, str]]:
        """Table -> column -> type as analysis sees them (set when connecting: header-only tables
        with their recovered columns)."""
        return self._engine.table_columns()

    def _first_rows(self, table: str) -> list[tuple]:
        name = self._engine.table_ref(table)
        return [tuple(row.values()) for row in self._engine.query_arrow(f"SELECT * FROM {name} LIMIT 2").to_pylist()]

    def _check_column(self, table: str, column: str) -> str:
        """``column`` of ``table`` as the database spells it (matched case-insensitively)."""
        columns = self._table_columns[table]
        if column in columns:
            return column
        spelled = {name.lower(): name for name in columns}
        if str(column).lower() in spelled:
            return spelled[str(column).lower()]
        close = closest(str(column).lower(), list(spelled), cutoff=70)
        hint = f" Did you mean {spelled[close]!r}?" if close else ""
        raise EhrMagicError(f"Table {table} has no column {column!r}.{hint} Its columns are: {', '.join(columns)}.")

    def _check_table(self, name: str) -> str:
        if name in self._table_columns:
            return name
        lowered = str(name).lower()
        if lowered in self._table_columns:
            return lowered
        close = closest(lowered, self._table_columns)
        hint = f" Did you mean {close!r}?" if close else ""
        raise EhrMagicError(f"No table {name!r} in {self.dataset}.{hint} See ehr.tables().")

    def _recognised_schema(self) -> str:
        """For a database not built by ehr-magic (no ``_ehr_meta``), e.g. a mimic-code build of
        MIMIC-IV in PostgreSQL or an OMOP CDM: the packaged schema its tables are (by each schema's
        rule, ``ehr_magic.db.schemas``), else "unknown"."""
        return schema_plugins.recognise(self._table_columns)

    def _refuse_big_table(self, name: str) -> None:
        cap = limits.current_row_cap() or limits.DEFAULT_MAX_ROWS
        rows = self.count(name)
        if rows > cap:
            raise limits.ResultTooLargeError(
                f"ehr.table({name!r}) would pull {rows:,} rows from {self._engine.name}, more than the {cap:,} it "
                f"fetches from a remote engine; filter in SQL instead, e.g. ehr.sql('SELECT ... FROM {name} "
                "WHERE ...').")

    def _identity(self) -> str:
        """The database as the indexes kept on disk name it: a file with its size and time of change."""
        if self._engine.remote:
            return self.location
        stat = Path(self._engine.location.partition("?")[0]).stat()  # a file, with the schemas chosen after it
        return f"{self._engine.location}|{stat.st_size}|{stat.st_mtime_ns}"

    def _distinct_values(self, table: str, column: str) -> list[str]:
        return self._distinct_series(table, column).to_list()

    def _counts_of(self, tables: list[str]) -> dict[str, int]:
        """The rows of each of ``tables``, several tables to a statement."""
        counts: dict[str, int] = {}
        for first in range(0, len(tables), _READS_PER_STATEMENT):
            batch = tables[first:first + _READS_PER_STATEMENT]
            try:
                frame = self._run(" UNION ALL ".join(f"SELECT {i} AS t, count(*) AS n FROM {quote(table)}"
                                                     for i, table in enumerate(batch)))
            except QUERY_FAILURES:
                continue  # a table that cannot be read is counted (and reports why) on its own
            counts.update((batch[int(i)], int(n)) for i, n in frame.iter_rows())
        return counts

    def _distinct_series_of(self, columns: list[tuple[str, str]]) -> list[pl.Series] | None:
        """``_distinct_series`` of each of ``columns`` in one statement; None if it cannot run (a
        column is then read on its own, and its error told where it is asked for)."""
        parts = [f"SELECT {i} AS q, v FROM ({_distinct_values_sql(table, column)}) AS r{i}"
                 for i, (table, column) in enumerate(columns)]
        try:
            with limits.row_cap(None):
                frame = self._run(" UNION ALL ".join(parts))
        except QUERY_FAILURES:
            return None
        values: list[list[str]] = [[] for _ in columns]
        for index, value in frame.iter_rows():
            values[int(index)].append(value)
        return [pl.Series("v", found, dtype=pl.String).sort() for found in values]

    def _distinct_series(self, table: str, column: str) -> pl.Series:
        # Our own read for an index, so not under generated code's row cap (a vocabulary of
        # millions of concept names is looked up, never returned).
        with limits.row_cap(None):
            frame = self._run(_distinct_values_sql(table, column))
        # Sorted, so ties in a lookup rank the same on every engine (DISTINCT has no order).
        return frame.to_series().sort()


def _distinct_values_sql(table: str, column: str) -> str:
    """The distinct non-empty values of ``table.column`` as text, in a column ``v``."""
    return (f"SELECT DISTINCT CAST({quote(column)} AS VARCHAR) AS v FROM {quote(table)} "
            f"WHERE {quote(column)} IS NOT NULL")


if TYPE_CHECKING:
    def _has_the_face_of_a_database(ehr: EHR) -> Database:  # mypy keeps the protocol and the class together
        return ehr
