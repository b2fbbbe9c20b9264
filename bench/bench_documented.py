"""A database that documents itself: what its comments (COMMENT ON) are worth to the first prompt.

Hospital warehouses abbreviate their names (HSP_ENC, FLWSHT_MEAS) or number them, and many
document them in the catalog, by hand or through dbt's ``persist_docs``. ehr-magic reads those
comments when it drafts the knowledge of a database it did not build. This bench builds, from
the warehouse-style renamed copy of the EHRSQL-2024 database (``ehr_magic.eval.renamed``),
DuckDB files ehr-magic did not build and connects to each as it is (knowledge drafted on
connect):

- "warehouse": the copy's abbreviated names, no comments;
- "warehouse, documented": the same, each table and column commented;
- "numbered": tables T01..T17 and columns C01.., no comments;
- "numbered, documented": the same, commented.

The comments stand for a warehouse's data dictionary: the packaged knowledge of the home
schema (one line per table, one per column, written by people), with every table and column
name in them replaced by the copy's own. For each database it prints gold-table coverage of
the first prompt on valid (listed, and described in full) at 8k and 4k, as bench_unfamiliar
does, and how long drafting took.

    python bench/bench_documented.py [--questions N] [--work DIR] [--copies DIR]

--copies: a folder holding the renamed copies (warehouse/ and warehouse.truth.json), built when
absent; --work keeps the built files between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_unfamiliar import EHRSQL, coverage, sample

import ehr_magic
from ehr_magic.eval import renamed
from ehr_magic.eval.datasets import load_split
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.knowledge import model as knowledge_files

HOME_SCHEMA = "ehrsql_mimic_iv"  # the packaged knowledge standing for the data dictionary
STYLE = "warehouse"


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def identifier_like(name: str) -> bool:
    """Whether a name reads as an identifier in prose (hadm_id, charttime), not as a plain word
    (age, route) that the documentation uses in its own sense."""
    return "_" in name or name.endswith(("time", "id", "uom"))


def renamer(tables: dict[str, str], columns: dict[str, dict[str, str]]):
    """A function rewriting documentation written for the home names into the copy's names."""
    words: dict[str, str] = dict(tables)
    for old_table, own in columns.items():
        for old, new in own.items():
            words[f"{old_table}.{old}"] = f"{tables[old_table]}.{new}"
            if identifier_like(old):
                words.setdefault(old, new)
    pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
                         + r")(?![\w])")
    return lambda text: pattern.sub(lambda m: words[m.group(1)], text)


def build(loaded: Path, out: Path, truth: dict, tables: dict[str, str], columns: dict[str, dict[str, str]],
          documented: bool) -> None:
    """The data tables of ``loaded`` (the copy as loaded; ``truth`` maps the home names to its
    own) under ``tables``/``columns``' names (home name -> this database's), with the home
    knowledge as comments when ``documented``."""
    home = knowledge_files.load(HOME_SCHEMA)
    rename = renamer(tables, columns)
    out.unlink(missing_ok=True)
    with duckdb.connect(str(out)) as con:
        con.execute(f"ATTACH {literal(str(loaded))} AS copy (READ_ONLY)")
        for old, new in tables.items():
            loaded_name = truth["tables"][old]["table"]
            items = ", ".join(f"{quote(truth['columns'][old][c].lower())} AS {quote(columns[old][c])}"
                              for c in truth["columns"][old])
            con.execute(f"CREATE TABLE {quote(new)} AS SELECT {items} FROM copy.{quote(loaded_name)}")
            if not documented:
                continue
            info = home.tables[old]
            con.execute(f"COMMENT ON TABLE {quote(new)} IS {literal(rename(f'{info.row} {info.description}'))}")
            for column, text in info.columns.items():
                if column in columns[old]:
                    con.execute(f"COMMENT ON COLUMN {quote(new)}.{quote(columns[old][column])} IS "
                                f"{literal(rename(text))}")


def numbered(tables: dict[str, str], columns: dict[str, dict[str, str]]):
    """Tables T01.. and columns C01.. (per table) in place of the copy's names."""
    order = sorted(tables)
    new_tables = {old: f"T{i:02d}" for i, old in enumerate(order, 1)}
    new_columns = {old: {c: f"C{j:02d}" for j, c in enumerate(columns[old], 1)} for old in order}
    return new_tables, new_columns


def gold(sql: str, names: dict[str, str]) -> set[str]:
    """The gold tables of a renamed question under ``names`` (copy table -> this database's)."""
    return {names[t.lower()] for t in renamed.gold_tables(sql)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=300, help="valid questions, evenly spread (0: all)")
    parser.add_argument("--work", help="folder that keeps the built databases")
    parser.add_argument("--copies", help="folder with the renamed copies (built when absent)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        # drafted knowledge is kept here, not in the user's folder, and drafted afresh every run
        os.environ["EHR_MAGIC_DATA_DIR"] = tempfile.mkdtemp(dir=tmp)
        copies = Path(args.copies) if args.copies else work / "copies"
        truth_file = copies / f"{STYLE}.truth.json"
        if not truth_file.is_file():
            renamed.build(STYLE, copies / STYLE, EHRSQL)
        truth = json.loads(truth_file.read_text())
        loaded = work / f"{STYLE}-loaded.duckdb"
        if not loaded.is_file():
            from ehr_magic import sources

            sources.load("csv", [copies / STYLE], loaded)
        texts = {i.id: i.question for i in load_split(EHRSQL, "valid")}
        items = sample(sorted(truth["questions"]["valid"].items()), args.questions)
        own_tables = {old: truth["tables"][old]["table"] for old in truth["tables"]}
        own_columns = {old: {c: new.lower() for c, new in cols.items()} for old, cols in truth["columns"].items()}
        layouts = {"warehouse": (own_tables, own_columns), "numbered": numbered(own_tables, own_columns)}
        for label, (tables, columns) in layouts.items():
            by_copy = {own_tables[old]: tables[old] for old in tables}
            questions = [(texts[q], gold(g["sql"], by_copy)) for q, g in items]
            for documented in (False, True):
                name = f"{label}{'-documented' if documented else ''}"
                path = work / f"{name}.duckdb"
                build(loaded, path, truth, tables, columns, documented)
                started = time.perf_counter()
                with ehr_magic.connect(path) as ehr:
                    seconds = time.perf_counter() - started
                    print(f"{label}{', documented' if documented else ''} (drafted on connect in {seconds:.1f} s), "
                          f"valid ({len(questions)} questions): {coverage(ehr, questions)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
