"""An open database as the layers above the handle see it: the handle's face, not its class.

Knowledge sits below the database handle (``ehr_magic.db``), which reads its files; checking,
storing and viewing knowledge need only this much of a handle, so they never import it. The
executor and reuse, which are passed a handle and hand it on, name it by this protocol too.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Protocol

from ehr_magic.knowledge.model import Knowledge
from ehr_magic.safety.tables import Tables


class Database(Tables, Protocol):
    """An open database (``ehr_magic.db.EHR`` is one)."""

    schema: str
    dataset: str
    location: str
    path: Path | str

    @property
    def knowledge(self) -> Knowledge | None: ...

    @property
    def stored_knowledge(self) -> str | None: ...

    @property
    def clock(self) -> Any: ...

    @property
    def now(self) -> dt.datetime: ...

    def count(self, table: str) -> int: ...

    def lookup(self, table: str, column: str, text: str, k: int = 5, *, scores: bool = False) -> list[Any]: ...

    def interrupt(self) -> None: ...
