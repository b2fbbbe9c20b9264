"""The handle's face (``Database`` and the protocols it extends) and its class, kept together
where mypy cannot: ``EHR.__getattr__`` serves a schema's helpers under any name, so mypy takes a
member a protocol declares as present on ``EHR`` even when the class has none. Here each one
must be the handle's own member, found without ``__getattr__``."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Generic, Protocol

import ehr_magic
from ehr_magic.knowledge.handle import Database


def declared(protocol: type) -> set[str]:
    """The public members ``protocol`` and the protocols it extends declare."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if getattr(cls, "_is_protocol", False) and cls not in (Protocol, Generic):
            names |= {name for name in (*vars(cls), *vars(cls).get("__annotations__", {}))
                      if not name.startswith("_")}
    return names


def own_member(ehr: object, name: str) -> bool:
    try:
        inspect.getattr_static(ehr, name)  # never calls __getattr__
    except AttributeError:
        return False
    return True


def test_every_member_of_the_protocol_is_the_handles_own(ehrsql_db: Path) -> None:
    members = declared(Database)
    # from Database itself, from linking's VocabularyDatabase and from safety's Tables
    assert {"time_model", "knowledge", "lookup_columns", "vocabulary", "count", "sql", "columns"} <= members
    with ehr_magic.connect(ehrsql_db) as ehr:
        assert not own_member(ehr, "concepts")  # an OMOP helper, only ever reached through __getattr__
        assert sorted(name for name in members if not own_member(ehr, name)) == []
