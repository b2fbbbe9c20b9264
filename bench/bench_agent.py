"""Agent overhead and prompt size, with an instant fake model (no real endpoint).

Prints, for questions on the MIMIC-IV demo:
- our own overhead per question (everything but waiting for the model and the
  generated query's own run time): median and p95 (goal: median under 30 ms);
- prompt tokens per question of our prompt versus an EHRAgent-style prompt (every
  table's full column list + four examples + a separate knowledge call), and the share
  of ours that sits in the cacheable prefix (goal: ours <= EHRAgent-style).

    python bench/bench_agent.py [--db FILE] [--questions N]
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
from ehr_magic.agent import context  # noqa: E402
from ehr_magic.agent.fewshot import SeedExamples, seed_examples  # noqa: E402
from ehr_magic.llm import LLMClient, estimate_prompt_tokens, resolve_settings  # noqa: E402
from fake_llm import FakeLLMServer  # noqa: E402

SHARED = REPO.parent / "shared" / "data"


def build_demo(out: Path) -> Path:
    from ehr_magic.data.sources import mimic_iv

    mimic_iv.load([SHARED / "mimic-iv-clinical-database-demo-2.2", SHARED / "mimic-iv-demo-2.2-chartevents-reconstructed"], out)
    return out


def ehragent_style_tokens(ehr, question: str, examples) -> int:
    """EHRAgent's two calls: knowledge (all tables' columns + question), then code
    (all tables' columns + 4 examples + knowledge + question)."""
    knowledge = ehr.knowledge
    columns = "\n".join(
        f"{t}: " + ", ".join(f"{c} ({knowledge.tables[t].columns.get(c, '') if knowledge and t in knowledge.tables else ''})"
                              for c in ehr.columns(t)) for t in ehr.tables())
    knowledge_prompt = [{"role": "user", "content": f"Tables and columns:\n{columns}\nQuestion: {question}\nKnowledge:"}]
    shots = "\n\n".join(f"Question: {e.question}\nKnowledge:\n{e.knowledge}\nSolution:\n{e.code}" for e in examples)
    code_prompt = [{"role": "user", "content": f"Tables and columns:\n{columns}\n\n{shots}\n\nQuestion: {question}\n"
                                               "Knowledge: - (about 80 tokens of bullets)\nSolution:"}]
    return estimate_prompt_tokens(knowledge_prompt) + estimate_prompt_tokens(code_prompt) + 80


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", help="a mimic_iv database; built from ../shared/data when omitted")
    parser.add_argument("--questions", type=int, default=30)
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
            llm.close()
    overhead_ms = sorted(x * 1000 for x in overhead)
    p95 = overhead_ms[min(len(overhead_ms) - 1, int(round(0.95 * (len(overhead_ms) - 1))))]
    print(f"questions: {len(cases)} (MIMIC-IV demo, instant fake model, prompt version {prompts.PROMPT_VERSION})")
    print(f"our overhead per question (excluding model wait and query run): median {statistics.median(overhead_ms):.1f} ms, "
          f"p95 {p95:.1f} ms")
    print(f"prompt tokens per question: ours {statistics.mean(ours):,.0f} (cacheable prefix "
          f"{statistics.mean(ours_cached):,.0f} = {100 * sum(ours_cached) / sum(ours):.0f}%), "
          f"EHRAgent-style {statistics.mean(theirs):,.0f}; ratio ours/EHRAgent-style "
          f"{sum(ours) / sum(theirs):.2f}")
    print(f"uncached tokens per question: ours {statistics.mean(o - c for o, c in zip(ours, ours_cached)):,.0f}")


class _Excluding:
    """Seed examples without the question being asked (no answer leakage)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def examples(self, question, schema, k):
        return [e for e in self.inner.examples(question, schema, k + 1) if e.question != question][:k]


if __name__ == "__main__":
    main()
