"""JSON files in a folder of table files: JSON Lines (.ndjson, .jsonl) and JSON arrays of objects
(.json), gzipped or not, such as a FHIR bulk export (``Patient.ndjson``, ``Observation_1.ndjson``).

Each object is a row. Nested objects become columns named by their path (``valueQuantity`` ->
``valueQuantity_value``, ``valueQuantity_unit``), so the table is flat as SQL wants it:

- a list of objects keeps its first entry's fields (a code's first coding, a patient's first
  name), said in a convention; a list of plain values is one text, its values joined by "; ";
- when the rows have an ``id``, a list of objects in them (or in their objects: ``code.coding``)
  that holds several entries in some row is a table of its own instead, every entry a row with
  the row's id and its place (``observation_component``: a blood pressure's systolic and diastolic
  readings; ``observation_code_coding``: a local code and its LOINC code);
- a reference to another record (``{"reference": "Patient/123"}``) becomes the id it points to
  (``subject_id`` = '123'), which then joins to that table's ``id`` as any key does;
- a file of FHIR resources (every object names the same ``resourceType``) is the table of that
  type: a bulk export's several files of one type make one table, a bundle's entries (Synthea
  writes a bundle per patient) go to the tables of their types, and what only serves the exchange
  (``meta``, the narrative ``text``, ``extension``s, ``contained`` resources) is left out.

Each table is written as a parquet file beside the output, which the folder loader then loads
and drafts like any other file. Types are read from every object (a field that appears late is
not missed); times with a zone become UTC, as in any file.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from ehr_magic.errors import DataSourceError
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.identifiers import text_literal

SUFFIXES = (".ndjson", ".jsonl", ".json", ".ndjson.gz", ".jsonl.gz", ".json.gz")
MAX_DEPTH = 5  # levels of nesting flattened; deeper values are kept as JSON text
MAX_COLUMNS = 300  # columns of one table, at most; the rest are left out, said in a convention
# FHIR's parts that carry the exchange, not the record: versions and profiles, the human-readable
# narrative (HTML), extensions, and resources contained in another.
_FHIR_EXCHANGE = {"meta", "text", "extension", "modifierExtension", "contained", "implicitRules", "language"}
_FHIR_EXTENSIONS = frozenset({"extension", "modifierExtension"})  # at any depth of a resource
_LIST_NOTE = ("In tables loaded from JSON files, a field holding a list of objects (a code's codings, a patient's "
              "names) keeps its first entry only; a list of plain values is one text, its values joined by '; '.")


def is_json_file(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES)


def converted_files(files: dict[str, Path], scratch: Path, name_of: Callable[[str], str],
                    progress: Callable[[str], None] | None = None) -> tuple[dict[str, Path], tuple[str, ...]]:
    """``files`` with the JSON files replaced by one parquet file per table written in ``scratch``
    (table -> file; FHIR resources grouped by type, named by ``name_of``), and the conventions
    their flattening adds."""
    tables: dict[str, Path] = {}
    groups: dict[str, list[Path]] = {}
    resources: set[str] = set()
    con = duckdb.connect(":memory:")
    try:
        for table, path in files.items():
            if not is_json_file(path):
                tables[table] = path
                continue
            if progress:
                progress(f"reading {path.name}")
            kind = _resource_type(con, path)
            if kind == "Bundle":  # a FHIR bundle (Synthea writes one per patient): its entries' resources
                for entry_kind, part in _bundle_parts(path, scratch / f"bundle-{len(groups)}-{path.name}"):
                    resources.add(name_of(entry_kind))
                    groups.setdefault(name_of(entry_kind), []).append(part)
                continue
            name = name_of(kind) if kind else table
            if kind:
                resources.add(name)
            groups.setdefault(name, []).append(path)
        notes: list[str] = []
        for name, paths in groups.items():
            if name in tables:
                raise DataSourceError(f"{paths[0]} holds table {name}, which file {tables[name]} already is; rename or "
                                      "move one of them.")
            folder = scratch / f"json-{len(tables)}"
            folder.mkdir()
            stem = _file_stem(paths[0]) if len(paths) == 1 else name
            written, said = _write_tables(con, name, stem, paths, folder, name_of, fhir=name in resources)
            for table, path in written.items():
                if table in tables or (table != name and table in files and not is_json_file(files[table])):
                    raise DataSourceError(f"The entries of {paths[0]} would become table {table}, which another file "
                                          "already is; rename or move one of them.")
                tables[table] = path
            notes += said
    finally:
        con.close()
    return tables, tuple(dict.fromkeys(notes))


def _file_stem(path: Path) -> str:
    suffix = next(s for s in SUFFIXES if path.name.lower().endswith(s))
    return path.name[: len(path.name) - len(suffix)]


def _reader(paths: list[Path], columns: dict[str, str] | None = None) -> str:
    """``read_json`` of ``paths``: its types found from every object, or given as ``columns``
    (name -> type), which reads only those (finding the types is a pass over the whole file)."""
    listed = ", ".join(text_literal(str(p)) for p in paths)
    typed = ("columns = {" + ", ".join(f"{text_literal(n)}: {text_literal(t)}" for n, t in columns.items()) + "}"
             if columns else "union_by_name = true, sample_size = -1")
    return f"read_json([{listed}], {typed}, maximum_object_size = 134217728)"


def _resource_type(con: duckdb.DuckDBPyConnection, path: Path) -> str | None:
    """The FHIR resource type every object of ``path`` names, if they all name the same one."""
    try:
        kinds = con.sql(f'SELECT DISTINCT "resourceType" FROM {_reader([path], {"resourceType": "VARCHAR"})} '
                        "LIMIT 2").fetchall()
    except duckdb.Error as exc:
        raise DataSourceError(_unreadable(path, exc)) from None
    return str(kinds[0][0]) if len(kinds) == 1 and kinds[0][0] else None


def _bundle_parts(path: Path, folder: Path) -> list[tuple[str, Path]]:
    """The resources of the entries of the FHIR bundles in ``path`` (one bundle, an array of them,
    or one a line), one JSON Lines file per resource type in ``folder``."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            text = handle.read()
        try:
            found = json.loads(text)
        except ValueError:  # one bundle a line
            found = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise DataSourceError(f"Cannot read FHIR bundle {path} ({exc}); check that it is whole JSON.") from None
    bundles = found if isinstance(found, list) else [found]
    by_kind: dict[str, list[str]] = {}
    for bundle in bundles:
        entries = bundle.get("entry") if isinstance(bundle, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            resource = entry.get("resource") if isinstance(entry, dict) else None
            if isinstance(resource, dict) and isinstance(resource.get("resourceType"), str):
                by_kind.setdefault(resource["resourceType"], []).append(json.dumps(resource))
    folder.mkdir()
    parts = []
    for kind, lines in by_kind.items():
        part = folder / f"{kind}.ndjson"
        part.write_text("\n".join(lines) + "\n", encoding="utf-8")
        parts.append((kind, part))
    return parts


def _unreadable(path: Path, exc: duckdb.Error) -> str:
    reason = " ".join(str(exc).split())[:300]
    return (f"Cannot read {path} as JSON ({reason}); a JSON file should hold one object per line, or an array of "
            "objects.")


def _write_tables(con: duckdb.DuckDBPyConnection, name: str, stem: str, paths: list[Path], folder: Path,
                  name_of: Callable[[str], str], *, fhir: bool) -> tuple[dict[str, Path], list[str]]:
    """Write the rows of ``paths`` flattened as table ``name`` (a parquet file named ``stem``, whose
    words drafting reads) in ``folder``; and, when the rows have an ``id``, each list of objects
    that holds more than one entry in some row as a table of its own (``observation_component``:
    one row per entry, with the row's id and the entry's place). The tables written (table ->
    file) and the conventions to say."""
    try:
        relation = con.sql(f"SELECT * FROM {_reader(paths)}")
        types = {column: str(dtype) for column, dtype in zip(relation.columns, relation.dtypes)}  # found once
        reader = _reader(paths, types)
        fields = [(column, dtype) for column, dtype in zip(relation.columns, relation.dtypes)
                  if not (fhir and (column in _FHIR_EXCHANGE or column == "resourceType"))]
        # a list with several entries in some row is a table of its own, and is not cut to its first
        # entry here (which would be one arbitrary reading of a blood pressure, one identifier of many,
        # a local code where the LOINC one is second)
        skipped = _FHIR_EXTENSIONS if fhir else frozenset()
        entries = _listed_entries(con, reader, fields, skipped) if "id" in relation.columns else []
        own = frozenset("_".join(path) for path, _ in entries)
        columns: list[tuple[str, str]] = []
        cut = False
        for column, dtype in fields:
            if column in own:
                continue
            found, listed = _flattened(quote(column), column, dtype, 1, skipped, own)
            columns += found
            cut = cut or listed
        notes = []
        if len(columns) > MAX_COLUMNS:
            notes.append(f"Table {name} of JSON files had {len(columns)} fields once flattened; the first "
                         f"{MAX_COLUMNS} were loaded.")
            columns = columns[:MAX_COLUMNS]
        written = {name: folder / f"{stem}.parquet"}
        _copy(con, f"SELECT {_select(columns)} FROM {reader}", written[name])
        for path, dtype in entries:
            alias, field = "_".join(path), ".".join(quote(part) for part in path)
            child = name_of(f"{name}_{alias}")
            found, _ = _flattened("entry", alias, dict(dtype.children)["child"], 2, skipped)
            written[child] = folder / f"{stem}_{alias}.parquet"
            # "list_index", not "<alias>_index": a column named for its list's codes would read as a code
            chosen = [("parent", f"{name}_id"), ("place", "list_index"), *found][:MAX_COLUMNS]
            _copy(con, f'SELECT {_select(chosen)} FROM (SELECT "id" AS parent, unnest({field}) AS entry, '
                       f"generate_subscripts({field}, 1) AS place FROM {reader})", written[child])
    except duckdb.Error as exc:
        raise DataSourceError(_unreadable(paths[0], exc)) from None
    if cut:
        notes.append(_LIST_NOTE)
    for path, _ in entries:
        alias = "_".join(path)
        notes.append(f"The {'.'.join(path)} list of table {name} holds several entries in some rows: each is a row of "
                     f"table {name_of(f'{name}_{alias}')}, with {name}_id and its place in the list (list_index, "
                     "from 1).")
    return written, notes


def _listed_entries(con: duckdb.DuckDBPyConnection, reader: str, fields: list[tuple[str, Any]],
                    skipped: frozenset[str]) -> list[tuple[tuple[str, ...], Any]]:
    """The lists of objects, in the rows or in their objects (``code.coding``), that hold more than
    one entry in some row: (path, type)."""
    lists: list[tuple[tuple[str, ...], Any]] = []

    def walk(path: tuple[str, ...], dtype: Any) -> None:
        if dtype.id == "list" and dict(dtype.children)["child"].id == "struct":
            lists.append((path, dtype))
        elif dtype.id == "struct" and len(path) <= MAX_DEPTH:
            for field, child in dtype.children:
                if field not in skipped:
                    walk((*path, field), child)

    for column, dtype in fields:
        walk((column,), dtype)
    if not lists:
        return []
    lengths = ", ".join(f"max(len({'.'.join(quote(p) for p in path)}))" for path, _ in lists)
    longest = con.execute(f"SELECT {lengths} FROM {reader}").fetchone()
    return [found for found, most in zip(lists, longest or ()) if most and most > 1]


def _select(columns: list[tuple[str, str]]) -> str:
    return ", ".join(f"{expression} AS {quote(alias)}" for expression, alias in _distinct(columns))


def _copy(con: duckdb.DuckDBPyConnection, query: str, out: Path) -> None:
    literal = str(out).replace("'", "''")
    con.execute(f"COPY ({query}) TO '{literal}' (FORMAT parquet)")


def _flattened(expression: str, alias: str, dtype: Any, depth: int, skipped: frozenset[str] = frozenset(),
               own: frozenset[str] = frozenset()) -> tuple[list[tuple[str, str]], bool]:
    """(SQL expression, column name) pairs of one field, nested fields as their own columns (but
    those named in ``skipped``, and the lists whose column name is in ``own``: tables of their own);
    and whether a list of objects was cut to its first entry."""
    kind = dtype.id
    if kind == "struct" and depth <= MAX_DEPTH:
        fields = dict(dtype.children)
        if "reference" in fields and str(fields["reference"]) == "VARCHAR":
            # "Patient/123", "urn:uuid:123" -> '123', the id that joins; the rest of the reference is said
            # by its display, when it has one
            pairs = [(f"regexp_extract({expression}.reference, '([^/:]+)$', 1)", f"{alias}_id")]
            if "display" in fields:
                pairs.append((f"{expression}.display", f"{alias}_display"))
            return pairs, False
        pairs, cut = [], False
        for field, child in fields.items():
            if field in skipped or f"{alias}_{field}" in own:
                continue
            found, listed = _flattened(f"{expression}.{quote(field)}", f"{alias}_{field}", child, depth + 1, skipped,
                                       own)
            pairs += found
            cut = cut or listed
        return pairs, cut
    if kind == "list":
        child = dict(dtype.children)["child"]
        if child.id == "struct" and depth <= MAX_DEPTH:
            found, _ = _flattened(f"{expression}[1]", alias, child, depth + 1, skipped)
            return found, True
        if child.id not in ("struct", "list", "map", "union"):
            return [(f"nullif(array_to_string({expression}, '; '), '')", alias)], False
    if kind in ("struct", "list", "map", "union") or str(dtype) == "JSON":
        return [(f"CAST(to_json({expression}) AS VARCHAR)", alias)], False
    return [(expression, alias)], False


def _distinct(columns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Column names unique whatever their case (two paths may flatten to one name)."""
    taken: set[str] = set()
    unique = []
    for expression, alias in columns:
        name, n = alias, 0
        while name.lower() in taken:
            n += 1
            name = f"{alias}_{n}"
        taken.add(name.lower())
        unique.append((expression, name))
    return unique
