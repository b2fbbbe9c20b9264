"""Opening a memory store file safely, and its numbered migrations.

The schema version is SQLite's ``PRAGMA user_version``: migration ``n`` (1-based) of
``MIGRATIONS`` brings a store from version ``n - 1`` to ``n``. Append new migrations;
never edit an old one. Our files are marked with ``PRAGMA application_id`` and a
``memory_meta`` row, so a file that is not ours is refused before anything is written.
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

from ehr_magic import migrations
from ehr_magic.errors import sentences
from ehr_magic.memory.errors import MemoryStoreError

APPLICATION_ID = 0x45484D4D  # "EHMM"
FORMAT_NAME = "ehr-magic-memory"
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_S = 30.0

MIGRATIONS: list[migrations.Step] = [migrations.script(sql) for sql in [
    # 1: entries, a change log for the in-memory indexes, the marker row.
    """
    CREATE TABLE memory_meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE entries (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        question       TEXT NOT NULL,
        knowledge      TEXT NOT NULL DEFAULT '',
        code           TEXT NOT NULL,
        generated_code TEXT,
        answer_preview TEXT NOT NULL DEFAULT '',
        schema         TEXT,
        dataset        TEXT,
        origin         TEXT NOT NULL
                       CHECK (origin IN ('accepted', 'seed', 'imported', 'auto')),
        model          TEXT,
        created_at     TEXT NOT NULL,
        updated_at     TEXT NOT NULL,
        last_used_at   TEXT,
        use_count      INTEGER NOT NULL DEFAULT 0,
        tags           TEXT NOT NULL DEFAULT '[]',
        note           TEXT NOT NULL DEFAULT '',
        dedupe_key     TEXT NOT NULL UNIQUE
    );
    CREATE INDEX entries_schema ON entries (schema);
    -- Old values of entries whose indexed fields changed or that were deleted, so a
    -- process can update its in-memory search index without reloading everything.
    CREATE TABLE index_changes (
        seq          INTEGER PRIMARY KEY AUTOINCREMENT,
        entry_id     INTEGER NOT NULL,
        old_question TEXT NOT NULL,
        old_schema   TEXT,
        old_origin   TEXT NOT NULL
    );
    CREATE TRIGGER entries_indexed_update AFTER UPDATE OF question, schema, origin ON entries
    WHEN OLD.question IS NOT NEW.question OR OLD.schema IS NOT NEW.schema
         OR OLD.origin IS NOT NEW.origin
    BEGIN
        INSERT INTO index_changes (entry_id, old_question, old_schema, old_origin)
        VALUES (OLD.id, OLD.question, OLD.schema, OLD.origin);
    END;
    CREATE TRIGGER entries_delete AFTER DELETE ON entries
    BEGIN
        INSERT INTO index_changes (entry_id, old_question, old_schema, old_origin)
        VALUES (OLD.id, OLD.question, OLD.schema, OLD.origin);
    END;
    INSERT INTO memory_meta (key, value) VALUES ('format', 'ehr-magic-memory');
    """,
]]
LATEST_VERSION = len(MIGRATIONS)


def damaged(path: Path, exc: BaseException) -> MemoryStoreError:
    return MemoryStoreError(
        f"The memory store {path} is damaged or unreadable: {sentences(exc)} Move it aside "
        "(a JSONL export, if you have one, can be imported into a new store)."
    )


def _check_file(path: Path) -> None:
    """Refuse paths that cannot be our store, reading only."""
    if path.exists() and not path.is_file():
        raise MemoryStoreError(f"The memory store path {path} is not a file; give a file path.")
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
        if head != SQLITE_MAGIC:
            raise MemoryStoreError(
                f"{path} is not a SQLite file, so it cannot be an ehr-magic memory store; "
                "give another path (it was left untouched)."
            )


def _describe(conn: sqlite3.Connection) -> tuple[int, int, list[str]]:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
    return app_id, version, tables


def _classify(path: Path, app_id: int, version: int, tables: list[str]) -> str:
    """'ours', or 'new' for an empty database; raise for anything else."""
    if app_id == APPLICATION_ID:
        if version > LATEST_VERSION:
            raise MemoryStoreError(
                f"The memory store {path} was written by a newer ehr-magic (format "
                f"{version}, this one knows {LATEST_VERSION}); upgrade ehr-magic."
            )
        return "ours"
    if app_id == 0 and version == 0 and not tables:
        return "new"
    shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
    raise MemoryStoreError(
        f"{path} is a SQLite database but not an ehr-magic memory store"
        + (f" (it holds: {shown})" if tables else "")
        + "; give another path (it was left untouched)."
    )


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if new) the store at ``path``, migrated to ``LATEST_VERSION``.

    Nothing is written to a file that is not empty and not ours.
    """
    _check_file(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MemoryStoreError(f"Cannot create the folder of the memory store {path}: {exc}.") from exc
    try:
        conn = sqlite3.connect(
            str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise MemoryStoreError(f"Cannot open the memory store {path}: {exc}.") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("BEGIN")  # one snapshot: another process may be initialising the file
        try:
            description = _describe(conn)
        finally:
            conn.execute("COMMIT")
        _classify(path, *description)
        _migrate(conn, path, description)
        _use_wal(conn)
        # FULL: a commit is on disk when add() returns, even across a power cut.
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except MemoryStoreError:
        conn.close()
        raise
    except sqlite3.OperationalError as exc:
        conn.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise MemoryStoreError(
                f"The memory store {path} stayed locked by another process for "
                f"{BUSY_TIMEOUT_S:.0f} s; try again."
            ) from exc
        raise damaged(path, exc) from exc
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise damaged(path, exc) from exc
    return conn


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL. The switch needs the file to itself: two processes creating the
    same store can each hold the shared lock the other waits for, and a busy wait then only
    ends at the timeout for both. So each try fails at once, and the tries are spread at
    random until the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                    raise
                time.sleep(random.uniform(0.005, 0.05))
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")


def _migrate(conn: sqlite3.Connection, path: Path, description: tuple[int, int, list[str]]) -> None:
    app_id, version, _ = description
    if version == LATEST_VERSION and app_id == APPLICATION_ID:
        return
    # Re-read under the write lock: another process may have initialised it.
    migrations.apply(conn, MIGRATIONS, application_id=APPLICATION_ID,
                     check=lambda: _classify(path, *_describe(conn)))
