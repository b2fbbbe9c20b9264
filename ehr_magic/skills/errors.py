"""Errors of the clinical skills."""

from __future__ import annotations

from ehr_magic.errors import EhrMagicError


class SkillError(EhrMagicError):
    """A skill cannot run as asked: unknown skill, bad argument, or a dataset that
    lacks what the skill needs (the message names what is missing and what to do)."""
