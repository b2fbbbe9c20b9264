"""Reading and replacing the knowledge stored with a database (``ehr-magic data knowledge``).

Export writes the knowledge an ``EHR`` uses (stored in the database, else the packaged
file of its schema) as a knowledge file the analyst can edit. Import validates the
edited file like a packaged one, then against the database itself (every table, column,
join and lookup column it names must exist), and only then replaces the stored
knowledge in one transaction: on a DuckDB file directly, on a server through the
engine's publish path (which swaps the table atomically).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import duckdb
import sqlglot
from rapidfuzz import process
from sqlglot import exp

from ehr_magic.data import knowledge as knowledge_files
from ehr_magic.data.build import write_knowledge
from ehr_magic.data.ehr import EHR, connect
from ehr_magic.data.knowledge import Knowledge
from ehr_magic.engines import is_url, publish
from ehr_magic.engines.base import first_line
from ehr_magic.errors import DataSourceError, EhrMagicError, sentences


def export_knowledge(target: str | os.PathLike[str], out: str | os.PathLike[str]) -> Knowledge:
    """Write the knowledge of ``target`` to the file ``out`` (replaced whole, never half written)."""
    with connect(target) as ehr:
        knowledge = ehr.knowledge
        if knowledge is None:
            raise EhrMagicError(f"{ehr.location} (schema {ehr.schema}) has no knowledge to export; "
                                "write one with --import FILE.yaml.")
    path = Path(out).expanduser()
    if not path.parent.is_dir():
        raise EhrMagicError(f"Folder {path.parent} does not exist; create it or choose another file.")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(knowledge.to_yaml(), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return knowledge


def import_knowledge(target: str | os.PathLike[str], source: str | os.PathLike[str]) -> Knowledge:
    """Validate the knowledge file ``source`` against ``target`` and store it there."""
    path = Path(source).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EhrMagicError(f"Cannot read knowledge file {path}: {first_line(exc)}.") from None
    with connect(target) as ehr:
        schema, location = ehr.schema, ehr.location
        declared = _declared_schema(text)
        if declared is not None and declared != schema:
            raise EhrMagicError(f"Knowledge file {path} describes schema {declared!r} but {location} has schema "
                                f"{schema!r}; write 'schema: {schema}' in the file. Nothing was imported.")
        knowledge = knowledge_files.parse(text, source=str(path), expected_schema=schema)
        check_against(knowledge, ehr, str(path))
    if is_url(target):
        _publish_knowledge(str(target), schema, knowledge.to_yaml())
    else:
        _write_file(Path(target).expanduser(), schema, knowledge.to_yaml())
    return knowledge


def check_against(knowledge: Knowledge, ehr: EHR, where: str) -> None:
    """Every table, column, join and lookup column of ``knowledge`` exists in ``ehr``."""
    tables = {name: ehr.columns(name) for name in ehr.tables()}
    for info in knowledge.tables.values():
        if info.name not in tables:
            _refuse(where, f"describes table {info.name!r}", info.name, list(tables), "is not in the database")
        columns = tables[info.name]
        for column in (*info.columns, *info.vocabulary):
            if column not in columns:
                _refuse(where, f"describes column {info.name}.{column}", column, list(columns),
                        f"is not a column of {info.name}")
        for join in info.joins:
            target = join.split()[0]
            for table, column in _join_columns(join, info.name, target, where):
                known = tables.get(table, {})
                if table and table not in (info.name, target):
                    _refuse(where, f"join {join!r} of {info.name} names table {table!r}", table,
                            [info.name, target], "the join does not involve")
                if column not in known and not (table == "" and any(column in tables.get(t, {})
                                                                     for t in (info.name, target))):
                    names = list(known) if table else list({**tables[info.name], **tables.get(target, {})})
                    _refuse(where, f"join {join!r} of {info.name} names column {column!r}", column, names,
                            f"is not a column of {table or info.name + ' or ' + target}")


def _join_columns(join: str, table: str, target: str, where: str) -> list[tuple[str, str]]:
    """``(table or "", column)`` for every column the join's condition names."""
    condition = join.split(None, 2)[2] if len(join.split(None, 2)) == 3 else ""
    try:
        tree = sqlglot.parse_one(f"SELECT 1 FROM {table} JOIN {target} ON {condition}", read="duckdb")
    except sqlglot.errors.SqlglotError:
        raise EhrMagicError(f"Knowledge file {where}: the condition of join {join!r} of {table} is not SQL; write "
                            "it like 'patients ON encounters.patient = patients.id'. Nothing was imported.") from None
    return [(column.table.lower(), column.name.lower()) for column in tree.find_all(exp.Column)]


def _refuse(where: str, what: str, name: str, choices: list[str], problem: str) -> None:
    close = process.extractOne(name, choices) if choices else None
    hint = f" (did you mean {close[0]!r}?)" if close and close[1] >= 70 else ""
    raise EhrMagicError(f"Knowledge file {where} {what}, which {problem}{hint}; nothing was imported.")


def _declared_schema(text: str) -> str | None:
    import yaml

    with contextlib.suppress(yaml.YAMLError):
        data = yaml.safe_load(text)
        if isinstance(data, dict) and isinstance(data.get("schema"), str):
            return data["schema"]
    return None


def _write_file(path: Path, schema: str, text: str) -> None:
    try:
        con = duckdb.connect(str(path))
    except duckdb.Error as exc:
        raise DataSourceError(f"Cannot open {path} for writing: {sentences(first_line(exc))} Close the notebooks "
                              "and programs that have it open, then import again.") from None
    try:
        con.execute("BEGIN TRANSACTION")
        write_knowledge(con, schema, text)
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
