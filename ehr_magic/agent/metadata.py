"""Answers that hold only metadata: names of columns or tables, or a schema listing.

A model exploring an unfamiliar schema may put what it looked up (``ehr.describe``
output, a list of column names) into ``answer``. For a question about the data that is
a look-up, not an answer: the loop gives it back as an observation. Decided from the
value and this database's own names, never from a dataset's vocabulary.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database

# A question about the schema itself, whose answer may well be names of columns or tables.
_ABOUT_SCHEMA = re.compile(r"\b(columns?|tables?|fields?|schemas?|variables?|attributes?)\b", re.IGNORECASE)
# Column sets of schema listings: ehr.describe, DuckDB's DESCRIBE, information_schema.columns.
_LISTINGS = ({"column", "type"}, {"column_name", "column_type"}, {"column_name", "data_type"})


def about_schema(question: str) -> bool:
    """Whether the question asks about columns or tables rather than about the data."""
    return bool(_ABOUT_SCHEMA.search(question))


def metadata_only(value: Any, ehr: Database) -> bool:
    """Whether ``value`` holds nothing but names of this database's columns or tables, or is a
    schema listing (the columns of ``ehr.describe`` or ``DESCRIBE``)."""
    if isinstance(value, pl.DataFrame):
        if any(listing <= set(value.columns) for listing in _LISTINGS):
            return True
        if value.width != 1 or value.dtypes[0] != pl.String:
            return False
        value = value.to_series()
    if isinstance(value, pl.Series):
        if value.dtype != pl.String:
            return False
        value = value.drop_nulls().to_list()
    if isinstance(value, str):
        value = [part for part in re.split(r"[,\s]+", value) if part]
        if len(value) < 2:  # one word is as likely a value ("emergency") as a name
            return False
    if not isinstance(value, (list, tuple, set)) or not value or not all(isinstance(v, str) for v in value):
        return False
    return {v.strip().strip('"').lower() for v in value} <= _names(ehr)


def _names(ehr: Database) -> set[str]:
    names = {t.lower() for t in ehr.tables()}
    for table in ehr.tables():
        names |= {c.lower() for c in ehr.columns(table)}
    return names
