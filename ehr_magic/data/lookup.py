"""Value linking: find the stored values closest to what a question says.

EHR-ChatQA found value mismatch ('RDW' asked, 'rdw' stored) to be the top failure of
LLM agents on EHRs; this is the tool that fixes it. Each (table, column) vocabulary is
read once and indexed: normalised values, and an inverted index from word to values.
A lookup picks candidates through the index (words equal, prefixed or close to the
query's words, weighted by rarity), then ranks only those with rapidfuzz's WRatio, so
it stays fast on vocabularies of 100k+ values (ICD titles).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from rapidfuzz import fuzz, process

_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_CANDIDATES = 3000  # values ranked by WRatio per lookup; enough to never miss a close one
_SMALL = 5000  # below this many values, rank them all


def normalise(text: str) -> str:
    """Lowercase, punctuation and spacing collapsed to single spaces."""
    return _NON_ALNUM.sub(" ", str(text).lower()).strip()


@dataclass(frozen=True)
class Vocabulary:
    """The distinct values of one column, indexed for matching."""

    values: tuple[str, ...]
    normalised: tuple[str, ...]
    compact: dict[str, list[int]]  # spacing-free normalised value -> indexes
    words: tuple[str, ...]  # distinct words of all values
    postings: tuple[np.ndarray, ...]  # word index -> value indexes containing it
    idf: np.ndarray  # word index -> log-inverse frequency

    @classmethod
    def build(cls, values: list[str]) -> Vocabulary:
        normalised = tuple(normalise(v) for v in values)
        compact: dict[str, list[int]] = {}
        word_values: dict[str, list[int]] = {}
        for i, n in enumerate(normalised):
            compact.setdefault(n.replace(" ", ""), []).append(i)
            for word in set(n.split()):
                word_values.setdefault(word, []).append(i)
        words = tuple(word_values)
        postings = tuple(np.asarray(word_values[w], dtype=np.int64) for w in words)
        total = max(len(values), 1)
        idf = np.asarray([math.log(1 + total / len(p)) for p in postings], dtype=np.float64)
        return cls(tuple(values), normalised, compact, words, postings, idf)

    def match(self, text: str, k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` best values for ``text`` with scores 0-100, best first.

        Exact matches up to case, spacing and punctuation score 100 and come first;
        then rapidfuzz's WRatio, which handles partial matches ('rdw' in 'rdw-sd') and
        token reordering. A value much shorter than the query gets no partial-match
        credit ('d' is not a good answer to 'rdw'). Ties go to the shorter value.
        """
        query = normalise(text)
        if not query or not self.values:
            return []
        exact = self.compact.get(query.replace(" ", ""), [])
        found: dict[int, float] = {i: 100.0 for i in exact}
        candidates = self._candidates(query)
        choices = [self.normalised[i] for i in candidates] if candidates is not None else self.normalised
        for _, score, j in process.extract(query, choices, scorer=fuzz.WRatio, processor=None,
                                           limit=max(4 * k, 20) + len(exact)):
            i = candidates[j] if candidates is not None else j
            if i in found:
                continue
            if len(self.normalised[i]) * 2 < len(query):
                score = fuzz.ratio(query, self.normalised[i])
            found[i] = min(float(score), 99.9)
        ranked = sorted(found.items(), key=lambda item: (-item[1], len(self.values[item[0]]), self.values[item[0]]))
        return [(self.values[i], round(score, 1)) for i, score in ranked[:k]]

    def _candidates(self, query: str) -> list[int] | None:
        """Indexes of values sharing (close) words with ``query``; None means rank them all."""
        if len(self.values) <= _SMALL:
            return None
        weights = np.zeros(len(self.values), dtype=np.float64)
        hit = False
        for qword in set(query.split()):
            close = process.extract(qword, self.words, scorer=fuzz.ratio, processor=None,
                                    score_cutoff=75, limit=50)
            matched = {j: s / 100 for _, s, j in close}
            if len(qword) >= 3:  # a prefix ('potass' -> 'potassium') counts as well
                for j, word in enumerate(self.words):
                    if word.startswith(qword):
                        matched.setdefault(j, 0.9)
            for j, similarity in matched.items():
                weights[self.postings[j]] += similarity * self.idf[j]
                hit = True
        if not hit:
            return None
        top = np.argsort(-weights, kind="stable")[:_CANDIDATES]
        return [int(i) for i in top if weights[i] > 0]


class VocabularyCache:
    """Thread-safe lazy cache of vocabularies keyed by (table, column)."""

    def __init__(self, loader: Callable[[str, str], list[str]]) -> None:
        self._loader = loader
        self._cache: dict[tuple[str, str], Vocabulary] = {}
        self._lock = threading.Lock()

    def get(self, table: str, column: str) -> Vocabulary:
        key = (table, column)
        vocabulary = self._cache.get(key)
        if vocabulary is None:
            built = Vocabulary.build(self._loader(table, column))
            with self._lock:
                vocabulary = self._cache.setdefault(key, built)
        return vocabulary
