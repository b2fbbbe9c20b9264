"""The built-in EHR skills; importing this package registers them."""

from ehr_magic.skills.scores import (  # noqa: F401
    cardiac, comorbidity, kdigo, labs, pneumonia, renal, sepsis, sofa, vitals,
)
