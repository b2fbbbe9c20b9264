"""The EHR data layer: connected databases (``EHR``), sources that build them, knowledge."""

from ehr_magic.data.ehr import EHR, connect

__all__ = ["EHR", "connect"]
