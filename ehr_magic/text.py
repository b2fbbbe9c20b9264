"""Text at the bottom of the house: words, stems, stop words, normalising, times read from text,
and the closest name found for a "did you mean".

Every layer that compares words (value lookup, table choice, reuse, memory, skills) takes
them from here, so that "Heart-Rate" and "heart rate" are the same everywhere:

- ``normalise``: lower case, punctuation and spacing collapsed (stored values, questions);
  ``normalise_all`` the same for a whole column of values at once;
- ``WORD`` / ``split_words``: the lower-case ASCII words and numbers of a text (``lab_test`` is two);
- ``stem``: the one stemmer (Snowball English, cut to six letters); ``prefix_stem``, a word's
  first five letters, is what table choice matches schema names with (see there why);
- ``FUNCTION_WORDS``: English function words, which each user extends with its own words;
- ``NUMBER_WORDS``: counts written as words ('top five'), which no layer takes for a term;
- ``masked_tokens`` and ``normalise_unicode``: how memory compares questions and keys them.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable

import polars as pl
import snowballstemmer
from rapidfuzz import process

NON_ALNUM = re.compile(r"[^0-9a-z]+")
WORD = re.compile(r"[0-9a-z]+")  # the words ``normalise`` leaves, found in lower-cased text


def normalise(text: str) -> str:
    """Lowercase, punctuation and spacing collapsed to single spaces."""
    return NON_ALNUM.sub(" ", str(text).lower()).strip()


def normalise_all(values: list[str]) -> pl.Series:
    """``normalise`` of each value, at once, in polars: the 190k ICD titles in a fraction of a second."""
    return (pl.Series(values, dtype=pl.String).str.to_lowercase()
            .str.replace_all(NON_ALNUM.pattern, " ").str.strip_chars())


def split_words(text: str) -> list[str]:
    """The lower-case words and numbers of ``text``, in order (``'LabTest_key 2'`` -> ``labtest key 2``)."""
    return WORD.findall(text.lower())


# -- stems ---------------------------------------------------------------------------------

_ENGLISH = snowballstemmer.stemmer("english")
STEM_LENGTH = 6


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball (Porter 2) English stem, cut to its first six letters; placeholders
    (``<...>``) unchanged. Snowball joins pricing/price and diagnosed/diagnoses; the cut
    joins prescribed/prescription, which Snowball keeps apart."""
    if word.startswith("<"):
        return word
    return _ENGLISH.stemWord(word)[:STEM_LENGTH]


PREFIX_LENGTH = 5


def prefix_stem(word: str) -> str:
    """The first five letters of ``word``: crude, but it joins diagnosed/diagnoses and
    prescribed/prescriptions, and the prefix of a word is still found inside every name that
    holds the word (a name run together: ``labtestkey``), which a Snowball stem need not be
    ('studi' for 'study'). Table choice matches words with it rather than with ``stem``: with
    ``stem``, gold-table coverage of the first prompt fell (bench_unfamiliar.py, warehouse-style
    names at 8k: 65.0% -> 62.7% on train, 70.3% -> 66.3% on valid; bench_agent.py, EHRSQL valid
    with the seeds at 4k: 96.1% -> 95.7%). Table choice then checks that the two words are forms of
    one word ('quality' is not 'qualitative')."""
    return word[:PREFIX_LENGTH]


# -- stop words ----------------------------------------------------------------------------

# English function words (articles, pronouns, auxiliaries, prepositions, conjunctions):
# they say how a sentence is built, never what it is about. Each user adds its own
# domain words ("patient", "show") with ``FUNCTION_WORDS | {...}``.
FUNCTION_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her here
hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or other
our out over own same she should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you your
yours
""".split())


# -- memory's question form ------------------------------------------------------------------

# Counts written as words: a question's "top five", never a stored term (memory masks them as numbers).
NUMBER_WORDS = frozenset("one two three four five six seven eight nine ten eleven twelve".split())
# Tokens: a quoted string (not an apostrophe inside a word), a run of digits with
# date/number punctuation inside, or a word. Punctuation is dropped.
_MASKED_TOKEN = re.compile(r"""(?<!\w)(?:'[^'\n]*'|"[^"\n]*"|`[^`\n]*`)(?!\w)|\d(?:[\d/:.,-]*\d)?|\w+""")
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4}|\d{1,2}/\d{4}|\d{4}/\d{1,2}(?:/\d{1,2})?")
_TIME = re.compile(r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?")
_NON_WORD = re.compile(r"[^\w\s]+")


def masked_tokens(text: str) -> list[str]:
    """Lower-cased word tokens with values replaced by placeholders: quoted strings
    -> ``val``, dates -> ``date``, times -> ``time``, numbers and the number words
    one..twelve -> ``num``. Punctuation is dropped; words of any script are kept."""
    out = []
    for token in _MASKED_TOKEN.findall(text.lower()):
        first = token[0]
        if first in "'\"`":
            out.append("val")
        elif first.isdigit():
            out.append("date" if _DATE.fullmatch(token) else "time" if _TIME.fullmatch(token) else "num")
        elif token in NUMBER_WORDS:
            out.append("num")
        else:
            out.append(token)
    return out


def normalise_unicode(text: str) -> str:
    """Lower case, punctuation dropped, whitespace collapsed; unlike ``normalise`` it keeps
    letters of every script and underscores (``'Ménière_x'`` stays ``'ménière_x'``). Memory
    keys its stored questions by this form, so it must not change."""
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


# -- times -----------------------------------------------------------------------------------

def parse_time(value: str | dt.datetime | dt.date) -> dt.datetime:
    """Accept a datetime, a date or an ISO-like string ('2100-12-31 23:59:00')."""
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    try:
        return dt.datetime.fromisoformat(str(value).strip())
    except ValueError:
        raise ValueError(f"Cannot read {value!r} as a time; write it like '2100-12-31 23:59:00'.") from None


SUGGEST_MIN_SCORE = 70.0  # rapidfuzz WRatio (0-100): below it a name is too unlike to suggest


def closest(word: str, choices: Iterable[str], *, cutoff: float = SUGGEST_MIN_SCORE) -> str | None:
    """The choice most like ``word`` (rapidfuzz's WRatio), if it scores at least ``cutoff``:
    what a "did you mean" offers for a misspelt table, setting or skill. None: nothing close."""
    found = process.extract(word, list(choices), limit=1, score_cutoff=cutoff)
    return found[0][0] if found else None
