"""Typed values in a question: identifiers, vocabulary values, numbers and times.

``ValueDetector(ehr).detect(question)`` finds every value a question may carry, as
candidates that can overlap (a span can be a drug name and a lab label at once; a
number can be a patient id or a count):

* **vocabulary values**: word n-grams equal (up to case, spacing and punctuation)
  to a stored value of one of the dictionary/value columns (``VocabularyIndex``:
  the knowledge file's ``vocabulary`` columns plus the columns remembered code
  compares text with). Typed ``vocab:<table>.<column>``.
* **identifiers**: whole numbers stored in an identifier column (``*id`` columns the
  remembered code compares numbers with), checked against the database. Typed
  ``id:<column>``.
* **times**: see ``timeexpr``. Typed ``time:<kind>[:<unit>]``.
* **numbers**: other numbers, number words ("five") and decades ("30s"). Typed
  ``number``.
* **aggregates**: words naming a maximum, minimum, average or total. Typed
  ``op:agg``; they count as values only where the code names the aggregate.

Nothing here knows a benchmark: columns come from the schema's knowledge file and
from memory, values from the database.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ehr_magic.engines import QUERY_FAILURES
from ehr_magic.errors import EhrMagicError
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.knowledge.handle import Database
from ehr_magic.linking.large_vocabulary import LargeVocabulary
from ehr_magic.reuse.lexicon import OPERATORS
from ehr_magic.reuse.timeexpr import TimeValue, find_times, number_value, window
from ehr_magic.text import WORD, normalise, normalise_all

_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(s)?(?![\w]|\.\d)")
# Number words that stand alone as counts ("top five"); "one" and "a" are too often
# pronouns or articles to count as values on their own.
_COUNT_WORDS = re.compile(
    r"\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen|twenty)\b")
_AGGREGATE_RENDERINGS = {"max": {"sql": "MAX", "python": "max"}, "min": {"sql": "MIN", "python": "min"},
                         "avg": {"sql": "AVG", "python": "mean"}, "sum": {"sql": "SUM", "python": "sum"}}
MAX_VOCABULARY_VALUES = 500_000  # distinct values indexed per column at most
MAX_NGRAM = 40  # longest value (in words) looked for in a question


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int


def tokenize(text: str) -> list[Token]:
    """Lower-case alphanumeric words with their character spans (as ``normalise`` splits)."""
    lowered = text.lower()
    if len(lowered) != len(text):
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    return [Token(m.group(), m.start(), m.end()) for m in WORD.finditer(lowered)]


@dataclass(frozen=True)
class Value:
    """One typed value of a question.

    ``text`` is the question's wording, ``value`` the canonical form (the stored
    value for a vocabulary value, digits for numbers and ids, the expression for a
    time). ``renderings`` are the texts the value may take in code, by format
    name; ``key`` identifies its meaning (two values with equal type and key are
    the same value).
    """

    kind: str  # vocab | id | time | number | op
    type: str
    start: int
    end: int
    text: str
    value: str
    renderings: Mapping[str, str]
    key: tuple
    time: TimeValue | None = None
    alternatives: tuple[str, ...] = ()  # other stored values as close (vocabulary only)
    score: float = 100.0
    window: tuple = ()  # a time's normal form (``timeexpr.window``): what it selects, however worded

    @property
    def meaning(self) -> tuple:
        """What must be equal for a fixed value to be the same: a time's window, else type and key."""
        return ("time", self.window) if self.window else (self.type, self.key)

    @property
    def span(self) -> tuple[int, int]:
        return (self.start, self.end)

    def overlaps(self, other: Value | tuple[int, int]) -> bool:
        start, end = other.span if isinstance(other, Value) else other
        return self.start < end and start < self.end

    def covers(self, other: Value) -> bool:
        return self.start <= other.start and other.end <= self.end

    @property
    def hard(self) -> bool:
        """Ids, numbers and times must each be used by a reused cell (or equal)."""
        return self.kind in ("id", "number", "time")


@dataclass
class Detected:
    """The values found in one question."""

    question: str
    tokens: list[Token]
    values: list[Value]
    vocab: list[Value] = field(default_factory=list)
    unknown_ids: list[tuple[str, str]] = field(default_factory=list)  # (entity word, number) not found

    @property
    def hard(self) -> list[Value]:
        return [v for v in self.values if v.hard]

    def of_type(self, value_type: str) -> list[Value]:
        return [v for v in self.values if v.type == value_type]


class VocabularyIndex:
    """Exact (normalised) lookup of stored text values across many columns.

    ``add_column(table, column)`` indexes a column's distinct values as the database
    handle reads them for value linking (``ehr.vocabulary``: read once per database and
    column, normalised there, and shared with ``ehr.lookup``, ``ehr.find`` and table
    choice); ``find`` maps a normalised word sequence to the ``(table, column, value)``
    triples storing it. Thread-safe; columns load lazily.
    """

    def __init__(self, ehr: Database) -> None:
        self.ehr = ehr
        self._by_text: dict[str, list[tuple[str, str, str]]] = {}
        self._columns: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.longest = 1  # words of the longest value indexed

    @property
    def columns(self) -> set[tuple[str, str]]:
        return set(self._columns)

    def add_column(self, table: str, column: str) -> bool:
        """Index one text column (False when it does not exist or is not text)."""
        key = (table, column)
        if key in self._columns:
            return True
        try:
            columns = self.ehr.columns(table)
        except EhrMagicError:  # an unknown table is simply not indexed
            return False
        dtype = columns.get(column)
        if dtype is None or not dtype.upper().startswith(("VARCHAR", "TEXT", "STRING", "CHAR")):
            return False
        vocabulary = self.ehr.vocabulary(table, column)
        stored_values: Sequence[str]
        normalised_values: Sequence[str]
        if isinstance(vocabulary, LargeVocabulary):
            # a column of millions of values (a full OMOP vocabulary) keeps them in one Arrow
            # column, without normal forms: the first ones are normalised here, as linking would
            stored_values = vocabulary.values.series.head(MAX_VOCABULARY_VALUES).to_list()
            normalised_values = normalise_all(stored_values).to_list()
        else:
            stored_values, normalised_values = vocabulary.values[:MAX_VOCABULARY_VALUES], vocabulary.normalised
        entries: dict[str, list[tuple[str, str, str]]] = {}
        longest = 1
        for stored, text in zip(stored_values, normalised_values):
            if len(text) < 2 or text.replace(" ", "").isdigit():
                continue
            entries.setdefault(text, []).append((table, column, stored))
            longest = max(longest, text.count(" ") + 1)
        with self._lock:
            if key in self._columns:
                return True
            for text, found in entries.items():
                self._by_text.setdefault(text, []).extend(found)
            self._columns.add(key)
            self.longest = min(MAX_NGRAM, max(self.longest, longest))
        return True

    def add_columns(self, pairs: Iterable[tuple[str, str]]) -> None:
        for table, column in pairs:
            self.add_column(table, column)

    def words(self) -> set[str]:
        """Every word of every indexed value."""
        with self._lock:
            return {word for text in self._by_text for word in text.split()}

    def find(self, text: str) -> list[tuple[str, str, str]]:
        """Stored ``(table, column, value)`` whose normalised value equals ``text``'s."""
        return self._by_text.get(normalise(text), [])

    def find_normalised(self, normalised_text: str) -> list[tuple[str, str, str]]:
        return self._by_text.get(normalised_text, [])

    def exists(self, table: str, column: str, value: str) -> bool:
        return any(t == table and c == column and v == value for t, c, v in self.find(value))


def vocab_type(table: str, column: str) -> str:
    return f"vocab:{table}.{column}"


def split_vocab_type(value_type: str) -> tuple[str, str]:
    table, _, column = value_type.removeprefix("vocab:").partition(".")
    return table, column


class ValueDetector:
    """Finds typed values in questions for one ``EHR``.

    ``id_columns`` maps an identifier column name (``subject_id``) to the tables it
    is checked in; ``entity_words`` maps a word that introduces an identifier in
    questions ("patient") to that column, so a number after it that the database
    does not hold can be reported. Both are learned from memory by the reuse index.
    """

    def __init__(self, ehr: Database, vocabulary: VocabularyIndex | None = None) -> None:
        self.ehr = ehr
        self.clock = ehr.clock
        self.vocabulary = vocabulary or VocabularyIndex(ehr)
        self.id_columns: dict[str, list[str]] = {}
        self.entity_words: dict[str, str] = {}
        self._exists_cache: dict[tuple[str, str], bool] = {}
        self._lock = threading.Lock()

    # -- identifiers ---------------------------------------------------------------------

    def add_id_column(self, column: str, table: str) -> None:
        tables = self.id_columns.setdefault(column, [])
        if table not in tables:
            tables.append(table)
            tables.sort(key=self._table_size)

    def _table_size(self, table: str) -> int:
        try:
            return int(self.ehr.count(table))
        except QUERY_FAILURES:  # a table we cannot count goes last
            return 1 << 62

    def id_exists(self, column: str, number: str) -> bool:
        """True when some table using ``column`` as an identifier stores ``number``."""
        key = (column, number)
        cached = self._exists_cache.get(key)
        if cached is not None:
            return cached
        found = False
        for table in self.id_columns.get(column, []):
            frame = self.ehr.sql(f"SELECT 1 FROM {quote(table)} WHERE {quote(column)} = ? LIMIT 1", [int(number)])
            if frame.height:
                found = True
                break
        with self._lock:
            self._exists_cache[key] = found
        return found

    # -- detection -----------------------------------------------------------------------

    def detect(self, question: str, *, vocab_types: set[str] | None = None) -> Detected:
        """All candidate values of ``question`` (``vocab_types`` limits the vocabulary columns)."""
        tokens = tokenize(question)
        values: list[Value] = []
        times = find_times(question)
        for t in times:
            values.append(Value("time", t.type, t.start, t.end, question[t.start:t.end], t.text.lower(),
                                {} if self.clock is None and t.needs_clock else t.renderings(self.clock),
                                t.key, time=t, window=window(t, self.clock)))
        unknown: list[tuple[str, str]] = []
        for match in _NUMBER.finditer(question):
            start, end = match.span()
            if any(t.start <= start and end <= t.end for t in times):
                continue
            digits, decade = match.group(1), match.group(2)
            if decade:
                if not digits.isdigit() or int(digits) % 10:
                    continue
                low = int(digits)
                values.append(Value("number", "number:decade", start, end, match.group(), digits,
                                    {"lo": str(low), "hi": str(low + 9)}, ("decade", low)))
                continue
            number = _number_text(digits)
            matched = False
            if digits.isdigit():
                for column in self.id_columns:
                    if self.id_exists(column, digits):
                        values.append(Value("id", f"id:{column}", start, end, digits, str(int(digits)),
                                            {"n": str(int(digits))}, ("id", column, int(digits))))
                        matched = True
                if not matched:
                    word = _word_before(question, start)
                    if word in self.entity_words:
                        unknown.append((word, digits))
            if not matched:  # a stored identifier is not also a count or a measurement
                values.append(Value("number", "number", start, end, digits, number, {"n": number},
                                    ("number", number)))
        for match in _COUNT_WORDS.finditer(question.lower()):
            start, end = match.span()
            if any(t.start <= start and end <= t.end for t in times):
                continue
            number = str(number_value(match.group()))
            values.append(Value("number", "number", start, end, question[start:end], number, {"n": number},
                                ("number", number)))
        for i, token in enumerate(tokens):
            canonical = OPERATORS.get(token.text)
            if canonical not in _AGGREGATE_RENDERINGS:
                continue
            following = tokens[i + 1].text if i + 1 < len(tokens) else ""
            if canonical == "sum" and following in ("number", "count", "times"):
                continue  # "the total number of" counts, it does not add up
            values.append(Value("op", "op:agg", token.start, token.end, question[token.start:token.end], canonical,
                                _AGGREGATE_RENDERINGS[canonical], ("op", canonical)))
        vocab = self._vocabulary_values(question, tokens, vocab_types)
        values.extend(vocab)
        values.sort(key=lambda v: (v.start, -(v.end - v.start)))
        return Detected(question, tokens, values, vocab, unknown)

    def _vocabulary_values(self, question: str, tokens: list[Token], types: set[str] | None) -> list[Value]:
        found: list[Value] = []
        words = [t.text for t in tokens]
        longest = self.vocabulary.longest
        for i in range(len(tokens)):
            for j in range(i + 1, min(len(tokens), i + longest) + 1):
                hits = self.vocabulary.find_normalised(" ".join(words[i:j]))
                if not hits:
                    continue
                by_type: dict[str, list[str]] = {}
                for table, column, stored in hits:
                    by_type.setdefault(vocab_type(table, column), []).append(stored)
                start, end = tokens[i].start, tokens[j - 1].end
                surface = question[start:end]
                for value_type, stored_values in by_type.items():
                    if types is not None and value_type not in types:
                        continue
                    chosen = _closest_spelling(surface, stored_values)
                    others = tuple(v for v in stored_values if v != chosen)
                    found.append(Value("vocab", value_type, start, end, surface, chosen, {"value": chosen},
                                       ("vocab", value_type, chosen), alternatives=others))
        return found


def _closest_spelling(surface: str, stored: list[str]) -> str:
    """Of stored values equal up to case/punctuation, the one spelled most like the question."""
    if len(stored) == 1:
        return stored[0]
    for candidate in stored:
        if candidate == surface:
            return candidate
    lowered = surface.lower()
    for candidate in stored:
        if candidate.lower() == lowered:
            return candidate
    return sorted(stored)[0]


def _number_text(digits: str) -> str:
    if "." in digits:
        return digits.rstrip("0").rstrip(".") if digits.rstrip("0").rstrip(".") else "0"
    return str(int(digits))


def _word_before(text: str, position: int) -> str:
    match = re.search(r"([A-Za-z]+)\W*$", text[:position])
    return match.group(1).lower() if match else ""
