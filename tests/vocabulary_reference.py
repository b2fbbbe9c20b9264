"""The value index built one value at a time in Python, as ``Vocabulary.build`` did before it
ran in polars: the reference that the test of unchanged results and bench/bench_find.py
compare with. A plain module, like datapaths.py."""

from __future__ import annotations

import math

import numpy as np

from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.text import normalise


def built_one_value_at_a_time(values: list[str]) -> Vocabulary:
    normalised = tuple(normalise(v) for v in values)
    compact: dict[str, list[int]] = {}
    word_values: dict[str, list[int]] = {}
    for i, n in enumerate(normalised):
        compact.setdefault(n.replace(" ", ""), []).append(i)
        for word in dict.fromkeys(n.split()):  # was set(): the same words, in an order fixed across runs
            word_values.setdefault(word, []).append(i)
    words = tuple(word_values)
    postings = tuple(np.asarray(word_values[w], dtype=np.int64) for w in words)
    total = max(len(values), 1)
    idf = np.asarray([math.log(1 + total / len(p)) for p in postings], dtype=np.float64)
    word_order = np.asarray(sorted(range(len(words)), key=words.__getitem__), dtype=np.int64)
    return Vocabulary(tuple(values), normalised, {key: indexes[-1] for key, indexes in compact.items()},
                      {key: tuple(indexes) for key, indexes in compact.items() if len(indexes) > 1},
                      words, postings, idf, word_order)
