"""Resource limits for automatic runs: result rows, engine memory, process memory, output.

A cross join of the two biggest tables must not take the analyst's kernel down. Four
limits work together; the executor and the ``EHR`` apply them:

* ``row_cap(n)`` + ``fetch(relation)``: a query run by generated code may return at most
  ``n`` rows into Python (``ResultTooLargeError`` beyond). DuckDB stops producing rows at
  ``n + 1``, so the cross join is cut off early instead of being materialised.
* ``duckdb_config()``: settings for the analysis connection (``memory_limit`` and a
  bounded spill directory), passed when it is opened because its configuration is
  locked afterwards.
* ``MemoryWatch``: the executor polls it while generated code runs and stops the run
  when the process's resident memory grows past a ceiling (Python-side allocations,
  polars frames).
* ``CappedText``: printed output is kept up to a limit while the code runs (the rest is
  counted, not stored), and ``cap_text`` trims what is fed back to the model.

Limits of the approach: a single C call that holds the interpreter lock (a huge integer
power, a catastrophic regular expression) cannot be interrupted by the time limit, and a
polars query already running in Rust finishes (or fails) on its own before the thread
can be stopped; the static guard refuses the obvious cases.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from ehr_magic.errors import DatabaseError

DEFAULT_MAX_ROWS = 2_000_000
DEFAULT_OUTPUT_CHARS = 4000
_local = threading.local()
log = logging.getLogger(__name__)
# Said once per process, where a run's memory ceiling would start (``MemoryWatch.start``).
MEMORY_OFF = ("ehr-magic: the memory limit for generated code is off: this system has no /proc/self/statm and "
              "psutil is not installed, so the kernel's memory cannot be measured; `pip install psutil` turns it on.")
_memory_off_said = False


class ResultTooLargeError(DatabaseError):
    """A query from generated code returned more rows than the row cap allows."""


class MemoryLimitError(MemoryError):
    """Raised by ``MemoryWatch.check`` (for callers that prefer an exception to polling)."""


# -- row cap ---------------------------------------------------------------------------------


@contextlib.contextmanager
def in_this_thread(name: str, value: Any) -> Iterator[None]:
    """Within this block, ``this_thread(name)`` is ``value`` in this thread (and only in it)."""
    previous = getattr(_local, name, None)
    setattr(_local, name, value)
    try:
        yield
    finally:
        setattr(_local, name, previous)


def this_thread(name: str) -> Any:
    """The value ``in_this_thread`` set for ``name`` in this thread (``None`` outside)."""
    return getattr(_local, name, None)


def row_cap(max_rows: int | None) -> contextlib.AbstractContextManager[None]:
    """Within this block (in this thread), ``fetch`` returns at most ``max_rows`` rows.

    The executor wraps the run of generated code in it; the analyst's own cells, which
    run in other threads or outside the block, are not capped. ``None`` lifts the cap.
    """
    return in_this_thread("max_rows", max_rows)


def current_row_cap() -> int | None:
    """The row cap in force in this thread (``None``: no cap)."""
    return this_thread("max_rows")


def fetch(relation: Any, *, what: str = "the query") -> pl.DataFrame:
    """``relation.pl()`` under the thread's row cap.

    ``relation`` is a DuckDB relation (``cursor.sql(query)``). With a cap of ``n``, DuckDB
    is asked for ``n + 1`` rows at most; if it has more, ``ResultTooLargeError`` says how
    to reduce the result instead of returning a silently truncated frame.
    """
    cap = current_row_cap()
    if cap is None:
        return relation.pl()
    try:
        frame = relation.limit(cap + 1).pl()
    except duckdb.Error as exc:
        raise _unwrapped(exc) from None
    if frame.height > cap:
        raise ResultTooLargeError(
            f"{what[0].upper() + what[1:]} returned more than {cap:,} rows, the limit for generated code; aggregate or "
            "filter in SQL (GROUP BY, WHERE, LIMIT) so that only the rows needed reach Python."
        )
    return frame


def _unwrapped(exc: duckdb.Error) -> duckdb.Error:
    """The error with DuckDB's ``LINE n:`` pointing into the query as written.

    ``relation.limit`` wraps the query in two lines of its own, so execution errors
    (conversions, divisions) would name a line two below the real one.
    """
    text = str(exc)
    fixed = re.sub(r"^LINE (\d+):", lambda m: f"LINE {max(1, int(m.group(1)) - 2)}:", text, flags=re.MULTILINE)
    if fixed == text:
        return exc
    try:
        return type(exc)(fixed)
    except TypeError:  # an exception type that cannot be rebuilt from its text: keep the original
        return exc


# -- DuckDB settings --------------------------------------------------------------------------


def total_memory() -> int | None:
    """Physical memory of the machine in bytes (``None`` if unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # no such sysconf names (Windows)
        pass
    try:
        import psutil
    except ImportError:
        return None
    try:
        return int(psutil.virtual_memory().total)
    except (psutil.Error, OSError):
        return None


_process_config: dict[tuple[Any, ...], dict[str, str]] = {}


def duckdb_config(*, memory_fraction: float = 0.5, memory_limit: str | None = None,
                  temp_directory: str | os.PathLike[str] | None = None, max_temp_size: str = "10GB") -> dict[str, str]:
    """Connection settings that bound the analysis engine's memory and disk use.

    Merge into the config of the read-only connection (``lock_configuration`` keeps
    generated code from changing them). ``memory_limit`` defaults to ``memory_fraction``
    of physical memory, leaving the rest to Python and polars; spilled intermediate
    results go to ``temp_directory`` (default: ``<cache dir>/duckdb-spill``, not beside a
    possibly read-only dataset) and may use at most ``max_temp_size``.

    Put these after the safety settings: ``{**_SAFE_CONFIG, **duckdb_config()}``. (DuckDB
    2.0 refuses ``temp_directory`` when it comes before ``enable_external_access=False``.)

    The result is fixed for the process at the first call with the same arguments: DuckDB
    refuses a second connection to an open file with different settings, so the spill
    folder must not follow a cache directory that changes later (as it does in tests).
    """
    key = (memory_fraction, memory_limit, None if temp_directory is None else str(temp_directory), max_temp_size)
    if key not in _process_config:
        _process_config[key] = _config(memory_fraction, memory_limit, temp_directory, max_temp_size)
    return dict(_process_config[key])


def _config(memory_fraction: float, memory_limit: str | None, temp_directory: str | os.PathLike[str] | None,
            max_temp_size: str) -> dict[str, str]:
    config: dict[str, str] = {}
    if memory_limit is None:
        total = total_memory()
        if total:
            memory_limit = f"{max(256, int(total * memory_fraction) // 2**20)}MB"
    if memory_limit:
        config["memory_limit"] = memory_limit
    if temp_directory is None:
        from ehr_magic.paths import cache_dir

        temp_directory = cache_dir() / "duckdb-spill"
    config["temp_directory"] = str(_spill_folder(Path(temp_directory)))
    config["max_temp_directory_size"] = max_temp_size
    return config


def _spill_folder(wanted: Path) -> Path:
    """``wanted`` with its parent folders made: DuckDB makes the spill folder itself, but not the
    folders above it, and a first large query on a fresh machine (no cache folder yet) would fail;
    where they cannot be made (a read-only home), a private folder of the system's temporary one."""
    try:
        wanted.parent.mkdir(parents=True, exist_ok=True)
        return wanted
    except OSError:
        return Path(tempfile.mkdtemp(prefix="ehr-magic-duckdb-spill-"))


# -- process memory ---------------------------------------------------------------------------


def process_rss() -> int | None:
    """Resident memory of this process in bytes, or ``None`` if it cannot be measured."""
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/statm", "rb") as statm:
                return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            pass
    try:
        import psutil
    except ImportError:
        return None
    try:
        return int(psutil.Process().memory_info().rss)
    except (psutil.Error, OSError):
        return None


def default_memory_allowance() -> int:
    """How much a single run may grow the kernel's memory: a quarter of RAM, 1-8 GiB."""
    total = total_memory() or 8 * 2**30
    return int(min(8 * 2**30, max(2**30, total // 4)))


class MemoryWatch:
    """A memory ceiling for one run of generated code, polled by the executor.

    ``MemoryWatch(limit_bytes)`` allows the process's resident memory to grow by
    ``limit_bytes`` over what it was at ``start()``; with ``absolute=True``, ``limit_bytes``
    is the ceiling itself. Poll ``exceeded()`` from the loop that waits for the worker
    thread (every 50-100 ms); it reads ``/proc/self/statm`` (or psutil) and is cheap.
    Where memory cannot be measured (no ``/proc``, no psutil), ``available`` is False,
    ``exceeded()`` never fires, and ``start()`` says once per process that the limit is off.

        watch = MemoryWatch(2 * 2**30).start()
        while worker.is_alive():
            worker.join(0.05)
            if watch.exceeded():
                stop(worker)
        watch.stop()
    """

    def __init__(self, limit_bytes: int, *, absolute: bool = False) -> None:
        if limit_bytes <= 0:
            raise ValueError("limit_bytes must be positive")
        self.limit_bytes = int(limit_bytes)
        self.absolute = absolute
        self.baseline: int | None = None
        self.peak: int | None = None
        self.started_at: float | None = None
        self.tripped = False
        self._running = False

    @property
    def available(self) -> bool:
        return process_rss() is not None

    @property
    def ceiling(self) -> int | None:
        """The resident size at which ``exceeded()`` fires."""
        if self.absolute:
            return self.limit_bytes
        return None if self.baseline is None else self.baseline + self.limit_bytes

    def start(self) -> MemoryWatch:
        global _memory_off_said
        self.baseline = process_rss()
        if self.baseline is None and not _memory_off_said:
            _memory_off_said = True
            log.warning(MEMORY_OFF)
        self.peak = self.baseline
        self.started_at = time.monotonic()
        self.tripped = False
        self._running = True
        return self

    def stop(self) -> None:
        self._running = False

    def exceeded(self) -> bool:
        """Whether memory has passed the ceiling (stays True once it has)."""
        if self.tripped:
            return True
        if not self._running:
            return False
        rss = process_rss()
        ceiling = self.ceiling
        if rss is None or ceiling is None:
            return False
        self.peak = rss if self.peak is None else max(self.peak, rss)
        if rss > ceiling:
            self.tripped = True
        return self.tripped

    def check(self) -> None:
        """Raise ``MemoryLimitError`` if the ceiling has been passed."""
        if self.exceeded():
            raise MemoryLimitError(self.describe())

    def describe(self) -> str:
        """The message for the model and the analyst when the watch fired."""
        grown = (self.peak or 0) - (self.baseline or 0)
        limit = _size(self.limit_bytes)
        what = f"the kernel's memory reached {_size(self.peak or 0)}" if self.absolute else \
            f"the code grew the kernel's memory by {_size(grown)}"
        return (f"{what}, past the limit of {limit} for generated code, and was stopped; aggregate or filter in SQL "
                "instead of loading large results, and avoid cross joins and building big Python lists")


def _size(n: int) -> str:
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


# -- output -----------------------------------------------------------------------------------


class CappedText:
    """A write-only text buffer that keeps the first ``limit`` characters and counts the rest.

    Use it as the executor's print buffer so that ``while True: print(...)`` cannot fill
    memory; ``getvalue()`` ends with a note saying how much was cut.
    """

    def __init__(self, limit: int = DEFAULT_OUTPUT_CHARS) -> None:
        self.limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self.dropped = 0
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            room = self.limit - self._kept
            if room > 0:
                piece = text[:room]
                self._parts.append(piece)
                self._kept += len(piece)
                self.dropped += len(text) - len(piece)
            else:
                self.dropped += len(text)
        return len(text)

    def flush(self) -> None:
        pass

    @property
    def total(self) -> int:
        """Characters written, kept or not."""
        return self._kept + self.dropped

    def getvalue(self) -> str:
        text = "".join(self._parts)
        if self.dropped:
            text += f"\n... [{self.dropped} more characters cut]"
        return text


def cap_text(text: str, max_chars: int = DEFAULT_OUTPUT_CHARS, max_lines: int = 200) -> str:
    """Trim text fed back to the model to ``max_lines`` lines and ``max_chars`` characters."""
    lines = text.splitlines()
    cut_lines = len(lines) - max_lines
    if cut_lines > 0:
        text = "\n".join(lines[:max_lines]) + f"\n... [{cut_lines} more lines cut]"
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n... [{len(text) - max_chars} more characters cut]"
    return text
