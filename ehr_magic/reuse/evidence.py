"""What memory teaches about words and code: which question words always come with
which names in the code.

Across the remembered cells, some question words reliably come with a name in the
code: questions saying "output" are answered from ``outputevents``, "specimen"
from ``spec_type_desc``, "treatments" from ``procedures_icd``. When a new question
says such a word, the adapted code must use that name (``unsupported_words``);
and when a code uses a name that questions always announce with some word, the new
question must say one of those words (``unannounced_names``). Both are learned
from memory alone, for any schema and any wording the analysts use, and catch the
reuse of a cell that fits the question's values and most of its words but answers
something else ("lab tests" vs "procedures", "organism" vs "specimen").
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable

from ehr_magic.knowledge.handle import Database
from ehr_magic.reuse.literals import code_words, selected_words
from ehr_magic.reuse.unanswerable import STOPWORDS
from ehr_magic.text import stem

MIN_SUPPORT = 10  # cells a word must occur in before it can imply anything
MIN_SHARE = 0.95  # share of those cells whose code must use the name
MAX_BASE = 0.5  # names used by more than this share of all cells are not informative
MIN_COVERAGE = 0.95  # share of a name's cells whose question says one of its words
ANNOUNCE_SUPPORT = 3  # cells a word must occur in to announce a returned name
ANNOUNCE_SHARE = 0.8  # share of the word's cells whose code returns the name
MIN_KINDS = 3  # distinct kinds of cell (skeletons) a word must occur in before it can imply anything

# SQL words and generated aliases carry no meaning of their own.
_SQL_WORDS = frozenset("""
select from where and or not in is null as on join left right inner outer full cross group by order having
limit offset distinct case when then else end between like ilike asc desc nulls first last over partition
union all except intersect with cast true false exists any some interval answer ehr sql pl rows range
""".split())
_ALIAS = re.compile(r"^(t|c)\d+$")
_FUNCTION_STEMS = frozenset(stem(w) for w in STOPWORDS)


def content_names(code: str) -> frozenset[str]:
    """The names in ``code`` that can carry meaning (tables, columns, functions, constants),
    plus ``select:<name>`` for the names of the outermost SELECT list (what it returns)."""
    names = {w for w in code_words(code) if w not in _SQL_WORDS and not _ALIAS.match(w) and len(w) > 1}
    names.update(f"select:{w}" for w in selected_words(code) if w not in _SQL_WORDS and not _ALIAS.match(w))
    return frozenset(names)


def _content(words: Iterable[str]) -> set[str]:
    """Single content words: a pair ("when did") is one wording and a function word says nothing."""
    return {w for w in words if " " not in w and w not in _FUNCTION_STEMS}


class WordCodeEvidence:
    """Co-occurrence of question words and code names over the remembered cells."""

    def __init__(self, *, min_support: int = MIN_SUPPORT, min_share: float = MIN_SHARE,
                 max_base: float = MAX_BASE, min_coverage: float = MIN_COVERAGE, min_kinds: int = MIN_KINDS,
                 check_names: bool = True) -> None:
        self.check_names = check_names
        self.min_kinds = min_kinds
        self.min_support = min_support
        self.min_share = min_share
        self.max_base = max_base
        self.min_coverage = min_coverage
        self._words: dict[int, frozenset[str]] = {}
        self._names: dict[int, frozenset[str]] = {}
        self._kind: dict[int, str] = {}
        self._by_word: dict[str, set[int]] = {}
        self._by_name: dict[str, set[int]] = {}
        self._lock = threading.RLock()
        self._version = 0
        self._implied: dict[str, frozenset[str]] = {}
        self._announced: dict[str, frozenset[str] | None] = {}
        self._announcers: dict[str, frozenset[str]] = {}
        self._cache_version = 0

    def add(self, key: int, words: Iterable[str], names: Iterable[str], kind: str = "") -> None:
        """Record one cell: its question words, its code names and its kind (skeleton)."""
        with self._lock:
            self.remove(key)
            words, names = frozenset(words), frozenset(names)
            self._words[key], self._names[key], self._kind[key] = words, names, kind
            for word in words:
                self._by_word.setdefault(word, set()).add(key)
            for name in names:
                self._by_name.setdefault(name, set()).add(key)
            self._version += 1

    def remove(self, key: int) -> None:
        with self._lock:
            words = self._words.pop(key, None)
            if words is None:
                return
            for word in words:
                self._by_word.get(word, set()).discard(key)
            for name in self._names.pop(key, frozenset()):
                self._by_name.get(name, set()).discard(key)
            self._kind.pop(key, None)
            self._version += 1

    def _fresh(self) -> None:
        if self._cache_version != self._version:
            self._implied.clear()
            self._announced.clear()
            self._announcers.clear()
            self._cache_version = self._version

    def implied(self, word: str) -> frozenset[str]:
        """Names the code (almost) always uses when a question says ``word``."""
        with self._lock:
            self._fresh()
            cached = self._implied.get(word)
            if cached is not None:
                return cached
            keys = self._by_word.get(word, set())
            total = max(len(self._words), 1)
            found: frozenset[str] = frozenset()
            kinds = {self._kind[key] for key in keys}
            if self.min_support <= len(keys) <= self.max_base * total and len(kinds) >= self.min_kinds:
                counts: Counter[str] = Counter()
                for key in keys:
                    counts.update(self._names[key])
                need = self.min_share * len(keys)
                found = frozenset(name for name, n in counts.items()
                                  if n >= need and len(self._by_name.get(name, ())) <= self.max_base * total)
            self._implied[word] = found
            return found

    def announcing(self, name: str) -> frozenset[str] | None:
        """Words that announce ``name`` in questions, when questions reliably do (else None)."""
        with self._lock:
            self._fresh()
            if name in self._announced:
                return self._announced[name]
            keys = self._by_name.get(name, set())
            total = max(len(self._words), 1)
            result: frozenset[str] | None = None
            if self.min_support <= len(keys) <= self.max_base * total:
                candidates: Counter[str] = Counter()
                for key in keys:
                    candidates.update(self._words[key])
                words = frozenset(w for w in candidates if name in self.implied(w))
                if words:
                    covered = sum(1 for key in keys if self._words[key] & words)
                    if covered >= self.min_coverage * len(keys):
                        result = words
            self._announced[name] = result
            return result

    def announcers(self, name: str) -> frozenset[str]:
        """Words whose questions' code mostly uses ``name`` (at least ``ANNOUNCE_SHARE`` of
        ``ANNOUNCE_SUPPORT`` or more cells): the ways analysts have asked for it."""
        with self._lock:
            self._fresh()
            cached = self._announcers.get(name)
            if cached is not None:
                return cached
            keys = self._by_name.get(name, set())
            total = max(len(self._words), 1)
            found: frozenset[str] = frozenset()
            if keys and len(keys) <= self.max_base * total:
                with_name: Counter[str] = Counter()
                for key in keys:
                    with_name.update(self._words[key])
                # single content words: a word pair ("prescribed first") is one wording, not a way of
                # asking, and a function word ("did") comes with whatever a small memory holds
                found = frozenset(w for w in _content(with_name) if with_name[w] >= ANNOUNCE_SUPPORT
                                  and with_name[w] >= ANNOUNCE_SHARE * len(self._by_word.get(w, ())))
            self._announcers[name] = found
            return found

    def unasked_selection(self, words: frozenset[str], cell_words: frozenset[str], names: frozenset[str],
                          tables: frozenset[str] = frozenset()) -> list[str]:
        """What the cell returns (``select:`` names) that its own question announces with a
        word, and the new question with none: "when did patient X *depart*" returns the
        discharge time, "when did patient Y *come* to the hospital" asks for another."""
        dropped = []
        for name in sorted(names):
            if not name.startswith("select:") or name.removeprefix("select:") in tables:
                continue  # a table's name qualifies a returned column; the column says what is returned
            announcing = self.announcers(name)
            if announcing & cell_words and not announcing & words:
                dropped.append(name.removeprefix("select:"))
        return dropped

    def unsupported_words(self, words: Iterable[str], names: frozenset[str],
                          known: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
        """``(word, name)`` pairs: the question says ``word``, which always comes with
        ``name`` in code, and the code lacks ``name``. Words in ``known`` (said by the
        questions of this very kind of cell) are never held against it."""
        missing = []
        for word in words:
            if word in known:
                continue
            for name in self.implied(word):
                if name not in names:
                    missing.append((word, name))
        return missing

    def dropped_words(self, words: frozenset[str], cell_words: frozenset[str],
                      names: frozenset[str]) -> list[tuple[str, str]]:
        """``(word, name)`` pairs: the cell's question says ``word``, which always comes with
        ``name`` in code, the cell's code uses ``name``, and the new question says no word that
        comes with it. "When did patient Y get their last *input*" (``inputevents``) does not
        answer "when did patient X get admitted to the hospital for the last time"."""
        said = {name for word in words for name in self.implied(word)}
        dropped = sorted(_content(cell_words - words))
        return [(word, name) for word in dropped
                for name in sorted(self.implied(word) & names, key=self._rarest) if name not in said]

    def _rarest(self, name: str) -> tuple[int, str]:
        """Sort key: the name fewest cells use first (``inputevents`` says more than ``icustays``)."""
        return len(self._by_name.get(name, ())), name

    def unannounced_names(self, words: frozenset[str], names: Iterable[str]) -> list[str]:
        """Names of the code that questions always announce, with no announcing word here."""
        out = []
        for name in names:
            announcing = self.announcing(name)
            if announcing is not None and not (announcing & words):
                out.append(name)
        return out


class SchemaEvidence:
    """What the schema's own words say about tables: "lab" names ``labevents``,
    "output" ``outputevents``, "specimen" ``microbiologyevents``.

    A word belongs to a table when the table's name or its knowledge description
    (the "row" and "description" sentences) uses it, and to at most two tables
    (words every table uses say nothing). Works from the first remembered cell, where
    ``WordCodeEvidence`` needs many.
    """

    MAX_TABLES = 3
    MAX_COMMON = 0.3  # tables used by more of the remembered cells are not checked for
    MAX_EXCEPTIONS = 0.05  # share of remembered questions with the word whose code uses none of its tables

    def __init__(self, ehr: Database, memory: WordCodeEvidence | None = None) -> None:
        self.memory = memory
        self._checked: dict[str, bool] = {}
        self._checked_version = -1
        from ehr_magic.reuse.lexicon import OPERATORS
        from ehr_magic.reuse.unanswerable import STOPWORDS

        tables = {t.lower() for t in ehr.tables()}
        texts: dict[str, str] = {t: t.replace("_", " ") for t in tables}
        knowledge = getattr(ehr, "knowledge", None)
        self.joins: dict[str, set[str]] = {t: set() for t in tables}
        if knowledge is not None:
            for name, info in knowledge.tables.items():
                if name.lower() in texts:
                    texts[name.lower()] += f" {info.row} {info.description}"
                    for target in info.join_targets:
                        self.joins[name.lower()].add(target.lower())
                        self.joins.setdefault(target.lower(), set()).add(name.lower())
        owners: dict[str, set[str]] = {}
        for table, text in texts.items():
            for word in re.findall(r"[a-z][a-z0-9]+", text.lower()):
                if word in STOPWORDS or len(word) < 3 or word in OPERATORS:
                    continue
                owners.setdefault(stem(word), set()).add(table)
        self.tables = tables
        self.word_tables = {w: frozenset(ts) for w, ts in owners.items() if len(ts) <= self.MAX_TABLES}

    def tables_of(self, word: str) -> frozenset[str]:
        """The tables ``word`` names, unless remembered cells contradict it (questions
        saying the word whose code uses none of those tables)."""
        tables = self.word_tables.get(word)
        if not tables:
            return frozenset()
        memory = self.memory
        if memory is None:
            return tables
        with memory._lock:
            if self._checked_version != memory._version:
                self._checked.clear()
                self._checked_version = memory._version
            ok = self._checked.get(word)
            if ok is None:
                keys = memory._by_word.get(word, set())
                exceptions = sum(1 for key in keys if not (tables & memory._names[key]))
                ok = self._checked[word] = exceptions <= self.MAX_EXCEPTIONS * len(keys)
        return tables if ok else frozenset()

    def unsupported_words(self, words: Iterable[str], names: frozenset[str], known: frozenset[str]) -> list[str]:
        """Question words naming tables the code does not use at all."""
        out = []
        for word in words:
            if word in known:
                continue
            tables = self.tables_of(word)
            if tables and not (tables & names):
                out.append(word)
        return out

    def unmentioned_tables(self, entry_words: Iterable[str], words: frozenset[str], names: frozenset[str],
                           slot_tables: set[str]) -> list[str]:
        """Tables the remembered question names with a word (and its code uses) that the
        new question names neither by a word nor through a value of a related table."""
        covered = set(slot_tables)
        for table in slot_tables:
            covered |= self.joins.get(table, set())
        said = {t for w in words for t in self.tables_of(w)}
        missing = []
        for word in entry_words:
            for table in self.tables_of(word):
                if table in names and table not in said and table not in covered and table not in missing \
                        and not self._common(table):
                    missing.append(table)
        return missing

    def _common(self, table: str) -> bool:
        """A table most remembered cells use (to find patients, visits...) says little."""
        memory = self.memory
        if memory is None or not memory._words:
            return False
        return len(memory._by_name.get(table, ())) > self.MAX_COMMON * len(memory._words)
