"""Memory reuse without the model: accuracy on EHRSQL-2024 and latency.

    # valid with memory from train (the eval harness, zero model calls), per template
    python bench/bench_reuse.py eval --db /tmp/ehrsql.duckdb --split valid --memory-from train
    # swapped roles: memory from valid, questions from train
    python bench/bench_reuse.py eval --db /tmp/ehrsql.duckdb --split train --memory-from valid
    # threshold / margin sweep on one run's candidates (no re-run per setting)
    python bench/bench_reuse.py sweep --db /tmp/ehrsql.duckdb --split valid --memory-from train
    # latency with 5,000 remembered cells
    python bench/bench_reuse.py latency --db /tmp/ehrsql.duckdb --entries 5000
    # the MIMIC-IV demo schema, the packaged seeds as memory, reworded questions
    python bench/bench_reuse.py mimic --db /tmp/mimic.duckdb

Build the database with `ehr-magic data load ehrsql ../shared/data/ehrsql-2024/mimic_iv.sqlite
--out /tmp/ehrsql.duckdb`. Nothing here is tuned to the benchmark's templates: the
reuse code only sees memory (the --memory-from split's questions and gold code) and
the database.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATASET = REPO.parent / "shared" / "data" / "ehrsql-2024"


def run_eval(args: argparse.Namespace) -> None:
    from ehr_magic.eval import evaluate
    from ehr_magic.eval.report import summary_lines

    report = evaluate(args.dataset, args.split, args.db, mode="memory", memory_from=args.memory_from,
                      out=args.out, limit=args.limit,
                      options={"reuse": {"threshold": args.threshold, "margin": args.margin}})
    print("\n".join(summary_lines(report)))
    m = report.metrics
    print(f"  answered share {m['cr']:.1f}%  precision on answered {m['precision'] or 0:.2f}%  "
          f"wrong answers {m['wrong_answers']}  answered unanswerable {m['answered_unanswerable']}  "
          f"median {m['median_seconds'] * 1000:.1f} ms/question")
    print("\nper template (n, answered, correct, precision, RS(10)):")
    for name, row in m["per_template"].items():
        precision = f"{row['precision']:.0f}%" if row["precision"] is not None else "-"
        print(f"  {row['n']:4d} {row['answered']:4d} {row['correct']:4d} {precision:>5} {row['rs10']:8.1f}  "
              f"{name[:110]}")
    if args.json:
        Path(args.json).write_text(json.dumps(m, indent=2))


def run_sweep(args: argparse.Namespace) -> None:
    """Score every candidate once, then replay the decision for many thresholds."""
    from ehr_magic.db import connect
    from ehr_magic.eval import load_split
    from ehr_magic.eval.answerers import gold_examples
    from ehr_magic.eval.scoring import normalize_answer
    from ehr_magic.eval.sqlite_dialect import translator_for
    from ehr_magic.reuse import Reuser

    with connect(args.db) as ehr:
        memory = gold_examples(load_split(args.dataset, args.memory_from), translator_for(ehr))
        reuser = Reuser(ehr, threshold=0.0, margin=0.0)
        reuser.add_many((i, e.question, e.code, "imported") for i, e in enumerate(memory))
        items = list(load_split(args.dataset, args.split))[: args.limit]
        rows = []
        for item in items:
            result = reuser.answer(item.question)
            margin = result.margin
            ok = (result.answered and item.gold_answer is not None
                  and normalize_answer(result.answer) == item.gold_answer)
            rows.append((result.answered, result.score, margin, ok, item.gold_answer is None))
    n, nulls = len(rows), sum(r[4] for r in rows)
    print(f"{n} questions, {nulls} unanswerable")
    for threshold in (0.3, 0.35, 0.4, 0.45, 0.5, 0.6):
        for margin in (0.0, 0.05, 0.1):
            chosen = [r for r in rows if r[0] and r[1] >= threshold and r[2] >= margin]
            correct = sum(r[3] for r in chosen)
            wrong = len(chosen) - correct
            wrong_null = sum(1 for r in chosen if r[4])
            rs0 = 100 * (correct + nulls - wrong_null) / n
            rs10 = 100 * (correct + nulls - wrong_null - 10 * wrong) / n
            print(f"threshold {threshold:.2f} margin {margin:.2f}: answered {len(chosen):5d} "
                  f"precision {100 * correct / max(len(chosen), 1):5.1f}%  RS(0) {rs0:5.1f}  RS(10) {rs10:5.1f}")


def run_latency(args: argparse.Namespace) -> None:
    from ehr_magic.db import connect
    from ehr_magic.eval import load_split
    from ehr_magic.eval.answerers import gold_examples
    from ehr_magic.eval.sqlite_dialect import translator_for
    from ehr_magic.memory import MemoryStore
    from ehr_magic.reuse import Reuser

    with connect(args.db) as ehr:
        translator = translator_for(ehr)
        pool = gold_examples(load_split(args.dataset, "train"), translator)
        pool += gold_examples(load_split(args.dataset, "valid"), translator)
        random.Random(0).shuffle(pool)
        memory, questions = pool[: args.entries], pool[args.entries:][: args.questions]
        if len(questions) < args.questions:  # too few left over: ask remembered questions reworded by values
            questions += pool[: args.questions - len(questions)]
        folder = Path(args.work or "/tmp/bench-reuse")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "memory.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            for example in memory:
                handle.write(json.dumps({"question": example.question, "code": example.code,
                                         "schema": ehr.schema}) + "\n")
        store_path = folder / "memory.sqlite"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{store_path}{suffix}").unlink(missing_ok=True)
        store = MemoryStore(store_path)
        store.import_(path)
        started = time.perf_counter()
        reuser = Reuser.from_store(ehr, store)
        build = time.perf_counter() - started
        reuser.answer(questions[0].question)  # warm caches (vocabularies, weights)
        times, match_times, answered = [], [], 0
        for example in questions:
            started = time.perf_counter()
            result = reuser.answer(example.question)
            times.append(time.perf_counter() - started)
            answered += result.answered
            started = time.perf_counter()
            reuser.index.match(example.question)
            match_times.append(time.perf_counter() - started)
    ms = sorted(t * 1000 for t in times)
    print(f"{len(reuser.index)} remembered cells indexed in {build:.1f} s (first use of the store)")
    print(f"{len(times)} questions, {answered} answered by reuse")
    print(f"answer (match + adapt + checks + run): median {statistics.median(ms):.1f} ms, "
          f"p90 {ms[int(0.9 * (len(ms) - 1))]:.1f} ms, max {ms[-1]:.1f} ms")
    print(f"match only: median {statistics.median(match_times) * 1000:.1f} ms")


# The MIMIC-IV demo check: the packaged seeds are the memory; each question below
# rewords a seed with other values. Positive cases give the seed index and the edits
# that turn the seed's code into the right code for the question (the reference);
# negative cases (None) ask something the seeds' code does not answer.
MIMIC_CASES: list[tuple[str, int | None, list[tuple[str, str]]]] = [
    ("How old was patient 10014354 at their first hospital admission?", 0, [("10002428", "10014354")]),
    ("At their first hospital admission, how old was patient 10015860?", 0, [("10002428", "10015860")]),
    ("What are the race, sex and marital status of patient 10002428?", 1, [("10014354", "10002428")]),
    ("Has patient 10015860 died, and if so, did it happen in the hospital?", 2, [("10002930", "10015860")]),
    ("How many hospital admissions did patient 10002930 have, and what was their average length of stay in days?",
     4, [("10015860", "10002930")]),
    ("When and to where was patient 10040025 last discharged, and how many days ago was that?", 8,
     [("10027602", "10040025")]),
    ("How many hospital admissions started in the last 5 years?", 9, [("years=2", "years=5")]),
    ("How many ICU stays did patient 10005817 have, and in which units?", 11, [("10002428", "10005817")]),
    ("For how many hours was patient 10021487 on invasive mechanical ventilation?", 12,
     [("10007818", "10021487")]),
    ("What was the principal diagnosis of patient 10014354's latest hospital admission?", 15,
     [("10015860", "10014354")]),
    ("List the ICD procedures patient 10014354 underwent with their dates.", 18, [("10021487", "10014354")]),
    ("What was patient 10005817's first potassium result after arriving in the ICU?", 21,
     [("10021487", "10005817"), ('"lactate"', '"Potassium"')]),
    ("What was patient 10021487's first creatinine result after arriving in the ICU?", 21,
     [('"lactate"', '"Creatinine"')]),
    ("What was the highest blood sodium of patient 10021487 during the admission that included an ICU stay?", 22,
     [("10007818", "10021487"), ("'Creatinine'", "'Sodium'")]),
    ("What was the lowest blood creatinine of patient 10007818 during the admission that included an ICU stay?", 22,
     [("max(l.valuenum)", "min(l.valuenum)")]),
    ("How many of patient 10014354's blood sodium results were flagged abnormal?", 23,
     [("10002930", "10014354"), ("'Potassium'", "'Sodium'")]),
    ("How many results of each lab test did patient 10014354 have this year?", 26,
     [("10027602", "10014354"), ('ehr.period("year", -1)', 'ehr.period("year", 0)')]),
    ("What was patient 10021487's average heart rate during the first 48 hours of their ICU stay?", 27,
     [("10007818", "10021487"), ("INTERVAL 24 HOUR", "INTERVAL 48 HOUR")]),
    ("What was the lowest SpO2 in each ICU stay of patient 10005817?", 30, [("10002428", "10005817")]),
    ("How much urine did patient 10021487 produce on the first day of their ICU stay?", 31,
     [("10005817", "10021487")]),
    ("How much phenylephrine did patient 10005817 receive in total?", 32, [("'Norepinephrine'", "'Phenylephrine'")]),
    ("How much norepinephrine did patient 10021487 receive in total?", 32, [("10005817", "10021487")]),
    ("How many doses of heparin were actually given to patient 10015860 according to the bedside record?", 34,
     [("10014354", "10015860")]),
    ("Which medications were ordered for patient 10014354 within the first 24 hours of their most recent "
     "admission?", 35, [("10006053", "10014354")]),
    ("How many patients have ever been diagnosed with any kind of pneumonia?", 17, [("%sepsis%", "%pneumonia%")]),
    # not answerable by a seed's code with other values: reuse must abstain
    ("How old was patient 10014354 at their last hospital admission?", None, []),
    ("What was the lowest blood potassium of patient 10021487 in the emergency department?", None, []),
    ("How many ICU stays did patient 99999999 have, and in which units?", None, []),
    ("What is the home address of patient 10014354?", None, []),
    ("Which medications were ordered for patient 10014354 within the first 24 hours of their first admission?",
     None, []),
    ("How many results of each microbiology test did patient 10014354 have last year?", None, []),
    ("What was the highest blood sodium of patient 10021487 during the admission in 2203?", None, []),
    ("How much urine did patient 10021487 produce on the last day of their ICU stay?", None, []),
]


def run_mimic(args: argparse.Namespace) -> None:
    """Reuse on the MIMIC-IV demo schema with the packaged seeds as memory."""
    from ehr_magic.db import connect
    from ehr_magic.eval.scoring import normalize_answer
    from ehr_magic.memory import MemoryStore
    from ehr_magic.reuse import Reuser

    seeds = [json.loads(line) for line in (REPO / "ehr_magic" / "seeds" / "mimic_iv.jsonl").read_text().splitlines()
             if line.strip()]
    folder = Path(args.work or "/tmp/bench-reuse-mimic")
    folder.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{folder / 'memory.sqlite'}{suffix}").unlink(missing_ok=True)
    with connect(args.db) as ehr, MemoryStore(folder / "memory.sqlite") as store:
        ids = [store.add(seed["question"], seed["code"], origin="seed", schema=ehr.schema) for seed in seeds]
        reuser = Reuser.from_store(ehr, store)
        answered = correct = wrong = abstained_right = 0
        for question, seed, edits in MIMIC_CASES:
            result = reuser.answer(question)
            if seed is None:
                ok = not result.answered
                abstained_right += ok
                wrong += not ok
                print(f"{'ok   ' if ok else 'WRONG'} [abstain expected] {question}\n      {result.message}")
                continue
            code = seeds[seed]["code"]
            for old, new in edits:
                assert old in code, (seed, old)
                code = code.replace(old, new)
            from ehr_magic.runtime.executor import Executor

            reference = Executor(ehr).run(code)
            if not result.answered:
                print(f"miss  {question}\n      {result.reason}")
                continue
            answered += 1
            same = normalize_answer(result.answer) == normalize_answer(reference.answer)
            same = same and result.entry_id == ids[seed]
            correct += same
            wrong += not same
            print(f"{'ok   ' if same else 'WRONG'} {question}\n      {result.message}")
    positives = sum(1 for _, seed, _ in MIMIC_CASES if seed is not None)
    negatives = len(MIMIC_CASES) - positives
    print(f"\n{positives} reworded questions: {answered} answered by reuse, {correct} correct; "
          f"{negatives} questions the seeds cannot answer: {abstained_right} abstained; wrong answers: {wrong}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("eval", "sweep", "latency", "mimic"):
        p = sub.add_parser(name)
        p.add_argument("--db", required=True)
        p.add_argument("--dataset", default=str(DATASET))
        p.add_argument("--limit", type=int)
        if name in ("eval", "sweep"):
            p.add_argument("--split", default="valid")
            p.add_argument("--memory-from", default="train")
        if name == "eval":
            p.add_argument("--out")
            p.add_argument("--json")
            p.add_argument("--threshold", type=float, default=0.40)
            p.add_argument("--margin", type=float, default=0.05)
        if name == "mimic":
            p.add_argument("--work")
        if name == "latency":
            p.add_argument("--entries", type=int, default=5000)
            p.add_argument("--questions", type=int, default=300)
            p.add_argument("--work")
    args = parser.parse_args()
    {"eval": run_eval, "sweep": run_sweep, "latency": run_latency, "mimic": run_mimic}[args.command](args)


if __name__ == "__main__":
    main()
