"""The audit log: one SQLite row per model call.

Every prompt sent and every response received is kept, with its tokens, timing,
endpoint and outcome, so a user (or a reviewer of an analysis) can see exactly what
was sent to which server. API keys are never stored: the log receives messages and
request parameters only, never headers.

The schema evolves through ``MIGRATIONS``, an append-only list of functions; the
database's ``PRAGMA user_version`` counts the ones applied. The file is opened in WAL
mode with a busy timeout, so several processes (notebook kernels, the CLI, eval
workers) can write to it at once. Writing never breaks a model call: ``record()``
warns once and carries on if the file cannot be written.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Mapping

from ehr_magic import migrations
from ehr_magic.errors import EhrMagicError, sentences
from ehr_magic.paths import data_dir

AUDIT_FILENAME = "audit.sqlite"
BUSY_TIMEOUT_MS = 30_000
Status = Literal["ok", "error", "interrupted"]
STATUSES: tuple[str, ...] = ("ok", "error", "interrupted")

MIGRATIONS: list[migrations.Step] = []


def migration(fn: migrations.Step) -> migrations.Step:
    """Register the next schema migration. Append only; never edit or reorder."""
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_create_calls(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE calls (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            started_at TEXT NOT NULL,
            endpoint TEXT,
            provider TEXT,
            model TEXT,
            purpose TEXT,
            request_json TEXT NOT NULL,
            response_text TEXT,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            tokens_estimated INTEGER NOT NULL DEFAULT 0,
            latency_s REAL,
            status TEXT NOT NULL CHECK (status IN ('ok', 'error', 'interrupted')),
            error TEXT,
            attempts INTEGER NOT NULL DEFAULT 1,
            finish_reason TEXT
        )
        """
    )
    db.execute("CREATE INDEX calls_started_at ON calls (started_at)")


class AuditLogError(EhrMagicError):
    """The audit log cannot be read."""


@dataclass(frozen=True)
class AuditEntry:
    """One model call as recorded."""

    id: int
    started_at: datetime
    endpoint: str | None
    provider: str | None
    model: str | None
    purpose: str | None
    request_json: str
    response_text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    tokens_estimated: bool
    latency_s: float | None
    status: str
    error: str | None
    attempts: int
    finish_reason: str | None = None

    @property
    def request(self) -> dict[str, Any]:
        """The request as sent (model, messages, parameters)."""
        data = json.loads(self.request_json)
        return data if isinstance(data, dict) else {"request": data}

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.request.get("messages", []))

    @property
    def total_tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


def _utc_iso(moment: datetime) -> str:
    """Fixed-width UTC ISO string, so that text order is time order. Naive = local time."""
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


class AuditLog:
    """SQLite log of model calls at ``path`` (default ``data_dir()/audit.sqlite``).

    Safe to share between threads (each operation opens its own connection) and
    between processes (WAL + busy timeout).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else data_dir() / AUDIT_FILENAME
        self._ready = False
        self._lock = threading.Lock()
        self._warned = False

    def __repr__(self) -> str:
        return f"AuditLog({str(self.path)!r})"

    # ------------------------------------------------------------------ plumbing

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # WAL + NORMAL: crash-safe; a power cut can lose only the last few calls
            db.execute("PRAGMA synchronous = NORMAL")
            if not self._ready:
                with self._lock:
                    if not self._ready:
                        self._migrate(db)
                        self._ready = True
        except BaseException:
            db.close()
            raise
        return db

    @staticmethod
    def _migrate(db: sqlite3.Connection) -> None:
        try:
            db.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError:
            pass  # e.g. a network file system: the default journal still works
        migrations.apply(db, MIGRATIONS)

    def schema_version(self) -> int:
        db = self._connect()
        try:
            return int(db.execute("PRAGMA user_version").fetchone()[0])
        finally:
            db.close()

    # ------------------------------------------------------------------ writing

    def record(
        self,
        *,
        started_at: datetime,
        endpoint: str | None,
        provider: str | None,
        model: str | None,
        purpose: str | None,
        request: Mapping[str, Any] | str,
        response_text: str | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        tokens_estimated: bool = False,
        latency_s: float | None = None,
        status: Status = "ok",
        error: str | None = None,
        attempts: int = 1,
        finish_reason: str | None = None,
    ) -> int | None:
        """Append one call; return its id, or ``None`` if the log could not be written.

        A write failure warns once (per ``AuditLog``) and never raises, so that the
        model call it describes still succeeds.
        """
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {status!r}")
        try:
            request_json = request if isinstance(request, str) else json.dumps(request, default=str, ensure_ascii=False)
            db = self._connect()
            try:
                cur = db.execute(
                    """
                    INSERT INTO calls (started_at, endpoint, provider, model, purpose, request_json,
                        response_text, prompt_tokens, completion_tokens, tokens_estimated, latency_s,
                        status, error, attempts, finish_reason)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    (
                        _utc_iso(started_at), endpoint, provider, model, purpose, request_json,
                        response_text, prompt_tokens, completion_tokens, int(bool(tokens_estimated)),
                        latency_s, status, error, attempts, finish_reason,
                    ),
                )
                return int(cur.lastrowid) if cur.lastrowid is not None else None
            finally:
                db.close()
        except (sqlite3.Error, OSError, TypeError, ValueError) as exc:
            self._warn(exc)
            return None

    def _warn(self, exc: BaseException) -> None:
        if self._warned:
            return
        self._warned = True
        warnings.warn(
            f"Cannot write the audit log at {self.path}: {sentences(exc)} Model calls continue without it. "
            "Check that the folder is writable, or set EHR_MAGIC_DATA_DIR to another folder.",
            RuntimeWarning,
            stacklevel=3,
        )

    # ------------------------------------------------------------------ reading

    _COLUMNS = (
        "id, started_at, endpoint, provider, model, purpose, request_json, response_text, "
        "prompt_tokens, completion_tokens, tokens_estimated, latency_s, status, error, attempts, finish_reason"
    )

    @staticmethod
    def _entry(row: tuple[Any, ...]) -> AuditEntry:
        (id_, started, endpoint, provider, model, purpose, request_json, response_text,
         prompt_tokens, completion_tokens, estimated, latency, status, error, attempts, finish) = row
        return AuditEntry(
            id=id_, started_at=datetime.fromisoformat(started), endpoint=endpoint, provider=provider,
            model=model, purpose=purpose, request_json=request_json, response_text=response_text,
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            tokens_estimated=bool(estimated), latency_s=latency, status=status, error=error,
            attempts=attempts, finish_reason=finish,
        )

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if not self.path.exists():
            return []
        try:
            db = self._connect()
            try:
                return db.execute(sql, params).fetchall()
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise AuditLogError(
                f"Cannot read the audit log at {self.path}: {sentences(exc)} Check the file, or move it aside to "
                "start a new log."
            ) from None

    def entries(self, since: datetime | None = None, limit: int | None = None) -> list[AuditEntry]:
        """Calls oldest first; ``since`` keeps calls started at or after it (naive = local
        time); ``limit`` keeps the most recent ``limit`` of those."""
        where, params = "", tuple[Any, ...]()
        if since is not None:
            where, params = "WHERE started_at >= ?", (_utc_iso(since),)
        sql = f"SELECT {self._COLUMNS} FROM calls {where} ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params = (*params, int(limit))
        rows = self._query(sql, params)
        return [self._entry(r) for r in reversed(rows)]

    def get(self, id: int) -> AuditEntry:
        """One call by id; raises ``AuditLogError`` if there is none."""
        rows = self._query(f"SELECT {self._COLUMNS} FROM calls WHERE id = ?", (int(id),))
        if not rows:
            raise AuditLogError(f"No call #{id} in the audit log at {self.path}: list calls with AuditLog().entries().")
        return self._entry(rows[0])

    def count(self) -> int:
        """Number of calls logged."""
        rows = self._query("SELECT count(*) FROM calls", ())
        return int(rows[0][0]) if rows else 0
