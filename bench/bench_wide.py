"""A warehouse of many tables: the first connect (drafting), a reconnect, the first prompt and the
system message, on a wide synthetic database and on one ten times narrower, built alike in the
same run.

Each database has a patient dimension, an encounter dimension and N fact tables with warehouse
names (``flwsht_meas_0042``, ``ord_med_0311``...), each with its own key, the patient and encounter
keys (60 patients and 90 encounters a table), a status text column (a lookup column) and a time;
120 rows each. It is attached as it is
(ehr-magic did not build it), with an empty user data folder, so its knowledge is drafted.

Printed per database: the first connect (drafting, kept for the next), a reconnect (the kept
knowledge read), the first prompt of a process (table choice and value indexes built), the median
later prompt, the system message's tokens and how many tables its index names at the 8k default
window, and whether the first prompt fits that window; then the ratios of the wide database to the
narrow one (ten times the tables). Goal: every time grows no faster than the number of tables
(ratio <= 10 for ten times the tables), and the wide prompt fits 8k.

    PYTHONPATH=$PWD python bench/bench_wide.py [--tables 1500] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

SUBJECTS = ("flwsht_meas", "ord_med", "lab_rslt", "dx_enc", "proc_ord", "hsp_acct_chg", "img_rslt", "note_enc",
            "alg_pat", "imm_admin", "adt_evnt", "prov_enc")
QUESTIONS = ("How many encounters had a lab result with status final?",
             "Which medications were ordered for patient P0007?",
             "How many flowsheet measurements were taken in 2100?",
             "List the diagnoses of encounter E0012.",
             "How many hospital account charges are there per patient?")


def build(path: Path, tables: int) -> None:
    """The warehouse: two dimensions and ``tables`` fact tables of 120 rows."""
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE pat_dim AS SELECT printf('P%04d', range) AS pat_id, "
                    "CASE WHEN range % 2 = 0 THEN 'female' ELSE 'male' END AS sex_c FROM range(200)")
        con.execute("CREATE TABLE pat_enc_dim AS SELECT printf('E%04d', range) AS pat_enc_csn_id, "
                    "printf('P%04d', range % 200) AS pat_id, TIMESTAMP '2100-01-01' + INTERVAL (range) HOUR "
                    "AS contact_dttm FROM range(1000)")
        for n in range(tables):
            name = f"{SUBJECTS[n % len(SUBJECTS)]}_{n:04d}"
            con.execute(
                f"CREATE TABLE {name} AS SELECT printf('{name[:3].upper()}{n:04d}-%03d', range) AS {name}_id, "
                f"printf('P%04d', (range * 7 + {n}) % 200 % 60) AS pat_id, "
                f"printf('E%04d', (range * 13 + {n}) % 1000 % 90) AS pat_enc_csn_id, "
                "(['final', 'preliminary', 'cancelled', 'corrected'])[range % 4 + 1] AS status_c, "
                "TIMESTAMP '2100-01-01' + INTERVAL (range * 5) HOUR AS upd_dttm FROM range(120)")


def measure(path: Path, data_dir: Path) -> dict[str, float]:
    """The figures of one database, in a fresh user data folder (so the first connect drafts)."""
    os.environ["EHR_MAGIC_DATA_DIR"] = str(data_dir)
    import ehr_magic
    from ehr_magic.agent import Agent
    from ehr_magic.agent.budget import PromptTooLongError
    from ehr_magic.llm.tokens import estimate_prompt_tokens, estimate_tokens
    from ehr_magic.llm.window import DEFAULT_LOCAL_WINDOW, ContextWindow

    figures: dict[str, float] = {}
    started = time.perf_counter()
    ehr_magic.connect(path).close()
    figures["first connect s"] = time.perf_counter() - started
    started = time.perf_counter()
    ehr = ehr_magic.connect(path)
    figures["reconnect s"] = time.perf_counter() - started
    window = ContextWindow(DEFAULT_LOCAL_WINDOW, "bench")
    agent = Agent(ehr, None)
    started = time.perf_counter()
    try:
        prompt = agent.prompt(QUESTIONS[0], window=window)
    except PromptTooLongError:
        figures["first prompt s"] = time.perf_counter() - started
        figures["fits 8k"] = 0
        ehr.close()
        return figures
    figures["first prompt s"] = time.perf_counter() - started
    later = []
    for question in QUESTIONS[1:] * 4:
        started = time.perf_counter()
        agent.prompt(question, window=window)
        later.append(time.perf_counter() - started)
    figures["later prompt ms"] = 1000 * statistics.median(later)
    figures["system tokens"] = estimate_tokens(prompt.messages[0]["content"])
    listed = prompt.layout.index_tables
    figures["index tables"] = listed if listed is not None else len(ehr.tables())
    figures["prompt tokens"] = estimate_prompt_tokens(prompt.messages)
    figures["fits 8k"] = 1
    ehr.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1500, help="fact tables of the wide database")
    parser.add_argument("--work", help="folder that keeps the built databases between runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = {}
        for label, count in (("narrow", max(1, args.tables // 10)), ("wide", args.tables)):
            path = work / f"warehouse_{count}.duckdb"
            if not path.is_file():
                build(path, count)
            results[label] = measure(path, Path(tempfile.mkdtemp(dir=tmp)))
            print(f"{label}: {count + 2} tables: " + ", ".join(
                f"{name} {value:,.2f}" if isinstance(value, float) else f"{name} {value:,}"
                for name, value in results[label].items()))
        narrow, wide = results["narrow"], results["wide"]
        timed = ("first connect s", "reconnect s", "first prompt s", "later prompt ms")
        print("wide / narrow (ten times the tables): " + ", ".join(
            f"{name} x{wide[name] / narrow[name]:.1f}" for name in timed if narrow.get(name) and name in wide))


if __name__ == "__main__":
    sys.exit(main())
