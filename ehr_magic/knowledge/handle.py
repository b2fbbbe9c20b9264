"""What the knowledge layer needs of an open database: the handle's face, not its class.

Knowledge sits below the database handle (``ehr_magic.db``), which reads its files; checking,
storing and viewing knowledge need only this much of a handle, so they never import it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from ehr_magic.knowledge.model import Knowledge


class Database(Protocol):
    """An open database as knowledge sees it (``ehr_magic.db.EHR`` is one)."""

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

    def tables(self) -> list[str]: ...

    def columns(self, table: str) -> dict[str, str]: ...

    def sql(self, query: str, params: list[Any] | dict[str, Any] | None = None) -> pl.DataFrame: ...
