"""What the safety checks need of an open database: its tables, their columns, and SQL.

Safety sits below the database handle (``ehr_magic.db``), so it names the handle's face,
not its class. ``ehr_magic.knowledge.handle.Database`` extends it with what the layers
above need; ``ehr_magic.db.EHR`` is both.
"""

from __future__ import annotations

from typing import Any, Protocol

import polars as pl


class Tables(Protocol):
    """An open database as the privacy and audit checks see it."""

    def tables(self) -> list[str]: ...

    def columns(self, table: str) -> dict[str, str]: ...

    def sql(self, query: str, params: list[Any] | dict[str, Any] | None = None) -> pl.DataFrame: ...
