"""The one place where generated code runs.

``Executor.run(code)`` executes code in a namespace that has ``ehr``, ``pl`` and the
usual imports, captures ``answer``, printed output and the last expression, and
enforces a wall-time limit that really stops a runaway DuckDB query (``interrupt``)
or Python loop (an asynchronous exception raised in the worker thread). Failures name
the failing line of the generated code, not of this wrapper.

This is not a security sandbox: it runs code with the kernel's rights. Static checks
of what code may do belong to the code guard; the database itself is read-only.
"""

from __future__ import annotations

import ast
import ctypes
import datetime as dt
import math
import threading
import time
import traceback
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.safety import limits, runtime
from ehr_magic.safety import sql as sqlcheck

GENERATED = "<generated>"
_MISSING = object()
SHOWN_ROWS = 40  # rows of a printed table shown whole; a longer one shows its first and last half of these
SHOWN_CELL = 200  # characters of one printed cell
OUTPUT_CHARS = 6000  # characters of printed output kept per run; the rest is cut with a line saying so


@dataclass
class ErrorInfo:
    """What went wrong, phrased for the model and the analyst."""

    type: str
    message: str
    line: int | None = None  # line number in the generated code
    line_text: str = ""
    call: str = ""  # the innermost call of generated code that failed

    def describe(self) -> str:
        where = f" at line {self.line}: `{self.line_text}`" if self.line else ""
        return f"{self.type}{where}: {self.message}"


@dataclass
class Execution:
    """The outcome of one run of generated code."""

    ok: bool
    answer: Any = None
    has_answer: bool = False
    last_value: Any = None
    stdout: str = ""
    error: ErrorInfo | None = None
    seconds: float = 0.0
    timed_out: bool = False
    namespace: dict[str, Any] = field(default_factory=dict, repr=False)


class ExecutionTimeout(BaseException):
    """Raised inside the worker thread when the time limit is reached."""


def base_namespace(ehr: Database, tools: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What generated code can use without importing it; ``tools`` adds names from the layers
    above (the session adds ``skills``)."""
    import collections
    import json
    import statistics

    # `re`, `math`, `range`, `pow` and imports of `re`/`math` are the size-checked versions.
    checked_builtins = runtime.namespace_builtins()
    safe_import = checked_builtins["__import__"]
    return {"ehr": ehr, "pl": pl, "dt": dt, "datetime": dt, "math": safe_import("math"), "re": safe_import("re"),
            "json": json, "statistics": statistics, "collections": collections, "__name__": "__ehr__",
            "__builtins__": checked_builtins, runtime.CHECKED: runtime.checked_operations(),
            **(tools or {})}


def code_namespace(ehr: Database, variables: Mapping[str, Any] | None = None, tools: Mapping[str, Any] | None = None,
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The namespace generated or remembered code runs in, for the agent, reuse and the session:
    ``base_namespace`` plus the notebook's variables, as in the kernel, but never its ``answer``
    (a stale one would pass for the code's result). Returns ``(namespace, the variables shared)``."""
    namespace = base_namespace(ehr, tools)
    shared = {k: v for k, v in (variables or {}).items() if k != "answer"}
    for name, value in shared.items():
        namespace.setdefault(name, value)
    return namespace, shared


class Executor:
    """Runs generated code against one ``EHR`` with a time limit and capped output."""

    def __init__(self, ehr: Database, *, timeout: float = 60.0, output_limit: int = OUTPUT_CHARS,
                 max_rows: int | None = limits.DEFAULT_MAX_ROWS, memory_limit: int | None = None) -> None:
        self.ehr = ehr
        self.timeout = timeout
        self.output_limit = output_limit
        self.max_rows = max_rows  # rows one query of generated code may return (None: no cap)
        # growth of the process's memory allowed during one run (None: the default allowance; 0: no watch)
        self.memory_limit = limits.default_memory_allowance() if memory_limit is None else memory_limit

    def run(self, code: str, namespace: dict[str, Any] | None = None) -> Execution:
        """Execute ``code``; ``namespace`` (default: a fresh one) receives its variables."""
        ns = base_namespace(self.ehr) if namespace is None else namespace
        ns.setdefault("ehr", self.ehr)
        ns.setdefault("pl", pl)
        ns.setdefault(runtime.CHECKED, runtime.checked_operations())
        ns.setdefault("__builtins__", runtime.namespace_builtins())
        started = time.perf_counter()
        try:
            compiled = compile(_prepare(code), GENERATED, "exec")
        except SyntaxError as exc:
            info = ErrorInfo("SyntaxError", exc.msg or "invalid syntax", exc.lineno, _line(code, exc.lineno))
            return Execution(ok=False, error=info, seconds=time.perf_counter() - started, namespace=ns)

        buffer = limits.CappedText(self.output_limit)
        ns["print"] = _capturing_print(buffer)
        ns.pop("answer", None)
        outcome: dict[str, BaseException | None] = {"error": None}

        def target() -> None:
            try:
                # queries are capped and, as run, checked to be reads (SQL built at run time included)
                with limits.row_cap(self.max_rows), sqlcheck.generated_code():
                    exec(compiled, ns)  # noqa: S102 (the executor is the one place code runs)
            except BaseException as exc:  # noqa: BLE001 (everything is reported, nothing escapes the thread)
                outcome["error"] = exc

        worker = threading.Thread(target=target, name="ehr-magic-executor", daemon=True)
        watch = limits.MemoryWatch(self.memory_limit) if self.memory_limit else None
        worker.start()
        if watch is not None:
            watch.start()
        deadline = time.monotonic() + self.timeout
        try:
            while worker.is_alive() and time.monotonic() < deadline:
                worker.join(min(0.05, max(0.0, deadline - time.monotonic())))
                if watch is not None and watch.exceeded():
                    break
        except KeyboardInterrupt:  # the analyst pressed stop: stop the run too, then pass it on
            self._stop(worker)
            raise
        over_memory = watch is not None and watch.exceeded()
        timed_out = worker.is_alive() and not over_memory
        if worker.is_alive():
            self._stop(worker)
        if watch is not None:
            watch.stop()
        seconds = time.perf_counter() - started
        ns.pop("print", None)
        stdout = buffer.getvalue()
        last = ns.pop("__last__", None)
        error = outcome["error"]
        if over_memory and watch is not None:
            info = ErrorInfo("MemoryLimit", watch.describe())
            if isinstance(error, BaseException):
                info.line, info.line_text = _failing_line(error, code)
            for name in [k for k in ns if k not in ("ehr", "pl")]:  # free what the run built
                ns.pop(name, None)
            return Execution(ok=False, stdout=stdout, error=info, seconds=seconds, namespace=ns)
        if timed_out:
            info = ErrorInfo("Timeout", f"the code did not finish within {self.timeout:g} seconds and was stopped; "
                             "make the query cheaper (filter early, avoid cross joins and Python loops over rows)")
            if isinstance(error, BaseException):
                info.line, info.line_text = _failing_line(error, code)
            return Execution(ok=False, stdout=stdout, error=info, seconds=seconds, timed_out=True, namespace=ns)
        if error is not None:
            if isinstance(error, KeyboardInterrupt):
                raise error
            return Execution(ok=False, stdout=stdout, error=_error_info(error, code), seconds=seconds, namespace=ns)
        answer = ns.get("answer", _MISSING)
        return Execution(ok=True, answer=None if answer is _MISSING else answer, has_answer=answer is not _MISSING,
                         last_value=last, stdout=stdout, seconds=seconds, namespace=ns)

    def _stop(self, worker: threading.Thread) -> None:
        """Stop a runaway run: interrupt DuckDB, then raise in the Python thread."""
        deadline = time.monotonic() + 5
        while worker.is_alive() and time.monotonic() < deadline:
            self.ehr.interrupt()
            if worker.ident is not None:  # set once the thread started
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident),
                                                           ctypes.py_object(ExecutionTimeout))
            worker.join(0.2)


def _prepare(code: str) -> ast.Module | str:
    """The code to compile: a trailing expression ``x`` becomes ``__last__ = x``, and sizes of
    C-level arithmetic are checked at run time (``safety.runtime``); line numbers unchanged."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code  # compile() reports it with the right line
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        assign = ast.Assign(targets=[ast.Name("__last__", ast.Store())], value=last.value)
        tree.body[-1] = ast.copy_location(assign, last)
    return runtime.instrument(tree)


def shown(value: Any) -> str:
    """A value as printed output shows it: a polars table whole up to ``SHOWN_ROWS`` rows, every
    column and cells up to ``SHOWN_CELL`` characters (polars alone stops at 10 rows and cuts
    cells at 30 characters), and a longer table with a line saying how much is not shown."""
    frame = value.to_frame() if type(value) is pl.Series else value
    if type(frame) is not pl.DataFrame:  # subclasses (ehr.find's Found) print themselves
        return str(value)
    rows = frame.height
    with pl.Config(tbl_rows=-1 if rows <= SHOWN_ROWS else SHOWN_ROWS, tbl_cols=-1, fmt_str_lengths=SHOWN_CELL,
                   tbl_width_chars=10_000, fmt_table_cell_list_len=-1):
        text = str(value)
    if rows > SHOWN_ROWS:
        half = SHOWN_ROWS // 2
        text += (f"\n[{rows:,} rows: the first {half} and the last {half} are shown; filter, aggregate or slice "
                 "to see others]")
    return text


def _capturing_print(buffer: limits.CappedText) -> Callable[..., None]:
    def captured_print(*args: Any, sep: str = " ", end: str = "\n", file: Any = None, flush: bool = False) -> None:
        if file is not None:
            print(*args, sep=sep, end=end, file=file, flush=flush)
            return
        buffer.write(sep.join(shown(a) for a in args) + end)

    return captured_print


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [{len(text) - limit} more characters cut]"


def _line(code: str, lineno: int | None) -> str:
    lines = code.splitlines()
    return lines[lineno - 1].strip() if lineno and 0 < lineno <= len(lines) else ""


def _failing_line(error: BaseException, code: str) -> tuple[int | None, str]:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == GENERATED]
    if not frames:
        return None, ""
    return frames[-1].lineno, _line(code, frames[-1].lineno)


def _error_info(error: BaseException, code: str) -> ErrorInfo:
    lineno, text = _failing_line(error, code)
    frames = traceback.extract_tb(error.__traceback__)
    generated = [i for i, f in enumerate(frames) if f.filename == GENERATED]
    # The call made from generated code into a library (e.g. sql() for ehr.sql) that raised.
    call = f"{frames[generated[-1] + 1].name}()" if generated and generated[-1] + 1 < len(frames) else ""
    message = str(error).strip() or type(error).__name__
    return ErrorInfo(type(error).__name__, _cap(message, 1500), lineno, text, call)


def reads_data(code: str, sources: Collection[str]) -> bool:
    """Whether ``code`` uses any of the names in ``sources`` (``ehr``, ``skills``, the notebook's
    variables): an answer typed in as a constant is no answer, however plausible it looks."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return True  # it ran, so this cannot happen; never fail an answer on our own parse
    return any(isinstance(node, ast.Name) and node.id in sources for node in ast.walk(tree))


def nothing_found(value: Any) -> bool:
    """Whether a computed answer says "nothing": no rows or items, or a lone null (the maximum of
    no rows). A LazyFrame is not a result yet."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    if isinstance(value, pl.DataFrame):
        return value.height == 0 or (value.shape == (1, 1) and value.item() is None)
    if isinstance(value, pl.Series):
        return value.len() == 0
    return isinstance(value, (list, tuple, set, dict)) and len(value) == 0


def is_zero(value: Any) -> bool:
    """Whether a computed answer is a count of nothing: 0, or one cell holding 0."""
    if isinstance(value, pl.DataFrame) and value.shape == (1, 1):
        value = value.item()
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def is_empty_answer(value: Any) -> str | None:
    """Why ``value`` is not a usable answer (None when it is one)."""
    if value is None:
        return "`answer` is None"
    if isinstance(value, float) and math.isnan(value):
        return "`answer` is NaN"
    if isinstance(value, pl.LazyFrame):
        return "`answer` is a LazyFrame; call .collect() so it holds the result"
    if isinstance(value, pl.DataFrame):
        if value.height == 0:
            return "`answer` is an empty DataFrame (0 rows)"
        if value.height == 1 and value.width == 1 and value.item() is None:
            return "`answer` is a 1x1 DataFrame holding null"
        return None
    if isinstance(value, pl.Series) and value.len() == 0:
        return "`answer` is an empty Series"
    if isinstance(value, (list, tuple, set, dict)) and len(value) == 0:
        return f"`answer` is an empty {type(value).__name__}"
    return None
