"""Memory reuse without the model: answer a repeated kind of question by adapting a
remembered cell's code to the new question's values.

    from ehr_magic.reuse import Reuser
    reuser = Reuser.from_store(ehr, store)
    result = reuser.answer("What was the last potassium of patient 10010471?")
    result.message   # "reused accepted cell #12 with: potassium <- rdw, 10010471 <- 10004235 (no model call)"

Modules: ``values`` (typed values in questions), ``timeexpr`` (time expressions),
``literals`` (literals of code), ``template`` (a remembered cell as a template),
``assign`` (a question's values given to a template's slots), ``lexicon`` (operator
words), ``evidence`` (question words vs code names, learned from memory),
``attributes`` (words that name columns), ``match`` (matching questions to templates),
``adapt`` (writing new values into code), ``unanswerable`` (reasons to abstain),
``calibrate`` (thresholds from the memory alone), ``reuser`` (all of it). The eval's
``memory`` mode is ``ehr_magic.eval.agent_mode``. See docs/reuse.md.
"""

from __future__ import annotations

from ehr_magic.reuse.adapt import Adaptation, AdaptationError, adapt
from ehr_magic.reuse.match import Candidate, MatchResult, ReuseIndex
from ehr_magic.reuse.reuser import ReuseResult, Reuser
from ehr_magic.reuse.template import Template, analyse
from ehr_magic.reuse.timeexpr import TimeValue, find_times
from ehr_magic.reuse.values import Detected, Value, ValueDetector, VocabularyIndex

__all__ = [
    "Adaptation",
    "AdaptationError",
    "Candidate",
    "Detected",
    "MatchResult",
    "ReuseIndex",
    "ReuseResult",
    "Reuser",
    "Template",
    "TimeValue",
    "Value",
    "ValueDetector",
    "VocabularyIndex",
    "adapt",
    "analyse",
    "find_times",
]
