"""The post-run hook: a marked cell that ran successfully is accepted into memory,
with the code actually run (the analyst's edits included)."""

from __future__ import annotations

from typing import Any

from ehr_magic.session.cells import read_marker


def make_post_run_hook(session: Any):
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
        except Exception as exc:  # noqa: BLE001 - a hook must never break the analyst's cell
            print(f"ehr-magic: could not store the accepted cell in memory: {exc}")

    return post_run_cell
