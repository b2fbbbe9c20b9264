"""English words that change what a question asks, and a stemmer.

Two questions can share almost every word and still need different code:
"the *minimum* heart rate" and "the *maximum* heart rate", "the *first* time" and
"the *last* time", "*greater* than" and "*less* than", "*daily*" and "*monthly*".
``operators(words)`` maps such words to a canonical operator (synonyms together:
highest/maximum/max -> ``max``), and reuse only adapts a cell whose question has
the same operators as the new one. This is general English, not any benchmark's.
Words are compared by ``ehr_magic.text.stem``, the one stemmer of the package.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ehr_magic.text import stem  # noqa: F401  (re-exported: reuse's tests take it from here)

OPERATORS: dict[str, str] = {}
for _canonical, _words in {
    "max": "maximum max highest largest greatest biggest peak",
    "min": "minimum min lowest smallest fewest",
    "avg": "average mean avg",
    "sum": "total sum cumulative",
    "first": "first earliest initial initially",
    "last": "last latest final finally lastly recent recently",
    "second": "second 2nd",
    "greater": "greater higher larger bigger exceeding above more",
    "less": "less lower smaller below fewer",
    "daily": "daily",
    "weekly": "weekly",
    "monthly": "monthly",
    "yearly": "yearly annual annually",
    "current": "current currently ongoing present now",
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
# different things ("how *much*" is an amount, "how *many*" a count; *admitted* and
# *discharged* name different moments of a stay).
CONTRASTS: tuple[frozenset[str], ...] = (frozenset({"much", "many"}), frozenset({"admitted", "discharged"}))

# What a count counts: people, events (rows) or stays. "How many patients were prescribed
# X" and "how many X prescriptions" need different code.
_COUNTING = frozenset({"many", "number", "count", "counts", "counted"})
COUNT_TARGETS: dict[str, str] = {}
for _target, _words in {
    "people": "patient patients people person persons individuals subjects",
    "events": "times time prescriptions prescription orders ordered events records entries tests cases doses",
    "stays": "visits visit admissions hospitalizations hospitalisations stays",
}.items():
    for _word in _words.split():
        COUNT_TARGETS[_word] = _target


def count_target(words: Sequence[str]) -> str:
    """What a counting question counts (``people``, ``events``, ``stays``), "" if it does not count."""
    for position, word in enumerate(words):
        if word in _COUNTING:
            if position and words[position - 1] in COUNT_TARGETS:  # "the patient count for <drug> prescriptions"
                return COUNT_TARGETS[words[position - 1]]
            # the first countable word after the cue: "number of visits of patient ..." counts visits
            for following in words[position + 1:]:
                if following in COUNT_TARGETS:
                    return COUNT_TARGETS[following]
            return "unspecified"
    return ""


# "How often" and "how frequently" ask for a count, as "how many" does; "how much" for an amount.
_ASKED_QUANTITY = {"much": "amount", "many": "count", "often": "count", "frequently": "count"}


def asked_quantity(words: Sequence[str]) -> str:
    """``amount`` or ``count`` for a "how much" / "how many" (often, frequently) question, else ""."""
    for previous, word in zip(words, words[1:]):
        if previous == "how" and word in _ASKED_QUANTITY:
            return _ASKED_QUANTITY[word]
    return ""


def contradicts(a: Sequence[str], b: Sequence[str]) -> bool:
    """True when the two word sequences use different words of one contrast group, ask
    for different quantities (how much / how often), or count different things."""
    for group in CONTRASTS:
        left, right = group.intersection(a), group.intersection(b)
        if left and right and left != right:
            return True
    asked_left, asked_right = asked_quantity(a), asked_quantity(b)
    if asked_left and asked_right and asked_left != asked_right:
        return True
    return count_target(a) != count_target(b)


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


def operator_role_moved(substitutions: Sequence[tuple[str, str]]) -> str:
    """An operator word that a substitution moves into another slot's role ("" if none):
    with ``[("maximum", "total"), ("total", "average")]`` the question's *total* would take
    the place of the cell's *average*, while the cell's *total* becomes a maximum."""
    new = {OPERATORS.get(n.lower()): n for n, _ in substitutions if OPERATORS.get(n.lower())}
    old = {OPERATORS.get(o.lower()): o for _, o in substitutions if OPERATORS.get(o.lower())}
    pairs = {(OPERATORS.get(n.lower()), OPERATORS.get(o.lower())) for n, o in substitutions}
    for canonical, word in new.items():
        if canonical in old and (canonical, canonical) not in pairs:
            return word
    return ""
