"""Safety and privacy for model-written code: what may run, what it may cost, what the model sees.

* ``check_code(code) -> GuardReport``: the static code guard (``guard``), with SQL
  classification (``sql``) and static string evaluation (``strings``).
* ``limits``: row cap, engine settings, ``MemoryWatch`` and output caps for automatic runs.
* ``privacy``: the levels ``schema`` / ``aggregates`` / ``full`` and the masking of what
  goes back to the model.
* ``audit_check``: finding patient identifiers and dates in logged model requests.

None of this is a sandbox; see docs/safety.md for what is guarded and what is not.
"""

from ehr_magic.safety.guard import ALLOWED_MODULES, GuardReport, Violation, check_code
from ehr_magic.safety.limits import CappedText, MemoryWatch, ResultTooLargeError, fetch, row_cap
from ehr_magic.safety.privacy import (
    LEVELS,
    check_level,
    default_level,
    describe_answer,
    filter_hints,
    is_dictionary_column,
    mask_error,
    mask_feedback,
    mask_stdout,
)
from ehr_magic.safety.sql import BlockedSQLError, check_sql, ensure_read_only

__all__ = [
    "ALLOWED_MODULES", "LEVELS", "BlockedSQLError", "CappedText", "GuardReport", "MemoryWatch", "ResultTooLargeError",
    "Violation", "check_code", "check_level", "check_sql", "default_level", "describe_answer", "ensure_read_only",
    "fetch", "filter_hints", "is_dictionary_column", "mask_error", "mask_feedback", "mask_stdout", "row_cap",
]
