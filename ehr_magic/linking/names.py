"""The words of table and column names, for every layer that reads names: ``admitDateTime``,
``admit_date_time`` and ``admitdatetime`` all read "admit date time".

Names are split at underscores, spaces, case changes, digits and punctuation (``visit#``); a
lower-case run with no boundary left (``patientunitstayid``) is cut by dynamic programming into
the fewest record-keeping and common English words that cover it (``dischargedestination``), else
into record-keeping words with unknown pieces kept whole. Nothing here knows a dataset: the
vocabularies are English and record-keeping words (patient, admission, date, unit...), never a
table's name. Drafting reads names with these words (``ehr_magic.knowledge.drafting.naming``), and
value linking tells which table a question speaks of by them (``d_labitems``: lab, items).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import wordsegment

# Words found in health-record and warehouse exports, whatever the source system.
_VOCABULARY = """
id ids key keys code codes num number no nr seq sequence index idx row rows record records version ver type types
kind class category categories group status flag flags name names label labels title desc description text note
notes comment comments value values val amount amt total count qty quantity rate dose doses unit units uom measure
measurement measurements result results reading readings score scores level min max mean avg sum lower upper low high
ref range normal abnormal interpretation
date dates time times timestamp charting day days hour hours minute minutes second seconds year years month months
week weeks start started begin end ended stop stopped from to until since interval admit admission admissions admitted
discharge discharged disch in out intime outtime chart charted store stored entry entered order ordered orders
event events visit visits encounter encounters stay stays episode episodes period periods offset birth death dead
died dob dod age gender sex race ethnicity language marital insurance religion
patient patients person persons subject subjects member members client resident case cases
hospital hospitals unit ward wards bed beds room care careunit icu department departments service services site
sites location locations facility facilities provider providers caregiver caregivers clinician staff physician
doctor nurse nursing organization organizations org payer payers plan plans claim claims transaction transactions
cost costs charge charges price payment payments
lab labs laboratory test tests panel specimen specimens sample culture cultures organism organisms micro
microbiology antibiotic antibiotics susceptibility isolate fluid
item items drug drugs medication medications med meds prescription prescriptions product products ingredient
ingredients route routes frequency freq form strength generic brand formulary administration administered
infusion infusions input inputs output outputs intake
diagnosis diagnoses dx condition conditions problem problems procedure procedures px operation surgery allergy
allergies immunization immunizations vaccine observation observations vital vitals sign signs symptom symptoms
icd snomed loinc rxnorm ndc cpt hcpcs drg concept concepts vocabulary source target standard
primary secondary first last previous next current admitting attending parent child link links linked
detail details info information history physical exam assessment plan goal goals outcome outcomes
heart respiratory blood pressure weight height temperature oxygen
long short full abbreviation abbrev prefix suffix severity mortality ab
bedside numeric perform collect observe measure movement catalog demographic demographics given finding term
display flowsheet administrative deceased disposition preferred entry transfer spoken civil
owner user contact mother father
of and by per at on for with
""".split()
_WORDS = frozenset(_VOCABULARY)
# Known words that also end English words: after a word the vocabulary lacks they are its ending
# (cover-age, aver-age, percent-age), not a word of their own.
_SUFFIX_WORDS = frozenset({"age"})
_ENDINGS = ("s", "es", "d", "ed", "ing", "er", "ers")
_SIBILANT = ("s", "x", "z", "ch", "sh")  # stems that take -es: statuses, boxes, patches
# English words this long or longer count when a run is cut; shorter ones (ad, ha, ills) would cut
# abbreviations and codes into bits (hadm -> had m).
_ENGLISH_MIN = 4
_BOUNDARY = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


@functools.lru_cache(maxsize=8192)
def words(name: str) -> tuple[str, ...]:
    """The words of a name, lower case: ``admitDateTime`` -> ``('admit', 'date', 'time')``."""
    parts: list[str] = []
    for chunk in re.split(r"[^0-9A-Za-z]+", name):
        for piece in _BOUNDARY.findall(chunk):
            piece = piece.lower()
            parts.extend(_segment(piece) if piece.isalpha() else (piece,))
    return tuple(parts)


@functools.lru_cache(maxsize=4096)
def _segment(run: str) -> tuple[str, ...]:
    """The words of a lower-case run: English and record-keeping words covering all of it
    (``_covered``), else known words with unknown pieces kept whole (``_cheapest``), an
    unknown word keeping its English ending: ``payercoverage`` -> ``('payer', 'coverage')``."""
    covered = _covered(run)
    if covered:
        return covered
    pieces: list[str] = []
    for piece in _cheapest(run):
        if piece in _SUFFIX_WORDS and pieces and not known(pieces[-1]):
            pieces[-1] += piece
        else:
            pieces.append(piece)
    return tuple(pieces)


def _covered(run: str) -> tuple[str, ...]:
    """The fewest words covering all of ``run``, each a record-keeping word (``known``) or a
    common English word (``english``); an English word costs a little more, so record-keeping
    words win a tie (nurse assess entry, not nurse asses sentry). Empty when no cover exists:
    an English word counts only where every other letter of the run is a word too, so that
    it never swallows the letters of an abbreviation beside it (low exhmv, not lowe xhmv)."""
    best: list[tuple[float, tuple[str, ...]] | None] = [(0.0, ())]
    for end in range(1, len(run) + 1):
        found = None
        for start in range(end):
            before = best[start]
            piece = run[start:end]
            if before is None:
                continue
            if known(piece):
                cost = before[0] + 2
            elif english(piece):
                cost = before[0] + 3
            else:
                continue
            if found is None or cost < found[0]:
                found = (cost, (*before[1], piece))
        best.append(found)
    last = best[-1]
    return last[1] if last else ()


def _cheapest(run: str) -> tuple[str, ...]:
    """Known words covering ``run`` at the least cost: each unknown letter costs 1 and each
    piece 2, so an unknown word stays whole rather than break around short known words."""
    best: list[tuple[float, tuple[str, ...]]] = [(0.0, ())]
    for end in range(1, len(run) + 1):
        options = []
        for start in range(end):
            piece = run[start:end]
            unknown = 0 if known(piece) else len(piece) + (3 if len(piece) <= 3 else 0)
            cost = best[start][0] + unknown + 2
            options.append((cost, (*best[start][1], piece)))
        best.append(min(options, key=lambda option: option[0]))
    return best[-1][1]


def known(word: str) -> bool:
    """Whether ``word`` is in the general vocabulary, or one with an ending (``recorded``, ``measured``)."""
    if word in _WORDS:
        return True
    for ending in _ENDINGS:
        stem = word[: -len(ending)]
        if ending == "d" and not stem.endswith("e"):  # store-d, but not drug-d
            continue
        if ending == "es" and not stem.endswith(_SIBILANT):  # status-es, but not discharged-es
            continue
        if word.endswith(ending) and len(stem) >= 4 and (stem in _WORDS or stem + "e" in _WORDS):
            return True
    return False


@functools.cache
def _english_words() -> frozenset[str]:
    """English words of ``_ENGLISH_MIN`` letters or more, from the two lists the ``wordsegment``
    package ships: the ENABLE word list (a public-domain dictionary, inflected forms included)
    and the 333,000 most frequent words of a trillion-word web corpus. A word must be in both:
    the dictionary leaves out web tokens (itemid, datetime), the corpus obscure entries (codein)."""
    dictionary = set(Path(wordsegment.Segmenter.WORDS_FILENAME).read_text(encoding="utf-8").split())
    frequent = Path(wordsegment.Segmenter.UNIGRAMS_FILENAME).read_text(encoding="utf-8").split()[::2]  # word, count
    return frozenset(w for w in frequent if len(w) >= _ENGLISH_MIN and w in dictionary)


def english(word: str) -> bool:
    """Whether ``word`` is a common English word of four letters or more (``descendant``, ``verbatim``)."""
    return word in _english_words()
