"""ehr-magic: a notebook-native assistant for electronic health record analysis."""

from __future__ import annotations

__version__ = "0.1.0"

from ehr_magic.data import EHR, connect  # noqa: E402

__all__ = ["EHR", "connect", "__version__"]
