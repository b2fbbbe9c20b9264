"""``Reuser``: answer a question by adapting a remembered cell, without the model.

    reuser = Reuser.from_store(ehr, MemoryStore())
    result = reuser.answer("What was the last potassium of patient 10010471?")
    result.status        # answered | abstained
    result.message       # reused accepted cell #12 with: potassium <- rdw, 10010471 <- 10004235
    result.code          # the adapted code that ran

The steps: match the question to memory (``match``), write its values into the
cell's code (``adapt``), check every new value exists where the code uses it, run
the code with the usual executor, and check the result has the shape the question
asks for (a time for "when", yes/no for "did/has/is"). Anything unsure abstains
with the reason; nothing here calls a model.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import polars as pl

from ehr_magic import skills
from ehr_magic.runtime.executor import Executor, base_namespace, is_empty_answer
from ehr_magic.reuse.adapt import AdaptationError, adapt, check_context, unfound_values
from ehr_magic.reuse.calibrate import Calibration, calibrate, load_calibration, save_calibration
from ehr_magic.reuse.lexicon import operator_role_moved
from ehr_magic.reuse.match import Candidate, MatchResult, ReuseIndex
from ehr_magic.reuse.template import Template
from ehr_magic.reuse.unanswerable import unanswerable_reason, unknown_words
from ehr_magic.knowledge.handle import Database
from ehr_magic.reuse.values import Value

if TYPE_CHECKING:
    from ehr_magic.memory import MemoryStore

TRUSTED = ("accepted", "seed", "imported")


class _CellFields(TypedDict):
    """What every result of running one remembered cell says of the question and the cell."""

    question: str
    entry_id: int
    entry_question: str
    origin: str
    score: float


@dataclass
class ReuseResult:
    """What reusing memory gave for one question."""

    question: str
    status: str  # answered | abstained
    answer: Any = None
    code: str = ""
    entry_id: int | None = None
    entry_question: str = ""
    origin: str = ""
    substitutions: list[tuple[str, str]] = field(default_factory=list)  # (new, old)
    score: float = 0.0  # similarity of the question to the cell's question (0-1)
    margin: float = 0.0  # how much better than the best cell of another kind
    reason: str = ""
    unanswerable: bool = False  # the reason is certain: the database cannot answer this
    seconds: float = 0.0
    namespace: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def answered(self) -> bool:
        return self.status == "answered"

    @property
    def message(self) -> str:
        if not self.answered:
            return self.reason
        cell = f"{self.origin} cell" if self.origin and self.origin != "accepted" else "accepted cell"
        if not self.substitutions:
            return f"reused {cell} #{self.entry_id} as it is (no model call)"
        changes = ", ".join(f"{new} <- {old}" for new, old in self.substitutions)
        return f"reused {cell} #{self.entry_id} with: {changes} (no model call)"


class Reuser:
    """Answers questions on one ``EHR`` from remembered cells (see the module doc).

    Entries come from a ``MemoryStore`` (``from_store``; re-read when the store
    changes) or are added directly with ``add``. Only trusted origins (accepted,
    seed, imported) are reused.
    """

    def __init__(self, ehr: Database, *, index: ReuseIndex | None = None, timeout: float = 30.0,
                 **index_options: Any) -> None:
        self.ehr = ehr
        self.index = index if index is not None else ReuseIndex(ehr, **index_options)  # an empty index is falsy
        self.timeout = timeout
        self.store: MemoryStore | None = None
        self.schema: str | None = None
        self.origins: tuple[str, ...] = TRUSTED
        self._store_state: tuple | None = None
        self._lock = threading.RLock()
        self._own_answers: dict[tuple[int, str], bool | None] = {}  # (entry, code) -> its own answer is zero
        self.calibration: Calibration = Calibration(self.index.threshold, self.index.margin)
        # thresholds given by the caller win over a saved calibration
        self._explicit = index is not None or "threshold" in index_options or "margin" in index_options

    @classmethod
    def from_store(cls, ehr: Database, store: MemoryStore, *, schema: str | None = None,
                   origins: Iterable[str] = TRUSTED, **options: Any) -> Reuser:
        """A reuser over ``store``'s entries of ``schema`` (default: the database's schema)."""
        reuser = cls(ehr, **options)
        reuser.store = store
        reuser.schema = schema if schema is not None else getattr(ehr, "schema", None)
        reuser.origins = tuple(origins)
        reuser.refresh()
        return reuser

    # -- memory ---------------------------------------------------------------------------

    def add(self, entry_id: int, question: str, code: str, *, origin: str = "accepted") -> None:
        self.index.add(entry_id, question, code, origin=origin)

    def add_many(self, entries: Iterable[tuple[int, str, str, str]]) -> None:
        self.index.add_many(entries)

    def refresh(self) -> None:
        """Bring the index up to date with the store (cheap when nothing changed)."""
        if self.store is None:
            return
        with self._lock:
            stats = self.store.stats()
            state = (stats.total, stats.last_updated_at)
            if state == self._store_state:
                return
            entries = [e for e in self.store.list(schema=self.schema) if e.origin in self.origins]
            wanted = {e.id: e for e in entries}
            known = self.index.templates
            for entry_id in [i for i in known if i not in wanted]:
                self.index.remove(entry_id)
            changed = [e for e in entries if e.id not in known or known[e.id].code != e.code
                       or known[e.id].question != e.question or known[e.id].origin != e.origin]
            self.index.add_many((e.id, e.question, e.code, e.origin) for e in changed)
            self._store_state = state
            saved = None if self._explicit else load_calibration(self.store, self.cells())
            if saved is not None:
                self.apply(saved)

    # -- calibration ----------------------------------------------------------------------

    def cells(self) -> list[tuple[int, str, str]]:
        """The remembered cells, as ``(entry id, question, code)`` in id order."""
        return sorted((t.entry_id, t.question, t.code) for t in self.index.templates.values())

    def calibrate(self, **options: Any) -> Calibration:
        """Cross-validate reuse inside this memory (``reuse.calibrate``) and apply the thresholds.
        With a store, the result is saved beside it, valid while its cells stay the same."""
        cells = self.cells()
        calibration = calibrate(self.ehr, cells, timeout=self.timeout, **options)
        self.apply(calibration)
        if self.store is not None:
            save_calibration(self.store, cells, calibration)
        return calibration

    def apply(self, calibration: Calibration) -> None:
        self.calibration = calibration
        self.index.threshold, self.index.margin = calibration.threshold, calibration.margin

    # -- answering ------------------------------------------------------------------------

    def answer(self, question: str) -> ReuseResult:
        """Answer ``question`` from memory, or abstain with the reason."""
        started = time.perf_counter()
        self.refresh()
        match = self.index.match(question)
        result = self._answer(question, match)
        result.margin = match.margin
        result.seconds = time.perf_counter() - started
        return result

    def _answer(self, question: str, match: MatchResult) -> ReuseResult:
        unanswerable = unanswerable_reason(question, match.detected, self.index, self.ehr)
        if unanswerable:
            return ReuseResult(question, "abstained", reason=unanswerable, score=match.score, unanswerable=True)
        if not match.accepted:
            reason = match.reason or "no remembered cell fits"
            unknown = unknown_words(question, self.index.known_words())
            if unknown:
                reason = f"{unknown_words_reason(unknown, self.index.detector.vocabulary.columns)}; {reason}"
            return ReuseResult(question, "abstained", reason=reason, score=match.score)
        best = match.best
        assert best is not None
        unknown = unknown_words(_without_values(question, [*match.detected.values, *best.values]),
                                self.index.known_words(stored_values=False))
        if unknown:
            # the rest of the words may match a cell, but what it asks for is recorded nowhere
            return ReuseResult(question, "abstained", score=match.score, entry_id=best.template.entry_id,
                               reason=unknown_words_reason(unknown))
        return self._run(question, best)

    def _run(self, question: str, candidate: Candidate) -> ReuseResult:
        template = candidate.template
        base = _CellFields(question=question, entry_id=template.entry_id, entry_question=template.question,
                           origin=template.origin, score=candidate.score)
        try:
            adaptation = adapt(template, candidate.values, self.index.detector.vocabulary)
            check_context(self.ehr, adaptation, template, candidate.values)
        except AdaptationError as exc:
            return ReuseResult(status="abstained", reason=f"cannot adapt cell #{template.entry_id}: {exc}", **base)
        moved = operator_role_moved(adaptation.substitutions)
        if moved:
            return ReuseResult(status="abstained", code=adaptation.code, reason=f"the question puts {moved!r} in "
                               f"another role than cell #{template.entry_id} gives it", **base)
        namespace = base_namespace(self.ehr, skills.namespace(self.ehr))  # as the cell ran in the notebook
        execution = Executor(self.ehr, timeout=self.timeout).run(adaptation.code, namespace)
        if not execution.ok:
            error = execution.error.describe() if execution.error else "unknown error"
            return ReuseResult(status="abstained", code=adaptation.code,
                               reason=f"the adapted cell #{template.entry_id} failed: {error}", **base)
        empty = "the cell sets no `answer`" if not execution.has_answer else is_empty_answer(execution.answer)
        if empty:
            return ReuseResult(status="abstained", code=adaptation.code,
                               reason=f"the adapted cell #{template.entry_id} found nothing ({empty})", **base)
        if adaptation.substitutions and zero_answer(execution.answer) and self._own_answer_is_zero(template) is False:
            # A value the cell's structure cannot find also gives 0: trust the 0 only when
            # every new value is found in the column it was put into.
            missing = unfound_values(self.ehr, template, candidate.values)
            if missing:
                return ReuseResult(status="abstained", code=adaptation.code, reason=(
                    f"the adapted cell #{template.entry_id} returns 0 where its own answer was not 0, and "
                    f"{'; '.join(missing)}"), **base)
        mismatch = shape_mismatch(question, execution.answer)
        if mismatch:
            return ReuseResult(status="abstained", code=adaptation.code,
                               reason=f"the adapted cell #{template.entry_id} {mismatch}", **base)
        return ReuseResult(status="answered", answer=execution.answer, code=adaptation.code,
                           substitutions=adaptation.substitutions,
                           namespace={k: v for k, v in namespace.items() if not k.startswith("__")}, **base)

    def _own_answer_is_zero(self, template: Template) -> bool | None:
        """Whether the remembered cell, run as it is, answers 0 (None when it does not run)."""
        key = (template.entry_id, template.code)
        if key not in self._own_answers:
            namespace = base_namespace(self.ehr, skills.namespace(self.ehr))
            execution = Executor(self.ehr, timeout=self.timeout).run(template.code, namespace)
            ok = execution.ok and execution.has_answer and not is_empty_answer(execution.answer)
            self._own_answers[key] = zero_answer(execution.answer) if ok else None
        return self._own_answers[key]


def unknown_words_reason(words: list[str], lookup_columns: Iterable[tuple[str, str]] | None = None) -> str:
    """Why ``words`` excuse a refusal, naming only where they were looked for: remembered
    questions, the schema (names and descriptions) and, when given, the values of the
    lookup columns (by their tables). The rest of the database's values were not searched."""
    said = ", ".join(repr(w) for w in words)
    reason = (f"the question asks about {said}, which is in no remembered question and no table or column "
              "name or description")
    tables = sorted({table for table, _ in lookup_columns or ()})
    if tables:
        shown = ", ".join(tables[:3]) + (f" and {len(tables) - 3} more" if len(tables) > 3 else "")
        reason += f", nor among the values of the lookup columns of {shown}"
    return reason


def zero_answer(answer: Any) -> bool:
    """True for a count or sum of nothing: the number 0, or a result whose every value is 0 or null."""
    if isinstance(answer, bool):
        return False
    if isinstance(answer, (int, float)):
        return answer == 0
    if isinstance(answer, pl.Series):
        answer = answer.to_frame()
    if isinstance(answer, pl.DataFrame) and answer.height and all(d.is_numeric() for d in answer.dtypes):
        return all(v is None or v == 0 for column in answer.iter_columns() for v in column)
    return False


def _without_values(question: str, values: Iterable[Value]) -> str:
    """The question with its detected values blanked (a misspelt drug name is a value, not an unknown word)."""
    characters = list(question)
    for value in values:
        characters[value.start:value.end] = " " * (value.end - value.start)
    return "".join(characters)


# -- does the result have the shape the question asks for? -----------------------------------

_ASKS_WHEN = re.compile(r"^\W*when\b|\bwhen (?:was|were|did|is|has|had|does|do|will)\b|"
                        r"\b(?:what|which) (?:time|date|day)\b|\bdate and time\b|\bdate of\b|\b(?:time|date)s?\b", re.I)
# "What was the last time ...", or a question opening on "First time patient ... was given":
# asks for the moment itself (the phrases below would otherwise strip the "time").
_ASKS_WHICH_TIME = re.compile(r"\bwhat (?:was|is|were) the (?:\w+ )?(?:first|last|\w+est) time\b|"
                              r"^\W*(?:the )?(?:first|last|\w+est) time\b(?!\s*,)", re.I)
# Phrases with "time" that do not ask for a time.
_NOT_ASKING_TIME = re.compile(r"\b(?:for )?the (?:\w+ )?(?:first|last|second|third|\w+est) time\b|"
                              r"\b(?:first|last|second|one|each|every|any|some) time\b|\btimes\b|"
                              r"\b(?:at|in) the same time\b|\bsame time\b", re.I)
_TIME_WORDS = re.compile(r"\b(?:when|time|times|date|dates|day|days|birth|born|death|died|dob|dod|hour|moment)\b",
                         re.I)
# A yes/no question may open with a time or place: "On 07/03/2100, did patient ... ?"
_YES_NO = re.compile(r"^\W*(?:[^,?]*,\s*)?(?:is|are|was|were|has|have|had|did|does|do)\b", re.I)
_HOW_MUCH = re.compile(r"\bhow (?:much|many)\b", re.I)
_WHETHER = re.compile(r"\b(?:whether|if|is there|are there|was there|were there)\b", re.I)


def shape_mismatch(question: str, answer: Any) -> str:
    """Why the answer's shape does not fit the question ("" when it fits): "when"
    questions need a time, yes/no questions a true/false, and the other way round."""
    temporal, boolean = _kinds(answer)
    asked = _NOT_ASKING_TIME.sub(" ", question)
    moment = bool(_ASKS_WHICH_TIME.search(question))
    if (moment or _ASKS_WHEN.search(asked)) and not temporal:
        return "returns no time, but the question asks when"
    if temporal == "only" and not moment and not _TIME_WORDS.search(asked):
        return "returns only times, but the question does not ask about a time"
    if _HOW_MUCH.search(question) and not _has_number(answer):
        return "returns no number, but the question asks how much or how many"
    yes_no = bool(_YES_NO.search(question))
    if yes_no and not boolean:
        return "returns no yes/no value, but the question asks yes or no"
    if boolean and not yes_no and not _WHETHER.search(question):
        return "returns yes/no, but the question does not ask yes or no"
    return ""


def _has_number(answer: Any) -> bool:
    """True when the answer holds a number: a numeric or duration column, or text that reads as
    numbers (doses are stored as text)."""
    if isinstance(answer, pl.LazyFrame):
        answer = answer.collect()
    if isinstance(answer, pl.Series):
        answer = answer.to_frame()
    if isinstance(answer, pl.DataFrame):
        for column in answer.iter_columns():
            if column.dtype.is_numeric() or column.dtype == pl.Duration:
                return True
            values = column.drop_nulls()
            if column.dtype == pl.String and values.len() and not values.str.strip_chars().cast(
                    pl.Float64, strict=False).null_count():
                return True
        return False
    if isinstance(answer, bool):
        return False
    if isinstance(answer, str):
        try:
            float(answer)
        except ValueError:
            return False
    return True


def _kinds(answer: Any) -> tuple[str, bool]:
    """(``"only"``/``"some"``/``""`` for time columns, whether it is one true/false value)."""
    import datetime as dt

    if isinstance(answer, pl.LazyFrame):
        answer = answer.collect()
    if isinstance(answer, pl.Series):
        answer = answer.to_frame()
    if isinstance(answer, pl.DataFrame):
        temporal = [dtype.is_temporal() for dtype in answer.dtypes]
        kind = "only" if temporal and all(temporal) else "some" if any(temporal) else ""
        boolean = answer.width == 1 and answer.height == 1 and answer.dtypes[0] == pl.Boolean
        return kind, boolean
    if isinstance(answer, (dt.datetime, dt.date)):
        return "only", False
    if isinstance(answer, bool):
        return "", True
    return "", False
