"""Value linking: find the stored values closest to what a question says.

EHR-ChatQA found value mismatch ('RDW' asked, 'rdw' stored) to be the top failure of
LLM agents on EHRs; this is the tool that fixes it. Each (table, column) vocabulary is
read once and indexed: normalised values, and an inverted index from word to values.
A lookup picks candidates through the index (words equal, prefixed or close to the
query's words, weighted by rarity), then ranks only those with rapidfuzz's WRatio, so
it stays fast on vocabularies of 100k+ values (ICD titles). Clinical shorthand ('Hb',
'COPD') is searched through its expansions (``clinical_vocabulary.py``), passed in as
``alternatives``.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process

from ehr_magic.text import normalise, normalise_all

_CANDIDATES = 3000  # values ranked by WRatio per lookup; enough to never miss a close one
_SMALL = 5000  # below this many values, rank them all
_PYTHON_BUILD = 500  # up to this many values, an index is built in Python (see Vocabulary.build)
_ABBREVIATION_LENGTH = 6  # a one-word query this short, with expansions, is an abbreviation
_INSIDE_WORD = 0.85  # what an abbreviation found inside a longer word keeps of its score
_ALTERNATIVE_CAP = 99.5  # an expansion matched exactly ranks below the query matched exactly
_GENERIC = 99.0  # 'chronic kidney disease, unspecified' for 'chronic kidney disease'
_PHRASE, _PHRASE_WORD, _PHRASE_FLOOR = 97.0, 0.5, 90.0  # a value holding the expansion as a phrase
_PHRASE_OF_QUERY = 93.0  # the abbreviation itself inside a value ranks below its expansion's phrase
_FUZZY_ONLY = 0.97  # an expansion matched only fuzzily, not as a phrase, is weak evidence
_OTHER_SPECIMEN = 0.93  # an unqualified lab name means blood: 'potassium' before 'potassium, csf'
_OTHER_SPECIMENS = frozenset({"csf", "urine", "stool", "ascites", "pleural", "fluid", "joint", "peritoneal",
                              "synovial", "amniotic", "bal", "sputum", "drain", "dialysate", "feces", "vitreous"})
_PARENTHESES = re.compile(r"\([^()]*\)")
# Qualifiers that leave a term's generic meaning: 'Unspecified essential hypertension' is 'essential hypertension'.
_GENERIC_WORDS = re.compile(r"\b(unspecified|not otherwise specified|not elsewhere classified|site not specified|"
                            r"not specified|nos|nec)\b")

if TYPE_CHECKING:
    from ehr_magic.linking.clinical_vocabulary import Alternative


@dataclass(frozen=True)
class Vocabulary:
    """The distinct values of one column, indexed for matching."""

    values: tuple[str, ...]
    normalised: tuple[str, ...]
    compact: dict[str, int]  # spacing-free normalised value -> index of a value written so
    repeated: dict[str, tuple[int, ...]]  # one written so by several values ('T bili', 'T-bili') -> all
    words: tuple[str, ...]  # distinct words of all values
    postings: tuple[np.ndarray, ...]  # word index -> value indexes containing it
    idf: np.ndarray  # word index -> log-inverse frequency
    word_order: np.ndarray  # word indexes in alphabetical order of the words (prefix search)

    @classmethod
    def build(cls, values: list[str]) -> Vocabulary:
        """Index ``values``. Normalising and the word index run in polars, not value by value
        in Python: the ICD titles (190k values) are indexed in a fraction of a second, so the
        first ``ehr.find`` does not wait seconds for them. A short list is indexed in Python, the
        same index: polars costs most of a millisecond a call whatever the size, and a warehouse's
        first question indexes thousands of status columns of a few values."""
        if len(values) <= _PYTHON_BUILD and all(isinstance(v, str) for v in values):
            return cls._build_in_python(values)
        return cls._build_in_polars(values)

    @classmethod
    def _build_in_python(cls, values: list[str]) -> Vocabulary:
        normalised = [normalise(v) for v in values]
        keys = [n.replace(" ", "") for n in normalised]
        compact = dict(zip(keys, range(len(keys))))
        by_key: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            by_key.setdefault(key, []).append(index)
        repeated = {key: tuple(indexes) for key, indexes in by_key.items() if len(indexes) > 1}
        per_word: dict[str, list[int]] = {}  # in order of first use, as the polars index
        for index, text in enumerate(normalised):
            for word in dict.fromkeys(text.split(" ")):
                if word:
                    per_word.setdefault(word, []).append(index)
        words = tuple(per_word)
        postings = tuple(np.asarray(indexes, dtype=np.int64) for indexes in per_word.values())
        total = max(len(values), 1)
        idf = np.asarray([math.log(1 + total / len(indexes)) for indexes in per_word.values()], dtype=np.float64)
        word_order = np.asarray(sorted(range(len(words)), key=words.__getitem__), dtype=np.int64)
        return cls(tuple(values), tuple(normalised), compact, repeated, words, postings, idf, word_order)

    @classmethod
    def _build_in_polars(cls, values: list[str]) -> Vocabulary:
        normalised = normalise_all(values)
        keys = normalised.str.replace_all(" ", "", literal=True)
        compact = dict(zip(keys.to_list(), range(len(keys))))
        shared = pl.DataFrame({"key": keys}).with_row_index("value").filter(keys.is_duplicated())
        repeated = {key: tuple(indexes) for key, indexes in shared.group_by("key").agg("value").iter_rows()}
        # (value index, word) once per value, the words in order of first use; then per word its values.
        pairs = (pl.DataFrame({"word": normalised.str.split(" ").list.unique(maintain_order=True)})
                 .with_row_index("value").explode("word").filter(pl.col("word") != ""))
        per_word = pairs.group_by("word", maintain_order=True).agg(pl.col("value"), pl.len().alias("count"))
        words = tuple(per_word["word"].to_list())
        counts = per_word["count"].to_list()
        flat = per_word["value"].explode().to_numpy().astype(np.int64)
        postings = tuple(np.split(flat, np.cumsum(counts)[:-1])) if words else ()
        total = max(len(values), 1)
        idf = np.asarray([math.log(1 + total / count) for count in counts], dtype=np.float64)
        word_order = np.asarray(sorted(range(len(words)), key=words.__getitem__), dtype=np.int64)
        return cls(tuple(values), tuple(normalised.to_list()), compact, repeated, words, postings, idf, word_order)

    def value_weights(self) -> np.ndarray:
        """Each value's weight: the IDF of its words, summed (a value's words are distinct)."""
        counts = [len(p) for p in self.postings]
        flat = np.concatenate(self.postings) if counts else np.zeros(0, dtype=np.int64)
        return np.bincount(flat, weights=np.repeat(self.idf, counts), minlength=len(self.values))

    def match(self, text: str, k: int = 5, alternatives: Sequence[Alternative] = (), *,
              exhaustive: bool = True) -> list[tuple[str, float]]:
        """The ``k`` best values for ``text`` with scores 0-100, best first.

        Exact matches up to case, spacing and punctuation score 100 and come first;
        then rapidfuzz's WRatio, which handles partial matches ('rdw' in 'rdw-sd') and
        token reordering. A value much shorter than the query gets no partial-match
        credit ('d' is not a good answer to 'rdw'). Ties go to the shorter value.

        ``alternatives`` are other texts for the same query (a clinical abbreviation's
        expansions: 'hemoglobin' for 'Hb'); see ``_with_alternatives``. On a large
        vocabulary where no word is close to the query's, ``exhaustive=False`` returns
        nothing rather than ranking every value (a search across many columns).
        """
        query = normalise(text)
        if not query or not self.values:
            return []
        found = self._scores(query, k, exhaustive)
        reserved: list[int] = []
        if alternatives:
            reserved = self._with_alternatives(query, found, alternatives, k)
        ranked = [i for i, _ in sorted(found.items(), key=lambda item: (-item[1], len(self.values[item[0]]),
                                                                        self.values[item[0]]))]
        chosen = ranked[:k]
        for i in reserved:  # each meaning of an ambiguous abbreviation keeps a place
            if i not in chosen and len(chosen) == k:
                # but never the best value's place: k=1 asks for the best one ('creatinine' is
                # 'Creatinine', not the stored abbreviation 'Cr' that a place was kept for)
                replaceable = [j for j in chosen[1:] if j not in reserved]
                if replaceable:
                    chosen.remove(replaceable[-1])
                    chosen.append(i)
        chosen.sort(key=lambda i: (-found[i], len(self.values[i]), self.values[i]))
        return [(self.values[i], round(found[i], 1)) for i in chosen]

    def _with_alternatives(self, query: str, found: dict[int, float], alternatives: Sequence[Alternative],
                           k: int) -> list[int]:
        """Add the scores of ``alternatives`` to ``found`` (each times its weight, the best
        kept); return the best value of each alternative that holds it as a phrase.

        A value holding an alternative (or the abbreviation itself) as a whole phrase ('acute
        renal failure' in 'renal | disorder of kidney | acute renal failure') scores 90-97,
        fewer extra words higher; one equal to it up to '(...)', 'unspecified' or 'not
        elsewhere classified' scores 99 (the generic meaning of an unqualified term); a
        merely similar value keeps 97% of its fuzzy score. A lab value of another specimen
        ('potassium, csf') ranks below the blood one unless the query names it. A short
        query found inside a longer word ('hb' in 'hbsag') is not the abbreviation: it keeps 85%.
        """
        if " " not in query and len(query) <= _ABBREVIATION_LENGTH:
            for i, score in found.items():
                if score < 100 and query not in self.normalised[i].split():
                    found[i] = score * _INSIDE_WORD
        self._phrases(query, found, _PHRASE_OF_QUERY)  # a stored abbreviation inside a longer value ('...|COPD')
        best: list[int] = []
        for alternative in alternatives:
            if alternative.exact_only:
                scored, strong = self._exact(alternative.text), set()
            else:
                scored = {i: score if score >= 100 else score * _FUZZY_ONLY
                          for i, score in self._scores(alternative.text, k, False).items()}
                wanted = alternative.text.replace(" ", "")
                for i in scored:
                    if self._generic(i) == wanted:
                        scored[i] = max(scored[i], _GENERIC)
                strong = self._phrases(alternative.text, scored)
            asked = set(query.split()) | set(alternative.text.split())
            top, top_score = -1, 0.0
            for i, score in scored.items():
                weighted = min(score, _ALTERNATIVE_CAP) * alternative.weight
                if not asked & _OTHER_SPECIMENS and _OTHER_SPECIMENS.intersection(self.normalised[i].split()):
                    weighted *= _OTHER_SPECIMEN
                if weighted > found.get(i, 0.0):
                    found[i] = weighted
                if weighted > top_score and (i in strong or score >= _GENERIC):
                    top, top_score = i, weighted
            if top >= 0 and top not in best:
                best.append(top)
        return best

    def _generic(self, i: int) -> str:
        """Value ``i`` compact, without nonessential modifiers ('(primary)') and qualifiers
        that keep the generic meaning ('unspecified', 'not elsewhere classified')."""
        value = str(self.values[i])
        normalised = normalise(_PARENTHESES.sub(" ", value)) if "(" in value else self.normalised[i]
        return _GENERIC_WORDS.sub(" ", normalised).replace(" ", "")

    def _phrases(self, text: str, scored: dict[int, float], top: float = _PHRASE) -> set[int]:
        """Raise the scores of values holding ``text`` as a whole phrase to 90-``top`` (fewer
        other words higher), or its words as word beginnings in order ('temp f' in
        'temperature fahrenheit') 2 points less; return those values."""
        words = text.split()
        phrase = f" {text} "
        holding = set()
        for i, score in scored.items():
            if score >= _GENERIC:
                continue
            value = self.normalised[i].split()
            if phrase in f" {self.normalised[i]} ":
                bonus = top
            elif len(words) > 1 and _prefixes_in_order(words, value):
                bonus = top - 2
            else:
                continue
            scored[i] = max(score, bonus - _PHRASE_WORD * (len(value) - len(words)), _PHRASE_FLOOR)
            holding.add(i)
        return holding

    def _exact(self, query: str) -> dict[int, float]:
        key = query.replace(" ", "")
        indexes = self.repeated.get(key) or ((self.compact[key],) if key in self.compact else ())
        return {i: 100.0 for i in indexes}

    def _scores(self, query: str, k: int, exhaustive: bool) -> dict[int, float]:
        """Value index -> score for one normalised query (exact 100, then WRatio)."""
        found = self._exact(query)
        exact = len(found)
        candidates = self._candidates(query)
        if candidates is None and not exhaustive and len(self.values) > _SMALL:
            return found
        choices = [self.normalised[i] for i in candidates] if candidates is not None else self.normalised
        for _, score, j in process.extract(query, choices, scorer=fuzz.WRatio, processor=None,
                                           limit=max(4 * k, 20) + exact):
            i = candidates[j] if candidates is not None else j
            if i in found:
                continue
            if len(self.normalised[i]) * 2 < len(query):
                score = fuzz.ratio(query, self.normalised[i])
            found[i] = min(float(score), 99.9)
        return found

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
                for j in self._prefixed(qword):
                    matched.setdefault(j, 0.9)
            for j, similarity in matched.items():
                weights[self.postings[j]] += similarity * self.idf[j]
                hit = True
        if not hit:
            return None
        top = np.argsort(-weights, kind="stable")[:_CANDIDATES]
        return [int(i) for i in top if weights[i] > 0]


    def _prefixed(self, prefix: str) -> list[int]:
        """Indexes of the words starting with ``prefix`` (binary search in alphabetical order)."""
        low, high = 0, len(self.word_order)
        while low < high:  # first word >= prefix
            middle = (low + high) // 2
            if self.words[self.word_order[middle]] < prefix:
                low = middle + 1
            else:
                high = middle
        found = []
        for position in range(low, len(self.word_order)):
            j = int(self.word_order[position])
            if not self.words[j].startswith(prefix):
                break
            found.append(j)
        return found


def _prefixes_in_order(words: list[str], value: list[str]) -> bool:
    """Whether each of ``words`` begins a word of ``value``, in order."""
    position = 0
    for word in words:
        while position < len(value) and not value[position].startswith(word):
            position += 1
        if position == len(value):
            return False
        position += 1
    return True


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
