"""``ehr-magic ask``: one question from the shell, through the same ``Session`` as the magic
(accepted cells reused, memory reuse, then the agent)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ehr_magic.cli.arguments import agent_setting
from ehr_magic.agent import AgentSettings, Event
from ehr_magic.agent.steps import to_json_value
from ehr_magic.errors import EhrMagicError
from ehr_magic.safety.privacy import preview

if TYPE_CHECKING:  # pragma: no cover
    from ehr_magic.db import EHR
    from ehr_magic.session import Answer, Session


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ask", help="answer one question with generated code",
                            description="Answer one question about a database: from memory when an accepted cell "
                                        "answers it, else with generated, executed code.")
    parser.add_argument("question", help="the question, in quotes")
    add_session_arguments(parser)
    parser.add_argument("--accept", action="store_true",
                        help="store the answer's code in memory as accepted (as running an inserted cell does)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON document")
    parser.set_defaults(func=run)


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``ask`` and ``chat`` share: database, model, memory and agent settings."""
    parser.add_argument("--db", help="database: a .duckdb file built with `ehr-magic data`, or a server URL "
                        "(postgresql://..., sc://...); default, as in the notebook: EHR_MAGIC_DB, else the demo "
                        "database")
    parser.add_argument("--model", help="model name (default: config file or EHR_MAGIC_MODEL)")
    parser.add_argument("--memory", help="memory file (default: EHR_MAGIC_MEMORY or the user data dir, as the magic)")
    parser.add_argument("--regenerate", action="store_true", help="ignore memory and ask the model anew")
    parser.add_argument("--max-steps", "--steps", type=agent_setting("steps"), default=10,
                        help="most code attempts (default 10)")
    parser.add_argument("--shots", type=agent_setting("shots"), default=4, help="few-shot examples (default 4)")
    parser.add_argument("--knowledge", choices=["separate", "inline", "off"], default="inline",
                        help="knowledge integration mode (default inline)")
    parser.add_argument("--timeout", type=agent_setting("timeout"), default=60.0,
                        help="seconds per code run (default 60)")
    parser.add_argument("--privacy", choices=["schema", "aggregates", "full"],
                        help="what the model may see of the data (default: by dataset)")


def open_database(args: argparse.Namespace) -> EHR:
    """The database ``--db`` names, else the magic's default (EHR_MAGIC_DB, else the
    demo database); which one is said on stderr, so that --json output stays clean."""
    from ehr_magic.db import connect
    from ehr_magic.sources.demo import default_target, resolve_database

    from ehr_magic.cli.progress import progress_bar

    target = args.db or default_target()
    path, what = resolve_database(target, say=lambda line: print(line, file=sys.stderr))
    with progress_bar("connecting") as progress:
        ehr = connect(path, progress=progress)
    for note in ehr.connect_notes():
        print(note, file=sys.stderr)
    origin = ("" if args.db else " EHR_MAGIC_DB names it." if target != "demo"
              else " It is the default, as neither --db nor EHR_MAGIC_DB names one.")
    print(f"Database: {ehr.location}, {what or ehr.dataset}.{origin}", file=sys.stderr)
    return ehr


def open_session(args: argparse.Namespace, ehr: EHR) -> Session:
    """A ``Session`` on ``ehr`` with the memory store the magic uses."""
    from ehr_magic.memory import MemoryStore
    from ehr_magic.session import Session

    settings = AgentSettings(max_steps=args.max_steps, shots=args.shots, knowledge=args.knowledge,
                             timeout=args.timeout, privacy=args.privacy)
    return Session(ehr, memory=MemoryStore(args.memory or None),
                   llm_overrides={"model": args.model} if args.model else {}, settings=settings)


def run(args: argparse.Namespace) -> int:
    if not args.json:
        return _run(args)
    try:
        return _run(args)
    except EhrMagicError as exc:  # still one JSON document on stdout; the exit code and stderr line as without --json
        print(json.dumps(error_dict(args.question, str(exc)), ensure_ascii=False), flush=True)
        raise
    except KeyboardInterrupt:
        print(json.dumps(error_dict(args.question, "Interrupted.")), flush=True)
        raise
    except Exception as exc:  # a bug: said in the JSON too, and its traceback kept
        print(json.dumps(error_dict(args.question, f"ehr-magic failed (a bug; the traceback is on stderr): "
                                    f"{type(exc).__name__}: {exc}"), ensure_ascii=False), flush=True)
        raise


def _run(args: argparse.Namespace) -> int:
    if not args.question.split():
        raise EhrMagicError('The question is empty; write it in quotes, e.g. ehr-magic ask "How many patients '
                            'are there?"')
    with open_database(args) as ehr:
        session = open_session(args, ehr)
        try:
            answer = session.ask(args.question, regenerate=args.regenerate, on_event=None if args.json else progress)
            if args.accept and answer.status == "answered":
                accept(session, answer)
        finally:
            session.close()
    if args.json:
        print(json.dumps(answer_dict(answer), ensure_ascii=False))
    else:
        print_answer(answer)
    return 0 if answer.status == "answered" else 1


def accept(session: Session, answer: Answer) -> int | None:
    """Store an answer as accepted, under the question its code answers on its own."""
    return session.cells.remember(answer.standalone_question, answer.code, knowledge=answer.knowledge,
                                  answer_preview=preview(answer.answer, 500),
                                  model=answer.result.model if answer.result else None)


def error_dict(question: str, message: str) -> dict[str, Any]:
    """The JSON form of a question that got no answer because of an error (status ``error``)."""
    return {"question": question, "status": "error", "message": message, "answer": None, "code": ""}


def answer_dict(answer: Answer) -> dict[str, Any]:
    """The JSON form of an ``Answer`` (the agent's step details when the agent answered)."""
    out = answer.result.to_dict() if answer.result is not None else {"steps": [], "llm_calls": 0, "prompt_tokens": 0,
                                                                     "completion_tokens": 0, "model": ""}
    out.update({"question": answer.question, "standalone_question": answer.standalone_question,
                "status": answer.status, "answer": to_json_value(answer.answer), "code": answer.code,
                "knowledge": answer.knowledge, "message": answer.message, "source": answer.source,
                "entry_id": answer.entry_id, "seconds": round(answer.seconds, 4),
                "substitutions": [list(pair) for pair in answer.substitutions], "variables": answer.variables})
    return out


def progress(event: Event) -> None:
    if event.kind == "phase":
        print(f"[{event.elapsed:6.1f}s] {event.phase} {event.detail}", file=sys.stderr)
    elif event.kind == "step" and event.step and not event.step.succeeded:
        print(f"          {event.step.line()}", file=sys.stderr)


def print_answer(answer: Answer) -> None:
    print(f"status: {answer.status} ({'from memory' if answer.source == 'memory' else answer.source})")
    if answer.standalone_question != answer.question:
        print(f"meaning: {answer.standalone_question}")
    if answer.code:
        print("code:\n" + "\n".join("    " + line for line in answer.code.splitlines()))
    if answer.status == "answered":
        print("answer:\n" + preview(answer.answer))
    if answer.message:
        print(answer.message)
    result = answer.result
    if result is not None:
        print(f"({len(result.steps)} steps, {len(result.llm_calls)} model calls, "
              f"{result.prompt_tokens}+{result.completion_tokens} tokens, {answer.seconds:.1f} s)")
