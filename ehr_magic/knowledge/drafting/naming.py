"""Words in table and column names: ``admitDateTime``, ``admit_date_time`` and ``admitdatetime``
all read "admit date time".

Names are split at underscores, spaces, case changes and digits; a lower-case run with no
boundary left (``patientunitstayid``) is cut into known words by dynamic programming over a
general vocabulary of words found in health-record exports. Nothing here knows a dataset:
the vocabulary is English words (patient, admission, date, unit...), never a table's name.
"""

from __future__ import annotations

import functools
import re

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
""".split()
_WORDS = frozenset(_VOCABULARY)
# Known words that also end English words: after a word the vocabulary lacks they are its ending
# (cover-age, aver-age, percent-age), not a word of their own.
_SUFFIX_WORDS = frozenset({"age"})
_ENDINGS = ("s", "es", "d", "ed", "ing", "er", "ers")
# Words that say "an identifier", not what is identified.
GENERIC = frozenset({"id", "ids", "key", "keys", "code", "codes", "num", "number", "no", "nr", "ref", "fk", "pk",
                     "the", "of", "d", "dim", "fact", "tbl", "table", "lkp", "lookup", "dict", "master", "list"})
# Words naming people: a "name" column with one of these (or no other word) is personal data.
PEOPLE = frozenset({"patient", "patients", "person", "persons", "subject", "subjects", "member", "members", "client",
                    "resident", "provider", "providers", "caregiver", "caregivers", "clinician", "staff",
                    "physician", "doctor", "nurse", "first", "last", "full", "owner", "contact", "mother",
                    "father", "user", "name", "names"})
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
    """Known words covering ``run`` at the least cost (``_cheapest``), an unknown word kept
    whole with its English ending: ``payercoverage`` -> ``('payer', 'coverage')``."""
    pieces: list[str] = []
    for piece in _cheapest(run):
        if piece in _SUFFIX_WORDS and pieces and not known(pieces[-1]):
            pieces[-1] += piece
        else:
            pieces.append(piece)
    return tuple(pieces)


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
        if word.endswith(ending) and len(stem) >= 4 and (stem in _WORDS or stem + "e" in _WORDS):
            return True
    return False


def singular(word: str) -> str:
    """``diagnoses`` -> ``diagnosis``, ``labitems`` -> ``labitem``, ``stays`` -> ``stay``."""
    if len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ses") and word[:-2] + "is" in _WORDS:
        return word[:-2] + "is"
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("xes", "ches", "shes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") else word


def meaningful(name: str) -> set[str]:
    """The words of ``name`` that say what it is about, singular (``patientKey`` -> ``{'patient'}``)."""
    return {singular(w) for w in words(name) if w not in GENERIC and not w.isdigit()}


def phrase(name: str) -> str:
    """A name as words: ``admitdatetime`` -> ``admit date/time``."""
    return " ".join(words(name)).replace("date time", "date/time") or name


def entity(table: str) -> str:
    """What one row of ``table`` is, from its name: ``lab_results`` -> ``lab result``."""
    parts = [w for w in words(table) if w not in GENERIC and not w.isdigit()] or list(words(table)) or [table]
    return " ".join([*parts[:-1], singular(parts[-1])])
