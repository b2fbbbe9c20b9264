"""Value linking of clinical shorthand: recall@5 of ``ehr.lookup`` on abbreviation -> stored
value pairs (bench/data/abbreviation_pairs.tsv) over the dictionaries of the three open demos
(EHRSQL-2024 MIMIC-IV, MIMIC-III demo, eICU demo), and the cost of ``ehr.find``.

The baseline, measured in the same run, is the lookup without the clinical vocabulary
(``Vocabulary.match`` with no alternatives: the ranking ``ehr.lookup`` had before it). Recall is
reported on all pairs and separately on the pairs held out from tuning; misses are listed for
the tuning pairs only, so the held-out pairs stay unseen (``--show-held-out`` lists theirs too).

    python bench/bench_abbreviations.py [--db-dir DIR] [--show-held-out]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import ehr_magic
from ehr_magic.sources import eicu
from ehr_magic.sources import ehrsql
from ehr_magic.sources import mimic_iii

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "shared" / "data"
PAIRS = HERE / "data" / "abbreviation_pairs.tsv"
K = 5


def load_databases(folder: Path) -> dict[str, Path]:
    """The three demos as DuckDB files in ``folder`` (built once, reused when present)."""
    paths = {"mimic_iv": folder / "ehrsql.duckdb", "mimic_iii": folder / "mimic3.duckdb",
             "eicu": folder / "eicu.duckdb"}
    if not paths["mimic_iv"].exists():
        ehrsql.load(SHARED / "ehrsql-2024" / "mimic_iv.sqlite", paths["mimic_iv"])
    if not paths["mimic_iii"].exists():
        mimic_iii.load([SHARED / "mimic-iii-clinical-database-demo-1.4"], paths["mimic_iii"], dataset="mimic-iii-demo")
    if not paths["eicu"].exists():
        eicu.load([SHARED / "eicu-collaborative-research-database-demo-2.0.1"], paths["eicu"])
    return paths


def read_pairs() -> list[dict[str, str]]:
    lines = [line for line in PAIRS.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


def recall(hits: list[bool]) -> str:
    return f"{sum(hits)}/{len(hits)} = {100 * sum(hits) / len(hits):.1f}%" if hits else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db-dir", type=Path, help="keep the demo databases here between runs")
    parser.add_argument("--show-held-out", action="store_true", help="also list the misses of held-out pairs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.db_dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        paths = load_databases(folder)
        pairs = read_pairs()
        ehrs = {name: ehr_magic.connect(path) for name, path in paths.items()}
        before: dict[str, list[bool]] = defaultdict(list)
        after: dict[str, list[bool]] = defaultdict(list)
        misses = []
        lookup_ms = []
        for pair in pairs:
            ehr = ehrs[pair["dataset"]]
            vocabulary = ehr.vocabulary(pair["table"], pair["column"])
            baseline = [v for v, _ in vocabulary.match(pair["abbreviation"], K)]
            started = time.perf_counter()
            found = ehr.lookup(pair["table"], pair["column"], pair["abbreviation"], k=K)
            lookup_ms.append((time.perf_counter() - started) * 1000)
            for key in ("all", pair["split"], pair["dataset"]):
                before[key].append(pair["expected"] in baseline)
                after[key].append(pair["expected"] in found)
            if pair["expected"] not in found and (pair["split"] == "tune" or args.show_held_out):
                misses.append((pair, found))
        print(f"value-linking recall@{K} on {len(pairs)} abbreviation -> stored value pairs")
        print(f"{'pairs':<12} {'before (no clinical vocabulary)':<34} after")
        for key in ("all", "tune", "held-out", "mimic_iv", "mimic_iii", "eicu"):
            print(f"{key:<12} {recall(before[key]):<34} {recall(after[key])}")
        print(f"lookup latency with the vocabulary (vocabularies warm after their first use): "
              f"median {statistics.median(lookup_ms):.1f} ms, max {max(lookup_ms):.0f} ms")
        for pair, found in misses:
            print(f"  miss [{pair['split']}] {pair['abbreviation']!r} in {pair['dataset']}.{pair['table']}."
                  f"{pair['column']}: expected {pair['expected']!r}, got {found}")
        for name, ehr in ehrs.items():
            fresh = ehr_magic.connect(paths[name])
            cold = timed(lambda fresh=fresh: fresh.find("Hb"))
            warm = [timed(lambda q=q, fresh=fresh: fresh.find(q)) * 1000
                    for q in ("COPD", "Lasix", "K", "heart rate", "PRBC")]
            print(f"ehr.find on {name} ({len(fresh.lookup_columns())} lookup columns): first call {cold:.2f} s "
                  f"(reads and indexes the vocabularies), then median {statistics.median(warm):.0f} ms")
            fresh.close()
            ehr.close()


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
