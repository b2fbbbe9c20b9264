"""``ehr-magic eval``: measure an answering mode on an EHRSQL-format benchmark split."""

from __future__ import annotations

import argparse
import json
import sys

from ehr_magic.cli.arguments import agent_setting, non_negative_number, positive_int
from ehr_magic.cli.progress import progress_bar

MODES = ("agent", "oracle", "memory")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "eval",
        help="evaluate on an EHRSQL-format benchmark split (SR, CR, RS, cost)",
        description="Answer every question of a benchmark split, score the answers as EHRSQL-2024 "
        "and EHRAgent do, and report the metrics. Example: ehr-magic eval ../shared/data/ehrsql-2024 "
        "--split valid --db ehrsql.duckdb --mode oracle",
    )
    parser.add_argument("dataset", metavar="DATASET_DIR", help="folder holding the split folders (train/, valid/...)")
    parser.add_argument("--split", required=True, metavar="NAME", help="split to evaluate, e.g. valid")
    parser.add_argument("--db", required=True, metavar="TARGET",
                        help="the benchmark's database loaded by `ehr-magic data load ehrsql ...`: "
                        "a .duckdb file or a server URL (postgresql://..., sc://...)")
    parser.add_argument("--mode", choices=MODES, default="agent",
                        help="agent: the full agent; oracle: the gold SQL through our DuckDB path; "
                        "memory: reuse of memory without a model (default agent)")
    parser.add_argument("--memory-from", metavar="SPLIT",
                        help="fill memory first from this split's questions and gold code")
    parser.add_argument("--grow-memory", action="store_true",
                        help="add each correctly answered question's code to memory during the run")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="only the first N questions")
    parser.add_argument("--workers", type=positive_int, default=1, metavar="W",
                        help="questions answered in parallel (default 1)")
    parser.add_argument("--out", metavar="DIR",
                        help="write results.jsonl, metrics.json and metrics.md here; rerunning resumes")
    parser.add_argument("--price-in", type=non_negative_number, default=0.0, metavar="USD",
                        help="price per million prompt tokens, for the cost estimate (default 0)")
    parser.add_argument("--price-out", type=non_negative_number, default=0.0, metavar="USD",
                        help="price per million completion tokens (default 0)")
    parser.add_argument("--model", help="model for --mode agent (default: config file or EHR_MAGIC_MODEL)")
    parser.add_argument("--max-steps", "--steps", type=agent_setting("steps"), default=10, metavar="T",
                        help="agent steps (default 10)")
    parser.add_argument("--shots", type=agent_setting("shots"), default=4, metavar="K",
                        help="few-shot examples (default 4)")
    parser.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from ehr_magic.eval import Prices
    from ehr_magic.eval.report import summary_lines
    from ehr_magic.eval.runner import Evaluation

    if args.memory_from and args.memory_from == args.split:
        print(f"warning: memory is filled from the split under evaluation ({args.split}); "
              "the scores will be inflated.", file=sys.stderr)
    with Evaluation(
        args.dataset,
        args.split,
        args.db,
        mode=args.mode,
        memory_from=args.memory_from,
        limit=args.limit,
        workers=args.workers,
        out=args.out,
        grow_memory=args.grow_memory,
        prices=Prices(args.price_in, args.price_out),
        options={"model": args.model, "max_steps": args.max_steps, "shots": args.shots},
    ) as evaluation:
        with progress_bar(f"eval {args.split}", quiet=args.quiet) as progress:
            report = evaluation.run(progress)
    if args.json:
        print(json.dumps(report.metrics, indent=2))
    else:
        print("\n".join(summary_lines(report)))
    return 0
