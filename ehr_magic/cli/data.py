"""``ehr-magic data``: build, fetch and inspect EHR database files."""

from __future__ import annotations

import argparse
import json
import sys

from ehr_magic.cli.arguments import positive_int
from ehr_magic.cli.progress import progress_bar
from ehr_magic.db import connect
from ehr_magic import sources
from ehr_magic.knowledge import model as knowledge_files
from ehr_magic.sources import fetch
from ehr_magic.engines import output, redact


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("data", help="build, fetch and inspect EHR database files",
                            description="Build, fetch and inspect EHR database files.")
    data = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    synth = data.add_parser("synth", help="generate a synthetic MIMIC-IV-shaped database")
    synth.add_argument("--patients", type=positive_int, default=100, help="number of patients (default 100)")
    synth.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same data")
    synth.add_argument("--out", required=True, help="output file (synthetic.duckdb) or server URL (postgresql://...)")
    synth.add_argument("--quiet", action="store_true", help="no progress bar")
    synth.set_defaults(func=run_synth)

    known = sources.sources()
    load = data.add_parser("load", help="load a dataset's files into a database",
                           description="Load a dataset's files into a database. Sources: "
                           + "; ".join(f"{s.name} {s.inputs}: {s.summary}" for s in known.values()))
    load.add_argument("source", choices=sorted(known), help="kind of input")
    load.add_argument("inputs", nargs="+", help="input folder(s) or file")
    load.add_argument("--out", required=True, help="output file (mimic.duckdb) or server URL "
                      "(postgresql://user@host/db[?search_path=schema], sc://host:15002[/;database=name])")
    load.add_argument("--now", help="override the dataset's current time, e.g. '2180-01-01 00:00:00'")
    drafted = [spec for spec in known.values() if "schema" in spec.options]  # sources whose knowledge is drafted
    load.add_argument("--schema", help=f"{' and '.join(spec.name for spec in drafted)} only: the schema id that keys "
                      f"knowledge and memory (default {', '.join(spec.schema for spec in drafted)})")
    load.add_argument("--quiet", action="store_true", help="no progress bar")
    load.set_defaults(func=run_load)

    know = data.add_parser("knowledge", help="show, export or import the knowledge of a database",
                           description="Show the knowledge (table and column descriptions, joins, lookup columns) "
                           "a database is described with; export it to a YAML file to read and edit, and import "
                           "the edited file back (validated against the database first).")
    know.add_argument("file", help="a .duckdb file built by ehr-magic, or a server URL")
    action = know.add_mutually_exclusive_group()
    action.add_argument("--export", metavar="FILE.yaml", help="write the knowledge to this file")
    action.add_argument("--import", dest="import_file", metavar="FILE.yaml",
                        help="replace the stored knowledge with this file")
    know.set_defaults(func=run_knowledge)

    get = data.add_parser("fetch", help="download an open dataset, or take a local copy (checksums verified)")
    get.add_argument("dataset", choices=["mimic-iv-demo"], help="what to download")
    origin = get.add_mutually_exclusive_group()
    origin.add_argument("--url", help=f"base URL (default {fetch.MIMIC_IV_DEMO_URL})")
    origin.add_argument("--from", dest="local", nargs="+", action="extend", metavar="DIR",
                        help="copy from a local copy instead of downloading (the folder with hosp/ and icu/; "
                        "add a second folder for files it lacks)")
    get.add_argument("--dir", help="target folder (default: the user cache)")
    get.add_argument("--quiet", action="store_true", help="no progress bar")
    get.set_defaults(func=run_fetch)

    info = data.add_parser("info", help="tables, row counts and clock of a database")
    info.add_argument("file", help="a .duckdb file built by ehr-magic, or a server URL")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=run_info)


def run_synth(args: argparse.Namespace) -> int:
    from ehr_magic.sources import synthetic

    with progress_bar("generating", quiet=args.quiet) as progress, output(args.out, progress) as out:
        counts = synthetic.generate(out, patients=args.patients, seed=args.seed, progress=progress)
    print(f"Wrote {redact(args.out)}: synthetic MIMIC-IV-shaped data, {args.patients} patients, seed {args.seed}, "
          f"{sum(counts.values()):,} rows in {len(counts)} tables.")
    return 0


def run_load(args: argparse.Namespace) -> int:
    with progress_bar(f"loading {args.source}", quiet=args.quiet) as progress, output(args.out, progress) as out:
        report = sources.load(args.source, args.inputs, out, now=args.now, progress=progress, schema=args.schema)
    clock = (f"now = {report.now}" if report.now else "no dates (times are offsets in minutes)"
             if report.time_model == "offset" else "no clock: no dates in the data")
    print(f"Wrote {redact(args.out)}: {len(report.tables)} tables, {report.total_rows:,} rows, {clock}.")
    drafts = "schema" in sources.sources()[args.source].options
    if drafts and report.schema in knowledge_files.available():  # files or tables found to be a packaged schema
        from ehr_magic.db import schemas

        title = schemas.plugin(report.schema).title or knowledge_files.load(report.schema).title
        print(f"Recognised as {title} (schema {report.schema}): its packaged knowledge describes the tables, "
              "and memory is shared with the other databases of that schema.")
    for table in report.missing:
        print(f"warning: table {table} not found in the input; skipped.", file=sys.stderr)
    for table, file in report.empty.items():
        print(f"warning: {file} is empty (not even a header row), so table {table} was skipped.", file=sys.stderr)
    for table, (file, text) in report.footers.items():
        print(f"note: the last lines of {file} ({text!r}) are a report's footer, not rows of table {table}; "
              "they were left out.", file=sys.stderr)
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    if args.local:
        report = fetch.copy_mimic_iv_demo(args.local, args.dir)
        print(f"{report.directory}: {len(report.downloaded)} files copied, {len(report.already_present)} already "
              "there; every table present, every published checksum verified.")
    else:
        with progress_bar("downloading", quiet=args.quiet) as progress:
            report = fetch.fetch_mimic_iv_demo(args.url, args.dir, progress=progress)
        print(f"{report.directory}: {len(report.downloaded)} files downloaded, "
              f"{len(report.already_present)} already present, all checksums verified.")
    for name in report.unverified:
        print(f"warning: {name} is not verified, as no checksum is published for it.", file=sys.stderr)
    if report.missing_on_server:
        print(f"warning: {', '.join(report.missing_on_server)} listed in SHA256SUMS.txt but missing on the server, "
              "so the copy is incomplete and the demo will not be built from it.", file=sys.stderr)
        return 1
    return 0


def run_info(args: argparse.Namespace) -> int:
    with progress_bar("connecting", quiet=args.json) as progress, connect(args.file, progress=progress) as ehr:
        info, notes = ehr.info(), ehr.connect_notes()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    clock = "time offsets (no dates)" if info["time_model"] == "offset" else info["clock"]
    print(f"{info['path']}\n  dataset {info['dataset']}  schema {info['schema']}  {clock}")
    for note in notes:
        print(f"  {note}")
    width = max(len(t) for t in info["tables"]) if info["tables"] else 0
    for table, rows in info["tables"].items():
        print(f"  {table:<{width}}  {rows:>12,}")
    return 0


def run_knowledge(args: argparse.Namespace) -> int:
    from ehr_magic.db import knowledge_io

    if args.export:
        exported = knowledge_io.export_knowledge(args.file, args.export)
        print(f"Wrote {args.export}: knowledge of schema {exported.schema}, {len(exported.tables)} tables. "
              f"Edit it, then: ehr-magic data knowledge {redact(args.file)} --import {args.export}")
        return 0
    if args.import_file:
        imported = knowledge_io.import_knowledge(args.file, args.import_file)
        print(f"Imported {args.import_file} into {redact(args.file)}: schema {imported.schema}, "
              f"{len(imported.tables)} tables described. Notebooks already connected to it see it once they "
              "connect again (%ehr connect).")
        return 0
    from ehr_magic.knowledge.view import knowledge_view

    with progress_bar("connecting") as progress, connect(args.file, progress=progress) as ehr:
        knowledge, tables, stored, attached = ehr.knowledge, ehr.tables(), ehr.stored_knowledge, ehr.attachment
        view = knowledge_view(ehr)
        print(f"{ehr.location}\n  schema {ehr.schema}  {ehr.clock_text}")
        for note in ehr.connect_notes():
            print(f"  {note}")
    if knowledge is None:
        print("  no knowledge: the model sees bare table and column names. Write a knowledge file and import it: "
              f"ehr-magic data knowledge {redact(str(args.file))} --import FILE.yaml (in a notebook: "
              "%ehr knowledge import FILE.yaml).")
        return 0
    # An attached database's knowledge is kept in the user's data folder, never in the database.
    origin = view.origin if attached else "stored in the database" if stored else f"packaged ({knowledge.source})"
    joins = sum(len(info.joins) for info in knowledge.tables.values())
    undescribed = [t for t in tables if t not in knowledge.tables]
    print(f"  knowledge: {knowledge.title}, {origin}")
    print(f"  {len(knowledge.tables)} tables described, {joins} joins, "
          f"{len(knowledge.vocabulary_columns())} lookup columns"
          + (f"; not described: {', '.join(undescribed)}" if undescribed else ""))
    counts = view.counts()
    print(f"  {counts['drafted']} statements drafted by ehr-magic, {counts['confirmed']} written or confirmed "
          f"by a person; the clock is {view.clock.mark}")
    width = max(len(name) for name in knowledge.tables)
    for table in view.tables:
        if table.name in knowledge.tables:
            print(f"  {table.name:<{width}}  [{table.meaning_mark}] {knowledge.tables[table.name].row}")
    print(f"Read or edit it all: ehr-magic data knowledge {redact(str(args.file))} --export FILE.yaml, then "
          "--import FILE.yaml (in a notebook: %ehr knowledge edit, then %ehr knowledge import FILE).")
    return 0
