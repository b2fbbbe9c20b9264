"""``TokenIndex``: exact top-K for the ``default`` similarity.

similarity = (T + C) / 2, with T = ``fuzz.ratio`` of the sorted masked token lists
(one symbol per token) and C = ``fuzz.ratio`` of the same tokens joined by spaces.

T is the Dice overlap of the token multisets, ``200 * |A & B| / (|A| + |B|)``, so an
inverted index (token occurrence -> forms) gives T for every form with one
``np.bincount``. C is at most ``200 * min(a, b) / (a + b)`` for texts of lengths a and
b, so ``(T + that) / 2`` bounds the similarity; rapidfuzz's ``cdist`` computes C
only for the forms whose bound can still reach the K-th best score.
"""

from __future__ import annotations

from array import array
import numpy as np
from rapidfuzz import fuzz, process

from ehr_magic.memory.index import FormTable, Heap, Hit, finish
from ehr_magic.memory.similarity import default_tokens

_FIRST_BATCH = 32  # forms scored with rapidfuzz before the K-th score is known


def _terms(tokens: list[str]) -> list[str]:
    """Token occurrences of sorted ``tokens``: the 2nd 'num' is 'num\\x002', so the
    overlap of two term sets is the overlap of the token multisets."""
    terms = []
    previous, repeat = None, 1
    for token in tokens:
        repeat = repeat + 1 if token == previous else 1
        previous = token
        terms.append(token if repeat == 1 else f"{token}\x00{repeat}")
    return terms


class TokenIndex(FormTable):
    method = "default"

    def __init__(self) -> None:
        super().__init__()
        self._term_ids: dict[str, int] = {}
        self._postings: list[array] = []  # term id -> positions of forms with it
        self._token_counts = array("d")  # per form
        self._text_lengths = array("d")  # per form, of the joined tokens
        # numpy views of the arrays above, made on demand; a live view stops an array
        # from growing, so it is dropped before the array is appended to
        self._posting_views: dict[int, np.ndarray] = {}
        self._form_views: tuple[np.ndarray, np.ndarray] | None = None

    def form(self, question: str) -> str:
        return " ".join(default_tokens(question))

    def _new_form(self, form: str, pos: int) -> None:
        tokens = form.split()
        for term in _terms(tokens):
            term_id = self._term_ids.get(term)
            if term_id is None:
                term_id = self._term_ids[term] = len(self._postings)
                self._postings.append(array("i"))
            self._posting_views.pop(term_id, None)
            self._postings[term_id].append(pos)
        self._form_views = None
        self._token_counts.append(len(tokens))
        self._text_lengths.append(len(form))

    def search(self, question: str, k: int, priorities: frozenset[int] | None = None) -> list[Hit]:
        n = len(self._forms)
        if k <= 0 or n == 0:
            return []
        tokens = default_tokens(question)
        query = " ".join(tokens)
        if self._form_views is None:
            self._form_views = (np.frombuffer(self._token_counts, dtype=np.float64),
                                np.frombuffer(self._text_lengths, dtype=np.float64))
        counts, lengths = self._form_views
        best = self.best_bonus()
        lists = self._query_postings(_terms(tokens))
        if not tokens:  # an empty query only matches empty forms
            token_score = (counts == 0) * 100.0
        elif lists:
            overlap = np.bincount(np.concatenate(lists) if len(lists) > 1 else lists[0], minlength=n)
            token_score = overlap * 200.0
            token_score /= counts + len(tokens)
        else:
            token_score = np.zeros(n)
        # upper bound of the ranking score with the text score at its maximum, 100
        upper = token_score * 0.5
        upper += best
        upper += 50.0
        heap: Heap = []
        # 1. the most promising forms give a K-th best score ...
        batch = max(_FIRST_BATCH, 4 * k)
        if n <= batch:
            self._score(query, np.arange(n), token_score, k, heap, priorities)
            return finish(heap)
        first = np.argpartition(upper, n - batch)[n - batch:]
        self._score(query, first, token_score, k, heap, priorities)
        # 2. ... then every other form whose bound still reaches it; the bound is
        # tightened with the text lengths: ratio(a, b) <= 200 * min(a, b) / (a + b)
        upper[first] = -np.inf
        threshold = heap[0][0] if len(heap) == k else -np.inf
        rest = np.flatnonzero(upper >= threshold) if threshold > -np.inf else np.flatnonzero(upper > -np.inf)
        if len(rest) and threshold > -np.inf:
            size = lengths[rest]
            bound = np.minimum(size, len(query)) * 100.0 / np.maximum(size + len(query), 1.0)
            bound += upper[rest] - 50.0
            keep = bound >= threshold
            rest, upper_rest = rest[keep], bound[keep]
        else:
            upper_rest = upper[rest]
        if len(rest):
            order = np.argsort(-upper_rest, kind="stable")
            rest, upper_rest = rest[order], upper_rest[order]
            for start in range(0, len(rest), 4096):
                if len(heap) == k and upper_rest[start] < heap[0][0]:
                    break
                self._score(query, rest[start:start + 4096], token_score, k, heap, priorities)
        return finish(heap)

    def _query_postings(self, terms: list[str]) -> list[np.ndarray]:
        views, term_ids = self._posting_views, self._term_ids
        out = []
        for term in terms:
            term_id = term_ids.get(term)
            if term_id is not None:
                view = views.get(term_id)
                if view is None:
                    view = views[term_id] = np.frombuffer(self._postings[term_id], dtype=np.int32)
                out.append(view)
        return out

    def _score(self, query: str, positions: np.ndarray, token_score: np.ndarray, k: int,
               heap: Heap, priorities: frozenset[int] | None) -> None:
        forms = self._forms
        text_score = process.cdist([query], [forms[i] for i in positions.tolist()],
                                   scorer=fuzz.ratio, dtype=np.float64)[0]
        self._offer(positions, (token_score[positions] + text_score) * 0.5, k, heap, priorities)
