"""The first prompt of a question, measured without a model: does it hold what the model would look up?

On the EHRSQL-2024 valid split (answerable questions, evenly spread), on the home schema (the
benchmark's database with its packaged knowledge) and on the renamed copies (``descriptive``,
``camel``: a stranger's tables, knowledge drafted from the data; ``ehr_magic.eval.renamed``),
prints per database:

- value coverage: the share of questions whose gold SQL's stored-value literals (a string the
  gold query compares a text column with, and that this column stores) all appear in the first
  prompt next to their ``table.column`` (on one line with it, or on the column's own line of the
  table's description); over the questions that have such literals (goal: >= 90%);
- first-prompt tokens against an EHRAgent-style prompt (every table's columns and four examples,
  its knowledge call and its code call: ``bench_agent.ehragent_style_tokens``), at the 8k default
  window and at 4k, with the gold-table coverage of the prompt beside each (listed: in full or
  in one line; full: described in full) (goal: <= 0.35 at 8k, coverage unchanged);
- tokens per section of the first prompt (system, earlier turns, stored values, tables in full,
  tables in one line, examples, skills, question), mean over questions;
- the system message: how many distinct ones the questions got (goal: 1 per window) and its
  tokens, the prefix every question on the database repeats;
- the floor: the ratio of a prompt of only the rules, the gold tables in full, the examples and
  the question, which no choice of tables can go below.

Then on the MIMIC-IV demo (all 31 tables, every lookup column, the ICD titles among them), with
its seed questions (each question's own seed left out of its examples, as in bench_agent.py):
first-prompt tokens against the EHRAgent-style prompt at 8k and 4k with the share of questions
whose seed code's tables are all in the prompt beside each, the tokens per section and the system
messages; and the median and p95 time of building the first prompt per EHRSQL valid question,
and of value linking alone when the code has it (goal: linking <= 50 ms median).

    PYTHONPATH=$PWD python bench/bench_first_prompt.py [--work DIR] [--questions N]
        [--databases home descriptive camel] [--skip-mimic] [--skip-timing]

--work keeps the loaded databases (ehrsql.duckdb, STYLE.duckdb, mimic-iv-demo.duckdb and the
renamed CSV copies) between runs; it is the same layout as bench_unfamiliar.py's --work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import sqlglot  # noqa: E402
from sqlglot import exp  # noqa: E402
from sqlglot.optimizer.scope import traverse_scope  # noqa: E402

import ehr_magic  # noqa: E402
from bench_agent import ehragent_style_tokens  # noqa: E402
from ehr_magic import sources  # noqa: E402
from ehr_magic.agent import Agent, AgentSettings, context  # noqa: E402
from ehr_magic.eval import renamed  # noqa: E402
from ehr_magic.eval.datasets import load_split  # noqa: E402
from ehr_magic.llm.tokens import estimate_prompt_tokens, estimate_tokens  # noqa: E402
from ehr_magic.llm.window import DEFAULT_LOCAL_WINDOW, ContextWindow  # noqa: E402
from ehr_magic.memory.fewshot import SeedExamples  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
EHRSQL = SHARED / "ehrsql-2024"
MIMIC_IV = [SHARED / "mimic-iv-clinical-database-demo-2.2", SHARED / "mimic-iv-demo-2.2-chartevents-reconstructed"]
WINDOWS = (DEFAULT_LOCAL_WINDOW, 4096)
# Headings that open a section of the question's message (the templates' own words), in any order.
SECTIONS = {
    "Earlier in this conversation:": "earlier turns",
    "This question continues a conversation": "earlier turns",
    "The analyst asks this question in a notebook.": "earlier turns",
    "Stored values": "stored values",
    "Tables for this question:": "tables in full",
    "No table was matched": "tables in full",
    "Maybe needed too": "tables in one line",
    "Conventions of the dataset for these tables:": "conventions",
    "Solved examples from this database:": "examples",
    "Now the new question.": "question",
    "Verified clinical skills": "skills",
    "Question:": "question",
}


def sample(items: list, limit: int) -> list:
    if not limit or limit >= len(items):
        return items
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


# -- the gold SQL's stored-value literals ------------------------------------------------------

def compared_literals(sql: str, tables: dict[str, dict[str, str]]) -> set[tuple[str, str, str]]:
    """``(table, column, literal)`` for each string the query compares a column with (=, IN, LIKE
    without wildcards), the column's table resolved through the aliases of its own scope."""
    lowered = {t.lower(): t for t in tables}
    found = set()
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.ParseError:
        return found
    for scope in traverse_scope(tree):
        sources_ = {alias: lowered.get(source.name.lower()) for alias, source in scope.sources.items()
                    if isinstance(source, exp.Table)}
        for node in scope.expression.find_all(exp.EQ, exp.In, exp.Like):
            if isinstance(node, exp.In):
                pairs = [(node.this, e) for e in node.expressions]
            else:
                pairs = [(node.left, node.right), (node.right, node.left)]
            for column, literal in pairs:
                if not (isinstance(column, exp.Column) and isinstance(literal, exp.Literal) and literal.is_string):
                    continue
                if isinstance(node, exp.Like) and ("%" in literal.this or "_" in literal.this):
                    continue  # a pattern, not a value
                if column.table:
                    candidates = [sources_.get(column.table)]
                else:
                    candidates = [t for t in sources_.values() if t and _column(tables[t], column.name)]
                for table in candidates:
                    name = _column(tables[table], column.name) if table else None
                    if name:
                        found.add((table, name, literal.this))
    return found


def _column(columns: dict[str, str], name: str) -> str | None:
    return next((c for c in columns if c.lower() == name.lower()), None)


def stored_literals(ehr, sql: str) -> set[tuple[str, str, str]]:
    """The compared literals that are stored values: a text column that holds the literal."""
    tables = {t: ehr.columns(t) for t in ehr.tables()}
    kept = set()
    for table, column, literal in compared_literals(sql, tables):
        if not tables[table][column].upper().startswith("VARCHAR"):
            continue
        if ehr.sql(f'SELECT 1 AS hit FROM "{table}" WHERE "{column}" = ? LIMIT 1', [literal]).height:
            kept.add((table, column, literal))
    return kept


def shown_next_to_column(text: str, table: str, column: str, literal: str) -> bool:
    """Whether ``'literal'`` is on a line with ``table.column`` (or with ``table`` and the column
    name), or on the column's own line (``- column: ...``) of the table's description."""
    quoted = f"'{literal}'"
    if quoted not in text:
        return False
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].split(":")[0].split(" ")[0]
        if quoted not in line:
            continue
        if f"{table}.{column}" in line or (f"{table}." in line and column in line):
            return True
        if section == table and line.lstrip().startswith(f"- {column}:"):
            return True
    return False


# -- the databases ---------------------------------------------------------------------------

def home_database(work: Path) -> Path:
    from ehr_magic.sources import ehrsql

    db = work / "ehrsql.duckdb"
    if not db.is_file():
        ehrsql.load(EHRSQL / "mimic_iv.sqlite", db)
    return db


def renamed_database(style: str, work: Path) -> tuple[Path, dict]:
    copies = work / "copies"
    truth_file = copies / f"{style}.truth.json"
    if not truth_file.is_file():
        renamed.build(style, copies / style, EHRSQL)
    db = work / f"{style}.duckdb"
    if not db.is_file():
        sources.load("csv", [copies / style], db)
    return db, json.loads(truth_file.read_text())


def mimic_demo(work: Path) -> Path:
    from ehr_magic.sources import mimic_iv

    db = work / "mimic-iv-demo.duckdb"
    if not db.is_file():
        mimic_iv.load(MIMIC_IV, db, dataset="mimic-iv-demo")
    return db


# -- the measures ----------------------------------------------------------------------------

def sections(messages: list[dict[str, str]]) -> dict[str, int]:
    """Tokens of each section of the first request."""
    counts: dict[str, int] = defaultdict(int)
    counts["system"] = estimate_tokens(messages[0]["content"])
    current = "other"
    for line in messages[-1]["content"].splitlines(keepends=True):
        for heading, name in SECTIONS.items():
            # an example's own "Question:" lines stay in the examples, up to "Now the new question."
            if line.startswith(heading) and not (current == "examples" and heading == "Question:"):
                current = name
                break
        counts[current] += estimate_tokens(line)
    return counts


def floor_tokens(ehr, question: str, gold: set[str], examples) -> int:
    """The smallest first prompt that keeps what the model cannot do without: the system message's
    rules (up to its dataset heading), the gold tables in full, the examples and the question; no
    index, introduction, conventions or stored values. A ratio below it is out of reach of any
    choice of tables."""
    rules = context.system_prompt(ehr).split("# The dataset")[0]
    tables = [t for t in ehr.tables() if t.lower() in gold]
    text = context.question_message(question, examples, "", "", tables=context.table_details(ehr, tables))
    return estimate_prompt_tokens([{"role": "system", "content": rules}, {"role": "user", "content": text}])


def measure(name: str, db: Path, questions: list[tuple[str, str]]) -> None:
    """``questions``: (question, gold SQL on this database)."""
    with ehr_magic.connect(db) as ehr:
        agent = Agent(ehr, None, examples=SeedExamples(), settings=AgentSettings(shots=4))
        literals = {q: stored_literals(ehr, sql) for q, sql in questions}
        with_values = [q for q, _ in questions if literals[q]]
        gold = {q: {t.lower() for t in renamed.gold_tables(sql)} for q, sql in questions}
        theirs = {q: ehragent_style_tokens(ehr, q, agent.examples.examples(q, ehr.schema, 4)) for q, _ in questions}
        floor = sum(floor_tokens(ehr, q, gold[q], agent.examples.examples(q, ehr.schema, 4))
                    for q, _ in questions) / sum(theirs.values())
        print(f"{name}: {len(questions)} valid questions, {len(with_values)} with stored-value literals; "
              f"floor {floor:.2f} of EHRAgent-style (the rules, the gold tables in full, the examples and the "
              "question alone)")
        for window in WINDOWS:
            fitted = ContextWindow(window, "bench")
            covered = listed = in_full = 0
            ours, systems, parts = [], set(), defaultdict(list)
            misses = []
            for question, _sql in questions:
                prompt = agent.prompt(question, window=fitted)
                text = "\n".join(m["content"] for m in prompt.messages)
                found = all(shown_next_to_column(text, *item) for item in literals[question])
                covered += found and bool(literals[question])
                if not found and len(misses) < 3:
                    misses.append((question, sorted(i for i in literals[question]
                                                    if not shown_next_to_column(text, *i))))
                listed += gold[question] <= {t.lower() for t in prompt.tables}
                in_full += gold[question] <= {t.lower() for t in prompt.tables[:prompt.layout.tables]}
                ours.append(estimate_prompt_tokens(prompt.messages))
                systems.add(prompt.messages[0]["content"])
                for part, tokens in sections(prompt.messages).items():
                    parts[part].append(tokens)
            share = sum(ours) / sum(theirs.values())
            count = len(questions)
            system_tokens = sorted(estimate_tokens(s) for s in systems)
            uncached = (sum(ours) - count * system_tokens[0]) / sum(theirs.values())
            print(f"  {window // 1024}k: value coverage {100 * covered / max(1, len(with_values)):.1f}% "
                  f"({covered}/{len(with_values)}); first prompt {statistics.mean(ours):,.0f} tokens, "
                  f"EHRAgent-style {statistics.mean(theirs.values()):,.0f}, ratio {share:.2f} (past the repeated "
                  f"system prefix {uncached:.2f}); gold tables listed {100 * listed / count:.1f}%, "
                  f"full {100 * in_full / count:.1f}%")
            print("      sections (mean tokens): " + ", ".join(
                f"{part} {statistics.mean(values + [0] * (count - len(values))):,.0f}"
                for part, values in sorted(parts.items(), key=lambda item: -sum(item[1]))))
            print(f"      system messages: {len(systems)} distinct, {system_tokens[0]:,}"
                  + (f"-{system_tokens[-1]:,}" if len(system_tokens) > 1 else "")
                  + " tokens: the prefix repeated by every question"
                  + (" (it differs between questions)" if len(systems) > 1 else "")
                  + f", {100 * system_tokens[0] / statistics.mean(ours):.0f}% of the prompt")
            for question, missing in misses:
                print(f"      value miss: {question}\n        not shown: {missing}")


def mimic_tokens(work: Path) -> None:
    """Tokens against EHRAgent-style on the MIMIC-IV demo's seed questions (bench_agent.py's measure)."""
    from bench_agent import _Excluding
    from ehr_magic.agent.table_choice import tables_in_code
    from ehr_magic.memory.fewshot import seed_examples

    db = mimic_demo(work)
    cases = list(seed_examples("mimic_iv"))
    with ehr_magic.connect(db) as ehr:
        agent = Agent(ehr, None, examples=_Excluding(SeedExamples()), settings=AgentSettings(shots=4))
        theirs = [ehragent_style_tokens(ehr, c.question, agent.examples.examples(c.question, ehr.schema, 4))
                  for c in cases]
        print(f"MIMIC-IV demo, {len(cases)} seed questions (own seed left out of the examples):")
        for window in WINDOWS:
            fitted = ContextWindow(window, "bench")
            ours, listed, in_full, systems, parts = [], 0, 0, set(), defaultdict(list)
            for case in cases:
                prompt = agent.prompt(case.question, window=fitted)
                gold = set(tables_in_code(ehr.tables(), case.code))
                listed += gold <= set(prompt.tables)
                in_full += gold <= set(prompt.tables[:prompt.layout.tables])
                ours.append(estimate_prompt_tokens(prompt.messages))
                systems.add(prompt.messages[0]["content"])
                for part, tokens in sections(prompt.messages).items():
                    parts[part].append(tokens)
            count = len(cases)
            system_tokens = sorted(estimate_tokens(s) for s in systems)
            uncached = (sum(ours) - count * system_tokens[0]) / sum(theirs)
            print(f"  {window // 1024}k: first prompt {statistics.mean(ours):,.0f} tokens, EHRAgent-style "
                  f"{statistics.mean(theirs):,.0f}, ratio {sum(ours) / sum(theirs):.2f} (past the repeated system "
                  f"prefix {uncached:.2f}); seed-code tables listed {100 * listed / count:.1f}%, "
                  f"full {100 * in_full / count:.1f}%")
            print("      sections (mean tokens): " + ", ".join(
                f"{part} {statistics.mean(values + [0] * (count - len(values))):,.0f}"
                for part, values in sorted(parts.items(), key=lambda item: -sum(item[1]))))
            print(f"      system messages: {len(systems)} distinct, {system_tokens[0]:,}"
                  + (f"-{system_tokens[-1]:,}" if len(system_tokens) > 1 else "") + " tokens")


def timing(work: Path, limit: int) -> None:
    db = mimic_demo(work)
    items = sample([i for i in load_split(EHRSQL, "valid") if i.answerable], limit)
    with ehr_magic.connect(db) as ehr:
        agent = Agent(ehr, None, examples=SeedExamples(), settings=AgentSettings(shots=4))
        window = ContextWindow(DEFAULT_LOCAL_WINDOW, "bench")
        started = time.perf_counter()
        agent.prompt(items[0].question, window=window)  # vocabularies, system prompt, table picker
        print(f"MIMIC-IV demo ({len(ehr.lookup_columns())} lookup columns): first prompt, cold, "
              f"{time.perf_counter() - started:.2f} s")
        prompt_ms, link_ms = [], []
        linker = _linker()
        for item in items:
            started = time.perf_counter()
            agent.prompt(item.question, window=window)
            prompt_ms.append(1000 * (time.perf_counter() - started))
            if linker is not None:
                started = time.perf_counter()
                linker(ehr, item.question)
                link_ms.append(1000 * (time.perf_counter() - started))
    print(f"  building the first prompt, {len(items)} questions: median {statistics.median(prompt_ms):.1f} ms, "
          f"p95 {_p95(prompt_ms):.1f} ms")
    if link_ms:
        print(f"  value linking alone: median {statistics.median(link_ms):.1f} ms, p95 {_p95(link_ms):.1f} ms, "
              f"max {max(link_ms):.1f} ms")
    else:
        print("  value linking: none in this checkout (0 ms)")


def _linker():
    try:
        from ehr_magic.linking.question import link_question
    except ImportError:
        return None
    return link_question


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", help="folder that keeps the loaded databases between runs")
    parser.add_argument("--questions", type=int, default=300, help="valid questions, evenly spread (0: all)")
    parser.add_argument("--databases", nargs="*", default=["home", "descriptive", "camel"],
                        choices=["home", *renamed.STYLES], help="with no names: only the MIMIC-IV demo and timing")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--skip-mimic", action="store_true", help="no token measure on the MIMIC-IV demo")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        items = sample([i for i in load_split(EHRSQL, "valid") if i.answerable], args.questions)
        for name in args.databases:
            if name == "home":
                measure("home schema (EHRSQL, packaged knowledge)", home_database(work),
                        [(i.question, i.gold_sql) for i in items])
            else:
                db, truth = renamed_database(name, work)
                gold = truth["questions"]["valid"]
                measure(f"{name} copy (drafted knowledge)", db,
                        [(i.question, gold[i.id]["sql"]) for i in items if i.id in gold])
        if not args.skip_mimic:
            mimic_tokens(work)
        if not args.skip_timing:
            timing(work, args.questions)


if __name__ == "__main__":
    sys.exit(main())
