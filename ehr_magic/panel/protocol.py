"""Protocol v2 between the JupyterLab side panel and the kernel (see docs/panel.md).

Every message is a JSON object with ``"v": 2``. The panel sends requests::

    {"v": 2, "id": "r7", "type": "ask", "params": {"question": "..."}}

and the kernel answers each with exactly one ``result`` or ``error`` carrying the same
``id``; a long request (``ask``) first streams ``event`` messages with that ``id``::

    {"v": 1, "id": "r7", "kind": "event", "event": {"kind": "phase", "phase": "code", ...}}
    {"v": 1, "id": "r7", "kind": "result", "type": "ask", "result": {...}}
    {"v": 1, "id": "r7", "kind": "error", "error": {"code": "bad_params", "message": "..."}}

Pure functions only: parsing and validating requests, building replies, and turning
answers into JSON previews. The comm plumbing lives in ``handler.py``.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

VERSION = 2  # v2 added the knowledge requests (the Data tab)
SUPPORTED = (1, 2)  # v1 is a subset of v2: its requests are served, answered in v1
TARGET = "ehr_magic.panel"

REQUEST_TYPES: tuple[str, ...] = (
    "hello", "status", "ask", "memory.search", "memory.get", "memory.delete", "accept", "reject", "pending",
    # added within v1 (a panel uses them only when the kernel's hello lists them):
    "conversation", "conversation.new",
    # v2: what ehr-magic believes about the data (the Data tab)
    "knowledge", "knowledge.edit", "knowledge.import",
)

# Error codes (``error.code``); the message is for people, the code for the panel.
BAD_MESSAGE = "bad_message"  # not a JSON object, or no usable id/type
UNSUPPORTED_VERSION = "unsupported_version"
UNKNOWN_TYPE = "unknown_type"
BAD_PARAMS = "bad_params"
NOT_READY = "not_ready"  # no database connected / cannot connect
NOT_FOUND = "not_found"  # memory entry or pending cell unknown
USER_ERROR = "user_error"  # an EhrMagicError: model not configured, model call failed, ...
INTERRUPTED = "interrupted"  # the kernel was interrupted during the request
INTERNAL = "internal"  # a bug in ehr-magic; ``detail`` holds the traceback

MAX_QUESTION = 4000
MAX_PATH = 1000
MAX_ID = 100
PREVIEW_ROWS = 50
PREVIEW_COLUMNS = 30
PREVIEW_CHARS = 200
TEXT_CHARS = 2000


class ProtocolError(Exception):
    """A request the handler cannot serve; becomes an ``error`` reply."""

    def __init__(self, code: str, message: str, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail


@dataclass(frozen=True)
class Request:
    id: str
    type: str
    params: dict[str, Any] = field(default_factory=dict)
    v: int = VERSION


def request_id(data: Any) -> str | None:
    """The request id of a (possibly malformed) message, for the error reply."""
    if isinstance(data, dict):
        value = data.get("id")
        if isinstance(value, (str, int)) and not isinstance(value, bool) and len(str(value)) <= MAX_ID:
            return str(value)
    return None


def parse_request(data: Any) -> Request:
    """A message from the panel -> ``Request``; ``ProtocolError`` says what is wrong."""
    if not isinstance(data, dict):
        raise ProtocolError(BAD_MESSAGE, f"A request must be a JSON object, not {type(data).__name__}.")
    rid = request_id(data)
    if rid is None:
        raise ProtocolError(BAD_MESSAGE, "A request needs an id: a string or number of at most 100 characters.")
    version = data.get("v")
    if isinstance(version, bool) or version not in SUPPORTED:
        raise ProtocolError(UNSUPPORTED_VERSION,
                            f"This kernel speaks panel protocol v{VERSION}, the request says v{version}; "
                            "reload the browser page after upgrading ehr-magic.")
    kind = data.get("type")
    if not isinstance(kind, str) or not kind:
        raise ProtocolError(BAD_MESSAGE, "A request needs a type, e.g. \"status\".")
    if kind not in REQUEST_TYPES:
        raise ProtocolError(UNKNOWN_TYPE, f"Unknown request type {kind[:50]!r}; known: {', '.join(REQUEST_TYPES)}.")
    params = data.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ProtocolError(BAD_PARAMS, "params must be a JSON object.")
    return Request(rid, kind, params, version)


# -- parameters -------------------------------------------------------------------------


def text_param(params: dict[str, Any], name: str, *, required: bool = True, max_len: int = MAX_QUESTION,
               allow_empty: bool = False) -> str:
    value = params.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ProtocolError(BAD_PARAMS, f"{name} must be a string.")
    value = " ".join(value.split())
    if not value and not allow_empty:
        raise ProtocolError(BAD_PARAMS, f"{name} is empty.")
    if len(value) > max_len:
        raise ProtocolError(BAD_PARAMS, f"{name} is longer than {max_len} characters.")
    return value


def relative_path(path: Path) -> str | None:
    """``path`` relative to the kernel's folder (the notebook's), for the panel to open it
    beside the notebook; None when it lies outside that folder."""
    try:
        relative = Path(path).resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return None
    return relative.as_posix()


def bool_param(params: dict[str, Any], name: str, default: bool = False) -> bool:
    value = params.get(name, default)
    if not isinstance(value, bool):
        raise ProtocolError(BAD_PARAMS, f"{name} must be true or false.")
    return value


def int_param(params: dict[str, Any], name: str, *, default: int | None = None, low: int = 0,
              high: int = 2**31) -> int:
    value = params.get(name, default)
    if isinstance(value, str) and value.lstrip("#").isdigit():
        value = int(value.lstrip("#"))
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(BAD_PARAMS, f"{name} must be a whole number.")
    if not low <= value <= high:
        raise ProtocolError(BAD_PARAMS, f"{name} must be between {low} and {high}.")
    return value


def token_param(params: dict[str, Any]) -> str:
    value = params.get("token")
    if not isinstance(value, str) or not value.isalnum() or len(value) > 64:
        raise ProtocolError(BAD_PARAMS, "token must be the letters and digits of a cell marker.")
    return value


# -- replies ----------------------------------------------------------------------------


def hello(version: str) -> dict[str, Any]:
    return {"v": VERSION, "kind": "hello", "protocol": VERSION, "protocols": list(SUPPORTED), "ehr_magic": version,
            "types": list(REQUEST_TYPES)}


def conversation(turns: list[Any]) -> dict[str, Any]:
    """The thread as the panel shows it (``ehr_magic.session.Turn`` objects -> JSON)."""
    return {"turns": [{"question": t.question, "standalone": t.standalone, "status": t.status, "source": t.source,
                       "answer": t.answer[:TEXT_CHARS], "variables": list(t.variables)} for t in turns]}


def result(rid: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"v": VERSION, "id": rid, "kind": "result", "type": kind, "result": body}


def event(rid: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"v": VERSION, "id": rid, "kind": "event", "event": body}


def error(rid: str | None, code: str, message: str, detail: str | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if detail:
        err["detail"] = detail[-TEXT_CHARS * 4:]
    return {"v": VERSION, "id": rid, "kind": "error", "error": err}


# -- answer previews --------------------------------------------------------------------


def cell_value(value: Any, max_chars: int = PREVIEW_CHARS) -> Any:
    """One JSON-safe scalar for a table cell or a value answer."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        try:  # numpy scalars
            return cell_value(value.item(), max_chars)
        except (TypeError, ValueError):
            pass
    text = value if isinstance(value, str) else repr(value) if isinstance(value, (list, tuple, dict)) else str(value)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def answer_preview(value: Any, *, max_rows: int = PREVIEW_ROWS, max_columns: int = PREVIEW_COLUMNS) -> dict[str, Any]:
    """An answer as the panel shows it: a capped table, a list, a value, or nothing.

    ``{"kind": "table", "columns": [...], "dtypes": [...], "rows": [[...]], "total_rows": n,
    "total_columns": m, "truncated": bool}``, ``{"kind": "list", "values": [...], "total": n,
    "truncated": bool}``, ``{"kind": "value", "value": x, "type": "int"}``, ``{"kind": "none"}``.
    """
    if isinstance(value, pl.LazyFrame):
        value = value.head(max_rows + 1).collect()
    if isinstance(value, pl.Series):
        value = value.to_frame()
    if isinstance(value, pl.DataFrame):
        shown = value.head(max_rows).select(value.columns[:max_columns])
        rows = [[cell_value(v) for v in row] for row in shown.iter_rows()]
        return {"kind": "table", "columns": list(shown.columns), "dtypes": [str(t) for t in shown.dtypes],
                "rows": rows, "total_rows": value.height, "total_columns": value.width,
                "truncated": value.height > max_rows or value.width > max_columns}
    if value is None:
        return {"kind": "none"}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        return {"kind": "list", "values": [cell_value(v) for v in items[:max_rows]], "total": len(items),
                "truncated": len(items) > max_rows}
    if isinstance(value, dict):
        items = list(value.items())[:max_rows]
        return {"kind": "table", "columns": ["key", "value"], "dtypes": ["str", "object"],
                "rows": [[cell_value(str(k)), cell_value(v)] for k, v in items], "total_rows": len(value),
                "total_columns": 2, "truncated": len(value) > max_rows}
    return {"kind": "value", "value": cell_value(value, TEXT_CHARS), "type": type(value).__name__}
