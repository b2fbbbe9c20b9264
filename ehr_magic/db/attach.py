"""A database ehr-magic did not build: its knowledge drafted on first connect, kept outside it.

A DuckDB file, a PostgreSQL database or schema, or a Spark catalog without ``_ehr_meta``
is never written to. Its knowledge lives in the user's data folder
(``<data dir>/attached/<name>-<hash>.yaml``, with a ``.json`` beside it), keyed by the
database's identity: its location (the resolved file path, or the URL without password)
and a fingerprint of its tables (names, columns, types, the row counts an engine reads for
free, and what its catalog says of them: comments and declared keys). When the fingerprint
changes the knowledge is drafted again, keeping every statement a person wrote or confirmed.

Where the database documents its tables and columns (``COMMENT ON``), the drafted
descriptions say what those comments say, in place of what the names suggest, beside what
the values show; the foreign keys it declares are joins, whatever the values show.

- A database whose tables a packaged schema describes (``EHR._recognised_schema``) uses
  that knowledge; only the tables it does not describe are drafted (a "fill", merged with
  the packaged file whenever the database is opened, so a newer package shows through).
- Any other database gets a schema id of its own (``db_<name>``) and knowledge drafted by
  the same drafter as a folder of CSV files (``ehr_magic.knowledge.drafting``).

Drafting runs on a private in-memory DuckDB: a DuckDB file is attached to it read-only; a
server's tables are copied in, a bounded fixed-seed sample of the big ones
(``Engine.sample_arrow``). The drafter samples big tables itself, so the cost is bounded.
A table that cannot be read is left out, said in one sentence, and such a partial draft
is not kept. Importing knowledge for an attached database stores it here too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

import duckdb

from ehr_magic import paths
from ehr_magic.db import data_clock
from ehr_magic.db.header_rows import empty_select
from ehr_magic.engines import Engine
from ehr_magic.engines.base import Comments, DeclaredKeys, first_line
from ehr_magic.errors import DatabaseError, EhrMagicError
from ehr_magic.knowledge import model as knowledge_files
from ehr_magic.knowledge.model import Knowledge
from ehr_magic import files
from ehr_magic.knowledge.store import keep_confirmed, with_drafted_tables
from ehr_magic.safety import limits
from ehr_magic.version import __version__

Progress = Callable[[str, int, int], None]

FOLDER = "attached"  # under the user data folder
SERVER_SAMPLE = 100_000  # rows of a server's table copied for drafting, at most
DRAFT_MEMORY = "256MB"  # DuckDB's memory for drafting, whatever the data's size (it spills past it)
FULL, FILL = "full", "fill"  # a whole knowledge file, or the drafted tables a packaged one lacks
# Drafts not kept (a table could not be read), by (location, schema, fingerprint): a reconnect in the
# same process (the agent's prompt reconnects) reuses one rather than drafting again.
_UNKEPT: dict[tuple[str, str, str], tuple[Knowledge | None, list[str]]] = {}
_SLUG = re.compile(r"[^0-9a-z]+")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def display_name(location: str, remote: bool) -> str:
    """A short name for a database: the file's stem (and the first schema chosen after it), else the
    database (and schema) in its URL."""
    if not remote:
        file, _, chosen = location.partition("?")
        schemas = parse_qs(chosen).get("search_path", [""])[0].split(",")[0]
        return Path(file).stem + (f"_{schemas}" if schemas else "")
    parts = urlsplit(location)
    query = parse_qs(parts.query)
    tail = parts.path.strip("/")
    database = re.search(r"database=([^;/&]+)", location)
    names = [database.group(1)] if database else [tail.split(";")[0]] if tail.split(";")[0] else []
    names += [query["search_path"][0].split(",")[0]] if query.get("search_path") else []
    return "_".join(names) or parts.hostname or "database"


def schema_id(name: str) -> str:
    """``db_<name>``: the schema (knowledge, memory) of an unrecognised database."""
    slug = _SLUG.sub("_", name.lower()).strip("_") or "database"
    return f"db_{slug}"[:63]


def fingerprint(columns: Mapping[str, Mapping[str, str]], rows: Mapping[str, int],
                catalog: Catalog | None = None) -> str:
    """A digest of the tables: names, columns with their types, free row counts and what the
    database's catalog says of them, its comments and declared keys (none: the digest of a
    database without either is as it was before they counted, so its kept knowledge stays)."""
    shape: list[Any] = [[table, [[c, t] for c, t in types.items()], rows.get(table)]
                        for table, types in sorted(columns.items())]
    comments, keys = catalog or Catalog()
    said = {table: [c.table, sorted(c.columns.items())] for table, c in comments.items() if table in columns}
    if said:
        shape.append(said)
    if keys:
        shape.append([sorted((t, list(c)) for t, c in keys.primary.items()),
                      [[k.table, list(k.columns), k.target, list(k.keys)] for k in keys.foreign]])
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:32]


class Catalog(NamedTuple):
    """What a database's catalog says of its tables beyond their columns."""

    comments: Mapping[str, Comments] = MappingProxyType({})
    keys: DeclaredKeys = DeclaredKeys()


def read_catalog(engine: Engine) -> Catalog:
    """The database's comments on its tables and columns, and the keys it declares; none of what
    its catalog cannot give (documentation is a help, not a condition of connecting)."""
    try:
        comments = engine.comments()
    except (EhrMagicError, duckdb.Error):  # an engine's failures are ours; DuckDB's its own
        comments = {}
    try:
        keys = engine.declared_keys()
    except (EhrMagicError, duckdb.Error):
        keys = DeclaredKeys()
    return Catalog(comments, keys)


@dataclass
class Stored:
    schema: str
    fingerprint: str
    kind: str  # FULL or FILL
    imported: bool  # a person imported it (else drafted by ehr-magic)
    text: str


@dataclass
class Attachment:
    """Knowledge of one attached database: where it is kept and what connecting found."""

    location: str
    name: str
    schema: str
    recognised: bool
    fingerprint: str
    knowledge: Knowledge | None = None
    text: str | None = None  # the stored text in use (None: packaged only, or nothing kept)
    kind: str = ""
    imported: bool = False
    drafted_seconds: float | None = None  # drafted on this connect, in that long
    notes: list[str] = field(default_factory=list)  # sentences for the connect report
    folder: Path = field(default_factory=lambda: paths.data_dir() / FOLDER)  # where it is kept

    @property
    def key(self) -> str:
        digest = hashlib.sha256(self.location.encode()).hexdigest()[:16]
        return f"{_SLUG.sub('_', self.name.lower()).strip('_')[:40] or 'database'}-{digest}"

    @property
    def path(self) -> Path:
        """The knowledge file kept for this database."""
        return self.folder / f"{self.key}.yaml"

    @property
    def meta_path(self) -> Path:
        return self.folder / f"{self.key}.json"

    def origin(self, packaged_source: str = "") -> str:
        """Where the knowledge in use comes from, as ``%ehr knowledge`` says it."""
        if self.knowledge is None:
            return "none"
        if self.kind == FILL:
            return f"packaged ({packaged_source}), the tables it lacks drafted from the data; kept in {self.path}"
        if self.text is None:
            return f"packaged ({packaged_source})"
        return f"{'imported' if self.imported else 'drafted from the data'}; kept in {self.path}"

    def read(self) -> Stored | None:
        try:
            meta = json.loads(self.meta_path.read_text(encoding="utf-8"))
            text = self.path.read_text(encoding="utf-8")
            return Stored(str(meta["schema"]), str(meta["fingerprint"]), str(meta["kind"]),
                          bool(meta.get("imported")), text)
        except (OSError, ValueError, KeyError, TypeError):
            return None  # nothing kept yet, or a broken pair: drafted again

    def write(self, text: str, kind: str, *, imported: bool = False) -> None:
        """Keep ``text`` for this database, whole or not at all (the file, then its description)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        meta = {"location": self.location, "schema": self.schema, "fingerprint": self.fingerprint, "kind": kind,
                "imported": imported, "ehr_magic_version": __version__}
        self.meta_path.unlink(missing_ok=True)  # a crash between the two writes leaves no stale pair
        files.write_text(self.path, text)
        files.write_text(self.meta_path, json.dumps(meta, indent=2) + "\n")
        self.text, self.kind, self.imported = text, kind, imported

    def forget(self) -> None:
        self.meta_path.unlink(missing_ok=True)
        self.path.unlink(missing_ok=True)
        self.text, self.kind, self.imported = None, "", False


def attach(engine: Engine, stored: Mapping[str, Mapping[str, str]], columns: Mapping[str, Mapping[str, str]],
           empty: Mapping[str, Mapping[str, str]], *, recognised: str | None,
           progress: Progress | None = None) -> Attachment:
    """The knowledge of a database ehr-magic did not build: kept, or drafted now (see the module
    docstring). ``stored`` are its tables as the engine has them, ``columns`` as analysis sees
    them (header-only tables, ``empty``, with their recovered columns)."""
    name = display_name(engine.location, engine.remote)
    if not columns:
        raise DatabaseError(f"{engine.name} database {engine.location} has no tables to analyse; connect to the "
                            "database or schema that holds the data (for PostgreSQL, ?search_path=SCHEMA).")
    schema = recognised or schema_id(name)
    catalog = read_catalog(engine)
    here = Attachment(engine.location, name, schema, recognised is not None,
                      fingerprint(stored, engine.row_counts(), catalog))
    if progress is not None:
        said = progress

        def progress(phase: str, done: int, total: int) -> None:
            said(f"drafting knowledge: {phase}", done, total)

    kept = here.read()
    same = kept if kept is not None and kept.schema == schema else None
    if same is not None and same.fingerprint == here.fingerprint:
        previous = _parse(same.text, schema)
        if previous is not None:
            here.text, here.kind, here.imported = same.text, same.kind, same.imported
            here.knowledge = (with_drafted_tables(knowledge_files.load(schema), previous) if same.kind == FILL
                              else previous)
            return here
    unkept = _UNKEPT.get((here.location, schema, here.fingerprint))
    if unkept is not None:
        here.knowledge, here.notes = unkept[0], list(unkept[1])
        return here
    previous = _parse(same.text, schema) if same is not None else None
    started = time.perf_counter()
    if recognised is None:
        try:
            drafted, complete = draft_tables(engine, columns, empty, list(columns), schema=schema, name=name,
                                             progress=progress, notes=here.notes, catalog=catalog)
        except DatabaseError as exc:
            here.notes.append(str(exc))  # connected all the same, with bare table and column names
            here.knowledge = previous
            return here
        here.knowledge = keep_confirmed(drafted, previous)
        here.drafted_seconds = time.perf_counter() - started
        if complete:
            here.write(here.knowledge.to_yaml(), FULL, imported=False)
        else:
            _UNKEPT[(here.location, schema, here.fingerprint)] = (here.knowledge, list(here.notes))
    else:
        base = (previous if previous is not None and same is not None and same.kind == FULL
                else knowledge_files.load(schema))
        described = {table.lower() for table in base.tables}
        missing = [table for table in columns if table.lower() not in described]
        complete, fill = True, None
        if missing:
            try:
                fill, complete = draft_tables(engine, columns, empty, missing, schema=schema, name=name,
                                              progress=progress, notes=here.notes, fill_for=base.title,
                                              catalog=catalog)
                fill = keep_confirmed(fill, previous)
                here.drafted_seconds = time.perf_counter() - started
            except DatabaseError as exc:
                here.notes.append(str(exc))
                complete = False
        here.knowledge = with_drafted_tables(base, fill) if fill is not None else base
        if not complete:
            _UNKEPT[(here.location, schema, here.fingerprint)] = (here.knowledge, list(here.notes))
        elif base is previous:  # an imported file: kept whole, the new tables drafted into it
            here.write(here.knowledge.to_yaml(), FULL, imported=same is not None and same.imported)
        elif fill is not None:
            here.write(fill.to_yaml(), FILL)
        elif kept is not None:
            here.forget()  # every table is described by the package now: nothing of ours to keep
    return here


def _parse(text: str, schema: str) -> Knowledge | None:
    try:
        return knowledge_files.parse(text, source="kept knowledge", expected_schema=schema)
    except EhrMagicError:
        return None


# -- drafting ----------------------------------------------------------------------------------


def draft_tables(engine: Engine, columns: Mapping[str, Mapping[str, str]], empty: Mapping[str, Mapping[str, str]],
                 tables: list[str], *, schema: str, name: str, progress: Progress | None = None,
                 notes: list[str] | None = None, fill_for: str | None = None,
                 catalog: Catalog | None = None) -> tuple[Knowledge, bool]:
    """Knowledge drafted for ``tables`` of ``engine``'s database, and whether every one of them
    could be read (a table that cannot is left out and named in ``notes``). ``catalog``: what the
    database's catalog says of its tables (comments, declared keys), read from it when not given."""
    from ehr_magic.knowledge.drafting import draft as drafting

    notes = notes if notes is not None else []
    catalog = read_catalog(engine) if catalog is None else catalog
    con = duckdb.connect(":memory:", config=dict(limits.duckdb_config(memory_limit=DRAFT_MEMORY)))
    try:
        attached = engine.attach_to(con, "source")
        readable: list[str] = []
        sampled: list[str] = []
        for i, table in enumerate(tables):
            if progress:
                progress(f"reading {table}", i, len(tables))
            try:
                _copy(con, engine, table, empty.get(table), attached, sampled)
            except (duckdb.Error, EhrMagicError) as exc:
                con.execute(f"DROP VIEW IF EXISTS {_quote(table)}")
                con.execute(f"DROP TABLE IF EXISTS {_quote(table)}")
                notes.append(f"Table {table} cannot be read, so it is left out of the drafted knowledge: "
                             f"{_reason(exc)}")
                continue
            readable.append(table)
        if not readable:
            raise DatabaseError(f"No table of {engine.location} could be read, so no knowledge was drafted; "
                                f"{notes[-1] if notes else ''}".strip())
        extra = []
        if sampled:
            extra.append(f"Tables of more than {SERVER_SAMPLE:,} rows ({', '.join(sampled)}) were drafted from a "
                         f"fixed sample of about {SERVER_SAMPLE:,} of their rows: counts, ranges and value lists "
                         "describe that sample.")
        try:
            knowledge, _ = drafting.draft(con, {table: None for table in readable}, schema=schema, dataset=name,
                                          notes=tuple(extra), comments=catalog.comments, keys=catalog.keys,
                                          progress=progress)
        except duckdb.Error as exc:
            raise DatabaseError(f"Drafting knowledge for {engine.location} failed, so nothing was kept: "
                                f"{_reason(exc)}") from None
        clock = _clock_statement(con, knowledge, readable) if fill_for is None else ()
    finally:
        con.close()
    return _reworded(knowledge, engine, name, empty, clock, fill_for), len(readable) == len(tables)


def _copy(con: duckdb.DuckDBPyConnection, engine: Engine, table: str, empty: Mapping[str, str] | None,
          attached: bool, sampled: list[str]) -> None:
    """``table`` into the drafting connection: a view of the attached file, or a copy of (a sample
    of) a server's table; a header-only table as the empty table it stands for."""
    name = _quote(table)
    if empty is not None:
        con.execute(f"CREATE TABLE {name} AS {empty_select(empty)}")
    elif attached:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM {engine.attached_table('source', table)}")
        con.execute(f"SELECT * FROM {name} LIMIT 100").fetchall()  # a view that errors shows it here
    else:
        rows, total = engine.sample_arrow(table, SERVER_SAMPLE)
        con.register("_draft_arrow", rows)
        try:
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM _draft_arrow")
        finally:
            con.unregister("_draft_arrow")
        if total > rows.num_rows:
            sampled.append(table)


def _reason(exc: BaseException) -> str:
    text = " ".join((getattr(exc, "engine_message", None) or first_line(exc)).split())
    return text if text.endswith(".") else text + "."


def _clock_statement(con: duckdb.DuckDBPyConnection, knowledge: Knowledge, tables: list[str]) -> tuple[str, ...]:
    """The drafted clock as a column (``table.column`` whose latest value it is) when it is
    one, so that connecting reads its time from the data itself; else the time drafted."""
    from ehr_magic.knowledge.drafting.draft import is_end_time
    from ehr_magic.knowledge.drafting.profiling import column_types

    def query(sql: str, params: list[Any] | None) -> list[tuple]:
        return con.execute(sql, params).fetchall() if params else con.execute(sql).fetchall()

    described = column_types(con)
    columns = {t: dict(described.get(t, [])) for t in tables}
    found = data_clock.latest_in_data(columns, query, is_end_time)
    if found is None:
        return ()
    where = found.source.split(": ", 1)[-1]
    table, _, column = where.partition(".")
    highest = query(f"SELECT max({_quote(column)}) FROM {_quote(table)}", None)[0][0]
    if highest is not None and data_clock.parse_time(highest) == found.now:
        return (where,)
    return knowledge.clock


def _reworded(knowledge: Knowledge, engine: Engine, name: str, empty: Mapping[str, Mapping[str, str]],
              clock: tuple[str, ...], fill_for: str | None) -> Knowledge:
    """The drafter's words for a folder of files, said of a database."""
    tables = {}
    for table, info in knowledge.tables.items():
        if table in empty:
            info = dataclasses.replace(info, description=(
                "Empty: the table held only a copy of its own header row (an export's mistake), so ehr-magic "
                "reads it as an empty table with those columns."))
        tables[table] = info
    conventions = tuple(rule for rule in knowledge.conventions if "whole file" not in rule)
    measured = (f"Column types are the database's own ({engine.name}); ranges, value lists and empty shares were "
                "measured on the data, on a fixed sample of the biggest tables.")
    conventions = (measured, *conventions)
    if fill_for is not None:
        return dataclasses.replace(
            knowledge, title=f"{name}: tables {fill_for} does not describe", tables=tables, clock=(),
            conventions=conventions,
            introduction=(f"Tables of {name} that {fill_for} does not describe. This description was drafted from "
                          "the data by ehr-magic, not written by a person.\n"))
    intro = knowledge.introduction.split("\n", 1)
    first = (f"The {len(tables)} tables of {name}, a {engine.name} database ehr-magic did not build "
             f"({engine.location}). This description was drafted from the data by ehr-magic, not written by a "
             "person: check and improve it with %ehr knowledge in a notebook or ehr-magic data knowledge in a shell.")
    return dataclasses.replace(knowledge, title=f"{name} (a {engine.name} database, knowledge drafted from the data)",
                               introduction=first + "\n" + (intro[1] if len(intro) > 1 else ""), tables=tables,
                               conventions=conventions, clock=clock or knowledge.clock)


# -- keeping imported knowledge ----------------------------------------------------------------


def keep_imported(attachment: Attachment, knowledge: Knowledge) -> None:
    """Keep an imported knowledge file for the attached database (never in the database)."""
    attachment.write(knowledge.to_yaml(), FULL, imported=True)
