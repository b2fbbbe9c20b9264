"""Value linking before the first model call: the stored spellings of what a question says.

A model that does not know how a term is stored spends a whole call looking it up ('Hb' is
'hemoglobin' here, 'Hemoglobin' there, '51222' in the events). ``link_question`` finds, in the
milliseconds before the first call, the stored values of the lookup columns
(``ehr.lookup_columns()``: names of labs, drugs, diagnoses, units, care units) that the
question's words name, two ways, on each column's word index (``Vocabulary``, the index
``ehr.lookup`` and ``ehr.find`` use):

- a whole stored value said in the question as a phrase ('potassium chloride', 'emergency room');
- a run of the question's content words held inside stored values ('systolic blood pressure' in
  'arterial blood pressure systolic', 'weight' in 'daily weight'), ranked by how much of each
  value the words say, at least ``MIN_SHARE`` of it;

and clinical shorthand ('Hb', 'SpO2', 'ER', 'Lasix') through its expansions in the clinical
vocabulary, as ``ehr.find`` does: first a value holding both the meaning and the shorthand ('medical
intensive care unit (micu)' for MICU), then one the meaning says whole, or at least half of it (and
a spelled-out word stored only as its abbreviation: 'intravenously', route 'IV'). Words found inside
a longer run that is found as well give way to it ('potassium' inside 'potassium chl 40 meq / 1000
ml d5ns'); one word alone must say more of a value, and never a word of the schema's own names
('route', 'age': a column, not a value; 'output', the start of outputevents), nor a period that
groups the answer ('daily' of 'daily maximum'). A value of a dictionary (a table whose rows are not
patient-level: it joins no patient or visit table) comes with the key of its rows and the row's
short categorical columns (an item's id and the table that records it).
What is found is a candidate for the model to check, never a fact.

Bounds: per question and column, a dictionary look-up per word and numpy work on the postings
of the words found; a column of more than ``MAX_VALUES`` distinct values is never indexed and is
named in ``Linking.skipped`` instead. A question with no stored word links nothing.
"""

from __future__ import annotations

import functools
import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import polars as pl

from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.linking.clinical_vocabulary import clinical_vocabulary, written_as_shorthand
from ehr_magic.linking.large_vocabulary import LargeVocabulary
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.linking.names import words as name_words
from ehr_magic.linking.warehouse_vocabulary import warehouse_abbreviations
from ehr_magic.safety.tables import Tables
from ehr_magic.text import FUNCTION_WORDS, NUMBER_WORDS, stem

__all__ = ["DescribedTable", "Description", "Linking", "LinkedTerm", "QuestionLinker", "StoredValue",
           "VocabularyDatabase", "link_question", "MAX_VALUES"]

MAX_VALUES = 1_000_000  # distinct values of a lookup column, at most, to index it for linking
MIN_SHARE = 0.34  # of a stored value's word weight, the least a run of the question's words must say
_ONE_WORD_SHARE = 0.4  # the least one word alone must say
_MEANING_SHARE = 0.5  # the least a part of a shorthand's meaning must say ('ICD': not every 'diseases of ...')
PER_TERM = 4  # stored values listed per term
MAX_TERMS = 6
MAX_ROWS = 3  # rows of one dictionary value whose keys are shown
CONTEXT_VALUES = 40  # a column of a dictionary with at most this many distinct values says what a row is
CONTEXT_COLUMNS = 2
OPAQUE_KEY = 16  # mean characters of a dictionary's key past which its rows are not shown
_SPINE_SHARE = 0.4  # a table joined by this share of the others holds patients or visits
_MAX_FULL = 200  # whole values said by one question in one column, at most, checked as phrases
_EXPANSIONS = 2  # meanings of a shorthand searched
_NAME_START = 4  # letters, at least, of a question word that starts a schema name run together ('input')
_RUN = 6  # content words of one run searched, at most
_TOKEN = re.compile(r"[A-Za-z0-9]+")
_NAME_WORD = re.compile(r"[A-Za-z]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SAME_NAME_JOIN = re.compile(r"^\s*\w+\s+ON\s+(\w+)\s*$", re.IGNORECASE)
# Words that say what kind of question it is, not what is stored.
_STOP = frozenset("""
a about above after again against all also am an and any are as at be been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers him his
how i if in into is it its itself just me more most my no nor not now of off on once only or other our out over
own same she should so some such than that the their them then there these they this those through to too under
until up very was we were what when where which while who whom why will with would you your s
patient patients value values time times first last many much number total count show list give tell find
ever still yet since ago today yesterday year years month months week weeks day days hour hours minute minutes
named name called record records recorded data database table tables row rows column columns one two three
average maximum minimum max min sum change changes difference compared measured measurement measurements
level levels rate rates result results visit visits hospital hospitals icu stay stays encounter encounters admission
admissions admitted current currently latest earliest recent previous next second third entire whole past prior
later earlier within every per please kindly provide let know show tell get got date dates
prescribed given received receive diagnosed diagnosis diagnoses procedure procedures drug drugs medication
medications lab labs test tests event events often frequent frequently common commonly usually typically
us low lower lowest high higher highest greater less least above below normal
""".split()) | NUMBER_WORDS
# A period adverb before a statistic says how the answer is grouped ('daily maximum', 'monthly
# average'), not a stored value: not the frequency 'DAILY' of a prescription, nor 'daily weight'.
_PERIODS = frozenset("hourly daily weekly monthly quarterly yearly annual annually".split())
_STATISTICS = frozenset("""
average averages mean median minimum min lowest maximum max highest peak total totals sum count counts number
amount amounts summary records rate
""".split())
# A span before 'of' asks for a duration worked out from times ('length of stay', 'duration of the
# infusion'), not for a stored item named so (a wound's 'Site Length #1').
_SPANS = frozenset("length lengths duration durations".split())


Row = tuple[tuple[str, Any], ...]  # a dictionary row as (column, value) pairs


@dataclass(frozen=True)
class StoredValue:
    """One stored value a term may mean, with its dictionary rows: (column, value) pairs, the key first."""

    table: str
    column: str
    value: str
    score: float  # 100: said whole; less: the share of the value the words say
    rows: tuple[tuple[tuple[str, str], ...], ...] = ()
    more_rows: int = 0
    key: str | None = None  # the key column, first in each row


@dataclass(frozen=True)
class LinkedTerm:
    """Words of the question and the stored values they may mean, best first."""

    text: str  # as the question writes them
    values: tuple[StoredValue, ...]
    more: int = 0  # further stored values that match as well, not listed
    meaning: str = ""  # the expansion searched, for shorthand ('hemoglobin' for 'Hb')
    more_elsewhere: bool = False  # some of those are in another column than the first value's


@dataclass(frozen=True)
class Linking:
    """What a question's words may mean in this database."""

    terms: tuple[LinkedTerm, ...] = ()
    skipped: tuple[tuple[str, str, int], ...] = ()  # (table, column, distinct values) not searched

    @property
    def empty(self) -> bool:
        return not self.terms and not self.skipped

    def values(self) -> list[StoredValue]:
        return [v for term in self.terms for v in term.values]


@dataclass
class _Found:
    start: int  # token positions of the question, [start, end)
    end: int
    table: str
    column: str
    index: int  # of the value in the column's vocabulary
    score: float
    meaning: str = ""


class _ColumnWords:
    """One column's word index with what linking adds: words per value and each value's weight."""

    def __init__(self, vocabulary: Vocabulary | LargeVocabulary) -> None:
        self.vocabulary = vocabulary
        self.word_index = {word: i for i, word in enumerate(vocabulary.words)}
        if isinstance(vocabulary, LargeVocabulary):  # a column past LARGE values: its postings are one array
            counts, flat = vocabulary.postings.counts(), vocabulary.postings.flat.astype(np.int64)
        else:
            counts = np.asarray([len(p) for p in vocabulary.postings], dtype=np.int64)
            flat = np.concatenate(vocabulary.postings) if len(counts) else np.zeros(0, dtype=np.int64)
        size = len(vocabulary.values)
        self.mass = np.bincount(flat, weights=np.repeat(vocabulary.idf, counts), minlength=size)
        # the words of each value, value by value (the postings turned around)
        order = np.argsort(flat, kind="stable")
        self.value_words = np.repeat(np.arange(len(counts), dtype=np.int64), counts)[order]
        self.offsets = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=size))]).astype(np.int64)

    def said_whole(self, words: set[str], content: set[str]) -> np.ndarray:
        """Indexes of the values holding a word of ``content`` all of whose words are in ``words``."""
        chosen = [self.word_index[w] for w in content if w in self.word_index]
        if not chosen:
            return np.zeros(0, dtype=np.int64)
        candidates = np.unique(np.concatenate([self.vocabulary.postings[i] for i in chosen]))
        asked = np.zeros(len(self.vocabulary.words), dtype=bool)
        asked[[self.word_index[w] for w in words if w in self.word_index]] = True
        starts, lengths = self.offsets[candidates], np.diff(self.offsets)[candidates]
        firsts = np.cumsum(lengths) - lengths
        positions = np.arange(int(lengths.sum())) - np.repeat(firsts, lengths) + np.repeat(starts, lengths)
        unsaid = np.add.reduceat((~asked[self.value_words[positions]]).astype(np.int64), firsts)
        return candidates[unsaid == 0]

    def holding(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Indexes of the values holding every one of ``words``, and the share of each value's
        weight those words carry."""
        hits = []
        for word in dict.fromkeys(words):
            if word not in self.word_index:
                return np.zeros(0, dtype=np.int64), np.zeros(0)
            hits.append(self.word_index[word])
        postings = sorted((self.vocabulary.postings[i] for i in hits), key=len)
        found = postings[0]
        for other in postings[1:]:
            found = np.intersect1d(found, other, assume_unique=True)
            if not found.size:
                break
        weight = float(sum(self.vocabulary.idf[i] for i in hits))
        return found, weight / self.mass[found] if found.size else np.zeros(0)


@dataclass
class _Dictionary:
    """How the rows of a dictionary table are shown: its key, then a few short categorical columns."""

    key: str | None
    names: tuple[str, ...]  # its lookup columns: each names the row
    context: tuple[str, ...]


@dataclass
class _Token:
    text: str
    word: str
    start: int  # character offsets in the question
    end: int
    # says how the answer is worked out, not what is stored: a period adverb that groups it ('daily'
    # of 'daily maximum'), a span of time ('length' of 'length of stay')
    worked_out: bool = False


# Linking sits beside knowledge, which imports it, so it names what it reads of the handle and
# of its knowledge here; ``ehr_magic.knowledge.handle.Database`` extends ``VocabularyDatabase``.


class DescribedTable(Protocol):
    """What linking reads of a described table (``ehr_magic.knowledge.model.TableInfo`` is one)."""

    @property
    def key(self) -> str | None: ...

    @property
    def joins(self) -> tuple[str, ...]: ...

    @property
    def join_targets(self) -> tuple[str, ...]: ...


class Description(Protocol):
    """What linking reads of a database's knowledge (``ehr_magic.knowledge.model.Knowledge`` is one)."""

    @property
    def tables(self) -> Mapping[str, DescribedTable]: ...


class VocabularyDatabase(Tables, Protocol):
    """An open database as question linking sees it (``ehr_magic.db.EHR`` is one): its lookup
    columns with their indexed values, row counts and what its knowledge says of joins."""

    @property
    def knowledge(self) -> Description | None: ...

    def count(self, table: str) -> int: ...

    def indexed_rows(self, table: str) -> int: ...

    def lookup_columns(self) -> list[tuple[str, str]]: ...

    def vocabulary(self, table: str, column: str) -> Vocabulary | LargeVocabulary: ...

    def index_columns(self, columns: Sequence[tuple[str, str]]) -> None: ...


@functools.lru_cache(maxsize=8192)
@functools.lru_cache(maxsize=4096)
def _table_stems(table: str) -> frozenset[str]:
    """The stems of a table's name words, words run together cut apart (``d_labitems`` -> lab,
    items) and warehouse abbreviations spelled out (``LAB_RSLT`` -> lab, result), to tell which of
    the tables storing a value the question speaks of."""
    words = [w for w in name_words(table) if w.isalpha()]
    spelled = [part for word in words for part in (word, *warehouse_abbreviations().words(word))]
    return frozenset(stem(word) for word in spelled if word not in FUNCTION_WORDS)


class QuestionLinker:
    """Links questions on one database; holds its per-column word indexes (built on first use)."""

    def __init__(self, ehr: VocabularyDatabase, *, max_values: int = MAX_VALUES) -> None:
        # A weak reference: the linker is the value of a weak-keyed map whose key is ``ehr``, and a
        # strong one would keep every database (and its value indexes) alive for the process's life.
        self._ehr = weakref.ref(ehr)
        self.max_values = max_values
        self._lock = threading.Lock()
        self._columns: dict[tuple[str, str], _ColumnWords | None] = {}
        self._skipped: dict[tuple[str, str], int] = {}
        self._dictionaries: dict[str, _Dictionary | None] | None = None
        self._rows: dict[tuple[str, str], pl.DataFrame | None] = {}
        self._names: frozenset[str] | None = None

    @property
    def ehr(self) -> VocabularyDatabase:
        ehr = self._ehr()
        if ehr is None:
            raise ReferenceError("the database of this linker is closed and gone")
        return ehr

    def link(self, question: str) -> Linking:
        """The stored values ``question``'s words may mean (see the module docstring)."""
        matches = list(_TOKEN.finditer(question))
        lowered = [m.group().lower() for m in matches]
        following = [*lowered[1:], ""]
        tokens = [_Token(m.group(), word, m.start(), m.end(), (word in _PERIODS and then in _STATISTICS)
                         or (word in _SPANS and then == "of"))
                  for m, word, then in zip(matches, lowered, following)]
        words = [t.word for t in tokens]
        lookup_columns = self.ehr.lookup_columns()
        unindexed = [pair for pair in lookup_columns if pair not in self._columns]
        if unindexed:  # read together, not one by one (thousands in a warehouse)
            self.ehr.index_columns(unindexed)
        columns = [(t, c, index) for (t, c) in lookup_columns if (index := self._index(t, c)) is not None]
        found: list[_Found] = []
        for table, column, index in columns:
            found += self._whole(words, tokens, table, column, index)
        for start, end in _runs(tokens, question):
            found += self._inside(words, start, end, columns)
        for position, token in enumerate(tokens):
            for meaning in _shorthand(token, question)[:_EXPANSIONS]:
                found += self._meant(meaning, position, columns, written=token.word)
        covered = {p for item in found for p in range(item.start, item.end)}
        for position, token in enumerate(tokens):  # a spelled-out word stored as its abbreviation only
            if position not in covered and _content(token):
                found += self._abbreviated(token, position, columns)
        terms = self._terms(found, tokens, question)
        skipped = tuple(sorted((t, c, n) for (t, c), n in self._skipped.items()))
        return Linking(terms, skipped)

    # -- finding ----------------------------------------------------------------------------

    def _whole(self, words: list[str], tokens: list[_Token], table: str, column: str,
               index: _ColumnWords) -> list[_Found]:
        """Values said whole, as a phrase of the question, that hold a word worth linking."""
        found = []
        said = index.said_whole(set(words), {t.word for t in tokens if _content(t)})
        if said.size > _MAX_FULL:  # the weightiest first: a long title before a one-word category
            said = said[np.argsort(-index.mass[said], kind="stable")[:_MAX_FULL]]
        for i in said.tolist():
            value_words = index.vocabulary.normalised[i].split()
            start = _phrase(words, value_words)
            if start is None or not any(_content(tokens[start + k]) for k in range(len(value_words))):
                continue
            found.append(_Found(start, start + len(value_words), table, column, i, 100.0))
        return found

    def _inside(self, words: list[str], start: int, end: int,
                columns: list[tuple[str, str, _ColumnWords]], *, score: float = 95.0,
                meaning: str = "", span: tuple[int, int] | None = None) -> list[_Found]:
        """Values holding the longest sub-run of words[start:end] that any value holds (then the
        rest of the run, left and right, the same way)."""
        for length in range(end - start, 0, -1):
            for first in range(start, end - length + 1):
                part = words[first:first + length]
                # one word alone names a value less surely: it must say more of it, and not be a word of
                # the schema's own names ('route', 'age', 'fluid' ask for a column, not a stored value)
                least = MIN_SHARE if length > 1 else _ONE_WORD_SHARE
                if span is not None:
                    least = _MEANING_SHARE
                elif length == 1 and self._names_schema(part[0]):
                    continue
                found = []
                for table, column, index in columns:
                    values, shares = index.holding(part)
                    for i, share in zip(values.tolist(), shares.tolist()):
                        if share >= least:
                            where = span or (first, first + length)
                            found.append(_Found(where[0], where[1], table, column, i, score * min(share, 1.0),
                                                meaning))
                if found:
                    if span is not None:  # a shorthand's meaning: its best part is enough
                        return found
                    return (found + self._inside(words, start, first, columns)
                            + self._inside(words, first + length, end, columns))
        return []

    def _meant(self, meaning: str, position: int, columns: list[tuple[str, str, _ColumnWords]],
               written: str = "") -> list[_Found]:
        """Values a shorthand's expansion names: holding it and the shorthand itself ('medical intensive
        care unit (micu)' for MICU), said whole by it, else holding its words."""
        words = meaning.split()
        found = []
        if written and written not in words:
            for table, column, index in columns:
                values, shares = index.holding([*words, written])
                # most of the value: a name with its abbreviation, not a list of synonyms that mentions both
                found += [_Found(position, position + 1, table, column, i, 99.0, meaning)
                          for i, share in zip(values.tolist(), shares.tolist()) if share >= _MEANING_SHARE]
            if found:
                return found
        for table, column, index in columns:
            for i in index.said_whole(set(words), set(words) - _STOP).tolist():
                value_words = index.vocabulary.normalised[i].split()
                # all of the meaning, or a part that says at least half of it ('unit' is not MICU)
                if _phrase(words, value_words) is not None and len(value_words) >= _MEANING_SHARE * len(words):
                    found.append(_Found(position, position + 1, table, column, i,
                                        99.0 * len(value_words) / len(words), meaning))
        if found:
            return found
        found = self._inside(words, 0, len(words), columns, score=94.0, meaning=meaning, span=(position, position + 1))
        if found:
            return found
        # a name that begins with the meaning, in a dictionary that writes what was measured first and then
        # how ('Thyrotropin [Units/volume] in Serum or Plasma' for TSH)
        head = " ".join(words) + " "
        for table, column, index in columns:
            values, _ = index.holding(words)
            beginning = [i for i in values.tolist() if index.vocabulary.normalised[i].startswith(head)]
            # equally sure, so the shortest names: the test itself before its variants
            beginning.sort(key=lambda i: len(index.vocabulary.normalised[i]))
            found += [_Found(position, position + 1, table, column, i, 94.0 * _MEANING_SHARE, meaning)
                      for i in beginning[:PER_TERM]]
        return found

    def _abbreviated(self, token: _Token, position: int, columns: list[tuple[str, str, _ColumnWords]]) -> list[_Found]:
        """Values equal to the abbreviation of a spelled-out word ('intravenous', 'intravenously'
        -> 'IV'), when the word itself found nothing."""
        terms = clinical_vocabulary().terms
        word = token.word
        abbreviations = terms.get(word) or (terms.get(word[:-2]) if word.endswith("ly") else None) or ()
        found = []
        for abbreviation in abbreviations:
            for table, column, index in columns:
                for i in index.said_whole({abbreviation}, {abbreviation}).tolist():
                    found.append(_Found(position, position + 1, table, column, i, 97.0, abbreviation))
        return found

    # -- choosing ---------------------------------------------------------------------------

    def _terms(self, found: list[_Found], tokens: list[_Token], question: str) -> tuple[LinkedTerm, ...]:
        """Found values grouped by the words that found them; words inside a longer run that found
        values too give way to it; each group's best few, the best groups."""
        best: dict[tuple[str, str, int], _Found] = {}
        for item in found:
            key = (item.table, item.column, item.index)
            if key not in best or ((item.score, item.end - item.start)
                                   > (best[key].score, best[key].end - best[key].start)):
                best[key] = item
        spans: dict[tuple[int, int], list[_Found]] = {}
        for item in best.values():
            spans.setdefault((item.start, item.end), []).append(item)
        kept = {span: items for span, items in spans.items()
                if not any(o != span and o[0] <= span[0] and span[1] <= o[1] for o in spans)}
        ranked = sorted(kept.items(), key=lambda entry: -max(i.score for i in entry[1]))[:MAX_TERMS]
        terms = []
        said = {stem(t.word) for t in tokens if t.word not in FUNCTION_WORDS}
        for (start, end), items in sorted(ranked, key=lambda entry: entry[0]):
            # equal values first in the tables the question names ('lab result' -> lab_rslt's status
            # 'final', not adt_evnt's), then the shorter, then in the bigger table (where a drug is
            # given, not the few rows of allergies to it), then by name
            items.sort(key=lambda i: (-i.score, -len(_table_stems(i.table) & said), len(self._value(i)),
                                      -self.ehr.indexed_rows(i.table), i.table, i.column, self._value(i)))
            # the best of each place first, then the next best of each: a term stored in several
            # columns shows each of them before a second value of any
            rank: dict[tuple[str, str], int] = {}
            order: list[tuple[int, bool, int]] = []
            for item in items:
                place = (item.table, item.column)
                rank[place] = rank.get(place, -1) + 1
                order.append((rank[place], item.score < 99, len(order)))
            items = [items[k] for *_, k in sorted(order)]
            values: list[StoredValue] = []
            seen: dict[tuple[str, tuple[str, ...]] | None, int] = {}
            repeated = consumed = 0
            for item in items:  # a row found through two of its names is listed once, by its first name
                consumed += 1
                stored = self._stored(item)
                row = (stored.table, self._row_keys(stored)) if stored.rows and stored.key else None
                if row is not None and row in seen:
                    repeated += 1
                    earlier = values[seen[row]]
                    if self._name_order(stored) < self._name_order(earlier):
                        values[seen[row]] = stored
                    continue
                seen[row] = len(values)
                values.append(stored)
                if len(values) == PER_TERM:
                    break
            text = question[tokens[start].start:tokens[end - 1].end]
            meaning = next((i.meaning for i in items if i.meaning), "")
            first = (values[0].table, values[0].column) if values else None
            elsewhere = any((i.table, i.column) != first for i in items[consumed:])
            terms.append(LinkedTerm(text, tuple(values), len(items) - len(values) - repeated, meaning, elsewhere))
        return tuple(terms)

    @staticmethod
    def _row_keys(stored: StoredValue) -> tuple[str, ...]:
        return tuple(row[0][1] for row in stored.rows if row)

    def _name_order(self, stored: StoredValue) -> int:
        shown = self._dictionary(stored.table)
        names = [c for t, c in self.ehr.lookup_columns() if t == stored.table]
        return names.index(stored.column) if shown is not None and stored.column in names else len(names)

    def _value(self, item: _Found) -> str:
        words = self._columns[(item.table, item.column)]
        assert words is not None, "a value was found in a column that was never read"
        return words.vocabulary.values[item.index]

    def _stored(self, item: _Found) -> StoredValue:
        value = self._value(item)
        rows, more = self._dictionary_rows(item.table, item.column, value)
        shown = self._dictionary(item.table)
        return StoredValue(item.table, item.column, value, round(item.score, 1), rows, more,
                           shown.key if shown is not None and shown.key != item.column else None)

    # -- the database -----------------------------------------------------------------------

    def _names_schema(self, word: str) -> bool:
        """Whether ``word`` is a word of the schema's names, or starts one run together ('output' of
        outputevents, 'ingredient' of ingredientevents): it asks for that table or column."""
        names = self._schema_words()
        return word in names or (len(word) >= _NAME_START and any(n.startswith(word) for n in names))

    def _schema_words(self) -> frozenset[str]:
        """The words of the tables' and columns' names (``labevents``, ``anchor_age``, ``LabTestKey``)."""
        if self._names is None:
            words: set[str] = set()
            for table in self.ehr.tables():
                for name in (table, *self.ehr.columns(table)):
                    words.update(w.lower() for w in _NAME_WORD.findall(_CAMEL.sub(" ", name)))
            self._names = frozenset(words)
        return self._names

    def _index(self, table: str, column: str) -> _ColumnWords | None:
        key = (table, column)
        if key in self._columns:
            return self._columns[key]
        with self._lock:
            if key not in self._columns:
                size = self._distinct(table, column)
                if size > self.max_values:
                    self._skipped[key] = size
                    self._columns[key] = None
                else:
                    self._columns[key] = _ColumnWords(self.ehr.vocabulary(table, column))
        return self._columns[key]

    def _distinct(self, table: str, column: str) -> int:
        """Distinct values of the column; counted only when the table has more rows than the limit."""
        if self.ehr.indexed_rows(table) <= self.max_values:
            return 0
        return int(self.ehr.sql(f"SELECT count(DISTINCT {quote(column)}) AS n FROM {quote(table)}").item())

    def _dictionary_rows(self, table: str, column: str, value: str) -> tuple[tuple[Row, ...], int]:
        """The key and context columns of the rows holding ``value`` (dictionary tables only):
        up to ``MAX_ROWS`` of them and how many more."""
        frame = self._rows_of(table, column)
        if frame is None:
            return (), 0
        values = frame.get_column("__value")
        low = int(values.search_sorted(value, side="left"))
        high = int(values.search_sorted(value, side="right"))
        names = frame.columns[1:]
        rows = tuple(tuple((c, v) for c, v in zip(names, row) if v is not None and v != value)
                     for row in frame.slice(low, min(high - low, MAX_ROWS)).select(names).iter_rows())
        return rows, max(0, high - low - MAX_ROWS)

    def _rows_of(self, table: str, column: str) -> pl.DataFrame | None:
        """The rows of a dictionary table as (value, key, context...), sorted by value: read in one
        query on first use, then searched by binary search."""
        key = (table, column)
        if key not in self._rows:
            shown = self._dictionary(table)
            names = []
            if shown is not None:  # the key, another name of the row ('o2 saturation pulseoxymetry' for
                # 'spo2'), then its short categorical columns
                names = ([shown.key] if shown.key else []) + [c for c in shown.names if c != column][:1] \
                    + [c for c in shown.context if c != column][:CONTEXT_COLUMNS]
            frame = None
            if names:
                frame = self.ehr.sql(
                    f'SELECT DISTINCT CAST({quote(column)} AS VARCHAR) AS "__value", '
                    + ", ".join(f"CAST({quote(c)} AS VARCHAR) AS {quote(c)}" for c in names)
                    + f" FROM {quote(table)} WHERE {quote(column)} IS NOT NULL").sort(pl.all())
            self._rows[key] = frame
        return self._rows[key]

    def _dictionary(self, table: str) -> _Dictionary | None:
        """How a dictionary table's rows are shown; None for a table of patient-level rows."""
        if self._dictionaries is None:
            self._dictionaries = self._find_dictionaries()
        if table not in self._dictionaries:
            return None
        shown = self._dictionaries[table]
        if shown is None:
            shown = self._dictionaries[table] = self._describe_rows(table)
        return shown

    def _find_dictionaries(self) -> dict[str, _Dictionary | None]:
        """The tables whose rows are not patient-level: neither joined by most tables (patients,
        visits) nor joining such a table. Without knowledge, only tables named ``d_*``."""
        knowledge = self.ehr.knowledge
        tables = self.ehr.tables()
        if knowledge is None:
            return {t: None for t in tables if t.lower().startswith("d_")}
        joins = {t: set(knowledge.tables[t].join_targets) & set(tables) for t in tables if t in knowledge.tables}
        joined_by = {t: sum(t in targets for source, targets in joins.items() if source != t) for t in tables}
        spine = {t for t in tables if len(tables) > 2 and joined_by[t] >= _SPINE_SHARE * (len(tables) - 1)}
        return {t: None for t in tables if t in joins and t not in spine and not joins[t] & spine}

    def _describe_rows(self, table: str) -> _Dictionary:
        knowledge = self.ehr.knowledge
        info = knowledge.tables.get(table) if knowledge is not None else None
        columns = self.ehr.columns(table)
        key = info.key if info is not None and info.key in columns else None
        if key is None and info is not None:  # the column the tables that use it join on
            named = {m.group(1) for j in info.joins if (m := _SAME_NAME_JOIN.match(j))}
            key = next(iter(named)) if len(named) == 1 and next(iter(named)) in columns else None
        if key is not None and self._opaque(table, key):
            # rows keyed by long opaque identifiers (UUIDs): the key says nothing the value does not,
            # and the rows' short columns without it are noise (a provider's gender): none is shown
            return _Dictionary(None, (), ())
        lookup = [c for t, c in self.ehr.lookup_columns() if t == table and c != key]
        texts = [c for c, kind in columns.items() if kind.upper().startswith("VARCHAR") and c != key]
        few: list[str] = []
        if texts:
            counts = self.ehr.sql("SELECT " + ", ".join(f"count(DISTINCT {quote(c)}) AS {quote(c)}" for c in texts)
                                  + f" FROM {quote(table)}").row(0)
            few = [c for c, n in zip(texts, counts) if 1 < n <= CONTEXT_VALUES]
        # another name of the row (a lookup column of many values), and its short categorical columns
        names = tuple(c for c in lookup if c not in few)
        context = tuple(sorted(few, key=lambda c: (c not in lookup, texts.index(c)))[:CONTEXT_COLUMNS + 1])
        return _Dictionary(key, names, context)


    def _opaque(self, table: str, key: str) -> bool:
        """Whether ``key``'s values are long identifiers (a UUID, an accession number), not codes."""
        length = self.ehr.sql(f"SELECT avg(length(CAST({quote(key)} AS VARCHAR))) FROM {quote(table)}").item()
        return length is not None and float(length) >= OPAQUE_KEY


def _phrase(words: Sequence[str], phrase: Sequence[str]) -> int | None:
    """Where ``phrase`` starts in ``words`` (whole words, in order), or None."""
    size = len(phrase)
    if not size:
        return None
    for start in range(len(words) - size + 1):
        if list(words[start:start + size]) == list(phrase):
            return start
    return None


def _content(token: _Token) -> bool:
    """A word worth linking: not grammar or a question word, not a period that groups the answer,
    not a bare number, and three letters or more unless written as shorthand ('IV', 'K', 'O2') or a
    clinical abbreviation of two ('iv')."""
    word = token.word
    if word in _STOP or word.isdigit() or token.worked_out:
        return False
    return len(word) >= 3 or token.text.isupper() or any(c.isdigit() for c in word) \
        or (len(word) == 2 and bool(clinical_vocabulary().expand(word)))  # 'iv', 'po', 'pt' as clinicians write them


def _runs(tokens: list[_Token], question: str) -> list[tuple[int, int]]:
    """Runs of consecutive content words (at most ``_RUN`` long), as token positions; a run ends
    at punctuation between two words."""
    runs, start = [], None
    for position, token in enumerate(tokens):
        joined = position > 0 and question[tokens[position - 1].end:token.start].strip() in ("", "-", "/")
        if _content(token) and len(token.word) >= 3 and not token.word.isdigit():
            if start is None or not joined or position - start >= _RUN:
                if start is not None:
                    runs.append((start, position))
                start = position
        elif start is not None:
            runs.append((start, position))
            start = None
    if start is not None:
        runs.append((start, len(tokens)))
    return runs


def _shorthand(token: _Token, question: str) -> tuple[str, ...]:
    """The meanings of a clinical shorthand ('Hb', 'SpO2', 'Lasix', 'afib') when the question writes
    it as one (``written_as_shorthand``)."""
    if token.word in _STOP:
        return ()
    before = question[:token.start].rstrip()
    initial = not before or before[-1] in ".?!:"
    return clinical_vocabulary().expand(token.text) \
        if written_as_shorthand(token.text, sentence_start=initial) else ()


_LINKERS: weakref.WeakKeyDictionary[VocabularyDatabase, QuestionLinker] = weakref.WeakKeyDictionary()


def link_question(ehr: VocabularyDatabase, question: str) -> Linking:
    """The stored values ``question``'s words may mean in ``ehr`` (one linker per database, so the
    word indexes are built once)."""
    linker = _LINKERS.get(ehr)
    if linker is None:
        linker = _LINKERS.setdefault(ehr, QuestionLinker(ehr))
    return linker.link(question)
