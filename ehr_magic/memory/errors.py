"""Errors of the memory store (user-fixable problems, see ``ehr_magic.errors``)."""

from __future__ import annotations

from ehr_magic.errors import EhrMagicError


class MemoryStoreError(EhrMagicError):
    """The memory store file cannot be used, or a request to it is invalid."""


class EntryNotFoundError(MemoryStoreError):
    """No memory entry has the requested id."""


class JsonlFormatError(MemoryStoreError):
    """A line of a memory JSONL file is not a valid entry."""
