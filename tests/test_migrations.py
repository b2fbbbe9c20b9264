"""The one migration helper behind the memory store, the skill store and the audit log."""

from __future__ import annotations

import sqlite3

import pytest

from ehr_magic import migrations


def _open(path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), isolation_level=None)


def test_steps_run_once_in_order_and_mark_the_file(tmp_path) -> None:
    ran: list[int] = []
    steps = [migrations.script("CREATE TABLE a (x INTEGER);\nCREATE TRIGGER t AFTER INSERT ON a BEGIN\n"
                               "  UPDATE a SET x = x + 1 WHERE rowid = NEW.rowid;\nEND;"),
             lambda conn: ran.append(2)]
    conn = _open(tmp_path / "s.sqlite")
    assert migrations.apply(conn, steps, application_id=0x1234) == 2
    assert migrations.apply(conn, steps, application_id=0x1234) == 2  # nothing left to do
    assert ran == [2]
    assert conn.execute("PRAGMA application_id").fetchone()[0] == 0x1234
    conn.execute("INSERT INTO a VALUES (1)")
    assert conn.execute("SELECT x FROM a").fetchone()[0] == 2  # the trigger body was kept whole
    steps.append(migrations.script("ALTER TABLE a ADD COLUMN y TEXT"))
    assert migrations.apply(conn, steps) == 3 and ran == [2]


def test_a_failing_step_leaves_the_file_as_it_was(tmp_path) -> None:
    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE b (y INTEGER)")
        raise RuntimeError("step failed")

    conn = _open(tmp_path / "s.sqlite")
    with pytest.raises(RuntimeError):
        migrations.apply(conn, [migrations.script("CREATE TABLE a (x INTEGER)"), broken], application_id=7)
    assert migrations.version(conn) == 0
    assert conn.execute("PRAGMA application_id").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def test_check_refuses_under_the_write_lock(tmp_path) -> None:
    conn = _open(tmp_path / "s.sqlite")

    def refuse() -> None:
        raise ValueError("not ours")

    with pytest.raises(ValueError):
        migrations.apply(conn, [migrations.script("CREATE TABLE a (x INTEGER)")], check=refuse)
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def test_comment_lines_between_statements_are_dropped() -> None:
    assert migrations.split_statements("-- one\nCREATE TABLE a (x);\n-- two\nCREATE TABLE b (y);") == [
        "CREATE TABLE a (x);", "CREATE TABLE b (y);"]
