"""``ehr-magic demo``: build (once) and describe the demo database."""

from __future__ import annotations

import argparse

from ehr_magic.cli.progress import progress_bar, stderr
from ehr_magic.data import connect
from ehr_magic.data.demo import demo_database


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="build the demo database and show what it holds",
                            description="Build the demo database (the MIMIC-IV demo when it can be fetched, "
                            "otherwise synthetic data) and show what it holds.")
    parser.add_argument("--synthetic", action="store_true", help="use the built-in synthetic data")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the database even if cached")
    parser.add_argument("--url", help="where to fetch the MIMIC-IV demo from")
    parser.add_argument("--no-browser", action="store_true", help="do not open JupyterLab")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with progress_bar("building the demo database") as progress:
        demo = demo_database(synthetic_only=args.synthetic, rebuild=args.rebuild, url=args.url,
                             progress=progress, say=lambda line: stderr.print(line))
    with connect(demo.path) as ehr:
        info = ehr.info()
    print(f"Demo database: {demo.reason}")
    print(f"  file    {demo.path}")
    print(f"  schema  {info['schema']}   now {info['now']}")
    total = sum(info["tables"].values())
    print(f"  {len(info['tables'])} tables, {total:,} rows:")
    for table, rows in sorted(info["tables"].items(), key=lambda item: -item[1]):
        print(f"    {table:<22} {rows:>10,}")
    return 0
