"""Matching a new question to remembered templates.

A question matches a template when

1. its values fill the template's slots with values of the same types, it has the
   template's fixed values and no other id, number or time (``assign``);
2. the rest of its words agree with the template's words: an IDF-weighted Dice
   overlap of stemmed words and word pairs, the weights learned from memory's own
   questions, at least ``threshold``;
3. nothing contradicts the reuse:
   * the same operator words (maximum, first, daily... ``lexicon``) and no
     contrasting ones (how much / how many);
   * no vocabulary value of the question left unused that the template does not say;
   * every question word that memory always sees with some name in the code (or that
     the schema's descriptions tie to a table) finds that name in this code, and the
     names this code uses that questions always announce are announced (``evidence``).

Templates with the same skeleton answer the same kind of question, so candidates
are ranked by skeleton: the best must beat the best *other* skeleton by ``margin``.
``threshold`` and ``margin`` were chosen for precision (a wrong answer costs ten
times what an abstention does); see ``bench/bench_reuse.py`` and docs/reuse.md.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from ehr_magic.engines import QUERY_FAILURES
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.reuse.assign import (
    assignments,
    features,
    order_values,
    question_words,
    replaced_spans,
    unused_vocabulary,
)
from ehr_magic.reuse.attributes import AttributeWords
from ehr_magic.reuse.evidence import SchemaEvidence, WordCodeEvidence, content_names
from ehr_magic.reuse.lexicon import contradicts, operators
from ehr_magic.reuse.literals import code_literals
from ehr_magic.reuse.template import Template, analyse, inconsistent_links, residual_tokens
from ehr_magic.knowledge.handle import Database
from ehr_magic.reuse.values import Detected, Value, ValueDetector, tokenize
from ehr_magic.text import normalise, stem

DEFAULT_THRESHOLD = 0.40
DEFAULT_MARGIN = 0.05
FUZZY_MIN_SCORE = 90.0  # similarity (rapidfuzz ratio, 0-100) a differently spelled value needs
FUZZY_GAP = 5.0  # ... and its lead over the next stored value
FUZZY_WORDS = 8  # longest wording looked up
FUZZY_CELLS = 200  # cells of a signature whose wording locates the value


@dataclass
class Candidate:
    """One template with the question's values assigned to its slots."""

    template: Template
    values: list[Value]  # the question's value for each template slot (same order)
    fixed: list[Value]  # the question's values equal to the template's fixed values
    score: float
    tokens: tuple[str, ...]  # the question's words with its values as placeholders


@dataclass
class MatchResult:
    """The outcome of matching one question."""

    question: str
    detected: Detected
    best: Candidate | None = None
    runner_up: Candidate | None = None  # best candidate of another skeleton
    ranked: list[Candidate] = field(default_factory=list)  # best candidate per skeleton, best first
    accepted: bool = False
    reason: str = ""

    @property
    def score(self) -> float:
        return self.best.score if self.best else 0.0

    @property
    def margin(self) -> float:
        if self.best is None:
            return 0.0
        return self.best.score - (self.runner_up.score if self.runner_up else 0.0)


@dataclass
class _Query:
    """One reading of the question (an assignment of its values), shared by the templates checked."""

    values: list[Value]
    fixed: list[Value]
    tokens: tuple[str, ...]
    stems: frozenset[str]  # the question's stemmed words, values left out
    features: frozenset[str]
    weight: float
    ops: Counter[str]
    words: frozenset[str]
    unused: list[Value]
    verdicts: dict[str, str] = field(default_factory=dict)  # skeleton -> evidence conflict ("" = none)


class ReuseIndex:
    """Analysed memory entries of one database, searchable by question."""

    def __init__(self, ehr: Database, *, detector: ValueDetector | None = None,
                 threshold: float = DEFAULT_THRESHOLD, margin: float = DEFAULT_MARGIN,
                 check_operators: bool = True, check_unused_values: bool = True,
                 check_evidence: bool = True, check_schema_words: bool = True, check_attributes: bool = True,
                 evidence: dict | None = None) -> None:
        self.ehr = ehr
        self.detector = detector or ValueDetector(ehr)
        self.threshold = threshold
        self.margin = margin
        self.check_operators = check_operators
        self.check_unused_values = check_unused_values
        self.check_evidence = check_evidence
        self.evidence = WordCodeEvidence(**(evidence or {}))
        self.schema_evidence = SchemaEvidence(ehr, self.evidence) if check_schema_words else None
        self.attributes = AttributeWords(ehr) if check_attributes else None
        self.templates: dict[int, Template] = {}
        self._by_signature: dict[tuple, list[int]] = {}
        self._structures: dict[str, set[int]] = {}
        self._df: Counter[str] = Counter()
        self._features: dict[int, frozenset[str]] = {}
        self._names: dict[int, frozenset[str]] = {}
        self._said_constants: dict[int, tuple[tuple[str, ...], ...]] = {}
        self._skeleton_words: dict[str, Counter[str]] = {}
        self._question_words: Counter[str] = Counter()
        self._vocab_types: set[str] = set()
        self._known: set[str] | None = None
        self._value_words: tuple[int, set[str]] = (-1, set())
        self._table_names: set[str] | None = None
        self._lowered_tables: frozenset[str] | None = None
        self._lock = threading.RLock()
        self._version = 0
        self._weights: tuple[int, dict[str, float], dict[int, float]] = (-1, {}, {})
        knowledge = getattr(ehr, "knowledge", None)
        if knowledge is not None:
            self.detector.vocabulary.add_columns(knowledge.vocabulary_columns())

    def __len__(self) -> int:
        return len(self.templates)

    # -- building ------------------------------------------------------------------------

    def add_many(self, entries: Iterable[tuple[int, str, str, str]]) -> None:
        """Analyse and index ``(id, question, code, origin)`` entries."""
        entries = list(entries)
        for _, question, code, _ in entries:  # identifier columns first: analysis types ids with them
            self._learn_ids(question, code_literals(code))
        analysed = [analyse(entry_id, question, code, self.detector, origin=origin)
                    for entry_id, question, code, origin in entries]
        groups: dict[str, list[Template]] = {}
        for template in analysed:
            groups.setdefault(template.structure, []).append(template)
        with self._lock:
            for template in analysed:
                self._remove(template.entry_id)
            for structure, members in groups.items():
                older = [self.templates[i] for i in self._structures.get(structure, ()) if i in self.templates]
                self._check_group(older + members, fresh={t.entry_id for t in members})

    def add(self, entry_id: int, question: str, code: str, *, origin: str = "accepted") -> Template:
        """Analyse and index one entry."""
        self.add_many([(entry_id, question, code, origin)])
        return self.templates[entry_id]

    def remove(self, entry_id: int) -> None:
        with self._lock:
            self._remove(entry_id)

    def _check_group(self, members: list[Template], fresh: set[int]) -> None:
        """Index the fresh templates of one structure, dropping links the other cells of
        the structure refute (and re-indexing older cells whose links change)."""
        bad = inconsistent_links(members)
        for member in members:
            exclude = _exclusions(member, bad)
            if exclude == member.excluded and member.entry_id not in fresh:
                continue
            renewed = member if exclude == member.excluded else analyse(
                member.entry_id, member.question, member.code, self.detector, origin=member.origin, exclude=exclude)
            self._remove(member.entry_id)
            self._insert(renewed)

    def _insert(self, template: Template) -> None:
        entry_id = template.entry_id
        self.templates[entry_id] = template
        self._structures.setdefault(template.structure, set()).add(entry_id)
        self._by_signature.setdefault(template.signature, []).append(entry_id)
        self._features[entry_id] = features(template.stems)
        self._df.update(self._features[entry_id])
        self._names[entry_id] = content_names(template.skeleton)
        self._said_constants[entry_id] = said_constants(template)
        words = question_words(template.stems)
        self.evidence.add(entry_id, words, self._names[entry_id], template.skeleton)
        self._skeleton_words.setdefault(template.skeleton, Counter()).update(words)
        self._question_words.update({t.text for t in tokenize(template.question)})
        self._version += 1
        for slot in template.slots:
            if slot.kind == "vocab":
                self._vocab_types.add(slot.type)
            if slot.kind == "id":
                for start, _ in slot.spans:
                    word = _word_before(template.question, start)
                    if word:
                        self.detector.entity_words.setdefault(word, slot.type.removeprefix("id:"))

    def _remove(self, entry_id: int) -> None:
        template = self.templates.pop(entry_id, None)
        if template is None:
            return
        ids = self._by_signature.get(template.signature, [])
        if entry_id in ids:
            ids.remove(entry_id)
        self._structures.get(template.structure, set()).discard(entry_id)
        self._df.subtract(self._features.pop(entry_id, frozenset()))
        self._names.pop(entry_id, None)
        self._said_constants.pop(entry_id, None)
        self.evidence.remove(entry_id)
        self._skeleton_words[template.skeleton].subtract(question_words(template.stems))
        self._question_words.subtract({t.text for t in tokenize(template.question)})
        self._version += 1

    def _learn_ids(self, question: str, literals: Iterable) -> None:
        """Identifier columns: ``*id`` columns the code compares with a number the question says."""
        numbers = {t.text for t in tokenize(question) if t.text.isdigit()}
        tables = self._tables()
        for literal in literals:
            name = literal.column_name
            if literal.kind != "number" or not name or not name.endswith("id") or literal.value not in numbers:
                continue
            if literal.table in tables:
                self.detector.add_id_column(name, literal.table)
            elif name not in self.detector.id_columns:  # an alias: the smallest tables with the column
                for table in sorted((t for t in tables if name in self.ehr.columns(t)), key=self.ehr.count)[:3]:
                    self.detector.add_id_column(name, table)

    def _tables(self) -> set[str]:
        if self._table_names is None:
            self._table_names = set(self.ehr.tables())
        return self._table_names

    def _lower_tables(self) -> frozenset[str]:
        if self._lowered_tables is None:
            self._lowered_tables = frozenset(t.lower() for t in self._tables())
        return self._lowered_tables

    def known_words(self, *, stored_values: bool = True) -> set[str]:
        """Words of remembered questions, the schema and (with ``stored_values``) its stored values.

        Without them, a word of a stored value ("color" of a lab test) outside any value the
        question names names nothing: "drug colors" asks for what no table records."""
        if self._known is None:
            from ehr_magic.reuse.unanswerable import schema_words

            self._known = schema_words(self.ehr)
        known = self._known | {w for w, n in self._question_words.items() if n > 0}
        if not stored_values:
            return known
        columns = len(self.detector.vocabulary.columns)
        if self._value_words[0] != columns:  # re-read only when columns were indexed since
            self._value_words = (columns, self.detector.vocabulary.words())
        return known | self._value_words[1]

    def _weights_now(self) -> tuple[dict[str, float], dict[int, float]]:
        """IDF weight per feature and each template's total weight (recomputed after changes)."""
        version, idf, totals = self._weights
        if version == self._version:
            return idf, totals
        count = max(len(self.templates), 1)
        idf = {f: math.log(1 + count / (1 + n)) for f, n in self._df.items() if n > 0}
        default = math.log(1 + count)
        totals = {i: sum(idf.get(f, default) for f in feats) for i, feats in self._features.items()}
        self._weights = (self._version, idf, totals)
        return idf, totals

    # -- matching ------------------------------------------------------------------------

    def match(self, question: str) -> MatchResult:
        """The best template for ``question`` and whether it is confident enough."""
        detected, ranked = self.candidates(question)
        if not self._confident(ranked):  # values spelled differently from the database: a second, slower pass
            detected, ranked = self.candidates(question, fuzzy=True)
        result = MatchResult(question, detected, ranked=ranked)
        if not ranked:
            result.reason = "no remembered cell fits this question's values and words"
            return result
        result.best = ranked[0]
        result.runner_up = ranked[1] if len(ranked) > 1 else None
        best = result.best
        if best.score < self.threshold:
            result.reason = (f"the closest remembered cell #{best.template.entry_id} is worded too differently "
                             f"(similarity {best.score:.2f} < {self.threshold:.2f})")
        elif result.margin < self.margin:
            other = result.runner_up.template.entry_id if result.runner_up else "?"
            result.reason = (f"remembered cells #{best.template.entry_id} and #{other} answer different kinds of "
                             f"question and fit about equally well ({best.score:.2f} and "
                             f"{best.score - result.margin:.2f})")
        else:
            result.accepted = True
        return result

    def _confident(self, ranked: list[Candidate]) -> bool:
        if not ranked or ranked[0].score < self.threshold:
            return False
        return len(ranked) < 2 or ranked[0].score - ranked[1].score >= self.margin

    def candidates(self, question: str, trace: list | None = None, *,
                   fuzzy: bool = False) -> tuple[Detected, list[Candidate]]:
        """Every template the question fits, scored; the best per skeleton, best first.

        ``trace``, when given, receives ``(entry id, score, why refused)`` for each
        template the question's values fit but a check refused. ``fuzzy`` also looks
        for vocabulary values spelled differently from the database (slower)."""
        with self._lock:
            vocab_types = set(self._vocab_types)
            signatures = [(sig, list(ids)) for sig, ids in self._by_signature.items() if ids]
            idf, totals = self._weights_now()
        all_types = vocab_types | {f"vocab:{t}.{c}" for t, c in self.detector.vocabulary.columns}
        detected = self.detector.detect(question, vocab_types=all_types)
        slot_values = Detected(detected.question, detected.tokens,
                               [v for v in detected.values if v.kind != "vocab" or v.type in vocab_types])
        default = math.log(1 + max(len(self.templates), 1))
        best: dict[str, Candidate] = {}
        fuzzy_cache: dict[tuple[str, str, bool], Value | None] = {}
        for signature, ids in signatures:
            signature_values = slot_values
            extra = self._fuzzy_values(signature, ids, slot_values, fuzzy_cache) if fuzzy else []
            if extra:
                signature_values = Detected(detected.question, detected.tokens, slot_values.values + extra)
            for values, fixed in assignments(signature, signature_values):
                query = self._query(detected, values, fixed, idf, default)
                for entry_id in ids:
                    template = self.templates.get(entry_id)
                    if template is None:
                        continue
                    shared = sum(idf.get(f, default) for f in query.features & self._features[entry_id])
                    score = 2 * shared / ((query.weight + totals.get(entry_id, 0.0)) or 1.0)
                    current = best.get(template.skeleton)
                    if current is not None and score <= current.score:
                        continue
                    why = self._refusal(template, query)
                    ordered = None if why else order_values(template, values, detected.tokens)
                    if ordered is None:
                        if trace is not None:
                            trace.append((entry_id, score, why or "cannot tell which value goes where"))
                        continue
                    best[template.skeleton] = Candidate(template, ordered, fixed, score, query.tokens)
        ranked = sorted(best.values(), key=lambda c: (-c.score, c.template.entry_id))
        return detected, ranked

    def _fuzzy_values(self, signature: tuple, ids: list[int], detected: Detected,
                      cache: dict[tuple[str, str, bool], Value | None]) -> list[Value]:
        """Vocabulary values the question spells differently from the database ("RDW"
        for 'rdw' is exact already; "metoprolol" for 'metoprolol tartrate' is not).

        For a slot type with no exact value in the question, the words around the slot
        in the signature's cells locate the question's wording; ``ehr.lookup`` must then
        find one stored value clearly closest (two equally close names: no value). A
        slot the code matches by pattern ('%sepsis%') takes any words the column holds."""
        slot_types = signature[0]
        missing = {t for t in slot_types if t.startswith("vocab:") and not detected.of_type(t)}
        if not missing:
            return []
        tokens = detected.tokens
        words = [t.text for t in tokens]
        hard = [v for v in detected.values if v.kind in ("id", "time")]  # a number may be part of a name
        found: list[Value] = []
        gaps: set[tuple[str, int, int, bool]] = set()
        for entry_id in ids[:FUZZY_CELLS]:
            template = self.templates.get(entry_id)
            if template is None:
                continue
            patterns = {s.type for s in template.slots if s.pattern}
            for position, token in enumerate(template.tokens):
                value_type = token[1:-1] if token.startswith("<") else ""
                if value_type not in missing or position == 0:
                    continue
                left = template.tokens[position - 1]
                right = template.tokens[position + 1] if position + 1 < len(template.tokens) else None
                if left.startswith("<") or (right or "").startswith("<"):
                    continue
                for i, word in enumerate(words):
                    if word != left:
                        continue
                    if right is None:  # the value ends the question
                        if 1 <= len(words) - i - 1 <= FUZZY_WORDS:
                            gaps.add((value_type, i + 1, len(words), value_type in patterns))
                        continue
                    for j in range(i + 2, min(len(words), i + 2 + FUZZY_WORDS)):
                        if words[j] == right:
                            gaps.add((value_type, i + 1, j, value_type in patterns))
                            break
        for value_type, i, j, pattern in sorted(gaps):
            start, end = tokens[i].start, tokens[j - 1].end
            if any(v.start < end and start < v.end for v in hard):
                continue
            text = detected.question[start:end]
            key = (value_type, text.lower(), pattern)
            if key not in cache:
                cache[key] = (self._pattern_value if pattern else self._lookup_value)(value_type, text, start, end)
            value = cache[key]
            if value is not None:
                found.append(value)
        return found

    def _pattern_value(self, value_type: str, text: str, start: int, end: int) -> Value | None:
        """Words a pattern slot can take: any the column's values contain."""
        table, column = value_type.removeprefix("vocab:").split(".", 1)
        try:
            hit = self.ehr.sql(f"SELECT 1 FROM {quote(table)} WHERE CAST({quote(column)} AS VARCHAR) ILIKE ? LIMIT 1",
                               [f"%{text}%"]).height
        except QUERY_FAILURES:  # a column we cannot search gives no value
            return None
        if not hit:
            return None
        return Value("vocab", value_type, start, end, text, text, {"value": text}, ("vocab", value_type, text))

    def _lookup_value(self, value_type: str, text: str, start: int, end: int) -> Value | None:
        """The stored value spelled like ``text`` (whole, not a part: "hospital" is not
        'transfer from hospital'), when one is clearly closest."""
        table, column = value_type.removeprefix("vocab:").split(".", 1)
        try:
            found = self.ehr.lookup(table, column, text, k=5, scores=True)
        except QUERY_FAILURES:  # a column we cannot look up gives no value
            return None
        wanted = normalise(text)
        matches = sorted(((fuzz.ratio(wanted, normalise(value)), value) for value, _ in found), reverse=True)
        if not matches or matches[0][0] < FUZZY_MIN_SCORE:
            return None
        if len(matches) > 1 and matches[1][0] > matches[0][0] - FUZZY_GAP:
            return None  # two stored values about as close: which one is meant is not clear
        score, stored = matches[0]
        return Value("vocab", value_type, start, end, text, stored, {"value": stored}, ("vocab", value_type, stored),
                     alternatives=tuple(m[1] for m in matches[1:]), score=score)

    def _query(self, detected: Detected, values: list[Value], fixed: list[Value], idf: dict[str, float],
               default: float) -> _Query:
        tokens = residual_tokens(detected.tokens, replaced_spans(values, fixed, detected.tokens))
        stems = tuple(stem(t) for t in tokens)
        feats = features(stems)
        words = frozenset(s for s in stems if not s.startswith("<"))
        return _Query(values, fixed, tokens, words, feats, sum(idf.get(f, default) for f in feats), operators(tokens),
                      question_words(stems), unused_vocabulary(detected, values, fixed))

    def _refusal(self, template: Template, query: _Query) -> str:
        """Why this template must not answer this reading of the question ("" if none)."""
        if self.check_operators:
            if query.ops != template.ops:
                return f"operator words differ: {dict(query.ops)} vs {dict(template.ops)}"
            if contradicts(query.tokens, template.tokens):
                return "contrasting words (how much / how many)"
        if self.check_unused_values and query.unused:
            stems = set(template.stems)
            for value in query.unused:
                if not {stem(w) for w in normalise(value.text).split()} <= stems:
                    return f"the question also names {value.text!r}, which the cell does not use"
        for constant in self._said_constants.get(template.entry_id, ()):
            if not _says(query.tokens, constant):
                return (f"the cell looks for {' '.join(constant)!r}, which its question names and the new "
                        "question does not")
        if self.attributes is not None:
            other = self.attributes.conflict(query.stems, template.stems, self._names[template.entry_id])
            if other:
                return other
        if self.check_evidence:
            # the cell's own wording, not its kind's: checked per cell, not cached per skeleton
            cell_words = question_words(template.stems)
            names = self._names[template.entry_id]
            dropped = self.evidence.unasked_selection(query.words, cell_words, names, self._lower_tables())
            if dropped:
                return (f"the cell returns {dropped[0]!r}, which its question announces and the new question "
                        f"does not ask for")
            unsaid = self.evidence.dropped_words(query.words, cell_words, names)
            if unsaid:  # the tables of the question's values, read only when there is something to excuse
                stored = self._value_tables(query)
                unsaid = [(word, name) for word, name in unsaid if name not in stored]
            if unsaid:
                word, name = unsaid[0]
                return (f"the cell's question says {word!r}, which comes with {name!r} in its code, and the new "
                        f"question says nothing that does")
            verdict = query.verdicts.get(template.skeleton)
            if verdict is None:
                verdict = query.verdicts[template.skeleton] = self._evidence_conflict(template, query)
            return verdict
        return ""

    def _value_tables(self, query: _Query) -> set[str]:
        """The tables the question's stored values name: their own and those joined to them
        ("phosphate", a lab test's name, names the lab results too)."""
        tables = _stored_in(query)
        if self.schema_evidence is not None:
            tables |= {joined for table in tables for joined in self.schema_evidence.joins.get(table, ())}
        return tables

    def _evidence_conflict(self, template: Template, query: _Query) -> str:
        names = self._names[template.entry_id]
        own = frozenset(w for w, n in self._skeleton_words.get(template.skeleton, Counter()).items() if n > 0)
        missing = self.evidence.unsupported_words(query.words, names, own)
        if missing:
            word, name = missing[0]
            return f"questions saying {word!r} use {name!r}, which this cell's code does not"
        if self.evidence.check_names:
            silent = self.evidence.unannounced_names(query.words, names)
            if silent:
                return f"the cell's code uses {silent[0]!r}, which the question does not mention"
        schema = self.schema_evidence
        if schema is not None:
            words = schema.unsupported_words(query.words, names, own)
            if words:
                return f"{words[0]!r} names tables this cell's code does not use"
            entry_words = {w for w in template.stems if not w.startswith("<")}
            tables = schema.unmentioned_tables(entry_words, query.words, names, _stored_in(query))
            if tables:
                return f"the cell's question names table {tables[0]!r}, the new question does not"
        return ""


def _stored_in(query: _Query) -> set[str]:
    """The tables whose columns store the question's vocabulary values."""
    return {v.type.removeprefix("vocab:").split(".")[0] for v in query.values if v.kind == "vocab"}


def said_constants(template: Template) -> tuple[tuple[str, ...], ...]:
    """Stored values the code compares a column with, that the cell's question says word for
    word and that no slot carries: a value too short or too odd to be read as one ("got a
    *l* laboratory test", code ``label = 'l'``). A new question must say them too: without
    the word, the cell looks for something the question never asked about."""
    linked = {link.literal for link in template.links}
    found = []
    for position, literal in enumerate(template.literals):
        if position in linked or literal.kind != "string" or not literal.column:
            continue
        words = tuple(t.text for t in tokenize(literal.value))
        if words and _says(template.tokens, words) and words not in found:
            found.append(words)
    return tuple(found)


def _says(tokens: tuple[str, ...], words: tuple[str, ...]) -> bool:
    n = len(words)
    return any(tokens[i:i + n] == words for i in range(len(tokens) - n + 1))


def _exclusions(template: Template, bad: set[tuple[int, str, str]]) -> frozenset[tuple[int, str, str]]:
    """The refused links that concern this template's values."""
    types = {s.type for s in template.slots} | {v.type for v in template.fixed}
    return frozenset(b for b in bad if b[1] in types) | template.excluded


def _word_before(text: str, position: int) -> str:
    words = [t.text for t in tokenize(text[:position]) if not t.text.isdigit()]
    return words[-1] if words else ""
