"""What answers the benchmark questions: the ``Answerer`` protocol and its registry.

An answerer turns one question into an ``Outcome``. The evaluation never looks
inside: the agent, memory reuse and the oracle (the gold SQL itself) all plug in the
same way, by a factory in ``ANSWERERS``::

    from ehr_magic.eval import EvalContext, Outcome, register_answerer

    class MyAnswerer:
        def __init__(self, context: EvalContext) -> None:
            self.ehr = context.ehr

        def answer(self, question: str, qid: str) -> Outcome:
            frame = self.ehr.sql("SELECT ...")
            return Outcome("answered", answer=frame, code="answer = ehr.sql('SELECT ...')")

    register_answerer("agent", MyAnswerer)

A factory may also be registered as a ``"package.module:callable"`` string, imported
only when its mode is used. An answerer that also has ``learn(question, code, qid)``
receives each correctly answered question's code when the run uses ``--grow-memory``.
Answerers must be safe to call from several threads when ``--workers`` is above 1
(``EHR`` gives each thread its own DuckDB cursor).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ehr_magic.engines import QUERY_FAILURES
from ehr_magic.errors import EhrMagicError, sentences
from ehr_magic.eval.datasets import Item, Split
from ehr_magic.eval.sqlite_dialect import SQLiteTranslator, translator_for

if TYPE_CHECKING:  # pragma: no cover
    from ehr_magic.db import EHR

Status = Literal["answered", "abstained", "clarify", "failed"]
STATUSES: tuple[str, ...] = ("answered", "abstained", "clarify", "failed")


@dataclass
class Outcome:
    """What an answerer did with one question.

    ``status``: ``answered`` (``answer`` holds the result), ``abstained`` (the question
    cannot be answered from this database; ``note`` says why), ``clarify`` (``note``
    holds the question for the user) or ``failed`` (``error`` says what went wrong).
    ``answer`` may be a polars DataFrame or Series, a list of rows, a list of values or
    one value. ``seconds`` is the answerer's own measure of its time (model waiting
    included); when left at 0 the runner's wall time is used.
    """

    status: Status
    answer: Any = None
    code: str = ""
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    error: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"Outcome status must be one of {', '.join(STATUSES)}, not {self.status!r}.")


@runtime_checkable
class Answerer(Protocol):
    def answer(self, question: str, qid: str) -> Outcome: ...


@runtime_checkable
class Learner(Protocol):
    """An answerer that grows its memory during a run (``--grow-memory``)."""

    def learn(self, question: str, code: str, qid: str) -> None: ...


@dataclass(frozen=True)
class Example:
    """A solved question in our form: the gold SQL translated to DuckDB and wrapped as code."""

    id: str
    question: str
    sql: str  # DuckDB SQL
    answer: list[list[str]]  # the normalised gold answer

    @property
    def code(self) -> str:
        """The cell a user would have accepted: ``answer = ehr.sql(...)``."""
        return f'answer = ehr.sql("""\n{self.sql}\n""")'


@dataclass
class EvalContext:
    """Everything an answerer factory may use to build its answerer for one run.

    ``items`` is the split under evaluation, gold included: only the oracle may read
    the gold fields. ``memory_split`` is the split named by ``--memory-from`` (None
    without it); ``memory_examples()`` gives its answerable questions with the gold
    code in our DuckDB form, translated on first use. ``work_dir`` is the run's
    ``--out`` folder (None without it), where an answerer may keep state.
    """

    ehr: EHR
    split: Split
    mode: str
    memory_split: Split | None = None
    grow_memory: bool = False
    work_dir: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def translator(self) -> SQLiteTranslator:
        return translator_for(self.ehr)

    @cached_property
    def items(self) -> Mapping[str, Item]:
        return self.split.by_id()

    def memory_examples(self) -> list[Example]:
        """The ``--memory-from`` split's answerable questions with translated gold code."""
        return list(self._memory_examples)

    @cached_property
    def _memory_examples(self) -> list[Example]:
        return gold_examples(self.memory_split, self.translator) if self.memory_split is not None else []


AnswererFactory = Callable[[EvalContext], Answerer]


def gold_examples(split: Split, translator: SQLiteTranslator) -> list[Example]:
    """Answerable questions of ``split`` with their gold SQL translated to DuckDB."""
    return [Example(item.id, item.question, translator.translate(item.gold_sql), item.gold_answer or [])
            for item in split if item.gold_sql is not None]


class OracleAnswerer:
    """Answers with the gold SQL, translated to DuckDB and run through ``ehr.sql``.

    Proves the plumbing (dialect, clock, types, normalisation): it should score 100%.
    Abstains where the gold is "null".
    """

    def __init__(self, context: EvalContext) -> None:
        self.ehr = context.ehr
        self.items = context.items
        self.translator = context.translator

    def answer(self, question: str, qid: str) -> Outcome:
        started = time.perf_counter()
        item = self.items.get(qid)
        if item is None or item.gold_sql is None:
            return Outcome("abstained", note="the gold answer is null (unanswerable)",
                           seconds=time.perf_counter() - started)
        sql = self.translator.translate(item.gold_sql)
        code = Example(qid, question, sql, []).code
        try:
            frame = self.ehr.sql(sql)
        except QUERY_FAILURES as exc:  # a failing gold query is a result to report
            return Outcome("failed", code=code, error=f"{type(exc).__name__}: {_first_line(exc)}",
                           seconds=time.perf_counter() - started)
        return Outcome("answered", answer=frame, code=code, seconds=time.perf_counter() - started)


# mode -> factory, or "package.module:callable" imported on first use.
ANSWERERS: dict[str, AnswererFactory | str] = {
    "oracle": OracleAnswerer,
    # agent and memory are settings of one Session (ehr_magic.session), the magic's answering path
    "agent": "ehr_magic.eval.agent_mode:AgentAnswerer",
    "memory": "ehr_magic.eval.agent_mode:MemoryModeAnswerer",
}


def register_answerer(mode: str, factory: AnswererFactory | str) -> None:
    """Make ``--mode MODE`` use ``factory(context) -> Answerer``."""
    ANSWERERS[mode] = factory


def make_answerer(mode: str, context: EvalContext) -> Answerer:
    """Build the answerer of ``mode`` for ``context``."""
    factory = ANSWERERS.get(mode)
    if factory is None:
        known = ", ".join(sorted(ANSWERERS))
        raise EhrMagicError(f"Mode {mode} is not available yet; available modes: {known}.")
    if isinstance(factory, str):
        module_name, _, attribute = factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise EhrMagicError(f"Mode {mode} is not available yet: {factory} fails with {sentences(exc)}") from None
    answerer = factory(context)
    if not isinstance(answerer, Answerer):
        raise TypeError(f"The {mode} answerer factory returned {answerer!r}, which has no answer(question, qid).")
    return answerer


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
