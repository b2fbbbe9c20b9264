"""Run a split's questions through an answerer, score them and keep the results.

``evaluate(...)`` is the library entry point behind ``ehr-magic eval`` (``Evaluation``
is the same in two steps: prepare, then run): it loads the split, opens the database,
builds the mode's answerer, asks every question (in a thread pool with ``workers`` >
1), scores each outcome against the gold and computes the metrics. With ``out`` it
appends each finished question to ``results.jsonl`` at once, so an interrupted run
resumes where it stopped, and writes ``metrics.json`` and ``metrics.md`` at the end.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ehr_magic.errors import ConfigError, DatabaseError, EhrMagicError
from ehr_magic.eval.answerers import Answerer, EvalContext, Learner, Outcome, make_answerer
from ehr_magic.eval.datasets import Item, load_split
from ehr_magic.eval.metrics import Prices, compute_metrics
from ehr_magic.eval.scoring import Rows, judge, normalize_answer

Progress = Callable[[str, int, int], None]  # (phase, done, total), as the CLI's progress bar takes
NO_PRICES = Prices()  # no prices given: a run costs 0


@dataclass
class QuestionResult:
    """One question's outcome and score: a line of ``results.jsonl``."""

    id: str
    question: str
    status: str
    answer: Rows | None  # normalised as scored (text cells, sorted, first 100 rows)
    gold: Rows | None  # None = unanswerable
    verdict: str
    correct: bool
    contained: bool
    template: str
    tables: str
    code: str = ""
    error: str = ""
    note: str = ""
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0  # the answerer's time (its own measure, else wall time)
    wall_seconds: float = 0.0  # measured around the answerer call

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QuestionResult:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class EvalReport:
    """A finished (or resumed and finished) evaluation."""

    config: dict[str, Any]
    results: list[QuestionResult]
    metrics: dict[str, Any]
    resumed: int = 0  # questions taken from an earlier run in the same --out folder
    wall_seconds: float = 0.0  # this invocation's elapsed time
    files: list[Path] = field(default_factory=list)


def score(item: Item, outcome: Outcome, wall_seconds: float) -> QuestionResult:
    """Judge an outcome against the item's gold answer."""
    answer = normalize_answer(outcome.answer) if outcome.status == "answered" else None
    verdict = judge(outcome.status, answer, item.gold_answer)
    return QuestionResult(
        id=item.id,
        question=item.question,
        status=outcome.status,
        answer=answer,
        gold=item.gold_answer,
        verdict=verdict.verdict,
        correct=verdict.correct,
        contained=verdict.contained,
        template=item.template,
        tables=item.tables,
        code=outcome.code,
        error=outcome.error,
        note=outcome.note,
        llm_calls=outcome.llm_calls,
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        seconds=round(outcome.seconds if outcome.seconds > 0 else wall_seconds, 4),
        wall_seconds=round(wall_seconds, 4),
    )


def rescore(item: Item, result: QuestionResult) -> QuestionResult:
    """A stored result judged again against the item's current gold (used on resume)."""
    verdict = judge(result.status, result.answer, item.gold_answer)
    result.gold, result.verdict, result.correct, result.contained = (
        item.gold_answer, verdict.verdict, verdict.correct, verdict.contained)
    result.template, result.tables = item.template, item.tables
    return result


def ask(answerer: Answerer, item: Item) -> tuple[Outcome, float]:
    """One question through the answerer; its exceptions become ``failed`` outcomes.

    A configuration problem (``ConfigError``, or the model refusing our credentials)
    would fail every question the same way, so it stops the run instead.
    """
    started = time.perf_counter()
    try:
        outcome = answerer.answer(item.question, item.id)
    except _abort_errors():
        raise
    except Exception as exc:  # noqa: BLE001 - boundary: one question's crash (traceback kept) must not end a run
        lines = traceback.format_exception(exc)
        outcome = Outcome("failed", error=f"{type(exc).__name__}: {_first_line(exc)}", note="".join(lines[-6:]))
    if not isinstance(outcome, Outcome):
        outcome = Outcome("failed", error=f"the answerer returned {type(outcome).__name__}, not an Outcome")
    return outcome, time.perf_counter() - started


def run_questions(
    answerer: Answerer,
    items: Iterable[Item],
    *,
    workers: int = 1,
    learn: bool = False,
) -> Iterator[QuestionResult]:
    """Yield scored results as questions finish (in completion order with ``workers`` > 1)."""
    # learn() is optional (the Learner protocol), so only an answerer that has it may grow its memory.
    learner: Learner | None = None
    if learn:
        if not isinstance(answerer, Learner):
            raise EhrMagicError("This mode cannot grow its memory: its answerer has no learn(question, code, qid).")
        learner = answerer
    if learn and workers > 1:
        raise EhrMagicError("--grow-memory learns from each answer before the next question; use --workers 1.")
    items = list(items)
    if workers <= 1:
        for item in items:
            result = score(item, *ask(answerer, item))
            if learner is not None and result.correct and result.status == "answered" and result.code:
                learner.learn(item.question, result.code, item.id)
            yield result
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ehr-eval")
    pending: dict[Future[tuple[Outcome, float]], Item] = {}
    queue = iter(items)
    try:
        for item in queue:  # keep at most 2 x workers questions in flight
            pending[pool.submit(ask, answerer, item)] = item
            if len(pending) >= 2 * workers:
                break
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                item = pending.pop(future)
                yield score(item, *future.result())
                following = next(queue, None)
                if following is not None:
                    pending[pool.submit(ask, answerer, following)] = following
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


class Evaluation:
    """One evaluation, prepared: inputs checked, database open, answerer built, earlier
    results read. ``run()`` then asks the remaining questions. Preparing first lets a
    front end report input mistakes before it draws a progress bar.
    """

    def __init__(
        self,
        dataset_dir: str | os.PathLike[str],
        split: str,
        db: str | os.PathLike[str],
        *,
        mode: str = "agent",
        memory_from: str | None = None,
        limit: int | None = None,
        workers: int = 1,
        out: str | os.PathLike[str] | None = None,
        grow_memory: bool = False,
        prices: Prices = NO_PRICES,
        answerer: Answerer | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        from ehr_magic.db import connect
        from ehr_magic.engines import is_url, redact
        from ehr_magic.eval.report import ResultsStore

        if workers < 1:
            raise EhrMagicError("--workers must be at least 1.")
        if limit is not None and limit < 1:
            raise EhrMagicError("--limit must be at least 1.")
        if grow_memory and workers > 1:
            raise EhrMagicError("--grow-memory learns from each answer before the next question; use --workers 1.")
        self.mode, self.workers, self.grow_memory, self.prices = mode, workers, grow_memory, prices
        self.split = load_split(dataset_dir, split)
        memory_split = load_split(dataset_dir, memory_from) if memory_from else None
        remote = is_url(db)
        db_path = Path(db).expanduser()
        if not remote and not db_path.is_file():
            raise DatabaseError(f"No database file at {db}; build it with `ehr-magic data load ehrsql "
                                f"{Path(dataset_dir) / 'mimic_iv.sqlite'} --out {db}`.")
        self.selected = self.split.items[:limit] if limit else list(self.split.items)
        self.config = {
            "dataset": str(Path(dataset_dir).expanduser().resolve()),
            "split": split,
            "version": self.split.version,
            "db": redact(str(db)) if remote else str(db_path.resolve()),
            "mode": mode,
            "memory_from": memory_from,
            "grow_memory": grow_memory,
        }
        self.out = Path(out) if out else None
        self.store = ResultsStore(self.out, self.config) if self.out else None
        by_id = self.split.by_id()
        stored = self.store.load() if self.store else {}
        self.done = {qid: rescore(by_id[qid], r) for qid, r in stored.items() if qid in by_id}
        self.todo = [item for item in self.selected if item.id not in self.done]
        self.ehr = connect(str(db) if remote else db_path)
        try:
            self.answerer: Answerer | None = answerer
            if self.answerer is None and self.todo:
                context = EvalContext(ehr=self.ehr, split=self.split, mode=mode, memory_split=memory_split,
                                      grow_memory=grow_memory, work_dir=self.out, options=dict(options or {}))
                self.answerer = make_answerer(mode, context)
            if grow_memory and self.answerer is not None and not isinstance(self.answerer, Learner):
                raise EhrMagicError(f"Mode {mode} cannot grow its memory (its answerer has no learn method).")
        except BaseException:
            self.ehr.close()
            raise

    def run(self, progress: Progress | None = None) -> EvalReport:
        """Ask the questions not answered yet, then score the whole selection."""
        started = time.perf_counter()
        resumed = len(self.selected) - len(self.todo)
        total = len(self.selected)
        correct = sum(self.done[i.id].correct for i in self.selected if i.id in self.done)
        finished = resumed
        if progress:
            progress(f"{self.mode}: {correct}/{finished} correct", finished, total)
        if self.todo and self.answerer is not None:
            for result in run_questions(self.answerer, self.todo, workers=self.workers, learn=self.grow_memory):
                self.done[result.id] = result
                if self.store:
                    self.store.append(result)
                finished += 1
                correct += result.correct
                if progress:
                    progress(f"{self.mode}: {correct}/{finished} correct", finished, total)
        self.todo = [item for item in self.selected if item.id not in self.done]
        results = [self.done[item.id] for item in self.selected]
        metrics = compute_metrics(results, prices=self.prices)
        metrics["price_in"], metrics["price_out"] = self.prices.prompt, self.prices.completion
        metrics["wall_seconds"] = round(time.perf_counter() - started, 3)  # this invocation only
        report = EvalReport(config=self.config, results=results, metrics=metrics, resumed=resumed,
                            wall_seconds=metrics["wall_seconds"])
        if self.out:
            from ehr_magic.eval.report import write_outputs

            report.files = write_outputs(self.out, report)
        return report

    def close(self) -> None:
        self.ehr.close()

    def __enter__(self) -> Evaluation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def evaluate(
    dataset_dir: str | os.PathLike[str],
    split: str,
    db: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
    **options: Any,
) -> EvalReport:
    """Evaluate a mode on one split of an EHRSQL-format dataset.

    Keyword options are those of ``Evaluation``: ``mode`` (default ``"agent"``),
    ``memory_from``, ``limit``, ``workers``, ``out``, ``grow_memory``, ``prices``,
    ``answerer`` (an Answerer object instead of the mode's factory), ``options``.
    """
    with Evaluation(dataset_dir, split, db, **options) as evaluation:
        return evaluation.run(progress)


def _abort_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [ConfigError]
    llm_errors = sys.modules.get("ehr_magic.llm.errors")  # loaded if an answerer uses the model
    if llm_errors is not None and hasattr(llm_errors, "LLMAuthError"):
        errors.append(llm_errors.LLMAuthError)
    return tuple(errors)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
