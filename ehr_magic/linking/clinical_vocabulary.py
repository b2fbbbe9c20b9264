"""Clinical shorthand for value linking: 'Hb' is hemoglobin, 'ISDN' isosorbide dinitrate.

Analysts write abbreviations, brand names and lay terms; dictionaries store spelled-out
names ('hemoglobin', 'Isosorbide Dinitrate', 'Chronic obstructive pulmonary disease...').
Fuzzy matching alone links 'Hb' to 'hbeag'. The vocabulary is package data,
``vocabulary/clinical_abbreviations.tsv`` (provenance, license and version in its header):
one term a line with its expansions, best first. ``alternatives`` turns a query into the
other texts worth searching for it, each with a weight that ranks it below the query's own
exact match.
"""

from __future__ import annotations

import functools
import importlib.resources
from dataclasses import dataclass, field

from ehr_magic.text import normalise
from ehr_magic.errors import EhrMagicError

_FILE = "clinical_abbreviations.tsv"
_EVERYDAY_FILE = "everyday_words.txt"
_LOWER_CASE_TERM = (3, 4)  # letters of a known term read as shorthand in lower case ('afib'); longer ones always
_SEPARATOR = " | "
_RANK_STEP = 0.03  # each later expansion of an ambiguous term weighs 3% less
_TOKEN_WEIGHT = 0.95  # a query with one word expanded ('Hgb A1c' -> 'hemoglobin a1c')
_REVERSE_WEIGHT = 0.97  # a spelled-out query whose abbreviation is stored ('potassium' -> 'K')
_MAX_ALTERNATIVES = 8
_PHRASE_WORDS = 5  # longest leading phrase of an expansion read as naming its term


def _key(text: str) -> str:
    """Lookup key of a term: normalised and without spaces ('T bili', 'Tbili' -> 'tbili')."""
    return normalise(text).replace(" ", "")


@dataclass(frozen=True)
class Alternative:
    """Another text to search for a query: ``exact_only`` for stored abbreviations, which are
    too short to be matched fuzzily ('k' would match every word with a k)."""

    text: str
    weight: float
    exact_only: bool = False


@dataclass(frozen=True)
class ClinicalVocabulary:
    """Terms and their expansions, both normalised (lower case, punctuation as spaces)."""

    version: str
    expansions: dict[str, tuple[str, ...]]  # term key -> expansions, best first
    terms: dict[str, tuple[str, ...]]  # expansion key -> the terms it expands
    kinds: dict[str, str] = field(default_factory=dict)  # term key -> lab, vital, drug, dx, proc, unit or other

    def __len__(self) -> int:
        return len(self.expansions)

    def kind(self, text: str) -> str | None:
        """What ``text`` names if it is a known term ('drug' for 'Lasix', 'dx' for 'COPD'); None otherwise."""
        return self.kinds.get(_key(text))

    def spelled_kinds(self, text: str) -> set[str]:
        """The kinds of the known terms ``text`` spells out: a whole expansion ('furosemide' is a
        drug), or the first two words or more of one ('type 2 diabetes' of 'type 2 diabetes
        mellitus'); a phrase that begins terms of two kinds names neither."""
        words = normalise(text).split()
        found: set[str] = set()
        for size in range(1, _PHRASE_WORDS + 1):
            for start in range(len(words) - size + 1):
                kind, whole = self._phrase_kinds.get(" ".join(words[start:start + size]), (None, False))
                if kind is not None and (size > 1 or whole):
                    found.add(kind)
        return found

    @functools.cached_property
    def _phrase_kinds(self) -> dict[str, tuple[str | None, bool]]:
        """Each expansion and each of its leading phrases of two words or more -> the kind of the
        terms it begins (None when they are of two kinds) and whether it is all of one of them."""
        found: dict[str, tuple[set[str], bool]] = {}
        for term, spelled in self.expansions.items():
            kind = self.kinds.get(term, "")
            for expansion in spelled if kind else ():
                words = expansion.split()
                for size in range(1, min(len(words), _PHRASE_WORDS) + 1):
                    if size > 1 or size == len(words):
                        phrase = " ".join(words[:size])
                        kinds, whole = found.get(phrase, (set(), False))
                        found[phrase] = (kinds | {kind}, whole or size == len(words))
        return {phrase: (next(iter(kinds)) if len(kinds) == 1 else None, whole)
                for phrase, (kinds, whole) in found.items()}

    def expand(self, text: str) -> tuple[str, ...]:
        """The expansions of ``text`` if it is a known term, best first; () otherwise."""
        return self.expansions.get(_key(text), ())

    def alternatives(self, text: str) -> list[Alternative]:
        """What else to search for ``text``, best first: its expansions when it is a known
        term, else the query with each known word expanded; and the stored abbreviations of
        a spelled-out query. Empty for a query the vocabulary does not know."""
        query = normalise(text)
        found: list[Alternative] = [Alternative(e, 1.0 - _RANK_STEP * i)
                                    for i, e in enumerate(self.expansions.get(query.replace(" ", ""), ()))]
        words = query.split()
        if not found and len(words) > 1:
            for i, word in enumerate(words):
                expansion = self.expansions.get(word)
                if expansion:
                    found.append(Alternative(" ".join([*words[:i], expansion[0], *words[i + 1:]]), _TOKEN_WEIGHT))
        found += [Alternative(term, _REVERSE_WEIGHT, exact_only=True)
                  for term in self.terms.get(query.replace(" ", ""), ())]
        unique: dict[str, Alternative] = {}
        for alternative in found:
            if alternative.text != query:
                unique.setdefault(alternative.text, alternative)
        return list(unique.values())[:_MAX_ALTERNATIVES]


def parse(text: str, *, source: str) -> ClinicalVocabulary:
    """A vocabulary from the TSV format of the packaged file; ``EhrMagicError`` names a bad line."""
    version = ""
    expansions: dict[str, list[str]] = {}
    kinds: dict[str, str] = {}
    header_seen = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            if line[1:].strip().lower().startswith("version:"):
                version = line.split(":", 1)[1].strip()
            continue
        if not line.strip():
            continue
        fields = line.split("\t")
        if not header_seen:  # the column names
            header_seen = True
            continue
        if len(fields) != 3 or not _key(fields[0]) or not fields[2].strip():
            raise EhrMagicError(f"{source}, line {number}: expected term, kind and expansions separated by tabs.")
        # Terms equal up to case and punctuation ('Ca', 'Ca++') share one entry, first line first.
        entry = expansions.setdefault(_key(fields[0]), [])
        kinds.setdefault(_key(fields[0]), fields[1].strip().lower())
        for expansion in fields[2].split(_SEPARATOR):
            normalised = normalise(expansion)
            if normalised and normalised not in entry:
                entry.append(normalised)
    if not version:
        raise EhrMagicError(f"{source} has no '# version:' line.")
    terms: dict[str, list[str]] = {}
    for term, spelled in expansions.items():
        for expansion in spelled:
            terms.setdefault(expansion.replace(" ", ""), []).append(term)
    return ClinicalVocabulary(version, {t: tuple(e) for t, e in expansions.items()},
                              {e: tuple(t) for e, t in terms.items()}, kinds)


@functools.cache
def clinical_vocabulary() -> ClinicalVocabulary:
    """The packaged vocabulary, read once per process."""
    resource = importlib.resources.files("ehr_magic.linking").joinpath("vocabulary").joinpath(_FILE)
    return parse(resource.read_text(encoding="utf-8"), source=f"ehr_magic/linking/vocabulary/{_FILE}")


@functools.cache
def everyday_words() -> frozenset[str]:
    """Known terms that are also everyday English words ('all', 'hit', 'hrs'): package data,
    ``vocabulary/everyday_words.txt`` (provenance in its header)."""
    resource = importlib.resources.files("ehr_magic.linking").joinpath("vocabulary").joinpath(_EVERYDAY_FILE)
    lines = resource.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip().lower() for line in lines if line.strip() and not line.startswith("#"))


def written_as_shorthand(text: str, *, sentence_start: bool) -> bool:
    """Whether a word of a question is written as clinical shorthand, so that its expansions are
    searched: with a capital past its first letter ('Hb', 'SpO2'), in capitals ('COPD'), capitalised
    inside a sentence ('Lasix'), or a known term in lower case ('afib', 'hgb', 'lasix') that is not
    also an everyday word ('all', 'hit', 'tips'). English words that are also abbreviations ('as',
    'in', a capitalised first word 'What') are not."""
    if (text.isupper() and len(text) > 1) or any(c.isupper() for c in text[1:]) \
            or (text[0].isupper() and not sentence_start):
        return True
    if len(text) < _LOWER_CASE_TERM[0] or not clinical_vocabulary().expand(text):
        return False
    return len(text) > _LOWER_CASE_TERM[1] or text.lower() not in everyday_words()
