"""The post-run hook: a marked cell that ran successfully is accepted into memory,
with the code actually run (the analyst's edits included)."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ehr_magic.errors import EhrMagicError
from ehr_magic.session.cells import read_marker

if TYPE_CHECKING:  # pragma: no cover
    from ehr_magic.session import Session


def make_post_run_hook(session: Session) -> Callable[[Any], None]:
    def post_run_cell(result: Any) -> None:
        try:
            info = getattr(result, "info", None)
            cell = getattr(info, "raw_cell", None) or ""
            marked = read_marker(cell)
            if marked is None or not getattr(result, "success", False):
                return
            token, question, code = marked
            if not code.strip():
                return
            if session.ehr is None:
                return
            session.cells.accept(token, question, code)
        except EhrMagicError as exc:
            print(f"ehr-magic: could not store the accepted cell in memory: {exc}")
        except Exception:  # noqa: BLE001 - boundary: a hook must never break the analyst's cell
            print("ehr-magic: could not store the accepted cell in memory, because of a bug in ehr-magic:")
            traceback.print_exc()

    return post_run_cell
