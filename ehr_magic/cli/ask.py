"""``ehr-magic ask``: one question through the agent, from the shell."""

from __future__ import annotations

import argparse
import json
import sys

from ehr_magic.agent import Agent, AgentSettings, Event
from ehr_magic.agent.steps import preview
from ehr_magic.data import connect


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ask", help="answer one question with generated code",
                            description="Answer one question about a database with generated, executed code.")
    parser.add_argument("question", help="the question, in quotes")
    parser.add_argument("--db", required=True, help="database: a .duckdb file built with `ehr-magic data`, "
                        "or a server URL (postgresql://..., sc://...)")
    parser.add_argument("--model", help="model name (default: config file or EHR_MAGIC_MODEL)")
    parser.add_argument("--max-steps", type=int, default=10, help="most code attempts (default 10)")
    parser.add_argument("--shots", type=int, default=4, help="few-shot examples (default 4)")
    parser.add_argument("--knowledge", choices=["separate", "inline", "off"], default="inline",
                        help="knowledge integration mode (default inline)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per code run (default 60)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON document")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ehr_magic.llm import LLMClient, resolve_settings

    settings = resolve_settings(**({"model": args.model} if args.model else {}))
    with connect(args.db) as ehr, LLMClient(settings) as llm:
        agent = Agent(ehr, llm, examples=_examples(), settings=AgentSettings(
            max_steps=args.max_steps, shots=args.shots, knowledge=args.knowledge, timeout=args.timeout))
        result = agent.run(args.question, on_event=None if args.json else _progress)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        _print_result(result)
    return 0 if result.status == "answered" else 1


def _examples():
    """Memory when it is available, else the packaged seeds."""
    try:
        from ehr_magic.memory.examples import MemoryExamples
    except ImportError:
        return None
    return MemoryExamples()


def _progress(event: Event) -> None:
    if event.kind == "phase":
        print(f"[{event.elapsed:6.1f}s] {event.phase} {event.detail}", file=sys.stderr)
    elif event.kind == "step" and event.step and not event.step.succeeded:
        reason = event.step.error.describe() if event.step.error else event.step.soft_failure
        print(f"          step {event.step.index} failed: {reason.splitlines()[0]}", file=sys.stderr)


def _print_result(result) -> None:
    print(f"status: {result.status}")
    if result.code:
        print("code:\n" + "\n".join("    " + line for line in result.code.splitlines()))
    if result.status == "answered":
        print("answer:\n" + preview(result.answer))
    elif result.message:
        print(result.message)
    print(f"({len(result.steps)} steps, {len(result.llm_calls)} model calls, "
          f"{result.prompt_tokens}+{result.completion_tokens} tokens, {result.seconds:.1f} s)")
