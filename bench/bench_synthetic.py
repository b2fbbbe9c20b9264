"""Synthetic MIMIC-IV-shaped generation: wall time, peak memory and rows per size.

Each size runs in its own Python process, so the peak resident memory (RSS high-water
mark, ``ru_maxrss``) is that build's alone, imports included. CPU seconds (user + system,
all threads) are printed next to wall time: on a shared machine they are the steadier figure.

    python bench/bench_synthetic.py                      # 1k, 10k and 100k patients
    python bench/bench_synthetic.py --sizes 1000,10000   # choose the sizes
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, resource, sys, time
from ehr_magic.sources.synthetic import generate
before = resource.getrusage(resource.RUSAGE_SELF)
started = time.perf_counter()
counts = generate(sys.argv[1], patients=int(sys.argv[2]), seed=int(sys.argv[3]))
seconds = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_SELF)
cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
print(json.dumps({"seconds": seconds, "cpu": cpu,
                  "peak_mb": usage.ru_maxrss / 1024, "counts": counts}))  # ru_maxrss is in KiB on Linux
"""

SHOWN = ["admissions", "icustays", "labevents", "chartevents", "inputevents", "outputevents", "procedureevents",
         "prescriptions", "emar", "diagnoses_icd", "microbiologyevents", "omr"]


def run(patients: int, seed: int, folder: Path) -> dict:
    out = folder / f"synthetic-{patients}.duckdb"
    done = subprocess.run([sys.executable, "-c", CHILD, str(out), str(patients), str(seed)],
                          check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["file_mb"] = out.stat().st_size / 2**20
    out.unlink()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated patient counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", help="folder for the temporary databases (default: a temp folder)")
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; seed {args.seed}")
    print(f"{'patients':>9} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} {'file MB':>8} {'rows':>12}  per table")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for patients in sizes:
            r = run(patients, args.seed, Path(tmp))
            counts = r["counts"]
            total = sum(counts.values())
            detail = ", ".join(f"{t} {counts[t]:,}" for t in SHOWN)
            print(f"{patients:>9,} {r['seconds']:>7.1f} {r['cpu']:>7.1f} {r['peak_mb']:>8.0f} {r['file_mb']:>8.0f}"
                  f" {total:>12,}  {detail}", flush=True)


if __name__ == "__main__":
    main()
