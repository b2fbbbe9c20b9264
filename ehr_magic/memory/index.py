"""In-memory question indexes for top-K retrieval (one per schema and method).

Stored questions are turned into a *form* once; entries with the same form are
collapsed, so a search scores each distinct form once. Each form keeps its members
(entry keys, most trusted origin first, then newest) and the origin bonus of its best
member. Two indexes share this table:

* ``TokenIndex`` (method ``default``): an inverted index over masked tokens gives the
  token-overlap score of every form at once (numpy), and rapidfuzz scores the few
  forms that can still reach the top K on the joined text.
* ``LengthIndex`` (method ``levenshtein``): forms ordered by length; rapidfuzz's
  ``cdist`` scores only the lengths that can still reach the top K.

Both are exact: they return the same top K as scoring every stored question.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from ehr_magic.memory.entry import ORIGIN_PRIORITY, TRUSTED_ORIGINS

# Ranking score = similarity (0..100) + this bonus for accepted/seed/imported entries,
# so an unconfirmed ('auto') entry only wins when it is clearly more similar. Chosen
# by the simulation in bench/bench_memory.py (see docs/memory.md).
TRUSTED_BONUS = 5.0
_ID_BITS = 48
_ID_MASK = (1 << _ID_BITS) - 1
NEG_INF = float("-inf")
Heap = list[tuple[float, int, int]]  # (score, priority, entry id); heap[0] is the K-th best


def origin_bonus(origin: str, method: str) -> float:
    """Score bonus of ``origin`` under ``method`` (the EHRAgent baseline gets none)."""
    if method == "levenshtein":
        return 0.0
    return TRUSTED_BONUS if origin in TRUSTED_ORIGINS else 0.0


class Hit(NamedTuple):
    entry_id: int
    score: float
    priority: int


class FormTable:
    """Distinct forms with their member entries; subclasses add the search."""

    method = ""

    def __init__(self) -> None:
        self._where: dict[str, int] = {}  # form -> position
        self._forms: list[str] = []
        self._members: list[list[int]] = []  # keys, sorted descending
        self._best = array("d")  # bonus of the best member; -inf: form without members
        self._best_view: np.ndarray | None = None  # numpy view of _best (dropped before it grows)
        bonus = {o: origin_bonus(o, self.method) for o in ORIGIN_PRIORITY}
        self._bonus_of = {ORIGIN_PRIORITY[o]: b for o, b in bonus.items()}
        self.max_bonus = max(bonus.values())
        self.entries = 0
        self.empty_forms = 0

    # subclasses ----------------------------------------------------------------
    def form(self, question: str) -> str:
        raise NotImplementedError

    def _new_form(self, form: str, pos: int) -> None:
        """Hook: a form was appended at ``pos``."""

    def search(self, question: str, k: int, priorities: frozenset[int] | None = None) -> list[Hit]:
        raise NotImplementedError

    # maintenance ----------------------------------------------------------------
    @property
    def forms(self) -> int:
        return len(self._forms) - self.empty_forms

    def add(self, entry_id: int, question: str, origin: str) -> None:
        form = self.form(question)
        key = (ORIGIN_PRIORITY[origin] << _ID_BITS) | entry_id
        pos = self._where.get(form)
        if pos is None:
            pos = self._where[form] = len(self._forms)
            self._forms.append(form)
            self._members.append([key])
            self._best_view = None  # a live view would stop the array from growing
            self._best.append(self._bonus_of[key >> _ID_BITS])
            self._new_form(form, pos)
        else:
            members = self._members[pos]
            if key in members:
                return
            if not members:
                self.empty_forms -= 1
            members.append(key)
            members.sort(reverse=True)
            self._best[pos] = self._bonus_of[members[0] >> _ID_BITS]
        self.entries += 1

    def add_many(self, rows: Iterable[tuple[int, str, str]]) -> None:
        for entry_id, question, origin in rows:
            self.add(entry_id, question, origin)

    def remove(self, entry_id: int, question: str, origin: str) -> None:
        """Forget an entry as it was stored (no-op when it is not in the index)."""
        pos = self._where.get(self.form(question))
        if pos is None:
            return
        members = self._members[pos]
        key = (ORIGIN_PRIORITY[origin] << _ID_BITS) | entry_id
        if key not in members:
            return
        members.remove(key)
        self.entries -= 1
        if members:
            self._best[pos] = self._bonus_of[members[0] >> _ID_BITS]
        else:
            self._best[pos] = NEG_INF
            self.empty_forms += 1

    def needs_rebuild(self) -> bool:
        """True when so many forms lost all members that a fresh index is smaller."""
        return self.empty_forms > 1000 and self.empty_forms > len(self._forms) // 4

    # ranking ---------------------------------------------------------------------
    def best_bonus(self) -> np.ndarray:
        """Per form: the bonus of its best member (-inf when it has none). A view."""
        if self._best_view is None:
            self._best_view = np.frombuffer(self._best, dtype=np.float64)
        return self._best_view

    def _push_members(
        self, pos: int, similarity: float, k: int, heap: Heap, priorities: frozenset[int] | None
    ) -> None:
        """Offer the members of form ``pos`` (with this similarity) to the top-K heap."""
        taken = 0
        for key in self._members[pos]:
            if taken == k:
                break
            prio = key >> _ID_BITS
            if priorities is not None and prio not in priorities:
                continue
            taken += 1
            item = (similarity + self._bonus_of[prio], prio, key & _ID_MASK)
            if len(heap) < k:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
            else:
                break  # later members of this form rank lower still

    def _offer(
        self,
        positions: np.ndarray,
        similarities: np.ndarray,
        k: int,
        heap: Heap,
        priorities: frozenset[int] | None,
    ) -> None:
        """Offer forms to the top-K heap, best first by similarity + best bonus."""
        upper = similarities + self.best_bonus()[positions]
        floor = heap[0][0] if len(heap) == k else NEG_INF
        if len(upper) > k and priorities is None:
            # only forms reaching the K-th largest bound can enter (ties included)
            floor = max(floor, float(np.partition(upper, len(upper) - k)[len(upper) - k]))
        chosen = np.flatnonzero(upper >= floor) if floor > NEG_INF else np.flatnonzero(upper > NEG_INF)
        if len(chosen) > 1:
            chosen = chosen[np.argsort(-upper[chosen], kind="stable")]
        push = self._push_members
        for i in chosen.tolist():
            bound = upper[i]
            if len(heap) == k and bound < heap[0][0]:
                break
            push(int(positions[i]), float(similarities[i]), k, heap, priorities)


def finish(heap: Heap) -> list[Hit]:
    heap.sort(reverse=True)
    return [Hit(entry_id, score, prio) for score, prio, entry_id in heap]


def make_index(method: str) -> FormTable:
    """A new, empty index for ``method``."""
    from ehr_magic.memory.index_length import LengthIndex
    from ehr_magic.memory.index_token import TokenIndex

    if method == "default":
        return TokenIndex()
    if method == "levenshtein":
        return LengthIndex()
    raise ValueError(method)
