"""Giving a question's values to a template's slots, and the words left around them.

A template's *signature* is the sorted types of its slots plus its fixed values.
``assignments(signature, detected)`` lists the ways the question's values can fill
it: one distinct value of the right type per slot, the fixed values present, and
every id, number and time of the question used by a slot or a fixed value (a
question that says more than the cell's code uses must not reuse it).
``order_values`` then hands values of the same type to the slots whose surrounding
words they share.
"""

from __future__ import annotations

import itertools

from ehr_magic.text import normalise
from ehr_magic.reuse.template import Template, value_context
from ehr_magic.reuse.values import Detected, Token, Value

MAX_ASSIGNMENTS = 64  # per signature; more means the question is too ambiguous to reuse

Assignment = tuple[list[Value], list[Value]]  # (a value per slot type, the fixed values)


def assignments(signature: tuple, detected: Detected) -> list[Assignment]:
    """Ways to give each slot type of ``signature`` a distinct question value, with the
    fixed values present and every id/number/time of the question used."""
    slot_types, fixed_keys = signature
    fixed: list[Value] = []
    for meaning in fixed_keys:  # a fixed time is found by its window: "since 2100" is "this year" here
        match = next((v for v in detected.values if v.meaning == meaning
                      and not any(v.overlaps(f) for f in fixed)), None)
        if match is None:
            return []
        fixed.append(match)
    options: list[list[Value]] = []
    for value_type in slot_types:
        choices = [v for v in detected.values if v.type == value_type and not any(v.overlaps(f) for f in fixed)]
        if not choices:
            return []
        options.append(choices)
    hard_spans = _hard_spans(detected)
    same_type = [(i, j) for i, j in itertools.combinations(range(len(slot_types)), 2)
                 if slot_types[i] == slot_types[j]]
    found: list[Assignment] = []
    for combo in itertools.product(*options):
        if len(found) >= MAX_ASSIGNMENTS:
            break
        chosen = list(combo)
        if any(a.overlaps(b) for a, b in itertools.combinations(chosen, 2)):
            continue
        if any(chosen[i].start > chosen[j].start for i, j in same_type):
            continue  # same-type slots take values in question order here; order_values sorts them out
        used = chosen + fixed
        if not all(any(v.overlaps(span) for v in used) for span in hard_spans):
            continue
        found.append((chosen, fixed))
    return _prefer_longest(found)


def _prefer_longest(found: list[Assignment]) -> list[Assignment]:
    """Drop assignments whose vocabulary values lie strictly inside another assignment's
    values at the same places (the longest reading of a name wins)."""
    if len(found) <= 1:
        return found
    kept = []
    for values, fixed in found:
        dominated = any(
            other is not values and all(o.covers(v) for o, v in zip(other, values))
            and any((o.end - o.start) > (v.end - v.start) for o, v in zip(other, values))
            for other, _ in found)
        if not dominated:
            kept.append((values, fixed))
    return kept


def _hard_spans(detected: Detected) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for value in detected.values:
        if value.hard and value.span not in spans:
            spans.append(value.span)
    return spans


def replaced_spans(values: list[Value], fixed: list[Value],
                   tokens: list[Token]) -> list[tuple[list[tuple[int, int]], str]]:
    """Spans to replace by each value's type placeholder (a vocabulary value everywhere it recurs)."""
    out = []
    for value in values:
        spans = [value.span]
        if value.kind == "vocab":
            wanted = normalise(value.text).split()
            n = len(wanted)
            for i in range(len(tokens) - n + 1):
                if [t.text for t in tokens[i:i + n]] == wanted:
                    span = (tokens[i].start, tokens[i + n - 1].end)
                    if span not in spans:
                        spans.append(span)
        out.append((spans, value.type))
    out += [([v.span], v.type) for v in fixed]
    return out


def unused_vocabulary(detected: Detected, values: list[Value], fixed: list[Value]) -> list[Value]:
    """Longest vocabulary values of the question that no slot takes."""
    used = values + fixed
    free = [v for v in detected.vocab if not any(v.overlaps(u) for u in used)]
    return [v for v in free if not any(o is not v and o.covers(v) and (o.end - o.start) > (v.end - v.start)
                                       for o in free)]


def order_values(template: Template, values: list[Value], tokens: list[Token]) -> list[Value] | None:
    """The question's values in the template's slot order. Values of one type go to the
    slots whose surrounding words they share ("top *three*" vs "*60* or above"); when
    the words cannot tell two orders apart and the orders give different values, None."""
    pool: dict[str, list[Value]] = {}
    for value in sorted(values, key=lambda v: v.start):
        pool.setdefault(value.type, []).append(value)
    out: dict[int, Value] = {}  # slot index -> its value; every slot gets one (a type's bucket fills all its slots)
    by_type: dict[str, list[int]] = {}
    for i in sorted(range(len(template.slots)), key=lambda i: template.slots[i].spans[0]):
        by_type.setdefault(template.slots[i].type, []).append(i)
    for value_type, slot_ids in by_type.items():
        bucket = pool.get(value_type, [])
        if len(bucket) != len(slot_ids):
            return None
        if len(slot_ids) == 1:
            out[slot_ids[0]] = bucket[0]
            continue
        contexts = [value_context(tokens, v.span) for v in bucket]
        scored = []
        for perm in itertools.permutations(range(len(bucket))):
            agreement = 0
            for slot_id, j in zip(slot_ids, perm):
                before, after = template.slots[slot_id].context
                agreement += len(before & contexts[j][0]) + len(after & contexts[j][1])
            scored.append((agreement, perm))
        best = max(agreement for agreement, _ in scored)
        tied = [perm for agreement, perm in scored if agreement == best]
        if len({tuple(bucket[j].key for j in perm) for perm in tied}) > 1:
            return None  # the words around the values do not say which is which
        for slot_id, j in zip(slot_ids, tied[0]):
            out[slot_id] = bucket[j]
    return [out[slot_id] for slot_id in range(len(template.slots))]


def features(stems: tuple[str, ...]) -> frozenset[str]:
    """Words and adjacent word pairs: what the similarity compares."""
    return frozenset(set(stems) | {f"{a} {b}" for a, b in zip(stems, stems[1:])})


def question_words(stems: tuple[str, ...]) -> frozenset[str]:
    """Stemmed words and word pairs of a template text, placeholders left out."""
    words = {w for w in stems if not w.startswith("<")}
    words.update(f"{a} {b}" for a, b in zip(stems, stems[1:]) if not a.startswith("<") and not b.startswith("<"))
    return frozenset(words)
