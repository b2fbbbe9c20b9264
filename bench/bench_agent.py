"""Agent overhead and prompt size, with an instant fake model (no real endpoint).

Prints, for questions on the MIMIC-IV demo:
- our own overhead per question (everything but waiting for the model and the
  generated query's own run time): median and p95 (goal: median under 30 ms);
- prompt tokens per question of our prompt versus an EHRAgent-style prompt (every
  table's full column list + four examples + a separate knowledge call), and the share
  of ours that sits in the cacheable prefix (goal: ours <= 50% of EHRAgent-style at the
  default window);
- the same prompts fitted into a 4k window: tokens, tables and examples kept.

And, on the EHRSQL-2024 valid split (questions never used to tune the table choice):
- the share of answerable questions whose gold SQL's tables are all in the prompt, in full
  or in one line ("listed"; goal: >= 99% at the default window), and the stricter share
  whose gold tables are all described in full ("full"), with the packaged seeds as the only
  memory (a new user) and with train as the memory (an analyst who has worked a while),
  at the default window and at 4k.

    python bench/bench_agent.py [--db FILE] [--questions N] [--ehrsql-limit N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import ehr_magic  # noqa: E402
from ehr_magic.agent import Agent, AgentSettings, prompts  # noqa: E402
from ehr_magic.memory.fewshot import SeedExamples, seed_examples  # noqa: E402
from ehr_magic.llm import LLMClient, estimate_prompt_tokens, resolve_settings  # noqa: E402
from ehr_magic.memory.similarity import default_tokens  # noqa: E402
from ehr_magic.agent.budget import PromptTooLongError  # noqa: E402
from ehr_magic.memory.fewshot import Example  # noqa: E402
from ehr_magic.eval.datasets import load_split  # noqa: E402
from ehr_magic.llm.window import DEFAULT_LOCAL_WINDOW, ContextWindow  # noqa: E402
from fake_llm import FakeLLMServer  # noqa: E402
from rapidfuzz import fuzz, process  # noqa: E402
from sqlglot import exp, parse_one  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
EHRSQL = SHARED / "ehrsql-2024"
SMALL_WINDOW = 4096


def build_demo(out: Path) -> Path:
    from ehr_magic.sources import mimic_iv

    mimic_iv.load([SHARED / "mimic-iv-clinical-database-demo-2.2",
                   SHARED / "mimic-iv-demo-2.2-chartevents-reconstructed"], out)
    return out


def ehragent_style_tokens(ehr, question: str, examples) -> int:
    """EHRAgent's two calls: knowledge (all tables' columns + question), then code
    (all tables' columns + 4 examples + knowledge + question)."""
    knowledge = ehr.knowledge
    def described(t: str, c: str) -> str:
        return knowledge.tables[t].columns.get(c, "") if knowledge and t in knowledge.tables else ""

    columns = "\n".join(f"{t}: " + ", ".join(f"{c} ({described(t, c)})" for c in ehr.columns(t)) for t in ehr.tables())
    knowledge_prompt = [{"role": "user",
                         "content": f"Tables and columns:\n{columns}\nQuestion: {question}\nKnowledge:"}]
    shots = "\n\n".join(f"Question: {e.question}\nKnowledge:\n{e.knowledge}\nSolution:\n{e.code}" for e in examples)
    code_prompt = [{"role": "user", "content": f"Tables and columns:\n{columns}\n\n{shots}\n\nQuestion: {question}\n"
                                               "Knowledge: - (about 80 tokens of bullets)\nSolution:"}]
    return estimate_prompt_tokens(knowledge_prompt) + estimate_prompt_tokens(code_prompt) + 80


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", help="a mimic_iv database; built from ../shared/data when omitted")
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--ehrsql-limit", type=int, default=0, help="valid questions to check (0: all)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(args.db) if args.db else build_demo(Path(tmp) / "demo.duckdb")
        cases = list(seed_examples("mimic_iv"))[: args.questions]
        if not cases:
            raise SystemExit("no mimic_iv seed examples found")
        ehr = ehr_magic.connect(db)
        by_question = {c.question: c for c in cases}

        def responder(request):
            text = request["messages"][-1]["content"]
            question = text.rsplit("Question:", 1)[-1].strip()
            case = by_question[question]
            return f"Knowledge:\n{case.knowledge}\n```python\n{case.code}\n```"

        with FakeLLMServer() as server:
            server.responder = responder
            server.context_window = DEFAULT_LOCAL_WINDOW  # the window a server that says nothing gets
            import os

            os.environ.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="bench", EHR_MAGIC_MODEL="fake")
            os.environ["EHR_MAGIC_DATA_DIR"] = tmp
            llm = LLMClient(resolve_settings(), audit=False)
            agent = Agent(ehr, llm, settings=AgentSettings(shots=4, stream=False))
            # Seeds are the few-shot source here; exclude each question's own seed.
            agent.examples = _Excluding(SeedExamples())
            agent.run(cases[0].question)  # warm-up: system prompt, vocabularies, connections
            overhead, ours, ours_cached, theirs = [], [], [], []
            for case in cases:
                started = time.perf_counter()
                result = agent.run(case.question)
                total = time.perf_counter() - started
                run_time = sum(s.run_seconds for s in result.steps)
                overhead.append(total - result.model_seconds - run_time)
                request = server.chat_requests()[-1].json["messages"]
                ours.append(estimate_prompt_tokens(request))
                ours_cached.append(estimate_prompt_tokens(request[:1]))
                shots = agent.examples.examples(case.question, ehr.schema, 4)
                theirs.append(ehragent_style_tokens(ehr, case.question, shots))
                assert result.status == "answered", (case.question, result.message)
            small = [agent.prompt(c.question, window=ContextWindow(SMALL_WINDOW, "bench")) for c in cases]
            llm.close()
    overhead_ms = sorted(x * 1000 for x in overhead)
    p95 = overhead_ms[min(len(overhead_ms) - 1, int(round(0.95 * (len(overhead_ms) - 1))))]
    print(f"questions: {len(cases)} (MIMIC-IV demo, instant fake model, prompt version {prompts.PROMPT_VERSION})")
    print(f"our overhead per question (excluding model wait and query run): "
          f"median {statistics.median(overhead_ms):.1f} ms, p95 {p95:.1f} ms")
    print(f"prompt tokens per question: ours {statistics.mean(ours):,.0f} (cacheable prefix "
          f"{statistics.mean(ours_cached):,.0f} = {100 * sum(ours_cached) / sum(ours):.0f}%), "
          f"EHRAgent-style {statistics.mean(theirs):,.0f}; ratio ours/EHRAgent-style "
          f"{sum(ours) / sum(theirs):.2f}")
    print(f"uncached tokens per question: ours {statistics.mean(o - c for o, c in zip(ours, ours_cached)):,.0f}")
    print(f"at a {SMALL_WINDOW:,}-token window: "
          f"prompt {statistics.mean(estimate_prompt_tokens(p.messages) for p in small):,.0f} tokens "
          f"(max {max(estimate_prompt_tokens(p.messages) for p in small):,}), tables "
          f"{statistics.mean(len(p.tables) for p in small):.1f} ({statistics.mean(p.layout.tables for p in small):.1f} "
          f"in full), examples {statistics.mean(len(p.example_ids) for p in small):.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        ehrsql_table_recall(Path(tmp), args.ehrsql_limit)


def gold_tables(sql: str) -> set[str]:
    return {t.name.lower() for t in parse_one(sql, read="sqlite").find_all(exp.Table)}


class TrainMemory:
    """Train's questions with their gold SQL as the memory's cells (ranked as memory ranks)."""

    def __init__(self, items) -> None:
        self.cases = [Example(f"train:{i.id}", i.question, f'answer = ehr.sql("""{i.gold_sql}""")') for i in items]
        self.keys = [default_tokens(c.question) for c in self.cases]

    def examples(self, question, schema, k):
        ranked = process.extract(default_tokens(question), self.keys, scorer=fuzz.ratio, processor=None, limit=k)
        return [self.cases[i] for _, _, i in ranked]


def ehrsql_table_recall(tmp: Path, limit: int) -> None:
    from ehr_magic.sources import ehrsql

    db = tmp / "ehrsql.duckdb"
    ehrsql.load(EHRSQL / "mimic_iv.sqlite", db)
    valid = [i for i in load_split(EHRSQL, "valid") if i.answerable]
    valid = valid[:limit] if limit else valid
    train = [i for i in load_split(EHRSQL, "train") if i.answerable]
    print(f"EHRSQL-2024 valid: {len(valid)} answerable questions; tables of the gold SQL all in the prompt:")
    with ehr_magic.connect(db) as ehr:
        for memory_name, memory in (("seeds only", SeedExamples()), ("train as memory", TrainMemory(train))):
            agent = Agent(ehr, None, examples=memory, settings=AgentSettings(shots=4))
            for window in (DEFAULT_LOCAL_WINDOW, SMALL_WINDOW):
                fitted = ContextWindow(window, "bench")
                covered, in_full, tables, full, tokens, too_long = 0, 0, [], [], [], 0
                for item in valid:
                    try:
                        prompt = agent.prompt(item.question, window=fitted)
                    except PromptTooLongError:
                        too_long += 1
                        continue
                    gold = gold_tables(item.gold_sql)
                    covered += gold <= set(prompt.tables)
                    in_full += gold <= set(prompt.tables[:prompt.layout.tables])
                    full.append(prompt.layout.tables)
                    tables.append(len(prompt.tables))
                    tokens.append(estimate_prompt_tokens(prompt.messages))
                print(f"  {memory_name:<16} window {window:>5,}: listed {100 * covered / len(valid):.2f}% "
                      f"({covered}/{len(valid)}), full {100 * in_full / len(valid):.2f}% ({in_full}), "
                      f"tables in the prompt {statistics.mean(tables):.1f} of {len(ehr.tables())} "
                      f"({statistics.mean(full):.1f} in full), prompt {statistics.mean(tokens):,.0f} tokens"
                      + (f", {too_long} did not fit" if too_long else ""))


class _Excluding:
    """Seed examples without the question being asked (no answer leakage)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def examples(self, question, schema, k):
        return [e for e in self.inner.examples(question, schema, k + 1) if e.question != question][:k]


if __name__ == "__main__":
    main()
