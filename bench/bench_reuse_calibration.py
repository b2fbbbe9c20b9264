"""Calibrated reuse on questions it was never tuned on.

    python bench/bench_reuse_calibration.py --db /tmp/ehrsql.duckdb

Two measurements, each against the thresholds of the first release (0.40 / 0.05,
which were chosen on valid) in the same run:

* unseen train folds: train is split once, by a hash of the question id, into five parts;
  one part (``--part``, 0 by default) is held out and the other 80% is the memory. Reuse
  is calibrated by cross-validation inside the 80% alone, then answers the held-out 20%;
* valid: calibrated by cross-validation inside train, memory from train.

Printed: precision on answered questions, coverage of the answerable ones, RS(0) and
RS(10) (EHRSQL-2024's reliability score: +1 right, 0 abstained, -10 wrong or answered
when unanswerable), abstentions on the unanswerable ones, the calibration, and the wrong
answers by issue 26's kinds (``wrong_kind``).

Tuning the rules (valid stays untouched until the end):

    python bench/bench_reuse_calibration.py --db /tmp/ehrsql.duckdb --only unseen --threshold 0.21 \
        --margin 0.05 --no-release --wrong /tmp/wrong     # no calibration; wrong answers as JSON lines
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATASET = REPO.parent / "shared" / "data" / "ehrsql-2024"


def holdout(item_id: str, part: int = 0) -> bool:
    """Whether a train question is in the held-out fifth ``part`` (0-4) of train."""
    return int(hashlib.sha256(item_id.encode()).hexdigest(), 16) % 5 == part


def score(ehr, memory, items, threshold: float, margin: float, wrong: list | None = None) -> dict:
    from ehr_magic.eval.scoring import judge, normalize_answer
    from ehr_magic.reuse.reuser import Reuser

    reuser = Reuser(ehr, timeout=10, threshold=threshold, margin=margin)
    reuser.add_many((i, e.question, e.code, "accepted") for i, e in enumerate(memory))
    answered = right = covered = abstained_unanswerable = unanswerable = 0
    rs0 = rs10 = 0.0
    for item in items:
        result = reuser.answer(item.question)
        status = "answered" if result.answered else "abstained"
        answer = normalize_answer(result.answer) if result.answered else None
        verdict = judge(status, answer, item.gold_answer)
        if wrong is not None and result.answered and not verdict.correct:
            wrong.append({"id": item.id, "question": item.question, "cell": result.entry_question,
                          "substitutions": result.substitutions, "answer": str(answer)[:200],
                          "gold": str(item.gold_answer)[:200], "score": round(result.score, 3),
                          "margin": round(result.margin, 3), "code": result.code})
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


def wrong_kind(wrong: dict) -> str:
    """The issue-26 kind of a wrong answer, read off its question, cell and answer:
    ``unanswerable`` (4: answered although nothing records it), ``zero`` (3: a substitution
    ran the cell to 0 / empty / null), ``time`` (2: the question's and the cell's time windows
    differ and no substitution changed the window), else ``attribute/other`` (1 and the rest)."""
    from ehr_magic.reuse.timeexpr import find_times

    if wrong["gold"] == "None":
        return "4 unanswerable"
    if wrong["answer"] in ("[]", "[['0']]", "[['0.0']]", "[['None']]"):
        return "3 zero"
    substituted = {new for new, _ in wrong["substitutions"]}
    asked = {(t.key, t.relation) for t in find_times(wrong["question"]) if t.text not in substituted}
    remembered = {(t.key, t.relation) for t in find_times(wrong["cell"])}
    if asked - remembered:
        return "2 time"
    return "1 attribute/other"


def line(name: str, r: dict) -> str:
    return (f"  {name:<28} answered {r['answered']:>5}/{r['questions']:<5} precision {r['precision']:7.2%}  "
            f"coverage {r['coverage']:6.1%}  RS(0) {r['rs0']:6.2f}  RS(10) {r['rs10']:6.2f}  "
            f"unanswerable abstained {r['unanswerable_abstained']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--part", type=int, default=0, choices=range(5),
                        help="which fifth of train is held out (0, the default, is the one the rules were tuned on; "
                             "1-4 were never looked at question by question)")
    parser.add_argument("--only", choices=("unseen", "valid"), help="run one of the two settings")
    parser.add_argument("--threshold", type=float, help="use these thresholds instead of calibrating (tuning)")
    parser.add_argument("--margin", type=float, default=0.0)
    parser.add_argument("--no-release", action="store_true", help="skip the first release's thresholds")
    parser.add_argument("--wrong", type=Path, help="write each setting's wrong answers (JSON lines) here")
    args = parser.parse_args()

    from ehr_magic.db import connect
    from ehr_magic.eval.answerers import gold_examples
    from ehr_magic.eval.datasets import Split, load_split
    from ehr_magic.eval.sqlite_dialect import translator_for
    from ehr_magic.reuse.calibrate import Calibration, choose, observe
    from ehr_magic.reuse.match import DEFAULT_MARGIN, DEFAULT_THRESHOLD

    with connect(args.db) as ehr:
        translator = translator_for(ehr)
        train, valid = load_split(DATASET, "train"), load_split(DATASET, "valid")
        tune_split = Split("train-80", train.directory, train.version,
                           [i for i in train if not holdout(i.id, args.part)])
        unseen = [i for i in train if holdout(i.id, args.part)]
        settings = [
            (f"unseen 20% of train (part {args.part})", gold_examples(tune_split, translator), unseen),
            ("valid", gold_examples(train, translator), list(valid)),
        ]
        for name, memory, items in settings:
            if args.only and not name.startswith(args.only):
                continue
            if args.threshold is not None:
                cal = Calibration(args.threshold, args.margin, source="given")
                print(f"{name}: memory {len(memory)} cells; thresholds given: {args.threshold} / {args.margin}")
            else:
                started = time.perf_counter()
                observations = observe(ehr, [(i, e.question, e.code) for i, e in enumerate(memory)],
                                       folds=args.folds)
                took = time.perf_counter() - started
                cal = choose(observations)
                print(f"{name}: memory {len(memory)} cells; calibration in {took:.0f} s: {cal.describe()}")
            wrong: list[dict] = []
            print(line("calibrated", score(ehr, memory, items, cal.threshold, cal.margin, wrong)))
            print(f"  wrong answers by kind: {dict(Counter(wrong_kind(w) for w in wrong))}", flush=True)
            if args.wrong:
                args.wrong.mkdir(parents=True, exist_ok=True)
                with open(args.wrong / f"{name.split()[0]}.jsonl", "w") as out:
                    out.writelines(json.dumps(w) + "\n" for w in wrong)
            if not args.no_release:
                print(line(f"first release ({DEFAULT_THRESHOLD}/{DEFAULT_MARGIN})",
                           score(ehr, memory, items, DEFAULT_THRESHOLD, DEFAULT_MARGIN)), flush=True)


if __name__ == "__main__":
    main()
