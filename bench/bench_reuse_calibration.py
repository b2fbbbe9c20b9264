"""Calibrated reuse on questions it was never tuned on.

    python bench/bench_reuse_calibration.py --db /tmp/ehrsql.duckdb

Two measurements, each against the thresholds of the first release (0.40 / 0.05,
which were chosen on valid) in the same run:

* unseen train folds: train is split once, by a hash of the question id, into 80% and
  20%. Reuse is calibrated by cross-validation inside the 80% alone, then answers the
  20% (never looked at before) with the 80% as memory;
* valid: calibrated by cross-validation inside train, memory from train.

Printed: precision on answered questions, coverage of the answerable ones, RS(0) and
RS(10) (EHRSQL-2024's reliability score: +1 right, 0 abstained, -10 wrong or answered
when unanswerable), abstentions on the unanswerable ones, and the calibration.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATASET = REPO.parent / "shared" / "data" / "ehrsql-2024"


def holdout(item_id: str) -> bool:
    return int(hashlib.sha256(item_id.encode()).hexdigest(), 16) % 5 == 0


def score(ehr, memory, items, threshold: float, margin: float) -> dict:
    from ehr_magic.eval.scoring import judge, normalize_answer
    from ehr_magic.reuse.reuser import Reuser

    reuser = Reuser(ehr, timeout=10, threshold=threshold, margin=margin)
    reuser.add_many((i, e.question, e.code, "accepted") for i, e in enumerate(memory))
    answered = right = covered = abstained_unanswerable = unanswerable = 0
    rs0 = rs10 = 0.0
    for item in items:
        result = reuser.answer(item.question)
        status = "answered" if result.answered else "abstained"
        verdict = judge(status, normalize_answer(result.answer) if result.answered else None, item.gold_answer)
        answered += result.answered
        right += result.answered and verdict.correct
        covered += result.answered and item.answerable
        unanswerable += not item.answerable
        abstained_unanswerable += (not item.answerable) and not result.answered
        rs0 += verdict.reliability(0)
        rs10 += verdict.reliability(10)
    n = len(items)
    return {"answered": answered, "right": right, "precision": right / answered if answered else 0.0,
            "coverage": covered / max(1, n - unanswerable), "rs0": 100 * rs0 / n, "rs10": 100 * rs10 / n,
            "unanswerable_abstained": f"{abstained_unanswerable}/{unanswerable}", "questions": n}


def line(name: str, r: dict) -> str:
    return (f"  {name:<28} answered {r['answered']:>5}/{r['questions']:<5} precision {r['precision']:7.2%}  "
            f"coverage {r['coverage']:6.1%}  RS(0) {r['rs0']:6.2f}  RS(10) {r['rs10']:6.2f}  "
            f"unanswerable abstained {r['unanswerable_abstained']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()

    from ehr_magic.data import connect
    from ehr_magic.eval.answerers import gold_examples
    from ehr_magic.eval.datasets import Split, load_split
    from ehr_magic.eval.sqlite_dialect import translator_for
    from ehr_magic.reuse.calibrate import choose, observe
    from ehr_magic.reuse.match import DEFAULT_MARGIN, DEFAULT_THRESHOLD

    with connect(args.db) as ehr:
        translator = translator_for(ehr)
        train, valid = load_split(DATASET, "train"), load_split(DATASET, "valid")
        tune_split = Split("train-80", train.directory, train.version, [i for i in train if not holdout(i.id)])
        unseen = [i for i in train if holdout(i.id)]
        settings = [
            ("unseen 20% of train", gold_examples(tune_split, translator), unseen),
            ("valid", gold_examples(train, translator), list(valid)),
        ]
        for name, memory, items in settings:
            started = time.perf_counter()
            observations = observe(ehr, [(i, e.question, e.code) for i, e in enumerate(memory)], folds=args.folds)
            took = time.perf_counter() - started
            cal = choose(observations)
            print(f"{name}: memory {len(memory)} cells; calibration in {took:.0f} s: {cal.describe()}")
            print(line("calibrated", score(ehr, memory, items, cal.threshold, cal.margin)))
            print(line(f"first release ({DEFAULT_THRESHOLD}/{DEFAULT_MARGIN})",
                       score(ehr, memory, items, DEFAULT_THRESHOLD, DEFAULT_MARGIN)), flush=True)


if __name__ == "__main__":
    main()
