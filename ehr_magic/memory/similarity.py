"""How questions are compared: the two methods (the masking itself is ``ehr_magic.text``'s).

``default``
    The question is lower-cased, quoted strings, dates, times, numbers and the number
    words one..twelve are replaced by placeholders (``val``, ``date``, ``time``,
    ``num``), punctuation is dropped and the tokens are sorted. The similarity (0..100)
    is the mean of two rapidfuzz ``fuzz.ratio`` scores on the sorted tokens: one on
    the token sequences (each token one symbol: the Dice overlap of the token
    multisets) and one on the joined text (``token_sort_ratio`` of the masked text,
    so near-identical spellings still count). ``default_similarity`` is the reference
    implementation; ``TokenIndex`` computes the same numbers for a whole store.
``levenshtein``
    EHRAgent's measure: the negative Levenshtein distance between the raw questions.

Both are measured on EHRSQL-2024 in ``bench/bench_memory.py`` (see ``docs/memory.md``).
Nothing here knows a benchmark's templates: the patterns are generic value shapes.
"""

from __future__ import annotations

from typing import Literal

from rapidfuzz import fuzz

from ehr_magic.text import masked_tokens

Method = Literal["default", "levenshtein"]
METHODS: tuple[str, ...] = ("default", "levenshtein")


def mask_values(text: str) -> str:
    """``masked_tokens`` (``ehr_magic.text``) joined by spaces."""
    return " ".join(masked_tokens(text))


def default_tokens(question: str) -> list[str]:
    """The tokens the ``default`` method compares: masked, sorted."""
    tokens = masked_tokens(question)
    tokens.sort()
    return tokens


def default_form(question: str) -> str:
    """The masked, sorted tokens joined by spaces (one form per set of equal questions)."""
    return " ".join(default_tokens(question))


def default_similarity(a: str, b: str) -> float:
    """The ``default`` similarity of two questions, 0..100 (reference implementation)."""
    ta, tb = default_tokens(a), default_tokens(b)
    return (fuzz.ratio(ta, tb) + fuzz.ratio(" ".join(ta), " ".join(tb))) / 2


def check_method(method: str) -> None:
    """Raise ``MemoryStoreError`` unless ``method`` is a known retrieval method."""
    if method not in METHODS:
        from ehr_magic.memory.errors import MemoryStoreError

        raise MemoryStoreError(
            f"Unknown retrieval method {method!r}; use one of: {', '.join(METHODS)}."
        )
