"""Parsing ``%%ehr`` invocations into small objects, testable without a shell. The marker
comment of inserted cells is the session's (``ehr_magic.session.cells``)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ehr_magic.agent.loop import KnowledgeMode, checked_setting
from ehr_magic.errors import ConfigError, sentences
from ehr_magic.session.cells import MARKER, cell_body, marker_line, new_token, read_marker, with_marker  # noqa: F401


@magic_arguments()
@argument("--model", help="model to use for this question (default: %%config EhrMagics.model or EHR_MAGIC_MODEL)")
@argument("--steps", type=int, help="most code attempts, T (default 10)")
@argument("--shots", type=int, help="few-shot examples from memory, K (default 4)")
@argument("--knowledge", choices=["separate", "inline", "off"], help="knowledge integration mode (default inline)")
@argument("--as", dest="as_name", metavar="NAME", help="also bind the answer to this variable")
@argument("--no-run", action="store_true", help="generate and insert the code, but do not run it")
@argument("--regenerate", action="store_true", help="ignore the accepted cell in memory and ask the model anew")
@argument("--review", action="store_true", help="insert the generated code without running it, to read it first")
@argument("--quiet", action="store_true", help="show only the answer, no progress or details")
def ehr_cell_arguments(line: str) -> None:
    """%%ehr [options]  followed by the question as the cell body.

    Writes code that answers the question, inserts it as a new cell below, runs it and
    binds its variables (``answer`` among them). Run the inserted cell (edited or not)
    to accept it: it becomes memory that answers the same question without the model
    next time and improves later answers.
    """


@dataclass(frozen=True)
class AskCommand:
    question: str
    model: str | None = None
    steps: int | None = None
    shots: int | None = None
    knowledge: KnowledgeMode | None = None  # argparse admits only these choices
    as_name: str | None = None
    no_run: bool = False
    regenerate: bool = False
    quiet: bool = False
    review: bool = False


class CommandError(ValueError):
    """The invocation cannot be understood; the message says how to write it."""


def parse_ask(line: str, cell: str) -> AskCommand:
    """``%%ehr`` line options and cell body -> ``AskCommand``."""
    try:
        args = parse_argstring(ehr_cell_arguments, line)
    except (UsageError, ValueError) as exc:  # argparse's complaint, or an unclosed quote; keep its message
        raise CommandError(f"{exc}; see %%ehr? for the options.") from None
    question = " ".join(cell.strip().split())
    if not question:
        raise CommandError("Write the question in the cell body below %%ehr, e.g. How many patients are there?")
    if args.as_name is not None and not args.as_name.isidentifier():
        raise CommandError(f"--as needs a Python variable name, not {args.as_name!r}.")
    for option, value in (("steps", args.steps), ("shots", args.shots)):
        if value is not None:
            try:
                checked_setting(option, value)
            except ConfigError as exc:
                raise CommandError(f"--{exc}") from None
    return AskCommand(question, args.model, args.steps, args.shots, args.knowledge, args.as_name,
                      args.no_run, args.regenerate, args.quiet, args.review)


def split_line(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise CommandError(f"Cannot read the command: {sentences(exc)} Check the quotes.") from None
