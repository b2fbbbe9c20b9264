"""ehr_magic.linking."""
