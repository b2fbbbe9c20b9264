"""Numbered migrations for our SQLite files (memory, skills, audit log), in one place.

Each store keeps an append-only list of steps (functions of a connection; ``script``
makes one from SQL): step ``n`` (1-based) brings a file from ``PRAGMA user_version``
``n - 1`` to ``n``. Never edit or reorder a step; append a new one. ``apply`` runs the
missing steps in one ``BEGIN IMMEDIATE`` transaction, so one process migrates while the
others wait and then find the work done.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

Step = Callable[[sqlite3.Connection], None]


def script(sql: str) -> Step:
    """A step that runs a SQL script (trigger bodies are kept whole)."""
    statements = split_statements(sql)

    def run(conn: sqlite3.Connection) -> None:
        for statement in statements:
            conn.execute(statement)

    return run


def version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def apply(conn: sqlite3.Connection, steps: Sequence[Step], *, application_id: int | None = None,
          check: Callable[[], object] | None = None) -> int:
    """Bring ``conn`` (autocommit mode) to ``len(steps)`` and return its version.

    ``application_id`` is written with the first step, marking the file as ours. ``check``
    runs under the write lock before any step, to refuse a file that changed meanwhile
    (it raises). A failing step rolls everything back.
    """
    if version(conn) >= len(steps) and check is None:
        return version(conn)
    conn.execute("BEGIN IMMEDIATE")  # one process migrates; the others wait, then find it done
    try:
        if check is not None:
            check()
        found = version(conn)
        for number in range(found + 1, len(steps) + 1):
            steps[number - 1](conn)
            conn.execute(f"PRAGMA user_version = {number}")
        if application_id is not None and found < len(steps):
            conn.execute(f"PRAGMA application_id = {application_id}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return max(found, len(steps))


def split_statements(script: str) -> list[str]:
    """Split a SQL script into statements, keeping trigger bodies whole; comment lines
    between statements are dropped."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--") and not buffer.strip():
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
