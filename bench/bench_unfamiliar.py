"""A stranger's tables: how well the first prompt and the drafted joins serve a schema nobody tuned for.

For each renamed copy of the EHRSQL-2024 database (``ehr_magic.eval.renamed``; built here
unless --copies names a folder that holds them), loaded with ``data load csv`` so that
the knowledge is drafted from the data only, prints on train and on valid:

- gold-table coverage of the first prompt: the share of answerable questions whose gold
  SQL's tables are all in the agent's first prompt (in full or in one line: "listed"), at
  the 8k default window and at 4k (goal: >= 95% at 8k);
- the stricter share whose gold tables are all described in full ("full"): a small model
  is far surer of a table whose column meanings it was shown than of a one-line entry;
- how many first prompts describe no table in full;
- with --misses, each question whose gold tables are not all described in full, with the tables the
  prompt holds (tune on train misses only; --split picks the split).

and once per copy, the drafted joins against the true foreign keys of tables.json:
found, missed and wrong (a join counts as found only if it links the same two columns,
in either direction; a join between two columns that hold the same ids, such as two
patient-id columns, is right even when tables.json does not list it). The four
foreign keys from the charge table to the row numbers of four event tables (one id
column, its table chosen by another column) are counted apart.

Then the MIMIC-III and eICU demos loaded as plain CSV folders: their drafted joins
against the joins of the packaged knowledge (mimic_iii.yaml, eicu.yaml). Last, the home
schema (the EHRSQL database with its packaged knowledge) on valid at 8k (must stay >= 99.5%).

"descriptive" is the style the rules are tuned on; "camel" and "warehouse" (abbreviated
upper-case warehouse names) are held out.

    python bench/bench_unfamiliar.py [--questions N] [--styles descriptive camel] [--copies DIR]
                                     [--work DIR] [--split train|valid] [--misses 8|4] [--skip demos home]

--work keeps the loaded databases (STYLE.duckdb, ehrsql.duckdb) in DIR and reuses them, so a
rerun measures table choice without loading again (delete them after changing the drafting).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

import ehr_magic  # noqa: E402
from ehr_magic.agent import Agent, AgentSettings  # noqa: E402
from ehr_magic.agent.budget import PromptTooLongError  # noqa: E402
from ehr_magic.memory.fewshot import SeedExamples  # noqa: E402
from ehr_magic.knowledge import model as knowledge_files  # noqa: E402
from ehr_magic import sources  # noqa: E402
from ehr_magic.eval import renamed  # noqa: E402
from ehr_magic.eval.datasets import load_split  # noqa: E402
from ehr_magic.llm.window import DEFAULT_LOCAL_WINDOW, ContextWindow  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
EHRSQL = SHARED / "ehrsql-2024"
MIMIC_III = SHARED / "mimic-iii-clinical-database-demo-1.4"
EICU = SHARED / "eicu-collaborative-research-database-demo-2.0.1"
WINDOWS = (DEFAULT_LOCAL_WINDOW, 4096)
_JOIN = re.compile(r"^\s*(\w+)\s+ON\s+(.+)$", re.IGNORECASE)
_SIDE = re.compile(r"^(?:(\w+)\.)?(\w+)$")

Pair = frozenset  # two (table, column) ends, in no order


def join_pairs(table: str, joins: tuple[str, ...]) -> set[Pair]:
    """The column pairs of a table's joins: ``t ON a.x = t.y AND ...`` or ``t ON col`` (same name)."""
    pairs = set()
    for join in joins:
        match = _JOIN.match(join)
        if not match:
            continue
        target, condition = match.group(1).lower(), match.group(2)
        for part in re.split(r"\s+AND\s+|,", condition, flags=re.IGNORECASE):
            if "=" in part:
                left, right = (_SIDE.match(s.strip()) for s in part.split("=", 1))
                if left and right:
                    pairs.add(Pair({((left.group(1) or table).lower(), left.group(2).lower()),
                                    ((right.group(1) or target).lower(), right.group(2).lower())}))
            elif _SIDE.match(part.strip()):
                column = part.strip().split(".")[-1].lower()
                pairs.add(Pair({(table.lower(), column), (target, column)}))
    return pairs


def drafted_pairs(ehr) -> set[Pair]:
    return {p for t, info in ehr.knowledge.tables.items() for p in join_pairs(t, info.joins)}


def same_ids(truth: dict) -> dict[tuple[str, str], int]:
    """(table, column) -> class: columns that hold the same ids (the true keys, closed over
    joins, and every column named like a key column that only one table owns)."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    def end(table: str, column: str) -> tuple[str, str]:
        return table.lower(), column.lower()

    keys = [k for k in truth["foreign_keys"] if not k["polymorphic"]]
    for key in keys:
        parent[find(end(key["table"], key["column"]))] = find(end(key["ref_table"], key["ref_column"]))
    # Source column names (subject_id) whose key sits in one table only: every such column holds those ids.
    loaded = {old: t["table"] for old, t in truth["tables"].items()}
    owners: dict[str, set[tuple[str, str]]] = {}
    for key in keys:
        old_table = next(o for o, t in loaded.items() if t == key["ref_table"])
        old_column = next(c for c, n in truth["columns"][old_table].items() if n == key["ref_column"])
        owners.setdefault(old_column, set()).add(end(key["ref_table"], key["ref_column"]))
    for old_table, columns in truth["columns"].items():
        for old_column, new in columns.items():
            if len(owners.get(old_column, ())) == 1:
                parent[find(end(loaded[old_table], new))] = find(next(iter(owners[old_column])))
    return {x: hash(find(x)) for x in list(parent)}


def score_joins(drafted: set[Pair], truth: dict) -> str:
    classes = same_ids(truth)
    true = {Pair({(k["table"].lower(), k["column"].lower()), (k["ref_table"].lower(), k["ref_column"].lower())})
            for k in truth["foreign_keys"] if not k["polymorphic"]}
    polymorphic = {Pair({(k["table"].lower(), k["column"].lower()), (k["ref_table"].lower(), k["ref_column"].lower())})
                   for k in truth["foreign_keys"] if k["polymorphic"]}
    found = true & drafted
    other = drafted - true - polymorphic
    right = {p for p in other if len({classes.get(end, end) for end in p}) == 1}
    wrong = other - right
    text = (f"joins: {len(found)} of {len(true)} true foreign keys found, {len(true - found)} missed, "
            f"{len(wrong)} wrong, {len(right)} more between columns of the same ids; "
            f"charge -> event rows: {len(polymorphic & drafted)} of {len(polymorphic)}")
    if wrong:
        text += "\n    wrong: " + "; ".join(sorted(" = ".join(".".join(e) for e in sorted(p)) for p in wrong))
    missed = true - found
    if missed:
        text += "\n    missed: " + "; ".join(sorted(" = ".join(".".join(e) for e in sorted(p)) for p in missed))
    return text


def sample(items: list, limit: int) -> list:
    if not limit or limit >= len(items):
        return items
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def coverage(ehr, questions: list[tuple[str, set[str]]], misses: int = 0, *, miss_in_full: bool = False) -> str:
    """First-prompt gold-table coverage at each window (listed, and described in full), and
    prompts with no table in full; prints the misses at the ``misses`` k window (questions whose
    gold tables are not all listed, or with ``miss_in_full`` not all in full). A question whose
    smallest prompt does not fit the window counts as a miss ("too long")."""
    agent = Agent(ehr, None, examples=SeedExamples(), settings=AgentSettings(shots=4))
    parts = []
    for window in WINDOWS:
        fitted = ContextWindow(window, "bench")
        covered = in_full = none = shown = full = too_long = 0
        for question, tables in questions:
            try:
                prompt = agent.prompt(question, window=fitted)
            except PromptTooLongError:
                too_long += 1
                if misses == window // 1024:
                    print(f"    too long: {question}")
                continue
            described = set(prompt.tables[:prompt.layout.tables])
            covered += tables <= set(prompt.tables)
            in_full += tables <= described
            none += prompt.layout.tables == 0
            shown += len(prompt.tables)
            full += prompt.layout.tables
            if misses == window // 1024 and not tables <= (described if miss_in_full else set(prompt.tables)):
                print(f"    miss: {question}\n      gold {sorted(tables)}; full {prompt.tables[:prompt.layout.tables]}"
                      f"; listed {prompt.tables[prompt.layout.tables:]}")
        fitting = max(1, len(questions) - too_long)
        parts.append(f"{window // 1024}k listed {100 * covered / len(questions):5.1f}% full "
                     f"{100 * in_full / len(questions):5.1f}% ({covered}/{in_full}/{len(questions)}, "
                     f"{too_long} too long, {none} with no table in full; tables {shown / fitting:.1f} of "
                     f"{len(ehr.tables())}, {full / fitting:.1f} in full)")
    return ", ".join(parts)


def renamed_copy(style: str, copies: Path, work: Path, limit: int, splits: tuple[str, ...] = renamed.SPLITS,
                 misses: int = 0) -> None:
    folder = copies / style
    truth_file = copies / f"{style}.truth.json"
    if not truth_file.is_file():
        renamed.build(style, folder, EHRSQL)
    truth = json.loads(truth_file.read_text())
    db = work / f"{style}.duckdb"
    if not db.is_file():
        started = time.perf_counter()
        sources.load("csv", [folder], db)
        print(f"{style}: loaded and drafted in {time.perf_counter() - started:.0f} s")
    with ehr_magic.connect(db) as ehr:
        print(f"{style}:\n  " + score_joins(drafted_pairs(ehr), truth))
        for split in splits:
            texts = {i.id: i.question for i in load_split(EHRSQL, split)}
            gold = truth["questions"][split]
            questions = sample([(texts[q], {t.lower() for t in g["tables"]}) for q, g in gold.items()], limit)
            print(f"  {split:<5} ({len(questions)} questions): {coverage(ehr, questions, misses, miss_in_full=True)}")


def demo_joins(name: str, folder: Path, schema: str, work: Path) -> None:
    db = work / f"{schema}-csv.duckdb"
    sources.load("csv", [folder], db, schema=f"csv_{schema}_demo")
    packaged = knowledge_files.load(schema)
    expected = {p for t, info in packaged.tables.items() for p in join_pairs(t, info.joins)}
    with ehr_magic.connect(db) as ehr:
        present = {t.lower() for t in ehr.tables()}
        expected = {p for p in expected if all(t in present for t, _ in p)}
        drafted = drafted_pairs(ehr)
    found = expected & drafted
    print(f"{name} as a CSV folder: {len(found)} of {len(expected)} packaged joins drafted, "
          f"{len(drafted - expected)} drafted joins the packaged knowledge does not have")
    if drafted - expected:
        print("    not packaged: " + "; ".join(sorted(" = ".join(".".join(e) for e in sorted(p))
                                                     for p in drafted - expected)))


def home_schema(work: Path, limit: int, splits: tuple[str, ...] = ("valid",), misses: int = 0) -> None:
    from ehr_magic.sources import ehrsql

    db = work / "ehrsql.duckdb"
    if not db.is_file():
        ehrsql.load(EHRSQL / "mimic_iv.sqlite", db)
    for split in splits:
        items = sample([i for i in load_split(EHRSQL, split) if i.answerable], limit)
        questions = [(i.question, {t.lower() for t in renamed.gold_tables(i.gold_sql)}) for i in items]
        with ehr_magic.connect(db) as ehr:
            print(f"home schema (EHRSQL, packaged knowledge), {split} ({len(questions)} questions; goal >= 99.5% "
                  f"at 8k): {coverage(ehr, questions, misses)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=300, help="questions per split, evenly spread (0: all)")
    parser.add_argument("--styles", nargs="*", default=list(renamed.STYLES))
    parser.add_argument("--copies", help="folder with the renamed copies (STYLE/ and STYLE.truth.json); "
                        "built in a temporary folder when absent")
    parser.add_argument("--skip", nargs="*", default=[], choices=["demos", "home"])
    parser.add_argument("--work", help="folder that keeps the loaded databases between runs (reused when present)")
    parser.add_argument("--split", choices=renamed.SPLITS, help="only this split (the home schema: valid unless "
                        "this says train)")
    parser.add_argument("--misses", type=int, choices=[w // 1024 for w in WINDOWS], default=0,
                        help="print the questions whose gold tables are not all described in full at this window (k)")
    args = parser.parse_args()
    splits = (args.split,) if args.split else renamed.SPLITS
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        copies = Path(args.copies) if args.copies else work / "copies"
        for style in args.styles:
            renamed_copy(style, copies, work, args.questions, splits, args.misses)
        if "demos" not in args.skip:
            demo_joins("MIMIC-III demo", MIMIC_III, "mimic_iii", work)
            demo_joins("eICU demo", EICU, "eicu", work)
        if "home" not in args.skip:
            home_schema(work, args.questions, (args.split or "valid",), args.misses)


if __name__ == "__main__":
    sys.exit(main())
