"""The OMOP Common Data Model (5.3 and 5.4): how it is recognised, and ``ehr.concepts``.

Recognised by its core tables (person, observation_period, concept, with their key columns) and by
most of the described columns of the tables it has, in any case: optional tables may be missing,
5.3 and 5.4 differ in a few columns, and a table exported empty may hold only a header row.

``ehr.concepts(text)`` finds concepts the way an OMOP analyst does: by name, by synonym and by code,
then, when asked, every concept below them in concept_ancestor. Names and synonyms are looked up in
the indexed distinct values of concept.concept_name and concept_synonym.concept_synonym_name (see
``ehr_magic.linking.large_vocabulary`` for millions of them); the rows of the concepts found come
from a copy of the concept table's few descriptive columns read once per connection and kept sorted
by name, code and id, so a call costs binary searches, not a scan of millions of rows. Descendants
and 'Maps to' are read with one query each, only when needed.
"""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ehr_magic.db.schemas import CoreTables, SchemaPlugin, lowered
from ehr_magic.errors import EhrMagicError
from ehr_magic.knowledge.handle import Database
from ehr_magic.linking.clinical_vocabulary import clinical_vocabulary
from ehr_magic.safety import limits

if TYPE_CHECKING:  # the plug-in is part of the handle: it reads the concept tables with the handle's own runner
    from ehr_magic.db.ehr import EHR

SCHEMA = "omop_cdm"
CORE = {
    "person": ("person_id", "gender_concept_id", "year_of_birth"),
    "observation_period": ("person_id", "observation_period_start_date", "observation_period_end_date"),
    "concept": ("concept_id", "concept_name", "domain_id", "vocabulary_id", "concept_code"),
}
COLUMNS = ("concept_id", "concept_name", "domain_id", "vocabulary_id", "concept_class_id", "standard_concept",
           "concept_code")
RESULT_SCHEMA = {**{c: pl.String for c in COLUMNS}, "concept_id": pl.Int64, "found_by": pl.String,
                 "score": pl.Float64}
_CODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-_/]*$")  # one token with a digit: 'K92.2', '1191', 'E11'
_NAMES_PER_CONCEPT = 4  # names asked of the index per concept wanted (domain and standard filter some out)


def concepts(ehr: EHR, text: str, domain: str | None = None, standard: bool = True, descendants: bool = False,
             *, k: int = 20, min_score: float = 80.0) -> pl.DataFrame:
    """Concepts for ``text``, found by name (concept.concept_name), synonym (concept_synonym) and
    code (concept_code, e.g. 'K92.2' or '1191'), best first: a table of concept_id, concept_name,
    domain_id, vocabulary_id, concept_class_id, standard_concept, concept_code, found_by ('name',
    'synonym', 'code', 'maps to' or 'descendant') and score (0-100; none for descendants).

    ``domain`` keeps one domain ('Condition', 'Drug', 'Procedure', 'Measurement', 'Observation'...).
    ``standard`` keeps standard concepts only; a non-standard code found is replaced by the standard
    concept it maps to. ``descendants`` adds every concept below those found (concept_ancestor): "any
    kind of X", or every product containing an ingredient. ``k``: at most this many found by text,
    each scoring at least ``min_score``.

        ids = ehr.concepts('sinusitis', domain='Condition', descendants=True)['concept_id'].to_list()
    """
    if not isinstance(text, str) or not text.strip():
        raise EhrMagicError("ehr.concepts needs the text to look for, e.g. ehr.concepts('aspirin').")
    text = text.strip()
    index = _index(ehr)
    alternatives = clinical_vocabulary().alternatives(text)
    asked = max(_NAMES_PER_CONCEPT * k, 50)
    found: list[pl.DataFrame] = []
    table, column = index.name_column
    names = [(v, s) for v, s in ehr.vocabulary(table, column).match(text, asked, alternatives) if s >= min_score]
    found.append(_scored(index.by_name.rows(v for v, _ in names), "concept_name", names, "name"))
    if index.synonyms is not None:
        table, column = index.synonym_column
        names = [(v, s) for v, s in ehr.vocabulary(table, column).match(text, asked, alternatives) if s >= min_score]
        best = pl.DataFrame(names, schema={"name": pl.String, "score": pl.Float64}, orient="row")
        ids = index.synonyms.rows(best["name"]).join(best, on="name").group_by("concept_id").agg(pl.col("score").max())
        found.append(_shaped(index.by_id.rows(ids["concept_id"]).join(ids, on="concept_id")
                             .with_columns(found_by=pl.lit("synonym"))))
    if _CODE.match(text) and any(c.isdigit() for c in text):
        codes = index.by_code.rows(dict.fromkeys([text, text.upper()]))
        if not codes.is_empty():  # the text is a code: names merely spelled alike are no answer
            found = [f.filter(pl.col("score") >= 100) for f in found]
        found.append(codes.with_columns(found_by=pl.lit("code"), score=pl.lit(100.0)))
    result = pl.concat([_shaped(f) for f in found]) if found else _empty()
    if standard:
        result = _standard(ehr, index, result)
    result = _in_domain(result, domain)
    result = (result.sort(["score", "concept_id"], descending=[True, False])
              .unique("concept_id", keep="first", maintain_order=True)
              .sort(["score", pl.col("concept_name").str.len_chars(), "concept_id"], descending=[True, False, False],
                    nulls_last=True)
              .head(k))
    if descendants:
        below = index.by_id.rows(_descendants(ehr, result["concept_id"].to_list()))
        below = below.filter(~pl.col("concept_id").is_in(result["concept_id"].implode()))
        below = _in_domain(below.filter(pl.col("standard_concept") == "S") if standard else below, domain)
        result = pl.concat([result, _shaped(below.sort("concept_name", "concept_id").with_columns(
            found_by=pl.lit("descendant"), score=pl.lit(None, dtype=pl.Float64)))])
    return result


PLUGIN = SchemaPlugin(SCHEMA, CoreTables(SCHEMA, CORE, share=0.6), title="an OMOP CDM database",
                      helpers={"concepts": concepts})


# -- the concept index of one connection ------------------------------------------------------------


class _Sorted:
    """The rows of a frame by the values of one of its columns, found by binary search."""

    def __init__(self, frame: pl.DataFrame, key: str) -> None:
        self.frame = frame
        self.key = key
        keyed = frame.select(pl.col(key), row=pl.int_range(pl.len(), dtype=pl.UInt32)).drop_nulls(key).sort(key)
        self.sorted = keyed[key]
        self.order = keyed["row"]

    def rows(self, keys: Any) -> pl.DataFrame:
        wanted = pl.Series(list(keys), dtype=self.sorted.dtype).unique()
        if wanted.is_empty() or self.sorted.is_empty():
            return self.frame.clear()
        low = self.sorted.search_sorted(wanted, side="left").to_numpy()
        high = self.sorted.search_sorted(wanted, side="right").to_numpy()
        spans = [np.arange(a, b) for a, b in zip(low, high) if b > a]
        if not spans:
            return self.frame.clear()
        return self.frame[self.order.gather(np.concatenate(spans)).to_numpy()]


@dataclass(frozen=True)
class _Index:
    by_name: _Sorted
    by_code: _Sorted
    by_id: _Sorted
    name_column: tuple[str, str]  # concept and its name column, as this database spells them
    synonyms: _Sorted | None  # concept_synonym (name, concept_id) by name
    synonym_column: tuple[str, str]  # concept_synonym and its name column, as this database spells them


_indexes: weakref.WeakKeyDictionary[EHR, _Index] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _index(ehr: EHR) -> _Index:
    with _lock:
        index = _indexes.get(ehr)
        if index is None:
            index = _indexes[ehr] = _build(ehr)
        return index


def _table(ehr: Database, table: str) -> str | None:
    """``table`` as this database spells it, None if it has none."""
    return next((t for t in ehr.tables() if t.lower() == table), None)


def _present(ehr: Database, table: str) -> str:
    """``table`` as this database spells it, for a table known to be there (``_real`` read its columns)."""
    name = _table(ehr, table)
    assert name is not None, f"{table} was found a moment ago"
    return name


def _real(ehr: Database, table: str) -> dict[str, str]:
    """Lower-case column name -> the column as this database spells it ({} for a missing or
    header-only table)."""
    name = _table(ehr, table)
    if name is None or not lowered({name: ehr.columns(name)}).get(table):
        return {}
    return {c.lower(): c for c in ehr.columns(name)}


def _select(ehr: EHR, table: str, columns: dict[str, str], *, where: str = "") -> pl.DataFrame:
    """``columns`` (our name -> an expression over the real, quoted column) of ``table``, read in
    full for our own index (so not under generated code's row cap)."""
    real = _table(ehr, table)
    select = ", ".join(f"{expression} AS {name}" for name, expression in columns.items())
    with limits.row_cap(None):
        return ehr._run(f'SELECT {select} FROM "{real}"{where}', what=f"reading {table}")


def _build(ehr: EHR) -> _Index:
    concept = _real(ehr, "concept")
    missing = [c for c in ("concept_id", "concept_name") if c not in concept]
    if missing:
        raise EhrMagicError(f"{ehr.dataset} has no usable concept table (it lacks {', '.join(missing)}), so "
                            "ehr.concepts cannot look concepts up; query the tables with ehr.sql.")
    columns = {c: (f'CAST("{concept[c]}" AS BIGINT)' if c == "concept_id" else f'CAST("{concept[c]}" AS VARCHAR)')
               if c in concept else "CAST(NULL AS VARCHAR)" for c in COLUMNS}
    frame = _select(ehr, "concept", columns)
    synonym = _real(ehr, "concept_synonym")
    synonyms, synonym_column = None, ("", "")
    if {"concept_id", "concept_synonym_name"} <= set(synonym):
        pairs = _select(ehr, "concept_synonym", {"name": f'CAST("{synonym["concept_synonym_name"]}" AS VARCHAR)',
                                                 "concept_id": f'CAST("{synonym["concept_id"]}" AS BIGINT)'})
        synonyms = _Sorted(pairs, "name")
        synonym_column = (_present(ehr, "concept_synonym"), synonym["concept_synonym_name"])
    return _Index(_Sorted(frame, "concept_name"), _Sorted(frame, "concept_code"), _Sorted(frame, "concept_id"),
                  (_present(ehr, "concept"), concept["concept_name"]), synonyms, synonym_column)


# -- steps -----------------------------------------------------------------------------------------


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema=RESULT_SCHEMA)


def _shaped(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select([pl.col(c).cast(t) for c, t in RESULT_SCHEMA.items()])


def _scored(rows: pl.DataFrame, key: str, scores: list[tuple[str, float]], how: str) -> pl.DataFrame:
    """``rows`` with the score of the value of ``key`` each was found by."""
    best = pl.DataFrame(scores, schema={key: pl.String, "score": pl.Float64}, orient="row").group_by(key).max()
    return _shaped(rows.join(best, on=key).with_columns(found_by=pl.lit(how)))


def _in_domain(frame: pl.DataFrame, domain: str | None) -> pl.DataFrame:
    if domain is None:
        return frame
    return frame.filter(pl.col("domain_id").str.to_lowercase() == str(domain).strip().lower())


def _standard(ehr: EHR, index: _Index, found: pl.DataFrame) -> pl.DataFrame:
    """The standard concepts of ``found``; a non-standard one found by its code is replaced by the
    standard concepts it maps to ('Maps to' in concept_relationship), at its score."""
    codes = found.filter((pl.col("standard_concept").fill_null("") != "S") & (pl.col("found_by") == "code"))
    kept = found.filter(pl.col("standard_concept") == "S")
    relationship = _real(ehr, "concept_relationship")
    if codes.is_empty() or not {"concept_id_1", "concept_id_2", "relationship_id"} <= set(relationship):
        return kept
    ids = codes["concept_id"].to_list()
    pairs = _select(ehr, "concept_relationship",
                    {"source": f'CAST("{relationship["concept_id_1"]}" AS BIGINT)',
                     "concept_id": f'CAST("{relationship["concept_id_2"]}" AS BIGINT)'},
                    where=f' WHERE "{relationship["relationship_id"]}" = \'Maps to\' AND '
                          f'"{relationship["concept_id_1"]}" IN ({", ".join(str(int(i)) for i in ids)})')
    scores = pairs.join(codes.select(source="concept_id", score="score"), on="source").group_by("concept_id").agg(
        pl.col("score").max())
    mapped = index.by_id.rows(scores["concept_id"]).join(scores, on="concept_id").with_columns(
        found_by=pl.lit("maps to")).filter(pl.col("standard_concept") == "S")
    return pl.concat([kept, _shaped(mapped)])


def _descendants(ehr: EHR, ids: list[int]) -> list[int]:
    """The concepts below ``ids`` in concept_ancestor (``ids`` themselves included)."""
    ancestor = _real(ehr, "concept_ancestor")
    if not {"ancestor_concept_id", "descendant_concept_id"} <= set(ancestor):
        raise EhrMagicError(f"{ehr.dataset} has no concept_ancestor table with its rows, so descendants cannot be "
                            "found; call ehr.concepts without descendants=True.")
    if not ids:
        return []
    found = _select(ehr, "concept_ancestor", {"concept_id": f'CAST("{ancestor["descendant_concept_id"]}" AS BIGINT)'},
                    where=f' WHERE "{ancestor["ancestor_concept_id"]}" IN ({", ".join(str(int(i)) for i in ids)})')
    return sorted(set(found["concept_id"].to_list()) | set(ids))
