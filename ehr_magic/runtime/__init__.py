"""ehr_magic.runtime."""
