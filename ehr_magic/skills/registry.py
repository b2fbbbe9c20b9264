"""The catalog: built-in skills register here with their card; user skills are read
from their store. ``search`` ranks cards for a text with rapidfuzz."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz

from ehr_magic.skills.cards import Card
from ehr_magic.skills.errors import SkillError
from ehr_magic.text import FUNCTION_WORDS, closest, split_words


@dataclass(frozen=True)
class Skill:
    card: Card
    fn: Callable[..., Any]


_BUILTIN: dict[str, Skill] = {}


def register(card: Card) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator of a built-in skill or calculator: ``@register(Card(name=..., ...))``."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if card.name in _BUILTIN:
            raise ValueError(f"skill {card.name} registered twice")
        full = card.evolve(signature=card.signature or signature_text(fn))
        if full.kind == "calculator":  # plain values in, so no dataset to support
            full = full.evolve(schemas=())
        _BUILTIN[card.name] = Skill(full, fn)
        fn.card = full  # type: ignore[attr-defined]
        return fn

    return wrap


def signature_text(fn: Callable[..., Any]) -> str:
    """``(ehr, *, stay_ids=None, ...)``: parameter names and defaults, without annotations."""
    parts: list[str] = []
    star = False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        else:
            if p.kind is p.KEYWORD_ONLY and not star:
                parts.append("*")
                star = True
            parts.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return "(" + ", ".join(parts) + ")"


def builtin() -> dict[str, Skill]:
    _load_builtins()
    return dict(_BUILTIN)


_LOADING = threading.RLock()
_LOADED = threading.Event()


def _load_builtins() -> None:
    if _LOADED.is_set():
        return
    with _LOADING:  # generated code may run in several threads; nobody sees a half-filled catalog
        import ehr_magic.skills.calculator_cards  # registers the calculators
        import ehr_magic.skills.scores  # noqa: F401  (registers the EHR skills)

        _LOADED.set()


# -- search ------------------------------------------------------------------------------

# Words of a request that name no skill: English function words, and what every request says.
_STOP = FUNCTION_WORDS | {"patient", "patients", "value", "score", "many", "per", "calculate", "compute", "get",
                          "show", "list"}


def _terms(card: Card) -> list[tuple[str, float]]:
    """Phrases that name the skill, with a weight."""
    terms = [(" ".join(split_words(card.name)), 1.0), (" ".join(split_words(card.title)), 1.0)]
    terms += [(" ".join(split_words(k)), 1.0) for k in card.keywords]
    return [(t, w) for t, w in terms if t]


def score(card: Card, query: str) -> float:
    """0-100: how well ``card`` fits ``query`` (phrases of the card found in the query, fuzzily)."""
    said = [w for w in split_words(query) if w not in _STOP] or split_words(query)
    if not said:
        return 0.0
    grams = {" ".join(said[i:i + n]) for n in (1, 2, 3, 4) for i in range(len(said) - n + 1)}
    best, hits = 0.0, 0
    for term, weight in _terms(card):
        length = len(term.split())
        candidates = [g for g in grams if abs(len(g.split()) - length) <= 1]
        if not candidates:
            continue
        s = max(fuzz.ratio(term, g) for g in candidates) * weight
        if len(term) <= 3 and s < 100:  # short acronyms must match exactly
            s = 0.0
        if s >= 80:
            hits += 1
        best = max(best, s)
    context = fuzz.token_set_ratio(" ".join(said), " ".join(split_words(card.title + " " + card.purpose)))
    return min(100.0, 0.8 * best + 0.15 * context + 3 * max(0, hits - 1))


# Phrases that say how to summarise a value, not which clinical concept: on their own they
# made every "maximum cost" or "first prescription" question look like a skill's.
_GENERIC = frozenset({"first value", "last value", "lowest", "highest", "maximum", "minimum", "latest lab",
                      "min max", "lab value", "measurement in window", "weight", "height", "temperature",
                      "heart rate", "glucose", "map", "blood pressure", "albumin", "calcium", "sodium", "potassium",
                      "chloride", "creatinine", "hemoglobin", "platelets", "platelet count", "lactate", "ph",
                      "bicarbonate", "bilirubin", "weight height"})


def names_concept(card: Card, query: str) -> bool:
    """Whether ``query`` names what ``card`` computes: one of its phrases, word for word,
    other than a generic one (a summary such as 'maximum', or a bare measurement name)."""
    text = f" {' '.join(split_words(query))} "
    for term, _ in _terms(card):
        if term not in _GENERIC and f" {term} " in text:
            return True
    return False


def rank(cards: list[Card], query: str, k: int) -> list[tuple[Card, float]]:
    scored = [(c, score(c, query)) for c in cards]
    scored.sort(key=lambda pair: (-pair[1], pair[0].kind != "ehr", pair[0].name))
    return scored[: max(0, k)]


def unknown(name: str, names: list[str]) -> SkillError:
    close = closest(name, names)
    hint = f" Did you mean {close!r}?" if close else ""
    return SkillError(f"No skill named {name!r}.{hint} See ehr_magic.skills.catalog() or skills.search('...').")
