"""``ehr-magic chat``: a terminal conversation over the same ``Session`` as the magic.

Reads one question a line from standard input (a terminal or a pipe); follow-ups read
against the earlier turns. ``/new`` starts a new conversation, ``/history`` shows it,
``/accept`` stores the last answer in memory, ``/quit`` (or end of input) leaves.
"""

from __future__ import annotations

import argparse
import sys

from ehr_magic.cli.ask import accept, add_session_arguments, open_database, open_session, print_answer, progress
from ehr_magic.errors import EhrMagicError

COMMANDS = "/new  new conversation   /history  this conversation   /accept  store the last answer   /quit  leave"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("chat", help="a conversation about a database in the terminal",
                            description="Ask questions one per line; follow-ups build on the earlier ones. "
                                        + COMMANDS)
    add_session_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    interactive = sys.stdin.isatty()
    with open_database(args) as ehr:
        session = open_session(args, ehr)
        print(f"ehr-magic chat on {ehr.dataset} (schema {ehr.schema}). {COMMANDS}")
        last = None
        try:
            while True:
                if interactive:
                    print("> ", end="", flush=True)
                line = sys.stdin.readline()
                if not line:
                    break
                line = line.strip()
                if not line:
                    continue
                if line.startswith("/"):
                    command = line.split()[0].lower()
                    if command in ("/quit", "/exit"):
                        break
                    if command == "/new":
                        session.new_conversation()
                        last = None
                        print("New conversation; the next question stands alone.")
                    elif command == "/history":
                        print(session.conversation.text())
                    elif command == "/accept":
                        if last is None or last.status != "answered":
                            print("Nothing to accept yet: ask a question that gets answered first.")
                        else:
                            print(f"Stored as memory entry #{accept(session, last)}: {last.standalone_question}")
                    else:
                        print(f"Unknown command {command}; {COMMANDS}")
                    continue
                if not interactive:
                    print(f"> {line}")
                try:
                    last = session.ask(line, regenerate=args.regenerate,
                                       on_event=None if args.quiet else progress)
                except EhrMagicError as exc:  # e.g. no model configured: say it, keep the conversation
                    print(f"ehr-magic: {exc}")
                    continue
                print_answer(last)
        except KeyboardInterrupt:
            print()
        finally:
            session.close()
    return 0
