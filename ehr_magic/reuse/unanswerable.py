"""Why a question cannot be answered from this database.

Three reasons are found without a model:

* it names an entity that does not exist: "patient 15257" where the number follows
  a word that memory uses before identifiers ("patient" -> ``subject_id``) and no
  table stores it;
* it asks about the future: a time expression entirely after the data's "now";
* it asks for something nothing knows about: content words that appear neither in
  the schema (tables, columns, descriptions, stored values) nor in any remembered
  question ("phone number", "address", "operating system").

The first two make reuse abstain outright. The third is the explanation given when
no remembered cell fits.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ehr_magic.knowledge.handle import Database
from ehr_magic.reuse.values import Detected
from ehr_magic.text import FUNCTION_WORDS

if TYPE_CHECKING:
    from ehr_magic.reuse.match import ReuseIndex  # only for its type: match imports this module (via evidence)

_WORD = re.compile(r"[a-z][a-z]+")
# Function words, and the words of a request ("please tell me..."): never evidence that a
# question asks for unknown data.
STOPWORDS = FUNCTION_WORDS | frozenset("tell show give list please find get let know want need much many kind ever per"
                                       .split())


def unanswerable_reason(question: str, detected: Detected, index: ReuseIndex, ehr: Database) -> str:
    """A reason the question cannot be answered here ("" when none is certain)."""
    for word, number in detected.unknown_ids:
        column = index.detector.entity_words.get(word, "id")
        return f"there is no {word} {number} in this database (no {column} {number})"
    clock = getattr(ehr, "clock", None)
    if clock is not None:
        for value in detected.values:
            if value.time is not None and value.time.is_future(clock):
                return (f"'{value.text}' lies after the data's current time "
                        f"({clock.now:%Y-%m-%d %H:%M}), so nothing can be recorded then")
    return ""


def unknown_words(question: str, known: set[str]) -> list[str]:
    """Content words of ``question`` that nothing known mentions (adverbs in -ly, "usually",
    say how, not what: they name no data)."""
    found = []
    for word in _WORD.findall(question.lower()):
        if word in STOPWORDS or len(word) < 3 or word in known or word.rstrip("s") in known or word.endswith("ly"):
            continue
        if word not in found:
            found.append(word)
    return found


def schema_words(ehr: Database) -> set[str]:
    """Words of the schema: table and column names (and their parts) and descriptions."""
    words: set[str] = set()
    for table in ehr.tables():
        words.update(_WORD.findall(table.lower().replace("_", " ")))
        for column in ehr.columns(table):
            words.update(_WORD.findall(column.lower().replace("_", " ")))
    knowledge = getattr(ehr, "knowledge", None)
    if knowledge is not None:
        # Absent tables are named in the guide, but a question about them is still about unknown data.
        words.update(_WORD.findall(knowledge.guide().replace(knowledge.absent_note(), "").lower()))
        for info in knowledge.tables.values():
            words.update(_WORD.findall(info.detail().lower()))
    return words
