"""The ``ehr-magic`` command line: a thin shell over the library.

Each subcommand lives in its own module with ``register(subparsers)``; its handler
returns an exit code. User mistakes (``EhrMagicError``) become one line on stderr and
exit code 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ehr_magic.version import __version__
from ehr_magic.errors import EhrMagicError

# Subcommand modules, in the order `ehr-magic --help` lists them.
SUBCOMMANDS = ["demo", "data", "ask", "chat", "eval", "memory", "audit"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ehr-magic",
        description="Ask electronic health record questions; get code that runs.",
    )
    parser.add_argument("--version", action="version", version=f"ehr-magic {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"ehr_magic.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except EhrMagicError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
