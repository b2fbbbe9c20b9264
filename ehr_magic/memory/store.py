"""``MemoryStore``: past (question, knowledge, code) cases in a SQLite file.

Every write is one ``BEGIN IMMEDIATE`` transaction in WAL mode with
``synchronous=FULL``: an entry is either fully on disk when ``add()`` returns, or not
there at all, also with several processes writing and after a crash.
Searches use an in-memory index (``index.py``) per (schema, method), loaded on first
use and brought up to date from the ``index_changes`` log when another process (or
this one) changed the store.
"""

from __future__ import annotations

import builtins  # MemoryStore.list shadows the name inside the class
import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from ehr_magic.memory import migrations
from ehr_magic.memory.entry import ORIGIN_PRIORITY, ORIGINS, MemoryEntry, MemoryStats
from ehr_magic.memory.errors import EntryNotFoundError, MemoryStoreError
from ehr_magic.memory.index import FormTable, make_index
from ehr_magic.memory.jsonl import JsonlRecord, read_jsonl, write_jsonl
from ehr_magic.memory.similarity import check_method
from ehr_magic.paths import data_dir
from ehr_magic.text import normalise_unicode

ENV_VAR = "EHR_MAGIC_MEMORY"
CHANGE_LOG_KEEP = 10_000  # index_changes rows kept; a process further behind reloads
_COLUMNS = (
    "id, question, knowledge, code, generated_code, answer_preview, schema, dataset, "
    "origin, model, created_at, updated_at, use_count, tags, note, last_used_at"
)
_ALL = "\x00all"  # index key for schema=None (no schema filter)


def default_store_path() -> Path:
    """``$EHR_MAGIC_MEMORY`` if set, else ``memory.sqlite`` in the user data folder."""
    value = os.environ.get(ENV_VAR)
    if value:
        return Path(value).expanduser()
    return data_dir() / "memory.sqlite"


def normalise_code(code: str) -> str:
    """Code as compared for de-duplication: trailing spaces and blank lines ignored."""
    lines = [line.rstrip() for line in code.strip().splitlines()]
    return "\n".join(line for line in lines if line)


def dedupe_key(schema: str | None, question: str, code: str) -> str:
    """Entries with the same key are one entry: same schema, question and code."""
    payload = json.dumps([schema, normalise_unicode(question), normalise_code(code)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _row_to_entry(row: Sequence[Any], score: float | None = None) -> MemoryEntry:
    return MemoryEntry(
        id=row[0], question=row[1], knowledge=row[2], code=row[3], generated_code=row[4],
        answer_preview=row[5], schema=row[6], dataset=row[7], origin=row[8], model=row[9],
        created_at=row[10], updated_at=row[11], use_count=row[12],
        tags=tuple(json.loads(row[13] or "[]")), note=row[14], score=score, last_used_at=row[15],
    )


def _check_origin(origin: str) -> None:
    if origin not in ORIGINS:
        raise MemoryStoreError(f"Unknown origin {origin!r}; use one of: {', '.join(ORIGINS)}.")


def _check_text(name: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise MemoryStoreError(f"A memory entry needs a non-empty {name} string.")


@dataclass
class _IndexState:
    index: FormTable
    max_id: int
    seq: int
    token: int


class MemoryStore:
    """A durable, shared store of past cases, searched by question similarity.

    ``path`` None means ``default_store_path()``. A file that exists must be an
    ehr-magic memory store (or empty); anything else raises ``MemoryStoreError`` and
    is left untouched.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self._conn: sqlite3.Connection | None = migrations.connect(self.path)
        self._lock = threading.RLock()
        self._indexes: dict[tuple[str, str], _IndexState] = {}
        self._token = 0  # bumped whenever the store may have changed
        self._data_version = -1
        self._row_cache: dict[int, tuple[Any, ...]] = {}  # rows read since the last change
        self._row_cache_token = 0

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.path)!r})"

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._indexes.clear()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ----------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise MemoryStoreError(f"The memory store {self.path} is closed; open a new MemoryStore.")
        return self._conn

    @contextmanager
    def _sqlite_errors(self) -> Iterator[None]:
        """Turn SQLite failures into one-sentence ``MemoryStoreError``s."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise MemoryStoreError(
                    f"The memory store {self.path} stayed locked by another process for "
                    f"{migrations.BUSY_TIMEOUT_S:.0f} s; try again."
                ) from exc
            raise migrations.damaged(self.path, exc) from exc
        except sqlite3.DatabaseError as exc:
            raise migrations.damaged(self.path, exc) from exc

    @contextmanager
    def _transaction(self, mode: str) -> Iterator[sqlite3.Connection]:
        with self._lock, self._sqlite_errors():
            conn = self._connection()
            conn.execute(f"BEGIN {mode}")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                if mode == "IMMEDIATE":
                    self._token += 1  # our own commit does not change PRAGMA data_version

    def _write(self) -> Any:
        return self._transaction("IMMEDIATE")

    def _read(self) -> Any:
        return self._transaction("DEFERRED")

    # -- adding ----------------------------------------------------------------
    def add(
        self,
        question: str,
        code: str,
        *,
        knowledge: str = "",
        origin: str = "accepted",
        schema: str | None = None,
        dataset: str | None = None,
        answer_preview: str = "",
        model: str | None = None,
        generated_code: str | None = None,
        tags: Iterable[str] = (),
        note: str = "",
    ) -> int:
        """Store a case and return its id.

        The same (schema, question, code) up to case, punctuation and whitespace is
        stored once: adding it again merges into the existing entry (the more trusted
        origin wins, empty fields are filled, tags are united) and returns its id.
        """
        _check_text("question", question)
        _check_text("code", code)
        _check_origin(origin)
        record = JsonlRecord(
            line=0, question=question, code=code, knowledge=knowledge or "",
            generated_code=generated_code, answer_preview=answer_preview or "", schema=schema,
            dataset=dataset, origin=origin, model=model, tags=tuple(tags), note=note or "",
        )
        with self._write() as conn:
            entry_id, _ = self._upsert(conn, record, origin)
            self._prune_change_log(conn)
        return entry_id

    def _upsert(self, conn: sqlite3.Connection, rec: JsonlRecord, origin: str) -> tuple[int, bool]:
        key = dedupe_key(rec.schema, rec.question, rec.code)
        now = _now()
        row = conn.execute(
            "SELECT id, origin, knowledge, generated_code, answer_preview, dataset, model, tags, note "
            "FROM entries WHERE dedupe_key = ?",
            (key,),
        ).fetchone()
        if row is None:
            cur = conn.execute(
                "INSERT INTO entries (question, knowledge, code, generated_code, answer_preview, "
                "schema, dataset, origin, model, created_at, updated_at, tags, note, dedupe_key) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rec.question, rec.knowledge, rec.code, rec.generated_code, rec.answer_preview,
                 rec.schema, rec.dataset, origin, rec.model, rec.created_at or now,
                 rec.updated_at or rec.created_at or now, json.dumps(list(rec.tags)), rec.note, key),
            )
            return cast(int, cur.lastrowid), True  # set by every INSERT
        entry_id, old_origin, knowledge, generated, preview, dataset, model, tags, note = row
        best = origin if ORIGIN_PRIORITY[origin] > ORIGIN_PRIORITY[old_origin] else old_origin
        merged_tags = list(dict.fromkeys([*json.loads(tags or "[]"), *rec.tags]))
        conn.execute(
            "UPDATE entries SET origin = ?, knowledge = ?, generated_code = ?, answer_preview = ?, "
            "dataset = ?, model = ?, tags = ?, note = ?, updated_at = ? WHERE id = ?",
            (best, knowledge or rec.knowledge, generated if generated is not None else rec.generated_code,
             preview or rec.answer_preview, dataset or rec.dataset, model or rec.model,
             json.dumps(merged_tags), note or rec.note, now, entry_id),
        )
        return int(entry_id), False

    # -- reading ---------------------------------------------------------------
    def get(self, entry_id: int) -> MemoryEntry:
        """The entry with this id; ``EntryNotFoundError`` if there is none."""
        with self._read() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM entries WHERE id = ?", (int(entry_id),)).fetchone()
        if row is None:
            raise self._not_found(entry_id)
        return _row_to_entry(row)

    def _not_found(self, entry_id: object) -> EntryNotFoundError:
        return EntryNotFoundError(
            f"No memory entry has id {entry_id} in {self.path}; `ehr-magic memory list` shows the ids."
        )

    def list(
        self, schema: str | None = None, origin: str | None = None, limit: int | None = None
    ) -> builtins.list[MemoryEntry]:
        """Entries, newest first, optionally of one schema and/or origin."""
        where, params = self._filters(schema, origin)
        sql = f"SELECT {_COLUMNS} FROM entries{where} ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [_row_to_entry(r) for r in rows]

    def _filters(self, schema: str | None, origin: str | None) -> tuple[str, builtins.list[Any]]:
        clauses, params = [], []
        if schema is not None:
            clauses.append("schema = ?")
            params.append(schema)
        if origin is not None:
            _check_origin(origin)
            clauses.append("origin = ?")
            params.append(origin)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params

    def __len__(self) -> int:
        with self._read() as conn:
            return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])

    # -- search ----------------------------------------------------------------
    def search(
        self,
        question: str,
        k: int = 4,
        *,
        schema: str | None = None,
        origins: Iterable[str] | None = None,
        method: str = "default",
    ) -> builtins.list[MemoryEntry]:
        """The ``k`` stored cases most similar to ``question``, best first.

        ``schema``: only entries stored with exactly this schema are considered;
        ``None`` means no schema filter (every entry). ``origins`` limits the origins
        considered. ``entry.score`` is the ranking score: for ``default`` the
        similarity (0..100) plus a bonus for accepted/seed/imported entries, for
        ``levenshtein`` (EHRAgent's measure) minus the edit distance.
        """
        check_method(method)
        if not isinstance(question, str):
            raise MemoryStoreError(f"The question to search for must be a string, not {type(question).__name__}.")
        if not isinstance(k, int) or k < 0:
            raise MemoryStoreError(f"k must be a non-negative whole number, not {k!r}.")
        priorities = None
        if origins is not None:
            origins = list(origins)
            for origin in origins:
                _check_origin(origin)
            priorities = frozenset(ORIGIN_PRIORITY[o] for o in origins)
        with self._lock, self._sqlite_errors():
            conn = self._connection()
            index = self._fresh_index(conn, schema, method)
            hits = index.search(question, k, priorities)
            rows = self._rows(conn, [h.entry_id for h in hits])
        # an entry deleted by another process since the index was refreshed is skipped
        return [_row_to_entry(rows[h.entry_id], h.score) for h in hits if h.entry_id in rows]

    def _rows(self, conn: sqlite3.Connection, ids: builtins.list[int]) -> dict[int, tuple[Any, ...]]:
        """Rows by id, cached until the store changes (``_fresh_index`` checks that)."""
        if self._row_cache_token != self._token or len(self._row_cache) > 10_000:
            self._row_cache.clear()
            self._row_cache_token = self._token
        cache = self._row_cache
        missing = [i for i in ids if i not in cache]
        if missing:
            marks = ",".join("?" * len(missing))
            for row in conn.execute(f"SELECT {_COLUMNS} FROM entries WHERE id IN ({marks})", missing):
                cache[row[0]] = row
        return {i: cache[i] for i in ids if i in cache}

    def _fresh_index(self, conn: sqlite3.Connection, schema: str | None, method: str) -> FormTable:
        """The index for (schema, method), up to date with the committed store."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._data_version = version
            self._token += 1
        key = (_ALL if schema is None else schema, method)
        state = self._indexes.get(key)
        if state is not None and state.token == self._token and not state.index.needs_rebuild():
            return state.index
        with self._read() as conn:  # one snapshot for the whole refresh
            if state is None or not self._catch_up(conn, state, schema) or state.index.needs_rebuild():
                state = self._indexes[key] = self._build_index(conn, schema, method)
        return state.index

    def _build_index(self, conn: sqlite3.Connection, schema: str | None, method: str) -> _IndexState:
        seq = conn.execute("SELECT coalesce(max(seq), 0) FROM index_changes").fetchone()[0]
        max_id = conn.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0]
        index = make_index(method)
        if schema is None:
            rows = conn.execute("SELECT id, question, origin FROM entries")
        else:
            rows = conn.execute("SELECT id, question, origin FROM entries WHERE schema = ?", (schema,))
        index.add_many(rows)
        return _IndexState(index, max_id, seq, self._token)

    def _catch_up(self, conn: sqlite3.Connection, state: _IndexState, schema: str | None) -> bool:
        """Apply changes since the index was built; False when a full reload is needed."""
        lowest = conn.execute("SELECT min(seq) FROM index_changes").fetchone()[0]
        if lowest is not None and lowest > state.seq + 1:
            return False  # the log was pruned past our position
        first_old: dict[int, tuple[str, str]] = {}
        last_seq = state.seq
        for seq, entry_id, old_question, _old_schema, old_origin in conn.execute(
            "SELECT seq, entry_id, old_question, old_schema, old_origin FROM index_changes "
            "WHERE seq > ? ORDER BY seq",
            (state.seq,),
        ):
            last_seq = seq
            if entry_id <= state.max_id and entry_id not in first_old:
                first_old[entry_id] = (old_question, old_origin)
        for entry_id, (old_question, old_origin) in first_old.items():
            state.index.remove(entry_id, old_question, old_origin)
        changed = list(first_old)
        for start in range(0, len(changed), 500):
            chunk = changed[start:start + 500]
            marks = ",".join("?" * len(chunk))
            for entry_id, question, origin, entry_schema in conn.execute(
                f"SELECT id, question, origin, schema FROM entries WHERE id IN ({marks})", chunk
            ):
                if schema is None or entry_schema == schema:
                    state.index.add(entry_id, question, origin)
        max_id = state.max_id
        for entry_id, question, origin, entry_schema in conn.execute(
            "SELECT id, question, origin, schema FROM entries WHERE id > ? ORDER BY id", (state.max_id,)
        ):
            max_id = entry_id
            if schema is None or entry_schema == schema:
                state.index.add(entry_id, question, origin)
        state.max_id, state.seq, state.token = max_id, last_seq, self._token
        return True

    # -- changing --------------------------------------------------------------
    def accept(self, entry_id: int, code: str | None = None) -> MemoryEntry:
        """Mark an entry as accepted by the user, optionally with edited code.

        With ``code`` different from the stored code, ``code`` becomes the entry's
        code and the code that was generated is kept as ``generated_code``. If an
        entry with the same schema, question and edited code already exists, that
        entry is accepted and this one is removed. Returns the accepted entry.
        """
        if code is not None:
            _check_text("code", code)
        with self._write() as conn:
            row = conn.execute(
                "SELECT id, question, code, generated_code, schema FROM entries WHERE id = ?",
                (int(entry_id),),
            ).fetchone()
            if row is None:
                raise self._not_found(entry_id)
            _, question, old_code, generated, schema = row
            now = _now()
            result_id = int(entry_id)
            if code is None or normalise_code(code) == normalise_code(old_code):
                conn.execute(
                    "UPDATE entries SET origin = 'accepted', code = ?, updated_at = ? WHERE id = ?",
                    (code if code is not None else old_code, now, entry_id),
                )
            else:
                generated = generated if generated is not None else old_code
                key = dedupe_key(schema, question, code)
                other = conn.execute("SELECT id FROM entries WHERE dedupe_key = ?", (key,)).fetchone()
                if other is not None:
                    result_id = int(other[0])
                    conn.execute(
                        "UPDATE entries SET origin = 'accepted', "
                        "generated_code = coalesce(generated_code, ?), updated_at = ? WHERE id = ?",
                        (generated, now, result_id),
                    )
                    conn.execute("DELETE FROM entries WHERE id = ?", (entry_id,))
                else:
                    conn.execute(
                        "UPDATE entries SET origin = 'accepted', code = ?, generated_code = ?, "
                        "dedupe_key = ?, updated_at = ? WHERE id = ?",
                        (code, generated, key, now, entry_id),
                    )
            self._prune_change_log(conn)
        return self.get(result_id)

    def delete(self, entry_id: int) -> None:
        """Remove an entry; ``EntryNotFoundError`` if there is none with this id."""
        with self._write() as conn:
            cur = conn.execute("DELETE FROM entries WHERE id = ?", (int(entry_id),))
            if cur.rowcount == 0:
                raise self._not_found(entry_id)
            self._prune_change_log(conn)

    def clear(self, schema: str | None = None) -> int:
        """Remove every entry (of ``schema``, or all) in one transaction; return how many."""
        where, params = self._filters(schema, None)
        with self._write() as conn:
            removed = conn.execute(f"DELETE FROM entries{where}", params).rowcount
            self._prune_change_log(conn)
        return removed

    @staticmethod
    def _prune_change_log(conn: sqlite3.Connection) -> None:
        conn.execute(
            "DELETE FROM index_changes WHERE seq <= (SELECT max(seq) FROM index_changes) - ?",
            (CHANGE_LOG_KEEP,),
        )

    def mark_used(self, ids: Iterable[int]) -> None:
        """Record that these entries were used (e.g. as few-shot examples) now."""
        ids = [int(i) for i in ids]
        if not ids:
            return
        now = _now()
        with self._write() as conn:
            conn.executemany(
                "UPDATE entries SET use_count = use_count + 1, last_used_at = ? WHERE id = ?",
                [(now, i) for i in ids],
            )

    # -- exchange --------------------------------------------------------------
    def export(self, path: str | os.PathLike[str], *, schema: str | None = None) -> int:
        """Write entries (of ``schema``, or all) to a JSONL file; return how many."""
        where, params = self._filters(schema, None)
        with self._read() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM entries{where} ORDER BY id", params)
            return write_jsonl(Path(path), (_row_to_entry(r) for r in rows))

    def import_(self, path: str | os.PathLike[str], schema: str | None = None) -> int:
        """Add the entries of a JSONL file in one transaction; return how many are new.

        Every line is checked first: a bad line raises ``JsonlFormatError`` naming it
        and nothing is imported. Entries get origin ``imported`` (``seed`` lines stay
        ``seed``); duplicates merge as in ``add()``. ``schema``, when given, is stored
        on every imported entry instead of the line's own.
        """
        records = read_jsonl(Path(path))
        created = 0
        with self._write() as conn:
            for rec in records:
                if schema is not None:
                    rec.schema = schema
                origin = "seed" if rec.origin == "seed" else "imported"
                _, new = self._upsert(conn, rec, origin)
                created += new
            self._prune_change_log(conn)
        return created

    def stats(self) -> MemoryStats:
        """Counts by origin and schema, file size and format version."""
        with self._read() as conn:
            total = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
            by_origin = dict(conn.execute("SELECT origin, count(*) FROM entries GROUP BY origin"))
            by_schema = {
                (s if s is not None else ""): n
                for s, n in conn.execute("SELECT schema, count(*) FROM entries GROUP BY schema ORDER BY 2 DESC")
            }
            first, last = conn.execute("SELECT min(created_at), max(updated_at) FROM entries").fetchone()
            most_used = [
                {"id": i, "question": q, "use_count": n}
                for i, q, n in conn.execute(
                    "SELECT id, question, use_count FROM entries WHERE use_count > 0 "
                    "ORDER BY use_count DESC, id DESC LIMIT 5"
                )
            ]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        size = sum(
            p.stat().st_size
            for p in (self.path, Path(f"{self.path}-wal"))
            if p.exists()
        )
        return MemoryStats(
            path=str(self.path), total=total,
            by_origin={o: by_origin.get(o, 0) for o in ORIGINS}, by_schema=by_schema,
            file_bytes=size, schema_version=version, first_created_at=first,
            last_updated_at=last, most_used=most_used,
        )
