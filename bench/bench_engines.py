"""Engines figures, both measured in this run against a baseline of the same run.

1. The EHRSQL-2024 valid questions (oracle SQL: gold SQLite -> DuckDB SQL, translated
   once, outside the timing) on every engine of ``ENGINE_TARGETS``: median time per
   question of ``ehr.sql`` (transpilation to the engine's dialect included) and the ratio
   to DuckDB. Each engine gets the same database (the DuckDB file published to it).
2. An EHRAgent-style baseline at 10k synthetic patients: EHRAgent's tools (LoadDB,
   FilterDB, GetValue) read a table's CSV with pandas on every call and filter it in
   memory. The same EHRSQL-style questions are answered by that baseline and by one
   ``ehr.sql`` each on the DuckDB file; the answers are checked equal, and the ratio of
   median times is printed (goal: DuckDB at least 50x faster).

    python bench/bench_engines.py [--limit N] [--patients 10000] [--reps 3]

PostgreSQL: a throwaway server is started (Debian's initdb/pg_ctl, as in the tests);
set ``EHR_BENCH_POSTGRES=postgresql://...`` to use an existing, empty database instead.
pandas appears here only, as the baseline; ehr_magic itself never uses it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import ehr_magic
from ehr_magic.sources import ehrsql
from ehr_magic.sources import synthetic
from ehr_magic.engines import publish
from ehr_magic.eval import load_split
from ehr_magic.eval.sqlite_dialect import translator_for

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
sys.path.insert(0, str(REPO / "tests"))  # the throwaway PostgreSQL and Spark Connect servers of the tests


# -- engines ----------------------------------------------------------------------------------


@contextlib.contextmanager
def duckdb_target(duckdb_file: Path) -> Iterator[str | None]:
    yield str(duckdb_file)


@contextlib.contextmanager
def postgres_target(duckdb_file: Path, database: str = "bench", schema: str | None = None) -> Iterator[str | None]:
    """A URL of ``duckdb_file``'s tables in PostgreSQL (in ``schema``, on the search path, when given):
    EHR_BENCH_POSTGRES (an existing, empty database), else a throwaway server; None without one."""
    url = os.environ.get("EHR_BENCH_POSTGRES")
    if url:
        target = url + ("&" if "?" in url else "?") + f"search_path={schema}" if schema else url
        publish(duckdb_file, target)
        yield target
        return
    from servers import pg_bindir, postgres_server

    if pg_bindir() is None:
        print("PostgreSQL: skipped (no initdb; run .ci/install-servers or set EHR_BENCH_POSTGRES)")
        yield None
        return
    with postgres_server() as server:
        server.execute(f"CREATE DATABASE {database}")
        target = server.url(database, query=f"search_path={schema}") if schema else server.url(database)
        publish(duckdb_file, target)
        yield target


@contextlib.contextmanager
def spark_target(duckdb_file: Path) -> Iterator[str | None]:
    url = os.environ.get("EHR_BENCH_SPARK")  # sc://host:port/;database=... of an existing server
    if url:
        publish(duckdb_file, url)
        yield url
        return
    from spark_server import spark_connect_server, spark_home

    if spark_home() is None:
        print("Spark: skipped (no pyspark; pip install 'ehr-magic[spark]' or set EHR_BENCH_SPARK)")
        yield None
        return
    with spark_connect_server() as server:
        publish(duckdb_file, server.url("bench"))
        yield server.url("bench")


# Engine name -> context manager that serves the benchmark database there (None: unavailable).
ENGINE_TARGETS: dict[str, Callable[[Path], contextlib.AbstractContextManager[str | None]]] = {
    "DuckDB": duckdb_target,
    "PostgreSQL": postgres_target,
    "Spark": spark_target,
}


def bench_engines(limit: int | None, reps: int, work: Path) -> None:
    db = work / "ehrsql.duckdb"
    ehrsql.load(SHARED / "ehrsql-2024" / "mimic_iv.sqlite", db)
    items = [item for item in load_split(SHARED / "ehrsql-2024", "valid") if item.gold_sql is not None][:limit]
    with ehr_magic.connect(db) as ehr:
        translator = translator_for(ehr)
        queries = [translator.translate(item.gold_sql) for item in items]
    medians: dict[str, float] = {}
    for name, target_of in ENGINE_TARGETS.items():
        with target_of(db) as target:
            if target is None:
                continue
            with ehr_magic.connect(target) as ehr:
                for sql in queries:  # warm-up: caches, connections, plans
                    ehr.sql(sql)
                per_question = []
                for sql in queries:
                    times = []
                    for _ in range(reps):
                        started = time.perf_counter()
                        ehr.sql(sql)
                        times.append(time.perf_counter() - started)
                    per_question.append(statistics.median(times))
            medians[name] = statistics.median(per_question)
            total = sum(per_question)
            ratio = medians[name] / medians["DuckDB"]
            print(f"{name:<11} {len(queries)} EHRSQL valid questions: median {medians[name] * 1000:7.2f} ms per "
                  f"question, total {total:6.2f} s, {ratio:5.1f}x DuckDB's median")


# -- the EHRAgent-style baseline ----------------------------------------------------------------


class CsvTools:
    """EHRAgent's tools over CSV files: every call reads the table's file again."""

    def __init__(self, folder: Path) -> None:
        import pandas

        self.pd = pandas
        self.folder = folder
        self.calls = 0

    def load_db(self, table: str):
        self.calls += 1
        return self.pd.read_csv(self.folder / f"{table}.csv", low_memory=False)

    def filter_db(self, table: str, **equal: object):
        frame = self.load_db(table)
        for column, value in equal.items():
            frame = frame[frame[column] == value]
        return frame

    def get_value(self, table: str, column: str, **equal: object) -> list:
        return self.filter_db(table, **equal)[column].tolist()


def _last_visit(tools: CsvTools, subject: int) -> int:
    visits = tools.filter_db("admissions", subject_id=subject).sort_values("admittime")
    return int(visits["hadm_id"].iloc[-1])


def _item(tools: CsvTools, table: str, label: str) -> list:
    return tools.get_value(table, "itemid", label=label)


def baseline_last_lab(tools: CsvTools, subject: int, label: str):
    hadm, items = _last_visit(tools, subject), _item(tools, "d_labitems", label)
    labs = tools.filter_db("labevents", hadm_id=hadm)
    labs = labs[labs["itemid"].isin(items) & labs["valuenum"].notna()].sort_values("charttime")
    return None if labs.empty else float(labs["valuenum"].iloc[-1])


def baseline_visits(tools: CsvTools, subject: int, _: str):
    return len(tools.filter_db("admissions", subject_id=subject))


def baseline_mean_vital(tools: CsvTools, subject: int, label: str):
    items = _item(tools, "d_items", label)
    chart = tools.filter_db("chartevents", subject_id=subject)
    values = chart[chart["itemid"].isin(items)]["valuenum"].dropna()
    return None if values.empty else round(float(values.mean()), 3)


def baseline_drugs(tools: CsvTools, subject: int, _: str):
    drugs = sorted(set(tools.get_value("prescriptions", "drug", hadm_id=_last_visit(tools, subject))))
    return drugs if len(drugs) > 1 else (drugs[0] if drugs else None)


def baseline_first_icu_los(tools: CsvTools, subject: int, _: str):
    stays = tools.filter_db("icustays", subject_id=subject).sort_values("intime")
    return None if stays.empty else round(float(stays["los"].iloc[0]), 3)


def baseline_diagnosed(tools: CsvTools, _: int, title: str):
    codes = tools.get_value("d_icd_diagnoses", "icd_code", long_title=title)
    diagnoses = tools.load_db("diagnoses_icd")
    return int(diagnoses[diagnoses["icd_code"].isin(codes)]["subject_id"].nunique())


# (question, DuckDB SQL with $subject/$value, baseline, which value: lab/vital/title/none)
QUESTIONS = [
    ("last {value} value of patient {subject} during the last hospital visit",
     "SELECT valuenum FROM labevents WHERE hadm_id = (SELECT hadm_id FROM admissions WHERE subject_id = $subject "
     "ORDER BY admittime DESC LIMIT 1) AND itemid IN (SELECT itemid FROM d_labitems WHERE label = $value) "
     "AND valuenum IS NOT NULL ORDER BY charttime DESC LIMIT 1", baseline_last_lab, "lab"),
    ("number of hospital visits of patient {subject}",
     "SELECT count(*) FROM admissions WHERE subject_id = $subject", baseline_visits, None),
    ("mean {value} of patient {subject}",
     "SELECT round(avg(valuenum), 3) FROM chartevents WHERE subject_id = $subject AND itemid IN "
     "(SELECT itemid FROM d_items WHERE label = $value)", baseline_mean_vital, "vital"),
    ("drugs prescribed to patient {subject} during the last hospital visit",
     "SELECT DISTINCT drug FROM prescriptions WHERE hadm_id = (SELECT hadm_id FROM admissions WHERE subject_id = "
     "$subject ORDER BY admittime DESC LIMIT 1) ORDER BY drug", baseline_drugs, None),
    ("length of the first ICU stay of patient {subject}",
     "SELECT round(los, 3) FROM icustays WHERE subject_id = $subject ORDER BY intime LIMIT 1",
     baseline_first_icu_los, None),
    ("number of patients diagnosed with {value}",
     "SELECT count(DISTINCT subject_id) FROM diagnoses_icd WHERE icd_code IN (SELECT icd_code FROM d_icd_diagnoses "
     "WHERE long_title = $value)", baseline_diagnosed, "title"),
]


def _answer(frame) -> object:
    if frame.height == 0:
        return None
    if frame.width == 1 and frame.height > 1:
        return sorted(frame.to_series().to_list())
    value = frame.item()
    return round(float(value), 3) if isinstance(value, float) else value


def bench_baseline(patients: int, per_template: int, work: Path) -> None:
    db = work / "synthetic.duckdb"
    csv = work / "csv"
    csv.mkdir()
    synthetic.generate(db, patients=patients)
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        for (table,) in con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
                                    "AND table_name NOT LIKE '\\_%' ESCAPE '\\'").fetchall():
            con.execute(f"COPY \"{table}\" TO '{csv / (table + '.csv')}' (HEADER)")
    tools = CsvTools(csv)
    ours: list[float] = []
    theirs: list[float] = []
    with ehr_magic.connect(db) as ehr:
        subjects = ehr.sql("SELECT DISTINCT a.subject_id FROM admissions a JOIN icustays i USING (subject_id) "
                           f"ORDER BY 1 LIMIT {per_template}").to_series().to_list()
        values = {
            "lab": ehr.sql("SELECT d.label FROM labevents l JOIN d_labitems d USING (itemid) GROUP BY 1 "
                           "ORDER BY count(*) DESC, 1 LIMIT 1").item(),
            "vital": ehr.sql("SELECT d.label FROM chartevents c JOIN d_items d USING (itemid) GROUP BY 1 "
                             "ORDER BY count(*) DESC, 1 LIMIT 1").item(),
            "title": ehr.sql("SELECT d.long_title FROM diagnoses_icd x JOIN d_icd_diagnoses d USING (icd_code) "
                             "GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1").item(),
        }
        calls_before = 0
        for question, sql, baseline, kind in QUESTIONS:
            for subject in subjects:
                value = values[kind] if kind else ""
                started = time.perf_counter()
                params = {k: v for k, v in (("subject", subject), ("value", value)) if f"${k}" in sql}
                mine = _answer(ehr.sql(sql, params))
                ours.append(time.perf_counter() - started)
                started = time.perf_counter()
                reference = baseline(tools, subject, value)
                theirs.append(time.perf_counter() - started)
                if mine != reference:
                    raise AssertionError(f"{question.format(subject=subject, value=value)}: DuckDB {mine!r} != "
                                         f"baseline {reference!r}")
        calls = tools.calls - calls_before
    n = len(ours)
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(f"EHRAgent-style baseline, {patients:,} synthetic patients, {n} questions ({len(QUESTIONS)} EHRSQL-style "
          f"templates), same answers: pandas re-reading CSVs ({calls} tool calls) median "
          f"{statistics.median(theirs) * 1000:.0f} ms per question; DuckDB ehr.sql median "
          f"{statistics.median(ours) * 1000:.2f} ms; DuckDB is {ratio:,.0f}x faster (goal >= 50x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, help="only the first N answerable valid questions")
    parser.add_argument("--reps", type=int, default=3, help="timed runs per question and engine (default 3)")
    parser.add_argument("--patients", type=int, default=10_000, help="synthetic patients for the baseline")
    parser.add_argument("--parts", default="engines,baseline", help="what to measure (default engines,baseline)")
    parser.add_argument("--per-template", type=int, default=4, help="baseline questions per template (default 4)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        if "engines" in args.parts:
            bench_engines(args.limit, args.reps, Path(tmp))
        if "baseline" in args.parts:
            bench_baseline(args.patients, args.per_template, Path(tmp))


if __name__ == "__main__":
    main()
