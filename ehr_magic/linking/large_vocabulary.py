"""Value lookup in columns of millions of values (a full OMOP vocabulary: 5M+ concept names).

``Vocabulary`` keeps every value twice as a Python string, a dict of them and an array per word:
fine for the 190k ICD titles, gigabytes and minutes of indexing for millions. ``LargeVocabulary``
indexes such a column in compact form: the values in one Arrow string column, each word's values
as a slice of one integer array (sorted words, found by binary search). A lookup does what
``Vocabulary`` does on a large column, on the few thousand values that matter: it weighs the values
holding the query's words (equal, prefixed, or close: the same first letter and a near spelling)
by the words' rarity, then ranks the best ``CANDIDATES`` with a ``Vocabulary`` of those alone. Its
cost grows with how many values hold the query's words, not with the column.

``ColumnIndexes`` gives a connection its indexes: a ``Vocabulary`` for a column of up to ``LARGE``
distinct values, else a ``LargeVocabulary``, built once and, for the columns it may keep (vocabulary,
never patient data), kept on disk in the user cache folder, so the next session loads it in a moment.
The file is named by the database, the column and its row count; a changed file or table is indexed anew.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import shutil
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process

from ehr_magic.linking.lookup import _CANDIDATES as CANDIDATES
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.paths import cache_dir
from ehr_magic.text import normalise

if TYPE_CHECKING:
    from ehr_magic.linking.clinical_vocabulary import Alternative

__all__ = ["LARGE", "ColumnIndexes", "LargeVocabulary"]

log = logging.getLogger(__name__)

LARGE = 300_000  # distinct values; above this a column gets a LargeVocabulary
COLUMNS_PER_READ = 16  # small columns whose values ``ColumnIndexes.prefetch`` reads in one statement
FORMAT = 1  # of the files kept on disk; a new format ignores the old files
_CLOSE_WORD = 75  # fuzz.ratio of a close word, as Vocabulary's candidates
_CLOSE_WORDS = 50
_PREFIX_WEIGHT = 0.9
_COMMON = 0.05  # a word held by more than this share of the values picks candidates only when it is all there is
_LAST = "\U0010ffff"
_WORD = r"[0-9a-z]+"  # the words of a value, as ``normalise`` splits them


class _Postings(Sequence):
    """Word index -> the indexes of the values holding it (slices of one array)."""

    def __init__(self, flat: np.ndarray, offsets: np.ndarray) -> None:
        self.flat, self.offsets = flat, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, word: int) -> np.ndarray:  # type: ignore[override]
        return self.flat[self.offsets[word]:self.offsets[word + 1]]

    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)


class _Values(Sequence):
    """The values, as one Arrow string column; ``values[i]`` is a Python string."""

    def __init__(self, series: pl.Series) -> None:
        self.series = series

    def __len__(self) -> int:
        return len(self.series)

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        return self.series[int(index)]

    def take(self, indexes: np.ndarray) -> list[str]:
        return self.series.gather(indexes).to_list()


class _Normalised(Sequence):
    """Each value's normal form (``ehr_magic.text.normalise``), made when it is read: linking reads
    a few per question, and keeping millions of them would double the index."""

    def __init__(self, values: _Values) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        return normalise(self.values[index])


@dataclass(frozen=True)
class LargeVocabulary:
    """The distinct values of one large column, indexed for ``match`` (see the module docstring).
    ``values``, ``normalised``, ``words``, ``postings`` and ``idf`` read as ``Vocabulary``'s do
    (``words`` sorted)."""

    values: _Values
    words: tuple[str, ...]
    postings: _Postings
    idf: np.ndarray
    lengths: np.ndarray  # word index -> its length (close words are of a near length)

    @classmethod
    def build(cls, values: pl.Series) -> LargeVocabulary:
        """Index ``values`` (distinct; sorted here, so that ties rank the same on every engine)."""
        values = values.cast(pl.String).drop_nulls().unique().sort()
        words = values.str.to_lowercase().str.extract_all(_WORD).list.unique()
        pairs = pl.DataFrame({"word": words}).with_row_index("value").explode("word").drop_nulls()
        per_word = pairs.group_by("word").agg(pl.col("value")).sort("word")
        counts = per_word["value"].list.len().to_numpy().astype(np.int64)
        flat = per_word["value"].explode().to_numpy().astype(np.int32) if len(per_word) else np.zeros(0, np.int32)
        return cls.of(values, per_word["word"], flat, counts)

    @classmethod
    def of(cls, values: pl.Series, words: pl.Series, flat: np.ndarray, counts: np.ndarray) -> LargeVocabulary:
        """The index from its parts: the sorted values and words, and each word's values in one array."""
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        idf = np.log1p(max(len(values), 1) / np.maximum(counts, 1)).astype(np.float64)
        lengths = words.str.len_chars().to_numpy().astype(np.int32)
        return cls(_Values(values), tuple(words.to_list()), _Postings(flat, offsets), idf, lengths)

    def save(self, folder: Path) -> None:
        """Write the index into ``folder`` (created whole: written beside it, then renamed)."""
        partial = folder.with_name(f"{folder.name}.{uuid.uuid4().hex[:8]}.partial")
        partial.mkdir(parents=True)
        try:
            pl.DataFrame({"value": self.values.series}).write_ipc(partial / "values.arrow")
            pl.DataFrame({"word": self.words, "count": self.postings.counts()}).write_ipc(partial / "words.arrow")
            pl.DataFrame({"value": self.postings.flat}).write_ipc(partial / "postings.arrow")
            partial.rename(folder)
        finally:
            shutil.rmtree(partial, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path) -> LargeVocabulary:
        words = pl.read_ipc(folder / "words.arrow")
        return cls.of(pl.read_ipc(folder / "values.arrow")["value"], words["word"],
                      pl.read_ipc(folder / "postings.arrow")["value"].to_numpy(),
                      words["count"].to_numpy().astype(np.int64))

    @property
    def normalised(self) -> _Normalised:
        return _Normalised(self.values)

    # -- what table choice reads ------------------------------------------------------------------

    def value_weights(self) -> np.ndarray:
        """Each value's weight: the IDF of its words, summed (a value's words are distinct)."""
        return np.bincount(self.postings.flat, weights=np.repeat(self.idf, self.postings.counts()),
                           minlength=len(self.values))

    # -- lookup -----------------------------------------------------------------------------------

    def match(self, text: str, k: int = 5, alternatives: Sequence[Alternative] = (), *,
              exhaustive: bool = True) -> list[tuple[str, float]]:
        """The ``k`` best values for ``text`` with scores 0-100, best first, as ``Vocabulary.match``
        ranks them; only values sharing a (close) word with the query or one of its ``alternatives``
        are ranked, whatever ``exhaustive`` says (ranking millions of values by spelling is neither
        fast nor useful)."""
        texts = [normalise(text), *(normalise(a.text) for a in alternatives)]
        chosen: list[int] = []
        for query in texts:
            chosen += self.candidates(query)
        if not chosen:
            return []
        indexes = np.unique(np.asarray(chosen, dtype=np.int64))
        return Vocabulary.build(self.values.take(indexes)).match(text, k, alternatives, exhaustive=exhaustive)

    def candidates(self, query: str, limit: int = CANDIDATES) -> list[int]:
        """Indexes of the ``limit`` values that hold the most (and rarest) of the words of ``query``
        (normalised), or words close to them; the value equal to the query first."""
        weights: dict[int, float] = {}
        for qword in set(query.split()):
            for word, similarity in self._close_words(qword).items():
                weights[word] = max(weights.get(word, 0.0), similarity)
        if not weights:
            return []
        total = len(self.values)
        rare = {w: s for w, s in weights.items() if len(self.postings[w]) <= _COMMON * total}
        if rare:  # a word in a large share of the values ('mg', 'tablet') weighs little and costs most
            weights = rare
        ids = np.concatenate([self.postings[w] for w in weights])
        scores = np.concatenate([np.full(len(self.postings[w]), s * self.idf[w]) for w, s in weights.items()])
        if len(ids) > total // 8:  # many hits: one dense sum beats sorting them
            summed = np.bincount(ids, weights=scores, minlength=total)
            top = np.flatnonzero(summed)
            best = top[np.argsort(-summed[top], kind="stable")[:limit]]
            return [int(i) for i in best]
        unique, inverse = np.unique(ids, return_inverse=True)
        summed = np.bincount(inverse, weights=scores)
        top = np.argsort(-summed, kind="stable")[:limit]
        return [int(i) for i in unique[top]]

    def _close_words(self, qword: str) -> dict[int, float]:
        """Word index -> similarity (0-1) of the words equal to ``qword``, beginning with it (3+
        letters) or spelled close to it (sharing its first letter)."""
        found: dict[int, float] = {}
        low = bisect.bisect_left(self.words, qword[:1])
        high = bisect.bisect_left(self.words, qword[:1] + _LAST, lo=low)
        if high > low:
            near = np.arange(low, high)[np.abs(self.lengths[low:high] - len(qword)) <= max(2, len(qword) // 2)]
            for _, score, j in process.extract(qword, [self.words[i] for i in near], scorer=fuzz.ratio,
                                               processor=None, score_cutoff=_CLOSE_WORD, limit=_CLOSE_WORDS):
                found[int(near[j])] = score / 100
        if len(qword) >= 3:
            start = bisect.bisect_left(self.words, qword, lo=low, hi=high)
            end = bisect.bisect_left(self.words, qword + _LAST, lo=start, hi=high)
            for j in range(start, end):
                found.setdefault(j, 1.0 if self.words[j] == qword else _PREFIX_WEIGHT)
        return found


class ColumnIndexes:
    """A connection's column indexes, built on first use (thread-safe): ``get(table, column)``.

    ``rows(table)`` counts a table's rows and ``values(table, column)`` reads a column's distinct
    values; ``keep(table, column)`` says whether its index may be kept on disk (only vocabulary:
    the files hold the values); ``identity`` names the database (its path with its size and time of
    change, or its URL), None to keep nothing."""

    def __init__(self, values: Callable[[str, str], pl.Series], rows: Callable[[str], int], *,
                 keep: Callable[[str, str], bool] = lambda table, column: False, identity: str | None = None,
                 many_values: Callable[[list[tuple[str, str]]], list[pl.Series] | None] | None = None,
                 many_rows: Callable[[list[str]], dict[str, int]] | None = None) -> None:
        self._values, self._rows, self._keep, self._identity = values, rows, keep, identity
        self._many_values, self._many_rows = many_values, many_rows
        self._cache: dict[tuple[str, str], Vocabulary | LargeVocabulary] = {}
        self._row_counts: dict[str, int] = {}  # counted once per table: its columns are indexed one by one
        self._lock = threading.Lock()

    def get(self, table: str, column: str) -> Vocabulary | LargeVocabulary:
        key = (table, column)
        found = self._cache.get(key)
        if found is None:
            built = self._build(table, column)
            with self._lock:
                found = self._cache.setdefault(key, built)
        return found

    def rows(self, table: str) -> int:
        """The rows of ``table``, counted once per connection: its columns' indexes are sized by it."""
        rows = self._row_counts.get(table)
        if rows is None:
            rows = self._row_counts[table] = self._rows(table)
        return rows

    def prefetch(self, columns: Sequence[tuple[str, str]]) -> None:
        """Index ``columns`` not indexed yet, reading many at once (``many_rows`` counts several tables
        to a statement, ``many_values`` reads the values of several small columns): a question's
        first linking on a warehouse would otherwise send three statements for each of thousands of
        status columns. A large column, or a batch that cannot be read, is left to ``get``."""
        if self._many_values is None or self._many_rows is None:
            return
        wanted = [pair for pair in dict.fromkeys(columns) if pair not in self._cache]
        uncounted = sorted({table for table, _ in wanted} - self._row_counts.keys())
        if uncounted:
            self._row_counts.update(self._many_rows(uncounted))
        small = [pair for pair in wanted if self._row_counts.get(pair[0], LARGE + 1) <= LARGE]
        for first in range(0, len(small), COLUMNS_PER_READ):
            batch = small[first:first + COLUMNS_PER_READ]
            read = self._many_values(batch)
            if read is None:
                continue
            built = [Vocabulary.build(values.to_list()) for values in read]
            with self._lock:
                for pair, vocabulary in zip(batch, built):
                    self._cache.setdefault(pair, vocabulary)

    def _build(self, table: str, column: str) -> Vocabulary | LargeVocabulary:
        rows = self.rows(table)
        if rows <= LARGE:
            return Vocabulary.build(self._values(table, column).to_list())
        folder = self._folder(table, column, rows)
        if folder is not None and folder.is_dir():
            try:
                return LargeVocabulary.load(folder)
            except (OSError, pl.exceptions.PolarsError, KeyError, ValueError) as exc:
                log.warning("Ignoring the unreadable index %s (%s); indexing %s.%s anew.", folder, exc, table, column)
        values = self._values(table, column)
        if len(values) <= LARGE:
            return Vocabulary.build(values.to_list())
        index = LargeVocabulary.build(values)
        if folder is not None and not folder.exists():
            try:
                index.save(folder)
            except OSError as exc:  # a full or read-only cache folder costs the next session time, nothing else
                log.warning("Could not keep the index of %s.%s in %s: %s", table, column, folder, exc)
        return index

    def _folder(self, table: str, column: str, rows: int) -> Path | None:
        if self._identity is None or not self._keep(table, column):
            return None
        name = hashlib.sha256(repr((FORMAT, self._identity, table, column, rows)).encode()).hexdigest()[:24]
        return cache_dir() / "column-indexes" / name
