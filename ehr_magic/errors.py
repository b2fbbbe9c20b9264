"""The small error hierarchy of ehr_magic.

Front ends (CLI, magic, side panel) turn ``EhrMagicError`` into a one-line message
without a traceback; anything else is our bug and keeps its traceback.
"""

from __future__ import annotations


class EhrMagicError(Exception):
    """A problem the user can fix; its message says what to do."""


class DataSourceError(EhrMagicError):
    """An input (directory, file, download) cannot be read or is incomplete."""


class DatabaseError(EhrMagicError):
    """A database file cannot be opened, or a query against it failed."""


class ReadOnlyError(DatabaseError):
    """Generated or user code tried to write through the analysis connection."""


class ConfigError(EhrMagicError):
    """A setting is missing or invalid."""


def sentences(cause: object) -> str:
    """A cause (an exception or its text, maybe several lines, as a server or library
    words it) as sentences to follow a colon: each line ends with a full stop and the
    lines are joined by spaces. The words are kept as they are (``finish_reason`` stays)."""
    lines = []
    for line in str(cause).splitlines():
        line = line.strip()
        if line:
            lines.append(line + ("" if line[-1] in ".!?" else "."))
    return " ".join(lines) or f"{type(cause).__name__}."
