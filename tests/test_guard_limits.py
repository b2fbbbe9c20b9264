"""Resource limits: runaway code the static guard cannot see is stopped by the executor with a
clear message, the kernel stays alive and nothing on disk changes; plus the limit helpers."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import duckdb
import pytest

import ehr_magic
from ehr_magic.runtime.executor import OUTPUT_CHARS, Executor
from ehr_magic.db.ehr import _SAFE_CONFIG
from ehr_magic.safety import check_code
from ehr_magic.safety.limits import (
    CappedText,
    MemoryWatch,
    ResultTooLargeError,
    cap_text,
    current_row_cap,
    duckdb_config,
    fetch,
    process_rss,
    row_cap,
)
from test_guard_snippets import STOPPED

MB = 2**20


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture()
def ehr(db: Path):
    with ehr_magic.connect(db) as handle:
        yield handle


# -- runaway code, stopped by the executor -----------------------------------------------------


@pytest.mark.parametrize("name", sorted(STOPPED))
def test_runaway_code_is_stopped_and_the_kernel_survives(name: str, ehr, db: Path, tmp_path: Path) -> None:
    code = STOPPED[name]
    assert check_code(code).allowed  # the static check cannot see these
    before, listing = _digest(db), _listing(tmp_path)
    started = time.perf_counter()
    execution = Executor(ehr, timeout=2).run(code)
    assert time.perf_counter() - started < 15
    assert not execution.ok
    error = execution.error
    expected = {"runaway_loop": {"Timeout"}, "deep_recursion": {"RecursionError"},
                "cross_join_sql": {"Timeout", "ResultTooLargeError", "OutOfMemoryException", "MemoryLimit"},
                "cross_join_count": {"Timeout"}, "huge_print": {"Timeout"}}[name]
    assert error.type in expected, error.describe()
    assert error.message and "\n" not in error.describe().split(":", 1)[0]
    if error.type == "Timeout":
        assert "was stopped" in error.message
    assert len(execution.stdout) <= OUTPUT_CHARS + 100  # output is capped
    # the kernel is alive, the database answers, nothing changed on disk
    assert ehr.sql("SELECT count(*) AS n FROM patients")["n"][0] == 94
    assert Executor(ehr, timeout=5).run("answer = 1 + 1").answer == 2
    assert _digest(db) == before and _listing(tmp_path) == listing


# -- integration: memory ceiling and row cap in the executor (need Executor parameters) ---------


def test_executor_memory_ceiling_stops_a_growing_run(ehr) -> None:
    """Needs ``Executor(..., memory_limit=bytes)`` polling a ``MemoryWatch``."""
    code = "chunks = []\nfor i in range(1200):\n    chunks.append('x' * 10**6 + str(i))\nanswer = len(chunks)"
    execution = Executor(ehr, timeout=60, memory_limit=200 * MB).run(code)
    assert not execution.ok and execution.error.type == "MemoryLimit"
    assert "memory" in execution.error.message and "limit" in execution.error.message
    assert Executor(ehr, timeout=5).run("answer = 2").answer == 2


def test_executor_row_cap_applies_to_generated_code_only(ehr) -> None:
    """Needs ``Executor(..., max_rows=n)`` entering ``row_cap`` and ``EHR.sql`` using ``limits.fetch``."""
    execution = Executor(ehr, timeout=10, max_rows=1000).run("answer = ehr.sql('SELECT * FROM labevents')")
    assert not execution.ok and execution.error.type == "ResultTooLargeError"
    assert "more than 1,000 rows" in execution.error.message
    assert ehr.sql("SELECT * FROM labevents").height == 26426  # the analyst's own queries are not capped
    # 700 million rows: only a query cut off at the cap ends before the time limit (else "Timeout")
    crossed = Executor(ehr, timeout=30, max_rows=1000).run("answer = ehr.sql('SELECT * FROM labevents a, labevents b')")
    assert crossed.error.type == "ResultTooLargeError", crossed.error.describe()


# -- the helpers -------------------------------------------------------------------------------


def test_row_cap_limits_fetch_in_this_thread_only() -> None:
    con = duckdb.connect()
    assert fetch(con.sql("SELECT * FROM range(100)")).height == 100
    with row_cap(100):
        assert current_row_cap() == 100
        assert fetch(con.sql("SELECT * FROM range(100)")).height == 100
        with pytest.raises(ResultTooLargeError, match="more than 99 rows"):
            with row_cap(99):
                fetch(con.sql("SELECT * FROM range(100)"))
        seen = []
        thread = threading.Thread(target=lambda: seen.append(current_row_cap()))
        thread.start()
        thread.join()
        assert seen == [None]
    assert current_row_cap() is None


def test_row_cap_keeps_error_line_numbers_of_the_query_as_written() -> None:
    con = duckdb.connect()
    query = "SELECT 1 AS a,\n  CAST(s AS INTEGER) AS c\nFROM (VALUES ('abc')) t(s)"
    with row_cap(10), pytest.raises(duckdb.ConversionException, match="LINE 2:"):
        fetch(con.sql(query))


def test_row_cap_cuts_a_cross_join_short() -> None:
    con = duckdb.connect()
    started = time.perf_counter()
    with row_cap(1000), pytest.raises(ResultTooLargeError, match="aggregate or filter in SQL"):
        fetch(con.sql("SELECT * FROM range(200000) a, range(200000) b"), what="the cross join")
    assert time.perf_counter() - started < 5


def test_duckdb_config_bounds_the_engine_and_stays_locked(tmp_path: Path, db: Path) -> None:
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    config = duckdb_config(memory_limit="512MB", temp_directory=tmp_path / "spill")
    con = duckdb.connect(str(copy), read_only=True, config={**_SAFE_CONFIG, **config})
    try:
        limit, temp = con.execute("SELECT current_setting('memory_limit'), "
                                  "current_setting('temp_directory')").fetchall()[0]
        assert limit.startswith(("488", "512")) and temp == str(tmp_path / "spill")
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET memory_limit = '100GB'")
    finally:
        con.close()
    default = duckdb_config()
    assert default["memory_limit"].endswith("MB") and default["temp_directory"].endswith("duckdb-spill")
    assert duckdb_config() == default  # fixed for the process: a second connection must match the first


def test_a_query_that_spills_to_disk_works_before_the_cache_folder_exists(tmp_path: Path, monkeypatch) -> None:
    # a fresh machine: no cache folder yet, and DuckDB makes the spill folder but not the folders above it
    cache = tmp_path / "fresh-home" / ".cache" / "ehr-magic"
    monkeypatch.setenv("EHR_MAGIC_CACHE_DIR", str(cache))
    config = duckdb_config(memory_limit="64MB")  # a setting of its own: made now, under this cache folder
    assert config["temp_directory"] == str(cache / "duckdb-spill")
    with duckdb.connect(":memory:", config=config) as con:
        con.execute("SET enable_progress_bar = false")
        sorted_rows = con.execute("SELECT count(*) FROM (SELECT md5(range::VARCHAR) AS h FROM range(3000000) "
                                  "ORDER BY h)").fetchone()
    assert sorted_rows == (3_000_000,)


def test_memory_watch_fires_when_memory_grows() -> None:
    if process_rss() is None:
        pytest.skip("resident memory cannot be measured on this platform")
    watch = MemoryWatch(100 * MB).start()
    stop = threading.Event()
    chunks: list[bytes] = []

    def grow() -> None:
        for i in range(800):  # at most ~800 MB, touched so that it is resident
            if stop.is_set():
                return
            chunks.append(b"x" * MB + bytes([i % 256]))
            time.sleep(0.002)

    worker = threading.Thread(target=grow)
    worker.start()
    while worker.is_alive() and not watch.exceeded():
        worker.join(0.05)
    stop.set()
    worker.join()
    watch.stop()
    assert watch.exceeded() and watch.tripped
    assert len(chunks) < 700
    assert watch.peak - watch.baseline > 100 * MB
    message = watch.describe()
    assert "past the limit of 100.0 MB" in message and "was stopped" in message
    chunks.clear()


def test_memory_watch_is_quiet_below_the_ceiling_and_without_measurements(monkeypatch: pytest.MonkeyPatch) -> None:
    watch = MemoryWatch(10 * 2**30).start()
    assert not watch.exceeded()
    watch.stop()
    assert not watch.exceeded()
    assert MemoryWatch(1, absolute=True).start().exceeded()
    monkeypatch.setattr("ehr_magic.safety.limits.process_rss", lambda: None)
    unavailable = MemoryWatch(1).start()
    assert not unavailable.available and not unavailable.exceeded()
    with pytest.raises(ValueError):
        MemoryWatch(0)


def test_without_proc_or_psutil_the_memory_limit_says_it_is_off(ehr, monkeypatch, caplog) -> None:
    import sys

    from ehr_magic.safety import limits

    monkeypatch.setattr(sys, "platform", "darwin")  # no /proc/self/statm to read
    monkeypatch.setitem(sys.modules, "psutil", None)  # and `import psutil` fails
    monkeypatch.setattr(limits, "_memory_off_said", False)
    assert process_rss() is None
    with caplog.at_level("WARNING", logger="ehr_magic.safety.limits"):
        first = Executor(ehr, timeout=10, memory_limit=100 * MB).run("answer = 1")
        second = Executor(ehr, timeout=10, memory_limit=100 * MB).run("answer = 2")
    assert (first.answer, second.answer) == (1, 2)  # the code still runs, without a memory ceiling
    said = [r.getMessage() for r in caplog.records]
    assert said == [limits.MEMORY_OFF]  # one line, once per process
    assert "memory limit for generated code is off" in said[0] and "pip install psutil" in said[0]
    assert not MemoryWatch(MB).start().available


def test_capped_text_keeps_the_start_and_counts_the_rest() -> None:
    buffer = CappedText(10)
    for _ in range(1000):
        buffer.write("abcdef\n")
    assert buffer.total == 7000 and buffer.dropped == 6990
    assert buffer.getvalue() == "abcdef\nabc\n... [6990 more characters cut]"
    assert CappedText(10).getvalue() == ""


def test_cap_text_limits_lines_and_characters() -> None:
    text = "\n".join(f"line {i}" for i in range(500))
    capped = cap_text(text, max_chars=10_000, max_lines=10)
    assert capped.count("\n") == 10 and capped.endswith("[490 more lines cut]")
    assert cap_text("x" * 50, max_chars=20).endswith("[30 more characters cut]")
