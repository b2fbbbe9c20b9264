"""The EHR data layer: connected databases (``EHR``), sources that build them, knowledge."""

from ehr_magic.db.ehr import EHR, connect

__all__ = ["EHR", "connect"]
