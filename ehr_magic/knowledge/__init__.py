"""ehr_magic.knowledge."""
