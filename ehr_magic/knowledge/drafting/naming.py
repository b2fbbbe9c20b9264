"""What drafting reads in table and column names: their words (``words``, from
``ehr_magic.linking.names``: ``admitDateTime``, ``admit_date_time`` and ``admitdatetime`` all read
"admit date time"), with warehouse abbreviations spelled out (``read``: ``HSP_ENC`` -> hospital
encounter), the words that say what a name is about (``meaningful``), singular nouns, and the
words that say "an identifier" or name people. Nothing here knows a dataset.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import typeguard

from ehr_magic.linking.names import english, known, words
from ehr_magic.linking.warehouse_vocabulary import warehouse_abbreviations

__all__ = ["GENERIC", "PEOPLE", "VIEW_MARKS", "dataset_words", "english", "entity", "known", "meaningful", "phrase",
           "read", "singular", "understood", "unmarked", "words"]

# Words that say "an identifier", not what is identified.
GENERIC = frozenset({"id", "ids", "key", "keys", "code", "codes", "num", "number", "no", "nr", "ref", "fk", "pk",
                     "the", "of", "d", "dim", "fact", "tbl", "table", "lkp", "lookup", "dict", "master", "list"})
# Words that mark a table as a view (``v_patient``, ``vw_lab``, ``mv_lab``, ``patient_vw``), first or last.
VIEW_MARKS = frozenset({"v", "vw", "vew", "mv", "mvw", "view", "matview"})
# Words naming people: a "name" column with one of these (or no other word) is personal data.
PEOPLE = frozenset({"patient", "patients", "person", "persons", "subject", "subjects", "member", "members", "client",
                    "resident", "provider", "providers", "caregiver", "caregivers", "clinician", "staff",
                    "physician", "doctor", "nurse", "first", "last", "full", "owner", "contact", "mother",
                    "father", "user", "name", "names", "middle", "given", "family", "maiden", "nick", "sur"})


def understood(word: str) -> bool:
    """Whether ``word`` is a record-keeping word: in the general vocabulary (``known``) or a word
    that warehouse abbreviations spell out (component, dispense)."""
    return known(word) or word in warehouse_abbreviations().spelled


@functools.lru_cache(maxsize=4096)
def singular(word: str) -> str:
    """``statuses`` -> ``status``, ``diagnoses`` -> ``diagnosis``, ``people`` -> ``person``,
    ``labitems`` -> ``labitem``: irregular plurals from ``inflect``. Words that only end like a
    plural stay as they are (status, diagnosis, sepsis, meas), and so do plurals in -a, which
    names use as mass nouns (data, media, criteria)."""
    if len(word) <= 3 or word.endswith(("ss", "us", "is")) or word.endswith("a"):
        return word
    found = _INFLECT.singular_noun(word)
    if not found or (word.endswith("as") and not (known(found) or english(found))):
        return word  # not a plural, or a word in -as that is not one (meas, bias)
    return found


def _unchecked(target: Any = None, **_options: Any) -> Any:
    """``typeguard.typechecked`` that checks nothing (see ``_load_inflect``)."""
    return target if target is not None else (lambda function: function)


def _load_inflect() -> ModuleType:
    """``inflect``, imported without typeguard's run-time checks of its arguments. It wraps its API
    in ``@typechecked``, which re-parses and recompiles its module at import: 1.5 s, paid by every
    process that imports the agent. We pass it only strings, so the checks find nothing."""
    if "inflect" in sys.modules:
        return sys.modules["inflect"]
    checked = typeguard.typechecked
    typeguard.typechecked = _unchecked
    try:
        import inflect
    finally:
        typeguard.typechecked = checked
    return inflect


_INFLECT = _load_inflect().engine()


@functools.lru_cache(maxsize=8192)
def read(name: str) -> tuple[str, ...]:
    """The words of a name with warehouse abbreviations spelled out (their first meaning, from
    ``warehouse_abbreviations.tsv``): ``HSP_ENC`` -> ``('hospital', 'encounter')``, ``ADM_DTTM``
    -> ``('admission', 'date', 'time')``. A word one of whose meanings is itself (id, key, lab)
    stays as it is."""
    vocabulary = warehouse_abbreviations()
    found: list[str] = []
    for word in words(name):
        meanings = vocabulary.expand(word)
        found.extend(word.split() if not meanings or word in meanings else meanings[0].split())
    return tuple(found)


@functools.lru_cache(maxsize=16384)  # join finding asks for every column against every key's table
def meaningful(name: str) -> frozenset[str]:
    """The words of ``name`` that say what it is about, singular (``patientKey`` -> ``{'patient'}``,
    ``PAT_ID`` -> ``{'patient'}``)."""
    return frozenset(singular(w) for w in read(name) if w not in GENERIC and not w.isdigit())


def phrase(name: str) -> str:
    """A name as words: ``admitdatetime`` -> ``admit date/time``, ``DSCH_DTTM`` -> ``discharge date/time``."""
    return " ".join(read(name)).replace("date time", "date/time") or name


def entity(table: str, skip: int = 0) -> str:
    """What one row of ``table`` is, from its name: ``lab_results`` -> ``lab result``, ``HSP_ENC``
    -> ``hospital encounter``; the first ``skip`` words only say the dataset (``dataset_words``)."""
    said = read(table)[skip:]
    parts = [w for w in unmarked(said) if w not in GENERIC and not w.isdigit()] or list(said) or [table]
    return " ".join([*parts[:-1], singular(parts[-1])])


def unmarked(said: Sequence[str]) -> list[str]:
    """The words of a table's name without a first or last word that marks it as a view."""
    kept = list(said)
    if len(kept) > 1 and kept[0] in VIEW_MARKS:
        kept = kept[1:]
    if len(kept) > 1 and kept[-1] in VIEW_MARKS:
        kept = kept[:-1]
    return kept


def dataset_words(tables: Sequence[str], dataset: str) -> int:
    """How many leading words of the names of ``tables`` only say which dataset they belong to: the
    run every name (of two or more) begins with and the dataset's own name has too, with a word
    left after it in each. Files ``mimic_iv_demo_meds_events`` and ``mimic_iv_demo_meds_labels`` of
    folder ``mimic-iv-demo-meds-flattened``: 4, so that a row is an event, not a 'mimic intravenous
    demographics medications event'."""
    said = [read(t) for t in tables]
    own = set(read(dataset))
    skip = 0
    while (len(said) > 1 and all(len(words) > skip + 1 for words in said)
           and len({words[skip] for words in said}) == 1 and said[0][skip] in own):
        skip += 1
    return skip
