"""The first ``ehr.find`` on the MIMIC-IV demo: it indexes every lookup column, the ICD titles
(190k values) among them, before it can search.

Each round opens a fresh connection and times its first ``ehr.find`` twice: with the index
built one value at a time in Python (the old way, tests/vocabulary_reference.py) and with
``Vocabulary.build`` (normalising and the word index in polars), in alternating order so both
meet the same machine load; it checks that both return the same rows. Prints the median times
and their ratio. Goal: the first find under 1 s.

    python bench/bench_find.py [--db mimic-iv.duckdb] [--rounds 5] [--query Hb]

Measured (2 cores shared with other jobs, load 2-5, November 2026), one value at a time -> at once:
first find('Hb') 1.50 s -> 0.66 s (ratio 0.44) to 1.75 s -> 0.95 s (ratio 0.54) as the load rose;
indexing the ICD diagnosis titles alone (106k values) 0.9 s -> 0.25 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from datapaths import MIMIC_IV_DEMO
from vocabulary_reference import built_one_value_at_a_time

import ehr_magic
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.sources import mimic_iv


def first_find(database: Path, query: str) -> tuple[float, list[tuple]]:
    """Seconds of the first ``ehr.find(query)`` on a fresh connection, and its rows."""
    with ehr_magic.connect(database) as ehr:
        start = time.perf_counter()
        rows = ehr.find(query).rows()
        return time.perf_counter() - start, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a loaded MIMIC-IV database (default: load the demo into a temporary folder)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--query", default="Hb")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        database = Path(args.db) if args.db else Path(tmp) / "mimic-iv-demo.duckdb"
        if not args.db:
            mimic_iv.load([MIMIC_IV_DEMO], database, dataset="mimic-iv-demo")
        old, new = [], []
        for round_ in range(args.rounds):
            for way in ("old", "new") if round_ % 2 == 0 else ("new", "old"):
                if way == "old":
                    with mock.patch.object(Vocabulary, "build", staticmethod(built_one_value_at_a_time)):
                        seconds, old_rows = first_find(database, args.query)
                    old.append(seconds)
                else:
                    seconds, new_rows = first_find(database, args.query)
                    new.append(seconds)
            if old_rows != new_rows:
                sys.exit(f"ehr.find({args.query!r}) differs: {old_rows} vs {new_rows}")
    before, after = statistics.median(old), statistics.median(new)
    print(f"first ehr.find({args.query!r}) on MIMIC-IV, median of {args.rounds}: one value at a time {before:.2f} s, "
          f"built at once {after:.2f} s (ratio {after / before:.2f}); same rows")


if __name__ == "__main__":
    main()
