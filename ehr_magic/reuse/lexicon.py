"""English words that change what a question asks, and a crude stemmer.

Two questions can share almost every word and still need different code:
"the *minimum* heart rate" and "the *maximum* heart rate", "the *first* time" and
"the *last* time", "*greater* than" and "*less* than", "*daily*" and "*monthly*".
``operators(words)`` maps such words to a canonical operator (synonyms together:
highest/maximum/max -> ``max``), and reuse only adapts a cell whose question has
the same operators as the new one. This is general English, not any benchmark's.

``stem(word)`` drops a plural s and keeps the first six letters, which is enough to match
diagnosis/diagnoses/diagnosed or prescribed/prescription when comparing wordings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

OPERATORS: dict[str, str] = {}
for _canonical, _words in {
    "max": "maximum max highest largest greatest biggest peak",
    "min": "minimum min lowest smallest fewest",
    "avg": "average mean avg",
    "sum": "total sum cumulative",
    "first": "first earliest initial initially",
    "last": "last latest final finally lastly recent recently",
    "second": "second 2nd",
    "greater": "greater higher larger bigger exceeding above",
    "less": "less lower smaller below fewer",
    "daily": "daily",
    "weekly": "weekly",
    "monthly": "monthly",
    "yearly": "yearly annual annually",
    "current": "current currently ongoing present",
    # units left in a question once its time expressions are taken out: the unit of the answer
    "unit:minute": "minute minutes",
    "unit:hour": "hour hours hourly",
    "unit:day": "day days",
    "unit:week": "week weeks",
    "unit:month": "month months",
    "unit:year": "year years",
}.items():
    for _word in _words.split():
        OPERATORS[_word] = _canonical

# Words of which a question has at most one, and two questions with different ones ask
# different things ("how *much*" is an amount, "how *many*" a count).
CONTRASTS: tuple[frozenset[str], ...] = (frozenset({"much", "many"}),)


def contradicts(a: Sequence[str], b: Sequence[str]) -> bool:
    """True when the two word sequences use different words of one contrast group."""
    for group in CONTRASTS:
        left, right = group.intersection(a), group.intersection(b)
        if left and right and left != right:
            return True
    return False


# Words that stop the next word from being an operator ("at least", "the least").
_NOT_AFTER = {"least": {"at"}}


def operators(words: Sequence[str]) -> Counter[str]:
    """Canonical operators among ``words`` (lower-case tokens), with counts."""
    found: Counter[str] = Counter()
    previous = ""
    for word in words:
        if word in _NOT_AFTER and previous in _NOT_AFTER[word]:
            previous = word
            continue
        canonical = OPERATORS.get(word)
        if canonical is not None:
            found[canonical] += 1
        previous = word
    if "least" in words:  # "least" alone (not "at least") is a minimum
        found["min"] += sum(1 for a, b in zip(("",) + tuple(words), words) if b == "least" and a != "at")
    return found


def stem(word: str) -> str:
    """A plural ``s`` dropped, then the first six letters; placeholders (``<...>``) unchanged."""
    if word.startswith("<"):
        return word
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word[:6]
