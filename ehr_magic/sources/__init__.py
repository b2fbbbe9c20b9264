"""Sources: plug-ins that turn something real into an EHR database file.

A source names its schema (which selects the knowledge file and memory entries) and
builds a DuckDB file atomically. The built-in sources are the fixed tuple
``BUILTIN_SOURCES``; a third-party package adds its own through the ``ehr_magic.sources``
entry point group (the value is a ``SourceSpec``), and a built-in keeps its name.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points

from ehr_magic.sources.loading import LoadReport, Progress
from ehr_magic.errors import DataSourceError

Loader = Callable[..., LoadReport]


@dataclass(frozen=True)
class SourceSpec:
    """One way to build a database: ``load(inputs, out, now=..., progress=...)``."""

    name: str
    schema: str
    summary: str
    inputs: str  # what the user passes, for help texts
    load: Loader
    options: tuple[str, ...] = ()  # extra keyword options ``load`` takes (e.g. "schema")


def _load_mimic_iv(inputs: Sequence[str], out: str, *, now: dt.datetime | str | None = None,
                   progress: Progress | None = None) -> LoadReport:
    from ehr_magic.sources import mimic_iv

    return mimic_iv.load(inputs, out, now=now, progress=progress)


def _load_mimic_iii(inputs: Sequence[str], out: str, *, now: dt.datetime | str | None = None,
                    progress: Progress | None = None) -> LoadReport:
    from ehr_magic.sources import mimic_iii

    return mimic_iii.load(inputs, out, now=now, progress=progress)


def _load_ehrsql(inputs: Sequence[str], out: str, *, now: dt.datetime | str | None = None,
                 progress: Progress | None = None) -> LoadReport:
    from ehr_magic.sources import ehrsql

    if len(inputs) != 1:
        raise DataSourceError("The ehrsql source takes one .sqlite file.")
    return ehrsql.load(inputs[0], out, now=now or ehrsql.EHRSQL_NOW, progress=progress)


def _load_eicu(inputs: Sequence[str], out: str, *, now: dt.datetime | str | None = None,
               progress: Progress | None = None) -> LoadReport:
    from ehr_magic.sources import eicu

    return eicu.load(inputs, out, now=now, progress=progress)


def _load_sqlite(inputs: Sequence[str], out: str, *, now: dt.datetime | str | None = None,
                 progress: Progress | None = None, schema: str | None = None) -> LoadReport:
    from ehr_magic.sources import sqlite_file

    return sqlite_file.load(inputs, out, now=now, progress=progress, schema=schema)


def _load_csv_folder(inputs: Sequence[str], out: str, *, now: dt.datetime | str | None = None,
                     progress: Progress | None = None, schema: str | None = None) -> LoadReport:
    """A folder of table files; one whose header rows are a packaged schema that has a loader of
    its own (MIMIC-III's files, eICU's) is loaded by that loader, as its name would have been, so it
    gets that schema's types and clock; if that loader cannot take the folder's layout, the folder
    is loaded as any other (then recognised after loading, as an OMOP CDM is: ``folder.load``)."""
    from ehr_magic.sources import folder

    if schema is None:
        found = folder.files_schema(inputs)
        spec = next((s for s in sources().values() if s.schema == found and s.name != "csv"
                     and s.inputs.startswith("DIR")), None)
        if spec is not None:
            try:
                return spec.load(inputs, out, now=now, progress=progress)
            except DataSourceError:
                pass  # not the layout its loader reads: load it as any folder
    return folder.load(inputs, out, now=now, progress=progress, schema=schema)


BUILTIN_SOURCES = (
    SourceSpec("mimic-iv", "mimic_iv", "MIMIC-IV hosp/ and icu/ CSV or parquet files (demo or full)",
               "DIR [DIR ...]", _load_mimic_iv),
    SourceSpec("mimic-iii", "mimic_iii", "MIMIC-III v1.4 CSV, CSV.gz or parquet files (demo or full)",
               "DIR [DIR ...]", _load_mimic_iii),
    SourceSpec("ehrsql", "ehrsql_mimic_iv", "an EHRSQL benchmark SQLite database (e.g. EHRSQL-2024 MIMIC-IV)",
               "FILE.sqlite", _load_ehrsql),
    SourceSpec("eicu", "eicu", "eICU-CRD v2.x CSV, CSV.gz or parquet files in one folder (demo or full)",
               "DIR [DIR ...]", _load_eicu),
    SourceSpec("csv", "csv_<folder>", "any folder of CSV or TSV (gzipped or not), parquet or spreadsheet files, "
               "one table per file (per sheet of a workbook), with knowledge drafted from the data", "DIR",
               _load_csv_folder, options=("schema",)),
    SourceSpec("sqlite", "sqlite_<file>", "any SQLite database file, one table per table or view, with knowledge "
               "drafted from the data", "FILE", _load_sqlite, options=("schema",)),
)


def sources() -> dict[str, SourceSpec]:
    """Every known source by name: the built-ins, then installed plug-ins."""
    found = {spec.name: spec for spec in BUILTIN_SOURCES}
    for entry in entry_points(group="ehr_magic.sources"):
        spec = entry.load()
        if isinstance(spec, SourceSpec):
            found.setdefault(spec.name, spec)
    return found


def load(name: str, inputs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
         now: dt.datetime | str | None = None, progress: Progress | None = None, **options: object) -> LoadReport:
    """Build ``out`` from ``inputs`` with the source called ``name`` (``options``: see ``SourceSpec.options``)."""
    known = sources()
    if name not in known:
        raise DataSourceError(f"Unknown source {name!r}; known sources: {', '.join(known)}.")
    spec = known[name]
    given = {key: value for key, value in options.items() if value is not None}
    unknown = [key for key in given if key not in spec.options]
    if unknown:
        raise DataSourceError(f"The {name} source takes no --{unknown[0]} option; leave it out.")
    return spec.load([str(i) for i in inputs], str(out), now=now, progress=progress, **given)
