"""``Found``: what ``ehr.find`` returns, a polars DataFrame that reads well when printed."""

from __future__ import annotations

from typing import Any

import polars as pl

_SHOWN: dict[str, Any] = {"fmt_str_lengths": 120, "tbl_rows": 50, "tbl_hide_column_data_types": True,
          "tbl_hide_dataframe_shape": True}


class Found(pl.DataFrame):
    """Stored values close to a searched text: ``table, column, value, score``, best first.

    A plain polars DataFrame (filter it, ``.to_dicts()`` it) whose repr shows the values in
    full and says what was searched, rather than cutting long names at 30 characters.
    """

    SCHEMA = {"table": pl.String, "column": pl.String, "value": pl.String, "score": pl.Float64}

    def __init__(self, frame: pl.DataFrame, *, query: str, searched: int) -> None:
        super().__init__(frame)
        self._query = query
        self._searched = searched

    def _title(self) -> str:
        query = getattr(self, "_query", None)
        if query is None:  # a frame polars derived from this one (head, sort...)
            return ""
        where = f"{self._searched} lookup column{'s' if self._searched != 1 else ''}"
        if self.is_empty():
            return f"No stored value close to {query!r} in {where}."
        return f"Stored values close to {query!r} ({self.height} of {where}):\n"

    def __str__(self) -> str:
        if self.is_empty() and getattr(self, "_query", None) is not None:
            return self._title()
        with pl.Config(**_SHOWN):
            return self._title() + pl.DataFrame.__str__(self)

    def __repr__(self) -> str:  # polars' own __repr__ calls __str__
        return self.__str__()

    def _repr_html_(self, **kwargs: Any) -> str:
        if self.is_empty() and getattr(self, "_query", None) is not None:
            return f"<p>{self._title()}</p>"
        with pl.Config(**_SHOWN):
            return super()._repr_html_(**kwargs)


class Lookup(list):
    """What ``ehr.lookup`` returns: the closest stored values (or ``(value, score)`` pairs), best
    first, a plain list that also says whether the text itself is stored.

    ``exact`` is True when ``text`` is stored as it is, up to case, spacing and punctuation
    (score 100); False when only values close to it are ('benazepril' finds 'enalapril': the
    text itself is not stored). Printed, a list that is not exact says so.
    """

    def __init__(self, values: list, *, text: str, table: str, column: str, exact: bool) -> None:
        super().__init__(values)
        self.text, self.table, self.column, self.exact = text, table, column, exact

    def __repr__(self) -> str:
        listed = list.__repr__(self)
        if self.exact:
            return listed
        where = f"{self.table}.{self.column}"
        if not self:
            return f"[] ({self.text!r} is not stored in {where}, nor anything close to it)"
        return f"{listed} ({self.text!r} itself is not stored in {where}; these are the closest stored values)"

    __str__ = __repr__
