"""Words that name a column: a question asking for another attribute is another question.

"The age of patient X in their last hospital encounter" and "the marital status of
patient Y in their last hospital encounter" share every word but the attribute, and
the cell of the first, adapted to Y, answers the second with an age. The schema says
which words name which columns: the column's own name ("marital_status") and its
description in the knowledge ("Marital status, e.g. ..."). ``AttributeWords`` maps
each such word (stemmed) to the columns it names; a reuse is refused when the new
question says an attribute word its remembered question does not, and the cell's code
uses none of the columns the word names, or the other way round. Nothing here is a
list of words for one dataset: the map is read from the connected database.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ehr_magic.knowledge.handle import Database
from ehr_magic.reuse.lexicon import OPERATORS
from ehr_magic.text import stem

MAX_COLUMNS = 3  # a word naming more column names than this ("time", "identifier") says little
# Words that change with tense and article only; any other new word may replace an attribute.
_GRAMMAR = frozenset("a an the is are was were be been do doe did has have had".split())
MAX_SYNONYM_WORDS = 4  # content words of a convention clause that names a column: more explain it
# English words that explain how to compute rather than name what is computed.
_NOT_NAMES = frozenset("count counts counted number distinct within one always alone equal exact null using "
                       "whose among likewise means".split())
# A column description starts by naming the attribute ("Marital status, e.g. ...", "Age in
# years at this visit", "Date of birth (TIMESTAMP ...)"); what follows explains it.
_FIRST_CLAUSE = re.compile(r"^[^,;.(:]*?(?=\s+(?:in|of|at|for|from|with|when|where|that|which|if|e\.g)\b|[,;.(:]|$)")
_WORD = re.compile(r"[a-z][a-z0-9]+")
_NAME = re.compile(r"[a-z_][a-z0-9_.]*[a-z0-9_]")
_CLAUSE = re.compile(r"[,;:]|\s-\s|\.\s")  # a convention's clauses


class AttributeWords:
    """Stemmed word -> the column names it names, from the schema and its knowledge."""

    def __init__(self, ehr: Database) -> None:
        from ehr_magic.reuse.unanswerable import STOPWORDS

        descriptions: dict[str, list[str]] = {}
        knowledge = getattr(ehr, "knowledge", None)
        if knowledge is not None:
            for info in knowledge.tables.values():
                for column, text in info.columns.items():
                    first = _FIRST_CLAUSE.match(text.strip())
                    descriptions.setdefault(column.lower(), []).append(first.group(0) if first else "")
        names = {column.lower() for table in ehr.tables() for column in ehr.columns(table)}
        if knowledge is not None:
            # words of a table's name or description name the table (SchemaEvidence), not a column
            table_words = {w for info in knowledge.tables.values()
                           for w in _WORD.findall(f"{info.name} {info.row} {info.description}".lower())}
            for column, synonym in _convention_synonyms(knowledge.conventions, names):
                words = [w for w in _WORD.findall(synonym) if w not in table_words]
                descriptions.setdefault(column, []).append(" ".join(words))
        owners: dict[str, set[str]] = {}
        for table in ehr.tables():
            for column in ehr.columns(table):
                name = column.lower()
                texts = [name.replace("_", " "), *descriptions.get(name, [])]
                for word in _WORD.findall(" ".join(texts).lower()):
                    if word in STOPWORDS or word in OPERATORS or word in _NOT_NAMES or len(word) < 3:
                        continue
                    owners.setdefault(stem(word), set()).add(name)
        self.columns: dict[str, frozenset[str]] = {
            word: frozenset(names) for word, names in owners.items() if len(names) <= MAX_COLUMNS}

    def named(self, stems: Iterable[str]) -> dict[str, frozenset[str]]:
        """The attribute words among ``stems`` with the columns each names."""
        return {s: self.columns[s] for s in stems if s in self.columns}

    def conflict(self, question_stems: Iterable[str], cell_stems: Iterable[str], code_names: frozenset[str]) -> str:
        """Why the cell computes another attribute than the question asks for ("" if it does not).

        A word only one of the two questions says, naming columns the cell's code does not
        use, asks for (or drops) an attribute: "marital status" where the cell computes an age.
        When the code does use one of the word's columns, the word adds nothing the cell misses.
        The other way ("discharged" said by the cell only) counts when the new question says
        something else in its place, not when it only leaves words out."""
        question_stems, cell_stems = set(question_stems), set(cell_stems)
        asked, remembered = self.named(question_stems), self.named(cell_stems)
        for word, columns in asked.items():
            if word not in remembered and not columns & code_names:
                return f"the question asks about {_shown(columns)}, which the cell's code does not use"
        if not question_stems - cell_stems - _GRAMMAR:
            return ""  # the question only leaves words out ("the first RDW" for "the first glucose value")
        said = set().union(*asked.values()) if asked else set()
        for word, columns in remembered.items():
            if word not in asked and columns & code_names and not columns & said:
                return f"the cell's question names {_shown(columns)}, the new question does not"
        return ""


def _convention_synonyms(conventions: Iterable[str], columns: set[str]) -> list[tuple[str, str]]:
    """``(column, words)`` from the knowledge's conventions: a clause that names exactly one
    column in a few words says what the column is called ("route (the 'method of intake') in
    route", "sex patients.gender")."""
    from ehr_magic.reuse.unanswerable import STOPWORDS

    found = []
    for convention in conventions:
        for clause in _CLAUSE.split(convention.lower()):
            named = {w.split(".")[-1] for w in _NAME.findall(clause)} & columns
            if len(named) != 1:
                continue
            column = named.pop()
            rest = re.sub(rf"\b(?:\w+\.)?{re.escape(column)}\b", " ", clause)
            if len([w for w in _WORD.findall(rest) if w not in STOPWORDS]) <= MAX_SYNONYM_WORDS:
                found.append((column, rest))  # a longer clause explains rather than names
    return found


def _shown(columns: frozenset[str]) -> str:
    return " / ".join(sorted(columns))
