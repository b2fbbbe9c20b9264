"""An open database as the layers above the handle see it: the handle's face, not its class.

Knowledge sits below the database handle (``ehr_magic.db``), which reads its files; checking,
storing and viewing knowledge need only this much of a handle, so they never import it. The
executor and reuse, which are passed a handle and hand it on, name it by this protocol too, as
do the agent, skills, schema plug-ins and the session. Value linking, which knowledge imports, names
the part it reads (``ehr_magic.linking.question.VocabularyDatabase``), and this extends it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Protocol

from ehr_magic.knowledge.model import Knowledge
from ehr_magic.linking.question import VocabularyDatabase


class Database(VocabularyDatabase, Protocol):
    """An open database (``ehr_magic.db.EHR`` is one)."""

    schema: str
    dataset: str
    location: str
    path: Path | str
    time_model: str

    @property
    def knowledge(self) -> Knowledge | None: ...

    @property
    def stored_knowledge(self) -> str | None: ...

    @property
    def clock(self) -> Any: ...

    @property
    def now(self) -> dt.datetime: ...

    def empty_tables(self) -> frozenset[str]: ...

    def lookup(self, table: str, column: str, text: str, k: int = 5, *, scores: bool = False) -> list[Any]: ...

    def interrupt(self) -> None: ...
