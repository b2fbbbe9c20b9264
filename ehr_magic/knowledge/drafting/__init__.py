"""ehr_magic.knowledge.drafting."""
