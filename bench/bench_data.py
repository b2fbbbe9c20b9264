"""Data layer figures: MIMIC-IV demo load time, EHRSQL load time, and `ehr.lookup`
latency on the largest vocabulary, against a plain rapidfuzz scan of the same values
(the obvious implementation) measured in the same run.

    python bench/bench_data.py
Synthetic generation times and peak memory: bench/bench_synthetic.py.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from rapidfuzz import fuzz, process

import ehr_magic
from ehr_magic.text import normalise
from ehr_magic.sources import ehrsql
from ehr_magic.sources import mimic_iv

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
QUERIES = ["acute myocardial infarction", "heart attack", "congestive heart failure", "sepsis",
           "diabetes type 2 with complications", "pneumonia organism unspecified", "hypertnsion essential",
           "chronic kidney disease stage 3", "atrial fibrillation", "urinary tract infection"]


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        demo = Path(tmp) / "demo.duckdb"
        load_s = timed(lambda: mimic_iv.load([SHARED / "mimic-iv-clinical-database-demo-2.2",
                                              SHARED / "mimic-iv-demo-2.2-chartevents-reconstructed"], demo))
        ehrsql_s = timed(lambda: ehrsql.load(SHARED / "ehrsql-2024" / "mimic_iv.sqlite", Path(tmp) / "e.duckdb"))
        with ehr_magic.connect(demo) as ehr:
            rows = sum(ehr.count(t) for t in ehr.tables())
            print(f"MIMIC-IV demo load: {load_s:.1f} s ({len(ehr.tables())} tables, {rows:,} rows)")
            print(f"EHRSQL-2024 sqlite load: {ehrsql_s:.1f} s")
            sizes = {(t, c): ehr.sql(f'SELECT count(DISTINCT "{c}") AS n FROM "{t}"')["n"][0]
                     for t, c in [("d_icd_diagnoses", "long_title"), ("d_icd_procedures", "long_title"),
                                  ("d_hcpcs", "long_description"), ("d_labitems", "label"), ("d_items", "label")]}
            (table, column), size = max(sizes.items(), key=lambda item: item[1])
            build_s = timed(lambda: ehr.lookup(table, column, "warm up"))
            ours = []
            for q in QUERIES * 3:
                ours.append(timed(lambda q=q: ehr.lookup(table, column, q)) * 1000)
            values = [v for v in ehr.sql(f'SELECT DISTINCT "{column}" AS v FROM "{table}"')["v"].to_list()]
            normalised = [normalise(v) for v in values]
            plain = [timed(lambda q=q: process.extract(normalise(q), normalised, scorer=fuzz.WRatio, processor=None,
                                                       limit=5)) * 1000 for q in QUERIES]
        print(f"lookup on {table}.{column} ({size:,} distinct values): vocabulary built once in {build_s:.2f} s; "
              f"median {statistics.median(ours):.1f} ms, max {max(ours):.1f} ms per lookup; "
              f"plain rapidfuzz WRatio scan: median {statistics.median(plain):.0f} ms "
              f"({statistics.median(plain) / statistics.median(ours):.0f}x slower)")


if __name__ == "__main__":
    main()
