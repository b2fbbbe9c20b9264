"""The SQLite audit log: schema migrations, reading back, failure handling, several writers."""

from __future__ import annotations

import multiprocessing
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ehr_magic.llm.audit import MIGRATIONS, AuditLog, AuditLogError


def record(log: AuditLog, **overrides) -> int | None:
    values = dict(
        started_at=datetime.now(timezone.utc),
        endpoint="http://127.0.0.1:1/v1",
        provider="compatible",
        model="fake-model",
        purpose="code",
        request={"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0},
        response_text="hello",
        prompt_tokens=9,
        completion_tokens=1,
        latency_s=0.25,
    )
    values.update(overrides)
    return log.record(**values)


def test_new_log_is_migrated_to_the_latest_schema(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.sqlite")
    assert log.entries() == []  # reading a log that does not exist yet creates nothing
    assert not log.path.exists()
    record(log)
    assert log.schema_version() == len(MIGRATIONS)
    with sqlite3.connect(log.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_default_path_is_in_the_data_dir(isolated_user_dirs: Path) -> None:
    assert AuditLog().path == isolated_user_dirs / "data" / "audit.sqlite"


def test_migrations_run_once_and_only_the_missing_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "audit.sqlite"
    record(AuditLog(path))

    ran: list[str] = []

    def m_add_column(db: sqlite3.Connection) -> None:
        ran.append("add")
        db.execute("ALTER TABLE calls ADD COLUMN cell_id TEXT")

    monkeypatch.setattr("ehr_magic.llm.audit.MIGRATIONS", [*MIGRATIONS, m_add_column])
    log = AuditLog(path)
    assert record(log) == 2
    assert AuditLog(path).schema_version() == len(MIGRATIONS) + 1
    assert ran == ["add"]  # the second AuditLog found the schema current
    with sqlite3.connect(path) as db:
        assert "cell_id" in [row[1] for row in db.execute("PRAGMA table_info(calls)")]


def test_record_and_read_back(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.sqlite")
    started = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    call_id = record(log, started_at=started, status="ok", attempts=2, finish_reason="stop", tokens_estimated=True)

    entry = log.get(call_id)
    assert entry.id == call_id
    assert entry.started_at == started
    assert (entry.endpoint, entry.provider, entry.model, entry.purpose) == (
        "http://127.0.0.1:1/v1", "compatible", "fake-model", "code")
    assert entry.request["temperature"] == 0.0
    assert entry.messages == [{"role": "user", "content": "hi"}]
    assert entry.response_text == "hello"
    assert (entry.prompt_tokens, entry.completion_tokens, entry.total_tokens) == (9, 1, 10)
    assert entry.tokens_estimated is True
    assert entry.latency_s == 0.25
    assert (entry.status, entry.error, entry.attempts, entry.finish_reason) == ("ok", None, 2, "stop")


def test_error_and_interrupted_rows(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.sqlite")
    record(log, status="error", error="The model server rejected the API key (401)", response_text=None)
    record(log, status="interrupted", error="interrupted (KeyboardInterrupt)", response_text="partial")
    assert [(e.status, e.response_text) for e in log.entries()] == [("error", None), ("interrupted", "partial")]
    with pytest.raises(ValueError, match="status"):
        record(log, status="maybe")


def test_entries_since_and_limit(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.sqlite")
    base = datetime(2025, 1, 1, tzinfo=timezone.utc)
    for day in range(5):
        record(log, started_at=base + timedelta(days=day), purpose=f"day{day}")

    assert [e.purpose for e in log.entries()] == ["day0", "day1", "day2", "day3", "day4"]
    assert [e.purpose for e in log.entries(limit=2)] == ["day3", "day4"]
    assert [e.purpose for e in log.entries(since=base + timedelta(days=3))] == ["day3", "day4"]
    assert [e.purpose for e in log.entries(since=base + timedelta(days=1), limit=1)] == ["day4"]
    # a zone other than UTC compares by instant
    paris = timezone(timedelta(hours=1))
    assert len(log.entries(since=datetime(2025, 1, 3, 1, 0, tzinfo=paris))) == 3
    assert log.count() == 5


def test_get_unknown_id(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.sqlite")
    record(log)
    with pytest.raises(AuditLogError, match="No call #99 in the audit log"):
        log.get(99)


def test_unwritable_log_warns_once_and_returns_none(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    log = AuditLog(blocker / "audit.sqlite")
    with pytest.warns(RuntimeWarning, match="EHR_MAGIC_DATA_DIR") as warned:
        assert record(log) is None
        assert record(log) is None
    assert len(warned) == 1


def test_corrupt_log_cannot_be_read(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    log = AuditLog(path)
    with pytest.warns(RuntimeWarning):
        assert record(log) is None
    with pytest.raises(AuditLogError, match="move it aside"):
        log.entries()


def test_request_with_unserialisable_values_is_stored_as_text(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.sqlite")
    call_id = record(log, request={"messages": [], "when": datetime(2025, 1, 1)})
    assert log.get(call_id).request["when"] == "2025-01-01 00:00:00"


def test_one_log_shared_by_threads(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    log = AuditLog(tmp_path / "audit.sqlite")
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda i: record(log, purpose=f"t{i}"), range(100)))
    assert sorted(ids) == list(range(1, 101))


def _writer(path: str, name: str, n: int, barrier) -> None:  # runs in a child process
    log = AuditLog(Path(path))
    barrier.wait()
    for i in range(n):
        assert record(log, purpose=name, response_text=f"{name}-{i}") is not None


def test_two_processes_write_concurrently(tmp_path: Path) -> None:
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # pragma: no cover - platforms without fork
        pytest.skip("needs the fork start method")
    path = tmp_path / "audit.sqlite"
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(str(path), name, 200, barrier)) for name in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]

    entries = AuditLog(path).entries()
    assert len(entries) == 400
    assert len({e.id for e in entries}) == 400
    for name in ("a", "b"):
        texts = [e.response_text for e in entries if e.purpose == name]
        assert texts == [f"{name}-{i}" for i in range(200)]  # each writer's rows, in its order
