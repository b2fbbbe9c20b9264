"""``ehr-magic audit``: every request sent to a model, with a check for patient data.

    ehr-magic audit                       # all logged requests
    ehr-magic audit --since 2h --db mimic.duckdb
    ehr-magic audit --show 12             # one request in full
    ehr-magic audit --json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ehr_magic.errors import EhrMagicError
from ehr_magic.knowledge.handle import Database
from ehr_magic.llm.audit import AuditEntry, AuditLog

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|h|d|w)\s*$", re.IGNORECASE)
_UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "audit", help="list the requests sent to a model, checked for patient identifiers",
        description="List every request sent to a model (from the audit log) with endpoint, model, purpose, tokens "
                    "and status. With --db, each request is checked for patient identifiers and dates of that "
                    "database.")
    parser.add_argument("--since", metavar="WHEN",
                        help="only requests since a date (2024-05-01), a date and time, or an age (30m, 2h, 1d, 1w)")
    parser.add_argument("--db", metavar="FILE", help="check requests for patient ids and dates of this database")
    parser.add_argument("--show", type=int, metavar="N", help="print request N in full")
    parser.add_argument("--limit", type=int, metavar="N", help="only the N most recent requests")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--log", metavar="FILE", help="the audit log (default: audit.sqlite in the user data folder)")
    parser.set_defaults(func=run_audit)


def parse_since(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """``2h`` / ``1d`` / ``30m`` / ``1w`` ago, or an ISO date or date-time (local time)."""
    now = now or dt.datetime.now()
    age = _AGE.match(text)
    if age:
        return now - dt.timedelta(**{_UNITS[age.group(2).lower()]: float(age.group(1))})
    try:
        return dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise EhrMagicError(f"Cannot read --since {text!r}: give a date (2024-05-01), a date and time "
                            "('2024-05-01 14:00'), or an age such as 30m, 2h, 1d or 1w.") from None


def run_audit(args: argparse.Namespace) -> int:
    log = AuditLog(Path(args.log)) if args.log else AuditLog()
    if args.log and not log.path.exists():
        raise EhrMagicError(f"No audit log at {args.log}; check the path (the default log is {AuditLog().path}).")
    if args.limit is not None and args.limit < 1:
        raise EhrMagicError("--limit must be at least 1.")
    since = parse_since(args.since) if args.since else None
    ehr = None
    if args.db:
        from ehr_magic.db import connect

        ehr = connect(args.db)
    try:
        if args.show is not None:
            entry = log.get(args.show)
            check = _checks(ehr, [entry])[0] if ehr is not None else None
            print(json.dumps(_entry_json(entry, check, full=True), indent=2, ensure_ascii=False) if args.json
                  else show_entry(entry, check))
            return 0
        entries = log.entries(since=since, limit=args.limit)
        checks = _checks(ehr, entries) if ehr is not None else [None] * len(entries)
    finally:
        if ehr is not None:
            ehr.close()
    if args.json:
        print(json.dumps([_entry_json(e, c) for e, c in zip(entries, checks)], indent=2, ensure_ascii=False))
        return 0
    print(list_entries(entries, checks, log_path=log.path, checked=ehr is not None))
    return 0


def _checks(ehr: Database, entries: list[AuditEntry]) -> list[Any]:
    from ehr_magic.safety.audit_check import IdentifierScanner, request_text

    texts = []
    for entry in entries:
        try:
            texts.append(request_text(entry.request))
        except ValueError:  # a request that is not JSON: scan it as it is
            texts.append(entry.request_json)
    return IdentifierScanner(ehr).scan_all(texts)


def _time(entry: AuditEntry) -> str:
    moment = entry.started_at
    if moment.tzinfo is not None:
        moment = moment.astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _tokens(entry: AuditEntry) -> str:
    if entry.total_tokens is None:
        return "-"
    return f"{'~' if entry.tokens_estimated else ''}{entry.prompt_tokens or 0}+{entry.completion_tokens or 0}"


def _host(endpoint: str | None) -> str:
    if not endpoint:
        return "-"
    parts = urlsplit(endpoint)
    return parts.netloc or endpoint


def list_entries(entries: list[AuditEntry], checks: list[Any], *, log_path: Path, checked: bool) -> str:
    """The table printed by ``ehr-magic audit``."""
    if not entries:
        return f"No requests in the audit log {log_path} for this selection."
    header = ["#", "time", "purpose", "model", "endpoint", "tokens", "status"] + (["check"] if checked else [])
    rows = [[str(e.id), _time(e), e.purpose or "-", e.model or "-", _host(e.endpoint), _tokens(e), e.status]
            + ([c.summary()] if checked else []) for e, c in zip(entries, checks)]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    if checked:
        flagged = sum(1 for c in checks if not c.clean)
        lines.append(f"{len(entries)} request{'s' if len(entries) != 1 else ''}; {flagged} contain patient "
                     "identifiers or dates of the database.")
    else:
        lines.append(f"{len(entries)} request{'s' if len(entries) != 1 else ''}. Add --db FILE to check them for "
                     "patient identifiers and dates; --show N prints one in full.")
    return "\n".join(lines)


def show_entry(entry: AuditEntry, check: Any = None) -> str:
    """One request in full: header, check, every message and the response."""
    lines = [f"Request #{entry.id}  {_time(entry)}  purpose {entry.purpose or '-'}  model {entry.model or '-'}",
             f"endpoint {entry.endpoint or '-'}  status {entry.status}  tokens {_tokens(entry)}"
             + (f"  latency {entry.latency_s:.2f}s" if entry.latency_s is not None else "")]
    if entry.error:
        lines.append(f"error: {entry.error}")
    if check is not None:
        lines.append(f"check: {check.summary()}")
        lines += [f"  patient id {f.value} ({f.where})" for f in check.ids]
        lines += [f"  date {f.value} ({f.where})" for f in check.dates]
    try:
        messages = entry.messages
    except ValueError:
        messages = []
        lines += ["--- request (not JSON) ---", entry.request_json]
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        lines += [f"--- {message.get('role', '?')} ---", str(content or "")]
    lines += ["--- response ---", entry.response_text or "(none)"]
    return "\n".join(lines)


def _entry_json(entry: AuditEntry, check: Any, *, full: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": entry.id, "started_at": entry.started_at.isoformat(), "endpoint": entry.endpoint,
        "provider": entry.provider, "model": entry.model, "purpose": entry.purpose,
        "prompt_tokens": entry.prompt_tokens, "completion_tokens": entry.completion_tokens,
        "tokens_estimated": entry.tokens_estimated, "latency_s": entry.latency_s, "status": entry.status,
        "error": entry.error,
    }
    if check is not None:
        data["check"] = check.to_dict()
    if full:
        try:
            data["request"] = entry.request
        except ValueError:
            data["request"] = entry.request_json
        data["response"] = entry.response_text
    return data
