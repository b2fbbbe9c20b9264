"""``ehr-magic memory``: look into and manage the long-term memory store.

    ehr-magic memory list|search|show|delete|clear|export|import|stats [--store PATH]

``--store`` defaults to ``$EHR_MAGIC_MEMORY``, else ``memory.sqlite`` in the user data
folder. Every subcommand is a thin layer over ``ehr_magic.memory.MemoryStore``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from ehr_magic.memory import METHODS, ORIGINS, MemoryEntry, MemoryStore, default_store_path


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "memory", help="list, search and manage remembered question/code cases",
        description="Look into and manage the long-term memory: past questions with the code "
        "that answered them, used as examples for new questions.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", metavar="PATH",
                        help="memory file (default: $EHR_MAGIC_MEMORY, else memory.sqlite "
                        "in the user data folder)")
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON instead of text")
    actions = parser.add_subparsers(dest="memory_command", metavar="ACTION", required=True)

    p = actions.add_parser("list", parents=[common, as_json], help="list entries, newest first")
    p.add_argument("--schema", help="only entries of this schema fingerprint")
    p.add_argument("--origin", choices=ORIGINS, help="only entries of this origin")
    p.add_argument("--limit", type=int, default=50, help="at most this many (default 50; 0 = all)")
    p.set_defaults(func=run_list)

    p = actions.add_parser("search", parents=[common, as_json],
                           help="the stored questions most similar to a question")
    p.add_argument("question")
    p.add_argument("-k", type=int, default=4, help="how many (default 4)")
    p.add_argument("--schema", help="only entries of this schema fingerprint (default: all)")
    p.add_argument("--origin", action="append", choices=ORIGINS, dest="origins",
                   help="only entries of this origin (repeatable)")
    p.add_argument("--method", choices=METHODS, default="default",
                   help="similarity: 'default' or EHRAgent's 'levenshtein'")
    p.set_defaults(func=run_search)

    p = actions.add_parser("show", parents=[common, as_json], help="show one entry in full")
    p.add_argument("id", type=int)
    p.set_defaults(func=run_show)

    p = actions.add_parser("delete", parents=[common], help="delete entries by id")
    p.add_argument("ids", type=int, nargs="+", metavar="ID")
    p.set_defaults(func=run_delete)

    p = actions.add_parser("clear", parents=[common], help="delete every entry: start with an empty memory",
                           description="Delete every entry (or those of one schema), e.g. to undo what running the "
                           "demo notebooks stored. Export them first to keep a copy.")
    p.add_argument("--schema", help="only entries of this schema fingerprint")
    p.add_argument("--yes", action="store_true", help="delete without asking (required when not at a terminal)")
    p.set_defaults(func=run_clear)

    p = actions.add_parser("export", parents=[common], help="write entries to a JSONL file")
    p.add_argument("path")
    p.add_argument("--schema", help="only entries of this schema fingerprint")
    p.set_defaults(func=run_export)

    p = actions.add_parser("import", parents=[common], help="add the entries of a JSONL file")
    p.add_argument("path")
    p.add_argument("--schema", help="store the entries under this schema fingerprint")
    p.set_defaults(func=run_import)

    p = actions.add_parser("stats", parents=[common, as_json], help="counts by origin and schema")
    p.set_defaults(func=run_stats)

    p = actions.add_parser("calibrate", parents=[common, as_json],
                           help="choose reuse thresholds by cross-validation inside the memory")
    p.add_argument("--db", required=True, help="the database the memory's cells run on")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    p.set_defaults(func=run_calibrate)


def _open(args: argparse.Namespace) -> MemoryStore:
    return MemoryStore(args.store if args.store else default_store_path())


def _with_store(args: argparse.Namespace, action: Callable[[MemoryStore], int]) -> int:
    store = _open(args)
    try:
        return action(store)
    finally:
        store.close()


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _width() -> int:
    return max(60, min(shutil.get_terminal_size((100, 20)).columns, 160))


def _one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(entries: list[MemoryEntry]) -> None:
    width = _width()
    print(f"{'id':>6}  {'origin':<9} {'schema':<16} {'uses':>4}  question")
    for e in entries:
        schema = _one_line(e.schema or "-", 16)
        print(f"{e.id:>6}  {e.origin:<9} {schema:<16} {e.use_count:>4}  "
              f"{_one_line(e.question, width - 41)}")


def run_list(args: argparse.Namespace) -> int:
    def action(store: MemoryStore) -> int:
        entries = store.list(schema=args.schema, origin=args.origin, limit=args.limit or None)
        if args.json:
            _print_json([e.to_dict() for e in entries])
        elif not entries:
            print(f"No entries in {store.path}.")
        else:
            _table(entries)
        return 0

    return _with_store(args, action)


def run_search(args: argparse.Namespace) -> int:
    def action(store: MemoryStore) -> int:
        entries = store.search(args.question, args.k, schema=args.schema, origins=args.origins,
                               method=args.method)
        if args.json:
            _print_json([e.to_dict() for e in entries])
            return 0
        if not entries:
            print("No matching entries" + (f" for schema {args.schema!r}." if args.schema else "."))
            return 0
        width = _width()
        for rank, e in enumerate(entries, start=1):
            print(f"{rank}. #{e.id}  score {e.score:.1f}  {e.origin}  {_one_line(e.question, width - 30)}")
            code = e.code.strip().splitlines()
            for line in code[:6]:
                print(f"     {_one_line(line, width - 5)}")
            if len(code) > 6:
                print(f"     … {len(code) - 6} more lines (ehr-magic memory show {e.id})")
        return 0

    return _with_store(args, action)


def run_show(args: argparse.Namespace) -> int:
    def action(store: MemoryStore) -> int:
        e = store.get(args.id)
        if args.json:
            _print_json(e.to_dict())
            return 0
        print(f"Entry #{e.id}  ({e.origin})")
        print(f"  question   {e.question}")
        for label, value in [("schema", e.schema), ("dataset", e.dataset), ("model", e.model),
                             ("created", e.created_at), ("updated", e.updated_at),
                             ("used", f"{e.use_count} times" + (f", last {e.last_used_at}" if e.last_used_at else "")),
                             ("tags", ", ".join(e.tags)), ("note", e.note),
                             ("answer", e.answer_preview)]:
            if value:
                print(f"  {label:<10} {value}")
        if e.knowledge:
            print("  knowledge:")
            print(textwrap.indent(e.knowledge.rstrip(), "    "))
        print("  code:")
        print(textwrap.indent(e.code.rstrip(), "    "))
        if e.edited:
            print("  generated code (before the user's edit):")
            print(textwrap.indent((e.generated_code or "").rstrip(), "    "))
        return 0

    return _with_store(args, action)


def run_delete(args: argparse.Namespace) -> int:
    def action(store: MemoryStore) -> int:
        for entry_id in args.ids:  # all must exist before anything is deleted
            store.get(entry_id)
        for entry_id in args.ids:
            store.delete(entry_id)
        print(f"Deleted {len(args.ids)} {'entry' if len(args.ids) == 1 else 'entries'} from {store.path}.")
        return 0

    return _with_store(args, action)


def run_clear(args: argparse.Namespace) -> int:
    def action(store: MemoryStore) -> int:
        count = len(store.list(schema=args.schema)) if args.schema else len(store)
        what = f"{count} {'entry' if count == 1 else 'entries'}" + (f" of schema {args.schema}" if args.schema else "")
        if count and not args.yes and not _confirmed(f"Delete {what} from {store.path}? [y/N] "):
            print("Nothing deleted; keep a copy first with `ehr-magic memory export FILE`, then clear with --yes.")
            return 1
        removed = store.clear(schema=args.schema)
        print(f"Deleted {removed} {'entry' if removed == 1 else 'entries'} from {store.path}; memory starts empty"
              + (f" for schema {args.schema}." if args.schema else "."))
        return 0

    return _with_store(args, action)


def _confirmed(prompt: str) -> bool:
    """Ask at a terminal; anything but a yes (or no terminal at all) is a no."""
    if not sys.stdin.isatty():
        return False
    return input(prompt).strip().lower() in ("y", "yes")


def run_export(args: argparse.Namespace) -> int:
    def action(store: MemoryStore) -> int:
        count = store.export(args.path, schema=args.schema)
        print(f"Exported {count} {'entry' if count == 1 else 'entries'} to {args.path}.")
        return 0

    return _with_store(args, action)


def run_import(args: argparse.Namespace) -> int:
    def action(store: MemoryStore) -> int:
        before = len(store)
        count = store.import_(args.path, schema=args.schema)
        merged = f" ({len(store) - before - count} merged)" if len(store) - before != count else ""
        print(f"Imported {count} new {'entry' if count == 1 else 'entries'} into {store.path}{merged}.")
        return 0

    return _with_store(args, action)


def run_stats(args: argparse.Namespace) -> int:
    def action(store: MemoryStore) -> int:
        stats = store.stats()
        if args.json:
            _print_json(stats.to_dict())
            return 0
        print(f"Memory store {stats.path}")
        print(f"  {stats.total} entries, {stats.file_bytes / 1024:.0f} KiB, format {stats.schema_version}")
        print("  by origin:  " + ", ".join(f"{o} {n}" for o, n in stats.by_origin.items()))
        if stats.by_schema:
            print("  by schema:  " + ", ".join(f"{s or '(none)'} {n}" for s, n in stats.by_schema.items()))
        if stats.last_updated_at:
            print(f"  first added {stats.first_created_at}, last change {stats.last_updated_at}")
        for item in stats.most_used:
            print(f"  used {item['use_count']:>4}x  #{item['id']}  {_one_line(item['question'], 60)}")
        return 0

    return _with_store(args, action)


def run_calibrate(args: argparse.Namespace) -> int:
    from ehr_magic.db import connect
    from ehr_magic.reuse import Reuser

    def calibrate(store: MemoryStore) -> int:
        with connect(args.db) as ehr:
            reuser = Reuser.from_store(ehr, store)
            if not reuser.cells():
                print(f"No trusted cells of schema {ehr.schema} in {store.path}: accept or import some first.")
                return 1
            calibration = reuser.calibrate(folds=args.folds)
        if args.json:
            _print_json(calibration.to_dict())
        else:
            print(f"{len(reuser.cells())} cells: {calibration.describe()}")
        return 0

    return _with_store(args, calibrate)
