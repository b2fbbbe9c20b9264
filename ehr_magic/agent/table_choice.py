"""Which tables a question needs, so that only those are described in full in the prompt.

A small model's window holds the full description of a few tables, not of a whole EHR
(the MIMIC-IV demo's 31 tables take about 9k tokens). Each table gets a score from four
signals, all read from the dataset's own knowledge and data, none written per schema:

- the question's words against the table's words: its name and column names (split:
  ``LabTestKey`` -> lab test key; a word inside a name run together, 'test' in
  ``labtestkey``, counts for less, and never across two words of a name), its row,
  description and column meanings, and the conventions that name it (IDF-weighted, so words
  that every table shares count little; a word of that prose only, for less than one of its
  names; two words meet by their first five letters only as forms of one word, so 'quality'
  is not 'qualitative', and a word is as rare as the tables using it in the question's sense:
  'medical' in a care unit's name does not make 'medication' common); a word counts for the
  other words of its group in ``schema_words.txt`` ('cost' finds a charges table, 'drug' a
  medication-orders table, 'diagnoses' a table named for conditions, whatever the schema calls
  them);
- stored values: how much of one looked-up value (``vocabulary`` columns: lab labels,
  drug names...) the question says, IDF-weighted: all of it ('ptt', 'urea nitrogen') points
  at the table as surely as its name would, a part of it far less (one value's share, squared,
  never a sum over the words of many values: a column of 100k titles holds most words);
- memory: the tables used by the code of the few-shot examples chosen for the question;
- joins: the spine tables that most others join to (admissions in MIMIC, patient in
  eICU) always, and the tables a chosen table joins to, at a share of its score, up to
  two joins away; a table chosen by a whole stored value passes on nearly all of it
  (d_items 'lr' -> inputevents -> icustays), since its values are useless without them;
  a dictionary (a table that joins nothing and that a few others join) brings those too
  (lab tests -> lab results; 'weight' in item names -> the observations that record it); a
  table of another module that a chosen table merely joins (a visit's care site, its costs)
  is listed, and described in full only for what the question says of it.

- codes named through others: a dictionary that many tables join (OMOP's concept) lends each of
  them the names of the codes it records (``recorded_values``: 'sinusitis' -> condition_occurrence);
  a name found in a table of other names of a dictionary's entries (OMOP's concept_synonym) counts
  for the dictionary; a summary of another table (``derived_from``: OMOP's eras) shares the codes
  named there when the question also says a word only the summary has ('episodes'), and a word of
  its name that its source's name has too ('condition') names the source; a question
  asking for a code with everything below it ('any kind of', ``hierarchy_phrases.txt``) brings the
  schema's hierarchy table (knowledge ``hierarchy``), and so does one naming a code of a table whose
  codes questions name by a broader one (``by_hierarchy``: drug products asked about by ingredient),
  or saying a drug the clinical vocabulary knows, whether or not a stored name matches it ('antibiotics');
  a term linking found only in part counts, as surely as it was found, for the tables that record
  the value it was found as ('appendix' -> 'Rupture of appendix' -> condition_occurrence).

A table that holds no rows (``EHR.empty_tables``: a header row only, or none in the catalog)
counts half: in a tie, the one that holds the rows is read; a question about it still finds it.

When no table is sure, the likeliest few are shown in one line each rather than none.

Tables scoring at least ``THRESHOLD`` are chosen, best first. Those the question needs in full
score two fifths of the best, or are as sure as a whole stored value said (two tables each named by a
value are both needed, however many words point at one of them). They are ranked by what the
question says of each, before what a partner passes on (the diagnoses asked for before the ward
stays of the visits they happened in), and the prompt budget (``ehr_magic.agent.budget``) drops
the last first when the window is small. Every
other table still appears in the one-line index of the system prompt, and the model
can call ``ehr.describe(table)``.
"""

from __future__ import annotations

import math
import re
import weakref
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import numpy as np
from rapidfuzz import fuzz

from ehr_magic.agent.recorded_values import recorded_vocabularies
from ehr_magic.knowledge.drafting.meaning import ADVICE as DRAFTED_ADVICE
from ehr_magic.knowledge.drafting.naming import singular
from ehr_magic.knowledge.handle import Database
from ehr_magic.linking.clinical_vocabulary import clinical_vocabulary, written_as_shorthand
from ehr_magic.linking.large_vocabulary import LargeVocabulary
from ehr_magic.linking.warehouse_vocabulary import warehouse_abbreviations
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.memory.similarity import default_tokens
from ehr_magic.text import FUNCTION_WORDS, NON_ALNUM, NUMBER_WORDS, PREFIX_LENGTH, normalise, prefix_stem, split_words

__all__ = ["TableChoice", "TablePicker", "THRESHOLD", "convention_tables", "conventions_for", "tables_in_code"]

THRESHOLD = 1.0
FULL_SHARE = 0.4  # of the best score: a table the question needs in full, not only in a line
MAX_FULL = 6  # a cohort question needs five tables, and the dictionary their codes name
_EXAMPLE_SCORE = 3.0  # a table used by an example worded like the question
_WHOLE_VALUE_SCORE = 4.0  # the question says a whole stored value ('potassium', 'urea nitrogen'); a part, a share
_NAMED_VALUE = 0.5  # of a stored value said: the question names one of a dictionary's entries
_WHOLE = 0.999  # coverage that is a whole value (float sums)
_NAMED_SCORE = 3.0  # the question says the table's name
_ONE_OF_SHARE = 0.5  # of that, for a name said of one row ('patient 10002428')
_PARTNER_SHARE = 0.7  # a joined table inherits this share of the choosing table's score
_STRONG = 4.0  # a table this sure brings the tables it joins to right after it (labevents -> d_labitems)
_STRONG_PARTNER_SHARE = 0.95
_SURE_FULL = _STRONG_PARTNER_SHARE * _STRONG  # needed in full whatever the best: a whole value, or a table it brings
_PARTNER_HOPS = 2  # d_items -> inputevents -> icustays
_SPINE_SHARE = 0.4  # a table most others join to (of the tables minus itself)
_MIN_VALUE_WORD = 4
_MIN_PART = 4  # a question word this long counts inside a name run together ('test' in 'labtestkey')
_PART_SHARE = 0.8  # of the word's weight: a part of a name is less sure than a whole word
_MAX_REFERRERS = 3  # a sure dictionary joined from this few brings them too: lab tests -> lab results
_SURE = 2.0  # below this best score the choice is unsure: show more tables, in one line
_UNSURE_TABLES = 6
_PROSE_SHARE = 0.75  # of the word's weight: a word of a table's description only, not of its names
_TABLE_NAME_SHARE = 0.5  # of the word's weight, more: a word of the table's own name says what its rows are
_SHORTHAND_MEANINGS = 3  # a value must be said whole to count, so a wrong meaning of 'DC' adds little
_EMPTY_SHARE = 0.5  # of its score, for a table holding no rows: it answers only a question about itself
_ANY_FORM = "*"  # a stem that a table holds in any form (what an abbreviation stands for)
_SYNONYM_SHARE = 0.8  # of the word's weight: a word of the same group ('cost' for 'charges')
_HIERARCHY_SCORE = _STRONG  # the question asks for a code with everything below it
# the words of a phrase asking for a hierarchy ('any kind of'), left out of the question's words with it
_HIERARCHY_WORDS = frozenset(w[:5] for w in ("kind", "kinds", "type", "types", "form", "forms", "sort", "sorts",
                                             "variety", "varieties", "class", "classes"))

_ONE_ENTITY = re.compile(r"\b[A-Za-z]+\s+#?\d+\b")
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
# Words of questions that name no table: English function words, and words every EHR question uses.
_STOP = FUNCTION_WORDS | frozenset("""
patient patients value values time times first last many much number total count show list give tell find
ever still yet since ago today yesterday year years month months week weeks day days hour hours minute minutes
named name called record records recorded data database table tables row rows column columns one two three
within without never among across per via whose happen happens happened mean average median
""".split()) | NUMBER_WORDS
_STOP_STEMS = frozenset(w[:PREFIX_LENGTH] for w in _STOP if len(w) >= 4)  # 'counting', 'patients', 'listed'


def _content_words(text: str) -> list[str]:
    return [stem for stem, _ in _content_forms(text)]


def _content_forms(text: str) -> list[tuple[str, str]]:
    """(stem, word) of each content word of ``text``."""
    forms = ((prefix_stem(_singular(w)), w) for w in split_words(text)
             if len(w) >= 3 and w not in _STOP and not w.isdigit())
    return [(stem, word) for stem, word in forms if stem not in _STOP_STEMS]


# Endings that leave a word's meaning (diagnosis, diagnosed; procedure, procedural); two words of one
# five-letter stem mean one thing when one starts the other, or each is their common start plus one of
# these, and not otherwise (quality, qualitative; current, currency; specimen, specific)
_ENDINGS = frozenset("""
s es e ed d r rs ing ings er ers or ors ion ions ation ations ition itions al als ally ly ic ics ical tic tics y ies
ied is ses sis ine ines ment ments ive ives ity ities ness ist ists ism ure ures ant ants ent ents ence ences
ance ances on ous ize izes ized ization izations ise ised isation
""".split()) | {""}
_ALTERNATING = (frozenset({"be", "bed", "bes", "bing", "ber", "bers"}), frozenset({"ption", "ptions", "ptive"}))


def _same_word(asked: str, used: str) -> bool:
    """Whether two words of one stem are forms of one word ('prescribed' and 'prescriptions' are)."""
    if _forms_of_one(asked, used):
        return True
    # a plural of a name run together ('inputs', inputevents)
    asked, used = (w[:-1] if w.endswith("s") and not w.endswith("ss") else w for w in (asked, used))
    return _forms_of_one(asked, used)


def _forms_of_one(asked: str, used: str) -> bool:
    if asked == used:
        return True
    common = 0
    for a, b in zip(asked, used):
        if a != b:
            break
        common += 1
    rest = {asked[common:], used[common:]}
    # one word the start of the other: an ending, or a name run together ('input' of inputevents)
    return "" in rest or rest <= _ENDINGS or (len(rest) == 2 and all(rest & side for side in _ALTERNATING))


def _singular(word: str) -> str:
    """A short plural without its s ('eras', 'codes', 'labs'), which the five-letter stem keeps;
    a longer word loses it in the stem anyway."""
    return word[:-1] if 4 <= len(word) <= PREFIX_LENGTH and word.endswith("s") and not word.endswith("ss") else word


@cache
def _hierarchy_phrases() -> re.Pattern[str]:
    """The phrases asking for a code with every code below it (``hierarchy_phrases.txt``)."""
    text = resources.files("ehr_magic.agent").joinpath("hierarchy_phrases.txt").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return re.compile("|".join(f"(?:{line})" for line in lines), re.IGNORECASE)


@cache
def _synonyms() -> dict[str, frozenset[str]]:
    """Stem -> the stems of the other words of its group (``schema_words.txt``)."""
    text = resources.files("ehr_magic.agent").joinpath("schema_words.txt").read_text(encoding="utf-8")
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            group = {prefix_stem(w) for w in line.split()}
            for stem in group:
                found.setdefault(stem, set()).update(group - {stem})
    return {stem: frozenset(others) for stem, others in found.items()}


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*")
# in a convention, what names a value or an argument rather than a table ('Measurement', domain=None)
_NOT_A_TABLE = re.compile(r"'[^']*'|\b\w+=")


def _shorthand_tokens(question: str) -> list[str]:
    """The words of ``question`` written as clinical shorthand (``written_as_shorthand``), so English
    words that are also abbreviations ('in', 'as', 'What', 'all') are not."""
    found = []
    for match in _TOKEN.finditer(question):
        token = match.group()
        initial = not question[:match.start()].strip() or question[:match.start()].rstrip()[-1] in ".?!:"
        if token.lower() not in _STOP and written_as_shorthand(token, sentence_start=initial):
            found.append(token)
    return found


def shorthand_words(question: str) -> set[str]:
    """The words of what clinical shorthand in ``question`` stands for ('Hb' -> hemoglobin, 'HR'
    -> heart rate, 'afib' -> atrial fibrillation), so a dictionary that spells the term out is found
    through its values."""
    vocabulary = clinical_vocabulary()
    return {w for token in _shorthand_tokens(question) for expansion in vocabulary.expand(token)[:_SHORTHAND_MEANINGS]
            for w in split_words(expansion) if len(w) >= 3 and w not in _STOP}


# the word of schema_words.txt naming the kind of table that records each kind of clinical term
_KIND_WORDS = {"drug": "drug", "dx": "diagnosis"}


def shorthand_kinds(question: str) -> set[str]:
    """The stems of the words naming the tables that record the clinical terms ``question`` writes
    as shorthand or by name ('statins', 'Lasix': drug; 'COPD': diagnosis), from each term's kind in
    the clinical vocabulary."""
    kinds = (clinical_vocabulary().kind(token) for token in _shorthand_tokens(question))
    return {prefix_stem(_KIND_WORDS[kind]) for kind in kinds if kind in _KIND_WORDS}


def spelled_kinds(question: str, stored: Collection[str] = ()) -> set[str]:
    """The same for the clinical terms ``question`` spells out ('type 2 diabetes': diagnosis;
    'furosemide': drug) that no stored value names (``stored``: the terms linking found stored
    whole, whose own rows say better where they are)."""
    vocabulary = clinical_vocabulary()
    terms = sorted({normalise(t) for t in stored if normalise(t)}, key=len, reverse=True)
    # the question's words around the stored terms, each run apart: no phrase spans a term left out
    runs = re.split("|".join(rf"\b{re.escape(t)}\b" for t in terms), normalise(question)) if terms \
        else [normalise(question)]
    kinds = {kind for run in runs for kind in vocabulary.spelled_kinds(run)}
    return {prefix_stem(_KIND_WORDS[kind]) for kind in kinds if kind in _KIND_WORDS}


def _value_words(texts: str | Sequence[str]) -> set[str]:
    """The words a stored value may be said with: each word of ``texts`` (the question, and the
    stored values linking found for its terms) as written and in the singular ('removals' says
    'removal of intrauterine device'), and what capitalised shorthand stands for."""
    words: set[str] = set()
    for text in [texts] if isinstance(texts, str) else texts:
        found = {w for w in normalise(text).split() if not w.isdigit()}
        words |= found | {singular(w) for w in found} | shorthand_words(text)
    return words


def identifier_words(name: str) -> list[str]:
    """The words of a table or column name: snake_case and CamelCase split (``LabTestKey`` ->
    lab test key); a name run together (``admitdatetime``) is matched by its parts in ``choose``."""
    return _content_words(_CAMEL.sub(" ", name))


def tables_in_code(tables: Iterable[str], code: str) -> list[str]:
    """The tables (of ``tables``) that ``code`` names."""
    words = set(_IDENTIFIER.findall(code.lower()))
    return [t for t in tables if t in words]


_OWN_COLUMN_TABLES = 2  # a column name found in at most this many tables says which table a text speaks of
_RARE_IN_CONVENTIONS = 2  # a question word said by at most this many conventions brings them


def convention_tables(tables: Sequence[str], rule: str) -> list[str]:
    """The tables a convention of the knowledge names: as tables, not inside a quoted value or as a
    keyword argument ('Measurement', domain=None). A convention naming none is a general one."""
    return tables_in_code(tables, _NOT_A_TABLE.sub(" ", rule))


def conventions_for(tables: Sequence[str], shown: Collection[str], question: str, conventions: Sequence[str],
                    columns: Mapping[str, Iterable[str]]) -> list[str]:
    """The conventions that name a table (``convention_tables``) and speak of one of the ``shown``
    tables, by its name or by a column name of its own ('spec_type_desc': the microbiology table;
    a name with an underscore that few tables have), or say a word of the question that few
    conventions say ('survival', 'intake'); in their order."""
    named = {rule: set(found) for rule in conventions if (found := convention_tables(tables, rule))}
    holders = Counter(str(c).lower() for t in tables for c in columns.get(t, ()))
    own = {str(c).lower() for t in shown for c in columns.get(t, ())
           if "_" in str(c) and holders[str(c).lower()] <= _OWN_COLUMN_TABLES}
    said = set(_content_words(question))
    counts = Counter(w for rule in named for w in set(_content_words(rule)))

    def speaks_of_shown(rule: str) -> bool:
        words = set(_IDENTIFIER.findall(_NOT_A_TABLE.sub(" ", rule).lower()))
        return bool(named[rule] & set(shown) or own & words)

    return [rule for rule in named if speaks_of_shown(rule)
            or any(counts[w] <= _RARE_IN_CONVENTIONS for w in said & set(_content_words(rule)))]


def shared_columns(ehr: Database) -> tuple[str, ...]:
    """The columns every table has, with the same type (a row number), which the index says once;
    none when there are fewer than three tables. Kept per database: every table's description
    asks, and a warehouse has thousands of tables."""
    tables = tuple(ehr.tables())
    kept = _SHARED.get(ehr)
    if kept is not None and kept[0] == tables:
        return kept[1]
    shared: tuple[str, ...] = ()
    if len(tables) >= 3:
        first = ehr.columns(tables[0])
        shared = tuple(name for name, kind in first.items()
                       if all(ehr.columns(t).get(name) == kind for t in tables[1:]))
    _SHARED[ehr] = (tables, shared)
    return shared


_SHARED: weakref.WeakKeyDictionary[Database, tuple[tuple[str, ...], tuple[str, ...]]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class TableChoice:
    """The tables to describe in full, best first, with their scores."""

    tables: tuple[str, ...]
    scores: dict[str, float]
    spine_only: frozenset[str] = frozenset()  # chosen only for being the spine, not for what the question says

    full: int = 0  # how many of the first ``tables`` the question needs described in full

    def needed(self) -> int:
        """How many of the first ``tables`` to describe in full: those the question needs (each as
        sure as two fifths of the best, or as a whole stored value, at most ``MAX_FULL``, and the spine
        whose rows it speaks of), and then the spine when it was chosen only as such (ranked right
        after them): most questions count or join through it (patients, admissions, visits), so it is
        described too, and the window's budget decides whether it fits."""
        spine = sum(1 for table in self.tables[self.full:] if table in self.spine_only)
        return max(1, self.full + spine) if self.tables else 0


class TablePicker:
    """Scores the tables of one database for a question (built once per database)."""

    def __init__(self, ehr: Database) -> None:
        self.ehr = ehr
        knowledge = ehr.knowledge
        self.tables: tuple[str, ...] = tuple(ehr.tables())
        self._described = {t: knowledge.tables[t] for t in self.tables if knowledge and t in knowledge.tables}
        # every table's name, as its description may say it: those of word characters by lower case, the others
        self._word_names: dict[str, str] | None = None
        self._other_names: list[str] = []
        self._documents = self._table_documents(knowledge)
        self._name_document = self._table_documents(knowledge, names_only=True)
        self._name_words = {t: frozenset(identifier_words(t)) | spelled_out(t) for t in self.tables}
        # the words of each name (a word run together, 'labtestkey', is one): a question word is looked for
        # inside them, never across two ('codes' is not in revenue_code_source_value)
        self._names = {t: tuple({piece for n in (t, *self.ehr.columns(t))
                                 for piece in NON_ALNUM.split(_CAMEL.sub(" ", str(n)).lower()) if piece})
                       for t in self.tables}
        document_frequency = Counter(word for words in self._documents.values() for word in words)
        count = max(1, len(self.tables))
        self._idf = {word: math.log(1 + count / n) for word, n in document_frequency.items()}
        self._joins = {t: tuple(j for j in info.join_targets if j in self.tables)
                       for t, info in self._described.items()}
        joined_by = Counter(j for targets in self._joins.values() for j in targets)
        self._referrers = {t: tuple(r for r, targets in self._joins.items() if t in targets) for t in self.tables}
        # a table joined on another's key or row number refers to that table's rows (a visit's parts,
        # an event's price): described with it only when the question speaks of it
        row_numbers = shared_columns(ehr)
        self._children = {t: frozenset(info.child_tables(row_numbers)) for t, info in self._described.items()}
        # the words a table's name shares with the table it is a part of ('visit' of visit_detail): they
        # name the whole (visit_occurrence), not its parts
        self._parent_words = {t: frozenset(w for p, children in self._children.items() if t in children
                                           for w in self._name_words.get(p, ())) for t in self.tables}
        # and those a summary shares with the records it summarises ('drug' of drug_era): they name the records
        for table, info in self._described.items():
            if info.derived_from in self._name_words:
                self._parent_words[table] |= self._name_words[info.derived_from]
        self.spine: tuple[str, ...] = tuple(
            t for t in self.tables if len(self.tables) > 2 and joined_by[t] >= _SPINE_SHARE * (len(self.tables) - 1))
        self._indexed: list[tuple[str, _ValueColumn]] | None = None
        self._derived = {t: info.derived_from for t, info in self._described.items()
                         if info.derived_from in self._described}
        # a table joining one dictionary only, of the dictionary's own module: more names of its entries
        self._satellites = {t: targets[0] for t, targets in self._joins.items()
                            if len(targets) == 1 and targets[0] in self._described and not self._joins.get(targets[0])
                            and self._described[t].vocabulary
                            and self._described[t].module == self._described[targets[0]].module}
        self._empty = ehr.empty_tables() & set(self.tables)
        # what a spine table's rows are ('One row per hospital visit' -> 'visit'), the word a question
        # uses when it needs that table for more than its joins
        self._row_noun: dict[str, str] = {}
        for t in self.spine:
            spine_info = self._described.get(t)
            found = re.match(r"\s*One row per ([^.;,(]+)", spine_info.row) if spine_info else None
            forms = _content_words(found.group(1)) if found else []
            if forms:
                self._row_noun[t] = forms[-1]
        hierarchy = knowledge.hierarchy if knowledge else None
        self._hierarchy = hierarchy.table if hierarchy and hierarchy.table in self.tables else None

    def choose(self, question: str, examples: Sequence[tuple[str, str]] = (),
               linked: Mapping[str, float] | None = None,
               events: Mapping[str, Collection[str]] | None = None, values_said: Collection[str] = (),
               values_meant: Collection[str] = (), values_found: Mapping[str, float] | None = None) -> TableChoice:
        """The tables ``question`` needs, best first. ``examples``: the (question, code) of its
        few-shot examples; the tables of an example count as much as it resembles the question.
        ``linked``: table -> how surely (0-1) the question names a stored value of it (value
        linking, ``ehr_magic.linking.question``); ``events``: a dictionary table -> the tables its
        linked rows name (an item's 'linksto'), the event tables that hold those items;
        ``values_said``: the question's terms that name a stored value whole ('acute bronchitis'),
        whose words then count for that value only, not for the tables whose prose uses them;
        ``values_meant``: the stored values those terms name, which count for the tables that record
        them as if the question had said them ('afib' -> 'Atrial fibrillation'); ``values_found``: the
        stored value each of its terms is likeliest to name, with how surely (0-1), which make the
        tables that record that value as likely ('ruptured appendix' -> 'Rupture of appendix', a
        diagnosis)."""
        scores: defaultdict[str, float] = defaultdict(float)
        events = {t: tuple(e for e in sorted(tables) if e in self.tables) for t, tables in (events or {}).items()}
        asks_hierarchy = bool(self._hierarchy and _hierarchy_phrases().search(question))
        said = set(_content_words(question)) - {w for term in values_said for w in _content_words(term)}
        if asks_hierarchy:  # 'any kind of' says nothing of the tables that speak of kinds of visit
            said -= _HIERARCHY_WORDS
        # 'patient 10002428' names one patient: the table of patients perhaps, less surely than a name said alone
        named = set(split_words(_ONE_ENTITY.sub(" ", question)))
        one_of = set(split_words(" ".join(_ONE_ENTITY.findall(question)))) - named
        # A word no table uses stands for the other words of its group: a bridge between the
        # question's words and the schema's, never extra weight for a word the schema speaks.
        related = {s for w in said if w not in self._idf for s in _synonyms().get(w, ())} - said
        # a table named by another word of a question word's group ('diagnoses' for condition_occurrence),
        # even where the word itself is used in some table's prose
        kin = {s for w in said for s in _synonyms().get(w, ())} - said
        # the kind of table that records the clinical terms it says ('statins': a drug table)
        written_kinds = shorthand_kinds(question)
        kinds = ({s for w in written_kinds for s in _synonyms().get(w, ())} | written_kinds) - said - kin
        related |= {w for token in re.findall(r"\b[A-Z][A-Z0-9]+\b", question)  # 'ICU', 'DX' as written
                    if not set(_content_words(token)) & self._idf.keys() for w in spelled_out(token)} - said
        asked: dict[str, set[str]] = {}
        for stem, word in _content_forms(question):
            asked.setdefault(stem, set()).add(_singular(word))
        agreeing = {table: self._agreeing(said & document, table, asked)
                    for table, document in self._documents.items()}
        # how rare each word is among the tables that use it in the question's sense ('medication' is rare
        # where only the drug tables say it, however many others say 'medical')
        using = Counter(stem for here in agreeing.values() for stem in here)
        idf = {stem: math.log(1 + max(1, len(self.tables)) / n) for stem, n in using.items()}
        for table, document in self._documents.items():
            here = agreeing[table]
            # a word of the table's name or columns says what it holds; one of its prose alone ('taken',
            # 'length of stay', 'cardiology'), only perhaps. Sums over sets are fsum: a plain sum's last
            # bit follows the set's order, which the process's hash seed sets, and tied tables swapped
            # places from one process to the next.
            scores[table] += math.fsum(idf[w] * (1.0 if w in self._name_document[table] else _PROSE_SHARE)
                                 for w in here)
            # 'procedure' names the rows of procedure_occurrence; of a table with a procedure column, a detail
            own_name = self._name_words[table] - self._parent_words[table]
            scores[table] += _TABLE_NAME_SHARE * math.fsum(idf[w] for w in here & own_name)
            scores[table] += math.fsum(_PART_SHARE * self._part_idf(w) for w in said - document
                                 if len(w) >= _MIN_PART and self._in_names(w, table))
            # the best word of a group only: 'cost' and 'charge' in one question count once
            scores[table] += _SYNONYM_SHARE * max((self._idf[w] for w in related & document), default=0.0)
            if table in named or table.rstrip("s") in named:  # 'patients', 'admission'
                scores[table] += _NAMED_SCORE
            elif table in one_of or table.rstrip("s") in one_of:
                scores[table] += _ONE_OF_SHARE * _NAMED_SCORE
            elif table not in self.spine and kin & own_name:
                # named by another word of its group ('cost' for ChargeLine); not the spine, which most
                # questions name in passing ('on their last hospital visit')
                scores[table] += _SYNONYM_SHARE * _NAMED_SCORE
            elif table not in self.spine and kinds & own_name:
                # a floor, not a bonus: as likely as a table named by a synonym, no more where words say more
                scores[table] = max(scores[table], _SYNONYM_SHARE * _NAMED_SCORE)
        # value linking, when given, has weighed the question's words against the stored values already
        # (a word inside a longer term it found counts for that term only); the names of the codes a table
        # records are weighed here, against the question and what its terms were found to mean ('afib')
        spoken = [question, *values_meant]
        coverage = self._value_coverage(spoken) if linked is None else \
            {t: v for t, v in linked.items() if t in self.tables}
        if linked is not None:  # linking knows a dictionary's values, not the tables that record its codes
            for table, share in self._value_coverage(spoken, recorded_only=True).items():
                coverage[table] = max(coverage.get(table, 0.0), share)
        for table, dictionary in self._satellites.items():
            # a name in a table of other names of a dictionary's entries (OMOP's concept_synonym) names
            # that dictionary's entry: the dictionary is what the question needs, not the list of names
            if table in coverage:
                coverage[dictionary] = max(coverage.get(dictionary, 0.0), coverage.pop(table))
        for table, share in coverage.items():
            # squared: a whole value counts in full, a third of a long title hardly at all
            scores[table] += _WHOLE_VALUE_SCORE * share ** 2
        for table, share in self._recording(values_found or {}).items():
            # a term found among the names of the codes a table records: as sure as the term was found
            scores[table] = max(scores[table], _WHOLE_VALUE_SCORE * share)
        for table, source in self._derived.items():
            # a summary of another table's records (OMOP's eras) holds the codes the question names there,
            # when the question also says what only the summary is ('episodes', 'continuous', 'era')
            if said & (self._documents[table] - self._documents[source]):
                # never above its source: a word of the summary's prose ('took') is no surer than the codes
                source_score = _WHOLE_VALUE_SCORE * coverage.get(source, 0.0) ** 2
                scores[table] = max(scores[table], min(scores[table] + _PARTNER_SHARE * source_score,
                                                       _STRONG_PARTNER_SHARE * source_score))
        if asks_hierarchy and self._hierarchy:
            scores[self._hierarchy] = max(scores[self._hierarchy], _HIERARCHY_SCORE)
        if self._hierarchy and prefix_stem("drug") in written_kinds:
            # a drug said by name or class ('antibiotics') where drugs are recorded as products under their
            # ingredients and classes: its products are found through the hierarchy
            for table in self._by_hierarchy():
                scores[self._hierarchy] = max(scores[self._hierarchy], scores[table])
        masked = default_tokens(question)
        for example_question, code in examples:
            likeness = fuzz.ratio(masked, default_tokens(example_question)) / 100
            for table in tables_in_code(self.tables, code):
                scores[table] = max(scores[table], _EXAMPLE_SCORE * likeness)
        if max((scores[t] for t in self.tables if t not in self.spine), default=0.0) < _SURE:
            # nothing the question says of its records is sure (the patients it counts are the spine's):
            # a clinical term it spells out that no row stores ('type 2 diabetes' where no patient has
            # it) still says which kind of table would hold it
            spelled = spelled_kinds(question, values_said)
            spelled = ({s for w in spelled for s in _synonyms().get(w, ())} | spelled) - said
            for table in self.tables:
                if table not in self.spine and spelled & (self._name_words[table] - self._parent_words[table]):
                    scores[table] = max(scores[table], _SYNONYM_SHARE * _NAMED_SCORE)
        for table in self._empty:
            # what its words say, at a discount: in a tie, the table that holds rows is the one to read
            scores[table] *= _EMPTY_SHARE
        best = max(scores.values(), default=0.0)
        spine_only = frozenset(t for t in self.spine if scores[t] < min(FULL_SHARE * best, _SURE_FULL))
        # the spine whose rows the question speaks of ('on the first hospital visit', 'this encounter')
        spoken_of = {t for t in spine_only if self._row_noun.get(t) in asked.keys() | kin}
        for table in self.spine:
            scores[table] = max(scores[table], 0.9 * best, THRESHOLD)  # right after the best table
        # what the question says of each table, and what a table it surely needs passes on: a table of
        # another module joined at a share (a visit's care site, provider, costs) is listed, but described
        # in full only for what is said of it
        sure = defaultdict(float, scores)
        for _ in range(_PARTNER_HOPS):
            for table, score in list(scores.items()):
                if score >= THRESHOLD and table not in self.spine:
                    share = _STRONG_PARTNER_SHARE if score >= _STRONG else _PARTNER_SHARE
                    referrers = self._referrers.get(table, ())
                    if len(referrers) > _MAX_REFERRERS or not self._is_dictionary(table):
                        # only a dictionary (joins only what joins it, joined from few) brings its events
                        referrers = ()
                    elif referrers and coverage.get(table, 0.0) >= _NAMED_VALUE:
                        share = _STRONG_PARTNER_SHARE  # a value named: its rows are in the tables that join it
                    partners = tuple(dict.fromkeys(self._joins.get(table, ()) + referrers))
                    if events.get(table):  # the items found are recorded there, not in its other referrers
                        partners, share = tuple(events[table]), _STRONG_PARTNER_SHARE
                    for partner in partners:
                        # a sure table brings right after it the dictionary its codes need (labevents ->
                        # d_labitems) and the tables of its own module, not those of another that it joins
                        # (a visit's care site, provider and location; costs)
                        same_module = self._module(partner) == self._module(table)
                        given = share if share < _STRONG_PARTNER_SHARE or events.get(table) or partner in referrers \
                            or same_module or self._is_dictionary(partner) else _PARTNER_SHARE
                        scores[partner] = max(scores[partner], given * score)
                        # a table's parts (a visit's ward stays) are listed with it, described only if asked for
                        child = partner in self._children.get(table, ()) and not events.get(table)
                        if (given == _STRONG_PARTNER_SHARE or same_module) and not child:
                            sure[partner] = max(sure[partner], given * sure[table])
        if self._hierarchy:
            for table, share in self._hierarchy_coverage(spoken).items():
                # a drug named: its products are counted through the hierarchy, whatever level the name is at,
                # so the hierarchy is needed as surely as the table
                surely = _STRONG_PARTNER_SHARE * max(_WHOLE_VALUE_SCORE, scores[table])
                scores[self._hierarchy] = max(scores[self._hierarchy], share ** 2 * surely)
                sure[self._hierarchy] = max(sure[self._hierarchy], share ** 2 * surely)
        chosen = sorted((t for t, s in scores.items() if s >= THRESHOLD), key=lambda t: (-scores[t], t))
        if best < _SURE:
            # Unsure: the likeliest tables in one line each beat a prompt that describes none.
            likely = sorted((t for t in self.tables if t not in chosen), key=lambda t: (-scores[t], t))
            chosen += likely[:max(0, _UNSURE_TABLES - len(chosen))]
        # the tables the question needs in full, what the question says of a table first, what its partners
        # pass on after; the spine chosen only as such among them, at nine tenths of the best, when the
        # question speaks of its rows (a small window keeps the visits a 'first hospital visit' is found
        # in before a table a prose word brought), else right after them; then the rest
        full = [t for t in chosen if t not in spine_only and sure[t] >= min(FULL_SHARE * best, _SURE_FULL)][:MAX_FULL]
        full += [t for t in chosen if t in spoken_of]
        full.sort(key=lambda t: (-sure[t], t not in spoken_of))  # in a tie, the spine spoken of first
        ranked = full + [t for t in chosen if t in spine_only and t not in spoken_of] + \
            [t for t in chosen if t not in full and t not in spine_only]
        return TableChoice(tuple(ranked), {t: round(scores[t], 2) for t in chosen}, spine_only & set(chosen), len(full))

    def _module(self, table: str) -> str | None:
        info = self._described.get(table)
        return info.module if info is not None else None

    def _is_dictionary(self, table: str) -> bool:
        """Whether ``table`` joins only tables that join it (d_labitems, concept): it names codes."""
        return set(self._joins.get(table, ())) <= set(self._referrers.get(table, ()))

    # -- the words of each table -------------------------------------------------------------

    def _in_names(self, word: str, table: str) -> bool:
        return any(word in name for name in self._names[table])

    def _part_idf(self, word: str) -> float:
        found = sum(self._in_names(word, t) for t in self.tables)
        return math.log(1 + len(self.tables) / max(1, found))

    def _table_documents(self, knowledge: Any, *, names_only: bool = False) -> dict[str, frozenset[str]]:
        """Each table's words (stems); with all its words, their forms under each stem (``_forms``)."""
        forms: dict[str, dict[str, set[str]]] = {}
        for table in self.tables:
            here: dict[str, set[str]] = {}

            def add(pairs: Iterable[tuple[str, str]], here: dict[str, set[str]] = here) -> None:
                for stem, word in pairs:
                    here.setdefault(stem, set()).add(word)

            def add_any(stems: Iterable[str], here: dict[str, set[str]] = here) -> None:
                for stem in stems:  # what an abbreviation stands for: any form of its words
                    here.setdefault(stem, set()).add(_ANY_FORM)

            add(_content_forms(_CAMEL.sub(" ", table)))
            add_any(spelled_out(table))
            for column in self.ehr.columns(table):
                add(_content_forms(_CAMEL.sub(" ", column)))
                if not names_only:  # what a column's abbreviation stands for ('drg': diagnosis) is a hint, not its name
                    add_any(spelled_out(column))
            info = self._described.get(table)
            if info is not None and not names_only:
                text = " ".join((info.row, info.description, *info.columns.values()))
                for advice in DRAFTED_ADVICE:  # how to read a column ('compared as stored text'), not what it holds
                    text = text.replace(advice, " ")
                # another table named in the text ("refers to admissions.hadm_id", "referred to by
                # charges") says what this table joins, not what it holds: its words stay with it
                add(_content_forms(self._without_other_tables(table, text)))
            forms[table] = here
        for rule in knowledge.conventions if knowledge and not names_only else ():
            named = convention_tables(self.tables, rule)
            for table in named:
                for stem, word in _content_forms(rule):
                    forms[table].setdefault(stem, set()).add(word)
        if not names_only:
            self._forms = forms
        return {t: frozenset(here) for t, here in forms.items()}

    def _agreeing(self, stems: set[str], table: str, asked: Mapping[str, set[str]]) -> set[str]:
        """The ``stems`` whose words in the question are forms of the words of ``table`` under the
        same stem ('quality' is not 'qualitative', though both are 'quali')."""
        used = self._forms[table]
        return {stem for stem in stems
                if _ANY_FORM in used.get(stem, {_ANY_FORM}) or not asked.get(stem)
                or any(_same_word(a, u) for a in asked[stem] for u in used[stem])}

    def _without_other_tables(self, table: str, text: str) -> str:
        """``text`` without the names of the other tables (and a column after one: 'admissions.hadm_id')."""
        if self._word_names is None:
            self._word_names, self._other_names = {}, []
            for name in self.tables:
                if _WORD_RUN.fullmatch(name):
                    self._word_names[name.lower()] = name
                else:
                    self._other_names.append(name)
        # A name of word characters matches only a whole word run, so the pattern needs only the names
        # the text has as words: one pattern of all 1,500 names of a warehouse cost a second a prompt.
        said = {self._word_names[w] for w in {w.lower() for w in _WORD_RUN.findall(text)} if w in self._word_names}
        pattern = _names_pattern(frozenset(said) | frozenset(self._other_names))
        if pattern is None:
            return text
        own = table.lower()
        return pattern.sub(lambda m: m.group(0) if m.group(1).lower() == own else " ", text)

    def _by_hierarchy(self) -> set[str]:
        """The tables whose codes questions name by a broader one (``by_hierarchy``)."""
        return {table for table, column in self._value_columns() if column.by_hierarchy}

    def _hierarchy_coverage(self, question: str | Sequence[str]) -> dict[str, float]:
        """Table -> how much of the name of a code it records, or of one above them, the question says,
        for the tables whose codes questions name by a broader one (``by_hierarchy``): 'ibuprofen'
        names an ingredient, and its products are counted through the hierarchy."""
        words = _value_words(question)
        found: dict[str, float] = {}
        for table, column in self._value_columns():
            if column.by_hierarchy:
                found[table] = max(found.get(table, 0.0), column.coverage(words))
        return found

    def _value_coverage(self, question: str | Sequence[str], *, recorded_only: bool = False) -> dict[str, float]:
        """Table -> how much of its best stored value the question says (0-1, IDF-weighted within
        the column): 'urea nitrogen' says all of a lab label, while 'percentile' and 'age' say a
        little of many diagnosis titles. The best single value counts, never a sum over values, so
        a column of long titles that holds most English words scores by one title, not by all."""
        words = _value_words(question)
        own: dict[str, float] = {}
        recorded: dict[str, float] = {}
        for table, column in self._value_columns():
            if recorded_only and not column.recorded:
                continue
            coverage = column.coverage(words)
            found = recorded if column.recorded else own
            if coverage > found.get(table, 0.0):
                found[table] = coverage
        for table, coverage in list(own.items()):
            # a table restating the values of a dictionary it joins (its synonyms) adds nothing to it
            if any(own.get(d, 0.0) >= coverage and not self._joins.get(d) for d in self._joins.get(table, ())):
                del own[table]
        return {t: max(own.get(t, 0.0), recorded.get(t, 0.0)) for t in {*own, *recorded}}

    def _recording(self, values: Mapping[str, float]) -> dict[str, float]:
        """Table -> how surely the question names a code it records: the best sureness of the
        ``values`` found among the names of its codes."""
        found: dict[str, float] = {}
        if not values:
            return found
        keys = {normalise(v).replace(" ", ""): share for v, share in values.items()}
        for table, column in self._value_columns():
            if column.recorded and isinstance(column.vocabulary, Vocabulary):  # the names of codes: never large
                for key, share in keys.items():
                    if key in column.vocabulary.compact and share > found.get(table, 0.0):
                        found[table] = share
        return found

    def _value_columns(self) -> list[tuple[str, _ValueColumn]]:
        """The looked-up columns (``vocabulary`` in the knowledge) with their values indexed."""
        if self._indexed is None:
            self._indexed = []
            for table, info in self._described.items():
                here = {c.lower(): c for c in self.ehr.columns(table)}  # a database may spell names in upper case
                self._indexed += [(table, _ValueColumn(self.ehr.vocabulary(table, here[column.lower()])))
                                  for column in info.vocabulary if column.lower() in here]
            self._indexed += [(names.table, _ValueColumn(names.vocabulary, recorded=True,
                                                         by_hierarchy=names.by_hierarchy))
                              for names in recorded_vocabularies(
                                  self.ehr, self._described,
                                  self.ehr.knowledge.hierarchy if self.ehr.knowledge else None)]
        return self._indexed


class _ValueColumn:
    """One column's stored values, for 'how much of one value does the question say'."""

    def __init__(self, vocabulary: Vocabulary | LargeVocabulary, *, recorded: bool = False,
                 by_hierarchy: bool = False) -> None:
        self.vocabulary = vocabulary
        self.recorded = recorded  # the names of the codes a table records (recorded_values), not its own values
        self.by_hierarchy = by_hierarchy  # and of the codes above them (a product's ingredients)
        self.word_index = {word: i for i, word in enumerate(vocabulary.words)}
        self.mass = vocabulary.value_weights()

    def coverage(self, words: set[str]) -> float:
        """The largest share of one value's weight that ``words`` hold. Grammar counts inside a
        value ('other endoscopy of small intestine') but never alone ('other'); a short word ('iv',
        't') counts only with a longer one or as a whole value: 'ptt' and 'troponin t' are labels,
        'iv' inside a title says nothing."""
        hits = [self.word_index[w] for w in words if w in self.word_index]
        if not hits:
            return 0.0
        postings, vocabulary = self.vocabulary.postings, self.vocabulary

        def per_posting(values: list) -> np.ndarray:
            return np.concatenate([np.full(len(postings[i]), value) for i, value in zip(hits, values)])

        unique, inverse = np.unique(np.concatenate([postings[i] for i in hits]), return_inverse=True)
        idf = per_posting([vocabulary.idf[i] for i in hits])
        content = per_posting([vocabulary.words[i] not in _STOP for i in hits])
        long = per_posting([vocabulary.words[i] not in _STOP and len(vocabulary.words[i]) >= _MIN_VALUE_WORD
                            for i in hits])
        said = np.bincount(inverse, weights=idf) / self.mass[unique]
        said[np.bincount(inverse, weights=content) == 0] = 0.0
        said[(np.bincount(inverse, weights=long) == 0) & (said < _WHOLE)] = 0.0
        best = float(said.max())
        return 1.0 if best >= _WHOLE else best


_WORD_RUN = re.compile(r"\w+")


@lru_cache(maxsize=4096)
def _names_pattern(names: frozenset[str]) -> re.Pattern[str] | None:
    """The table names ``names`` as they may stand in a text (a column after one: 'admissions.hadm_id'),
    the longest first; None for no names."""
    if not names:
        return None
    ordered = sorted(names, key=lambda n: (-len(n), n))
    return re.compile(r"\b(" + "|".join(re.escape(n) for n in ordered) + r")(?:\.\w+)?\b", re.IGNORECASE)


def spelled_out(name: str) -> set[str]:
    """The content words of what the warehouse abbreviations in ``name`` stand for (their first
    meaning): ``HSP_ENC`` -> hospital, encounter; ``FLO_MEAS_ID`` -> flowsheet, measurement. An
    abbreviation a question writes in capitals ('DX') that no table uses is read the same way."""
    vocabulary = warehouse_abbreviations()
    found: set[str] = set()
    for word in re.findall(r"[a-z0-9]+", _CAMEL.sub(" ", name).lower()):
        meanings = vocabulary.expand(word)
        if meanings and word not in meanings:
            found.update(_content_words(meanings[0]))
    return found
