"""Kept importable for code written before ``ehr_magic.session``: ``Assistant`` is the
``Session`` (the one answering path)."""

from ehr_magic.session import Answer, Session

Assistant = Session

__all__ = ["Answer", "Assistant", "Session"]
