"""``LengthIndex``: exact top-K by Levenshtein distance (EHRAgent's measure).

Forms (raw questions) are kept ordered by length. A search scores the forms of about
the query's length with one ``rapidfuzz.process.cdist`` call, which gives a K-th best
distance ``d``; since the distance is at least the difference of the lengths, only
lengths within ``d`` of the query's are scored next (with ``d`` as cut-off).
Forms added since the last ordering are kept in a short tail that is always scored.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from ehr_magic.memory.index import FormTable, Heap, Hit, NEG_INF, finish


class LengthIndex(FormTable):
    method = "levenshtein"

    def __init__(self) -> None:
        super().__init__()
        self._lengths = np.zeros(0, dtype=np.int64)  # lengths of the ordered part
        self._sorted_end = 0

    def form(self, question: str) -> str:
        return question

    def add_many(self, rows: Iterable[tuple[int, str, str]]) -> None:
        super().add_many(rows)
        self._reorder()

    def _reorder(self) -> None:
        live = [i for i, members in enumerate(self._members) if members]
        lengths = np.fromiter((len(self._forms[i]) for i in live), dtype=np.int64, count=len(live))
        order = [live[i] for i in np.argsort(lengths, kind="stable").tolist()]
        self._forms = [self._forms[i] for i in order]
        self._members = [self._members[i] for i in order]
        self._best = array("d", (self._best[i] for i in order))
        self._lengths = np.sort(lengths, kind="stable")
        self._sorted_end = len(self._forms)
        self._where = {form: i for i, form in enumerate(self._forms)}
        self.empty_forms = 0

    def search(self, question: str, k: int, priorities: frozenset[int] | None = None) -> list[Hit]:
        if k <= 0 or not self._forms:
            return []
        if len(self._forms) - self._sorted_end > max(64, self._sorted_end // 32):
            self._reorder()
        m = len(question)
        heap: Heap = []
        self._scan(question, self._sorted_end, len(self._forms), k, heap, priorities)
        spread = max(2, m // 10)
        lo = int(np.searchsorted(self._lengths, m - spread, "left"))
        hi = int(np.searchsorted(self._lengths, m + spread, "right"))
        self._scan(question, lo, hi, k, heap, priorities)
        if len(heap) == k:  # distance >= |length - m|
            worst = -heap[0][0]
            lo2 = int(np.searchsorted(self._lengths, m - worst, "left"))
            hi2 = int(np.searchsorted(self._lengths, m + worst, "right"))
        else:
            lo2, hi2 = 0, self._sorted_end
        self._scan(question, lo2, lo, k, heap, priorities)
        self._scan(question, hi, hi2, k, heap, priorities)
        return finish(heap)

    def _scan(self, query: str, start: int, stop: int, k: int, heap: Heap,
              priorities: frozenset[int] | None) -> None:
        if stop <= start:
            return
        # distances above score_cutoff come back as score_cutoff + 1
        cutoff = int(-heap[0][0]) if len(heap) == k and heap[0][0] > NEG_INF else None
        distances = process.cdist([query], self._forms[start:stop], scorer=Levenshtein.distance,
                                  score_cutoff=cutoff, dtype=np.int64)[0]
        self._offer(np.arange(start, stop), -distances.astype(np.float64), k, heap, priorities)
